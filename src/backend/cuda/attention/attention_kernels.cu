// Copyright ingot authors. Apache-2.0.
//
// Device code of the attention family (see attention_kernels.h). Both kernels run the online
// softmax of flash attention: per query row a running max m and sum l in fp32; each key tile
// rescales the output accumulator by exp(m_old - m_new). A row whose keys are all hidden keeps
// m = -inf and l = 0 and writes zeros, as the reference does. Masked scores are -inf; the max
// used as the exponent shift is 0 while it is still -inf, so no inf - inf appears.
//
// Flash kernel register layout (mma.sync m16n8k16, g = lane / 4, t = lane % 4): each warp owns
// 16 query rows; a thread holds rows g and g + 8, columns 2t and 2t + 1 of every 8-wide tile of
// S (keys) and O (head dims). The S accumulator of two neighbouring key tiles is exactly the A
// operand of P V, so P never leaves registers.
#include <array>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <type_traits>

#include "backend/cuda/attention/attention_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/mma.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

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

__device__ __forceinline__ float load_float(const void* p, FloatType t, int64_t i) {
  switch (t) {
    case FloatType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case FloatType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

/// Offset of mask element (b, h, i, 0).
__device__ __forceinline__ int64_t mask_row(const AttentionParams& p, int64_t b, int64_t h, int64_t i) {
  const int64_t mb = p.mask_batch_period > 0 ? b % p.mask_batch_period : b;
  return mb * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2];
}

/// Mask and causal bias for the score of query row i, key j (both in range; `row` is
/// mask_row(b, h, i)): 0, a finite additive value, or -inf.
__device__ __forceinline__ float mask_bias(const AttentionParams& p, int64_t row, int64_t i, int64_t j) {
  if (p.causal && j > i) return -INFINITY;
  if (p.mask_kind == AttentionMask::kNone) return 0.0f;
  if (j >= p.mask_kv_len) return -INFINITY;
  const int64_t idx = row + j * p.mask_stride[3];
  if (p.mask_kind == AttentionMask::kBool) return static_cast<const uint8_t*>(p.mask)[idx] ? 0.0f : -INFINITY;
  return load_float(p.mask, p.mask_type, idx);
}

/// Keys past this index are hidden for every row (kv length, short mask, causal up to `last_row`).
__device__ __forceinline__ int64_t visible_keys(const AttentionParams& p, int64_t last_row) {
  int64_t n = p.kv_len;
  if (p.mask_kind != AttentionMask::kNone && p.mask_kv_len < n) n = p.mask_kv_len;
  if (p.causal && last_row + 1 < n) n = last_row + 1;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Generic kernel: 4 warps per block share 32-key K/V tiles in shared memory (as fp32); each warp
// owns one query row. Per tile, lane j scores key j (a dot product over the head size), the warp
// updates the row's max and sum, and lane d accumulates output dims d, d + 32, ...
// Q and K are each pre-scaled by sqrt(scale) like the reference, which keeps fp32 results
// within rounding of it.

constexpr int kGenWarps = 4;
constexpr int kGenKeys = 32;
constexpr int kGenMaxD = static_cast<int>(kAttentionGenericMaxHeadSize);
constexpr int kGenDimsPerLane = kGenMaxD / 32;

template <class T>
__global__ void __launch_bounds__(kGenWarps * 32) attention_generic_kernel(AttentionParams p) {
  INGOT_KERNEL_ENTRY();
  __shared__ float ks[kGenKeys][kGenMaxD + 1];  // +1: lane j reads row j without bank conflicts
  __shared__ float vs[kGenKeys][kGenMaxD];
  __shared__ float qs[kGenWarps][kGenMaxD];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.x / p.q_heads, h = blockIdx.x % p.q_heads;
  const int64_t kvh = h / (p.q_heads / p.kv_heads);
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kGenWarps + warp;
  const bool row_valid = i < p.q_len;
  const int D = static_cast<int>(p.head_size);
  const float sqs = sqrtf(p.scale);
  const T* qp = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const T* kp = static_cast<const T*>(p.k) + b * p.k_stride[0] + kvh * p.k_stride[1];
  const T* vp = static_cast<const T*>(p.v) + b * p.v_stride[0] + kvh * p.v_stride[1];
  if (row_valid)
    for (int d = lane; d < D; d += 32) qs[warp][d] = to_f32(qp[i * p.q_stride[2] + d]) * sqs;

  int64_t block_last = static_cast<int64_t>(blockIdx.y) * kGenWarps + kGenWarps - 1;
  if (block_last >= p.q_len) block_last = p.q_len - 1;
  const int64_t n_keys = visible_keys(p, block_last);  // uniform over the block: barriers below
  float acc[kGenDimsPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += kGenKeys) {
    __syncthreads();  // previous tile fully read (and, the first time, qs written)
    for (int idx = threadIdx.x; idx < kGenKeys * D; idx += kGenWarps * 32) {
      const int r = idx / D, d = idx - (idx / D) * D;
      const int64_t j = j0 + r;
      float kv = 0.0f, vv = 0.0f;
      if (j < p.kv_len) {
        kv = to_f32(kp[j * p.k_stride[2] + d]) * sqs;
        vv = to_f32(vp[j * p.v_stride[2] + d]);
      }
      ks[r][d] = kv;
      vs[r][d] = vv;
    }
    __syncthreads();
    if (!row_valid) continue;
    const int64_t j = j0 + lane;
    float s = -INFINITY;
    if (j < n_keys) {
      const float bias = mask_bias(p, mask_row(p, b, h, i), i, j);
      if (bias != -INFINITY) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot = fmaf(qs[warp][d], ks[lane][d], dot);
        s = dot + bias;
      }
    }
    const float m_new = fmaxf(m, warp_max(s));
    const float shift = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = expf(m - shift);
    const float pj = expf(s - shift);
    l = l * alpha + warp_sum(pj);
    m = m_new;
#pragma unroll
    for (int t = 0; t < kGenDimsPerLane; ++t) acc[t] *= alpha;
    for (int r = 0; r < kGenKeys; ++r) {
      const float pr = __shfl_sync(0xffffffffu, pj, r);
#pragma unroll
      for (int t = 0; t < kGenDimsPerLane; ++t) {
        const int d = lane + 32 * t;
        if (d < D) acc[t] = fmaf(pr, vs[r][d], acc[t]);
      }
    }
  }
  if (!row_valid) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  T* yp = static_cast<T*>(p.y) + b * p.y_stride[0] + h * p.y_stride[1] + i * p.y_stride[2];
#pragma unroll
  for (int t = 0; t < kGenDimsPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < D) yp[d] = from_f32<T>(acc[t] * inv);
  }
}

