// Copyright ingot authors. Apache-2.0.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/conv/depthwise_conv_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using conv_util::epilogue;
using conv_util::epilogue_n;
using conv_util::load;
using conv_util::load_f32;
using conv_util::store;
using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;
// Channel packs per channels-last block: 32 packs = 256 fp16 channels; the tile's weights of a
// 7x7 kernel then take 25 KB of shared memory.
constexpr int kMaxTilePacks = 32;

// Channels-last. A block owns a tile of `tile` channel packs (V channels each) and walks output
// pixels: thread (lane = threadIdx.x % tile, row = threadIdx.x / tile) computes pack `lane` of
// pixel row, row + rows, ... (grid-stride over pixels in blockIdx.x, channel tiles in blockIdx.y).
// Neighbouring threads of a warp read neighbouring 16-byte packs of one pixel and then of the next
// pixel, which lies right after it in memory. Only the tile's weights and bias are staged in shared
// memory, as [kh·kw][tile·V], read from global memory in its own order (coalesced). Index math on
// pixels is 32-bit (the launcher checks the counts fit). K > 0: a K x K kernel (3, 5, 7), its taps
// unrolled so that a row's loads are issued together (predicated at the borders) instead of one
// load, one dependent multiply-add at a time; K == 0: kh x kw from the desc.
template <class T, int V, int K>
__global__ void __launch_bounds__(kThreads) depthwise_nhwc(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, const T* __restrict__ r,
                                                           T* __restrict__ y, DepthwiseConvDesc d, int tile) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int khw = d.kh * d.kw;
  const int tile_ch = tile * V;
  T* ws = reinterpret_cast<T*>(smem_raw);  // [kh·kw][tile_ch]
  T* bs = ws + khw * tile_ch;             // [tile_ch]
  const int c_base = static_cast<int>(blockIdx.y) * tile_ch;
  const int c_count = min(tile_ch, static_cast<int>(d.c) - c_base);
  for (int i = threadIdx.x; i < c_count * khw; i += blockDim.x) {
    const int c = i / khw, tap = i - c * khw;
    ws[tap * tile_ch + c] = w[static_cast<int64_t>(c_base) * khw + i];
  }
  for (int c = threadIdx.x; c < c_count; c += blockDim.x) bs[c] = bias ? bias[c_base + c] : from_f32<T>(0.0f);
  __syncthreads();
  const int rows = blockDim.x / tile;
  const int lane = threadIdx.x % tile, row = threadIdx.x / tile;
  const int cl = lane * V;  // first channel of this thread's pack within the tile
  if (row >= rows || cl >= c_count) return;
  const int oh = static_cast<int>(d.oh), ow = static_cast<int>(d.ow);
  const int pixels = static_cast<int>(d.n) * oh * ow;
  const int64_t c0 = c_base + cl;
  for (int p = static_cast<int>(blockIdx.x) * rows + row; p < pixels; p += static_cast<int>(gridDim.x) * rows) {
    const int ox = p % ow;
    const int q = p / ow;
    const int oy = q % oh;
    const int n = q / oh;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = to_f32(bs[cl + v]);
    const int iy0 = oy * d.stride_h - d.pad_h, ix0 = ox * d.stride_w - d.pad_w;
    const T* xn = x + static_cast<int64_t>(n) * d.h * d.w * d.c + c0;
    if constexpr (K > 0) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int iy = iy0 + ky * d.dil_h;
        const bool row_in = iy >= 0 && iy < d.h;
        const T* xrow = xn + static_cast<int64_t>(iy) * d.w * d.c;
        const T* wrow = ws + ky * K * tile_ch + cl;
        T in[K][V];
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {  // the row's loads first
          const int ix = ix0 + kx * d.dil_w;
          if (row_in && ix >= 0 && ix < d.w) {
            load<T, V>(xrow + static_cast<int64_t>(ix) * d.c, in[kx]);
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v) in[kx][v] = from_f32<T>(0.0f);
          }
        }
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          T wt[V];
          load<T, V>(wrow + kx * tile_ch, wt);
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] = fmaf(to_f32(in[kx][v]), to_f32(wt[v]), acc[v]);
        }
      }
    } else {
      for (int ky = 0; ky < d.kh; ++ky) {
        const int iy = iy0 + ky * d.dil_h;
        if (iy < 0 || iy >= d.h) continue;
        const T* xrow = xn + static_cast<int64_t>(iy) * d.w * d.c;
        const T* wrow = ws + ky * d.kw * tile_ch + cl;
        for (int kx = 0; kx < d.kw; ++kx) {
          const int ix = ix0 + kx * d.dil_w;
          if (ix < 0 || ix >= d.w) continue;
          T in[V], wt[V];
          load<T, V>(xrow + static_cast<int64_t>(ix) * d.c, in);
          load<T, V>(wrow + kx * tile_ch, wt);
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] = fmaf(to_f32(in[v]), to_f32(wt[v]), acc[v]);
        }
      }
    }
    const int64_t o = static_cast<int64_t>(p) * d.c + c0;
    float res[V] = {};
    if (r) load_f32<T, V>(r + o, res);
    epilogue_n(acc, res, r != nullptr, d);
    T out[V];
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = from_f32<T>(acc[v]);
    store<T, V>(y + o, out);
  }
}

