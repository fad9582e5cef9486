// Copyright ingot authors. Apache-2.0.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/conv/grouped_conv_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using conv_util::epilogue_n;
using conv_util::load_f32;
using conv_util::store;
using conv_util::Vec;
using ew::from_f32;
using ew::to_f32;

constexpr int kMaxThreads = 256;
constexpr int kMaxWarps = kMaxThreads / 32;
// A block's staged weights stay under this when a tile of several M-channel blocks allows it, so
// that several blocks share an SM; one M-channel block may need more (7x7 over 64 channels: 98 KB),
// and the launcher then opts in to it.
constexpr int64_t kSmemTarget = 48 * 1024;

// How a launch splits the layer (the launcher's choice; see launch_tiled).
struct Tiling {
  int g = 0;         // group width (channels in and out of each group)
  int co_tile = 0;   // output channels a block stages and computes: a multiple of M
  int co_tiles = 0;  // tiles per group (blockIdx.x = group · co_tiles + tile)
  int pt = 0;        // threads per M-channel block, a multiple of 32: each takes its own strips
  int spr = 0;       // strips (P outputs along x) per output row
  int strips = 0;    // n · oh · spr
};

// Stages a tile's weights, read in their own (KRSC) order so that the reads coalesce, as fp32
// ws[(tap · g + ci) · co_tile + co]; channels co_count .. co_tile - 1 (past the group) are zero.
// Each thread issues kBatch loads before it stores any: a batch-1 layer's blocks spend much of
// their time here, waiting on L2.
template <class T>
__device__ __forceinline__ void stage_weights(const T* __restrict__ wt, float* ws, int per_co, int co_count,
                                              int co_tile) {
  constexpr int kBatch = 4;
  auto put = [&](int idx, float v) {
    const int co = idx / per_co;
    ws[(idx - co * per_co) * co_tile + co] = v;
  };
  const int total = co_count * per_co;
  const int stride = static_cast<int>(blockDim.x);
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (per_co % kVec == 0 && reinterpret_cast<uintptr_t>(wt) % 16 == 0) {
    const Vec<T, kVec>* wv = reinterpret_cast<const Vec<T, kVec>*>(wt);
    const int packs = total / kVec;
    for (int base = threadIdx.x; base < packs; base += kBatch * stride) {
      Vec<T, kVec> pk[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (base + u * stride < packs) pk[u] = wv[base + u * stride];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (base + u * stride < packs)
#pragma unroll
          for (int q = 0; q < kVec; ++q) put((base + u * stride) * kVec + q, to_f32(pk[u].v[q]));
    }
  } else {
    for (int base = threadIdx.x; base < total; base += kBatch * stride) {
      T e[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (base + u * stride < total) e[u] = wt[base + u * stride];
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (base + u * stride < total) put(base + u * stride, to_f32(e[u]));
    }
  }
  for (int i = threadIdx.x; i < (co_tile - co_count) * per_co; i += stride) {
    const int co = i / per_co;
    ws[(i - co * per_co) * co_tile + co_count + co] = 0.0f;
  }
}

// One block: the tile of output channels blockIdx.x names (one group's, or part of them) over the
// strips blockIdx.y, blockIdx.y + gridDim.y, ... of P outputs along x. Thread t computes channels
// co0 .. co0 + M - 1 of the tile (co0 = M · (t / pt)) for its strips: every lane of a warp has the
// same co0, so the weights it reads from shared memory are broadcasts. Per tap the thread reads its
// P pixels' g input channels V at a time (one access each) and, for each of them, the M weights as
// float4s. x's channel packs are aligned (the launcher checks C, g and the pointers), and so are the
// staged rows (co_tile and co0 are multiples of M, itself one of 4). Pixel index math is 32-bit
// (grouped_conv_supported checks the ranges); element offsets are 64-bit.
template <class T, int V, int M, int P>
__global__ void __launch_bounds__(kMaxThreads)
    grouped_conv_nhwc(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                      const T* __restrict__ r, T* __restrict__ y, GroupedConvDesc d, Tiling tl) {
  INGOT_KERNEL_ENTRY();
  static_assert(M % 4 == 0, "weights are read as float4");
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);
  const int g = tl.g, co_tile = tl.co_tile;
  const int per_co = d.kh * d.kw * g;  // weights of one output channel: [kh][kw][g]
  float* bs = ws + per_co * co_tile;   // [co_tile]
  const int grp = static_cast<int>(blockIdx.x) / tl.co_tiles;
  const int co_base = (static_cast<int>(blockIdx.x) - grp * tl.co_tiles) * co_tile;  // within the group
  const int co_count = min(co_tile, g - co_base);
  const int cg = grp * g;  // the group's first channel
  stage_weights(w + static_cast<int64_t>(cg + co_base) * per_co, ws, per_co, co_count, co_tile);
  for (int co = threadIdx.x; co < co_tile; co += blockDim.x)
    bs[co] = bias && co < co_count ? to_f32(bias[cg + co_base + co]) : 0.0f;
  __syncthreads();

  const int cob = static_cast<int>(threadIdx.x) / tl.pt;
  const int co0 = cob * M;
  if (co0 >= co_count) return;
  const int C = static_cast<int>(d.c), H = static_cast<int>(d.h), W = static_cast<int>(d.w),
            OH = static_cast<int>(d.oh), OW = static_cast<int>(d.ow);
  const int64_t row_pitch = static_cast<int64_t>(W) * C;
  const float* wcol = ws + co0;
  float bias_v[M];
#pragma unroll
  for (int m = 0; m < M; m += 4) {
    const float4 b4 = *reinterpret_cast<const float4*>(bs + co0 + m);
    bias_v[m] = b4.x, bias_v[m + 1] = b4.y, bias_v[m + 2] = b4.z, bias_v[m + 3] = b4.w;
  }
  const int step = static_cast<int>(gridDim.y) * tl.pt;
  for (int s = static_cast<int>(blockIdx.y) * tl.pt + static_cast<int>(threadIdx.x) - cob * tl.pt; s < tl.strips;
       s += step) {
    const int sx = s % tl.spr;
    const int q = s / tl.spr;
    const int oy = q % OH;
    const int n = q / OH;
    const int ox0 = sx * P;
    float acc[P][M];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[p][m] = bias_v[m];
    const int iy0 = oy * d.stride_h - d.pad_h;
    const T* xn = x + static_cast<int64_t>(n) * H * row_pitch + cg;
    for (int ky = 0; ky < d.kh; ++ky) {
      const int iy = iy0 + ky;
      if (iy < 0 || iy >= H) continue;
      const T* xrow = xn + iy * row_pitch;
      for (int kx = 0; kx < d.kw; ++kx) {
        const T* xp[P];
        bool in[P];
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int ix = (ox0 + p) * d.stride_w - d.pad_w + kx;
          in[p] = ix >= 0 && ix < W && ox0 + p < OW;
          xp[p] = xrow + (in[p] ? static_cast<int64_t>(ix) * C : 0);
        }
        const float* wtap = wcol + (ky * d.kw + kx) * g * co_tile;
        for (int c0 = 0; c0 < g; c0 += V) {
          float xin[P][V];
#pragma unroll
          for (int p = 0; p < P; ++p) {
            if (in[p]) {
              load_f32<T, V>(xp[p] + c0, xin[p]);
            } else {
#pragma unroll
              for (int v = 0; v < V; ++v) xin[p][v] = 0.0f;
            }
          }
#pragma unroll
          for (int v = 0; v < V; ++v) {
            const float* wrow = wtap + (c0 + v) * co_tile;
            float wv[M];
#pragma unroll
            for (int m = 0; m < M; m += 4) {
              const float4 w4 = *reinterpret_cast<const float4*>(wrow + m);
              wv[m] = w4.x, wv[m + 1] = w4.y, wv[m + 2] = w4.z, wv[m + 3] = w4.w;
            }
#pragma unroll
            for (int p = 0; p < P; ++p)
#pragma unroll
              for (int m = 0; m < M; ++m) acc[p][m] = fmaf(xin[p][v], wv[m], acc[p][m]);
          }
        }
      }
    }
    // Stores of VS channels: y's channel offset (pixel · C + cg + co_base + co0) and the tile's
    // channel count past co0 are multiples of VS, since V divides C and g and M divides co_tile.
    constexpr int VS = V < M ? V : M;
    const int64_t orow = (static_cast<int64_t>(n) * OH + oy) * OW;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (ox0 + p >= OW) break;
      const int64_t o = (orow + ox0 + p) * C + cg + co_base + co0;
#pragma unroll
      for (int j = 0; j < M; j += VS) {
        if (co0 + j >= co_count) break;
        float res[VS] = {}, v[VS];
        if (r) load_f32<T, VS>(r + o + j, res);
#pragma unroll
        for (int u = 0; u < VS; ++u) v[u] = acc[p][j + u];
        epilogue_n(v, res, r != nullptr, d);
        T out[VS];
#pragma unroll
        for (int u = 0; u < VS; ++u) out[u] = from_f32<T>(v[u]);
        store<T, VS>(y + o + j, out);
      }
    }
  }
}

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

