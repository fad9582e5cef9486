// Copyright ingot authors. Apache-2.0.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/pool/squeeze_excite_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
/// Blocks the pool (K1) and the scale (K3) aim for when the work allows: eight 256-thread blocks
/// on each of the H200's 132 SMs, as the strided reduction's split (kReduceSplitTargetBlocks).
constexpr int64_t kTargetBlocks = 1056;
/// The most partial sums K1 leaves per sample (chunks * C): every K2 block of the sample reads
/// them all, 16 loads a thread at most.
constexpr int64_t kMaxPartialsPerSample = 4096;
/// The fewest row iterations (channels-last) or packs (channels-first) a K1 thread takes per chunk.
constexpr int64_t kMinIters = 2;
/// The fewest channel packs a channels-last tile spans (8 x 16 bytes: whole 128-byte lines).
constexpr int64_t kMinTileGroups = 8;
/// Packs a channels-first K3 block streams, tried largest first until the grid fills the GPU.
constexpr int64_t kCfBlockPacks[] = {2048, 1024, 512, 256};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

/// The most chunks K1 splits H*W into for `d` (the workspace bound assumes no more).
int64_t max_chunks(const SqueezeExciteDesc& d) {
  return std::min(std::max<int64_t>(d.hw, 1), std::max<int64_t>(1, kMaxPartialsPerSample / std::max<int64_t>(d.c, 1)));
}

/// Floats before the partial sums in the workspace: h, rounded to 16 bytes.
int64_t h_floats(const SqueezeExciteDesc& d) { return round_up(d.n * d.cr, 4); }

// ---------------------------------------------------------------------------------------------
// Device code.

/// V-wide multiply-add of w[0..V) (storage type) with s[0..V) (fp32 in shared memory, 16-byte
/// aligned when V >= 4).
template <class T, int V>
__device__ __forceinline__ float dot_pack(const T* w, const float* s, float acc) {
  float wv[V];
  conv_util::load_f32<T, V>(w, wv);
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int j = 0; j < V; j += 4) {
      const float4 sv = *reinterpret_cast<const float4*>(s + j);
      acc = fmaf(wv[j], sv.x, acc);
      acc = fmaf(wv[j + 1], sv.y, acc);
      acc = fmaf(wv[j + 2], sv.z, acc);
      acc = fmaf(wv[j + 3], sv.w, acc);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) acc = fmaf(wv[j], s[j], acc);
  }
  return acc;
}

/// Sum over the `width` lanes (a power of two <= 32, groups aligned to it) of a warp; every warp
/// lane must call it.
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int off = width / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// K1, channels-last x [N, HW, C]: block (n * ctiles + tile, chunk). Thread t takes channel pack
/// t % tg of the tile (V channels from c0 + (t % tg) * V) and rows r0 + t / tg, stepping by r
/// (r * tg <= kThreads); the r row sums are combined by a fixed tree in shared memory and the
/// tile's tg * V sums written to partial[chunk][n * C + channel].
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    se_pool_cl(const T* __restrict__ x, float* __restrict__ partial, int hw, int c, int64_t nc, int tg, int r,
               int ctiles, int rows_per_chunk) {
  INGOT_KERNEL_ENTRY();
  __shared__ float part[kThreads * V];  // [row][tg * V]
  const int t = threadIdx.x;
  const int n = blockIdx.x / ctiles, tile = blockIdx.x - n * ctiles;
  const int width = tg * V;
  const int c0 = tile * width;
  const int g = t % tg, rr = t / tg;
  const int cg = c0 + g * V;
  const int chunk = blockIdx.y;
  const int r0 = chunk * rows_per_chunk;
  const int r1 = min(hw, r0 + rows_per_chunk);
  float acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 0.0f;
  if (rr < r && cg < c) {
    const T* xp = x + static_cast<int64_t>(n) * hw * c + cg;
#pragma unroll 4
    for (int row = r0 + rr; row < r1; row += r) {
      float v[V];
      conv_util::load_f32<T, V>(xp + static_cast<int64_t>(row) * c, v);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += v[j];
    }
  }
  if (rr < r)
#pragma unroll
    for (int j = 0; j < V; ++j) part[rr * width + g * V + j] = acc[j];
  __syncthreads();
  int s = 1;
  while (s < r) s <<= 1;
  for (s >>= 1; s > 0; s >>= 1) {
    // Rows [0, s) add rows [s, 2s) (those below r): reads and writes never meet within a step.
    for (int i = t; i < s * width; i += kThreads) {
      const int row = i / width;
      if (row + s < r) part[i] += part[i + s * width];
    }
    __syncthreads();
  }
  float* out = partial + static_cast<int64_t>(chunk) * nc + static_cast<int64_t>(n) * c + c0;
  for (int j = t; j < width && c0 + j < c; j += kThreads) out[j] = part[j];
}