// Channels-last, a strip of M outputs along x per thread (stride S in both dims, no dilation, a
// K x K kernel): for each kernel row the thread loads the (M-1)·S + K input pixels its M outputs
// share and the row's K weights once, then does M·K multiply-adds per channel from registers. Per
// output that is K·((M-1)·S+K)/M pixel loads and K·K/M weight loads against K·K of each in
// depthwise_nhwc, whose threads reread every tap from L1/L2. Block shape, channel tiles and the
// staged weights as in depthwise_nhwc; a strip index walks (n, oy, strip) grid-stride.
template <class T, int V, int K, int S, int M>
__global__ void __launch_bounds__(kThreads) depthwise_nhwc_strip(const T* __restrict__ x, const T* __restrict__ w,
                                                                 const T* __restrict__ bias, const T* __restrict__ r,
                                                                 T* __restrict__ y, DepthwiseConvDesc d, int tile) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kKK = K * K;
  constexpr int kIn = (M - 1) * S + K;  // input pixels of one kernel row that the strip reads
  const int tile_ch = tile * V;
  T* ws = reinterpret_cast<T*>(smem_raw);  // [K·K][tile_ch]
  T* bs = ws + kKK * tile_ch;             // [tile_ch]
  const int c_base = static_cast<int>(blockIdx.y) * tile_ch;
  const int c_count = min(tile_ch, static_cast<int>(d.c) - c_base);
  for (int i = threadIdx.x; i < c_count * kKK; i += blockDim.x) {
    const int c = i / kKK, tap = i - c * kKK;
    ws[tap * tile_ch + c] = w[static_cast<int64_t>(c_base) * kKK + i];
  }
  for (int c = threadIdx.x; c < c_count; c += blockDim.x) bs[c] = bias ? bias[c_base + c] : from_f32<T>(0.0f);
  __syncthreads();
  const int rows = blockDim.x / tile;
  const int lane = threadIdx.x % tile, row = threadIdx.x / tile;
  const int cl = lane * V;
  if (row >= rows || cl >= c_count) return;
  const int oh = static_cast<int>(d.oh), ow = static_cast<int>(d.ow), ih = static_cast<int>(d.h),
            iw = static_cast<int>(d.w);
  const int per_row = (ow + M - 1) / M;
  const int strips = static_cast<int>(d.n) * oh * per_row;
  const int64_t c0 = c_base + cl;
  const int64_t pitch = d.c;  // elements from one pixel to the next
  float bias_v[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bias_v[v] = to_f32(bs[cl + v]);
  for (int sidx = static_cast<int>(blockIdx.x) * rows + row; sidx < strips;
       sidx += static_cast<int>(gridDim.x) * rows) {
    const int sx = sidx % per_row;
    const int q = sidx / per_row;
    const int oy = q % oh;
    const int n = q / oh;
    const int ox0 = sx * M;
    float acc[M][V];
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[m][v] = bias_v[v];
    const int iy0 = oy * S - d.pad_h, ix0 = ox0 * S - d.pad_w;
    const T* xn = x + static_cast<int64_t>(n) * ih * iw * pitch + c0;
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const int iy = iy0 + ky;
      const bool row_in = iy >= 0 && iy < ih;
      const T* xrow = xn + static_cast<int64_t>(iy) * iw * pitch;
      T in[kIn][V];
#pragma unroll
      for (int j = 0; j < kIn; ++j) {
        const int ix = ix0 + j;
        if (row_in && ix >= 0 && ix < iw) {
          load<T, V>(xrow + static_cast<int64_t>(ix) * pitch, in[j]);
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) in[j][v] = from_f32<T>(0.0f);
        }
      }
      T wt[K][V];
#pragma unroll
      for (int kx = 0; kx < K; ++kx) load<T, V>(ws + (ky * K + kx) * tile_ch + cl, wt[kx]);
#pragma unroll
      for (int kx = 0; kx < K; ++kx)
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int v = 0; v < V; ++v) acc[m][v] = fmaf(to_f32(in[m * S + kx][v]), to_f32(wt[kx][v]), acc[m][v]);
    }
    const int64_t o_row = (static_cast<int64_t>(n) * oh + oy) * ow;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (ox0 + m >= ow) break;
      const int64_t o = (o_row + ox0 + m) * pitch + c0;
      float res[V] = {};
      if (r) load_f32<T, V>(r + o, res);
      epilogue_n(acc[m], res, r != nullptr, d);
      T out[V];
