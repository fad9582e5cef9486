// Copyright ingot authors. Apache-2.0.
#include "backend/cuda/conv/depthwise_conv_kernels.h"

#include <algorithm>

#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::Pack;
using ew::to_f32;

constexpr int kThreads = 256;

// V elements at p: one 16-byte access when V > 1 (p 16-byte aligned), a plain one when V == 1.
template <class T, int V>
__device__ __forceinline__ void load(const T* p, T (&out)[V]) {
  if constexpr (V == 1) {
    out[0] = *p;
  } else {
    const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = pk.v[v];
  }
}

template <class T, int V>
__device__ __forceinline__ void store(T* p, const T (&in)[V]) {
  if constexpr (V == 1) {
    *p = in[0];
  } else {
    Pack<T, V> pk;
#pragma unroll
    for (int v = 0; v < V; ++v) pk.v[v] = in[v];
    *reinterpret_cast<Pack<T, V>*>(p) = pk;
  }
}

__device__ __forceinline__ float epilogue(float acc, float residual, bool has_residual, const DepthwiseConvDesc& d) {
  if (has_residual && !d.residual_after_activation) acc += residual;
  if (d.act != UnaryOp::kIdentity)
    acc = ew::apply_unary(d.act, acc, d.act_params.alpha, d.act_params.beta, d.act_params.lo, d.act_params.hi);
  if (has_residual && d.residual_after_activation) acc += residual;
  return acc;
}

// Channels-last: thread -> V channels of one output pixel; weights [kh·kw][C] and bias [C] in
// shared memory (type T).
template <class T, int V>
__global__ void __launch_bounds__(kThreads) depthwise_nhwc(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, const T* __restrict__ r,
                                                           T* __restrict__ y, DepthwiseConvDesc d) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ws = reinterpret_cast<T*>(smem_raw);  // [kh·kw][C]
  const int khw = d.kh * d.kw;
  T* bs = ws + static_cast<int64_t>(khw) * d.c;  // [C]
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(khw) * d.c; i += blockDim.x) {
    const int64_t c = i % d.c, tap = i / d.c;
    ws[i] = w[c * khw + tap];
  }
  for (int64_t c = threadIdx.x; c < d.c; c += blockDim.x) bs[c] = bias ? bias[c] : from_f32<T>(0.0f);
  __syncthreads();
  const int64_t cv = d.c / V;
  const int64_t total = d.n * d.oh * d.ow * cv;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c0 = (idx % cv) * V;
    int64_t p = idx / cv;
    const int64_t ox = p % d.ow;
    p /= d.ow;
    const int64_t oy = p % d.oh;
    const int64_t n = p / d.oh;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = to_f32(bs[c0 + v]);
    for (int ky = 0; ky < d.kh; ++ky) {
      const int64_t iy = oy * d.stride_h - d.pad_h + static_cast<int64_t>(ky) * d.dil_h;
      if (iy < 0 || iy >= d.h) continue;
      for (int kx = 0; kx < d.kw; ++kx) {
        const int64_t ix = ox * d.stride_w - d.pad_w + static_cast<int64_t>(kx) * d.dil_w;
        if (ix < 0 || ix >= d.w) continue;
        T in[V], wt[V];
        load<T, V>(x + ((n * d.h + iy) * d.w + ix) * d.c + c0, in);
        load<T, V>(ws + static_cast<int64_t>(ky * d.kw + kx) * d.c + c0, wt);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = fmaf(to_f32(in[v]), to_f32(wt[v]), acc[v]);
      }
    }
    const int64_t o = ((n * d.oh + oy) * d.ow + ox) * d.c + c0;
    T res[V], out[V];
    if (r) load<T, V>(r + o, res);
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = from_f32<T>(epilogue(acc[v], r ? to_f32(res[v]) : 0.0f, r != nullptr, d));
    store<T, V>(y + o, out);
  }
}

// Channels-first: thread -> one output element, the output row fastest.
template <class T>
__global__ void __launch_bounds__(kThreads) depthwise_nchw(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, const T* __restrict__ r,
                                                           T* __restrict__ y, DepthwiseConvDesc d) {
  const int khw = d.kh * d.kw;
  const int64_t total = d.n * d.c * d.oh * d.ow;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = idx % d.ow;
    int64_t p = idx / d.ow;
    const int64_t oy = p % d.oh;
    p /= d.oh;
    const int64_t c = p % d.c;
    const int64_t n = p / d.c;
    const T* xp = x + (n * d.c + c) * d.h * d.w;
    const T* wp = w + c * khw;
    float acc = bias ? to_f32(__ldg(bias + c)) : 0.0f;
    for (int ky = 0; ky < d.kh; ++ky) {
      const int64_t iy = oy * d.stride_h - d.pad_h + static_cast<int64_t>(ky) * d.dil_h;
      if (iy < 0 || iy >= d.h) continue;
      for (int kx = 0; kx < d.kw; ++kx) {
        const int64_t ix = ox * d.stride_w - d.pad_w + static_cast<int64_t>(kx) * d.dil_w;
        if (ix < 0 || ix >= d.w) continue;
        acc = fmaf(to_f32(xp[iy * d.w + ix]), to_f32(__ldg(wp + ky * d.kw + kx)), acc);
      }
    }
    y[idx] = from_f32<T>(epilogue(acc, r ? to_f32(r[idx]) : 0.0f, r != nullptr, d));
  }
}

template <class T, int V>
cudaError_t launch_nhwc(const void* x, const void* w, const void* b, const void* r, void* y, const DepthwiseConvDesc& d,
                        int64_t smem, unsigned blocks, cudaStream_t stream) {
  auto kernel = depthwise_nhwc<T, V>;
  if (smem > 48 * 1024) {
    // Above the default limit the kernel must opt in (once per process and instantiation is
    // enough, but the call is cheap and keeps this free of static state).
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  kernel<<<blocks, kThreads, static_cast<size_t>(smem), stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<const T*>(r),
      static_cast<T*>(y), d);
  return cudaGetLastError();
}

}  // namespace

int64_t depthwise_conv_smem_bytes(FloatType t, const DepthwiseConvDesc& d) {
  const int64_t elem = t == FloatType::kF32 ? 4 : 2;
  return (static_cast<int64_t>(d.kh) * d.kw + 1) * d.c * elem;
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
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((outputs + kThreads - 1) / kThreads, resident));
      depthwise_nchw<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                         static_cast<const T*>(bias), static_cast<const T*>(r),
                                                         static_cast<T*>(y), d);
      err = cudaGetLastError();
      return;
    }
    constexpr int kV = 16 / sizeof(T);
    // 16-byte packs need C a multiple of the pack and every pointer the kernel reads by pack aligned
    // (x, r, y; the staged weights are aligned by construction: [kh·kw][C] with C % kV == 0).
    const bool packed = d.c % kV == 0 && ew::aligned16(x) && ew::aligned16(y) && (!r || ew::aligned16(r));
    const int64_t work = outputs / (packed ? kV : 1);
    // Each block stages every channel's weights once: a few blocks per SM, grid-stride over pixels.
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((work + kThreads - 1) / kThreads, resident / 2));
    const int64_t smem = depthwise_conv_smem_bytes(t, d);
    err = packed ? launch_nhwc<T, kV>(x, w, bias, r, y, d, smem, blocks, stream)
                 : launch_nhwc<T, 1>(x, w, bias, r, y, d, smem, blocks, stream);
  });
  return err;
}

}  // namespace ingot::backend::cuda
