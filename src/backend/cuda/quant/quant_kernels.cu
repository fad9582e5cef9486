// Copyright ingot authors. Apache-2.0.
//
// QuantizeLinear / DequantizeLinear kernels: one thread per element, grid-stride, the scale and
// zero point of the element's channel read through the cache (they are a few hundred bytes).
// float8e4m3fn goes through cuda_fp8.h: __nv_cvt_float_to_fp8 with __NV_SATFINITE (one
// cvt.rn.satfinite on sm_89+) rounds to nearest even as src/core/float8.cc does; the cases where
// the two encodings could differ are decided here first (NaN keeps its sign there, and without
// saturation a magnitude above 464 -- past the tie between 448 and the next step, 480 -- is NaN).
//
// The QuantGemm epilogue: one thread per output element, grid-stride, the column from a modulo.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/quant/quant_convert.cuh"
#include "backend/cuda/quant/quant_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

using qconv::e4m3_to_f32;
using qconv::f32_to_e4m3;
using qconv::round_to;

template <class X, class S, class Q>
__global__ void quantize_kernel(const X* x, const S* scale, const Q* zp, Q* y, QuantDesc d, FloatType quotient) {
  INGOT_KERNEL_ENTRY();
  const float lo = d.type == QuantType::kInt8 ? -128.0f : 0.0f, hi = d.type == QuantType::kInt8 ? 127.0f : 255.0f;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    const float z = zp ? static_cast<float>(zp[j]) : 0.0f;
    const float q = round_to(quotient, round_to(quotient, to_f32(x[i])) / round_to(quotient, to_f32(scale[j])));
    y[i] = static_cast<Q>(qconv::quantize_int(q, z, lo, hi));
  }
}

template <class X, class S>
__global__ void quantize_fp8_kernel(const X* x, const S* scale, const uint8_t* zp, uint8_t* y, QuantDesc d,
                                    FloatType quotient) {
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    float q = round_to(quotient, round_to(quotient, to_f32(x[i])) / round_to(quotient, to_f32(scale[j])));
    if (zp) {
      const float z = e4m3_to_f32(zp[j]);
      if (z != 0.0f) q += z;  // as the reference: a zero point of +-0 leaves -0 alone
    }
    y[i] = f32_to_e4m3(q, d.saturate);
  }
}

template <class Q, class S, class Y>
__global__ void dequantize_kernel(const Q* x, const S* scale, const Q* zp, Y* y, QuantDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    const float dx = static_cast<float>(x[i]) - (zp ? static_cast<float>(zp[j]) : 0.0f);
    y[i] = from_f32<Y>(dx * to_f32(scale[j]));
  }
}

// Per tensor (one scale, one zero point), eight elements a thread: 16-byte loads of x (two for
// f32), one 8-byte store, no index arithmetic per element. Each element is computed exactly as
// quantize_kernel / quantize_fp8_kernel compute it. BERT's 48 QuantizeLinear steps took 2.3 of
// 7.1 ms at batch 64 in the one-element-a-thread kernels (s25q2: a 64-bit division per element).
template <class X, class S>
__global__ void quantize_tensor_vec8_kernel(const X* x, const S* scale, const void* zp, uint8_t* y, int64_t groups,
                                            QuantType type, bool saturate, FloatType quotient) {
  INGOT_KERNEL_ENTRY();
  const float s = round_to(quotient, to_f32(scale[0]));
  float z = 0.0f;
  if (zp) {
    const uint8_t b = *static_cast<const uint8_t*>(zp);
    z = type == QuantType::kInt8 ? static_cast<float>(static_cast<int8_t>(b))
        : type == QuantType::kUInt8 ? static_cast<float>(b) : e4m3_to_f32(b);
  }
  const float lo = type == QuantType::kInt8 ? -128.0f : 0.0f, hi = type == QuantType::kInt8 ? 127.0f : 255.0f;
  constexpr int kLoads = static_cast<int>(sizeof(X)) * 8 / 16;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += grid_stride) {
    alignas(16) X in[8];
    const uint4* src = reinterpret_cast<const uint4*>(x + g * 8);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) reinterpret_cast<uint4*>(in)[k] = src[k];
    alignas(8) uint8_t out[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float q = round_to(quotient, round_to(quotient, to_f32(in[k])) / s);
      if (type == QuantType::kFloat8E4M3FN) {
        if (z != 0.0f) q += z;
        out[k] = f32_to_e4m3(q, saturate);
      } else {
        out[k] = static_cast<uint8_t>(qconv::quantize_int(q, z, lo, hi));
      }
    }
    *reinterpret_cast<uint2*>(y + g * 8) = *reinterpret_cast<const uint2*>(out);
  }
}

