// Copyright ingot authors. Apache-2.0.
//
// Resize kernel: one thread per output element (grid-stride), each running
// resize_math::resize_element (resize_kernels.h) over its own taps, or resize_element_inner2
// where only the last two dims are resized (every image upsample). Memory bound; the taps of a
// position are recomputed per element rather than staged, so the launch needs no workspace and
// no per-shape tables (the launch is graph-capturable and the same for every shape).
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/resize/resize_kernels.h"

namespace ingot::backend::cuda {
namespace {

__host__ __device__ __forceinline__ double as_double(float v) { return v; }
__host__ __device__ __forceinline__ double as_double(__half v) { return __half2float(v); }
__host__ __device__ __forceinline__ double as_double(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
struct Loader {
  const T* x;
  __host__ __device__ double operator()(int64_t off) const { return as_double(x[off]); }
};

template <class T>
__global__ void resize_kernel(const T* x, T* y, ResizeDesc d, int64_t n) {
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const Loader<T> load{x};
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const double v = resize_math::resize_element(d, i, load);
    y[i] = ew::from_f32<T>(static_cast<float>(v));  // through float, as the reference stores
  }
}

// Only the last two dims resized (resize_math::inner2_applies): the same arithmetic with two
// divisions per element in Index (uint32_t when the output fits) instead of the generic walk.
template <class T, class Index>
__global__ void resize_inner2_kernel(const T* x, T* y, ResizeDesc d, Index n) {
  const Index grid_stride = static_cast<Index>(gridDim.x) * blockDim.x;
  const Loader<T> load{x};
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const double v = resize_math::resize_element_inner2<Index>(d, i, load);
    y[i] = ew::from_f32<T>(static_cast<float>(v));
  }
}

}  // namespace

cudaError_t launch_resize(FloatType t, const void* x, void* y, const ResizeDesc& desc, cudaStream_t stream) {
  if (desc.rank < 1 || desc.rank > kMaxResizeDims) return cudaErrorInvalidValue;
  int64_t n = 1;
  for (int i = 0; i < desc.rank; ++i) n *= desc.out[i];
  if (n <= 0) return cudaSuccess;
  const bool inner2 = resize_math::inner2_applies(desc);
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner2 && n < (int64_t{1} << 31)) {
      resize_inner2_kernel<T, uint32_t><<<ew::grid_for(n), ew::kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), desc, static_cast<uint32_t>(n));
    } else if (inner2) {
      resize_inner2_kernel<T, int64_t><<<ew::grid_for(n), ew::kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), desc, n);
    } else {
      resize_kernel<T><<<ew::grid_for(n), ew::kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                        desc, n);
    }
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
