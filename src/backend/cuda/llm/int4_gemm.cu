// Copyright ingot authors. Apache-2.0.
//
// W4A16 GEMM on tensor cores: y[T][N] (+)= x[T][K] w[N][K]^T with w group-wise int4 (llm_kernels.h's
// layout), dequantized in registers. For decode steps of more than kGemvMaxTokens tokens, where the
// decoder used to dequantize every projection into a dense buffer for cuBLASLt each step (reading
// half a byte, writing two and reading two more per weight: at batch 64 the int4 decoder ran at
// 0.64x the bf16 one, session 33 on the H100).
//
// The weights are mma.sync's A operand (rows = output features, m16n8k16, fp32 accumulation), the
// tokens its B operand. A lane (g = lane / 4, t = lane % 4) loads 16 bytes of nibbles (32
// consecutive k, one group's worth or part of one) from each of its rows per chunk of 128 k, and
// feeds them to 8 mma steps. Which k each of A's k-slots stands for is a permutation of our choice,
// as long as B uses the same one: in step s (pair p = s / 2), slots {2t, 2t+1} are k = 32t + 8p +
// 4 (s % 2) + {0, 1} and slots {2t+8, 2t+9} are the two after those. Then a lane's B operands for
// steps 2p and 2p+1 are 8 consecutive activations of its token, one 16-byte shared-memory load.
//
// Dequantization is q * scale + min in fp32 (one fma, the same rounding as launch_int4_dequantize
// and llm::dequantize_int4), rounded once to the model's type: the products the tensor cores take
// are the dense path's weights exactly.
//
// A block is 4 warps over 128 weight rows (two m16 tiles a warp) and 8 * kNT tokens. When the
// rows and tokens make fewer blocks than the GPU has multiprocessors, K is split over gridDim.z:
// each split adds its fp32 partial into the workspace (red.add), and the last split of a tile to
// arrive (a counter per tile) writes y and zeroes its part of the workspace and its counter again,
// so the workspace is all zeros between launches (it must be zeroed once when allocated).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/mma.cuh"
#include "backend/cuda/llm/llm_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kWarps = 4;
constexpr int kRows = kWarps * 32;   // weight rows (outputs) a block computes
constexpr int kChunk = 128;          // k per chunk: 64 bytes of nibbles a row, 16 a lane
constexpr int kUnits = kChunk / 8;   // 16-byte units of activations per token row of a chunk
constexpr int kMinChunksPerSplit = 2;

bool aligned(const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

/// The shared-memory unit of a token row's logical unit u (of kUnits): the two units a lane of a
/// quarter warp reads are 4t + p for t = 0..3 in rows g = 0, 1, which would fall on the same banks
/// four at a time; this swizzle spreads each quarter warp's eight 16-byte loads over all 32 banks.
__device__ __forceinline__ int swizzled_unit(int row, int u) { return u ^ (((u >> 3) & 1) << 1) ^ (row & 1); }

/// Four values of nibbles `first`..`first + 3` of `word`, dequantized in fp32 and packed in pairs:
/// lo = (first, first + 1), hi = (first + 2, first + 3).
template <class T>
__device__ __forceinline__ void dequant4(uint32_t word, int first, float2 sm, uint32_t& lo, uint32_t& hi) {
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    // 2^23 + q as a float, minus 2^23: the nibble's value exactly, without an int-to-float conversion.
    const float q = __uint_as_float(0x4B000000u | ((word >> (4 * (first + e))) & 0xFu)) - 8388608.0f;
    v[e] = fmaf(q, sm.x, sm.y);
  }
  lo = pack2<T>(v[0], v[1]);
  hi = pack2<T>(v[2], v[3]);
}

