// Copyright ingot authors. Apache-2.0.
//
// Launchers for the pooling family's device code (pool_kernels.cu): windowed MaxPool and
// AveragePool over 1 to 3 spatial dims of an NC... (channels-first) tensor or 2 spatial dims of
// an NHWC (channels-last) one, and the global forms. Plain C++ so pool_tactics.cc compiles with
// the host compiler; every launcher enqueues on `stream`, never synchronizes, and returns
// cudaGetLastError() after its launch. Values are f32/f16/bf16 (FloatType from
// elementwise_kernels.h), accumulated in fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

constexpr int kMaxPoolSpatialDims = 3;

enum class PoolOp : int32_t { kMax = 0, kAvg = 1 };

/// One windowed pooling: `planes` (N*C) contiguous planes of `in` elements each, producing
/// planes of `out`. Unused trailing dims (spatial_rank < 3) are never read. Pads may be
/// asymmetric; a window tap counts toward count_include_pad's divisor when it lies inside
/// [-pad_begin, in + pad_end) (so ceil_mode's extra taps past the end pad do not count).
struct PoolDesc {
  int32_t spatial_rank = 0;
  int64_t planes = 0;
  int64_t in[kMaxPoolSpatialDims] = {};
  int64_t out[kMaxPoolSpatialDims] = {};
  int64_t kernel[kMaxPoolSpatialDims] = {};
  int64_t stride[kMaxPoolSpatialDims] = {};
  int64_t dilation[kMaxPoolSpatialDims] = {};
  int64_t pad_begin[kMaxPoolSpatialDims] = {};
  int64_t pad_end[kMaxPoolSpatialDims] = {};
  bool count_include_pad = false;
};

/// MaxPool (a window with no valid tap gives -inf) or AveragePool (no valid tap gives 0).
cudaError_t launch_pool(PoolOp op, FloatType t, const void* x, void* y, const PoolDesc& desc, cudaStream_t stream);

/// The same pooling channels-last: x is [N, H, W, channels], y [N, OH, OW, channels], `desc` as
/// above with planes = N, spatial_rank = 2 and dims 0, 1 = H, W. Max and average agree with
/// launch_pool element for element (same tap order, so NaN handling is the same too). When
/// channels * element size is a multiple of 16 and x, y are 16-byte aligned each thread reads
/// 16 bytes of channels per tap, else one channel.
cudaError_t launch_pool_nhwc(PoolOp op, FloatType t, const void* x, void* y, const PoolDesc& desc, int64_t channels,
                             cudaStream_t stream);

/// MaxPool of int8 tensors (explicitly quantized models: a max pool between two quantized layers
/// runs on the 8-bit numbers), as launch_pool and launch_pool_nhwc compute it.
cudaError_t launch_max_pool_i8(const void* x, void* y, const PoolDesc& desc, cudaStream_t stream);
cudaError_t launch_max_pool_nhwc_i8(const void* x, void* y, const PoolDesc& desc, int64_t channels,
                                   cudaStream_t stream);

/// GlobalMaxPool / GlobalAveragePool: y[p] = max / mean of the `size` elements of plane p.
/// Max propagates NaN.
cudaError_t launch_global_pool(PoolOp op, FloatType t, const void* x, void* y, int64_t planes, int64_t size,
                               cudaStream_t stream);

}  // namespace ingot::backend::cuda