/// K1, channels-first x [N, C, HW] (rows n * C + c of HW elements, P = HW / V packs): a group of
/// `gs` lanes (a power of two <= 32) per task (row, chunk), tasks row-major so neighbouring groups
/// read neighbouring chunks; the group's sum goes to partial[chunk][row].
template <class T, int V>
__global__ void __launch_bounds__(kThreads) se_pool_cf(const T* __restrict__ x, float* __restrict__ partial, int hw,
                                                       int64_t rows, int chunks, int packs_per_chunk, int gs) {
  INGOT_KERNEL_ENTRY();
  const int t = threadIdx.x;
  const int lane = t % gs;
  const int64_t task = static_cast<int64_t>(blockIdx.x) * (kThreads / gs) + t / gs;
  const bool live = task < rows * chunks;
  const int64_t row = live ? task / chunks : 0;
  const int chunk = live ? static_cast<int>(task - row * chunks) : 0;
  float acc = 0.0f;
  if (live) {
    const int packs = hw / V;
    const int p0 = chunk * packs_per_chunk;
    const int p1 = min(packs, p0 + packs_per_chunk);
    const T* xr = x + row * hw;
#pragma unroll 4
    for (int p = p0 + lane; p < p1; p += gs) {
      float v[V];
      conv_util::load_f32<T, V>(xr + static_cast<int64_t>(p) * V, v);
#pragma unroll
      for (int j = 0; j < V; ++j) acc += v[j];
    }
  }
  acc = group_sum(acc, gs);
  if (live && lane == 0) partial[static_cast<int64_t>(chunk) * rows + row] = acc;
}

/// K2: block (n, row block). The chunks' sums of sample n, each channel's in chunk order (with
/// C < kThreads, kThreads / C thread phases take every phases-th chunk and are added in phase
/// order), divided by HW into pooled[C] (shared memory); then warp w computes h[n, r] for rows
/// r = blockIdx.y * rows_per_block + w + i * kWarps: lanes over C (16-byte packs of w1 when
/// w1_packed), shuffle-reduced, plus b1, through act.
template <class T>
__global__ void __launch_bounds__(kThreads)
    se_fc1(const float* __restrict__ partial, int chunks, int64_t nc, int c, int cr, float hw, const T* __restrict__ w1,
           const T* __restrict__ b1, bool w1_packed, float* __restrict__ h, int rows_per_block, UnaryOp act,
           UnaryParams p) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ float4 smem4[];
  float* pooled = reinterpret_cast<float*>(smem4);  // [C]
  float* tmp = pooled + ((c + 3) & ~3);             // [kThreads] when C < kThreads
  const int t = threadIdx.x;
  const int n = blockIdx.x;
  const float* pn = partial + static_cast<int64_t>(n) * c;
  if (c >= kThreads) {
    for (int ch = t; ch < c; ch += kThreads) {
      float s = 0.0f;
#pragma unroll 8
      for (int k = 0; k < chunks; ++k) s += pn[k * nc + ch];
      pooled[ch] = s / hw;
    }
  } else {
    const int phases = kThreads / c;
    if (t < phases * c) {
      const int ch = t % c, j = t / c;
      float s = 0.0f;
#pragma unroll 8
      for (int k = j; k < chunks; k += phases) s += pn[k * nc + ch];
      tmp[j * c + ch] = s;
    }
    __syncthreads();
    if (t < c) {
      float s = 0.0f;
      for (int j = 0; j < phases; ++j) s += tmp[j * c + t];
      pooled[t] = s / hw;
    }
  }
  __syncthreads();

  const int warp = t / 32, lane = t % 32;
  constexpr int kVw = 16 / sizeof(T);
  for (int i = warp; i < rows_per_block; i += kWarps) {
    const int r = blockIdx.y * rows_per_block + i;
    if (r >= cr) break;  // warp-uniform
    const T* wr = w1 + static_cast<int64_t>(r) * c;
    float s = 0.0f;
    if (w1_packed) {
      for (int q = lane; q < c / kVw; q += 32) s = dot_pack<T, kVw>(wr + q * kVw, pooled + q * kVw, s);
    } else {
      for (int ch = lane; ch < c; ch += 32) s = fmaf(to_f32(wr[ch]), pooled[ch], s);
    }
    s = group_sum(s, 32);
    if (lane == 0) {
      const float v = s + (b1 ? to_f32(b1[r]) : 0.0f);
      h[static_cast<int64_t>(n) * cr + r] = ew::apply_unary(act, v, p.alpha, p.beta, p.lo, p.hi);
    }
  }
}

