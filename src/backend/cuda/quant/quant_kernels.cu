// Copyright ingot authors. Apache-2.0.
//
// QuantizeLinear / DequantizeLinear kernels: one thread per element, grid-stride, the scale and
// zero point of the element's channel read through the cache (they are a few hundred bytes).
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/quant/quant_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

__device__ __forceinline__ float round_to(FloatType t, float v) {
  switch (t) {
    case FloatType::kF16: return __half2float(__float2half_rn(v));
    case FloatType::kBF16: return __bfloat162float(__float2bfloat16_rn(v));
    default: return v;
  }
}

template <class X, class S, class Q>
__global__ void quantize_kernel(const X* x, const S* scale, const Q* zp, Q* y, QuantDesc d, FloatType quotient) {
  const float lo = d.int8 ? -128.0f : 0.0f, hi = d.int8 ? 127.0f : 255.0f;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    const float z = zp ? static_cast<float>(zp[j]) : 0.0f;
    const float q = round_to(quotient, round_to(quotient, to_f32(x[i])) / round_to(quotient, to_f32(scale[j])));
    float v = isnan(q) ? z : rintf(q) + z;
    v = rintf(fminf(fmaxf(v, lo), hi));
    y[i] = static_cast<Q>(static_cast<int>(v));
  }
}

template <class Q, class S, class Y>
__global__ void dequantize_kernel(const Q* x, const S* scale, const Q* zp, Y* y, QuantDesc d) {
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    const float dx = static_cast<float>(x[i]) - (zp ? static_cast<float>(zp[j]) : 0.0f);
    y[i] = from_f32<Y>(dx * to_f32(scale[j]));
  }
}

template <class F>
void dispatch_quantized(bool int8, F&& f) {
  if (int8) f(ew::Tag<int8_t>{});
  else f(ew::Tag<uint8_t>{});
}

}  // namespace

cudaError_t launch_quantize(FloatType x_type, FloatType scale_type, FloatType quotient, const void* x,
                            const void* scale, const void* zero_point, void* y, const QuantDesc& d,
                            cudaStream_t stream) {
  if (d.n <= 0) return cudaSuccess;
  if (d.axis_len <= 0 || d.inner <= 0) return cudaErrorInvalidValue;
  ew::dispatch_float(x_type, [&](auto xt) {
    using X = typename decltype(xt)::type;
    ew::dispatch_float(scale_type, [&](auto st) {
      using S = typename decltype(st)::type;
      dispatch_quantized(d.int8, [&](auto qt) {
        using Q = typename decltype(qt)::type;
        quantize_kernel<X, S, Q><<<ew::grid_for(d.n), ew::kThreads, 0, stream>>>(
            static_cast<const X*>(x), static_cast<const S*>(scale), static_cast<const Q*>(zero_point),
            static_cast<Q*>(y), d, quotient);
      });
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_dequantize(FloatType scale_type, FloatType y_type, const void* x, const void* scale,
                              const void* zero_point, void* y, const QuantDesc& d, cudaStream_t stream) {
  if (d.n <= 0) return cudaSuccess;
  if (d.axis_len <= 0 || d.inner <= 0) return cudaErrorInvalidValue;
  ew::dispatch_float(scale_type, [&](auto st) {
    using S = typename decltype(st)::type;
    ew::dispatch_float(y_type, [&](auto yt) {
      using Y = typename decltype(yt)::type;
      dispatch_quantized(d.int8, [&](auto qt) {
        using Q = typename decltype(qt)::type;
        dequantize_kernel<Q, S, Y><<<ew::grid_for(d.n), ew::kThreads, 0, stream>>>(
            static_cast<const Q*>(x), static_cast<const S*>(scale), static_cast<const Q*>(zero_point),
            static_cast<Y*>(y), d);
      });
    });
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
