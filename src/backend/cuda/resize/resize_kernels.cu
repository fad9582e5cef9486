// Copyright ingot authors. Apache-2.0.
//
// Resize kernels. The generic one: a thread per output element (grid-stride), each running
// resize_math::resize_element (resize_kernels.h) over its own taps. The image kernel, where only
// the last two dims are resized (every image upsample): a thread per output position, its taps
// computed once and applied to many planes. Neither needs a workspace or per-shape tables (the
// launches are graph-capturable and the same for every shape).
#include <algorithm>

#include "backend/cuda/core/launch.cuh"
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
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const Loader<T> load{x};
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const double v = resize_math::resize_element(d, i, load);
    y[i] = ew::from_f32<T>(static_cast<float>(v));  // through float, as the reference stores
  }
}

// Only the last two dims resized (resize_math::inner2_applies): a thread per output position
// (oh, ow) computes its taps once, from a small parameter at compile-time offsets (kTaps taps
// per axis in registers), and applies them to planes blockIdx.y, + gridDim.y, ...: the double
// coordinate math is amortized over the planes and each plane's row is written coalesced.
template <class T, int kTaps>
__global__ void resize_inner2_kernel(const T* x, T* y, resize_math::Inner2Desc d, uint32_t hw_out, int64_t planes) {
  INGOT_KERNEL_ENTRY();
  const uint32_t pos = blockIdx.x * blockDim.x + threadIdx.x;
  if (pos >= hw_out) return;
  const uint32_t out_w = static_cast<uint32_t>(d.w.out);
  const auto taps = resize_math::inner2_taps<kTaps>(d, pos / out_w, pos % out_w);
  const int64_t in_plane = d.h.in * d.w.in;
  const Loader<T> load{x};
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y)
    y[p * hw_out + pos] = ew::from_f32<T>(static_cast<float>(resize_math::inner2_value(d, taps, p * in_plane, load)));
}

template <class T>
void launch_inner2(const T* x, T* y, const resize_math::Inner2Desc& d, int64_t planes, cudaStream_t stream) {
  const uint32_t hw = static_cast<uint32_t>(d.h.out * d.w.out);
  const unsigned gx = static_cast<unsigned>((hw + ew::kThreads - 1) / ew::kThreads);
  // About 2^20 threads in all (8 blocks of 256 on each of 132 SMs, four times over), the planes
  // split over grid.y.
  const int64_t want = ((int64_t{1} << 20) + hw - 1) / hw;
  const dim3 grid(gx, static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>({planes, want, 65535}))));
  switch (d.mode) {
    case ResizeMode::kNearest:
      launch_kernel(resize_inner2_kernel<T, 0>, grid, ew::kThreads, 0, stream, x, y, d, hw, planes);
      break;
    case ResizeMode::kLinear:
      launch_kernel(resize_inner2_kernel<T, 2>, grid, ew::kThreads, 0, stream, x, y, d, hw, planes);
      break;
    default:
      launch_kernel(resize_inner2_kernel<T, 4>, grid, ew::kThreads, 0, stream, x, y, d, hw, planes);
      break;
  }
}

}  // namespace

cudaError_t launch_resize(FloatType t, const void* x, void* y, const ResizeDesc& desc, cudaStream_t stream) {
  if (desc.rank < 1 || desc.rank > kMaxResizeDims) return cudaErrorInvalidValue;
  int64_t n = 1;
  for (int i = 0; i < desc.rank; ++i) n *= desc.out[i];
  if (n <= 0) return cudaSuccess;
  // The image kernel takes an output plane that 32-bit positions index (every image).
  const bool inner2 = resize_math::inner2_applies(desc) &&
                      desc.out[desc.rank - 2] * desc.out[desc.rank - 1] < (int64_t{1} << 31);
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner2) {
      const int64_t hw = desc.out[desc.rank - 2] * desc.out[desc.rank - 1];
      launch_inner2(static_cast<const T*>(x), static_cast<T*>(y), resize_math::inner2_desc(desc), n / hw, stream);
    } else {
      launch_kernel(resize_kernel<T>, ew::grid_for(n), ew::kThreads, 0, stream, static_cast<const T*>(x),
                    static_cast<T*>(y), desc, n);
    }
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