// ---------------------------------------------------------------------------------------------
// Flash kernel (tensor cores).

constexpr int kFlashKeys = 64;  // keys per K/V tile

/// Stages rows [n0, n0 + kFlashKeys) of a K or V head into shared memory (row stride kD + 8
/// elements); rows at or past n_rows are zero-filled.
template <class T, int kD, int kThreadsPerCta>
__device__ __forceinline__ void load_kv_tile(T* smem, const T* head, int64_t row_stride, int64_t n0, int64_t n_rows) {
  constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < kFlashKeys * kChunks; c += kThreadsPerCta) {
    const int r = c / kChunks, col = (c - r * kChunks) * 8;
    const int64_t row = n0 + r;
    const bool in_range = row < n_rows;
    cp_async_16(smem + r * (kD + 8) + col, in_range ? head + row * row_stride + col : head, in_range ? 16 : 0);
  }
}

template <class M>
__device__ __forceinline__ float mask_value(M v) {
  return to_f32(v);
}
template <>
__device__ __forceinline__ float mask_value<uint8_t>(uint8_t v) {
  return v ? 0.0f : -INFINITY;
}

/// The S accumulators of one key tile before Q K^T is added: the additive mask divided by the
/// scale (S is multiplied by the scale afterwards), else 0. Returns the hidden scores (row or
/// key out of range, causal, masked) as bits nt * 4 + e; they become -inf after Q K^T, so no
/// infinity goes through the tensor cores. M is the mask element type (uint8_t for bool
/// masks), void without a mask. The loads are independent and predicated, so a tile's mask
/// costs one memory latency.
template <class M>
__device__ __forceinline__ uint32_t init_scores(float (&s)[kFlashKeys / 8][4], const AttentionParams& p,
                                                int64_t row0, int64_t row1, int64_t mrow0, int64_t mrow1,
                                                int64_t col0, int64_t n_keys, float inv_scale) {
  static_assert(kFlashKeys / 8 * 4 <= 32, "one bit per score");
  uint32_t hidden = 0;
#pragma unroll
  for (int nt = 0; nt < kFlashKeys / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t row = e < 2 ? row0 : row1;
      const int64_t col = col0 + nt * 8 + (e & 1);
      bool visible = row < p.q_len && col < n_keys && !(p.causal && col > row);
      float v = 0.0f;
      if constexpr (!std::is_void<M>::value) {
        const M* mask = static_cast<const M*>(p.mask);
        const float bias = visible ? mask_value<M>(mask[(e < 2 ? mrow0 : mrow1) + col * p.mask_stride[3]]) : 0.0f;
        visible = visible && bias != -INFINITY;
        // A huge finite bias (finfo.min) stays finite, as in the reference.
        if (visible) v = fmaxf(bias * inv_scale, -FLT_MAX);
      }
      if (!visible) hidden |= 1u << (nt * 4 + e);
      s[nt][e] = v;
    }
  }
  return hidden;
}