#pragma unroll
      for (int v = 0; v < V; ++v) out[v] = from_f32<T>(acc[m][v]);
      store<T, V>(y + o, out);
    }
  }
}

// Channels-first: thread -> one output element, the output row fastest. 32-bit index math (the
// launcher checks the element count fits): 64-bit division made the index cost more than the taps.
template <class T>
__global__ void __launch_bounds__(kThreads) depthwise_nchw(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, const T* __restrict__ r,
                                                           T* __restrict__ y, DepthwiseConvDesc d) {
  INGOT_KERNEL_ENTRY();
  const int khw = d.kh * d.kw;
  const int oh = static_cast<int>(d.oh), ow = static_cast<int>(d.ow), c_count = static_cast<int>(d.c);
  const int total = static_cast<int>(d.n) * c_count * oh * ow;
  for (int idx = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); idx < total;
       idx += static_cast<int>(gridDim.x * blockDim.x)) {
    const int ox = idx % ow;
    int p = idx / ow;
    const int oy = p % oh;
    p /= oh;  // n * C + c
    const int c = p % c_count;
    const T* xp = x + static_cast<int64_t>(p) * d.h * d.w;
    const T* wp = w + c * khw;
    float acc = bias ? to_f32(__ldg(bias + c)) : 0.0f;
    const int iy0 = oy * d.stride_h - d.pad_h, ix0 = ox * d.stride_w - d.pad_w;
    for (int ky = 0; ky < d.kh; ++ky) {
      const int iy = iy0 + ky * d.dil_h;
      if (iy < 0 || iy >= d.h) continue;
      for (int kx = 0; kx < d.kw; ++kx) {
        const int ix = ix0 + kx * d.dil_w;
        if (ix < 0 || ix >= d.w) continue;
        acc = fmaf(to_f32(xp[static_cast<int64_t>(iy) * d.w + ix]), to_f32(__ldg(wp + ky * d.kw + kx)), acc);
      }
    }
    y[idx] = from_f32<T>(epilogue(acc, r ? to_f32(r[idx]) : 0.0f, r != nullptr, d));
  }
}