template <class T, int kNT>
__global__ void __launch_bounds__(kWarps * 32)
    int4_gemm_kernel(const T* __restrict__ x, const uint8_t* __restrict__ q, const float* __restrict__ scale_min,
                     T* __restrict__ y, float* __restrict__ ws, unsigned* __restrict__ counters, int n_tokens, int K,
                     int N, int group, int chunks_per_split, bool accumulate) {
  INGOT_KERNEL_ENTRY();
  constexpr int kTok = 8 * kNT;
  __shared__ __align__(16) T xs[2][kTok * kChunk];
  __shared__ bool last_split;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRows + warp * 32;
  const int tok0 = blockIdx.y * kTok;
  const int chunks = (K + kChunk - 1) / kChunk;
  const int c_begin = blockIdx.z * chunks_per_split;
  const int c_end = min(chunks, c_begin + chunks_per_split);
  const int64_t row_bytes = K / 2, groups = K / group;

  // Activations of chunk c into buffer b, zero past T and past K.
  auto stage = [&](int c, int b) {
    for (int i = threadIdx.x; i < kTok * kUnits; i += kWarps * 32) {
      const int r = i / kUnits, u = i % kUnits;
      const int tok = tok0 + r, k = c * kChunk + u * 8;
      const bool ok = tok < n_tokens && k < K;
      cp_async_16(&xs[b][r * kChunk + swizzled_unit(r, u) * 8], ok ? x + static_cast<int64_t>(tok) * K + k : x,
                  ok ? 16 : 0);
    }
    cp_async_commit();
  };
  // A lane's rows: m16 tile m, half h (row g or g + 8).
  uint4 wq[2][2], wq_next[2][2];
  float2 sm[2][2], sm_next[2][2];
  auto load_weights = [&](int c, uint4 (&dq)[2][2], float2 (&dsm)[2][2]) {
    const int k = c * kChunk + 32 * t;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 16 * m + 8 * h + g;
        if (row < N && k < K) {
          dq[m][h] = __ldg(reinterpret_cast<const uint4*>(q + row * row_bytes + k / 2));
          dsm[m][h] = __ldg(reinterpret_cast<const float2*>(scale_min) + row * groups + k / group);
        } else {
          dq[m][h] = make_uint4(0, 0, 0, 0);
          dsm[m][h] = make_float2(0.0f, 0.0f);  // a weight of 0 whatever the nibbles
        }
      }
  };

  float acc[2][kNT][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][j][e] = 0.0f;

  if (c_begin < c_end) {
    stage(c_begin, 0);
    load_weights(c_begin, wq, sm);
  }
  for (int c = c_begin; c < c_end; ++c) {
    const int b = (c - c_begin) & 1;
    if (c + 1 < c_end) {
      stage(c + 1, b ^ 1);
      load_weights(c + 1, wq_next, sm_next);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* xb = xs[b];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      // A for steps 2p (nibbles 0-3 of word p) and 2p + 1 (nibbles 4-7).
      uint32_t a[2][2][4];  // [step][m][reg]
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const uint32_t w0 = p == 0 ? wq[m][0].x : p == 1 ? wq[m][0].y : p == 2 ? wq[m][0].z : wq[m][0].w;
        const uint32_t w1 = p == 0 ? wq[m][1].x : p == 1 ? wq[m][1].y : p == 2 ? wq[m][1].z : wq[m][1].w;
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          dequant4<T>(w0, 4 * s, sm[m][0], a[s][m][0], a[s][m][2]);  // row g: slots 2t.., 2t+8..
          dequant4<T>(w1, 4 * s, sm[m][1], a[s][m][1], a[s][m][3]);  // row g + 8
        }
      }
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const int r = 8 * j + g;
        const uint4 bx = *reinterpret_cast<const uint4*>(xb + r * kChunk + swizzled_unit(r, 4 * t + p) * 8);
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          mma_16816<T>(acc[m][j], a[0][m], bx.x, bx.y);
          mma_16816<T>(acc[m][j], a[1][m], bx.z, bx.w);
        }
      }
    }
    __syncthreads();  // buffer b is staged again two chunks on
    if (c + 1 < c_end) {
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          wq[m][h] = wq_next[m][h];
          sm[m][h] = sm_next[m][h];
        }
    }
  }

  // acc[m][j]: rows row0 + 16m + g (+8 for elements 2, 3), tokens tok0 + 8j + 2t (+1 for 1, 3).
  auto for_each_output = [&](auto&& f) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + 16 * m + g + 8 * (e >> 1), tok = tok0 + 8 * j + 2 * t + (e & 1);
          if (row < N && tok < n_tokens) f(static_cast<int64_t>(tok) * N + row, acc[m][j][e]);
        }
  };
  if (gridDim.z == 1) {
    for_each_output([&](int64_t i, float v) {
      if (accumulate) v += to_f32(y[i]);
      y[i] = from_f32<T>(v);
    });
    return;
  }
  for_each_output([&](int64_t i, float v) { atomicAdd(ws + i, v); });
  __threadfence();
  __syncthreads();
  const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) last_split = atomicAdd(counters + tile, 1u) == gridDim.z - 1;
  __syncthreads();
  if (!last_split) return;
  __threadfence();
  for_each_output([&](int64_t i, float) {
    float v = __ldcg(ws + i);
    __stcg(ws + i, 0.0f);
    if (accumulate) v += to_f32(y[i]);
    y[i] = from_f32<T>(v);
  });
  if (threadIdx.x == 0) counters[tile] = 0;
}

struct Int4GemmShape {
  int nt = 8;          // token tiles of 8 a block
  dim3 grid;
  int chunks_per_split = 0;
};

Int4GemmShape int4_gemm_shape(int64_t T, int64_t K, int64_t N, int sm_count) {
  Int4GemmShape s;
  s.nt = T <= 8 ? 1 : T <= 16 ? 2 : T <= 32 ? 4 : 8;
  const int64_t gx = (N + kRows - 1) / kRows, gy = (T + 8 * s.nt - 1) / (8 * s.nt);
  const int64_t chunks = (K + kChunk - 1) / kChunk;
  int64_t splits = 1;
  if (gx * gy < sm_count) {
    splits = std::min<int64_t>((sm_count + gx * gy - 1) / (gx * gy), std::max<int64_t>(1, chunks / kMinChunksPerSplit));
  }
  const int64_t per = (chunks + splits - 1) / splits;
  splits = (chunks + per - 1) / per;  // no empty split
  s.grid = dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(splits));
  s.chunks_per_split = static_cast<int>(per);
  return s;
}