/// init_scores for the mask's element type (none, bool, or an additive mask of any float type).
__device__ __forceinline__ uint32_t init_scores_any(float (&s)[kFlashKeys / 8][4], const AttentionParams& p,
                                                    int64_t row0, int64_t row1, int64_t mrow0, int64_t mrow1,
                                                    int64_t col0, int64_t n_keys, float inv_scale) {
  switch (p.mask_kind) {
    case AttentionMask::kNone: return init_scores<void>(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
    case AttentionMask::kBool: return init_scores<uint8_t>(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
    default:
      if (p.mask_type == FloatType::kF16)
        return init_scores<__half>(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
      if (p.mask_type == FloatType::kBF16)
        return init_scores<__nv_bfloat16>(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
      return init_scores<float>(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
  }
}

// Pieces both tensor-core kernels (flash, short) share; one warp's 16 query rows: g = lane / 4
// and t = lane % 4 as above, rows row0 = tile row + g and row1 = row0 + 8.

/// One CTA's head and query tile (kWarps x 16 rows) and one thread's place in it.
template <class T, int kWarps>
struct TileGeometry {
  int lane, t;
  int64_t b, h, row0, row1;
  const T *qp, *kp, *vp;
  int64_t n_keys;  ///< keys visible to some row of the tile (uniform over the CTA)
  __device__ __forceinline__ explicit TileGeometry(const AttentionParams& p) {
    const int warp = threadIdx.x >> 5;
    lane = threadIdx.x & 31;
    t = lane & 3;
    b = blockIdx.x / p.q_heads;
    h = blockIdx.x % p.q_heads;
    const int64_t kvh = h / (p.q_heads / p.kv_heads);
    const int64_t tile0 = static_cast<int64_t>(blockIdx.y) * (kWarps * 16);
    row0 = tile0 + warp * 16 + (lane >> 2);
    row1 = row0 + 8;
    qp = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
    kp = static_cast<const T*>(p.k) + b * p.k_stride[0] + kvh * p.k_stride[1];
    vp = static_cast<const T*>(p.v) + b * p.v_stride[0] + kvh * p.v_stride[1];
    int64_t tile_last = tile0 + kWarps * 16 - 1;
    if (tile_last >= p.q_len) tile_last = p.q_len - 1;
    n_keys = visible_keys(p, tile_last);
  }
};

/// Q fragments (A operand, row-major 16 x kD) of rows row0 and row1, zero past q_len.
template <class T, int kD>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[kD / 16][4], const T* qp, const AttentionParams& p,
                                                 int64_t row0, int64_t row1, int t) {
  const uint32_t* q0 = row0 < p.q_len ? reinterpret_cast<const uint32_t*>(qp + row0 * p.q_stride[2]) : nullptr;
  const uint32_t* q1 = row1 < p.q_len ? reinterpret_cast<const uint32_t*>(qp + row1 * p.q_stride[2]) : nullptr;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    const int w = kk * 8 + t;  // 32-bit word index of columns 16 kk + 2t, +1
    qf[kk][0] = q0 ? q0[w] : 0u;
    qf[kk][1] = q1 ? q1[w] : 0u;
    qf[kk][2] = q0 ? q0[w + 4] : 0u;
    qf[kk][3] = q1 ? q1[w + 4] : 0u;
  }
}

/// S += Q K^T over kKeyTiles 8-key tiles of K staged at `kt` (row stride kD + 8).
template <class T, int kD, int kKeyTiles>
__device__ __forceinline__ void add_qk(float (&s)[kKeyTiles][4], const uint32_t (&qf)[kD / 16][4], const T* kt,
                                       int lane) {
  constexpr int kStride = kD + 8;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < kKeyTiles / 2; ++np) {
      // Matrices: keys +0..7 / +8..15 (lane bit 4) x dims +0..7 / +8..15 (lane bit 3).
      uint32_t kb[4];
      ldmatrix_x4(kb, kt + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kStride + kk * 16 + ((lane >> 3) & 1) * 8);
      mma_16816<T>(s[2 * np], qf[kk], kb[0], kb[1]);
      mma_16816<T>(s[2 * np + 1], qf[kk], kb[2], kb[3]);
    }
  }
}

/// P = exp(S - shift) per row, added into the row sums l and packed as P V's A operand (one
/// 16-key step per entry of pf).
template <class T, int kKeyTiles>
__device__ __forceinline__ void exp_and_pack(const float (&s)[kKeyTiles][4], const float (&shift)[2], float (&l)[2],
                                             uint32_t (&pf)[kKeyTiles / 2][4]) {
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
    const float p0 = __expf(s[nt][0] - shift[0]), p1 = __expf(s[nt][1] - shift[0]);
    const float p2 = __expf(s[nt][2] - shift[1]), p3 = __expf(s[nt][3] - shift[1]);
    l[0] += p0 + p1;
    l[1] += p2 + p3;
    pf[nt / 2][(nt & 1) * 2 + 0] = pack2<T>(p0, p1);
    pf[nt / 2][(nt & 1) * 2 + 1] = pack2<T>(p2, p3);
  }
}

/// O += P V over kKeySteps 16-key steps of V staged at `vt` (row stride kD + 8).
template <class T, int kD, int kKeySteps>
__device__ __forceinline__ void add_pv(float (&o)[kD / 8][4], const uint32_t (&pf)[kKeySteps][4], const T* vt,
                                       int lane) {
  constexpr int kStride = kD + 8;
#pragma unroll
  for (int kk = 0; kk < kKeySteps; ++kk) {
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      // Transposed matrices: keys +0..7 / +8..15 (lane bit 3) x dims +0..7 / +8..15 (lane bit 4).
      uint32_t vb[4];
      const int key = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      ldmatrix_x4_trans(vb, vt + key * kStride + dp * 16 + (lane >> 4) * 8);
      mma_16816<T>(o[2 * dp], pf[kk], vb[0], vb[1]);
      mma_16816<T>(o[2 * dp + 1], pf[kk], vb[2], vb[3]);
    }
  }
}