template <class T, int V, int K>
cudaError_t launch_nhwc(const void* x, const void* w, const void* b, const void* r, void* y, const DepthwiseConvDesc& d,
                        int sm_count, cudaStream_t stream) {
  const int64_t packs = d.c / V;
  const int tile = static_cast<int>(std::min<int64_t>(packs, kMaxTilePacks));
  const int rows = kThreads / tile;
  const unsigned tiles = static_cast<unsigned>((packs + tile - 1) / tile);
  const int64_t pixels = d.n * d.oh * d.ow;
  // Enough blocks for a few waves; each walks its pixels (the staged weights are reused).
  const int64_t want = std::max<int64_t>(1, (static_cast<int64_t>(sm_count) * 8 + tiles - 1) / tiles);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((pixels + rows - 1) / rows, want));
  const size_t smem = static_cast<size_t>(d.kh * d.kw + 1) * tile * V * sizeof(T);
  launch_kernel(depthwise_nhwc<T, V, K>, dim3(blocks, tiles), tile * rows, smem, stream, static_cast<const T*>(x),
                static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(r), static_cast<T*>(y), d,
                tile);
  return cudaGetLastError();
}

template <class T, int V, int K, int S, int M>
cudaError_t launch_nhwc_strip(const void* x, const void* w, const void* b, const void* r, void* y,
                              const DepthwiseConvDesc& d, int sm_count, cudaStream_t stream) {
  // Tiles of equal size (96 fp16 channels in 4-byte packs: two tiles of 24 packs, not 32 + 16).
  const int64_t packs = d.c / V;
  const unsigned tiles = static_cast<unsigned>((packs + kMaxTilePacks - 1) / kMaxTilePacks);
  const int tile = static_cast<int>((packs + tiles - 1) / tiles);
  const int rows = kThreads / tile;
  const int64_t strips = d.n * d.oh * ((d.ow + M - 1) / M);
  const int64_t want = std::max<int64_t>(1, (static_cast<int64_t>(sm_count) * 8 + tiles - 1) / tiles);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((strips + rows - 1) / rows, want));
  const size_t smem = static_cast<size_t>(K * K + 1) * tile * V * sizeof(T);
  launch_kernel(depthwise_nhwc_strip<T, V, K, S, M>, dim3(blocks, tiles), tile * rows, smem, stream,
                static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(r),
                static_cast<T*>(y), d, tile);
  return cudaGetLastError();
}

// Channels-last, tiled through shared memory (DepthwiseConvDesc::tiled): a block computes an
// output tile of kTiledRows x kTiledCols pixels over kTiledWords 4-byte words of channels (32
// fp16/bf16 or 16 fp32 channels) of one image. It first copies the tile's input window
// ((rows - 1)·S + K) x ((cols - 1)·S + K) pixels, zero outside the image, into shared memory in
// 16- or 4-byte loads (LV words each) that are all in flight together, then each thread computes
// kDepthwiseStrip outputs along x of one channel word from shared memory, its kernel rows' inputs
// and weights (staged as fp32) read once per strip. Global memory sees each input pixel about once
// (the halo, 1.1-1.4x, mostly from L2), where the one-pixel kernel reads every tap through L1/L2
// (3x3: 9 reads per output; its 64x112x112x32 layer ran at 1/4 of the memory bound, session 15).
//
// Shared memory is [rows][pitch] words with a pixel's words contiguous; a warp is 32 / 16 = 2
// strips in neighbouring output rows, i.e. input rows S apart, and the pitch is padded so that S
// rows lie 16 words apart modulo 32 banks: the two half-warps read disjoint banks.
constexpr int kTiledWords = 16;
constexpr int kTiledRows = 8;
constexpr int kTiledStripsPerRow = 4;
constexpr int kTiledCols = kTiledStripsPerRow * kDepthwiseStrip;