template <class T, int V, int M, int P>
cudaError_t launch_tiled(const void* x, const void* w, const void* b, const void* r, void* y, const GroupedConvDesc& d,
                         int sm_count, cudaStream_t stream) {
  Tiling tl;
  tl.g = static_cast<int>(d.c / d.group);
  tl.spr = ceil_div(d.ow, P);
  tl.strips = static_cast<int>(d.n * d.oh * tl.spr);
  const int cob_total = ceil_div(tl.g, M);  // M-channel blocks per group
  const int64_t cob_bytes = (static_cast<int64_t>(d.kh) * d.kw * tl.g * M + M) * static_cast<int64_t>(sizeof(float));
  // As many M-channel blocks per tile as fit kSmemTarget (each tile reads its weights once), with
  // up to kMaxWarps warps; then fewer warps per block, and fewer blocks per tile, while the grid
  // would leave SMs idle (batch 1: RegNet's [1,7,7,888] is 37 groups of 49 pixels).
  int cobs = static_cast<int>(std::min<int64_t>({cob_total, kMaxWarps, std::max<int64_t>(1, kSmemTarget / cob_bytes)}));
  int wpc = std::max(1, std::min(kMaxWarps / cobs, ceil_div(tl.strips, 32)));  // warps per M-channel block
  auto tiles_for = [&](int c) { return d.group * ceil_div(cob_total, c); };
  while (tiles_for(cobs) * ceil_div(tl.strips, 32 * wpc) < sm_count) {
    if (wpc > 1) {
      wpc /= 2;
    } else if (cobs > 1) {
      cobs = (cobs + 1) / 2;
    } else {
      break;
    }
  }
  tl.co_tiles = ceil_div(cob_total, cobs);
  cobs = ceil_div(cob_total, tl.co_tiles);  // tiles of equal size (3 + 2, not 4 + 1)
  tl.co_tile = cobs * M;
  tl.pt = 32 * wpc;
  const int threads = cobs * tl.pt;
  const int64_t tiles = d.group * tl.co_tiles;
  const size_t smem = static_cast<size_t>((static_cast<int64_t>(d.kh) * d.kw * tl.g + 1) * tl.co_tile) * sizeof(float);
  auto kernel = grouped_conv_nhwc<T, V, M, P>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  // One wave of resident blocks (each walks its strips: the staged weights are reused), fewer
  // when the strips run out.
  int resident = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, threads, smem) != cudaSuccess || resident < 1)
    resident = 1;
  const int64_t want = std::max<int64_t>(1, (static_cast<int64_t>(sm_count) * resident + tiles - 1) / tiles);
  const int64_t blocks_y = std::min<int64_t>({ceil_div(tl.strips, tl.pt), want, 65535});
  launch_kernel(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(blocks_y)), threads, smem, stream,
                static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(r),
                static_cast<T*>(y), d, tl);
  return cudaGetLastError();
}

