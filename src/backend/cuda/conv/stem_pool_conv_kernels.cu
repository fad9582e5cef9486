// Copyright ingot authors. Apache-2.0.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/conv/stem_pool_conv_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/mma.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;  // 8 warps: kWarpsN splits of the channels x the rest over conv-pixel tiles

// The tile's geometry for a form F (C input channels, a KS x KS stride-S conv to K channels, a PK x
// PK stride-PS pool; PK = PS = 1: none) with TP x TP outputs a block.
template <class F>
struct Geometry {
  static constexpr int C = F::C, KS = F::KS, S = F::S, PK = F::PK, PS = F::PS, K = F::K, TP = F::TP;
  static constexpr int kConvSide = (TP - 1) * PS + PK;                 // 17 conv outputs a side (7x7 stem)
  static constexpr int kConvPixels = kConvSide * kConvSide;            // 289: GEMM M
  static constexpr int kMTiles = (kConvPixels + 15) / 16;              // 19
  static constexpr int kRowValues = KS * C;                            // 21 (kw, c) values a kernel row
  static constexpr int kSegsPerRow = (kRowValues + 7) / 8;             // 3 segments of 8
  static constexpr int kLastSegValues = kRowValues - (kSegsPerRow - 1) * 8;  // 5 valid in the last
  static constexpr int kSegs = KS * kSegsPerRow;                       // 21
  static constexpr int kKSteps = (kSegs + 1) / 2;                      // 11 (two segments a k16 step)
  static constexpr int kKPadded = kKSteps * 16;                        // 176
  static constexpr int kWStride = kKPadded + 8;                        // halves a weight row (no bank conflicts)
  static constexpr int kInRows = (kConvSide - 1) * S + KS;             // 39 input rows
  static constexpr int kInRowNeed = (kConvSide - 1) * S * C + kSegsPerRow * 8;  // furthest half read + 1
  static constexpr int kInRowMin = ((kConvSide - 1) * S + KS) * C;
  static constexpr int kInStride = ((kInRowNeed > kInRowMin ? kInRowNeed : kInRowMin) + 1) / 2 * 2;  // 120
  static constexpr int kNTiles = K / 8;                                // n8 tiles of the channels
  static constexpr int kWarpsN = (kNTiles + 3) / 4;                    // warps side by side over the channels
  static constexpr int kWarpNTiles = kNTiles / kWarpsN;                // n8 tiles a warp (<= 4)
  static constexpr int kWarpsM = (kThreads / 32) / kWarpsN;            // warps over the conv pixels
  // Halves a conv-output row: 16-byte rows whose 4-byte words start in different banks for 8 rows.
  static constexpr int kOutStride = ((K + 8) / 2) % 8 == 0 ? K + 16 : K + 8;
  // Shared memory regions, each starting on 16 bytes (the pool's 16-byte loads read the conv tile; the
  // session 41 run found K 16/24/32 with 3x3 kernels misaligned: 33 x 106 halves of input).
  static constexpr int round8(int h) { return (h + 7) / 8 * 8; }
  static constexpr int kInHalves = round8(kInRows * kInStride);
  static constexpr int kWHalves = round8(K * kWStride);
  static constexpr int kOutHalves = kMTiles * 16 * kOutStride;
  static constexpr int kSmemHalves = kInHalves + kWHalves + kOutHalves + 2 * K;  // + the fp32 bias
  static_assert((S * C) % 2 == 0, "a pixel's offset must keep k-pairs 4-byte aligned");
  static_assert(K % 8 == 0 && kNTiles % kWarpsN == 0 && (kThreads / 32) % kWarpsN == 0, "channels split over warps");
  static_assert(kKSteps * kWarpNTiles <= 48, "B fragments for all of K are kept in registers");
  static_assert(kOutStride % 8 == 0 && kOutHalves % 8 == 0, "16-byte rows of the conv tile");
};