// The tile's input window and shared-memory row pitch (words) for a K x K kernel at stride S.
struct TiledWindow {
  int in_rows, in_cols, pitch;
};
__host__ __device__ constexpr TiledWindow tiled_window(int k, int s) {
  const int rows = (kTiledRows - 1) * s + k, cols = (kTiledCols - 1) * s + k;
  int pad = 0;
  while (pad < 32 && ((cols * kTiledWords + pad) * s) % 32 != 16) pad += 4;
  return {rows, cols, cols * kTiledWords + pad};
}

// Where a launch's tiles lie: tiles_x · tiles_y spatial tiles per image (blockIdx.x walks them,
// x fastest, then images); blockIdx.y is the channel tile.
struct TiledGrid {
  int tiles_x, tiles_y;
  int words;  // channel words per pixel (C / E)
};

template <class T, int K, int S, int LV>
__global__ void __launch_bounds__(kThreads)
    depthwise_nhwc_tiled(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                         const T* __restrict__ r, T* __restrict__ y, DepthwiseConvDesc d, TiledGrid g) {
  INGOT_KERNEL_ENTRY();
  constexpr int E = 4 / static_cast<int>(sizeof(T));  // channels per word
  constexpr TiledWindow kWin = tiled_window(K, S);
  constexpr int kKK = K * K;
  constexpr int kIn = (kDepthwiseStrip - 1) * S + K;  // input pixels of one kernel row of a strip
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint32_t* xs = reinterpret_cast<uint32_t*>(smem_raw);                  // [in_rows][pitch] words
  float* ws = reinterpret_cast<float*>(xs + kWin.in_rows * kWin.pitch);  // [K·K][kTiledWords·E]
  float* bs = ws + kKK * kTiledWords * E;                                // [kTiledWords·E]

  int t = static_cast<int>(blockIdx.x);
  const int tx = t % g.tiles_x;
  t /= g.tiles_x;
  const int ty = t % g.tiles_y;
  const int n = t / g.tiles_y;
  const int w_base = static_cast<int>(blockIdx.y) * kTiledWords;  // first channel word of the tile
  const int w_count = min(kTiledWords, g.words - w_base);
  const int64_t C = d.c;
  const int H = static_cast<int>(d.h), W = static_cast<int>(d.w);
  const int iy0 = ty * kTiledRows * S - d.pad_h, ix0 = tx * kTiledCols * S - d.pad_w;

  // The input window: chunk (LV words) fastest, so a warp reads a pixel's channel words and then
  // the next pixel's.
  {
    constexpr int kChunks = kTiledWords / LV;
    const T* xn = x + static_cast<int64_t>(n) * H * W * C + static_cast<int64_t>(w_base) * E;
    for (int i = threadIdx.x; i < kWin.in_rows * kWin.in_cols * kChunks; i += kThreads) {
      const int chunk = i % kChunks, pix = i / kChunks;
      const int ry = pix / kWin.in_cols, rx = pix - ry * kWin.in_cols;
      const int iy = iy0 + ry, ix = ix0 + rx, wd = chunk * LV;
      uint32_t v[LV];
      if (wd < w_count && iy >= 0 && iy < H && ix >= 0 && ix < W) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(xn + (static_cast<int64_t>(iy) * W + ix) * C) + wd;
        if constexpr (LV == 4) {
          const uint4 q = *reinterpret_cast<const uint4*>(src);
          v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
#pragma unroll
          for (int u = 0; u < LV; ++u) v[u] = src[u];
        }
      } else {
#pragma unroll
        for (int u = 0; u < LV; ++u) v[u] = 0;
      }
      uint32_t* dst = xs + ry * kWin.pitch + rx * kTiledWords + wd;
      if constexpr (LV == 4) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int u = 0; u < LV; ++u) dst[u] = v[u];
      }
    }
  }
  // Weights [C][K][K] -> fp32 [tap][channel of the tile]; read in their own order (coalesced).
  const int c_base = w_base * E, c_count = w_count * E;
  for (int i = threadIdx.x; i < c_count * kKK; i += kThreads) {
    const int c = i / kKK, tap = i - c * kKK;
    ws[tap * kTiledWords * E + c] = to_f32(w[static_cast<int64_t>(c_base) * kKK + i]);
  }
  for (int c = threadIdx.x; c < c_count; c += kThreads) bs[c] = bias ? to_f32(bias[c_base + c]) : 0.0f;
  __syncthreads();

  const int wd = threadIdx.x % kTiledWords;
  if (wd >= w_count) return;
  const int OH = static_cast<int>(d.oh), OW = static_cast<int>(d.ow);
  const int64_t c0 = static_cast<int64_t>(w_base + wd) * E;
  constexpr int kStrips = kTiledRows * kTiledStripsPerRow;
  constexpr int kPerPass = kThreads / kTiledWords;
  static_assert(kStrips % kPerPass == 0 && kTiledRows % 2 == 0, "whole passes; a warp's two strips share a column");