template <class S, class Y>
__global__ void dequantize_fp8_kernel(const uint8_t* x, const S* scale, Y* y, QuantDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.n; i += grid_stride) {
    const int64_t j = (i / d.inner) % d.axis_len;
    y[i] = from_f32<Y>(e4m3_to_f32(x[i]) * to_f32(scale[j]));  // the product is exact in fp32's rounding
  }
}

template <class F>
void dispatch_quantized(QuantType t, F&& f) {
  if (t == QuantType::kInt8) f(ew::Tag<int8_t>{});
  else f(ew::Tag<uint8_t>{});
}

__device__ __forceinline__ double acc_to_f64(int32_t v) { return static_cast<double>(v); }
template <class T>
__device__ __forceinline__ double acc_to_f64(T v) {
  return static_cast<double>(to_f32(v));
}

// Row blocks of the epilogue grids: each thread walks about kEpilogueRows rows of its column, so
// the column's scales and bias (four dependent loads) are read once for that many values (one
// row a thread ran BERT's int8 and fp8 FFN epilogues at ~0.6 TB/s in s25q4; 16 rows: the int8
// b64 engine 6.07 -> 5.31 ms in s25q5).
// Small problems keep enough blocks to fill the GPU (about 4 per SM of an H100/H200's 132): at
// batch 1 (128 rows) 16 rows a thread left 24 blocks and doubled BERT's int8 time (s25q5).
constexpr int64_t kEpilogueRows = 16;
constexpr int64_t kEpilogueMinBlocks = 528;
inline int64_t epilogue_row_blocks(int64_t rows, int64_t cols) {
  const int64_t col_blocks = std::max<int64_t>(1, (cols + ew::kThreads - 1) / ew::kThreads);
  const int64_t fill = (kEpilogueMinBlocks + col_blocks - 1) / col_blocks;
  const int64_t blocks = std::min(rows, std::max((rows + kEpilogueRows - 1) / kEpilogueRows, fill));
  return std::max<int64_t>(1, std::min<int64_t>(blocks, 65535));
}

// A is int32 (a GEMM's accumulators) or Y (in place); B the bias's storage type. Threads run
// along a row's columns and blocks down the rows, so each thread computes its column's scale and
// bias once and no index is divided (the one-element-a-thread form with a 64-bit modulo ran the
// int8 FFN epilogue at well under half the memory bandwidth in s25q2).
// Rows a thread loads before it computes and stores any (the loads are independent; with one at
// a time the stores, which may alias the loads for all the compiler knows, kept each load waiting).
constexpr int kEpilogueBatch = 4;