// The compiled forms: {C, KS, S, PK, PS, K, TP}.
template <int C_, int KS_, int S_, int PK_, int PS_, int K_, int TP_>
struct Form {
  static constexpr int C = C_, KS = KS_, S = S_, PK = PK_, PS = PS_, K = K_, TP = TP_;
};
using ResNetStem = Form<3, 7, 2, 3, 2, 64, 8>;       // ResNet, ResNeXt, DenseNet, FCN: 7x7/2 -> 64, pool 3/2
using ShuffleNetStem = Form<3, 3, 2, 3, 2, 24, 8>;   // ShuffleNetV2: 3x3/2 -> 24, pool 3/2
using SqueezeNetStem = Form<3, 3, 2, 3, 2, 64, 8>;   // SqueezeNet 1.1: 3x3/2 -> 64, pool 3/2 (ceil)
using Stem3x3K16 = Form<3, 3, 2, 1, 1, 16, 16>;      // MobileNetV3: 3x3/2 -> 16, no pool
using Stem3x3K24 = Form<3, 3, 2, 1, 1, 24, 16>;      // EfficientNetV2-S
using Stem3x3K32 = Form<3, 3, 2, 1, 1, 32, 16>;      // MobileNetV2, EfficientNet-B0, MnasNet, RegNet

template <class T>
__device__ __forceinline__ uint32_t load_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