#pragma unroll 1
  for (int st = threadIdx.x / kTiledWords; st < kStrips; st += kPerPass) {
    const int row = st % kTiledRows, xs_i = st / kTiledRows;
    const int oy = ty * kTiledRows + row, ox0 = tx * kTiledCols + xs_i * kDepthwiseStrip;
    if (oy >= OH || ox0 >= OW) continue;
    float acc[kDepthwiseStrip][E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float b = bs[wd * E + e];
#pragma unroll
      for (int m = 0; m < kDepthwiseStrip; ++m) acc[m][e] = b;
    }
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const uint32_t* srow = xs + (row * S + ky) * kWin.pitch + (xs_i * kDepthwiseStrip * S) * kTiledWords + wd;
      float in[kIn][E];
#pragma unroll
      for (int j = 0; j < kIn; ++j) {
        const uint32_t u = srow[j * kTiledWords];
        T pk[E];
        memcpy(pk, &u, sizeof u);
#pragma unroll
        for (int e = 0; e < E; ++e) in[j][e] = to_f32(pk[e]);
      }
      const float* wrow = ws + ky * K * kTiledWords * E + wd * E;
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        float wt[E];
        if constexpr (E == 2) {
          const float2 q = *reinterpret_cast<const float2*>(wrow + kx * kTiledWords * E);
          wt[0] = q.x;
          wt[1] = q.y;
        } else {
          wt[0] = wrow[kx * kTiledWords * E];
        }
#pragma unroll
        for (int m = 0; m < kDepthwiseStrip; ++m)
#pragma unroll
          for (int e = 0; e < E; ++e) acc[m][e] = fmaf(in[m * S + kx][e], wt[e], acc[m][e]);
      }
    }
    const int64_t o_row = (static_cast<int64_t>(n) * OH + oy) * OW;
#pragma unroll
    for (int m = 0; m < kDepthwiseStrip; ++m) {
      if (ox0 + m >= OW) break;
      const int64_t o = (o_row + ox0 + m) * C + c0;
      float res[E] = {};
      if (r) load_f32<T, E>(r + o, res);
      epilogue_n(acc[m], res, r != nullptr, d);
      T out[E];
#pragma unroll
      for (int e = 0; e < E; ++e) out[e] = from_f32<T>(acc[m][e]);
      store<T, E>(y + o, out);
    }
  }
}

template <class T, int K, int S>
size_t tiled_smem_bytes() {
  constexpr TiledWindow win = tiled_window(K, S);
  constexpr int E = 4 / static_cast<int>(sizeof(T));
  return static_cast<size_t>(win.in_rows) * win.pitch * 4 + static_cast<size_t>(K * K + 1) * kTiledWords * E * 4;
}