template <class A, class Y, class B>
__global__ void quant_gemm_epilogue_kernel(const A* acc, Y* y, const B* bias, QuantGemmEpilogue e) {
  INGOT_KERNEL_ENTRY();
  // acc may be y itself (the fp8 kind's bias after the GEMM, in place): no __restrict__ here; each
  // element is read before it is written, by the same thread.
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= e.cols) return;
  const double xs = e.x_scale ? static_cast<double>(*e.x_scale) : 1.0;
  const UnaryParams& p = e.act_params;
  // x_scale * w_scale is exact in double; the accumulator times it rounds once.
  const double s = e.w_scale ? xs * static_cast<double>(e.w_scale[e.w_per_channel ? c : 0]) : xs;
  const double b = bias ? static_cast<double>(to_f32(bias[c])) : 0.0;
  const Y* res = static_cast<const Y*>(e.residual);
  const int64_t step = gridDim.y;
  for (int64_t r0 = blockIdx.y; r0 < e.rows; r0 += kEpilogueBatch * step) {
    A a[kEpilogueBatch];
    float rv[kEpilogueBatch];
#pragma unroll
    for (int k = 0; k < kEpilogueBatch; ++k) {
      const int64_t r = r0 + k * step;
      if (r < e.rows) {
        a[k] = acc[r * e.cols + c];
        rv[k] = res ? to_f32(res[r * e.cols + c]) : 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < kEpilogueBatch; ++k) {
      const int64_t r = r0 + k * step;
      if (r >= e.rows) break;
      const double v = acc_to_f64(a[k]) * s + b + static_cast<double>(rv[k]);
      y[r * e.cols + c] = from_f32<Y>(ew::apply_unary(e.act, static_cast<float>(v), p.alpha, p.beta, p.lo, p.hi));
    }
  }
}