template <class T, int V, int M>
cudaError_t launch_m(const void* x, const void* w, const void* b, const void* r, void* y, const GroupedConvDesc& d,
                     int sm_count, cudaStream_t stream) {
  // P outputs per thread reuse each weight read P times; below about half a GPU of resident
  // threads (132 SMs x 1024) at P = 4, fewer per thread keep every SM busy (batch 1).
  auto threads_at = [&](int p) { return d.group * ((d.c / d.group + M - 1) / M) * d.n * d.oh * ((d.ow + p - 1) / p); };
  const int64_t enough = static_cast<int64_t>(sm_count) * 1024;
  if (threads_at(4) >= enough) return launch_tiled<T, V, M, 4>(x, w, b, r, y, d, sm_count, stream);
  if (threads_at(2) >= enough) return launch_tiled<T, V, M, 2>(x, w, b, r, y, d, sm_count, stream);
  return launch_tiled<T, V, M, 1>(x, w, b, r, y, d, sm_count, stream);
}

}  // namespace

bool grouped_conv_supported(const GroupedConvDesc& d) {
  if (d.group < 2 || d.c < 1 || d.c % d.group != 0) return false;
  const int64_t g = d.c / d.group;
  if (g < kGroupedConvMinWidth || g > kGroupedConvMaxWidth) return false;
  if (d.kh < 1 || d.kw < 1 || d.kh > kGroupedConvMaxKernel || d.kw > kGroupedConvMaxKernel) return false;
  if (d.stride_h < 1 || d.stride_w < 1 || d.pad_h < 0 || d.pad_w < 0) return false;
  if (d.outputs_per_thread != kGroupedConvWideOutputs && d.outputs_per_thread != kGroupedConvNarrowOutputs)
    return false;
  if (d.n < 0 || d.h < 0 || d.w < 0 || d.oh < 0 || d.ow < 0) return false;
  // 32-bit index math: strips, rows, coordinates and tiles.
  constexpr int64_t kMax = int64_t{1} << 30;
  return d.n * d.oh * d.ow < kMax && d.n * d.h < kMax && d.c < kMax && d.ow * d.stride_w + d.kw < kMax &&
         d.oh * d.stride_h + d.kh < kMax && d.h + d.pad_h < kMax && d.w + d.pad_w < kMax && d.stride_w < kMax &&
         d.stride_h < kMax;
}