template <class T, int K, int S, int LV>
cudaError_t launch_nhwc_tiled(const void* x, const void* w, const void* b, const void* r, void* y,
                              const DepthwiseConvDesc& d, cudaStream_t stream) {
  constexpr int E = 4 / static_cast<int>(sizeof(T));
  TiledGrid g;
  g.tiles_x = static_cast<int>((d.ow + kTiledCols - 1) / kTiledCols);
  g.tiles_y = static_cast<int>((d.oh + kTiledRows - 1) / kTiledRows);
  g.words = static_cast<int>(d.c / E);
  const int64_t blocks = d.n * g.tiles_x * g.tiles_y;
  const int64_t ctiles = (g.words + kTiledWords - 1) / kTiledWords;
  if (blocks >= (int64_t{1} << 31) || ctiles > 65535) return cudaErrorInvalidValue;
  const size_t smem = tiled_smem_bytes<T, K, S>();
  auto kernel = depthwise_nhwc_tiled<T, K, S, LV>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  launch_kernel(kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(ctiles)), kThreads, smem, stream,
                static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(r),
                static_cast<T*>(y), d, g);
  return cudaGetLastError();
}

}  // namespace

namespace {
// The strip and tiled kernels' window: channels-last 3x3/5x5/7x7, equal strides 1 or 2, no dilation.
bool strip_window(const DepthwiseConvDesc& d) {
  return d.channels_last && d.kh == d.kw && (d.kh == 3 || d.kh == 5 || d.kh == 7) && d.stride_h == d.stride_w &&
         (d.stride_h == 1 || d.stride_h == 2) && d.dil_h == 1 && d.dil_w == 1;
}
}  // namespace

bool depthwise_strip_supported(const DepthwiseConvDesc& d) {
  return d.strip == kDepthwiseStrip && !d.tiled && strip_window(d);
}

bool depthwise_tiled_supported(const DepthwiseConvDesc& d) { return d.tiled && d.strip == 1 && strip_window(d); }

int64_t depthwise_conv_smem_bytes(FloatType t, const DepthwiseConvDesc& d) {
  const int64_t elem = t == FloatType::kF32 ? 4 : 2;
  const int64_t per_tile = kMaxTilePacks * (16 / elem);  // channels of the widest tile
  return (static_cast<int64_t>(d.kh) * d.kw + 1) * std::min<int64_t>(d.c, per_tile) * elem;
}