/// K3's first part: h[n, :] into hs (shared), then the gates of channels c0 .. c0 + count - 1
/// (those below C) into gs (shared): `lanes` lanes (a power of two <= 32) per channel over w2's
/// row (16-byte packs when w2_packed), shuffle-reduced, plus b2, through act. Every thread of the
/// block calls it.
template <class T>
__device__ __forceinline__ void se_gates(const float* __restrict__ hn, float* hs, float* gs, const T* __restrict__ w2,
                                         const T* __restrict__ b2, bool w2_packed, int c0, int count, int c, int cr,
                                         int lanes, UnaryOp act, const UnaryParams& p) {
  const int t = threadIdx.x;
  for (int i = t; i < cr; i += kThreads) hs[i] = hn[i];
  __syncthreads();
  constexpr int kVw = 16 / sizeof(T);
  const int per_pass = kThreads / lanes;
  const int li = t % lanes;
  for (int base = 0; base < count; base += per_pass) {  // the same trip count in every thread
    const int cl = base + t / lanes;
    const int ch = c0 + cl;
    const bool live = cl < count && ch < c;
    float s = 0.0f;
    if (live) {
      const T* wr = w2 + static_cast<int64_t>(ch) * cr;
      if (w2_packed) {
        for (int q = li; q < cr / kVw; q += lanes) s = dot_pack<T, kVw>(wr + q * kVw, hs + q * kVw, s);
      } else {
        for (int k = li; k < cr; k += lanes) s = fmaf(to_f32(wr[k]), hs[k], s);
      }
    }
    s = group_sum(s, lanes);
    if (live && li == 0) gs[cl] = ew::apply_unary(act, s + (b2 ? to_f32(b2[ch]) : 0.0f), p.alpha, p.beta, p.lo, p.hi);
  }
  __syncthreads();
}

/// K3, channels-last: block ((n * ctiles + tile) * hchunks + hchunk) scales rows
/// [hchunk * rows_per_block, +rows_per_block) of channels [tile * tg * V, +tg * V), thread t
/// taking pack t % tg of rows t / tg, stepping by r.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    se_scale_cl(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ h, const T* __restrict__ w2,
                const T* __restrict__ b2, bool w2_packed, int hw, int c, int cr, int tg, int r, int ctiles, int hchunks,
                int rows_per_block, int lanes, UnaryOp act, UnaryParams p) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ float4 smem4[];
  float* hs = reinterpret_cast<float*>(smem4);  // [Cr]
  float* gs = hs + ((cr + 3) & ~3);             // [tg * V]
  const int t = threadIdx.x;
  int b = blockIdx.x;
  const int hchunk = b % hchunks;
  b /= hchunks;
  const int tile = b % ctiles;
  const int n = b / ctiles;
  const int width = tg * V;
  const int c0 = tile * width;
  se_gates<T>(h + static_cast<int64_t>(n) * cr, hs, gs, w2, b2, w2_packed, c0, width, c, cr, lanes, act, p);

  const int g = t % tg, rr = t / tg;
  const int cg = c0 + g * V;
  if (rr >= r || cg >= c) return;
  float gv[V];