/// Y rows row0 and row1 (those below q_len) = O / l, with l the partial row sums of the quad.
template <class T, int kD>
__device__ __forceinline__ void store_rows(const float (&o)[kD / 8][4], float (&l)[2], const AttentionParams& p,
                                           int64_t b, int64_t h, int64_t row0, int64_t row1, int t) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
  }
  T* yp = static_cast<T*>(p.y) + b * p.y_stride[0] + h * p.y_stride[1];
  uint32_t* y0 = row0 < p.q_len ? reinterpret_cast<uint32_t*>(yp + row0 * p.y_stride[2]) : nullptr;
  uint32_t* y1 = row1 < p.q_len ? reinterpret_cast<uint32_t*>(yp + row1 * p.y_stride[2]) : nullptr;
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) {
    if (y0) y0[dt * 4 + t] = pack2<T>(o[dt][0] * inv[0], o[dt][1] * inv[0]);
    if (y1) y1[dt * 4 + t] = pack2<T>(o[dt][2] * inv[1], o[dt][3] * inv[1]);
  }
}

/// K/V tiles in flight: two when both buffers of both fit in the 48 KB of static shared
/// memory (head sizes up to 80), so the next tile loads while this one is computed; one
/// otherwise (V still arrives while the scores of its tile are computed).
template <class T, int kD>
constexpr int flash_stages() {
  return 2 * 2 * kFlashKeys * (kD + 8) * static_cast<int>(sizeof(T)) <= 48 * 1024 ? 2 : 1;
}

template <class T, int kD, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) attention_flash_kernel(AttentionParams p) {
  INGOT_KERNEL_ENTRY();
  constexpr int kStride = kD + 8;  // 16-byte row padding: ldmatrix rows fall in distinct banks
  constexpr int kKSteps = kD / 16;
  constexpr int kDTiles = kD / 8;
  constexpr int kKeyTiles = kFlashKeys / 8;
  constexpr int kStages = flash_stages<T, kD>();
  constexpr int kThreads = kWarps * 32;
  __shared__ __align__(16) T ks[kStages][kFlashKeys * kStride];
  __shared__ __align__(16) T vs[kStages][kFlashKeys * kStride];

  const TileGeometry<T, kWarps> tg(p);
  const int lane = tg.lane, t = tg.t;
  const int64_t b = tg.b, h = tg.h, row0 = tg.row0, row1 = tg.row1;
  const T *qp = tg.qp, *kp = tg.kp, *vp = tg.vp;
  const int64_t n_keys = tg.n_keys;  // uniform over the CTA: barriers below
  const int64_t mrow0 = mask_row(p, b, h, row0), mrow1 = mask_row(p, b, h, row1);
  const float inv_scale = 1.0f / p.scale;

  if constexpr (kStages == 2) {  // prologue: the first tile
    if (n_keys > 0) {
      load_kv_tile<T, kD, kThreads>(ks[0], kp, p.k_stride[2], 0, p.kv_len);
      load_kv_tile<T, kD, kThreads>(vs[0], vp, p.v_stride[2], 0, p.kv_len);
      cp_async_commit();
    }
  }

  uint32_t qf[kKSteps][4];
  load_q_fragments<T, kD>(qf, qp, p, row0, row1, t);

  float o[kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  int it = 0;
  for (int64_t n0 = 0; n0 < n_keys; n0 += kFlashKeys, ++it) {
    const int buf = kStages == 2 ? (it & 1) : 0;
    if constexpr (kStages == 2) {
      // The other buffer was released by the barrier that ended the previous tile.
      if (n0 + kFlashKeys < n_keys) {
        load_kv_tile<T, kD, kThreads>(ks[buf ^ 1], kp, p.k_stride[2], n0 + kFlashKeys, p.kv_len);
        load_kv_tile<T, kD, kThreads>(vs[buf ^ 1], vp, p.v_stride[2], n0 + kFlashKeys, p.kv_len);
      }
      cp_async_commit();   // possibly empty: one group per tile keeps the count
      cp_async_wait<1>();  // this tile's K and V have landed
    } else {
      load_kv_tile<T, kD, kThreads>(ks[0], kp, p.k_stride[2], n0, p.kv_len);
      cp_async_commit();
      load_kv_tile<T, kD, kThreads>(vs[0], vp, p.v_stride[2], n0, p.kv_len);
      cp_async_commit();
      cp_async_wait<1>();  // K here; V still in flight while the scores are computed
    }

    // Mask (and hidden keys) first, as the accumulators' start value: its loads overlap the
    // barrier and the K fragment loads.
    float s[kKeyTiles][4];
    uint32_t hidden;
    const int64_t col0 = n0 + 2 * t;
    hidden = init_scores_any(s, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
    __syncthreads();

    // S += Q K^T for this warp's 16 rows and the tile's 64 keys.
    add_qk<T, kD, kKeyTiles>(s, qf, ks[buf], lane);

    // Scale, hide, and the online softmax update.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = (hidden >> (nt * 4 + e)) & 1u ? -INFINITY : s[nt][e] * p.scale;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
      }
    }
    float shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      shift[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
      const float alpha = __expf(m[r] - shift[r]);
      m[r] = mx[r];
      l[r] *= alpha;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        o[dt][2 * r] *= alpha;
        o[dt][2 * r + 1] *= alpha;
      }
    }
    uint32_t pf[kKeyTiles / 2][4];  // P as the A operand, one 16-key step per entry
    exp_and_pack<T, kKeyTiles>(s, shift, l, pf);

    if constexpr (kStages == 1) {
      cp_async_wait<0>();
      __syncthreads();
    }
    // O += P V.
    add_pv<T, kD, kKeyTiles / 2>(o, pf, vs[buf], lane);
    __syncthreads();  // every warp is done with this tile's buffers before they are refilled
  }

  // Row sums: the four threads of a quad hold partial sums of the same two rows.
  store_rows<T, kD>(o, l, p, b, h, row0, row1, t);
}

