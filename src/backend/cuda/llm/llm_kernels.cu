// Copyright ingot authors. Apache-2.0.
//
// Device code of the LLM decoder runtime (see llm_kernels.h).
//
// rope_kv_write: one CTA per token; a thread owns a rotary pair index i, takes cos/sin of
// pos * inv_freq[i] once and rotates that pair in every q head and kv head (pairs loaded and
// stored as one half2/bfloat162 word, neighbouring threads on neighbouring words), then stores the
// rotated k and the v pair into the caches.
//
// paged_decode_attention: one CTA of kWarps warps per (head, sequence, partition). q is scaled
// and staged in shared memory as fp32. The warps take 32-position tiles of the partition in turn;
// in a tile lane j owns position j: it looks the position up in the block table, reads the whole
// K row with 16-byte loads and forms its score, the warp takes the tile maximum and rescales its
// running (max, sum, output); then for each position of the tile every lane accumulates its
// head_dim / 32 output dims from the V row (coalesced across the warp). The warps' states merge in
// shared memory at the end: the output (no split) or the partition's partial state (split), which
// combine_kernel reduces over the partitions of each (sequence, head).
//
// silu_mul_packed and add_bias_rows: grid-stride elementwise loops (the gated MLP's activation over
// the fused gate/up output; Qwen2's projection biases).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/llm/llm_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "core/hash_uniform.h"

namespace ingot::backend::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;  // per attention CTA

template <class T>
struct PairOf;
template <>
struct PairOf<__half> {
  using type = __half2;
};
template <>
struct PairOf<__nv_bfloat16> {
  using type = __nv_bfloat162;
};
template <class T>
using pair_t = typename PairOf<T>::type;

__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }

template <class T2>
__device__ __forceinline__ T2 from_float2(float a, float b);
template <>
__device__ __forceinline__ __half2 from_float2<__half2>(float a, float b) { return __floats2half2_rn(a, b); }
template <>
__device__ __forceinline__ __nv_bfloat162 from_float2<__nv_bfloat162>(float a, float b) {
  return __floats2bfloat162_rn(a, b);
}

using ew::from_f32;
using ew::to_f32;
using ew::Pack;

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// ---- rope_kv_write -------------------------------------------------------------------------

/// fp8 KV cache pairs: two e4m3 values in one 16-bit word.
__device__ __forceinline__ float2 fp8x2_to_float2(__nv_fp8x2_storage_t v) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3)));
}
__device__ __forceinline__ __nv_fp8x2_storage_t float2_to_fp8x2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

template <class T, bool kFp8>
__global__ void rope_kv_write_kernel(RopeKvWriteParams p) {
  INGOT_KERNEL_ENTRY();
  using T2 = pair_t<T>;
  using C2 = std::conditional_t<kFp8, __nv_fp8x2_storage_t, T2>;  // a pair of cache elements
  const int64_t t = blockIdx.x;
  const int half = p.head_dim / 2;
  const int64_t pos = p.positions[t];
  const int64_t slot = p.slot_mapping[t];
  // Rows in pairs of elements: packed tensors, or slices of one fused [q | k | v] row.
  const int64_t qs = p.row_stride ? p.row_stride / 2 : static_cast<int64_t>(p.num_heads) * half;
  const int64_t ks = p.row_stride ? p.row_stride / 2 : static_cast<int64_t>(p.num_kv_heads) * half;
  const T2* q_in = static_cast<const T2*>(p.q) + t * qs;
  T2* q = p.q_out ? static_cast<T2*>(p.q_out) + t * p.num_heads * half : static_cast<T2*>(p.q) + t * qs;
  T2* k = static_cast<T2*>(p.k) + t * ks;
  const T2* v = static_cast<const T2*>(p.v) + t * ks;
  C2* kc = slot >= 0 ? static_cast<C2*>(p.k_cache) + slot * p.num_kv_heads * half : nullptr;
  C2* vc = slot >= 0 ? static_cast<C2*>(p.v_cache) + slot * p.num_kv_heads * half : nullptr;
  const float k_inv = 1.0f / p.k_scale, v_inv = 1.0f / p.v_scale;
  // The token's angles once (double, as the CPU reference computes them), then every (head,
  // pair) of q and k in parallel: at batch 1 a thread per pair looping over the heads left the
  // step latency-bound (14 us per layer on the H100 for Llama-3.2-1B, session 30).
  extern __shared__ float2 cs[];  // [half]: (cos, sin)
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double sd, cd;
    sincos(static_cast<double>(pos) * static_cast<double>(p.inv_freq[i]), &sd, &cd);
    cs[i] = make_float2(static_cast<float>(cd), static_cast<float>(sd));
  }
  __syncthreads();
  const int q_pairs = p.num_heads * half, all_pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int idx = threadIdx.x; idx < all_pairs; idx += blockDim.x) {
    const bool is_q = idx < q_pairs;
    const int hi = is_q ? idx : idx - q_pairs;  // h * half + i
    const float2 r2 = cs[hi % half];
    const float c = r2.x, s = r2.y;
    if (is_q) {
      const float2 x = to_float2(q_in[hi]);
      q[hi] = from_float2<T2>(x.x * c - x.y * s, x.x * s + x.y * c);
      continue;
    }
    const float2 x = to_float2(k[hi]);
    const T2 r = from_float2<T2>(x.x * c - x.y * s, x.x * s + x.y * c);
    k[hi] = r;
    if (kc) {
      if constexpr (kFp8) {  // the rounded k (what the activations' type holds), then scaled to e4m3
        const float2 kr = to_float2(r), vr = to_float2(v[hi]);
        kc[hi] = float2_to_fp8x2(kr.x * k_inv, kr.y * k_inv);
        vc[hi] = float2_to_fp8x2(vr.x * v_inv, vr.y * v_inv);
      } else {
        kc[hi] = r;
        vc[hi] = v[hi];
      }
    }
  }
}

// ---- paged_decode_attention ----------------------------------------------------------------

/// Partial state layout in the workspace: acc [B][H][P][D], then max [B][H][P], then sum [B][H][P].
struct Workspace {
  float* acc = nullptr;
  float* max = nullptr;
  float* sum = nullptr;
};

/// The head_dim / 32 consecutive elements a lane owns in a V row, as one load.
template <int kPer>
using LaneVec = std::conditional_t<kPer == 4, uint2, uint32_t>;

/// Elements of a cache row per 16-byte load: 16 e4m3 or 8 fp16/bf16.
template <bool kFp8>
constexpr int kCacheLoadElems = kFp8 ? 16 : 8;

/// 16 bytes of fp16/bf16 as 8 floats; fp8_weights_to_float: 16 bytes of e4m3 as 16 floats.
template <class T>
__device__ __forceinline__ void weights_to_float(const uint4& u, float* f) {
  const pair_t<T>* e = reinterpret_cast<const pair_t<T>*>(&u);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 v = to_float2(e[j]);
    f[2 * j] = v.x;
    f[2 * j + 1] = v.y;
  }
}
__device__ __forceinline__ void fp8_weights_to_float(const uint4& u, float* f) {
  const __nv_fp8x2_storage_t* e = reinterpret_cast<const __nv_fp8x2_storage_t*>(&u);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 v = fp8x2_to_float2(e[j]);
    f[2 * j] = v.x;
    f[2 * j + 1] = v.y;
  }
}

/// One 16-byte load of a K row as floats (e4m3 unscaled: the scale is in q).
template <class T, bool kFp8>
__device__ __forceinline__ void cache_chunk_to_float(const uint4& u, float* f) {
  if constexpr (kFp8)
    fp8_weights_to_float(u, f);
  else
    weights_to_float<T>(u, f);
}