/// The workspace: a counter per output tile (room for the most tiles any token tiling of T makes),
/// rounded up to 256 bytes, then T x N fp32 partial sums.
size_t counter_bytes(int64_t T, int64_t N) {
  const size_t n = static_cast<size_t>((N + kRows - 1) / kRows) * static_cast<size_t>((T + 7) / 8) * sizeof(unsigned);
  return (n + 255) / 256 * 256;
}

template <class E>
cudaError_t run_int4_gemm(const Int4GemmShape& s, const void* x, const uint8_t* q, const float* scale_min, void* y,
                          void* workspace, int64_t T, int64_t K, int64_t N, int64_t group, bool accumulate,
                          cudaStream_t stream) {
  unsigned* counters = static_cast<unsigned*>(workspace);
  float* ws = workspace ? reinterpret_cast<float*>(static_cast<char*>(workspace) + counter_bytes(T, N)) : nullptr;
  const E* xt = static_cast<const E*>(x);
  E* yt = static_cast<E*>(y);
  const dim3 block(kWarps * 32);
  const int t = static_cast<int>(T), k = static_cast<int>(K), n = static_cast<int>(N), gr = static_cast<int>(group);
  switch (s.nt) {
    case 1:
      return launch_kernel(int4_gemm_kernel<E, 1>, s.grid, block, 0, stream, xt, q, scale_min, yt, ws, counters, t, k,
                           n, gr, s.chunks_per_split, accumulate);
    case 2:
      return launch_kernel(int4_gemm_kernel<E, 2>, s.grid, block, 0, stream, xt, q, scale_min, yt, ws, counters, t, k,
                           n, gr, s.chunks_per_split, accumulate);
    case 4:
      return launch_kernel(int4_gemm_kernel<E, 4>, s.grid, block, 0, stream, xt, q, scale_min, yt, ws, counters, t, k,
                           n, gr, s.chunks_per_split, accumulate);
    default:
      return launch_kernel(int4_gemm_kernel<E, 8>, s.grid, block, 0, stream, xt, q, scale_min, yt, ws, counters, t, k,
                           n, gr, s.chunks_per_split, accumulate);
  }
}

bool int4_gemm_dims_ok(int64_t T, int64_t K, int64_t N, int64_t group) {
  return T >= 0 && N >= 0 && K > 0 && int4_group_ok(group) && K % group == 0 && T <= (int64_t{1} << 22) &&
         K <= (int64_t{1} << 30) && N <= (int64_t{1} << 30) && N * K / 2 < (int64_t{1} << 62);
}

}  // namespace

size_t int4_gemm_workspace_bytes(int64_t T, int64_t K, int64_t N, int64_t group, int sm_count) {
  if (!int4_gemm_dims_ok(T, K, N, group) || T == 0 || N == 0 || sm_count <= 0) return 0;
  if (int4_gemm_shape(T, K, N, sm_count).grid.z == 1) return 0;
  return int4_gemm_workspace_bound(T, N);
}

size_t int4_gemm_workspace_bound(int64_t T, int64_t N) {
  if (T <= 0 || N <= 0) return 0;
  return counter_bytes(T, N) + static_cast<size_t>(T) * static_cast<size_t>(N) * sizeof(float);
}

cudaError_t launch_int4_gemm(FloatType t, const void* x, const uint8_t* q, const float* scale_min, void* y, int64_t T,
                             int64_t K, int64_t N, int64_t group, bool accumulate, void* workspace,
                             size_t workspace_bytes, int sm_count, cudaStream_t stream) {
  if ((t != FloatType::kF16 && t != FloatType::kBF16) || !int4_gemm_dims_ok(T, K, N, group) || sm_count <= 0)
    return cudaErrorInvalidValue;
  if (T == 0 || N == 0) return cudaSuccess;
  if (!x || !q || !scale_min || !y || !aligned(x, 16) || !aligned(q, 16) || !aligned(scale_min, 8) || !aligned(y, 2))
    return cudaErrorInvalidValue;
  const Int4GemmShape s = int4_gemm_shape(T, K, N, sm_count);
  if (s.grid.z > 1) {  // split K: the workspace (zeros) is needed, else run unsplit
    if (!workspace || workspace_bytes < int4_gemm_workspace_bound(T, N) ||
        !aligned(workspace, 256))
      return cudaErrorInvalidValue;
  }
  return t == FloatType::kF16
             ? run_int4_gemm<__half>(s, x, q, scale_min, y, workspace, T, K, N, group, accumulate, stream)
             : run_int4_gemm<__nv_bfloat16>(s, x, q, scale_min, y, workspace, T, K, N, group, accumulate, stream);
}

}  // namespace ingot::backend::cuda