#pragma unroll
  for (int j = 0; j < V; ++j) gv[j] = gs[g * V + j];
  const int r0 = hchunk * rows_per_block;
  const int r1 = min(hw, r0 + rows_per_block);
  const int64_t base = static_cast<int64_t>(n) * hw * c + cg;
#pragma unroll 4
  for (int row = r0 + rr; row < r1; row += r) {
    const int64_t off = base + static_cast<int64_t>(row) * c;
    float v[V];
    conv_util::load_f32<T, V>(x + off, v);
    T o[V];
#pragma unroll
    for (int j = 0; j < V; ++j) o[j] = from_f32<T>(v[j] * gv[j]);
    conv_util::store<T, V>(y + off, o);
  }
}

/// K3, channels-first: block ((n * ctiles + tile) * hchunks + hchunk) scales hw
/// [hchunk * rows_per_block, +rows_per_block) (a multiple of V) of channels
/// [tile * ct, +ct), threads over the (channel, pack) pairs, packs fastest.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
    se_scale_cf(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ h, const T* __restrict__ w2,
                const T* __restrict__ b2, bool w2_packed, int hw, int c, int cr, int ct, int ctiles, int hchunks,
                int rows_per_block, int lanes, UnaryOp act, UnaryParams p) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ float4 smem4[];
  float* hs = reinterpret_cast<float*>(smem4);  // [Cr]
  float* gs = hs + ((cr + 3) & ~3);             // [ct]
  const int t = threadIdx.x;
  int b = blockIdx.x;
  const int hchunk = b % hchunks;
  b /= hchunks;
  const int tile = b % ctiles;
  const int n = b / ctiles;
  const int c0 = tile * ct;
  se_gates<T>(h + static_cast<int64_t>(n) * cr, hs, gs, w2, b2, w2_packed, c0, ct, c, cr, lanes, act, p);

  const int r0 = hchunk * rows_per_block;
  const int r1 = min(hw, r0 + rows_per_block);
  const int packs = (r1 - r0) / V;
  const int total = min(ct, c - c0) * packs;
  const int64_t base = (static_cast<int64_t>(n) * c + c0) * hw + r0;
#pragma unroll 4
  for (int i = t; i < total; i += kThreads) {
    const int cl = i / packs, q = i - cl * packs;
    const int64_t off = base + static_cast<int64_t>(cl) * hw + q * V;
    const float gv = gs[cl];
    float v[V];
    conv_util::load_f32<T, V>(x + off, v);
    T o[V];
#pragma unroll
    for (int j = 0; j < V; ++j) o[j] = from_f32<T>(v[j] * gv);
    conv_util::store<T, V>(y + off, o);
  }
}

// ---------------------------------------------------------------------------------------------
// Host: the grids.

/// A channels-last split: tiles of tg channel packs (ctiles per sample), r rows at a time, H*W in
/// chunks of `rows` rows.
struct ClTiling {
  int64_t tg = 1, r = 1, ctiles = 1, chunks = 1, rows = 1;
};