/// The kPer elements lane `lane` owns of the V row at element offset `off` (a cache slot's start
/// plus the KV head's), as floats; e4m3 times v_scale.
template <class T, int kPer, bool kFp8>
__device__ __forceinline__ void v_lane_to_float(const unsigned char* vc, int64_t off, int lane, float v_scale,
                                                float* v) {
  if constexpr (kFp8) {
    using V8 = std::conditional_t<kPer == 4, uint32_t, uint16_t>;
    const V8 u = *reinterpret_cast<const V8*>(vc + off + lane * kPer);
    const __nv_fp8x2_storage_t* e = reinterpret_cast<const __nv_fp8x2_storage_t*>(&u);
#pragma unroll
    for (int i = 0; i < kPer / 2; ++i) {
      const float2 f = fp8x2_to_float2(e[i]);
      v[2 * i] = f.x * v_scale;
      v[2 * i + 1] = f.y * v_scale;
    }
  } else {
    const LaneVec<kPer> u = *reinterpret_cast<const LaneVec<kPer>*>(vc + (off + lane * kPer) * 2);
    const pair_t<T>* e = reinterpret_cast<const pair_t<T>*>(&u);
#pragma unroll
    for (int i = 0; i < kPer / 2; ++i) {
      const float2 f = to_float2(e[i]);
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  }
}

/// Element d of (sequence, head) bh's result: its partial state in the workspace when the context
/// is split (combine_kernel merges them), else the normalized output.
template <class T, int D>
__device__ __forceinline__ void store_decode_result(const PagedDecodeParams& p, const Workspace& ws, int num_parts,
                                                    int part, int64_t bh, int d, float a, float mx, float total) {
  if (num_parts > 1) {
    const int64_t idx = bh * num_parts + part;
    ws.acc[idx * D + d] = a;
    if (d == 0) {
      ws.max[idx] = mx;
      ws.sum[idx] = total;
    }
  } else {
    static_cast<T*>(p.o)[bh * D + d] = from_f32<T>(total > 0.0f ? a / total : 0.0f);
  }
}

template <class T, int D, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) paged_decode_kernel(PagedDecodeParams p, Workspace ws, int num_parts) {
  INGOT_KERNEL_ENTRY();
  static_assert(D % 32 == 0 && (D / 32 == 2 || D / 32 == 4), "head_dim 64 or 128");
  constexpr int kPer = D / 32;
  const int h = blockIdx.x, b = blockIdx.y, part = blockIdx.z;
  const int len = p.context_lens[b];
  int begin = 0, end = len;
  if (num_parts > 1) {
    begin = part * p.partition_size;
    if (begin >= len) return;  // past this sequence: combine_kernel reads only partitions < len
    end = min(len, begin + p.partition_size);
  }
  const int kvh = h / (p.num_heads / p.num_kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  __shared__ float q_s[D];
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float acc_s[kWarps][D];
  const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.num_heads + h) * D;
  // An fp8 cache holds k / k_scale: its scale joins the softmax scale; v's multiplies each V row.
  const float qk_scale = kFp8 ? p.scale * p.k_scale : p.scale;
  const float v_scale = kFp8 ? p.v_scale : 1.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) q_s[i] = to_f32(q[i]) * qk_scale;
  __syncthreads();

  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks_per_seq;
  const int64_t row = static_cast<int64_t>(p.num_kv_heads) * D;  // elements per cache slot
  // Byte views of the caches (elements of 2 bytes, or 1 for fp8).
  constexpr int kEs = kFp8 ? 1 : 2;
  const unsigned char* kc = static_cast<const unsigned char*>(p.k_cache) + static_cast<int64_t>(kvh) * D * kEs;
  const unsigned char* vc = static_cast<const unsigned char*>(p.v_cache) + static_cast<int64_t>(kvh) * D * kEs;

  float m = -INFINITY, l = 0.0f;
  float acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = 0.0f;

  for (int tile = begin + warp * 32; tile < end; tile += kWarps * 32) {
    const int t = tile + lane;
    float s = -INFINITY;
    int64_t off = 0;
    if (t < end) {
      const int64_t blk = table[t / p.block_size];
      off = (blk * p.block_size + t % p.block_size) * row;
      const uint4* kp = reinterpret_cast<const uint4*>(kc + off * kEs);
      constexpr int kL = kCacheLoadElems<kFp8>;
      float dot = 0.0f;
#pragma unroll
      for (int c = 0; c < D / kL; ++c) {
        float f[kL];
        cache_chunk_to_float<T, kFp8>(kp[c], f);
#pragma unroll
        for (int j = 0; j < kL; j += 2) dot += q_s[c * kL + j] * f[j] + q_s[c * kL + j + 1] * f[j + 1];
      }
      s = dot;
    }
    const float m_new = fmaxf(m, warp_max(s));  // finite: the tile holds at least one position
    const float corr = expf(m - m_new);          // 0 on the first tile (m = -inf)
    const float pr = t < end ? expf(s - m_new) : 0.0f;
    l = l * corr + warp_sum(pr);
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] *= corr;
    m = m_new;
    // All 32 positions, unrolled, whether or not the tile is full (past the end a lane reads lane
    // 0's row, and what it reads is selected away, never multiplied in by a zero weight): the
    // V loads of several positions are then in flight at once; a loop to the tile's fill waited
    // for each in turn (23 us per layer at batch 1 and 256 positions on the H100, session 30).
    const int n = min(32, end - tile);
    const int64_t off0 = __shfl_sync(kFullMask, off, 0);  // lane 0's position is in the context
    if (t >= end) off = off0;
#pragma unroll 8
    for (int j = 0; j < 32; ++j) {
      const bool in = j < n;
      const float pj = __shfl_sync(kFullMask, pr, j);
      const int64_t oj = __shfl_sync(kFullMask, off, j);
      float v[kPer];
      v_lane_to_float<T, kPer, kFp8>(vc, oj, lane, v_scale, v);
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] = in ? fmaf(pj, v[e], acc[e]) : acc[e];
    }
  }

  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc_s[warp][lane * kPer + e] = acc[e];
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w]);
  float factor[kWarps];
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    factor[w] = m_s[w] == -INFINITY ? 0.0f : expf(m_s[w] - mx);  // a warp without positions: 0
    total += l_s[w] * factor[w];
  }
  const int64_t bh = static_cast<int64_t>(b) * p.num_heads + h;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < kWarps; ++w) a += acc_s[w][d] * factor[w];
    store_decode_result<T, D>(p, ws, num_parts, part, bh, d, a, mx, total);
  }
}

