// Copyright ingot authors. Apache-2.0.
//
// The cuda linear-quantization family against the CPU reference (cpu::run_node on the same host
// inputs): QuantizeLinear and DequantizeLinear, int8, uint8 and float8e4m3fn, per tensor and per
// axis (negative axis too), with and without a zero point, f32/f16/bf16 values and scales,
// including values that saturate (float8: to +-448, or NaN with saturate=0), quotients exactly
// halfway between integers or between fp8 neighbours, fp8 subnormals, infinities and NaN. Also
// refusals.
#include <cmath>
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::quant_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

class CudaQuantTest : public OpCaseTest {
 protected:
  /// Positive scales (a quantization scale is never zero or negative).
  Tensor scales(DataType t, int64_t n, bool scalar) {
    return random_tensor(t, scalar ? Shape64{} : Shape64{n}, rng_, 0.01, 0.5);
  }
  Tensor zero_points(DataType q, int64_t n, bool scalar) {
    Tensor z = Tensor::zeros(q, scalar ? Shape64{} : Shape64{n}).value();
    std::uniform_int_distribution<int> d(q == DataType::kInt8 ? -20 : 100, q == DataType::kInt8 ? 20 : 140);
    for (int64_t i = 0; i < z.numel(); ++i) z.set_i64(i, d(rng_));
    return z;
  }
};

TEST_F(CudaQuantTest, QuantizeLinear) {
  const Shape64 x_shape = {3, 5, 7};
  for (DataType t : kFloatTypes) {
    for (DataType q : {DataType::kInt8, DataType::kUInt8}) {
      for (int64_t axis : {1, -1, 0}) {
        const int64_t n = x_shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
        for (bool scalar : {true, false}) {
          const std::string call = "QuantizeLinear {axis=" + std::to_string(axis) + "}";
          // Values up to +-40 with scales down to 0.01 saturate often.
          Tensor x = random_tensor(t, x_shape, rng_, -40, 40);
          check(quant_family(), 19, {input(x), input(scales(t, n, scalar)), input(zero_points(q, n, scalar))}, call,
                "cuda.quant.quantize");
          if (q == DataType::kUInt8)
            check(quant_family(), 19, {input(x), input(scales(t, n, scalar))}, call, "cuda.quant.quantize");
        }
      }
      // Exact halves: 2.5 / 1, -3.5 / 1, ... round to even.
      Tensor x = Tensor::zeros(t, {8}).value();
      const double halves[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5};
      for (int i = 0; i < 8; ++i) x.set_f64(i, halves[i]);
      Tensor one = Tensor::zeros(t, {}).value();
      one.set_f64(0, 1.0);
      check(quant_family(), 19, {input(x), input(one), input(zero_points(q, 1, true))}, "QuantizeLinear",
            "cuda.quant.quantize");
    }
  }
}

TEST_F(CudaQuantTest, DequantizeLinear) {
  const Shape64 x_shape = {4, 6, 9};
  for (DataType t : kFloatTypes) {
    for (DataType q : {DataType::kInt8, DataType::kUInt8}) {
      for (int64_t axis : {1, -1, 0}) {
        const int64_t n = x_shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
        for (bool scalar : {true, false}) {
          const std::string call = "DequantizeLinear {axis=" + std::to_string(axis) + "}";
          Tensor x = random_tensor(q, x_shape, rng_, q == DataType::kInt8 ? -128 : 0, q == DataType::kInt8 ? 127 : 255);
          check(quant_family(), 19, {input(x), input(scales(t, n, scalar)), input(zero_points(q, n, scalar))}, call,
                "cuda.quant.dequantize");
          check(quant_family(), 19, {input(x), input(scales(t, n, scalar))}, call, "cuda.quant.dequantize");
        }
      }
    }
  }
}

