// Copyright ingot authors. Apache-2.0.
//
// Row-wise kernels of the elementwise family: Softmax (one block per row when the axis is the
// innermost dim, one thread per column otherwise), LayerNormalization (one warp per row held in registers when it fits, else one block per row) and
// Transpose (a tiled kernel for batched 2-D transposes such as NCHW <-> NHWC; other permutations
// as planned by transpose_plan.h: contiguous runs in wide units, or tiles over flattened groups of
// dims; one thread per output element only where no plan is made). Reductions run in fp32 with warp shuffles and one
// shared-memory slot per warp. Rows are re-read from global memory for each pass (they sit in
// L1/L2 for the sizes these models use).
#include <cmath>
#include <type_traits>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/pointwise/transpose_plan.h"
#include "backend/cuda/quant/quant_convert.cuh"

namespace ingot::backend::cuda {
namespace ew {
namespace {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide reductions; blockDim.x is a multiple of 32. `red` has 32 slots. Every thread gets
// the result; the trailing barrier lets the caller reuse `red` right away.
__device__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// Softmax over contiguous rows of `len`. As the reference: a row whose max is not finite
// (all -inf, or +inf) uses 0 as its shift and lets the arithmetic propagate.
template <class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t len) {
  INGOT_KERNEL_ENTRY();
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) m = fmaxf(m, to_f32(xr[j]));
    m = block_max(m, red);
    if (!isfinite(m)) m = 0.0f;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += expf(to_f32(xr[j]) - m);
    s = block_sum(s, red);
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = from_f32<T>(expf(to_f32(xr[j]) - m) / s);
  }
}

// Softmax over the middle dim of [outer, len, inner]: one thread per (outer, inner) column;
// neighbouring threads read neighbouring elements.
template <class T>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner) {
  INGOT_KERNEL_ENTRY();
  const int64_t cols = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += stride) {
    const int64_t o = c / inner, in = c % inner;
    const T* xc = x + o * len * inner + in;
    T* yc = y + o * len * inner + in;
    float m = -INFINITY;
    for (int64_t j = 0; j < len; ++j) m = fmaxf(m, to_f32(xc[j * inner]));
    if (!isfinite(m)) m = 0.0f;
    float s = 0.0f;
    for (int64_t j = 0; j < len; ++j) s += expf(to_f32(xc[j * inner]) - m);
    for (int64_t j = 0; j < len; ++j) yc[j * inner] = from_f32<T>(expf(to_f32(xc[j * inner]) - m) / s);
  }
}

// The quantized copy of a norm's stored output (NormQuantOutput): the scale, rounded to the
// quotient type, read once per thread.
template <NormQuant kQ>
__device__ __forceinline__ float norm_quant_scale(const NormQuantOutput& q) {
  if constexpr (kQ == NormQuant::kNone) return 1.0f;
  else return qconv::round_to(q.quotient, qconv::load_as_f32(q.scale_type, q.scale));
}
template <NormQuant kQ>
__device__ __forceinline__ uint8_t norm_quant_byte(const NormQuantOutput& q, float stored, float scale) {
  const float v = qconv::round_to(q.quotient, stored / scale);
  if constexpr (kQ == NormQuant::kFloat8E4M3FN) return qconv::f32_to_e4m3(v, q.saturate);
  else return static_cast<uint8_t>(qconv::quantize_int(v, 0.0f, -128.0f, 127.0f));
}