/// paged_decode_kernel for a whole GQA group at once (PagedDecodeParams::grouped): one CTA per (KV
/// head, sequence, partition) computes the group's G = num_heads / num_kv_heads query heads (G <=
/// kMaxG) over the same positions, so each K/V row is read once per group instead of once per query
/// head (Llama-3's 4: at batch 64 and 256 positions the per-head kernel read 134 MB a layer for 33.5
/// MB of cache, 0.75 ms of a 2.1 ms step on the H100, session 43). Per 32-position warp tile a lane
/// loads its position's K row once and takes its dot product with all G queries; each V row is read
/// once and added into the G accumulators with that head's weight. The same online softmax per
/// head as paged_decode_kernel, and the same partial-state layout for combine_kernel.
template <class T, int D, bool kFp8, int kMaxG>
__global__ void __launch_bounds__(kWarps * 32)
    paged_decode_grouped_kernel(PagedDecodeParams p, Workspace ws, int num_parts) {
  INGOT_KERNEL_ENTRY();
  static_assert(D % 32 == 0 && (D / 32 == 2 || D / 32 == 4), "head_dim 64 or 128");
  constexpr int kPer = D / 32;
  const int kvh = blockIdx.x, b = blockIdx.y, part = blockIdx.z;
  const int G = p.num_heads / p.num_kv_heads;  // <= kMaxG (the launcher checked)
  const int len = p.context_lens[b];
  int begin = 0, end = len;
  if (num_parts > 1) {
    begin = part * p.partition_size;
    if (begin >= len) return;
    end = min(len, begin + p.partition_size);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  __shared__ float q_s[kMaxG][D];
  __shared__ float m_s[kWarps][kMaxG], l_s[kWarps][kMaxG];
  __shared__ float acc_s[kWarps][kMaxG][D];
  const int h0 = kvh * G;  // the group's first query head
  const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.num_heads + h0) * D;
  const float qk_scale = kFp8 ? p.scale * p.k_scale : p.scale;
  const float v_scale = kFp8 ? p.v_scale : 1.0f;
  for (int i = threadIdx.x; i < kMaxG * D; i += blockDim.x) q_s[i / D][i % D] = i / D < G ? to_f32(q[i]) * qk_scale : 0.0f;
  __syncthreads();

  const int32_t* table = p.block_tables + static_cast<int64_t>(b) * p.max_blocks_per_seq;
  const int64_t row = static_cast<int64_t>(p.num_kv_heads) * D;
  constexpr int kEs = kFp8 ? 1 : 2;
  const unsigned char* kc = static_cast<const unsigned char*>(p.k_cache) + static_cast<int64_t>(kvh) * D * kEs;
  const unsigned char* vc = static_cast<const unsigned char*>(p.v_cache) + static_cast<int64_t>(kvh) * D * kEs;

  float m[kMaxG], l[kMaxG], acc[kMaxG][kPer];
#pragma unroll
  for (int g = 0; g < kMaxG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[g][e] = 0.0f;
  }

  for (int tile = begin + warp * 32; tile < end; tile += kWarps * 32) {
    const int t = tile + lane;
    float s[kMaxG];
#pragma unroll
    for (int g = 0; g < kMaxG; ++g) s[g] = 0.0f;
    int64_t off = 0;
    if (t < end) {
      const int64_t blk = table[t / p.block_size];
      off = (blk * p.block_size + t % p.block_size) * row;
      const uint4* kp = reinterpret_cast<const uint4*>(kc + off * kEs);
      constexpr int kL = kCacheLoadElems<kFp8>;
#pragma unroll
      for (int c = 0; c < D / kL; ++c) {
        float f[kL];
        cache_chunk_to_float<T, kFp8>(kp[c], f);
#pragma unroll
        for (int g = 0; g < kMaxG; ++g) {
          if (g >= G) break;
#pragma unroll
          for (int j = 0; j < kL; ++j) s[g] = fmaf(q_s[g][c * kL + j], f[j], s[g]);
        }
      }
    }
    float pr[kMaxG];
#pragma unroll
    for (int g = 0; g < kMaxG; ++g) {
      if (g >= G) break;
      const float sg = t < end ? s[g] : -INFINITY;
      const float m_new = fmaxf(m[g], warp_max(sg));  // finite: the tile holds at least one position
      const float corr = expf(m[g] - m_new);           // 0 on the first tile (m = -inf)
      pr[g] = t < end ? expf(sg - m_new) : 0.0f;
      l[g] = l[g] * corr + warp_sum(pr[g]);
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[g][e] *= corr;
      m[g] = m_new;
    }
    // The tile's V rows, each read once for the whole group (past the end a lane reads lane 0's row,
    // selected away as in paged_decode_kernel).
    const int n = min(32, end - tile);
    const int64_t off0 = __shfl_sync(kFullMask, off, 0);
    if (t >= end) off = off0;
#pragma unroll 4
    for (int j = 0; j < 32; ++j) {
      const bool in = j < n;
      const int64_t oj = __shfl_sync(kFullMask, off, j);
      float v[kPer];
      v_lane_to_float<T, kPer, kFp8>(vc, oj, lane, v_scale, v);
#pragma unroll
      for (int g = 0; g < kMaxG; ++g) {
        if (g >= G) break;
        const float pj = __shfl_sync(kFullMask, pr[g], j);
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[g][e] = in ? fmaf(pj, v[e], acc[g][e]) : acc[g][e];
      }
    }
  }

#pragma unroll
  for (int g = 0; g < kMaxG; ++g) {
    if (g >= G) break;
    if (lane == 0) {
      m_s[warp][g] = m[g];
      l_s[warp][g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc_s[warp][g][lane * kPer + e] = acc[g][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int g = i / D, d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
    float total = 0.0f, a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float f = m_s[w][g] == -INFINITY ? 0.0f : expf(m_s[w][g] - mx);  // a warp without positions: 0
      total += l_s[w][g] * f;
      a += acc_s[w][g][d] * f;
    }
    store_decode_result<T, D>(p, ws, num_parts, part, static_cast<int64_t>(b) * p.num_heads + h0 + g, d, a, mx,
                              total);
  }
}

/// One CTA of head_dim threads per (head, sequence): merges the partitions' partial states.
template <class T, int D>
__global__ void __launch_bounds__(D) combine_kernel(PagedDecodeParams p, Workspace ws, int num_parts) {
  INGOT_KERNEL_ENTRY();
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int len = p.context_lens[b];
  const int parts = min(num_parts, (len + p.partition_size - 1) / p.partition_size);
  const int64_t bh = static_cast<int64_t>(b) * p.num_heads + h;
  const int64_t base = bh * num_parts;
  float mx = -INFINITY;
  for (int i = 0; i < parts; ++i) mx = fmaxf(mx, ws.max[base + i]);
  float total = 0.0f, a = 0.0f;
  for (int i = 0; i < parts; ++i) {
    const float f = expf(ws.max[base + i] - mx);
    total += ws.sum[base + i] * f;
    a += ws.acc[(base + i) * D + d] * f;
  }
  static_cast<T*>(p.o)[bh * D + d] = from_f32<T>(total > 0.0f ? a / total : 0.0f);
}

/// The grouped kernel's largest group (query heads per KV head): Llama-3's 4, Qwen2's up to 7, 8.
constexpr int kMaxDecodeGroup = 8;

template <class T, int D, bool kFp8>
void launch_grouped_decode(const PagedDecodeParams& p, Workspace ws, int num_parts, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_kv_heads), static_cast<unsigned>(p.batch), static_cast<unsigned>(num_parts));
  const int group = p.num_heads / p.num_kv_heads;
  if (group <= 2)
    launch_kernel(paged_decode_grouped_kernel<T, D, kFp8, 2>, grid, kWarps * 32, 0, stream, p, ws, num_parts);
  else if (group <= 4)
    launch_kernel(paged_decode_grouped_kernel<T, D, kFp8, 4>, grid, kWarps * 32, 0, stream, p, ws, num_parts);
  else
    launch_kernel(paged_decode_grouped_kernel<T, D, kFp8, kMaxDecodeGroup>, grid, kWarps * 32, 0, stream, p, ws,
                  num_parts);
}

template <class T, int D>
cudaError_t run_paged_decode(const PagedDecodeParams& p, Workspace ws, int num_parts, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.batch), static_cast<unsigned>(num_parts));
  if (p.grouped)
    p.fp8_cache ? launch_grouped_decode<T, D, true>(p, ws, num_parts, stream)
                : launch_grouped_decode<T, D, false>(p, ws, num_parts, stream);
  else if (p.fp8_cache)
    launch_kernel(paged_decode_kernel<T, D, true>, grid, kWarps * 32, 0, stream, p, ws, num_parts);
  else
    launch_kernel(paged_decode_kernel<T, D, false>, grid, kWarps * 32, 0, stream, p, ws, num_parts);
  if (num_parts > 1) {
    const dim3 cgrid(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(p.batch));
    launch_kernel(combine_kernel<T, D>, cgrid, D, 0, stream, p, ws, num_parts);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t run_paged_decode_type(const PagedDecodeParams& p, Workspace ws, int num_parts, cudaStream_t stream) {
  return p.head_dim == 64 ? run_paged_decode<T, 64>(p, ws, num_parts, stream)
                          : run_paged_decode<T, 128>(p, ws, num_parts, stream);
}

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// ---- gemv_small_t --------------------------------------------------------------------------

constexpr int kGemvWarps = 8;  // columns per CTA

/// 16 bytes of int4 weights (llm_kernels.h's layout) as 32 floats, the nibbles' values 0..15.
__device__ __forceinline__ void int4_weights_to_float(const uint4& u, float* f) {
  const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) f[8 * i + j] = static_cast<float>((words[i] >> (4 * j)) & 0xF);
}

/// What the decode GEMV reads as its activations (GemvPrologue's kinds): x itself; x normalized by
/// its row's RMS and the norm weight (the RMSNorm before a projection); silu(gate) * up of a packed
/// gate/up row (the gated MLP's activation before the down projection).
enum class GemvIn { kPlain, kRmsNorm, kSiluMul };

