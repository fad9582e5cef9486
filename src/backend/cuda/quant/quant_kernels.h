// Copyright ingot authors. Apache-2.0.
//
// Launchers for the linear-quantization family's device code (quant_kernels.cu):
// QuantizeLinear to int8/uint8/float8e4m3fn and DequantizeLinear from them, per tensor or per
// axis; and the epilogue of ingot::QuantGemm's int8 GEMM (int32 accumulators to a scaled,
// biased, activated float output). Plain C++ so the tactics compile with the host compiler;
// launchers enqueue on `stream`, never synchronize, and return cudaGetLastError() after the
// launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType, UnaryOp, UnaryParams

namespace ingot::backend::cuda {

/// The quantized side of QuantizeLinear / DequantizeLinear.
enum class QuantType : int32_t { kInt8 = 0, kUInt8, kFloat8E4M3FN };

/// Element i uses scale/zero point (i / inner) % axis_len; per-tensor is axis_len = inner = 1.
struct QuantDesc {
  int64_t n = 0;
  int64_t axis_len = 1;
  int64_t inner = 1;
  QuantType type = QuantType::kInt8;
  /// float8e4m3fn only (QuantizeLinear's `saturate`): magnitudes beyond 448 become +-448 when
  /// set, else NaN (inf too), as ONNX says.
  bool saturate = true;
};

/// Integers: y = saturate(round_half_even(x / scale) + zero_point). float8e4m3fn: y = the
/// nearest-even fp8 of x / scale (+ zero_point when it is nonzero, added in fp32), saturated or
/// NaN per desc.saturate; NaN keeps its sign. The quotient is rounded to `quotient` (x's type
/// when x and scale share it, else f32) as the reference does. zero_point (of the quantized
/// type) may be null (0).
cudaError_t launch_quantize(FloatType x_type, FloatType scale_type, FloatType quotient, const void* x,
                            const void* scale, const void* zero_point, void* y, const QuantDesc& desc,
                            cudaStream_t stream);

/// y = (x - zero_point) * scale in fp32, stored as y_type (the scale's type). A float8 x has no
/// zero point to subtract (the reference ignores it): pass null.
cudaError_t launch_dequantize(FloatType scale_type, FloatType y_type, const void* x, const void* scale,
                              const void* zero_point, void* y, const QuantDesc& desc, cudaStream_t stream);

/// The epilogue of a quantized GEMM over a row-major [rows, cols] output:
///   y[r, c] = act(acc[r, c] * x_scale * w_scale[c or 0] + bias[c]).
/// The scale product and the bias are applied in double (the int32 accumulator is exact there),
/// the activation in fp32, and y is rounded once to its type.
struct QuantGemmEpilogue {
  int64_t rows = 0;
  int64_t cols = 0;
  const float* x_scale = nullptr;  ///< device, one value; null: 1
  const float* w_scale = nullptr;  ///< device, one value or `cols` (w_per_channel); null: 1
  bool w_per_channel = false;
  const void* bias = nullptr;  ///< device, `cols` values of bias_type; null: none
  const void* residual = nullptr;  ///< device, rows x cols values of Y's type, added after the bias; null: none
  FloatType bias_type = FloatType::kF32;
  UnaryOp act = UnaryOp::kIdentity;  ///< kIdentity or any of FusedGemm's activations
  UnaryParams act_params;            ///< alpha/beta/lo/hi by value (the pointers are ignored)
  const float* y_scale = nullptr;    ///< device, one value: launch_quant_gemm_epilogue_quantized's
};

/// Runs the epilogue. acc_int32: `acc` is an int32 [rows, cols] buffer; otherwise `acc` must be
/// `y` itself (in place: values of y_type, e.g. a GEMM output still missing its bias).
cudaError_t launch_quant_gemm_epilogue(const void* acc, bool acc_int32, FloatType y_type, void* y,
                                       const QuantGemmEpilogue& e, cudaStream_t stream);

/// The same epilogue ending in QuantizeLinear(., y_scale): y is int8 (rounded half to even,
/// saturated) or float8e4m3fn (nearest even, saturated at +-448), the quotient in float32.
/// `acc` is int32 accumulators (acc_int32) or values of acc_type (the fp8 kind's fp16 D).
cudaError_t launch_quant_gemm_epilogue_quantized(const void* acc, bool acc_int32, FloatType acc_type,
                                                 QuantType y_type, void* y, const QuantGemmEpilogue& e,
                                                 cudaStream_t stream);

}  // namespace ingot::backend::cuda