/// The channels-last tiling of `groups` packs per row: tiles of ceil(groups / k) packs for
/// k = ceil(groups / kThreads) .. (tiles of at least kMinTileGroups packs), each with H*W in at
/// most `cap` chunks of at least max(r * iters, min_rows) rows, as many as make kTargetBlocks
/// blocks; the k whose blocks (up to the target) times the share of threads with a pack to take
/// is largest, the widest tile on ties.
ClTiling pick_cl(int64_t groups, int64_t n, int64_t hw, int64_t iters, int64_t min_rows, int64_t cap) {
  ClTiling best;
  double best_score = -1.0;
  const int64_t k0 = ceil_div(groups, kThreads);
  const int64_t min_tg = std::min(groups, kMinTileGroups);
  int64_t last_tg = 0;
  for (int64_t k = k0; k <= k0 + 64; ++k) {
    const int64_t tg = ceil_div(groups, k);
    if (tg < min_tg) break;
    if (tg == last_tg) continue;
    last_tg = tg;
    ClTiling cand;
    cand.tg = tg;
    cand.r = kThreads / tg;
    cand.ctiles = ceil_div(groups, tg);
    const int64_t rows_min = std::max(cand.r * iters, min_rows);
    const int64_t hmax = std::max<int64_t>(1, std::min(ceil_div(hw, rows_min), cap));
    const int64_t tiles = n * cand.ctiles;
    const int64_t chunks = std::clamp<int64_t>(ceil_div(kTargetBlocks, tiles), 1, hmax);
    cand.rows = round_up(ceil_div(hw, chunks), cand.r);
    cand.chunks = ceil_div(hw, cand.rows);
    const double util = static_cast<double>(cand.r * groups) / static_cast<double>(cand.ctiles * kThreads);
    const double score = std::min<double>(static_cast<double>(tiles) * cand.chunks, kTargetBlocks) * util;
    if (score > best_score * (1.0 + 1e-9)) {
      best_score = score;
      best = cand;
    }
  }
  return best;
}

/// The channels-first K1 split: rows of `packs` packs, a group of gs lanes per (row, chunk).
struct CfPool {
  int64_t gs = 32, chunks = 1, packs_per_chunk = 1;
};

CfPool pick_cf_pool(int64_t packs, int64_t rows, int64_t cap) {
  CfPool p;
  p.gs = pow2_floor(std::clamp<int64_t>(packs / 2, 1, 32));
  const int64_t groups_per_block = kThreads / p.gs;
  const int64_t by_len = ceil_div(packs, p.gs * kMinIters);
  const int64_t by_blocks = ceil_div(kTargetBlocks * groups_per_block, rows);
  const int64_t chunks = std::clamp<int64_t>(std::min(by_len, by_blocks), 1, cap);
  p.packs_per_chunk = ceil_div(packs, chunks);
  p.chunks = ceil_div(packs, p.packs_per_chunk);
  return p;
}

/// The channels-first K3 split: ct channels per block, H*W in hchunks ranges of `rows` elements.
struct CfScale {
  int64_t ct = 1, ctiles = 1, hchunks = 1, rows = 1;
};

CfScale pick_cf_scale(int64_t packs, int64_t v, int64_t n, int64_t c, int64_t hw) {
  CfScale s;
  for (int64_t w : kCfBlockPacks) {
    if (packs >= w) {
      s.ct = 1;
      const int64_t per = ceil_div(packs, ceil_div(packs, w));
      s.rows = per * v;
      s.hchunks = ceil_div(packs, per);
    } else {
      s.ct = std::min(c, ceil_div(w, packs));
      s.rows = hw;
      s.hchunks = 1;
    }
    s.ctiles = ceil_div(c, s.ct);
    if (n * s.ctiles * s.hchunks >= kTargetBlocks) break;
  }
  return s;
}

/// Lanes per channel for K3's gates: `count` channels over kThreads threads, no more lanes than
/// w2's row has loads.
int gate_lanes(int64_t count, int64_t loads_per_row) {
  const int64_t by_threads = pow2_floor(std::max<int64_t>(1, kThreads / std::max<int64_t>(count, 1)));
  const int64_t by_row = pow2_floor(std::max<int64_t>(1, loads_per_row));
  return static_cast<int>(std::min<int64_t>({32, by_threads, by_row}));
}