/// The activation row t of a decode GEMV: x and its row length (2K for kSiluMul's packed rows), the
/// norm weight and the row's 1/RMS for kRmsNorm.
template <class T>
struct GemvRow {
  const T* x;
  int64_t pitch;
  const T* gamma;
  float rstd;
};

/// Activations k .. k + 7 of row r (k a multiple of 8; the loads are 16 bytes) as kIn reads them, in
/// fp32: the RMSNorm and the SiLU gate are applied here, unrounded.
template <class T, GemvIn kIn>
__device__ __forceinline__ void activations8(const GemvRow<T>& r, int64_t k, int64_t K, float* xf) {
  if constexpr (kIn == GemvIn::kSiluMul) {
    float g[8], u[8];
    weights_to_float<T>(__ldg(reinterpret_cast<const uint4*>(r.x + k)), g);
    weights_to_float<T>(__ldg(reinterpret_cast<const uint4*>(r.x + K + k)), u);
#pragma unroll
    for (int j = 0; j < 8; ++j) xf[j] = g[j] / (1.0f + __expf(-g[j])) * u[j];
  } else {
    weights_to_float<T>(__ldg(reinterpret_cast<const uint4*>(r.x + k)), xf);
    if constexpr (kIn == GemvIn::kRmsNorm) {
      float gm[8];
      weights_to_float<T>(__ldg(reinterpret_cast<const uint4*>(r.gamma + k)), gm);
#pragma unroll
      for (int j = 0; j < 8; ++j) xf[j] = xf[j] * r.rstd * gm[j];
    }
  }
}

/// sum += the dot product of kPer activations of row r from column k0 with f, 8 at a time; with
/// kXSum, xsum += the activations' sum too (int4's min term).
template <class T, int kPer, GemvIn kIn, bool kXSum = false>
__device__ __forceinline__ void dot_chunk(const GemvRow<T>& r, int64_t k0, int64_t K, const float* f, float& sum,
                                          float* xsum = nullptr) {
#pragma unroll
  for (int h = 0; h < kPer; h += 8) {
    float xf[8];
    activations8<T, kIn>(r, k0 + h, K, xf);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sum = fmaf(xf[j], f[h + j], sum);
      if constexpr (kXSum) *xsum += xf[j];
    }
  }
}

/// dot_chunk's product with the activations already prepared in fp32 (shared memory, `xs` the row):
/// the same values and the same order of operations as dot_chunk.
template <int kPer, bool kXSum = false>
__device__ __forceinline__ void dot_staged(const float* xs, int64_t k0, const float* f, float& sum,
                                           float* xsum = nullptr) {
#pragma unroll
  for (int h = 0; h < kPer; h += 4) {
    const float4 v = *reinterpret_cast<const float4*>(xs + k0 + h);
    const float xf[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sum = fmaf(xf[j], f[h + j], sum);
      if constexpr (kXSum) *xsum += xf[j];
    }
  }
}

/// kRmsNorm: 1 / sqrt(mean(x[t]^2) + eps) for each of the kT rows, by the whole block (every
/// thread takes part, so it runs before any warp leaves), into rstd[].
template <class T, int kT>
__device__ __forceinline__ void block_rms(const T* x, int64_t K, float eps, float* rstd) {
  __shared__ float part[kT][kGemvWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < K / 8; c += blockDim.x) {
      float xf[8];
      weights_to_float<T>(__ldg(reinterpret_cast<const uint4*>(x + t * K + 8 * c)), xf);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss = fmaf(xf[j], xf[j], ss);
    }
    ss = warp_sum(ss);
    if (lane == 0) part[t][warp] = ss;
  }
  __syncthreads();
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    float ss = 0.0f;
#pragma unroll
    for (int w = 0; w < kGemvWarps; ++w) ss += part[t][w];
    rstd[t] = rsqrtf(ss / static_cast<float>(K) + eps);
  }
}

/// The weight formats of the decode GEMV: the model's type, float8 e4m3 with a per-tensor scale,
/// int4 with a (scale, min) pair per group.
enum class GemvWeights { kModelType, kFp8, kInt4 };

/// One warp per output column n: lanes stride over K in 16-byte weight chunks (kPer elements),
/// each chunk multiplied into all T tokens' partial sums, then a warp reduction per token. An int4
/// chunk (32 elements, within one group) is summed unscaled with the activations' own sum beside
/// it; its group's scale and min then apply once. kIn says how the activations are read (GemvIn).
/// kStaged (a prologue whose T x K fp32 activations fit kGemvStagedBytes): the block prepares the
/// activations once into shared memory, and its warps read them there. Unstaged, every warp
/// recomputes the RMSNorm or the SiLU gate for each chunk it reads: eight times the work per block,
/// and on the down projection (K = 8192 in a 1B model) the exp of every activation per column --
/// the reason the unstaged prologue measured slower than separate kernels (2026-12-07, H100, b1
/// 534 vs 569 tok/s).
/// kSplit > 1 (one token only): kSplit warps share a column, each taking a contiguous kSplit-th of
/// its chunks, and their sums meet in shared memory in slice order: kSplit times the warps and
/// loads in flight for the same bytes, for projections whose N / 8 blocks leave the memory
/// system latency-bound (session 40's b1 profile: the output projection at 0.86 TB/s).
template <class T, GemvWeights kW, int kT, GemvIn kIn, bool kStaged, int kSplit>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_small_t_kernel(const T* __restrict__ x, const void* __restrict__ w, const float* __restrict__ w_scale,
                        T* __restrict__ y, int64_t K, int64_t N, int64_t group, bool accumulate,
                        const T* __restrict__ gamma, float eps) {
  INGOT_KERNEL_ENTRY();
  constexpr int kPer = kW == GemvWeights::kInt4 ? 32 : kW == GemvWeights::kFp8 ? 16 : 8;  // per 16-byte load
  extern __shared__ float4 gemv_xs[];  // kStaged: kT rows of K floats
  float* xs = reinterpret_cast<float*>(gemv_xs);
  float rstd[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) rstd[t] = 1.0f;
  if constexpr (kIn == GemvIn::kRmsNorm) block_rms<T, kT>(x, K, eps, rstd);
  const int64_t pitch = kIn == GemvIn::kSiluMul ? 2 * K : K;
  if constexpr (kStaged) {
#pragma unroll
    for (int t = 0; t < kT; ++t)
      for (int64_t c = threadIdx.x; c < K / 8; c += blockDim.x) {
        float xf[8];
        activations8<T, kIn>(GemvRow<T>{x + t * pitch, pitch, gamma, rstd[t]}, 8 * c, K, xf);
        float4* dst = reinterpret_cast<float4*>(xs + t * K + 8 * c);
        dst[0] = make_float4(xf[0], xf[1], xf[2], xf[3]);
        dst[1] = make_float4(xf[4], xf[5], xf[6], xf[7]);
      }
    __syncthreads();
  }
  static_assert(kSplit == 1 || kSplit == 2 || kSplit == 4, "kSplit divides the block's warps");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slice = warp % kSplit;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (kGemvWarps / kSplit) + warp / kSplit;
  if constexpr (kSplit == 1) {
    if (n >= N) return;
  }
  const bool live = n < N;  // kSplit > 1: every warp reaches the block's reduction below
  const int64_t row_bytes = kW == GemvWeights::kInt4 ? K / 2 : kW == GemvWeights::kFp8 ? K : 2 * K;
  const uint4* wr =
      reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(w) + (live ? n : 0) * row_bytes);
  const int64_t chunks = K / kPer;
  const int64_t c_end = live ? chunks * (slice + 1) / kSplit : 0;
  float acc[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[t] = 0.0f;
#pragma unroll 4
  for (int64_t c = chunks * slice / kSplit + lane; c < c_end; c += 32) {
    const uint4 u = __ldg(wr + c);
    float f[kPer];
    if constexpr (kW == GemvWeights::kInt4)
      int4_weights_to_float(u, f);
    else if constexpr (kW == GemvWeights::kFp8)
      fp8_weights_to_float(u, f);
    else
      weights_to_float<T>(u, f);
    if constexpr (kW == GemvWeights::kInt4) {
      const float2 sm = __ldg(reinterpret_cast<const float2*>(w_scale) + n * (K / group) + c * kPer / group);
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        float part = 0.0f, sum_x = 0.0f;
        if constexpr (kStaged)
          dot_staged<kPer, true>(xs + t * K, c * kPer, f, part, &sum_x);
        else
          dot_chunk<T, kPer, kIn, true>(GemvRow<T>{x + t * pitch, pitch, gamma, rstd[t]}, c * kPer, K, f, part,
                                        &sum_x);
        acc[t] = fmaf(sm.x, part, fmaf(sm.y, sum_x, acc[t]));
      }
    } else {
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        if constexpr (kStaged)
          dot_staged<kPer>(xs + t * K, c * kPer, f, acc[t]);
        else
          dot_chunk<T, kPer, kIn>(GemvRow<T>{x + t * pitch, pitch, gamma, rstd[t]}, c * kPer, K, f, acc[t]);
      }
    }
  }
  const float scale = kW == GemvWeights::kFp8 && w_scale ? *w_scale : 1.0f;
  if constexpr (kSplit > 1) {
    __shared__ float slice_sum[kGemvWarps][kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      const float sum = warp_sum(acc[t]);
      if (lane == 0) slice_sum[warp][t] = sum;
    }
    __syncthreads();
    if (slice != 0 || !live) return;
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kSplit; ++j) sum += slice_sum[warp + j][t];
      acc[t] = sum;
    }
  }
