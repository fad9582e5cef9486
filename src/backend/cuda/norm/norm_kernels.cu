// Copyright ingot authors. Apache-2.0.
//
// Row normalization kernel for GroupNormalization (and InstanceNormalization): one 256-thread block per
// row; the mean, then the centred sum of squares (no catastrophic cancellation), then the
// normalized write, each a pass over the row in global memory (rows of GroupNorm can exceed
// shared memory). fp32 statistics, one rounding on store.
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/norm/norm_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;

__device__ __forceinline__ float block_sum(float v, float* smem) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) s += smem[w];
  return s;
}

template <class T>
__global__ void __launch_bounds__(kThreads) row_norm_kernel(const T* x, const T* scale, const T* bias, T* y,
                                                            RowNormDesc d) {
  INGOT_KERNEL_ENTRY();
  __shared__ float smem[kThreads / 32];
  for (int64_t r = blockIdx.x; r < d.rows; r += gridDim.x) {
    const T* xr = x + r * d.row_len;
    T* yr = y + r * d.row_len;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < d.row_len; i += kThreads) s += to_f32(xr[i]);
    const float mean = d.row_len > 0 ? block_sum(s, smem) / static_cast<float>(d.row_len) : 0.0f;
    float s2 = 0.0f;
    for (int64_t i = threadIdx.x; i < d.row_len; i += kThreads) {
      const float v = to_f32(xr[i]) - mean;
      s2 += v * v;
    }
    const float var = d.row_len > 0 ? block_sum(s2, smem) / static_cast<float>(d.row_len) : 0.0f;
    const float inv = rsqrtf(var + d.epsilon);
    const int64_t g = r % d.groups;
    for (int64_t i = threadIdx.x; i < d.row_len; i += kThreads) {
      const float v = (to_f32(xr[i]) - mean) * inv;
      const int64_t p = d.per_group ? g : g * d.channels_per_group + i / d.inner;
      yr[i] = from_f32<T>(v * to_f32(scale[p]) + (bias ? to_f32(bias[p]) : 0.0f));
    }
  }
}

}  // namespace

cudaError_t launch_row_norm(FloatType t, const void* x, const void* scale, const void* bias, void* y,
                            const RowNormDesc& desc, cudaStream_t stream) {
  if (desc.rows <= 0 || desc.row_len <= 0) return cudaSuccess;
  if (desc.groups <= 0 || desc.inner <= 0) return cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned blocks = static_cast<unsigned>(desc.rows < ew::kMaxBlocks ? desc.rows : ew::kMaxBlocks);
    launch_kernel(row_norm_kernel<T>, blocks, kThreads, 0, stream, static_cast<const T*>(x),
                  static_cast<const T*>(scale), static_cast<const T*>(bias), static_cast<T*>(y), desc);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