bool aligned_to(const void* p, int64_t bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

/// The widest pack (16 bytes, 8 bytes, one element) that divides `dim` and every pointer allows.
template <class T>
int pack_width(int64_t dim, const void* a, const void* b = nullptr) {
  constexpr int kMax = 16 / sizeof(T);
  for (int v : {kMax, kMax / 2}) {
    const int64_t bytes = static_cast<int64_t>(v) * sizeof(T);
    if (dim % v == 0 && aligned_to(a, bytes) && (!b || aligned_to(b, bytes))) return v;
  }
  return 1;
}

/// f(integral_constant<int, V>) for V one of pack_width's values.
template <class T, class F>
cudaError_t with_pack(int v, F&& f) {
  constexpr int kMax = 16 / sizeof(T);
  if (v == kMax) return f(std::integral_constant<int, kMax>{});
  if (v == kMax / 2) return f(std::integral_constant<int, kMax / 2>{});
  return f(std::integral_constant<int, 1>{});
}

template <class T>
cudaError_t launch_t(const T* x, const T* w1, const T* b1, const T* w2, const T* b2, T* y, const SqueezeExciteDesc& d,
                     float* ws, uint64_t ws_bytes, cudaStream_t stream) {
  const int64_t hf = h_floats(d);
  const int64_t nc = d.n * d.c;
  const int64_t ws_floats = static_cast<int64_t>(ws_bytes / sizeof(float));
  if (ws_floats < hf + nc) return cudaErrorInvalidValue;
  const int64_t cap = std::min(max_chunks(d), (ws_floats - hf) / nc);
  float* h = ws;
  float* partial = ws + hf;
  const int hw = static_cast<int>(d.hw), c = static_cast<int>(d.c), cr = static_cast<int>(d.cr);
  constexpr int kVw = 16 / sizeof(T);

  // K1: the pool's partial sums.
  int64_t chunks = 1;
  cudaError_t e = cudaSuccess;
  if (d.channels_last) {
    const int v = pack_width<T>(d.c, x);
    const ClTiling tl = pick_cl(ceil_div(d.c, v), d.n, d.hw, kMinIters, 0, cap);
    chunks = tl.chunks;
    e = with_pack<T>(v, [&](auto vc) {
      constexpr int V = decltype(vc)::value;
      return launch_kernel(se_pool_cl<T, V>,
                           dim3(static_cast<unsigned>(d.n * tl.ctiles), static_cast<unsigned>(chunks)), kThreads, 0,
                           stream, x, partial, hw, c, nc, static_cast<int>(tl.tg), static_cast<int>(tl.r),
                           static_cast<int>(tl.ctiles), static_cast<int>(tl.rows));
    });
  } else {
    const int v = pack_width<T>(d.hw, x);
    const CfPool pl = pick_cf_pool(d.hw / v, nc, cap);
    chunks = pl.chunks;
    const int64_t blocks = ceil_div(nc * chunks, kThreads / pl.gs);
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    e = with_pack<T>(v, [&](auto vc) {
      constexpr int V = decltype(vc)::value;
      return launch_kernel(se_pool_cf<T, V>, dim3(static_cast<unsigned>(blocks)), kThreads, 0, stream, x, partial, hw,
                           nc, static_cast<int>(chunks), static_cast<int>(pl.packs_per_chunk), static_cast<int>(pl.gs));
    });
  }
  if (e != cudaSuccess) return e;

  // K2: the means and h. About kTargetBlocks blocks in all, a warp row at least per warp.
  {
    const int64_t row_blocks = std::clamp<int64_t>(ceil_div(kTargetBlocks, d.n), 1, ceil_div(d.cr, kWarps));
    const int64_t rows_per_block = kWarps * ceil_div(d.cr, row_blocks * kWarps);
    const size_t smem = (round_up(d.c, 4) + (d.c < kThreads ? kThreads : 0)) * sizeof(float);
    const bool w1_packed = d.c % kVw == 0 && ew::aligned16(w1);
    e = launch_kernel(se_fc1<T>,
                      dim3(static_cast<unsigned>(d.n), static_cast<unsigned>(ceil_div(d.cr, rows_per_block))), kThreads,
                      smem, stream, partial, static_cast<int>(chunks), nc, c, cr, static_cast<float>(d.hw), w1, b1,
                      w1_packed, h, static_cast<int>(rows_per_block), d.act1, d.act1_params);
    if (e != cudaSuccess) return e;
  }

  // K3: the gates and y.
  const bool w2_packed = d.cr % kVw == 0 && ew::aligned16(w2);
  const int64_t w2_loads = w2_packed ? d.cr / kVw : d.cr;
  if (d.channels_last) {
    const int v = pack_width<T>(d.c, x, y);
    const ClTiling tl = pick_cl(ceil_div(d.c, v), d.n, d.hw, 1, ceil_div(d.cr, 2), INT32_MAX);
    const int64_t width = tl.tg * v;
    const int64_t blocks = d.n * tl.ctiles * tl.chunks;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    const size_t smem = (round_up(d.cr, 4) + width) * sizeof(float);
    const int lanes = gate_lanes(width, w2_loads);
    return with_pack<T>(v, [&](auto vc) {
      constexpr int V = decltype(vc)::value;
      return launch_kernel(se_scale_cl<T, V>, dim3(static_cast<unsigned>(blocks)), kThreads, smem, stream, x, y, h, w2,
                           b2, w2_packed, hw, c, cr, static_cast<int>(tl.tg), static_cast<int>(tl.r),
                           static_cast<int>(tl.ctiles), static_cast<int>(tl.chunks), static_cast<int>(tl.rows), lanes,
                           d.act2, d.act2_params);
    });
  }
  const int v = pack_width<T>(d.hw, x, y);
  const CfScale sc = pick_cf_scale(d.hw / v, v, d.n, d.c, d.hw);
  const int64_t blocks = d.n * sc.ctiles * sc.hchunks;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  const size_t smem = (round_up(d.cr, 4) + sc.ct) * sizeof(float);
  const int lanes = gate_lanes(sc.ct, w2_loads);
  return with_pack<T>(v, [&](auto vc) {
    constexpr int V = decltype(vc)::value;
    return launch_kernel(se_scale_cf<T, V>, dim3(static_cast<unsigned>(blocks)), kThreads, smem, stream, x, y, h, w2,
                         b2, w2_packed, hw, c, cr, static_cast<int>(sc.ct), static_cast<int>(sc.ctiles),
                         static_cast<int>(sc.hchunks), static_cast<int>(sc.rows), lanes, d.act2, d.act2_params);
  });
}

}  // namespace