#pragma unroll
  for (int t = 0; t < kT; ++t) {
    const float sum = kSplit > 1 ? acc[t] : warp_sum(acc[t]);
    if (lane == 0) {
      float v = sum * scale;
      if (accumulate) v += to_f32(y[t * N + n]);
      y[t * N + n] = from_f32<T>(v);
    }
  }
}

/// Whether a decode GEMV prepares its prologue's activations once per block in shared memory: a
/// prologue, and T x K fp32 values within the 48 KB a launch gets without opting in, less 2 KB for
/// the kernel's static shared memory (block_rms's partial sums): K up to 11776 at one token, 1B-3B
/// models' down projections (K 8192) included; Llama-3.1-8B's (K 14336) stays unstaged.
constexpr size_t kGemvStagedBytes = 46 * 1024;
bool gemv_staged(GemvIn in, int64_t T, int64_t K) {
  return in != GemvIn::kPlain && static_cast<size_t>(T) * static_cast<size_t>(K) * sizeof(float) <= kGemvStagedBytes;
}

/// The automatic k_split of a decode GEMV (launch_gemv_small_t's k_split 0), as bench/gemv_probe.cu
/// measured it on an H100 (2026-12-08, Llama-3.2-1B's one-token projections, 16 layers' weights in
/// turn): plain fp16/bf16 and fp8 GEMVs of at most 2048 columns (256 blocks: two an SM) gain from more
/// warps per column -- the output projection (K 2048) 5.83 -> 4.64 us with 2, the down projection
/// (K 8192) 15.4 -> 12.3 us with 4 -- while wider ones (gate/up, 16384 columns) do not, and the
/// prologue forms (their activations staged in shared memory) lost with any split. int4 weights were
/// not measured: 1.
int gemv_k_split_auto(GemvWeights w, GemvPrologue::Kind pro, int64_t T, int64_t K, int64_t N) {
  if (T != 1 || w == GemvWeights::kInt4 || pro != GemvPrologue::kNone || N > 2048) return 1;
  return K >= 8192 ? 4 : 2;
}

template <class E, GemvWeights kW, GemvIn kIn, bool kStaged, int kT, int kSplit>
void launch_gemv_form(const E* x, const void* w, const float* w_scale, E* y, int64_t K, int64_t N, int64_t group,
                      bool accumulate, const E* gamma, float eps, size_t staged_bytes, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((N + kGemvWarps / kSplit - 1) / (kGemvWarps / kSplit)));
  launch_kernel(gemv_small_t_kernel<E, kW, kT, kIn, kStaged, kSplit>, grid, kGemvWarps * 32,
                kStaged ? staged_bytes : 0, stream, x, w, w_scale, y, K, N, group, accumulate, gamma, eps);
}

