// Copyright ingot authors. Apache-2.0.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/conv/conv_device_util.cuh"
#include "backend/cuda/conv/small_channel_conv_kernels.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kThreads = 256;
constexpr int kPack = kSmallConvKMultiple;  // output channels per thread

// 8 values of T, stored and loaded as one (fp16/bf16) or two (fp32) 16-byte words.
template <class T>
struct alignas(16) Pack8 {
  T v[kPack];
};

// One thread: P output pixels along x (ox0 .. ox0 + P - 1) x 8 output channels (k0 .. k0 + 7).
// C (1-4) is a template parameter so the tap loop over channels unrolls.
template <class T, int P, int C>
__global__ void __launch_bounds__(kThreads)
    small_conv_nhwc(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                    const T* __restrict__ r, T* __restrict__ y, SmallConvDesc d, int groups_x, int kpacks,
                    int total) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);  // [kh * kw * C][K]
  const int K = static_cast<int>(d.k);
  const int taps = d.kh * d.kw * C;
  float* bs = ws + taps * K;  // [K]
  for (int i = threadIdx.x; i < taps * K; i += blockDim.x) {
    const int kk = i / taps, j = i - kk * taps;  // w is [K][kh][kw][C]: i = kk * taps + j
    ws[j * K + kk] = to_f32(w[i]);
  }
  for (int i = threadIdx.x; i < K; i += blockDim.x) bs[i] = bias ? to_f32(bias[i]) : 0.0f;
  __syncthreads();

  const int H = static_cast<int>(d.h), W = static_cast<int>(d.w), OH = static_cast<int>(d.oh),
            OW = static_cast<int>(d.ow);
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const int kp = t % kpacks;
    int rest = t / kpacks;
    const int gx = rest % groups_x;
    rest /= groups_x;
    const int oy = rest % OH;
    const int n = rest / OH;
    const int k0 = kp * kPack, ox0 = gx * P;
    float acc[P][kPack];
#pragma unroll
    for (int j = 0; j < kPack; ++j) {
      const float b = bs[k0 + j];
#pragma unroll
      for (int p = 0; p < P; ++p) acc[p][j] = b;
    }
    for (int ry = 0; ry < d.kh; ++ry) {
      const int iy = oy * d.stride_h - d.pad_h + ry * d.dil_h;
      if (iy < 0 || iy >= H) continue;
      const T* xrow = x + (static_cast<int64_t>(n) * H + iy) * W * C;
      for (int sx = 0; sx < d.kw; ++sx) {
        int ix[P];
        bool in[P];
#pragma unroll
        for (int p = 0; p < P; ++p) {
          ix[p] = (ox0 + p) * d.stride_w - d.pad_w + sx * d.dil_w;
          in[p] = ix[p] >= 0 && ix[p] < W && ox0 + p < OW;
        }
        const float* wtap = ws + ((ry * d.kw + sx) * C) * K + k0;
#pragma unroll
        for (int ci = 0; ci < C; ++ci) {
          float xv[P];
#pragma unroll
          for (int p = 0; p < P; ++p) xv[p] = in[p] ? to_f32(xrow[ix[p] * C + ci]) : 0.0f;
          const float4 w0 = *reinterpret_cast<const float4*>(wtap + ci * K);
          const float4 w1 = *reinterpret_cast<const float4*>(wtap + ci * K + 4);
          const float wv[kPack] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
          for (int p = 0; p < P; ++p)
#pragma unroll
            for (int j = 0; j < kPack; ++j) acc[p][j] = fmaf(xv[p], wv[j], acc[p][j]);
        }
      }
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (ox0 + p >= OW) break;
      const int64_t off = ((static_cast<int64_t>(n) * OH + oy) * OW + ox0 + p) * K + k0;
      float res[kPack] = {};
      if (r) {
        const Pack8<T> rp = *reinterpret_cast<const Pack8<T>*>(r + off);
#pragma unroll
        for (int j = 0; j < kPack; ++j) res[j] = to_f32(rp.v[j]);
      }
      conv_util::epilogue_n(acc[p], res, r != nullptr, d);
      Pack8<T> out;
#pragma unroll
      for (int j = 0; j < kPack; ++j) out.v[j] = from_f32<T>(acc[p][j]);
      *reinterpret_cast<Pack8<T>*>(y + off) = out;
    }
  }
}