template <class T, class F>
__global__ void __launch_bounds__(kThreads, 2)
    stem_pool_nhwc(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
                   StemPoolDesc d, int tiles_w, int tiles_per_image, int tiles) {
  INGOT_KERNEL_ENTRY();
  using G = Geometry<F>;
  constexpr int C = G::C, KS = G::KS, S = G::S, PK = G::PK, PS = G::PS, K = G::K, TP = G::TP;
  constexpr int NT = G::kWarpNTiles;
  extern __shared__ float4 smem4[];
  T* xs = reinterpret_cast<T*>(smem4);             // [kInRows][kInStride]
  T* ws = xs + G::kInHalves;                       // [K][kWStride], K permuted into segments
  T* os = ws + G::kWHalves;                        // [kMTiles * 16][kOutStride]
  float* bs = reinterpret_cast<float*>(os + G::kOutHalves);  // [K] the bias, fp32

  const int H = static_cast<int>(d.h), W = static_cast<int>(d.w);
  const int OH = static_cast<int>(d.oh), OW = static_cast<int>(d.ow);
  const int PH = static_cast<int>(d.ph), PW = static_cast<int>(d.pw);

  // Once per block (it loops over tiles): the weights with K in segment order, k = 16·step +
  // 8·(segment of the pair) + position; segment s is kernel row s / kSegsPerRow, values
  // (s % kSegsPerRow)·8 .. +7 of its (kw, c) row; zero past it. Session 41's first run staged them
  // for each of ResNet-50 b64's 3,136 tiles: 183 us against the 224 us of the two steps it replaced.
  for (int e = threadIdx.x; e < K * G::kWStride / 2; e += kThreads) reinterpret_cast<uint32_t*>(ws)[e] = 0u;
  __syncthreads();
  // w read in order (coalesced), four loads in flight a thread, scattered into the segment order.
  constexpr int kWValues = K * KS * G::kRowValues;
#pragma unroll 4
  for (int e = threadIdx.x; e < kWValues; e += kThreads) {
    const int nn = e / (KS * G::kRowValues), r = e - nn * (KS * G::kRowValues);
    const int kh = r / G::kRowValues, j = r - kh * G::kRowValues;
    const int seg = kh * G::kSegsPerRow + j / 8;
    ws[nn * G::kWStride + (seg >> 1) * 16 + (seg & 1) * 8 + (j & 7)] = w[e];
  }
  for (int e = threadIdx.x; e < K; e += kThreads) bs[e] = bias ? to_f32(bias[e]) : 0.0f;
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int nbase = (warp % G::kWarpsN) * NT * 8;  // this warp's NT·8 channels
  const int mgroup = warp / G::kWarpsN;            // and every kWarpsM-th m-tile from this one
  uint32_t bf[G::kKSteps][NT][2];
#pragma unroll
  for (int ks = 0; ks < G::kKSteps; ++ks)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const T* wr = ws + (nbase + nt * 8 + g) * G::kWStride + ks * 16 + 2 * t;
      bf[ks][nt][0] = load_pair(wr);
      bf[ks][nt][1] = load_pair(wr + 8);
    }
  // The last segment of a kernel row holds kLastSegValues values: the pair at 2t keeps both, its low
  // one or none of them.
  const uint32_t last_mask = 2 * t + 1 < G::kLastSegValues ? 0xffffffffu : 2 * t < G::kLastSegValues ? 0x0000ffffu : 0u;

  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int n = tile / tiles_per_image, in_image = tile - n * tiles_per_image;
    const int ty = in_image / tiles_w, tx = in_image - ty * tiles_w;
    const int py0 = ty * TP, px0 = tx * TP;
    const int r0 = py0 * PS - d.pool_pad_h, c0 = px0 * PS - d.pool_pad_w;  // conv coords of the region
    const int iy0 = r0 * S - d.pad_h, ix0 = c0 * S - d.pad_w;              // input coords of the patch

    // The input patch, zero outside the image (the conv's padding): a warp per row, its values
    // contiguous in x.
    const T* xn = x + static_cast<int64_t>(n) * H * W * C;
    for (int row = warp; row < G::kInRows; row += kThreads / 32) {
      const int iy = iy0 + row;
      const bool row_in = iy >= 0 && iy < H;
      const T* xr = xn + (static_cast<int64_t>(iy) * W + ix0) * C;
#pragma unroll
      for (int col = lane; col < G::kInStride; col += 32) {
        const int ix = ix0 + col / C;
        T v = from_f32<T>(0.0f);
        if (row_in && ix >= 0 && ix < W) v = xr[col];
        xs[row * G::kInStride + col] = v;
      }
    }
    __syncthreads();

    for (int mt = mgroup; mt < G::kMTiles; mt += G::kWarpsM) {
      const int ga = min(mt * 16 + g, G::kConvPixels - 1), gb = min(mt * 16 + g + 8, G::kConvPixels - 1);
      const int ra = ga / G::kConvSide, sa = ga - ra * G::kConvSide;
      const int rb = gb / G::kConvSide, sb = gb - rb * G::kConvSide;
      const T* pa = xs + ra * S * G::kInStride + sa * S * C + 2 * t;
      const T* pb = xs + rb * S * G::kInStride + sb * S * C + 2 * t;
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < G::kKSteps; ++ks) {
        uint32_t a[4];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int seg = ks * 2 + half;
          if (seg >= G::kSegs) {
            a[2 * half] = a[2 * half + 1] = 0u;
            continue;
          }
          const int off = (seg / G::kSegsPerRow) * G::kInStride + (seg % G::kSegsPerRow) * 8;
          uint32_t va = load_pair(pa + off), vb = load_pair(pb + off);
          if (seg % G::kSegsPerRow == G::kSegsPerRow - 1 && G::kLastSegValues < 8) {
            va &= last_mask;
            vb &= last_mask;
          }
          a[2 * half] = va;      // rows g, k 2t..2t+1 (+8 for the second segment)
          a[2 * half + 1] = vb;  // rows g + 8
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_16816<T>(acc[nt], a, bf[ks][nt][0], bf[ks][nt][1]);
      }
      float v[NT * 4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[nt * 4 + i] = acc[nt][i] + bs[nbase + nt * 8 + 2 * t + (i & 1)];
      const float none[NT * 4] = {};
      conv_util::epilogue_n<NT * 4>(v, none, false, d);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = mt * 16 + g + half * 8;
        if (row >= G::kConvPixels) continue;
        const int r = row / G::kConvSide, s = row - r * G::kConvSide;
        const int cy = r0 + r, cx = c0 + s;
        const bool inside = cy >= 0 && cy < OH && cx >= 0 && cx < OW;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float lo = inside ? v[nt * 4 + half * 2] : -INFINITY;
          const float hi = inside ? v[nt * 4 + half * 2 + 1] : -INFINITY;
          *reinterpret_cast<uint32_t*>(os + row * G::kOutStride + nbase + nt * 8 + 2 * t) = pack2<T>(lo, hi);
        }
      }
    }
    __syncthreads();

    // The pool (or, PK = 1, the copy out): a thread takes 8 channels of one output pixel, one 16-byte
    // load per window tap and one 16-byte store.
    constexpr int kPacks = K / 8;
    T* yn = y + static_cast<int64_t>(n) * PH * PW * K;
    for (int item = threadIdx.x; item < TP * TP * kPacks; item += kThreads) {
      const int p = item / kPacks, kp = item - p * kPacks;
      const int pi = p / TP, pj = p - pi * TP;
      const int py = py0 + pi, px = px0 + pj;
      if (py >= PH || px >= PW) continue;
      float m[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) m[i] = -INFINITY;
#pragma unroll
      for (int dy = 0; dy < PK; ++dy)
#pragma unroll
        for (int dx = 0; dx < PK; ++dx) {
          float in[8];
          conv_util::load_f32<T, 8>(os + ((pi * PS + dy) * G::kConvSide + pj * PS + dx) * G::kOutStride + kp * 8, in);
#pragma unroll
          for (int i = 0; i < 8; ++i) m[i] = fmaxf(m[i], in[i]);
        }
      T out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = from_f32<T>(m[i]);
      conv_util::store<T, 8>(yn + (static_cast<int64_t>(py) * PW + px) * K + kp * 8, out);
    }
    __syncthreads();  // the next tile's patch and conv tile overwrite what this one read
  }
}