TEST_F(CudaQuantTest, QuantizeLinearFloat8) {
  const Shape64 x_shape = {3, 5, 7};
  for (DataType t : kFloatTypes) {
    for (int saturate : {1, 0}) {
      for (int64_t axis : {1, -1}) {
        const int64_t n = x_shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
        for (bool scalar : {true, false}) {
          const std::string attrs = "axis=" + std::to_string(axis) + ", saturate=" + std::to_string(saturate);
          // Values up to +-40 with scales down to 0.01 go far past 448 (saturated, or NaN).
          Tensor x = random_tensor(t, x_shape, rng_, -40, 40);
          Tensor zero = Tensor::zeros(DataType::kFloat8E4M3FN, scalar ? Shape64{} : Shape64{n}).value();
          check(quant_family(), 19, {input(x), input(scales(t, n, scalar)), input(zero)},
                "QuantizeLinear {" + attrs + "}", "cuda.quant.quantize");
          check(quant_family(), 21, {input(x), input(scales(t, n, scalar))},
                "QuantizeLinear {" + attrs + ", output_dtype=17}", "cuda.quant.quantize");
        }
      }
      // Scale 1: ties between fp8 neighbours (1.0625 -> 1, 1.1875 -> 1.25, 232 -> 224, 248 -> 256,
      // 464 -> 448), the overflow edge (465, 480), subnormal ties (2^-10 -> 0, 3 * 2^-10 -> 2^-8),
      // signed zeros, infinities and NaN.
      const double v[] = {1.0625, 1.1875, 232, 248,     464,        465,           480,   448, 449,
                          0.5,    -0.0,   0,   0x1p-10, 3 * 0x1p-10, 0x1p-9,       1e-6,  1e30,
                          INFINITY, NAN};
      const int64_t count = static_cast<int64_t>(sizeof(v) / sizeof(v[0]));
      Tensor x = Tensor::zeros(t, {2, count}).value();
      for (int64_t i = 0; i < count; ++i) {
        x.set_f64(i, v[i]);
        x.set_f64(count + i, -v[i]);
      }
      Tensor one = Tensor::zeros(t, {}).value();
      one.set_f64(0, 1.0);
      check(quant_family(), 21, {input(x), input(one)},
            "QuantizeLinear {saturate=" + std::to_string(saturate) + ", output_dtype=17}", "cuda.quant.quantize");
    }
  }
}

TEST_F(CudaQuantTest, DequantizeLinearFloat8) {
  const Shape64 x_shape = {4, 6, 9};
  for (DataType t : kFloatTypes) {
    for (int64_t axis : {1, -1, 0}) {
      const int64_t n = x_shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
      for (bool scalar : {true, false}) {
        const std::string call = "DequantizeLinear {axis=" + std::to_string(axis) + "}";
        Tensor x = random_tensor(DataType::kFloat8E4M3FN, x_shape, rng_, -448, 448);
        // NaN of both signs, the largest finite values, the smallest subnormal, -0.
        const uint8_t bits[] = {0x7f, 0xff, 0x7e, 0xfe, 0x01, 0x80};
        for (size_t i = 0; i < sizeof(bits); ++i) x.mutable_data<uint8_t>()[i] = bits[i];
        Tensor zero = Tensor::zeros(DataType::kFloat8E4M3FN, scalar ? Shape64{} : Shape64{n}).value();
        check(quant_family(), 19, {input(x), input(scales(t, n, scalar)), input(zero)}, call, "cuda.quant.dequantize");
        check(quant_family(), 19, {input(x), input(scales(t, n, scalar))}, call, "cuda.quant.dequantize");
      }
    }
  }
}

TEST_F(CudaQuantTest, RefusesWhatItDoesNotHandle) {
  // float8e5m2 (only e4m3fn is taken).
  refuses(quant_family(), 21, {input(DataType::kFloat32, {4, 6}), input(DataType::kFloat32, {})},
          "QuantizeLinear {output_dtype=19}");
  refuses(quant_family(), 21, {input(DataType::kFloat8E5M2, {4, 6}), input(DataType::kFloat32, {})},
          "DequantizeLinear");
  // Blocked quantization, int16 output, int32 input.
  refuses(quant_family(), 21,
          {input(DataType::kFloat32, {4, 6}), input(DataType::kFloat32, {4, 3}), input(DataType::kInt8, {4, 3})},
          "QuantizeLinear {axis=1, block_size=2}");
  refuses(quant_family(), 21,
          {input(DataType::kFloat32, {4, 6}), input(DataType::kFloat32, {}), input(DataType::kInt16, {})},
          "QuantizeLinear");
  refuses(quant_family(), 19, {input(DataType::kInt32, {4, 6}), input(DataType::kFloat32, {})}, "DequantizeLinear");
}

}  // namespace
}  // namespace ingot::gpu_test