template <class T, int P>
cudaError_t launch_p(const void* x, const void* w, const void* bias, const void* r, void* y, const SmallConvDesc& d,
                     int sm_count, cudaStream_t stream) {
  const int groups_x = static_cast<int>((d.ow + P - 1) / P);
  const int kpacks = static_cast<int>(d.k / kPack);
  const int64_t total = d.n * d.oh * groups_x * kpacks;
  const size_t smem = static_cast<size_t>(small_conv_smem_bytes(d));
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, static_cast<int64_t>(sm_count) * 8);
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024) {
      const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (e != cudaSuccess) return e;
    }
    launch_kernel(kernel, static_cast<unsigned>(blocks), kThreads, smem, stream, static_cast<const T*>(x),
                  static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(r), static_cast<T*>(y),
                  d, groups_x, kpacks, static_cast<int>(total));
    return cudaGetLastError();
  };
  switch (d.c) {
    case 1: return go(small_conv_nhwc<T, P, 1>);
    case 2: return go(small_conv_nhwc<T, P, 2>);
    case 3: return go(small_conv_nhwc<T, P, 3>);
    case 4: return go(small_conv_nhwc<T, P, 4>);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int64_t small_conv_smem_bytes(const SmallConvDesc& d) {
  return (static_cast<int64_t>(d.kh) * d.kw * d.c * d.k + d.k) * static_cast<int64_t>(sizeof(float));
}

bool small_conv_supported(const SmallConvDesc& d) {
  if (d.c < 1 || d.c > kSmallConvMaxC || d.k < kSmallConvKMultiple || d.k % kSmallConvKMultiple != 0) return false;
  if (d.kh < 1 || d.kw < 1 || d.kh > kSmallConvMaxKernel || d.kw > kSmallConvMaxKernel) return false;
  if (d.stride_h < 1 || d.stride_w < 1 || d.dil_h < 1 || d.dil_w < 1 || d.pad_h < 0 || d.pad_w < 0) return false;
  if (small_conv_smem_bytes(d) > kSmallConvMaxSmemBytes) return false;
  // int32 index math: the thread count, row offsets and coordinates (the pointer offsets are int64).
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  return d.n * d.oh * d.ow * (d.k / kSmallConvKMultiple) < kMax && d.n * d.h < kMax && d.w * d.stride_w < kMax / 2 &&
         d.h + d.pad_h < kMax / 2 && d.w + d.pad_w < kMax / 2 && d.oh * d.stride_h < kMax / 2;
}

cudaError_t launch_small_channel_conv(FloatType t, const void* x, const void* w, const void* bias, const void* r,
                                      void* y, const SmallConvDesc& d, int sm_count, cudaStream_t stream) {
  if (!small_conv_supported(d)) return cudaErrorInvalidValue;
  if (d.n == 0 || d.oh == 0 || d.ow == 0) return cudaSuccess;
  if (sm_count <= 0) sm_count = 132;
  // 4 pixels per thread reuse each staged weight 4 times; below ~4 waves of threads that way
  // (batch 1), one pixel per thread keeps every SM busy.
  const int64_t threads_p4 = d.n * d.oh * ((d.ow + 3) / 4) * (d.k / kPack);
  const bool p4 = threads_p4 >= static_cast<int64_t>(sm_count) * kThreads * 4;
  cudaError_t e = cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    e = p4 ? launch_p<T, 4>(x, w, bias, r, y, d, sm_count, stream) : launch_p<T, 1>(x, w, bias, r, y, d, sm_count, stream);
  });
  return e;
}

}  // namespace ingot::backend::cuda
