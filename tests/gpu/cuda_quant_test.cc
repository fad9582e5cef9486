// Copyright ingot authors. Apache-2.0.
//
// The cuda linear-quantization family against the CPU reference (cpu::run_node on the same host
// inputs): QuantizeLinear and DequantizeLinear, int8 and uint8, per tensor and per axis
// (negative axis too), with and without a zero point, f32/f16/bf16 values and scales, including
// values that saturate and quotients exactly halfway between integers. Also refusals.
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

TEST_F(CudaQuantTest, RefusesWhatItDoesNotHandle) {
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