template <class E, GemvWeights kW, GemvIn kIn, bool kStaged>
cudaError_t run_gemv_small_t_form(const E* x, const void* w, const float* w_scale, E* y, int64_t T, int64_t K,
                                  int64_t N, int64_t group, bool accumulate, const E* gamma, float eps, int split,
                                  size_t staged_bytes, cudaStream_t stream) {
  if (T == 1 && split != 1) {
    if (split == 2)
      launch_gemv_form<E, kW, kIn, kStaged, 1, 2>(x, w, w_scale, y, K, N, group, accumulate, gamma, eps, staged_bytes,
                                                  stream);
    else
      launch_gemv_form<E, kW, kIn, kStaged, 1, 4>(x, w, w_scale, y, K, N, group, accumulate, gamma, eps, staged_bytes,
                                                  stream);
    return cudaGetLastError();
  }
  switch (T) {
#define INGOT_GEMV_CASE(n)                                                                                      \
  case n:                                                                                                       \
    launch_gemv_form<E, kW, kIn, kStaged, n, 1>(x, w, w_scale, y, K, N, group, accumulate, gamma, eps,          \
                                                staged_bytes, stream);                                          \
    break;
    INGOT_GEMV_CASE(1)
    INGOT_GEMV_CASE(2)
    INGOT_GEMV_CASE(3)
    INGOT_GEMV_CASE(4)
    INGOT_GEMV_CASE(5)
    INGOT_GEMV_CASE(6)
    INGOT_GEMV_CASE(7)
    INGOT_GEMV_CASE(8)
#undef INGOT_GEMV_CASE
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/// split: 1, 2 or 4 warps a column (more than 1 only at T = 1; launch_gemv_small_t checked it).
template <class E, GemvWeights kW, GemvIn kIn>
cudaError_t run_gemv_small_t_in(const void* x, const void* w, const float* w_scale, void* y, int64_t T, int64_t K,
                                int64_t N, int64_t group, bool accumulate, const void* gamma, float eps, int split,
                                cudaStream_t stream) {
  const E* xt = static_cast<const E*>(x);
  const E* gt = static_cast<const E*>(gamma);
  E* yt = static_cast<E*>(y);
  const size_t staged_bytes = static_cast<size_t>(T) * static_cast<size_t>(K) * sizeof(float);
  if constexpr (kIn != GemvIn::kPlain) {
    if (gemv_staged(kIn, T, K))
      return run_gemv_small_t_form<E, kW, kIn, true>(xt, w, w_scale, yt, T, K, N, group, accumulate, gt, eps, split,
                                                     staged_bytes, stream);
  }
  return run_gemv_small_t_form<E, kW, kIn, false>(xt, w, w_scale, yt, T, K, N, group, accumulate, gt, eps, split,
                                                  staged_bytes, stream);
}

template <class E, GemvWeights kW>
cudaError_t run_gemv_small_t(const void* x, const void* w, const float* w_scale, void* y, int64_t T, int64_t K,
                             int64_t N, int64_t group, bool accumulate, const GemvPrologue& pro, int k_split,
                             cudaStream_t stream) {
  const int split = k_split == 0 ? gemv_k_split_auto(kW, pro.kind, T, K, N) : k_split;
  switch (pro.kind) {
    case GemvPrologue::kRmsNorm:
      return run_gemv_small_t_in<E, kW, GemvIn::kRmsNorm>(x, w, w_scale, y, T, K, N, group, accumulate,
                                                          pro.norm_weight, pro.eps, split, stream);
    case GemvPrologue::kSiluMul:
      return run_gemv_small_t_in<E, kW, GemvIn::kSiluMul>(x, w, w_scale, y, T, K, N, group, accumulate, nullptr, 0.0f,
                                                          split, stream);
    default:
      return run_gemv_small_t_in<E, kW, GemvIn::kPlain>(x, w, w_scale, y, T, K, N, group, accumulate, nullptr, 0.0f,
                                                        split, stream);
  }
}

/// launch_gemv_small_t's k_split: 0 (automatic), 1, or 2 and 4 at one token.
bool k_split_ok(int k_split, int64_t T) { return k_split == 0 || k_split == 1 || (T == 1 && (k_split == 2 || k_split == 4)); }

/// What every GEMV launcher checks of the prologue: a norm weight, 16-byte aligned, for kRmsNorm.
bool prologue_ok(const GemvPrologue& pro) {
  if (pro.kind == GemvPrologue::kRmsNorm) return pro.norm_weight && aligned(pro.norm_weight, 16) && pro.eps >= 0.0f;
  return pro.kind == GemvPrologue::kNone || pro.kind == GemvPrologue::kSiluMul;
}

// ---- int4 weights (W4A16) --------------------------------------------------------------------

/// One thread per group of a row: its amax, the scale, group / 2 bytes of nibbles.
__global__ void int4_quantize_kernel(const float* __restrict__ w, int64_t N, int64_t K, int64_t group,
                                     uint8_t* __restrict__ q, float* __restrict__ scale_min) {
  INGOT_KERNEL_ENTRY();
  const int64_t groups = N * (K / group);
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float* src = w + g * group;  // rows are whole groups: group g of the whole matrix
    float amax = 0.0f;
    for (int64_t i = 0; i < group; ++i) amax = fmaxf(amax, fabsf(src[i]));
    const float scale = amax / 7.0f;
    const float inv = amax > 0.0f ? 7.0f / amax : 0.0f;
    scale_min[2 * g] = scale;
    scale_min[2 * g + 1] = -8.0f * scale;
    uint8_t* dst = q + g * (group / 2);
    for (int64_t i = 0; i < group; i += 2) {
      const int lo = static_cast<int>(fminf(fmaxf(rintf(src[i] * inv), -8.0f), 7.0f)) + 8;
      const int hi = static_cast<int>(fminf(fmaxf(rintf(src[i + 1] * inv), -8.0f), 7.0f)) + 8;
      dst[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

template <class T>
__global__ void int4_dequantize_kernel(const uint8_t* __restrict__ q, const float* __restrict__ scale_min,
                                       int64_t n_bytes, int64_t group, T* __restrict__ y) {
  INGOT_KERNEL_ENTRY();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_bytes;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float2 sm = reinterpret_cast<const float2*>(scale_min)[(2 * i) / group];  // rows are whole groups
    const int b = q[i];
    y[2 * i] = from_f32<T>(fmaf(static_cast<float>(b & 0xF), sm.x, sm.y));
    y[2 * i + 1] = from_f32<T>(fmaf(static_cast<float>(b >> 4), sm.x, sm.y));
  }
}

// ---- the decoder's small elementwise steps -------------------------------------------------

template <class T>
__global__ void silu_mul_packed_kernel(const T* gate_up, T* out, int64_t rows, int64_t cols) {
  INGOT_KERNEL_ENTRY();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float g = to_f32(gate_up[r * 2 * cols + c]);
    out[i] = from_f32<T>(g / (1.0f + expf(-g)) * to_f32(gate_up[r * 2 * cols + cols + c]));
  }
}

// The same over 16-byte packs (cols a multiple of the pack, both pointers 16-byte aligned): one
// thread reads a pack of the gate half and the pack beside it in the up half and writes one pack.
// The census Llama's b32 MLP (4096 rows x 1408) ran at 28 us a call with the scalar loop's 64-bit
// divisions and 2-byte accesses; this moves the same 35 MB in 16-byte accesses. Index arithmetic is
// 32-bit where the pack count fits (Idx), 64-bit otherwise.
template <class T, class Idx>
__global__ void silu_mul_packed_vec_kernel(const T* __restrict__ gate_up, T* __restrict__ out, Idx rows,
                                           Idx packs_per_row) {
  INGOT_KERNEL_ENTRY();
  constexpr int kN = 16 / sizeof(T);
  using P = Pack<T, kN>;
  const P* src = reinterpret_cast<const P*>(gate_up);
  P* dst = reinterpret_cast<P*>(out);
  const Idx n = rows * packs_per_row;
  for (Idx i = blockIdx.x * static_cast<Idx>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Idx>(gridDim.x) * blockDim.x) {
    const Idx r = i / packs_per_row, c = i - r * packs_per_row;
    const P g = src[r * 2 * packs_per_row + c], u = src[r * 2 * packs_per_row + packs_per_row + c];
    P y;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float gv = to_f32(g.v[k]);
      y.v[k] = from_f32<T>(gv / (1.0f + __expf(-gv)) * to_f32(u.v[k]));
    }
    dst[i] = y;
  }
}

template <class T>
__global__ void add_bias_rows_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  INGOT_KERNEL_ENTRY();
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(bias[i % cols]));
}

// One CTA per row: each thread keeps the best (value, index) of its strided share and whether it
// saw a NaN / +inf; warp shuffles, then one warp over the warps' results. Ties take the lower
// index, so the answer is the first maximum whatever the reduction order.
constexpr int kArgmaxThreads = 1024;

__device__ __forceinline__ void argmax_merge(float& bv, int& bi, float v, int i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

__global__ void __launch_bounds__(kArgmaxThreads) logits_argmax_kernel(const float* logits, int vocab, int32_t* out) {
  INGOT_KERNEL_ENTRY();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float bv = -INFINITY;
  int bi = INT_MAX;
  bool bad = false;
  for (int i = threadIdx.x; i < vocab; i += kArgmaxThreads) {
    const float v = row[i];
    bad = bad || isnan(v) || v == INFINITY;
    if (v != -INFINITY) argmax_merge(bv, bi, v, i);  // an all -inf share keeps (-inf, INT_MAX)
  }
  for (int off = 16; off > 0; off /= 2) {
    const float ov = __shfl_down_sync(0xffffffffu, bv, off);
    const int oi = __shfl_down_sync(0xffffffffu, bi, off);
    argmax_merge(bv, bi, ov, oi);
  }
  bad = __syncthreads_or(bad);
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int si[kArgmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (warp != 0) return;
  bv = lane < kArgmaxThreads / 32 ? sv[lane] : -INFINITY;
  bi = lane < kArgmaxThreads / 32 ? si[lane] : INT_MAX;
  for (int off = 16; off > 0; off /= 2) {
    const float ov = __shfl_down_sync(0xffffffffu, bv, off);
    const int oi = __shfl_down_sync(0xffffffffu, bi, off);
    argmax_merge(bv, bi, ov, oi);
  }
  if (lane == 0) out[blockIdx.x] = bad ? kArgmaxNonFinite : (bi == INT_MAX ? kArgmaxAllMasked : bi);
}

// ---- fp8 activations ---------------------------------------------------------------------

constexpr float kFp8Max = 448.0f;

template <class T>
__global__ void abs_max_kernel(const T* x, int64_t n, unsigned* amax) {
  INGOT_KERNEL_ENTRY();
  float m = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(to_f32(x[i])));  // fmaxf drops NaN: the quantize pass keeps it
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  __shared__ float warp_max[32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
    // Non-negative floats order as their bit patterns: an unsigned atomicMax is a float max.
    if (threadIdx.x == 0) atomicMax(amax, __float_as_uint(m));
  }
}

template <class T>
__global__ void fp8_quantize_kernel(const T* x, int64_t n, __nv_fp8_e4m3* y, float* scale, const unsigned* amax) {
  INGOT_KERNEL_ENTRY();
  const float s = fmaxf(__uint_as_float(*amax), 1e-12f) / kFp8Max;
  const float inv = 1.0f / s;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = __nv_fp8_e4m3(to_f32(x[i]) * inv);  // round to nearest even, saturating (__NV_SATFINITE)
}

template <class T>
__global__ void fill_hash_uniform_kernel(T* y, int64_t n, uint64_t base, float center, float a) {
  INGOT_KERNEL_ENTRY();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(hash_uniform(base, static_cast<uint64_t>(i), center, a));
}

__global__ void sleep_kernel(uint64_t ns) {
  INGOT_KERNEL_ENTRY();
  const long long start = clock64();
  // __nanosleep takes at most ~1 ms per call; clock64 counts SM cycles (>= 1 GHz: one per ns or more).
  while (static_cast<uint64_t>(clock64() - start) < ns) __nanosleep(100000);
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

}  // namespace

cudaError_t launch_silu_mul_packed(FloatType t, const void* gate_up, void* out, int64_t rows, int64_t cols,
                                   cudaStream_t stream) {
  if (rows < 0 || cols <= 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!gate_up || !out) return cudaErrorInvalidValue;
  const int64_t n = rows * cols;
  const bool packed = ew::aligned16(gate_up) && ew::aligned16(out);
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t kN = 16 / sizeof(T);
    if (packed && cols % kN == 0) {
      const int64_t ppr = cols / kN, packs = n / kN;
      // 32-bit indices while every index the loop forms (up to 2 * packs plus a grid) fits.
      if (2 * packs + static_cast<int64_t>(ew::kMaxBlocks) * ew::kThreads < INT32_MAX)
        launch_kernel(silu_mul_packed_vec_kernel<T, uint32_t>, grid_for(packs), ew::kThreads, 0, stream,
                      static_cast<const T*>(gate_up), static_cast<T*>(out), static_cast<uint32_t>(rows),
                      static_cast<uint32_t>(ppr));
      else
        launch_kernel(silu_mul_packed_vec_kernel<T, int64_t>, grid_for(packs), ew::kThreads, 0, stream,
                      static_cast<const T*>(gate_up), static_cast<T*>(out), rows, ppr);
    } else {
      launch_kernel(silu_mul_packed_kernel<T>, grid_for(n), ew::kThreads, 0, stream, static_cast<const T*>(gate_up),
                    static_cast<T*>(out), rows, cols);
    }
  });
  return cudaGetLastError();
}

