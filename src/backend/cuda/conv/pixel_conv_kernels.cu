// Copyright ingot authors. Apache-2.0.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/conv/pixel_conv_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;
// Past this many blocks the grid strides: only large batches get there, and by then every SM has
// several blocks.
constexpr int64_t kMaxBlocks = 4096;

// One group of G lanes per (output channel k, block of NB samples). Groups are numbered k-fastest,
// so a block's groups share their samples' rows of x (served from L1) and read neighbouring rows
// of w. Every lane of a group takes the same trip through the grid-stride loop, so the shuffles
// name only the group's lanes (other groups of the warp may have left the loop).
template <class T, int G, int V, int NB>
__global__ void __launch_bounds__(kThreads)
    pixel_conv(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* __restrict__ r,
               T* __restrict__ y, PixelConvDesc d, int groups) {
  INGOT_KERNEL_ENTRY();
  static_assert(G >= NB && G <= 32 && (G & (G - 1)) == 0, "lane j of a group finishes sample j");
  const int N = static_cast<int>(d.n), C = static_cast<int>(d.c), K = static_cast<int>(d.k);
  const int packs = C / V;
  const int lane = static_cast<int>(threadIdx.x) % G;
  const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << ((threadIdx.x % 32u) & ~(G - 1u));
  const int stride = static_cast<int>(gridDim.x) * (kThreads / G);
  for (int g = static_cast<int>((blockIdx.x * kThreads + threadIdx.x) / G); g < groups; g += stride) {
    const int k = g % K;
    const int n0 = (g / K) * NB;
    const T* wrow = w + static_cast<int64_t>(k) * C;
    // Samples past N re-read the last row (no branch in the loop) and are not stored.
    const T* xrow[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) xrow[j] = x + static_cast<int64_t>(min(n0 + j, N - 1)) * C;
    float acc[NB] = {};
#pragma unroll 4
    for (int p = lane; p < packs; p += G) {
      float wv[V];
      conv_util::load_f32<T, V>(wrow + p * V, wv);
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        float xv[V];
        conv_util::load_f32<T, V>(xrow[j] + p * V, xv);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[j] = fmaf(xv[v], wv[v], acc[j]);
      }
    }
#pragma unroll
    for (int off = G / 2; off > 0; off /= 2)
#pragma unroll
      for (int j = 0; j < NB; ++j) acc[j] += __shfl_xor_sync(mask, acc[j], off, G);
    if (lane < NB && n0 + lane < N) {
      // acc[lane] by selects: an index known only at run time would put acc in local memory.
      float v = acc[0];
#pragma unroll
      for (int j = 1; j < NB; ++j)
        if (lane == j) v = acc[j];
      const int64_t off = static_cast<int64_t>(n0 + lane) * K + k;
      if (bias) v += to_f32(bias[k]);
      v = conv_util::epilogue(v, r ? to_f32(r[off]) : 0.0f, r != nullptr, d);
      y[off] = from_f32<T>(v);
    }
  }
}

template <class T, int G, int V, int NB>
cudaError_t launch(const void* x, const void* w, const void* bias, const void* r, void* y, const PixelConvDesc& d,
                   cudaStream_t stream) {
  const int64_t groups = d.k * ((d.n + NB - 1) / NB);
  const int64_t blocks = std::min<int64_t>((groups * G + kThreads - 1) / kThreads, kMaxBlocks);
  launch_kernel(pixel_conv<T, G, V, NB>, static_cast<unsigned>(blocks), kThreads, 0, stream, static_cast<const T*>(x),
                static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(r), static_cast<T*>(y), d,
                static_cast<int>(groups));
  return cudaGetLastError();
}

// G: the fewest lanes (at least 4, at most a warp) whose loads span the row of `packs` packs, so a
// row is one round of loads up to 32 packs (512 bytes) and a lane rarely idles.
template <class T, int V, int NB>
cudaError_t launch_g(const void* x, const void* w, const void* bias, const void* r, void* y, const PixelConvDesc& d,
                     cudaStream_t stream) {
  const int64_t packs = d.c / V;
  if (packs <= 4) return launch<T, 4, V, NB>(x, w, bias, r, y, d, stream);
  if (packs <= 8) return launch<T, 8, V, NB>(x, w, bias, r, y, d, stream);
  if (packs <= 16) return launch<T, 16, V, NB>(x, w, bias, r, y, d, stream);
  return launch<T, 32, V, NB>(x, w, bias, r, y, d, stream);
}

template <class T, int NB>
cudaError_t launch_v(const void* x, const void* w, const void* bias, const void* r, void* y, const PixelConvDesc& d,
                     cudaStream_t stream) {
  constexpr int kV = 16 / sizeof(T);
  // Rows start on 16-byte boundaries only when C is whole packs and x and w do.
  const bool packed =
      d.c % kV == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  return packed ? launch_g<T, kV, NB>(x, w, bias, r, y, d, stream) : launch_g<T, 1, NB>(x, w, bias, r, y, d, stream);
}

}  // namespace

bool pixel_conv_supported(const PixelConvDesc& d) {
  if (d.c < 1 || d.k < 1 || d.n < 0) return false;
  // int32 index math: element offsets within a row and the group count (k * n at most, kept below
  // 2^30 so that the grid-stride step cannot carry it past 2^31); the row offsets are int64.
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  return d.c < kMax && d.k < (int64_t{1} << 30) && d.n < kMax && d.n * d.k < (int64_t{1} << 30) && d.n * d.c < kMax &&
         d.k * d.c < kMax;
}

cudaError_t launch_pixel_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                              const PixelConvDesc& d, cudaStream_t stream) {
  if (!pixel_conv_supported(d)) return cudaErrorInvalidValue;
  if (d.n == 0) return cudaSuccess;
  cudaError_t e = cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // One sample a group at batch 1 (the latency case: no redundant loads of x); blocks of 4 at
    // larger batches, so each weight pack read serves 4 multiply-add rows.
    e = d.n == 1 ? launch_v<T, 1>(x, w, bias, r, y, d, stream) : launch_v<T, 4>(x, w, bias, r, y, d, stream);
  });
  return e;
}

}  // namespace ingot::backend::cuda
