// Copyright ingot authors. Apache-2.0.
//
// The CNN stem with its max pooling in one kernel: y = MaxPool(act(Conv(x, w) + b)), channels-last,
// as ResNet's 7x7 stride-2 convolution of an RGB image to 64 channels followed by a 3x3 stride-2
// max pool (ResNet, ResNeXt, Wide ResNet, DenseNet, FCN/DeepLab on ResNet, GoogLeNet): the
// ingot::FusedConvPool that fuse_conv_pool forms; and the same kernel without the pool for the
// 3x3 stride-2 stems of the mobile CNNs (an ingot::FusedConv), on the tensor cores where the
// small-channel kernel (small_channel_conv_kernels.h) uses CUDA cores.
//
// Why: unfused at batch 64 on the H100 (session 40's profile of ResNet-50) the convolution took
// 163 us (cuDNN's plan pads C = 3 for its tensor cores) and wrote a 103 MB [64, 112, 112, 64] fp16
// tensor that the max pool read back (61 us) to write a quarter of it. Here the conv output stays
// in shared memory: the kernel reads ~19 MB and writes ~26 MB.
//
// The kernel: a block per 8x8 tile of pooled outputs (16x16 without a pool) and image, all channels;
// two blocks an SM loop over the tiles, staging the weights once. It computes the
// 17x17 conv outputs the tile's windows cover (the one-row halo is recomputed by the neighbour,
// 13% more work) as an implicit GEMM on the tensor cores (mma.sync m16n8k16, fp32 accumulation):
// M = the 289 conv pixels, N = 64, K = the 7 kernel rows x 21 (kw, c) values, each row split into
// 8-value segments (3 of them, the last one masked past its 5 values: K = 176 for 147 taps). The
// input patch (39 x 39 pixels) is staged in shared memory with zeros for the padding, so a k-pair
// of an A fragment is one 32-bit load at (pixel offset + segment offset + 2·lane%4). Each warp
// keeps its 32 channels' B fragments for all of K in registers. The epilogue (bias, activation)
// writes the conv tile to shared memory rounded to T (as the unfused conv's output was), with -inf
// where a conv position lies outside the conv output (the pool's padding); the pool then reads it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

struct StemPoolDesc {
  int64_t n = 0, h = 0, w = 0, c = 0;  // x [N, H, W, C]
  int64_t oh = 0, ow = 0;              // the convolution's output dims (never stored)
  int64_t ph = 0, pw = 0, k = 0;       // y [N, PH, PW, K]; w [K, kh, kw, C]
  int kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int pool_kh = 0, pool_kw = 0, pool_stride_h = 1, pool_stride_w = 1, pool_pad_h = 0, pool_pad_w = 0;
  UnaryOp act = UnaryOp::kIdentity;  // kIdentity: none
  UnaryParams act_params;
  bool residual_after_activation = false;  // there is no residual; conv_util::epilogue_n reads the field
};

/// The compiled forms (C 3 input channels, stride-2 convs, fp16 / bf16, any symmetric pads below
/// the kernel sizes, any FusedConv activation): 7x7 -> 64 with a 3x3 stride-2 max pool (ResNet,
/// ResNeXt, DenseNet, FCN); 3x3 -> 24 and 3x3 -> 64 with that pool (ShuffleNetV2, SqueezeNet 1.1);
/// and without a pool (pool 1x1 stride 1, the FusedConv tactic's case) 3x3 -> 16, 24 or 32
/// (MobileNetV2/V3, EfficientNet/V2, MnasNet, RegNet).
/// Whether the kernel runs this layer (a compiled form; dims whose index math fits int32 where it
/// uses it). Dims left at 0 are not checked.
bool stem_pool_supported(const StemPoolDesc& d);

/// x, y channels-last; w [K, kh, kw, C]; bias [K] or null. `t` must be fp16 or bf16. `sm_count` sizes
/// the grid (two blocks an SM, each looping over tiles; 0: a default).
cudaError_t launch_stem_pool_conv(FloatType t, const void* x, const void* w, const void* bias, void* y,
                                  const StemPoolDesc& d, int sm_count, cudaStream_t stream);

}  // namespace ingot::backend::cuda
