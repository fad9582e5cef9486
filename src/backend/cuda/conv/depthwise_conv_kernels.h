// Copyright ingot authors. Apache-2.0.
//
// Depthwise 2-D convolution (one filter per channel: group == channels, one input channel per
// group) with its whole epilogue in the same kernel: y = act(conv(x, w) + b [+ r]) [+ r], act any
// of FusedConv's activations. MobileNet, EfficientNet, MNASNet, ShuffleNet and ConvNeXt spend much
// of their time here, and cuDNN's kernels for it were the largest steps of MobileNetV3-L at batch 64
// (bench/RESULTS.md, session 9); they also lack HardSwish/HardSigmoid epilogues, which cost a split.
//
// The convolution is memory bound (kh·kw multiply-adds per element read), so the kernels aim at
// one coalesced read of x per tap and one write of y:
//  - channels-last (x, r, y [N, H, W, C]): a thread computes V consecutive channels of one output
//    pixel (V = 16, 8 or 4 bytes of the type when C and the pointers allow, else 1; 3x3, 5x5 and
//    7x7 kernels with their taps unrolled, so a row's loads are in flight together); a block owns a tile of
//    up to 32 such packs, stages that tile's weights and bias in shared memory as [kh·kw][tile]
//    (read coalesced), and walks the pixels grid-stride (session 10: staging all C channels per
//    block with 64-bit index math made [1,7,7,1152] 5x5 take 45 us against cuDNN's 5 us);
//  - channels-last, strip (DepthwiseConvDesc::strip): a thread computes 4 outputs along x in 4-byte
//    channel packs, loading each kernel row's shared input pixels and weights once (session 15:
//    ConvNeXt's 7x7 1.5-1.9x, EfficientNet's 5x5 1.2x over the one-pixel kernel, which keeps
//    MobileNet's stride-2 3x3); the builder times it with the one-pixel and tiled kernels and cuDNN's;
//  - channels-last, tiled (DepthwiseConvDesc::tiled; the strip kernel's windows): a block stages
//    an 8 x 16 output tile's input window for 32 fp16 (16 fp32) channels in shared memory, read
//    from global memory once in 16- or 4-byte loads, and its threads compute strips of 4 outputs
//    from there (session 20: the one-pixel kernel rereads every tap through L1/L2 and stayed at
//    2-5x of the memory bound on MobileNetV2's 3x3 layers);
//  - channels-first ([N, C, H, W]): a thread per output element, the row fastest; weights read
//    through the read-only cache.
// Weights are [C, kh, kw] in memory either way (KRSC with one channel per group, or KCRS).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

struct DepthwiseConvDesc {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input dims
  int64_t oh = 0, ow = 0;              // output dims
  int kh = 0, kw = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  bool channels_last = true;
  UnaryOp act = UnaryOp::kIdentity;  // kIdentity: none
  UnaryParams act_params;            // alpha/beta (LeakyRelu, HardSigmoid), lo/hi (Clip)
  bool residual_after_activation = false;
  /// 1: a thread per output pixel (depthwise_nhwc); kDepthwiseStrip: a strip of that many outputs
  /// along x per thread in 4-byte channel packs (depthwise_nhwc_strip; channels-last 3x3/5x5/7x7,
  /// equal strides 1 or 2, no dilation: depthwise_strip_supported). The tactic offers it beside the
  /// one-pixel and tiled kernels and the builder times them.
  int strip = 1;
  /// The tiled kernel (depthwise_nhwc_tiled; strip 1, the strip kernel's windows): a block's input
  /// window staged in shared memory once, each thread a strip of kDepthwiseStrip outputs from it.
  bool tiled = false;
};

/// Outputs per thread of the strip kernel.
constexpr int kDepthwiseStrip = 4;

/// Whether the strip kernel runs this shape (else launch_depthwise_conv refuses strip > 1).
bool depthwise_strip_supported(const DepthwiseConvDesc& d);
/// Whether the tiled kernel runs this shape (else launch_depthwise_conv refuses tiled).
bool depthwise_tiled_supported(const DepthwiseConvDesc& d);

/// Bytes of shared memory a channels-last block stages (weights and bias of its channel tile).
int64_t depthwise_conv_smem_bytes(FloatType t, const DepthwiseConvDesc& d);
/// The most depthwise_conv_smem_bytes may be (the tactic refuses larger layers).
constexpr int64_t kDepthwiseMaxSmemBytes = 160 * 1024;

/// x, r, y in the desc's layout; w [C, kh, kw]; bias [C] or null; r (the residual, y's shape) or
/// null. `sm_count` sizes the grid (0: a default).
cudaError_t launch_depthwise_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                                  const DepthwiseConvDesc& d, int sm_count, cudaStream_t stream);

}  // namespace ingot::backend::cuda