// Two-pass mean and variance (no cancellation from E[x^2] - E[x]^2).
// rms: RMSNormalization (no mean, no beta): x / sqrt(mean(x^2) + eps) * gamma.
// kQ: also the quantized copy of y (y itself may be null).
template <class T, NormQuant kQ = NormQuant::kNone>
__global__ void layernorm_kernel(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t len,
                                 float epsilon, bool rms, NormQuantOutput q) {
  INGOT_KERNEL_ENTRY();
  __shared__ float red[32];
  const float inv_len = 1.0f / static_cast<float>(len);
  const float qs = norm_quant_scale<kQ>(q);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * len;
    float mean = 0.0f;
    if (!rms) {
      float s = 0.0f;
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += to_f32(xr[j]);
      mean = block_sum(s, red) * inv_len;
    }
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const float d = to_f32(xr[j]) - mean;
      v += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_sum(v, red) * inv_len + epsilon);
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      float o = (to_f32(xr[j]) - mean) * rstd * to_f32(gamma[j]);
      if (beta) o += to_f32(beta[j]);
      const T stored = from_f32<T>(o);
      if (y) y[r * len + j] = stored;
      if constexpr (kQ != NormQuant::kNone)
        static_cast<uint8_t*>(q.yq)[r * len + j] = norm_quant_byte<kQ>(q, to_f32(stored), qs);
    }
  }
}

// The same LayerNormalization with one warp per row and the row held in registers, for rows of
// at most 32 * kVec * kChunks elements, a multiple of kVec, every row 16-byte aligned (BERT's
// 768: the block-per-row kernel above made 1024 threads read one scalar each, three times, and
// reached 325 GB/s at 8192 rows). Loads and stores are 16 bytes; x is read from memory once.
// kRms: RMSNormalization (no mean, no beta; Llama's [tokens, 512..8192] rows: the block-per-row
// norm kernel took 13 us for 4096 x 512 fp16 on the H200, ~6x its memory time).
// kQ: also the quantized copy of y, kVec bytes a store (y itself may be null).
template <class T, int kChunks, bool kRms = false, NormQuant kQ = NormQuant::kNone>
__global__ void layernorm_warp_kernel(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int len,
                                      float epsilon, NormQuantOutput q) {
  INGOT_KERNEL_ENTRY();
  constexpr int kVec = 16 / sizeof(T);
  using V = Pack<T, kVec>;
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T* xr = x + r * len;
  float v[kChunks][kVec];
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int j = (c * 32 + lane) * kVec;
    if (j < len) {
      const V p = *reinterpret_cast<const V*>(xr + j);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        v[c][e] = to_f32(p.v[e]);
        s += v[c][e];
      }
    }
  }
  const float inv_len = 1.0f / static_cast<float>(len);
  const float mean = kRms ? 0.0f : warp_sum(s) * inv_len;
  float sq = 0.0f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if ((c * 32 + lane) * kVec < len) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float d = v[c][e] - mean;
        sq += d * d;
      }
    }
  }
  const float rstd = 1.0f / sqrtf(warp_sum(sq) * inv_len + epsilon);
  const float qs = norm_quant_scale<kQ>(q);
  struct alignas(kVec) Bytes {
    uint8_t b[kVec];
  };
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int j = (c * 32 + lane) * kVec;
    if (j < len) {
      const V g = *reinterpret_cast<const V*>(gamma + j);
      V b;
      if (!kRms && beta) b = *reinterpret_cast<const V*>(beta + j);
      V o;
      Bytes ob;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float t = (v[c][e] - mean) * rstd * to_f32(g.v[e]);
        if (!kRms && beta) t += to_f32(b.v[e]);
        o.v[e] = from_f32<T>(t);
        if constexpr (kQ != NormQuant::kNone) ob.b[e] = norm_quant_byte<kQ>(q, to_f32(o.v[e]), qs);
      }
      if (y) *reinterpret_cast<V*>(y + r * len + j) = o;
      if constexpr (kQ != NormQuant::kNone)
        *reinterpret_cast<Bytes*>(static_cast<uint8_t*>(q.yq) + r * len + j) = ob;
    }
  }
}
constexpr int kLayerNormRowsPerBlock = 4;

template <class E>
__global__ void transpose_kernel(const E* x, E* y, int64_t n, BroadcastDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[1];
    broadcast_offsets<1>(d, i, off);
    y[i] = x[off[0]];
  }
}

