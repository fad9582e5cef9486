// Copyright ingot authors. Apache-2.0.
//
// Direct channels-last 2-D convolution for few input channels (C <= 4): the stem of nearly every
// CNN (RGB in, 16-96 channels out, 3x3 to 7x7, stride 2 or a 4x4 patchify), with the whole
// epilogue in the same kernel: y = act(conv(x, w) + b [+ r]) [+ r].
//
// Why our own: tensor-core convolutions pad C = 3 to 8 or more and read the input in a layout
// meant for many channels; at batch 64 cuDNN took 0.12 ms for MobileNetV2's and EfficientNet's
// 3x3 stride-2 stem without an epilogue and 1.03-1.10 ms with MobileNetV2's ReLU6 fused (its only
// channels-last plan; session 16's profiles: a third of MobileNetV2's batch-64 time). The layer
// reads ~19 MB and writes ~51 MB (16 us at the H200's bandwidth) for 0.69 G multiply-adds (21 us
// of fp32 FMA): CUDA cores suffice.
//
// The kernel: the block stages all weights as fp32 [kh·kw·C][K] and the bias in shared memory; a
// thread computes kSmallConvPixels consecutive output pixels along x for 8 consecutive output
// channels (one 16-byte pack of fp16/bf16, two of fp32), so each weight read from shared memory
// serves kSmallConvPixels multiply-adds; threads of one pixel group differ in their channel pack,
// so a warp's stores are whole 64+-byte runs of y. Accumulation in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

struct SmallConvDesc {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input dims (x [N, H, W, C])
  int64_t oh = 0, ow = 0, k = 0;       // output dims (y [N, OH, OW, K]); w [K, kh, kw, C]
  int kh = 0, kw = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  UnaryOp act = UnaryOp::kIdentity;  // kIdentity: none
  UnaryParams act_params;            // alpha/beta (LeakyRelu, HardSigmoid), lo/hi (Clip)
  bool residual_after_activation = false;
};

/// The most input channels and the largest kernel side the kernel takes, and its output channel
/// multiple (K % kSmallConvKMultiple == 0).
constexpr int kSmallConvMaxC = 4;
constexpr int kSmallConvMaxKernel = 8;
constexpr int kSmallConvKMultiple = 8;
/// Shared memory for the weights and bias (fp32): at most this much.
constexpr int64_t kSmallConvMaxSmemBytes = 96 * 1024;

/// Shared-memory bytes a block stages for this layer.
int64_t small_conv_smem_bytes(const SmallConvDesc& d);

/// Whether the kernel runs this layer (channel and kernel limits, smem, int32 index range).
bool small_conv_supported(const SmallConvDesc& d);

/// x, r, y channels-last; w [K, kh, kw, C]; bias [K] or null; r (y's shape) or null. `sm_count`
/// sizes the grid (0: a default).
cudaError_t launch_small_channel_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r,
                                      void* y, const SmallConvDesc& d, int sm_count, cudaStream_t stream);

}  // namespace ingot::backend::cuda