// The epilogue ending in the next layer's QuantizeLinear (y_scale): one byte a value.
template <class A, class B>
__global__ void quant_gemm_epilogue_quantized_kernel(const A* __restrict__ acc, uint8_t* __restrict__ y,
                                                     const B* __restrict__ bias, QuantGemmEpilogue e, QuantType yq) {
  INGOT_KERNEL_ENTRY();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= e.cols) return;
  const double xs = e.x_scale ? static_cast<double>(*e.x_scale) : 1.0;
  const float ys = *e.y_scale;
  const UnaryParams& p = e.act_params;
  const double s = e.w_scale ? xs * static_cast<double>(e.w_scale[e.w_per_channel ? c : 0]) : xs;
  const double b = bias ? static_cast<double>(to_f32(bias[c])) : 0.0;
  const int64_t step = gridDim.y;
  for (int64_t r0 = blockIdx.y; r0 < e.rows; r0 += kEpilogueBatch * step) {
    A a[kEpilogueBatch];
#pragma unroll
    for (int k = 0; k < kEpilogueBatch; ++k) {
      const int64_t r = r0 + k * step;
      if (r < e.rows) a[k] = acc[r * e.cols + c];
    }
#pragma unroll
    for (int k = 0; k < kEpilogueBatch; ++k) {
      const int64_t r = r0 + k * step;
      if (r >= e.rows) break;
      const float v = ew::apply_unary(e.act, static_cast<float>(acc_to_f64(a[k]) * s + b), p.alpha, p.beta, p.lo, p.hi);
      const float q = v / ys;
      uint8_t out;
      if (yq == QuantType::kFloat8E4M3FN) {
        out = f32_to_e4m3(q, true);
      } else {
        const float t = isnan(q) ? 0.0f : rintf(fminf(fmaxf(q, -128.0f), 127.0f));
        out = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(t)));
      }
      y[r * e.cols + c] = out;
    }
  }
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
      // One element a thread, any scale layout: x and y from element `first` on, `n` elements.
      auto general = [&](int64_t first, int64_t n) {
        QuantDesc part = d;
        part.n = n;
        if (d.axis_len == 1) part.inner = n;  // per tensor: the tail of the vectorized path
        const X* xp = static_cast<const X*>(x) + first;
        if (d.type == QuantType::kFloat8E4M3FN) {
          launch_kernel(quantize_fp8_kernel<X, S>, ew::grid_for(n), ew::kThreads, 0, stream, xp,
                        static_cast<const S*>(scale), static_cast<const uint8_t*>(zero_point),
                        static_cast<uint8_t*>(y) + first, part, quotient);
          return;
        }
        dispatch_quantized(d.type, [&](auto qt) {
          using Q = typename decltype(qt)::type;
          launch_kernel(quantize_kernel<X, S, Q>, ew::grid_for(n), ew::kThreads, 0, stream, xp,
                        static_cast<const S*>(scale), static_cast<const Q*>(zero_point), static_cast<Q*>(y) + first,
                        part, quotient);
        });
      };
      const int64_t groups = d.n / 8;
      if (d.axis_len == 1 && groups > 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(y) % 8 == 0) {
        launch_kernel(quantize_tensor_vec8_kernel<X, S>, ew::grid_for(groups), ew::kThreads, 0, stream,
                      static_cast<const X*>(x), static_cast<const S*>(scale), zero_point, static_cast<uint8_t*>(y),
                      groups, d.type, d.saturate, quotient);
        if (d.n % 8 != 0) general(groups * 8, d.n % 8);
        return;
      }
      general(0, d.n);
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
      if (d.type == QuantType::kFloat8E4M3FN) {
        launch_kernel(dequantize_fp8_kernel<S, Y>, ew::grid_for(d.n), ew::kThreads, 0, stream,
                      static_cast<const uint8_t*>(x), static_cast<const S*>(scale), static_cast<Y*>(y), d);
        return;
      }
      dispatch_quantized(d.type, [&](auto qt) {
        using Q = typename decltype(qt)::type;
        launch_kernel(dequantize_kernel<Q, S, Y>, ew::grid_for(d.n), ew::kThreads, 0, stream, static_cast<const Q*>(x),
                      static_cast<const S*>(scale), static_cast<const Q*>(zero_point), static_cast<Y*>(y), d);
      });
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_quant_gemm_epilogue(const void* acc, bool acc_int32, FloatType y_type, void* y,
                                       const QuantGemmEpilogue& e, cudaStream_t stream) {
  if (e.rows < 0 || e.cols < 0 || (e.cols == 0 && e.rows > 0)) return cudaErrorInvalidValue;
  const int64_t n = e.rows * e.cols;
  if (n == 0) return cudaSuccess;
  if (!acc_int32 && acc != y) return cudaErrorInvalidValue;
  ew::dispatch_float(y_type, [&](auto yt) {
    using Y = typename decltype(yt)::type;
    ew::dispatch_float(e.bias_type, [&](auto bt) {
      using B = typename decltype(bt)::type;
      const B* bias = static_cast<const B*>(e.bias);
      // Columns across a block's threads, rows down the grid (up to 65535 row blocks, looping).
      const dim3 grid(static_cast<unsigned>((e.cols + ew::kThreads - 1) / ew::kThreads),
                      static_cast<unsigned>(epilogue_row_blocks(e.rows, e.cols)));
      if (acc_int32)
        launch_kernel(quant_gemm_epilogue_kernel<int32_t, Y, B>, grid, ew::kThreads, 0, stream,
                      static_cast<const int32_t*>(acc), static_cast<Y*>(y), bias, e);
      else
        launch_kernel(quant_gemm_epilogue_kernel<Y, Y, B>, grid, ew::kThreads, 0, stream, static_cast<const Y*>(acc),
                      static_cast<Y*>(y), bias, e);
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_quant_gemm_epilogue_quantized(const void* acc, bool acc_int32, FloatType acc_type,
                                                 QuantType y_type, void* y, const QuantGemmEpilogue& e,
                                                 cudaStream_t stream) {
  if (e.rows < 0 || e.cols < 0 || !e.y_scale || y_type == QuantType::kUInt8) return cudaErrorInvalidValue;
  if (e.rows * e.cols == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((e.cols + ew::kThreads - 1) / ew::kThreads),
                  static_cast<unsigned>(epilogue_row_blocks(e.rows, e.cols)));
  ew::dispatch_float(e.bias_type, [&](auto bt) {
    using B = typename decltype(bt)::type;
    const B* bias = static_cast<const B*>(e.bias);
    if (acc_int32) {
      launch_kernel(quant_gemm_epilogue_quantized_kernel<int32_t, B>, grid, ew::kThreads, 0, stream,
                    static_cast<const int32_t*>(acc), static_cast<uint8_t*>(y), bias, e, y_type);
      return;
    }
    ew::dispatch_float(acc_type, [&](auto at) {
      using A = typename decltype(at)::type;
      launch_kernel(quant_gemm_epilogue_quantized_kernel<A, B>, grid, ew::kThreads, 0, stream,
                    static_cast<const A*>(acc), static_cast<uint8_t*>(y), bias, e, y_type);
    });
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