template <class F>
bool is_form(const StemPoolDesc& d) {
  return d.c == F::C && d.kh == F::KS && d.kw == F::KS && d.stride_h == F::S && d.stride_w == F::S && d.k == F::K &&
         d.pool_kh == F::PK && d.pool_kw == F::PK && d.pool_stride_h == F::PS && d.pool_stride_w == F::PS;
}

template <class T, class F>
cudaError_t launch_form(const void* x, const void* w, const void* bias, void* y, const StemPoolDesc& d, int sm_count,
                        cudaStream_t stream) {
  using G = Geometry<F>;
  auto kernel = stem_pool_nhwc<T, F>;
  constexpr size_t smem = G::kSmemHalves * sizeof(T);
  // Per launch, as the depthwise kernels do: the attribute belongs to the current device.
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  const int64_t tiles_w = (d.pw + F::TP - 1) / F::TP, tiles_h = (d.ph + F::TP - 1) / F::TP;
  const int64_t tiles = tiles_w * tiles_h * d.n;
  if (tiles >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  // Two blocks an SM (the launch bounds), each looping over tiles with its weights staged once.
  const int64_t blocks = std::min<int64_t>(tiles, 2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 132));
  const cudaError_t e = launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream,
                                      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
                                      static_cast<T*>(y), d, static_cast<int>(tiles_w),
                                      static_cast<int>(tiles_w * tiles_h), static_cast<int>(tiles));
  return e != cudaSuccess ? e : cudaGetLastError();
}

// Calls f(Form{}) for d's compiled form; false when it has none.
template <class Fn>
bool dispatch_form(const StemPoolDesc& d, Fn&& f) {
  if (is_form<ResNetStem>(d)) return f(ResNetStem{}), true;
  if (is_form<ShuffleNetStem>(d)) return f(ShuffleNetStem{}), true;
  if (is_form<SqueezeNetStem>(d)) return f(SqueezeNetStem{}), true;
  if (is_form<Stem3x3K16>(d)) return f(Stem3x3K16{}), true;
  if (is_form<Stem3x3K24>(d)) return f(Stem3x3K24{}), true;
  if (is_form<Stem3x3K32>(d)) return f(Stem3x3K32{}), true;
  return false;
}

}  // namespace

bool stem_pool_supported(const StemPoolDesc& d) {
  if (!dispatch_form(d, [](auto) {})) return false;
  if (d.pad_h < 0 || d.pad_w < 0 || d.pad_h >= d.kh || d.pad_w >= d.kw || d.pool_pad_h < 0 || d.pool_pad_w < 0 ||
      d.pool_pad_h >= d.pool_kh || d.pool_pad_w >= d.pool_kw)
    return false;
  // int32 coordinates and per-image offsets.
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  return d.n >= 0 && d.n < kMax / 4 && d.h * d.w * d.c < kMax && d.h < kMax / 4 && d.w < kMax / 4 &&
         d.ph * d.pw * d.k < kMax && d.oh < kMax / 4 && d.ow < kMax / 4;
}

cudaError_t launch_stem_pool_conv(FloatType t, const void* x, const void* w, const void* bias, void* y,
                                  const StemPoolDesc& d, int sm_count, cudaStream_t stream) {
  if (!stem_pool_supported(d) || (t != FloatType::kF16 && t != FloatType::kBF16)) return cudaErrorInvalidValue;
  if (d.n == 0 || d.ph == 0 || d.pw == 0) return cudaSuccess;
  cudaError_t e = cudaErrorInvalidValue;
  dispatch_form(d, [&](auto form) {
    using F = decltype(form);
    e = t == FloatType::kF16 ? launch_form<__half, F>(x, w, bias, y, d, sm_count, stream)
                             : launch_form<__nv_bfloat16, F>(x, w, bias, y, d, sm_count, stream);
  });
  return e;
}

}  // namespace ingot::backend::cuda
