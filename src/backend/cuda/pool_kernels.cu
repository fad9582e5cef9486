// Copyright ingot authors. Apache-2.0.
//
// Pooling kernels. Windowed pooling runs one thread per output element and walks its window
// directly (windows are small: 2x2 to 7x7); the global forms run one warp per plane. Both are
// memory bound; fp32 accumulation, one rounding on store.
#include <cfloat>

#include "backend/cuda/elementwise_common.cuh"
#include "backend/cuda/pool_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

// Taps of one window along one dim: [first, last) are in the input, `padded` count toward
// count_include_pad.
struct Taps {
  int64_t start, valid, padded;
};

__device__ __forceinline__ Taps window_taps(const PoolDesc& d, int dim, int64_t o) {
  const int64_t start = o * d.stride[dim] - d.pad_begin[dim];
  int64_t valid = 0, padded = 0;
  for (int64_t t = 0; t < d.kernel[dim]; ++t) {
    const int64_t c = start + t * d.dilation[dim];
    valid += (c >= 0 && c < d.in[dim]);
    padded += (c >= -d.pad_begin[dim] && c < d.in[dim] + d.pad_end[dim]);
  }
  return {start, valid, padded};
}

// Dims are normalized to 3 by the launcher (leading unit dims), so the loops are fixed.
template <class T>
__global__ void pool_kernel(PoolOp op, const T* x, T* y, PoolDesc d, int64_t n) {
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t in_plane = d.in[0] * d.in[1] * d.in[2];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    int64_t r = i;
    const int64_t o2 = r % d.out[2];
    r /= d.out[2];
    const int64_t o1 = r % d.out[1];
    r /= d.out[1];
    const int64_t o0 = r % d.out[0];
    const int64_t plane = r / d.out[0];
    const T* xp = x + plane * in_plane;
    const Taps t0 = window_taps(d, 0, o0), t1 = window_taps(d, 1, o1), t2 = window_taps(d, 2, o2);
    float acc = op == PoolOp::kMax ? -INFINITY : 0.0f;
    bool any = false;
    for (int64_t k0 = 0; k0 < d.kernel[0]; ++k0) {
      const int64_t c0 = t0.start + k0 * d.dilation[0];
      if (c0 < 0 || c0 >= d.in[0]) continue;
      for (int64_t k1 = 0; k1 < d.kernel[1]; ++k1) {
        const int64_t c1 = t1.start + k1 * d.dilation[1];
        if (c1 < 0 || c1 >= d.in[1]) continue;
        const T* row = xp + (c0 * d.in[1] + c1) * d.in[2];
        for (int64_t k2 = 0; k2 < d.kernel[2]; ++k2) {
          const int64_t c2 = t2.start + k2 * d.dilation[2];
          if (c2 < 0 || c2 >= d.in[2]) continue;
          const float v = to_f32(row[c2]);
          if (op == PoolOp::kMax) {
            // As the reference: the first tap seeds the maximum, a later one replaces it only when larger.
            if (!any || v > acc) acc = v;
            any = true;
          } else {
            acc += v;
          }
        }
      }
    }
    if (op == PoolOp::kAvg) {
      const int64_t div = d.count_include_pad ? t0.padded * t1.padded * t2.padded : t0.valid * t1.valid * t2.valid;
      acc = div > 0 ? acc / static_cast<float>(div) : 0.0f;
    }
    y[i] = from_f32<T>(acc);
  }
}

constexpr int kWarpsPerBlock = 8;

template <class T>
__global__ void global_pool_kernel(PoolOp op, const T* x, T* y, int64_t planes, int64_t size) {
  const int lane = threadIdx.x & 31;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); p < planes;
       p += warp_stride) {
    const T* xp = x + p * size;
    float acc = op == PoolOp::kMax ? -INFINITY : 0.0f;
    for (int64_t i = lane; i < size; i += 32) {
      const float v = to_f32(xp[i]);
      if (op == PoolOp::kAvg) acc += v;
      else acc = (isnan(v) || isnan(acc)) ? __int_as_float(0x7fffffff) : fmaxf(acc, v);
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, acc, off);
      if (op == PoolOp::kAvg) acc += o;
      else acc = (isnan(o) || isnan(acc)) ? __int_as_float(0x7fffffff) : fmaxf(acc, o);
    }
    if (lane == 0) y[p] = from_f32<T>(op == PoolOp::kAvg ? acc / static_cast<float>(size) : acc);
  }
}

}  // namespace

cudaError_t launch_pool(PoolOp op, FloatType t, const void* x, void* y, const PoolDesc& desc, cudaStream_t stream) {
  if (desc.spatial_rank < 1 || desc.spatial_rank > kMaxPoolSpatialDims) return cudaErrorInvalidValue;
  // Right-align the spatial dims into three, padding in front with unit dims.
  PoolDesc d;
  d.planes = desc.planes;
  d.count_include_pad = desc.count_include_pad;
  const int shift = kMaxPoolSpatialDims - desc.spatial_rank;
  for (int i = 0; i < kMaxPoolSpatialDims; ++i) {
    const int s = i - shift;
    d.in[i] = s < 0 ? 1 : desc.in[s];
    d.out[i] = s < 0 ? 1 : desc.out[s];
    d.kernel[i] = s < 0 ? 1 : desc.kernel[s];
    d.stride[i] = s < 0 ? 1 : desc.stride[s];
    d.dilation[i] = s < 0 ? 1 : desc.dilation[s];
    d.pad_begin[i] = s < 0 ? 0 : desc.pad_begin[s];
    d.pad_end[i] = s < 0 ? 0 : desc.pad_end[s];
  }
  d.spatial_rank = kMaxPoolSpatialDims;
  const int64_t n = d.planes * d.out[0] * d.out[1] * d.out[2];
  if (n <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_kernel<T><<<ew::grid_for(n), ew::kThreads, 0, stream>>>(op, static_cast<const T*>(x), static_cast<T*>(y),
                                                                  d, n);
  });
  return cudaGetLastError();
}

cudaError_t launch_global_pool(PoolOp op, FloatType t, const void* x, void* y, int64_t planes, int64_t size,
                               cudaStream_t stream) {
  if (planes <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned blocks = ew::grid_for(planes, kWarpsPerBlock);
    global_pool_kernel<T><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(op, static_cast<const T*>(x),
                                                                        static_cast<T*>(y), planes, size);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
