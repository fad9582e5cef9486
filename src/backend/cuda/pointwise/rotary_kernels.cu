// Copyright ingot authors. Apache-2.0.
//
// RotaryEmbedding kernel: a grid-stride loop over the (row, i < D/2) pairs, kV consecutive ones a
// thread (16-byte packs where D/2 and the pointers allow, else one); each thread loads x[i],
// x[i + D/2] and the cos/sin at both positions, and stores both outputs. cos/sin offsets
// come from the collapsed broadcast map (for Llama's [1, 1, S, D] tables on [B, H, S, D]: two
// dims, one division). 32-bit index math when every offset fits, 64-bit otherwise.
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/pointwise/rotary_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

// kV pairs per thread: kV consecutive i < D/2 of one row (D/2 a multiple of kV, every pointer
// 16-byte aligned), so x's halves, cos and sin move in 16-byte packs and the offset map is
// walked once per kV pairs (Llama's q [4096 tokens, 8, 64] fp16: 12 us one pair a thread).
template <class T, int kV>
struct alignas(sizeof(T) * kV) Pairs {  // kV elements, one access (ew::Pack is always 16-byte aligned)
  T v[kV];
};

template <class T, class I, int kV>
__global__ void __launch_bounds__(ew::kThreads)
    rotary_kernel(const T* x, const T* cos, const T* sin, T* y, RotaryDesc d) {
  INGOT_KERNEL_ENTRY();
  using P = Pairs<T, kV>;
  const I half = static_cast<I>(d.half);
  const I groups = static_cast<I>(d.rows) * (half / kV);
  for (I q = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; q < groups;
       q += static_cast<I>(gridDim.x) * blockDim.x) {
    const I p = q * kV;
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
    // X's offset: Y's, or in a packed projection's row (x_heads of Y's rows at the start of each).
    const I xlo = d.x_heads == 0 ? lo
                                 : (row / static_cast<I>(d.x_heads)) * static_cast<I>(d.x_row) +
                                       (row % static_cast<I>(d.x_heads)) * 2 * half + (p - row * half);
    const P x0 = *reinterpret_cast<const P*>(x + xlo), x1 = *reinterpret_cast<const P*>(x + xlo + half);
    const P c0 = *reinterpret_cast<const P*>(cos + oc), c1 = *reinterpret_cast<const P*>(cos + oc + half);
    const P s0 = *reinterpret_cast<const P*>(sin + os), s1 = *reinterpret_cast<const P*>(sin + os + half);
    P y0, y1;
#pragma unroll
    for (int e = 0; e < kV; ++e) {
      const float a = to_f32(x0.v[e]), b = to_f32(x1.v[e]);
      y0.v[e] = from_f32<T>(a * to_f32(c0.v[e]) - b * to_f32(s0.v[e]));
      y1.v[e] = from_f32<T>(b * to_f32(c1.v[e]) + a * to_f32(s1.v[e]));
    }
    *reinterpret_cast<P*>(y + lo) = y0;
    *reinterpret_cast<P*>(y + lo + half) = y1;
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
  if (desc.x_heads < 0 || (desc.x_heads > 0 && desc.x_row < desc.x_heads * 2 * desc.half)) return cudaErrorInvalidValue;
  const int64_t x_extent = desc.x_heads > 0 ? (desc.rows / desc.x_heads + 1) * desc.x_row : 2 * pairs;
  const bool narrow = 2 * pairs < kNarrow && x_extent < kNarrow && extent(desc, desc.cos_strides) < kNarrow &&
                      extent(desc, desc.sin_strides) < kNarrow;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* xt = static_cast<const T*>(x);
    const auto* ct = static_cast<const T*>(cos);
    const auto* st = static_cast<const T*>(sin);
    auto* yt = static_cast<T*>(y);
    constexpr int kVec = 16 / sizeof(T);
    const bool packed = desc.half % kVec == 0 && (desc.x_heads == 0 || desc.x_row % kVec == 0) && ew::aligned16(x) &&
                        ew::aligned16(cos) && ew::aligned16(sin) && ew::aligned16(y);
    if (packed && narrow)
      launch_kernel(rotary_kernel<T, uint32_t, kVec>, ew::grid_for(pairs / kVec), ew::kThreads, 0, stream, xt, ct, st,
                    yt, desc);
    else if (packed)
      launch_kernel(rotary_kernel<T, int64_t, kVec>, ew::grid_for(pairs / kVec), ew::kThreads, 0, stream, xt, ct, st,
                    yt, desc);
    else if (narrow)
      launch_kernel(rotary_kernel<T, uint32_t, 1>, ew::grid_for(pairs), ew::kThreads, 0, stream, xt, ct, st, yt, desc);
    else
      launch_kernel(rotary_kernel<T, int64_t, 1>, ew::grid_for(pairs), ew::kThreads, 0, stream, xt, ct, st, yt, desc);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
