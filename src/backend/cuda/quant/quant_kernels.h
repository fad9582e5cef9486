// Copyright ingot authors. Apache-2.0.
//
// Launchers for the linear-quantization family's device code (quant_kernels.cu):
// QuantizeLinear to int8/uint8 and DequantizeLinear from int8/uint8, per tensor or per axis.
// Plain C++ so quant_tactics.cc compiles with the host compiler; launchers enqueue on
// `stream`, never synchronize, and return cudaGetLastError() after the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda {

/// Element i uses scale/zero point (i / inner) % axis_len; per-tensor is axis_len = inner = 1.
struct QuantDesc {
  int64_t n = 0;
  int64_t axis_len = 1;
  int64_t inner = 1;
  bool int8 = false;  ///< the quantized side is int8 (else uint8)
};

/// y = saturate(round_half_even(x / scale) + zero_point). The quotient is rounded to
/// `quotient` (x's type when x and scale share it, else f32) as the reference does.
/// zero_point may be null (0).
cudaError_t launch_quantize(FloatType x_type, FloatType scale_type, FloatType quotient, const void* x,
                            const void* scale, const void* zero_point, void* y, const QuantDesc& desc,
                            cudaStream_t stream);

/// y = (x - zero_point) * scale in fp32, stored as y_type (the scale's type).
cudaError_t launch_dequantize(FloatType scale_type, FloatType y_type, const void* x, const void* scale,
                              const void* zero_point, void* y, const QuantDesc& desc, cudaStream_t stream);

}  // namespace ingot::backend::cuda