uint64_t squeeze_excite_workspace_bytes(const SqueezeExciteDesc& d) {
  if (d.n <= 0 || d.c <= 0 || d.cr <= 0) return 0;
  return static_cast<uint64_t>(h_floats(d) + d.n * d.c * max_chunks(d)) * sizeof(float);
}

bool squeeze_excite_supported(const SqueezeExciteDesc& d) {
  constexpr int64_t kMax32 = INT32_MAX;
  if (d.c < 1 || d.c > kSqueezeExciteMaxC || d.cr < 1 || d.cr > kSqueezeExciteMaxCr) return false;
  // H*W within 2^30: row and chunk bounds (a chunk's end, a row plus a step) stay in int32.
  if (d.n < 0 || d.hw < 0 || d.hw > (int64_t{1} << 30) || d.n > kMax32 / d.c) return false;
  // Elements within 2^38: the grids' block counts (at least 256 elements a block) stay in int32.
  return d.hw == 0 || d.n * d.c <= (int64_t{1} << 38) / d.hw;
}

cudaError_t launch_squeeze_excite(FloatType t, const void* x, const void* w1, const void* b1, const void* w2,
                                  const void* b2, void* y, const SqueezeExciteDesc& d, void* workspace,
                                  uint64_t workspace_bytes, cudaStream_t stream) {
  if (!squeeze_excite_supported(d)) return cudaErrorInvalidValue;
  if (d.n == 0 || d.hw == 0) return cudaSuccess;
  if (!x || !w1 || !w2 || !y || !workspace || !ew::aligned16(workspace)) return cudaErrorInvalidValue;
  cudaError_t e = cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    e = launch_t<T>(static_cast<const T*>(x), static_cast<const T*>(w1), static_cast<const T*>(b1),
                    static_cast<const T*>(w2), static_cast<const T*>(b2), static_cast<T*>(y), d,
                    static_cast<float*>(workspace), workspace_bytes, stream);
  });
  return e;
}

}  // namespace ingot::backend::cuda