int64_t grouped_conv_min_smem_bytes(const GroupedConvDesc& d) {
  const int64_t g = d.group > 0 ? d.c / d.group : 0;
  return (static_cast<int64_t>(d.kh) * d.kw * g + 1) * d.outputs_per_thread * static_cast<int64_t>(sizeof(float));
}

cudaError_t launch_grouped_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r, void* y,
                                const GroupedConvDesc& d, int sm_count, cudaStream_t stream) {
  if (!grouped_conv_supported(d)) return cudaErrorInvalidValue;
  if (d.n == 0 || d.oh == 0 || d.ow == 0) return cudaSuccess;
  const int sms = sm_count > 0 ? sm_count : 132;
  const int64_t g = d.c / d.group;
  cudaError_t err = cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kE = static_cast<int>(sizeof(T));
    // The widest pack (16, 8 or 4 bytes) that g (hence C and each group's offset) is a multiple of
    // and that x, r and y are aligned to: g = 24 reads 16-byte packs in fp16 and fp32, g = 6 4-byte
    // ones in fp16; g = 3 one element.
    auto fits = [&](int bytes) {
      auto aligned = [&](const void* p) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
      return kE <= bytes && g % (bytes / kE) == 0 && aligned(x) && aligned(y) && (!r || aligned(r));
    };
    const int pack_bytes = fits(16) ? 16 : fits(8) ? 8 : fits(4) ? 4 : 0;
    auto with_v = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      return d.outputs_per_thread == kGroupedConvWideOutputs
                 ? launch_m<T, V, kGroupedConvWideOutputs>(x, w, bias, r, y, d, sms, stream)
                 : launch_m<T, V, kGroupedConvNarrowOutputs>(x, w, bias, r, y, d, sms, stream);
    };
    switch (pack_bytes) {
      case 16:
        err = with_v(std::integral_constant<int, 16 / kE>{});
        break;
      case 8:
        err = with_v(std::integral_constant<int, 8 / kE>{});
        break;
      case 4:
        err = with_v(std::integral_constant<int, 4 / kE>{});
        break;
      default:
        err = with_v(std::integral_constant<int, 1>{});
        break;
    }
  });
  return err;
}

}  // namespace ingot::backend::cuda