// ---------------------------------------------------------------------------------------------
// Short-sequence kernel: every key of the head at once (kv_len <= kShortKeys), so K and V are
// staged once per CTA, the scores of all keys sit in registers and the softmax is one pass with
// no rescaling; V's loads overlap Q K^T. A mask that does not depend on the query row (none, or
// strides 0 over rows: BERT's [B, 1, 1, S] padding mask) and no causal masking: the CTA stages
// the row once in shared memory (scaled, with a bitmask of the hidden keys), so each thread reads
// its 32 columns from there; other masks go through init_scores, element by element, as in the
// flash kernel. Same register layout, same handling of hidden rows, keys and infinities.

constexpr int kShortKeys = 128;

/// Whether the mask (with causal masking off) is the same for every query row of a head.
__host__ __device__ __forceinline__ bool row_independent_mask(const AttentionParams& p) {
  return !p.causal && (p.mask_kind == AttentionMask::kNone || p.mask_stride[2] == 0);
}

/// Stages the row-independent mask row of head (b, h) in shared memory: bias_s[j] = mask / scale
/// (0 where hidden), hidden_s = a bitmask of the hidden keys (j >= n_keys, or a -inf / false mask
/// entry). Every thread of the CTA takes part (ballots over full warps); kThreads divides
/// kShortKeys or is a multiple of it.
template <int kThreads>
__device__ __forceinline__ void stage_mask_row(const AttentionParams& p, int64_t b, int64_t h, int64_t n_keys,
                                               float inv_scale, float* bias_s, uint32_t* hidden_s) {
  const int64_t mrow = mask_row(p, b, h, 0);
  for (int j = threadIdx.x; j < kShortKeys; j += kThreads) {
    bool visible = j < n_keys;
    float v = 0.0f;
    if (visible && p.mask_kind != AttentionMask::kNone) {
      const int64_t idx = mrow + j * p.mask_stride[3];
      const float bias = p.mask_kind == AttentionMask::kBool
                             ? (static_cast<const uint8_t*>(p.mask)[idx] ? 0.0f : -INFINITY)
                             : load_float(p.mask, p.mask_type, idx);
      visible = bias != -INFINITY;
      if (visible) v = fmaxf(bias * inv_scale, -FLT_MAX);  // a huge finite bias stays finite
    }
    bias_s[j] = v;
    const uint32_t hid = __ballot_sync(0xffffffffu, !visible);
    if ((threadIdx.x & 31) == 0) hidden_s[j >> 5] = hid;
  }
}

/// The scores' start values of rows row0 / row1 from a staged mask row (mask / scale, 0 where
/// hidden) and their hidden bits, nt * 4 + e (rows past q_len hidden whole).
template <int kKeyTiles>
__device__ __forceinline__ uint64_t scores_from_row(float (&s)[kKeyTiles][4], const float* bias_s,
                                                    const uint32_t* hidden_s, bool row0_out, bool row1_out,
                                                    int t) {
  const bool rows_out[2] = {row0_out, row1_out};
  uint64_t hidden = 0;
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
    const int col = nt * 8 + 2 * t;
    const float2 bv = *reinterpret_cast<const float2*>(bias_s + col);
    const uint32_t word = hidden_s[col >> 5];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = col + (e & 1);
      const bool hid = rows_out[e >> 1] || ((word >> (c & 31)) & 1u);
      s[nt][e] = hid ? 0.0f : ((e & 1) ? bv.y : bv.x);
      if (hid) hidden |= uint64_t(1) << (nt * 4 + e);
    }
  }
  return hidden;
}

/// The one-pass softmax of the short kernels: scale, hide, the rows' max, then P = exp(S - max)
/// packed as P V's A operand, with the quad's partial row sums in l.
template <class T, int kKeyTiles>
__device__ __forceinline__ void one_pass_softmax(float (&s)[kKeyTiles][4], uint64_t hidden, float scale,
                                                 float (&l)[2], uint32_t (&pf)[kKeyTiles / 2][4]) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = (hidden >> (nt * 4 + e)) & 1u ? -INFINITY : s[nt][e] * scale;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
    }
  }
  float shift[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    shift[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
    l[r] = 0.0f;
  }
  exp_and_pack<T, kKeyTiles>(s, shift, l, pf);
}