cudaError_t launch_depthwise_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                                  const DepthwiseConvDesc& d, int sm_count, cudaStream_t stream) {
  const int64_t outputs = d.n * d.c * d.oh * d.ow;
  if (outputs == 0) return cudaSuccess;
  const int64_t resident = static_cast<int64_t>(sm_count > 0 ? sm_count : 132) * 8;
  cudaError_t err = cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!d.channels_last) {
      if (outputs >= (int64_t{1} << 31) - kThreads * int64_t{resident}) {
        err = cudaErrorInvalidValue;
        return;
      }
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((outputs + kThreads - 1) / kThreads, resident));
      launch_kernel(depthwise_nchw<T>, blocks, kThreads, 0, stream, static_cast<const T*>(x), static_cast<const T*>(w),
                    static_cast<const T*>(bias), static_cast<const T*>(r), static_cast<T*>(y), d);
      err = cudaGetLastError();
      return;
    }
    // The widest pack (16, 8 or 4 bytes) that C is a multiple of and every pointer the kernel reads
    // by pack is aligned to (x, r, y; the staged weights are aligned by construction: [kh·kw][tile]
    // with the tile a multiple of the pack): ShuffleNet's 58 and 116 channels take 4- and 8-byte
    // packs in fp16 instead of one element per thread.
    auto fits = [&](int bytes) {
      auto aligned = [&](const void* p) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; };
      return static_cast<int>(sizeof(T)) <= bytes && d.c % (bytes / static_cast<int>(sizeof(T))) == 0 &&
             aligned(x) && aligned(y) && (!r || aligned(r));
    };
    const int pack_bytes = fits(16) ? 16 : fits(8) ? 8 : fits(4) ? 4 : 0;
    // 32-bit pixel and weight index math in the kernel.
    if (d.n * d.oh * d.ow >= (int64_t{1} << 30) || d.c * d.kh * d.kw >= (int64_t{1} << 31)) {
      err = cudaErrorInvalidValue;
      return;
    }
    const int sms = sm_count > 0 ? sm_count : 132;
    const int k = d.kh == d.kw && (d.kh == 3 || d.kh == 5 || d.kh == 7) ? d.kh : 0;
    constexpr int kE = static_cast<int>(sizeof(T));
    if (d.tiled) {
      if (!depthwise_tiled_supported(d)) {
        err = cudaErrorInvalidValue;
        return;
      }
      // 4-byte words of channels (2 fp16/bf16, 1 fp32): a C or pointer that allows none keeps the
      // one-pixel kernel below. 16-byte loads of the input window where C and x allow them.
      if (fits(4)) {
        auto with_ks = [&](auto k_tag, auto s_tag) {
          constexpr int K = decltype(k_tag)::value, S = decltype(s_tag)::value;
          return fits(16) ? launch_nhwc_tiled<T, K, S, 4>(x, w, bias, r, y, d, stream)
                          : launch_nhwc_tiled<T, K, S, 1>(x, w, bias, r, y, d, stream);
        };
        auto with_k = [&](auto k_tag) {
          return d.stride_h == 1 ? with_ks(k_tag, std::integral_constant<int, 1>{})
                                 : with_ks(k_tag, std::integral_constant<int, 2>{});
        };
        switch (k) {
          case 3:
            err = with_k(std::integral_constant<int, 3>{});
            return;
          case 5:
            err = with_k(std::integral_constant<int, 5>{});
            return;
          default:
            err = with_k(std::integral_constant<int, 7>{});
            return;
        }
      }
    }
    if (d.strip > 1) {
      if (!depthwise_strip_supported(d)) {
        err = cudaErrorInvalidValue;
        return;
      }
      // The strip kernel in 4-byte packs (2 fp16 channels): wider packs hold 4x the registers
      // per output and ran ConvNeXt's 7x7 at 1/4 occupancy (session 15's probe). A C or pointer
      // that allows no 4-byte pack keeps the one-pixel kernel below.
      if (fits(4)) {
        constexpr int V = 4 / kE;
        auto with_s = [&](auto k_tag) {
          constexpr int K = decltype(k_tag)::value;
          return d.stride_h == 1 ? launch_nhwc_strip<T, V, K, 1, kDepthwiseStrip>(x, w, bias, r, y, d, sms, stream)
                                 : launch_nhwc_strip<T, V, K, 2, kDepthwiseStrip>(x, w, bias, r, y, d, sms, stream);
        };
        switch (k) {
          case 3: err = with_s(std::integral_constant<int, 3>{}); return;
          case 5: err = with_s(std::integral_constant<int, 5>{}); return;
          default: err = with_s(std::integral_constant<int, 7>{}); return;
        }
      }
    }
    auto with_k = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      switch (k) {
        case 3: return launch_nhwc<T, V, 3>(x, w, bias, r, y, d, sms, stream);
        case 5: return launch_nhwc<T, V, 5>(x, w, bias, r, y, d, sms, stream);
        case 7: return launch_nhwc<T, V, 7>(x, w, bias, r, y, d, sms, stream);
        default: return launch_nhwc<T, V, 0>(x, w, bias, r, y, d, sms, stream);
      }
    };
    switch (pack_bytes) {
      case 16: err = with_k(std::integral_constant<int, 16 / kE>{}); break;
      case 8: err = with_k(std::integral_constant<int, 8 / kE>{}); break;
      case 4: err = with_k(std::integral_constant<int, 4 / kE>{}); break;
      default: err = with_k(std::integral_constant<int, 1>{}); break;
    }
  });
  return err;
}

}  // namespace ingot::backend::cuda
