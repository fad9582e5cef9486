// Copyright ingot authors. Apache-2.0.
//
// 1x1 convolution of a one-pixel input: y[n, k] = epilogue(sum_c x[n, c] * w[k, c] + b[k], r[n, k]),
// a GEMV (N rows) with the whole FusedConv epilogue: y = act(conv(x, w) + b [+ r]) [+ r].
//
// Why our own: the two FCs of a squeeze-excite block (EfficientNet, MobileNetV3, RegNetY) are 1x1
// convs on the pooled [N, C, 1, 1] tensor, e.g. [1, 1152] x [1152, 48] then [1, 48] x [48, 1152].
// cuDNN takes 5-9 us for each; the work is a few hundred KB of weights, read once.
//
// The kernel: a group of G lanes (4-32, so that G 16-byte packs span about one row of W) computes
// one output channel k for a block of up to NB samples: each lane walks the row in packs, reads a
// weight pack once and multiply-adds it against the same channels of every sample in the block,
// the group sums its lanes with shuffles, and lane j of the group finishes sample j (bias,
// activation, residual). Channel counts that are not whole packs, or unaligned operands, take
// one element per load. Accumulation in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

struct PixelConvDesc {
  int64_t n = 0;                     // samples: x [N, C], y and r [N, K]
  int64_t c = 0;                     // input channels: w [K, C]
  int64_t k = 0;                     // output channels
  UnaryOp act = UnaryOp::kIdentity;  // kIdentity: none
  UnaryParams act_params;            // alpha/beta (LeakyRelu, HardSigmoid), lo/hi (Clip)
  bool residual_after_activation = false;
};

/// Whether the kernel runs this layer: c, k >= 1, n >= 0, and x, w, y within its 32-bit index
/// range (n * c and k * c below 2^31, n * k below 2^30).
bool pixel_conv_supported(const PixelConvDesc& d);

/// x [N, C], w [K, C] (a 1x1 kernel's [K, C, 1, 1] or [K, 1, 1, C]: the same bytes), bias [K] or
/// null, r [N, K] or null, y [N, K]; all contiguous, of type t. cudaErrorInvalidValue when
/// !pixel_conv_supported(d); nothing is launched for N = 0.
cudaError_t launch_pixel_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                              const PixelConvDesc& d, cudaStream_t stream);

}  // namespace ingot::backend::cuda