template <class T, int kD, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) attention_short_kernel(AttentionParams p) {
  INGOT_KERNEL_ENTRY();
  constexpr int kStride = kD + 8;
  constexpr int kKSteps = kD / 16;
  constexpr int kDTiles = kD / 8;
  constexpr int kKeyTiles = kShortKeys / 8;  // 16 tiles of 8 keys
  constexpr int kThreads = kWarps * 32;
  __shared__ __align__(16) T ks[kShortKeys * kStride];
  __shared__ __align__(16) T vs[kShortKeys * kStride];
  __shared__ __align__(16) float bias_s[kShortKeys];  // row-independent mask / scale; 0 where hidden
  __shared__ uint32_t hidden_s[kShortKeys / 32];

  const TileGeometry<T, kWarps> tg(p);
  const int lane = tg.lane, t = tg.t;
  const int64_t b = tg.b, h = tg.h, row0 = tg.row0, row1 = tg.row1;
  const T *qp = tg.qp, *kp = tg.kp, *vp = tg.vp;
  const int64_t n_keys = tg.n_keys;  // <= kv_len <= kShortKeys; uniform over the CTA
  const float inv_scale = 1.0f / p.scale;

  // K (one commit group), then V (another): Q K^T waits for K only.
  load_kv_tile<T, kD, kThreads>(ks, kp, p.k_stride[2], 0, p.kv_len);
  load_kv_tile<T, kD, kThreads>(ks + kFlashKeys * kStride, kp, p.k_stride[2], kFlashKeys, p.kv_len);
  cp_async_commit();
  load_kv_tile<T, kD, kThreads>(vs, vp, p.v_stride[2], 0, p.kv_len);
  load_kv_tile<T, kD, kThreads>(vs + kFlashKeys * kStride, vp, p.v_stride[2], kFlashKeys, p.kv_len);
  cp_async_commit();

  const bool shared_row = row_independent_mask(p);
  // The mask row of (b, h), once per CTA: kShortKeys = 32 * 4 columns.
  if (shared_row) stage_mask_row<kThreads>(p, b, h, n_keys, inv_scale, bias_s, hidden_s);

  uint32_t qf[kKSteps][4];
  load_q_fragments<T, kD>(qf, qp, p, row0, row1, t);

  cp_async_wait<1>();  // K has landed (this thread's copies)
  __syncthreads();     // everyone's K copies, and bias_s / hidden_s

  // The scores' start values (mask / scale, 0 where hidden) and the hidden bits, nt * 4 + e.
  float s[kKeyTiles][4];
  uint64_t hidden = 0;
  if (shared_row) {
    hidden = scores_from_row<kKeyTiles>(s, bias_s, hidden_s, row0 >= p.q_len, row1 >= p.q_len, t);
  } else {
    const int64_t mrow0 = mask_row(p, b, h, row0), mrow1 = mask_row(p, b, h, row1);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float part[kFlashKeys / 8][4];
      const int64_t col0 = half * kFlashKeys + 2 * t;
      const uint32_t bits = init_scores_any(part, p, row0, row1, mrow0, mrow1, col0, n_keys, inv_scale);
#pragma unroll
      for (int nt = 0; nt < kFlashKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[half * (kFlashKeys / 8) + nt][e] = part[nt][e];
      hidden |= static_cast<uint64_t>(bits) << (half * 32);
    }
  }

  // S += Q K^T for this warp's 16 rows and all kShortKeys keys.
  add_qk<T, kD, kKeyTiles>(s, qf, ks, lane);

  float l[2];
  uint32_t pf[kKeyTiles / 2][4];  // P as the A operand, one 16-key step per entry
  one_pass_softmax<T, kKeyTiles>(s, hidden, p.scale, l, pf);

  cp_async_wait<0>();  // V
  __syncthreads();

  // O = P V.
  float o[kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  add_pv<T, kD, kKeyTiles / 2>(o, pf, vs, lane);

  store_rows<T, kD>(o, l, p, b, h, row0, row1, t);
}

// Persistent form of the short kernel for row-independent masks (BERT's [B, 1, 1, S] padding
// mask; no causal masking) when there are heads enough to fill the GPU: each CTA takes a run of
// consecutive heads, stages a head's K and V once for all its 64-query tiles (the per-tile kernel
// loads them once per tile), and loads the next head's K and V into the other buffer while it
// computes this one's. Dynamic shared memory: two K/V buffers (73.7 KB at head size 64).
template <class T, int kD>
constexpr int short_heads_smem_bytes() {
  return 2 * 2 * kShortKeys * (kD + 8) * static_cast<int>(sizeof(T)) + kShortKeys * 4 + kShortKeys / 8;
}

template <class T, int kD>
__global__ void __launch_bounds__(128) attention_short_heads_kernel(AttentionParams p, int64_t heads_per_cta) {
  INGOT_KERNEL_ENTRY();
  constexpr int kStride = kD + 8;
  constexpr int kKSteps = kD / 16;
  constexpr int kDTiles = kD / 8;
  constexpr int kKeyTiles = kShortKeys / 8;
  constexpr int kThreads = 128;
  constexpr int kHead = kShortKeys * kStride;  // one K or V head in shared memory, elements
  extern __shared__ __align__(16) unsigned char short_heads_smem[];
  T* kv = reinterpret_cast<T*>(short_heads_smem);  // [buffer 0: K, V][buffer 1: K, V]
  float* bias_s = reinterpret_cast<float*>(kv + 4 * kHead);
  uint32_t* hidden_s = reinterpret_cast<uint32_t*>(bias_s + kShortKeys);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const int64_t heads = p.batch * p.q_heads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * heads_per_cta;
  const int64_t last = first + heads_per_cta < heads ? first + heads_per_cta : heads;
  const int64_t n_keys = visible_keys(p, p.q_len - 1);  // no causal masking: the same for every row
  const int64_t n_tiles = (p.q_len + 63) / 64;
  const float inv_scale = 1.0f / p.scale;
  const int64_t group = p.q_heads / p.kv_heads;

  auto stage = [&](int buf, int64_t bh) {
    const int64_t b = bh / p.q_heads, kvh = (bh % p.q_heads) / group;
    const T* kp = static_cast<const T*>(p.k) + b * p.k_stride[0] + kvh * p.k_stride[1];
    const T* vp = static_cast<const T*>(p.v) + b * p.v_stride[0] + kvh * p.v_stride[1];
    T* ks = kv + buf * 2 * kHead;
    load_kv_tile<T, kD, kThreads>(ks, kp, p.k_stride[2], 0, p.kv_len);
    load_kv_tile<T, kD, kThreads>(ks + kFlashKeys * kStride, kp, p.k_stride[2], kFlashKeys, p.kv_len);
    load_kv_tile<T, kD, kThreads>(ks + kHead, vp, p.v_stride[2], 0, p.kv_len);
    load_kv_tile<T, kD, kThreads>(ks + kHead + kFlashKeys * kStride, vp, p.v_stride[2], kFlashKeys, p.kv_len);
    cp_async_commit();
  };

  if (first >= last) return;  // uniform over the CTA
  stage(0, first);
  for (int64_t bh = first; bh < last; ++bh) {
    const int buf = static_cast<int>((bh - first) & 1);
    if (bh + 1 < last) {
      stage(buf ^ 1, bh + 1);  // its buffer was released by the barrier ending the last head
      cp_async_wait<1>();      // this head's K and V have landed (this thread's copies)
    } else {
      cp_async_wait<0>();
    }
    const int64_t b = bh / p.q_heads, h = bh % p.q_heads;
    stage_mask_row<kThreads>(p, b, h, n_keys, inv_scale, bias_s, hidden_s);
    __syncthreads();  // everyone's K/V copies, bias_s and hidden_s
    const T* ks = kv + buf * 2 * kHead;
    const T* vs = ks + kHead;
    const T* qp = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t row0 = tile * 64 + warp * 16 + (lane >> 2), row1 = row0 + 8;
      uint32_t qf[kKSteps][4];
      load_q_fragments<T, kD>(qf, qp, p, row0, row1, t);
      float s[kKeyTiles][4];
      const uint64_t hidden =
          scores_from_row<kKeyTiles>(s, bias_s, hidden_s, row0 >= p.q_len, row1 >= p.q_len, t);
      add_qk<T, kD, kKeyTiles>(s, qf, ks, lane);
      float l[2];
      uint32_t pf[kKeyTiles / 2][4];
      one_pass_softmax<T, kKeyTiles>(s, hidden, p.scale, l, pf);
      float o[kDTiles][4];
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
      add_pv<T, kD, kKeyTiles / 2>(o, pf, vs, lane);
      store_rows<T, kD>(o, l, p, b, h, row0, row1, t);
    }
    __syncthreads();  // this buffer and the mask row are free for the next heads
  }
}