cudaError_t launch_add_bias_rows(FloatType t, void* y, const void* bias, int64_t rows, int64_t cols,
                                 cudaStream_t stream) {
  if ((t != FloatType::kF16 && t != FloatType::kBF16) || rows < 0 || cols <= 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!y || !bias) return cudaErrorInvalidValue;
  const int64_t n = rows * cols;
  if (t == FloatType::kF16)
    launch_kernel(add_bias_rows_kernel<__half>, grid_for(n), 256, 0, stream, static_cast<__half*>(y),
                  static_cast<const __half*>(bias), rows, cols);
  else
    launch_kernel(add_bias_rows_kernel<__nv_bfloat16>, grid_for(n), 256, 0, stream, static_cast<__nv_bfloat16*>(y),
                  static_cast<const __nv_bfloat16*>(bias), rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_logits_argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows < 0 || rows > 0x7fffffff || vocab < 1 || vocab >= INT_MAX) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (!logits || !out) return cudaErrorInvalidValue;
  launch_kernel(logits_argmax_kernel, static_cast<unsigned>(rows), kArgmaxThreads, 0, stream, logits,
                static_cast<int>(vocab), out);
  return cudaGetLastError();
}

cudaError_t launch_fp8_quantize_dynamic(FloatType t, const void* x, int64_t n, void* y, float* scale,
                                        unsigned* amax_ws, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (!x || !y || !scale || !amax_ws) return cudaErrorInvalidValue;
  const cudaError_t e = cudaMemsetAsync(amax_ws, 0, sizeof(unsigned), stream);
  if (e != cudaSuccess) return e;
  const unsigned grid = std::min(grid_for(n), 1024u);
  auto* q = static_cast<__nv_fp8_e4m3*>(y);
  if (t == FloatType::kF32) {
    launch_kernel(abs_max_kernel<float>, grid, 256, 0, stream, static_cast<const float*>(x), n, amax_ws);
    launch_kernel(fp8_quantize_kernel<float>, grid_for(n), 256, 0, stream, static_cast<const float*>(x), n, q, scale,
                  amax_ws);
  } else if (t == FloatType::kF16) {
    launch_kernel(abs_max_kernel<__half>, grid, 256, 0, stream, static_cast<const __half*>(x), n, amax_ws);
    launch_kernel(fp8_quantize_kernel<__half>, grid_for(n), 256, 0, stream, static_cast<const __half*>(x), n, q, scale,
                  amax_ws);
  } else {
    launch_kernel(abs_max_kernel<__nv_bfloat16>, grid, 256, 0, stream, static_cast<const __nv_bfloat16*>(x), n,
                  amax_ws);
    launch_kernel(fp8_quantize_kernel<__nv_bfloat16>, grid_for(n), 256, 0, stream, static_cast<const __nv_bfloat16*>(x),
                  n, q, scale, amax_ws);
  }
  return cudaGetLastError();
}

cudaError_t launch_gemv_small_t(FloatType t, const void* x, const void* w, bool w_fp8, const float* w_scale, void* y,
                                int64_t T, int64_t K, int64_t N, bool accumulate, cudaStream_t stream,
                                const GemvPrologue& pro, int k_split) {
  if ((t != FloatType::kF16 && t != FloatType::kBF16) || T < 0 || T > kGemvMaxTokens || K <= 0 || N < 0 ||
      N > (int64_t{65535} * kGemvWarps) || K % (w_fp8 ? 16 : 8) != 0 || !prologue_ok(pro) || !k_split_ok(k_split, T))
    return cudaErrorInvalidValue;
  if (T == 0 || N == 0) return cudaSuccess;
  if (!x || !w || !y || !aligned(x, 16) || !aligned(w, 16) || !aligned(y, 2)) return cudaErrorInvalidValue;
  if (t == FloatType::kF16)
    return w_fp8 ? run_gemv_small_t<__half, GemvWeights::kFp8>(x, w, w_scale, y, T, K, N, 0, accumulate, pro, k_split,
                                                               stream)
                 : run_gemv_small_t<__half, GemvWeights::kModelType>(x, w, w_scale, y, T, K, N, 0, accumulate, pro,
                                                                    k_split, stream);
  return w_fp8 ? run_gemv_small_t<__nv_bfloat16, GemvWeights::kFp8>(x, w, w_scale, y, T, K, N, 0, accumulate, pro,
                                                                   k_split, stream)
               : run_gemv_small_t<__nv_bfloat16, GemvWeights::kModelType>(x, w, w_scale, y, T, K, N, 0, accumulate,
                                                                         pro, k_split, stream);
}

cudaError_t launch_int4_quantize(const float* w, int64_t N, int64_t K, int64_t group, uint8_t* q, float* scale_min,
                                 cudaStream_t stream) {
  if (N < 0 || K <= 0 || !int4_group_ok(group) || K % group != 0) return cudaErrorInvalidValue;
  if (N == 0) return cudaSuccess;
  if (!w || !q || !scale_min) return cudaErrorInvalidValue;
  const int64_t groups = N * (K / group);
  launch_kernel(int4_quantize_kernel, std::min(grid_for(groups), 4096u), 256, 0, stream, w, N, K, group, q, scale_min);
  return cudaGetLastError();
}

cudaError_t launch_int4_dequantize(FloatType t, const uint8_t* q, const float* scale_min, int64_t N, int64_t K,
                                   int64_t group, void* y, cudaStream_t stream) {
  if ((t != FloatType::kF16 && t != FloatType::kBF16) || N < 0 || K <= 0 || !int4_group_ok(group) || K % group != 0)
    return cudaErrorInvalidValue;
  if (N == 0) return cudaSuccess;
  if (!q || !scale_min || !y || !aligned(scale_min, 8)) return cudaErrorInvalidValue;
  const int64_t n_bytes = N * K / 2;
  const unsigned grid = std::min(grid_for(n_bytes), 8192u);
  if (t == FloatType::kF16)
    launch_kernel(int4_dequantize_kernel<__half>, grid, 256, 0, stream, q, scale_min, n_bytes, group,
                  static_cast<__half*>(y));
  else
    launch_kernel(int4_dequantize_kernel<__nv_bfloat16>, grid, 256, 0, stream, q, scale_min, n_bytes, group,
                  static_cast<__nv_bfloat16*>(y));
  return cudaGetLastError();
}

