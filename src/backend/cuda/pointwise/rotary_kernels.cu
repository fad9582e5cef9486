// Copyright ingot authors. Apache-2.0.
//
// RotaryEmbedding kernel: a grid-stride loop over the (row, i < D/2) pairs; each thread loads
// x[i], x[i + D/2] and the cos/sin at both positions, and stores both outputs. cos/sin offsets
// come from the collapsed broadcast map (for Llama's [1, 1, S, D] tables on [B, H, S, D]: two
// dims, one division). 32-bit index math when every offset fits, 64-bit otherwise.
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/pointwise/rotary_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

template <class T, class I>
__global__ void __launch_bounds__(ew::kThreads)
    rotary_kernel(const T* x, const T* cos, const T* sin, T* y, RotaryDesc d) {
  const I half = static_cast<I>(d.half);
  const I pairs = static_cast<I>(d.rows) * half;
  for (I p = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs;
       p += static_cast<I>(gridDim.x) * blockDim.x) {
    const I row = p / half;
    const I lo = p + row * half;  // row * 2h + (p - row * h)
    I rem = lo, oc = 0, os = 0;
#pragma unroll
    for (int k = kRotaryMaxRank - 1; k > 0; --k) {
      if (k < d.rank) {
        const I size = static_cast<I>(d.dims[k]);
        const I idx = rem % size;
        rem /= size;
        oc += idx * static_cast<I>(d.cos_strides[k]);
        os += idx * static_cast<I>(d.sin_strides[k]);
      }
    }
    oc += rem * static_cast<I>(d.cos_strides[0]);
    os += rem * static_cast<I>(d.sin_strides[0]);
    const float x0 = to_f32(x[lo]), x1 = to_f32(x[lo + half]);
    const float c0 = to_f32(cos[oc]), c1 = to_f32(cos[oc + half]);
    const float s0 = to_f32(sin[os]), s1 = to_f32(sin[os + half]);
    y[lo] = from_f32<T>(x0 * c0 - x1 * s0);
    y[lo + half] = from_f32<T>(x1 * c1 + x0 * s1);
  }
}

/// One past the largest element offset the map reaches through `strides`.
int64_t extent(const RotaryDesc& d, const int64_t* strides) {
  int64_t e = 1;
  for (int k = 0; k < d.rank; ++k) e += (d.dims[k] - 1) * strides[k];
  return e;
}

}  // namespace

cudaError_t launch_rotary(FloatType t, const void* x, const void* cos, const void* sin, void* y, const RotaryDesc& desc,
                          cudaStream_t stream) {
  if (desc.rows <= 0 || desc.half <= 0) return cudaSuccess;
  if (desc.rank < 1 || desc.rank > kRotaryMaxRank) return cudaErrorInvalidValue;
  const int64_t pairs = desc.rows * desc.half;
  // The grid-stride step stays below 2^31 too (grid_for caps the grid), so p never wraps.
  constexpr int64_t kNarrow = int64_t{1} << 30;
  const bool narrow =
      2 * pairs < kNarrow && extent(desc, desc.cos_strides) < kNarrow && extent(desc, desc.sin_strides) < kNarrow;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* xt = static_cast<const T*>(x);
    const auto* ct = static_cast<const T*>(cos);
    const auto* st = static_cast<const T*>(sin);
    auto* yt = static_cast<T*>(y);
    if (narrow)
      rotary_kernel<T, uint32_t><<<ew::grid_for(pairs), ew::kThreads, 0, stream>>>(xt, ct, st, yt, desc);
    else
      rotary_kernel<T, int64_t><<<ew::grid_for(pairs), ew::kThreads, 0, stream>>>(xt, ct, st, yt, desc);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