// A batched matrix transpose [B, M, N] -> [B, N, M] (NCHW <-> NHWC) when M or N is at most
// kSmallDim (an image's 3 channels into or out of NHWC): a 32 x 32 tile would leave most of its
// threads idle (the C = 3 input reformat of ResNet-50 at batch 128 ran at 158 GB/s in one). One thread per element of the long dim copies its
// short row/column: loads and stores of neighbouring threads stay neighbours.
constexpr int64_t kSmallDim = 8;
template <class E>
__global__ void transpose_small_m_kernel(const E* x, E* y, int64_t batches, int64_t m, int64_t n) {
  INGOT_KERNEL_ENTRY();
  const int64_t total = batches * n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t b = t / n, j = t - b * n;
    const E* xc = x + b * m * n + j;  // column j of batch b
    E* yr = y + t * m;                // row j of batch b
    for (int64_t i = 0; i < m; ++i) yr[i] = xc[i * n];
  }
}
template <class E>
__global__ void transpose_small_n_kernel(const E* x, E* y, int64_t batches, int64_t m, int64_t n) {
  INGOT_KERNEL_ENTRY();
  const int64_t total = batches * m;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t b = t / m, i = t - b * m;
    const E* xr = x + t * n;          // row i of batch b
    E* yc = y + b * m * n + i;        // column i of batch b
    for (int64_t j = 0; j < n; ++j) yc[j * m] = xr[j];
  }
}

// kRuns (transpose_plan.h): unit q of the output is unit w of run r of the input.
template <class U, class Idx>
__global__ void transpose_runs_kernel(const U* __restrict__ x, U* __restrict__ y, const __grid_constant__ TransposePlan p) {
  INGOT_KERNEL_ENTRY();
  const Idx run = static_cast<Idx>(p.run);
  const Idx total = static_cast<Idx>(p.outer.size) * run;
  for (Idx q = blockIdx.x * static_cast<Idx>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<Idx>(gridDim.x) * blockDim.x) {
    const Idx r = q / run, w = q - r * run;
    int64_t in = 0, out = 0;
    transpose_group_offsets<Idx>(p.outer, r, &in, &out);
    y[q] = x[in + static_cast<int64_t>(w)];
  }
}

// kTiled (transpose_plan.h): a kT x kT tile of (j, k) through shared memory, blocks of 32 x 8.
// The tile's per-row and per-column offsets are computed once per tile into shared tables. Rows are
// padded to a 4-byte multiple plus one word so that neither phase's shared accesses conflict.
template <class E, int kT, class Idx>
__global__ void __launch_bounds__(kTransposeThreads)
    transpose_tiles_kernel(const E* __restrict__ x, E* __restrict__ y, const __grid_constant__ TransposePlan p) {
  INGOT_KERNEL_ENTRY();
  constexpr int kPad = sizeof(E) >= 4 ? 1 : static_cast<int>(4 / sizeof(E));
  __shared__ E tile[kT][kT + kPad];
  __shared__ int64_t j_in[kT], k_in[kT], k_out[kT];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
  const int64_t tiles = p.batch.size * p.tiles_j * p.tiles_k;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t tk = t % p.tiles_k, rest = t / p.tiles_k;
    const int64_t tj = rest % p.tiles_j, bi = rest / p.tiles_j;
    const int64_t j0 = tj * kT, k0 = tk * kT;
    const int nj = static_cast<int>(p.j.size - j0 < kT ? p.j.size - j0 : kT);
    const int nk = static_cast<int>(p.k.size - k0 < kT ? p.k.size - k0 : kT);
    int64_t b_in = 0, b_out = 0;
    transpose_group_offsets<Idx>(p.batch, static_cast<Idx>(bi), &b_in, &b_out);
    __syncthreads();  // the previous tile is written out before its tables and tile are reused
    if (tid < kT) {
      if (tid < nj) {
        int64_t a = 0, b = 0;
        transpose_group_offsets<Idx>(p.j, static_cast<Idx>(j0 + tid), &a, &b);
        j_in[tid] = a;
      }
    } else if (tid < 2 * kT) {
      const int i = tid - kT;
      if (i < nk) {
        int64_t a = 0, b = 0;
        transpose_group_offsets<Idx>(p.k, static_cast<Idx>(k0 + i), &a, &b);
        k_in[i] = a;
        k_out[i] = b;
      }
    }
    __syncthreads();
    if (nj == kT && nk == kT) {
      // A whole tile: every load of the thread issued before the first lands in shared memory (a
      // loop with run-time bounds waited for each load in turn: 1.25 TB/s on the probe's shapes).
      constexpr int kRows = kT / 8, kCols = kT / 32;
      E v[kRows * kCols];
#pragma unroll
      for (int a = 0; a < kRows; ++a)
#pragma unroll
        for (int b = 0; b < kCols; ++b) v[a * kCols + b] = x[b_in + j_in[ty + 8 * a] + k_in[tx + 32 * b]];
#pragma unroll
      for (int a = 0; a < kRows; ++a)
#pragma unroll
        for (int b = 0; b < kCols; ++b) tile[ty + 8 * a][tx + 32 * b] = v[a * kCols + b];
      __syncthreads();
#pragma unroll
      for (int a = 0; a < kRows; ++a)
#pragma unroll
        for (int b = 0; b < kCols; ++b) {
          const int kk = ty + 8 * a, jj = tx + 32 * b;
          y[b_out + k_out[kk] + j0 + jj] = tile[jj][kk];
        }
      continue;
    }
    for (int jj = ty; jj < nj; jj += 8)
      for (int kk = tx; kk < nk; kk += 32) tile[jj][kk] = x[b_in + j_in[jj] + k_in[kk]];
    __syncthreads();
    for (int kk = ty; kk < nk; kk += 8)
      for (int jj = tx; jj < nj; jj += 32) y[b_out + k_out[kk] + j0 + jj] = tile[jj][kk];
  }
}