cudaError_t launch_gemv_small_t_int4(FloatType t, const void* x, const uint8_t* q, const float* scale_min, void* y,
                                     int64_t T, int64_t K, int64_t N, int64_t group, bool accumulate,
                                     cudaStream_t stream, const GemvPrologue& pro, int k_split) {
  if ((t != FloatType::kF16 && t != FloatType::kBF16) || T < 0 || T > kGemvMaxTokens || K <= 0 || N < 0 ||
      N > (int64_t{65535} * kGemvWarps) || !int4_group_ok(group) || K % group != 0 || !prologue_ok(pro) ||
      !k_split_ok(k_split, T))
    return cudaErrorInvalidValue;
  if (T == 0 || N == 0) return cudaSuccess;
  if (!x || !q || !scale_min || !y || !aligned(x, 16) || !aligned(q, 16) || !aligned(scale_min, 8) || !aligned(y, 2))
    return cudaErrorInvalidValue;
  return t == FloatType::kF16
             ? run_gemv_small_t<__half, GemvWeights::kInt4>(x, q, scale_min, y, T, K, N, group, accumulate, pro,
                                                            k_split, stream)
             : run_gemv_small_t<__nv_bfloat16, GemvWeights::kInt4>(x, q, scale_min, y, T, K, N, group, accumulate, pro,
                                                                   k_split, stream);
}

cudaError_t launch_fill_hash_uniform(FloatType t, void* y, int64_t n, uint64_t base, float center, float a,
                                     cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (!y) return cudaErrorInvalidValue;
  const unsigned grid = std::min(grid_for(n), 4096u);
  if (t == FloatType::kF32)
    launch_kernel(fill_hash_uniform_kernel<float>, grid, 256, 0, stream, static_cast<float*>(y), n, base, center, a);
  else if (t == FloatType::kF16)
    launch_kernel(fill_hash_uniform_kernel<__half>, grid, 256, 0, stream, static_cast<__half*>(y), n, base, center, a);
  else
    launch_kernel(fill_hash_uniform_kernel<__nv_bfloat16>, grid, 256, 0, stream, static_cast<__nv_bfloat16*>(y), n,
                  base, center, a);
  return cudaGetLastError();
}

cudaError_t launch_gpu_sleep(uint64_t ns, cudaStream_t stream) {
  launch_kernel(sleep_kernel, 1, 1, 0, stream, ns);
  return cudaGetLastError();
}

cudaError_t launch_rope_kv_write(const RopeKvWriteParams& p, cudaStream_t stream) {
  if (p.type != FloatType::kF16 && p.type != FloatType::kBF16) return cudaErrorInvalidValue;
  if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.head_dim > 1024 || p.num_heads < 0 || p.num_kv_heads < 0 ||
      p.num_tokens < 0)
    return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  if (!p.q || !p.k || !p.v || !p.k_cache || !p.v_cache || !p.positions || !p.slot_mapping || !p.inv_freq)
    return cudaErrorInvalidValue;
  if (!aligned(p.q, 4) || !aligned(p.k, 4) || !aligned(p.v, 4) || !aligned(p.k_cache, 4) || !aligned(p.v_cache, 4))
    return cudaErrorInvalidValue;
  if (p.row_stride != 0 &&
      (p.row_stride % 2 != 0 || p.row_stride < static_cast<int64_t>(p.num_heads + 2 * p.num_kv_heads) * p.head_dim))
    return cudaErrorInvalidValue;
  if (p.q_out && !aligned(p.q_out, 4)) return cudaErrorInvalidValue;
  const int half = p.head_dim / 2;
  const int64_t pairs = static_cast<int64_t>(p.num_heads + p.num_kv_heads) * half;
  const int threads = pairs < 256 ? static_cast<int>((pairs + 31) / 32 * 32) : 256;
  const unsigned grid = static_cast<unsigned>(p.num_tokens);
  const size_t smem = static_cast<size_t>(half) * sizeof(float2);
  if (p.fp8_cache && !(p.k_scale > 0.0f && p.v_scale > 0.0f)) return cudaErrorInvalidValue;
  if (p.type == FloatType::kF16)
    p.fp8_cache ? launch_kernel(rope_kv_write_kernel<__half, true>, grid, threads, smem, stream, p)
                : launch_kernel(rope_kv_write_kernel<__half, false>, grid, threads, smem, stream, p);
  else
    p.fp8_cache ? launch_kernel(rope_kv_write_kernel<__nv_bfloat16, true>, grid, threads, smem, stream, p)
                : launch_kernel(rope_kv_write_kernel<__nv_bfloat16, false>, grid, threads, smem, stream, p);
  return cudaGetLastError();
}

int64_t paged_decode_attention_partitions(const PagedDecodeParams& p) {
  if (p.partition_size <= 0 || p.max_context_len <= p.partition_size) return 1;
  return (static_cast<int64_t>(p.max_context_len) + p.partition_size - 1) / p.partition_size;
}

int32_t auto_decode_partition(int64_t batch, int64_t num_heads, int sm_count) {
  constexpr int64_t kMin = 64, kMax = 512, kUnit = 16;
  const int64_t pairs = std::max<int64_t>(1, batch * num_heads);
  const int64_t want_blocks = 2 * std::max(1, sm_count);
  const int64_t parts = (want_blocks + pairs - 1) / pairs;  // per pair, for about two blocks an SM
  int64_t size = (kMax + parts - 1) / parts;
  size = (size + kUnit - 1) / kUnit * kUnit;
  return static_cast<int32_t>(std::min(kMax, std::max(kMin, size)));
}

size_t paged_decode_attention_workspace_bytes(const PagedDecodeParams& p) {
  const int64_t parts = paged_decode_attention_partitions(p);
  if (parts <= 1 || p.batch <= 0 || p.num_heads <= 0 || p.head_dim <= 0) return 0;
  return static_cast<size_t>(p.batch) * static_cast<size_t>(p.num_heads) * static_cast<size_t>(parts) *
         (static_cast<size_t>(p.head_dim) + 2) * sizeof(float);
}

cudaError_t launch_paged_decode_attention(const PagedDecodeParams& p, void* workspace, size_t workspace_bytes,
                                          cudaStream_t stream) {
  if (p.type != FloatType::kF16 && p.type != FloatType::kBF16) return cudaErrorInvalidValue;
  if (p.head_dim != 64 && p.head_dim != 128) return cudaErrorInvalidValue;
  if (p.batch < 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 ||
      p.block_size <= 0 || p.max_blocks_per_seq < 0 || p.max_context_len < 0 || p.batch > 65535)
    return cudaErrorInvalidValue;
  if (p.batch == 0) return cudaSuccess;
  if (!p.q || !p.k_cache || !p.v_cache || !p.context_lens || !p.block_tables || !p.o) return cudaErrorInvalidValue;
  if (!aligned(p.k_cache, 16) || !aligned(p.v_cache, 16)) return cudaErrorInvalidValue;
  if (p.fp8_cache && !(p.k_scale > 0.0f && p.v_scale > 0.0f)) return cudaErrorInvalidValue;
  if (p.grouped && p.num_heads / p.num_kv_heads > kMaxDecodeGroup) return cudaErrorInvalidValue;
  const int64_t parts = paged_decode_attention_partitions(p);
  if (parts > 65535) return cudaErrorInvalidValue;
  Workspace ws;
  if (parts > 1) {
    const size_t need = paged_decode_attention_workspace_bytes(p);
    if (!workspace || workspace_bytes < need || !aligned(workspace, 4)) return cudaErrorInvalidValue;
    const size_t partials = static_cast<size_t>(p.batch) * static_cast<size_t>(p.num_heads) * static_cast<size_t>(parts);
    ws.acc = static_cast<float*>(workspace);
    ws.max = ws.acc + partials * static_cast<size_t>(p.head_dim);
    ws.sum = ws.max + partials;
  }
  PagedDecodeParams scaled = p;
  if (scaled.scale == 0.0f) scaled.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  const int n = static_cast<int>(parts);
  return p.type == FloatType::kF16 ? run_paged_decode_type<__half>(scaled, ws, n, stream)
                                   : run_paged_decode_type<__nv_bfloat16>(scaled, ws, n, stream);
}

}  // namespace ingot::backend::cuda
