// Copyright ingot authors. Apache-2.0.
//
// Grouped 2-D convolution with narrow groups (2-64 channels in and out of each group, as in RegNet
// and ResNeXt), channels-last, with its whole epilogue in the same kernel: y = act(conv(x, w) + b
// [+ r]) [+ r], act any of FusedConv's activations.
//
// Why our own: RegNetY-1.6GF's grouped 3x3 convs (group width 24 over 48-888 channels) took ~55 us
// each at batch 1 in every cuDNN engine whatever their size, which left the model slower than
// torch.compile at batch 1 and 64.
//
// The convolution is compute bound on CUDA cores: g·kh·kw multiply-adds per output against one
// element of x read (from L2/L1, kh·kw times) and one of y written. RegNet's [64,56,56,48] g24 3x3
// is 2.08 G multiply-adds (62 us at the H200's ~33.5 T fp32 FMA/s) for 39 MB of x and y in fp16
// (8 us at 4.8 TB/s). So the kernel aims at issuing FMAs:
//  - a block owns one group (or a tile of its output channels, when the weights would not fit
//    48 KB) and stages that tile's weights once in shared memory as fp32 [kh·kw][g_in][co_tile]
//    (co_tile a multiple of M, zero-padded past the group's width) with its bias, then walks output
//    pixels grid-stride;
//  - a thread computes M output channels (GroupedConvDesc::outputs_per_thread, 8 or 4) of P output
//    pixels along x (P = 4, 2 or 1, chosen by the launcher from the work: 4 when the layer has
//    enough of it to fill the GPU, else fewer so that batch-1 layers still use every SM). Per tap
//    and input channel it reads M weights as float4 loads that the whole warp shares (every lane of
//    a warp computes the same M channels: a broadcast, one shared-memory wavefront), and its P
//    pixels' input channel as V-element packs (16, 8 or 4 bytes when g and the pointers allow, else
//    one element) read once per V channels: P·M FMAs per M/4 shared loads, e.g. 32 FMAs against 2
//    LDS.128 and a quarter of a 16-byte global load at M = 8, P = 4 in fp16.
// Accumulation is fp32; x, w, b, r and y share one type (fp32, fp16 or bf16).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

/// Output channels per thread: the tactic offers both, and the builder times them.
constexpr int kGroupedConvWideOutputs = 8;
constexpr int kGroupedConvNarrowOutputs = 4;
/// The group widths (channels in = channels out per group) and kernel sides the kernel takes.
constexpr int64_t kGroupedConvMinWidth = 2;
constexpr int64_t kGroupedConvMaxWidth = 64;
constexpr int kGroupedConvMaxKernel = 7;

struct GroupedConvDesc {
  int64_t n = 0, h = 0, w = 0, c = 0;                    // input dims (x [N, H, W, C])
  int64_t oh = 0, ow = 0;                                // output dims (y [N, OH, OW, C]: C_out = C_in)
  int64_t group = 1;                                     // groups; each has g = c / group channels in and out
  int kh = 0, kw = 0;                                    // w [C, kh, kw, g] (KRSC)
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;  // symmetric pads; no dilation
  UnaryOp act = UnaryOp::kIdentity;                      // kIdentity: none
  UnaryParams act_params;                                // alpha/beta (LeakyRelu, HardSigmoid), lo/hi (Clip)
  bool residual_after_activation = false;
  int outputs_per_thread = kGroupedConvWideOutputs;  // M: kGroupedConvWideOutputs or kGroupedConvNarrowOutputs
};

/// Whether launch_grouped_conv runs this layer: group >= 2 with a width g = c / group in
/// [kGroupedConvMinWidth, kGroupedConvMaxWidth], kernel sides 1..kGroupedConvMaxKernel, positive
/// strides, pads >= 0, M 4 or 8, and dims inside the kernel's 32-bit pixel index math.
bool grouped_conv_supported(const GroupedConvDesc& d);

/// Bytes of shared memory a block stages for the smallest tile (M output channels of one group:
/// fp32 weights and bias); at most (7·7·64·8 + 8)·4 = 98 KB for any supported layer.
int64_t grouped_conv_min_smem_bytes(const GroupedConvDesc& d);

/// x, r, y [N, H|OH, W|OW, C]; w [C, kh, kw, C / group]; bias [C] or null; r (y's shape) or null.
/// `sm_count` sizes the grid (0: a default). cudaErrorInvalidValue when !grouped_conv_supported(d).
cudaError_t launch_grouped_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                                const GroupedConvDesc& d, int sm_count, cudaStream_t stream);

}  // namespace ingot::backend::cuda
