// Copyright ingot authors. Apache-2.0.
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/gemm/gemm_edge_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {

namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kWarps = 4;

// One block per row (grid-stride over rows); each warp takes every kWarps-th edge column and
// reduces its dot product over k across the lanes.
template <typename T>
__global__ void row_group_edges_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t m,
                                       int64_t n, int64_t k, int64_t unit, float alpha) {
  INGOT_KERNEL_ENTRY();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    int64_t c0 = 0, nj = 0;
    row_group_columns(r % unit, n, unit, &c0, &nj);
    const int64_t tail = c0 + nj;  // columns [0, c0) and [tail, n)
    const int64_t edges = c0 + (n - tail);
    const T* ar = a + r * k;
    for (int64_t e = warp; e < edges; e += kWarps) {
      const int64_t c = e < c0 ? e : tail + (e - c0);
      const T* bc = b + c * k;
      float acc = 0.f;
      for (int64_t i = lane; i < k; i += 32) acc += to_f32(ar[i]) * to_f32(bc[i]);
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (lane == 0) y[r * n + c] = from_f32<T>(alpha * acc);
    }
  }
}

}  // namespace

cudaError_t launch_gemm_row_group_edges(FloatType t, const void* a, const void* b, void* y, int64_t m, int64_t n,
                                        int64_t k, float alpha, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(m < 65535 ? m : 65535);
  switch (t) {
    case FloatType::kF16:
      launch_kernel(row_group_edges_kernel<__half>, grid, 32 * kWarps, 0, stream, static_cast<const __half*>(a),
                    static_cast<const __half*>(b), static_cast<__half*>(y), m, n, k, 8, alpha);
      break;
    case FloatType::kBF16:
      launch_kernel(row_group_edges_kernel<__nv_bfloat16>, grid, 32 * kWarps, 0, stream, static_cast<const __nv_bfloat16*>(a),
                    static_cast<const __nv_bfloat16*>(b), static_cast<__nv_bfloat16*>(y), m, n, k, 8, alpha);
      break;
    case FloatType::kF32:
      launch_kernel(row_group_edges_kernel<float>, grid, 32 * kWarps, 0, stream, static_cast<const float*>(a),
                    static_cast<const float*>(b), static_cast<float*>(y), m, n, k, 4, alpha);
      break;
  }
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