/// Threads per row: the row length rounded up to a warp multiple, 32..1024.
unsigned row_threads(int64_t len) {
  int64_t t = 32;
  while (t < len && t < 1024) t *= 2;
  return static_cast<unsigned>(t);
}

constexpr int64_t kMaxRowBlocks = 65535;

}  // namespace
}  // namespace ew

cudaError_t launch_softmax(FloatType t, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                           cudaStream_t stream) {
  if (outer <= 0 || len <= 0 || inner <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    if (inner == 1) {
      const unsigned blocks = static_cast<unsigned>(outer < ew::kMaxRowBlocks ? outer : ew::kMaxRowBlocks);
      launch_kernel(ew::softmax_rows_kernel<T>, blocks, ew::row_threads(len), 0, stream, px, py, outer, len);
    } else {
      launch_kernel(ew::softmax_columns_kernel<T>, ew::grid_for(outer * inner), ew::kThreads, 0, stream, px, py, outer,
                    len, inner);
    }
  });
  return cudaGetLastError();
}

cudaError_t launch_layernorm(FloatType t, const void* x, const void* gamma, const void* beta, void* y, int64_t outer,
                             int64_t len, float epsilon, cudaStream_t stream, bool rms, const NormQuantOutput* q) {
  if (outer <= 0 || len <= 0) return cudaSuccess;
  if (rms) beta = nullptr;
  const NormQuantOutput qo = q != nullptr ? *q : NormQuantOutput{};
  if (qo.type != NormQuant::kNone && (qo.yq == nullptr || qo.scale == nullptr)) return cudaErrorInvalidValue;
  if (qo.type == NormQuant::kNone && y == nullptr) return cudaErrorInvalidValue;
  const auto with_quant = [&](auto f) {
    switch (qo.type) {
      case NormQuant::kNone: f(std::integral_constant<NormQuant, NormQuant::kNone>{}); break;
      case NormQuant::kInt8: f(std::integral_constant<NormQuant, NormQuant::kInt8>{}); break;
      case NormQuant::kFloat8E4M3FN: f(std::integral_constant<NormQuant, NormQuant::kFloat8E4M3FN>{}); break;
    }
  };
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t kVec = 16 / sizeof(T);
    const int64_t per_chunk = 32 * kVec;
    const bool vectorized = len % kVec == 0 && len <= 8 * per_chunk && outer < (int64_t{1} << 31) && ew::aligned16(x) && ew::aligned16(y) &&
                            ew::aligned16(gamma) && (beta == nullptr || ew::aligned16(beta)) &&
                            reinterpret_cast<uintptr_t>(qo.yq) % kVec == 0;
    with_quant([&](auto quant) {
      constexpr NormQuant kQ = decltype(quant)::value;
      if (vectorized) {
        const int64_t grid = (outer + ew::kLayerNormRowsPerBlock - 1) / ew::kLayerNormRowsPerBlock;
        const int n = static_cast<int>(len);
        const auto launch = [&](auto kernel) {
          launch_kernel(kernel, static_cast<unsigned>(grid), 32 * ew::kLayerNormRowsPerBlock, 0, stream,
                        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
                        static_cast<T*>(y), outer, n, epsilon, qo);
        };
        if (rms) {
          if (len <= per_chunk) launch(ew::layernorm_warp_kernel<T, 1, true, kQ>);
          else if (len <= 2 * per_chunk) launch(ew::layernorm_warp_kernel<T, 2, true, kQ>);
          else if (len <= 4 * per_chunk) launch(ew::layernorm_warp_kernel<T, 4, true, kQ>);
          else launch(ew::layernorm_warp_kernel<T, 8, true, kQ>);
          return;
        }
        if (len <= per_chunk) launch(ew::layernorm_warp_kernel<T, 1, false, kQ>);
        else if (len <= 2 * per_chunk) launch(ew::layernorm_warp_kernel<T, 2, false, kQ>);
        else if (len <= 4 * per_chunk) launch(ew::layernorm_warp_kernel<T, 4, false, kQ>);
        else launch(ew::layernorm_warp_kernel<T, 8, false, kQ>);
        return;
      }
      const unsigned blocks = static_cast<unsigned>(outer < ew::kMaxRowBlocks ? outer : ew::kMaxRowBlocks);
      launch_kernel(ew::layernorm_kernel<T, kQ>, blocks, ew::row_threads(len), 0, stream, static_cast<const T*>(x),
                    static_cast<const T*>(gamma), static_cast<const T*>(beta), static_cast<T*>(y), outer, len, epsilon,
                    rms, qo);
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_transpose_plan(int32_t element_bytes, const TransposePlan& plan, const void* x, void* y,
                                  cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(transpose_plan_blocks(plan));
  if (plan.form == TransposeForm::kRuns) {
    const auto runs = [&](auto unit) {
      using U = decltype(unit);
      const U* px = static_cast<const U*>(x);
      U* py = static_cast<U*>(y);
      if (plan.index32)
        launch_kernel(ew::transpose_runs_kernel<U, uint32_t>, blocks, kTransposeThreads, 0, stream, px, py, plan);
      else
        launch_kernel(ew::transpose_runs_kernel<U, int64_t>, blocks, kTransposeThreads, 0, stream, px, py, plan);
    };
    switch (plan.unit_bytes) {
      case 16: runs(uint4{}); break;
      case 8: runs(uint2{}); break;
      case 4: runs(uint32_t{}); break;
      case 2: runs(uint16_t{}); break;
      default: runs(uint8_t{}); break;
    }
  } else {
    const dim3 block(32, kTransposeThreads / 32);
    const auto tiles = [&](auto elem) {
      using E = decltype(elem);
      const E* px = static_cast<const E*>(x);
      E* py = static_cast<E*>(y);
      const auto run = [&](auto tile) {
        constexpr int kT = decltype(tile)::value;
        if (plan.index32)
          launch_kernel(ew::transpose_tiles_kernel<E, kT, uint32_t>, blocks, block, 0, stream, px, py, plan);
        else
          launch_kernel(ew::transpose_tiles_kernel<E, kT, int64_t>, blocks, block, 0, stream, px, py, plan);
      };
      if constexpr (sizeof(E) <= 2) {
        if (plan.tile == 64) return run(std::integral_constant<int, 64>{});
      }
      run(std::integral_constant<int, 32>{});
    };
    switch (element_bytes) {
      case 1: tiles(uint8_t{}); break;
      case 2: tiles(uint16_t{}); break;
      case 4: tiles(uint32_t{}); break;
      case 8: tiles(uint64_t{}); break;
      default: return cudaErrorInvalidValue;
    }
  }
  return cudaGetLastError();
}

static_assert(kTransposeGroupDims >= kMaxDims, "transpose plans hold every dim launch_transpose takes");

cudaError_t launch_transpose(int32_t element_bytes, const void* x, void* y, int32_t rank, const int64_t* out_dims,
                             const int64_t* in_strides, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (rank < 0 || rank > kMaxDims) return cudaErrorInvalidValue;
  // Merge output dims that are contiguous in the input too. A batched 2-D transpose ([B, N, M] out
  // of a contiguous [B, M, N]) with a dim of at most kSmallDim takes the kernels above; with both
  // dims longer it is planned like any other permutation: on the H100 (session 38's probe, NCHW
  // <-> NHWC [32, 64, 56, 56] fp16) the plan's unrolled 64 x 64 tiles took 8.7 us where the
  // 32 x 33 tile kernel that ran these before took 16.8 (memcpy of the same bytes: 6.1).
  int64_t md[kTransposeGroupDims], ms[kTransposeGroupDims];
  const int32_t mr = merge_transpose_dims(rank, out_dims, in_strides, md, ms);
  if (mr < 0) return cudaErrorInvalidValue;
  int64_t tb = 0, tm = 0, tn = 0;
  if (mr == 2 && ms[1] == md[0] && ms[0] == 1) {
    tb = 1, tn = md[0], tm = md[1];
  } else if (mr == 3 && ms[1] == 1 && ms[2] == md[1] && ms[0] == md[1] * md[2]) {
    tb = md[0], tn = md[1], tm = md[2];
  }
  if (tb > 0 && (tm <= ew::kSmallDim || tn <= ew::kSmallDim)) {
    const bool small_m = tm <= ew::kSmallDim;
    const unsigned blocks = ew::grid_for(tb * (small_m ? tn : tm));
    auto launch = [&](auto tag) {
      using E = decltype(tag);
      const E* px = static_cast<const E*>(x);
      E* py = static_cast<E*>(y);
      if (small_m)
        launch_kernel(ew::transpose_small_m_kernel<E>, blocks, ew::kThreads, 0, stream, px, py, tb, tm, tn);
      else
        launch_kernel(ew::transpose_small_n_kernel<E>, blocks, ew::kThreads, 0, stream, px, py, tb, tm, tn);
    };
    switch (element_bytes) {
      case 1: launch(uint8_t{}); break;
      case 2: launch(uint16_t{}); break;
      case 4: launch(uint32_t{}); break;
      case 8: launch(uint64_t{}); break;
      default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
  }
  TransposePlan plan;
  if (plan_transpose(element_bytes, rank, out_dims, in_strides, x, y, &plan))
    return launch_transpose_plan(element_bytes, plan, x, y, stream);
  BroadcastDesc d;
  d.rank = rank;
  for (int32_t i = 0; i < rank; ++i) {
    d.dims[i] = out_dims[i];
    d.strides[0][i] = in_strides[i];
  }
  const unsigned blocks = ew::grid_for(n);
  switch (element_bytes) {
    case 1:
      launch_kernel(ew::transpose_kernel<uint8_t>, blocks, ew::kThreads, 0, stream, static_cast<const uint8_t*>(x),
                    static_cast<uint8_t*>(y), n, d);
      break;
    case 2:
      launch_kernel(ew::transpose_kernel<uint16_t>, blocks, ew::kThreads, 0, stream, static_cast<const uint16_t*>(x),
                    static_cast<uint16_t*>(y), n, d);
      break;
    case 4:
      launch_kernel(ew::transpose_kernel<uint32_t>, blocks, ew::kThreads, 0, stream, static_cast<const uint32_t*>(x),
                    static_cast<uint32_t*>(y), n, d);
      break;
    case 8:
      launch_kernel(ew::transpose_kernel<uint64_t>, blocks, ew::kThreads, 0, stream, static_cast<const uint64_t*>(x),
                    static_cast<uint64_t*>(y), n, d);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
