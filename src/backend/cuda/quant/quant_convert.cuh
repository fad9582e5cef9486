// Copyright ingot authors. Apache-2.0.
//
// Device conversions of the linear-quantization family, shared by QuantizeLinear's kernels
// (quant_kernels.cu) and the kernels that write a quantized copy of their output themselves
// (the LayerNorm row kernels' quantized output, elementwise_row_kernels.cu), so every path
// rounds exactly as ONNX's QuantizeLinear and src/core/float8.cc do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda::qconv {

/// v rounded to `t` and back (f32: v itself): QuantizeLinear's quotient type.
__device__ __forceinline__ float round_to(FloatType t, float v) {
  switch (t) {
    case FloatType::kF16: return __half2float(__float2half_rn(v));
    case FloatType::kBF16: return __bfloat162float(__float2bfloat16_rn(v));
    default: return v;
  }
}

/// One value of type `t` at p, as fp32.
__device__ __forceinline__ float load_as_f32(FloatType t, const void* p) {
  switch (t) {
    case FloatType::kF16: return __half2float(*static_cast<const __half*>(p));
    case FloatType::kBF16: return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
    default: return *static_cast<const float*>(p);
  }
}

__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
}

/// float -> float8e4m3fn as float_to_small_float (src/core/float8.cc) encodes it.
__device__ __forceinline__ uint8_t f32_to_e4m3(float v, bool saturate) {
  const uint8_t sign = signbit(v) ? 0x80 : 0x00;
  if (isnan(v)) return sign | 0x7f;
  // Round-to-nearest-even takes (448, 464] down to 448 and anything above up to 480, which E4M3FN
  // lacks: that (inf included) overflows. Saturated, the conversion's satfinite clamps it.
  if (!saturate && fabsf(v) > 464.0f) return sign | 0x7f;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

/// An integer quantizer's output for quotient q and zero point z: round half to even, add z,
/// saturate to [lo, hi] (NaN: z).
__device__ __forceinline__ int quantize_int(float q, float z, float lo, float hi) {
  float v = isnan(q) ? z : rintf(q) + z;
  v = rintf(fminf(fmaxf(v, lo), hi));
  return static_cast<int>(v);
}

}  // namespace ingot::backend::cuda::qconv