// CTAs of the persistent kernel per SM on the current device, once its dynamic shared-memory
// attribute is set there: both asked once per device (the attribute belongs to a device), not per
// enqueue. 0 with *err set when the device refuses.
template <class T, int kD>
int short_heads_ctas_per_sm(cudaError_t* err) {
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<int, kMaxDevices> per_sm{};
  static std::array<cudaError_t, kMaxDevices> status{};
  int dev = 0;
  *err = cudaGetDevice(&dev);
  if (*err != cudaSuccess) return 0;
  if (dev < 0 || dev >= kMaxDevices) {
    *err = cudaErrorInvalidDevice;
    return 0;
  }
  const size_t d = static_cast<size_t>(dev);
  std::call_once(once[d], [d] {
    constexpr int kSmem = short_heads_smem_bytes<T, kD>();
    status[d] = cudaFuncSetAttribute(attention_short_heads_kernel<T, kD>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (status[d] == cudaSuccess)
      status[d] = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm[d], attention_short_heads_kernel<T, kD>,
                                                                128, kSmem);
  });
  *err = status[d];
  return *err == cudaSuccess ? per_sm[d] : 0;
}

template <class T, int kD>
cudaError_t launch_short_heads(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  constexpr int kSmem = short_heads_smem_bytes<T, kD>();
  cudaError_t err = cudaSuccess;
  const int per_sm = short_heads_ctas_per_sm<T, kD>(&err);
  if (err != cudaSuccess) return err;
  const int64_t heads = p.batch * p.q_heads;
  const int64_t slots = static_cast<int64_t>(sm_count) * (per_sm > 0 ? per_sm : 1);
  const int64_t per_cta = (heads + slots - 1) / slots;
  const int64_t grid = (heads + per_cta - 1) / per_cta;
  if (grid > 0x7fffffff) return cudaErrorInvalidConfiguration;
  launch_kernel(attention_short_heads_kernel<T, kD>, static_cast<unsigned>(grid), 128, kSmem, stream, p, per_cta);
  return cudaGetLastError();
}

template <class T, int kD>
cudaError_t launch_short_dim(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  // Heads enough to fill the GPU and a mask shared by every row: the persistent kernel.
  if (row_independent_mask(p) && p.batch * p.q_heads >= 2 * static_cast<int64_t>(sm_count))
    return launch_short_heads<T, kD>(p, sm_count, stream);
  // 64-row tiles when they fill the GPU, else 16-row ones (4x the CTAs), as the flash kernel.
  const int64_t ctas64 = p.batch * p.q_heads * ((p.q_len + 63) / 64);
  const int warps = ctas64 >= static_cast<int64_t>(sm_count) ? 4 : 1;
  const int64_t tiles = (p.q_len + warps * 16 - 1) / (warps * 16);
  if (tiles > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(p.batch * p.q_heads), static_cast<unsigned>(tiles));
  if (warps == 4)
    launch_kernel(attention_short_kernel<T, kD, 4>, grid, 128, 0, stream, p);
  else
    launch_kernel(attention_short_kernel<T, kD, 1>, grid, 32, 0, stream, p);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_short_type(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  switch (p.head_size) {
    case 32: return launch_short_dim<T, 32>(p, sm_count, stream);
    case 64: return launch_short_dim<T, 64>(p, sm_count, stream);
    default: return cudaErrorInvalidValue;
  }
}

bool valid_geometry(const AttentionParams& p) {
  return p.q_heads > 0 && p.kv_heads > 0 && p.q_heads % p.kv_heads == 0 && p.batch * p.q_heads <= 0x7fffffff;
}

template <class T, int kD, int kWarps>
cudaError_t launch_flash_tile(const AttentionParams& p, cudaStream_t stream) {
  const int64_t tiles = (p.q_len + kWarps * 16 - 1) / (kWarps * 16);
  if (tiles > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(p.batch * p.q_heads), static_cast<unsigned>(tiles));
  launch_kernel(attention_flash_kernel<T, kD, kWarps>, grid, kWarps * 32, 0, stream, p);
  return cudaGetLastError();
}

template <class T, int kD>
cudaError_t launch_flash_dim(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  // 64-row tiles share each K/V tile among 4 warps; when that leaves SMs idle (batch 1), 16-row
  // tiles give 4x the CTAs.
  const int64_t ctas64 = p.batch * p.q_heads * ((p.q_len + 63) / 64);
  if (ctas64 >= static_cast<int64_t>(sm_count)) return launch_flash_tile<T, kD, 4>(p, stream);
  return launch_flash_tile<T, kD, 1>(p, stream);
}

template <class T>
cudaError_t launch_flash_type(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  switch (p.head_size) {
    case 32: return launch_flash_dim<T, 32>(p, sm_count, stream);
    case 64: return launch_flash_dim<T, 64>(p, sm_count, stream);
    case 80: return launch_flash_dim<T, 80>(p, sm_count, stream);
    case 96: return launch_flash_dim<T, 96>(p, sm_count, stream);
    case 128: return launch_flash_dim<T, 128>(p, sm_count, stream);
    default: return cudaErrorInvalidValue;
  }
}

bool row_aligned(const void* base, const int64_t (&stride)[3]) {
  return ew::aligned16(base) && stride[0] % 8 == 0 && stride[1] % 8 == 0 && stride[2] % 8 == 0;
}

}  // namespace

bool attention_flash_supports(FloatType type, int64_t head_size) {
  if (type != FloatType::kF16 && type != FloatType::kBF16) return false;
  return head_size == 32 || head_size == 64 || head_size == 80 || head_size == 96 || head_size == 128;
}

bool attention_flash_can_run(const AttentionParams& p) {
  return attention_flash_supports(p.type, p.head_size) && p.scale > 0.0f && p.scale <= FLT_MAX &&
         row_aligned(p.q, p.q_stride) &&
         row_aligned(p.k, p.k_stride) && row_aligned(p.v, p.v_stride) && row_aligned(p.y, p.y_stride);
}

cudaError_t launch_attention_flash(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  if (!attention_flash_can_run(p) || !valid_geometry(p)) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_len == 0) return cudaSuccess;
  if (p.type == FloatType::kF16) return launch_flash_type<__half>(p, sm_count, stream);
  return launch_flash_type<__nv_bfloat16>(p, sm_count, stream);
}

bool attention_short_can_run(const AttentionParams& p) {
  return attention_flash_can_run(p) && (p.head_size == 32 || p.head_size == 64) && p.kv_len <= kShortKeys;
}

cudaError_t launch_attention_short(const AttentionParams& p, int sm_count, cudaStream_t stream) {
  if (!attention_short_can_run(p) || !valid_geometry(p)) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_len == 0) return cudaSuccess;
  if (p.type == FloatType::kF16) return launch_short_type<__half>(p, sm_count, stream);
  return launch_short_type<__nv_bfloat16>(p, sm_count, stream);
}

cudaError_t launch_attention_generic(const AttentionParams& p, cudaStream_t stream) {
  if (p.head_size < 1 || p.head_size > kAttentionGenericMaxHeadSize || !valid_geometry(p))
    return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_len == 0) return cudaSuccess;
  const int64_t blocks_y = (p.q_len + kGenWarps - 1) / kGenWarps;
  if (blocks_y > 65535) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(p.batch * p.q_heads), static_cast<unsigned>(blocks_y));
  cudaError_t err = cudaSuccess;
  ew::dispatch_float(p.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(attention_generic_kernel<T>, grid, kGenWarps * 32, 0, stream, p);
    err = cudaGetLastError();
  });
  return err;
}

}  // namespace ingot::backend::cuda
