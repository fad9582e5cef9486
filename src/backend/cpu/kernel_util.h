// Copyright ingot authors. Apache-2.0.
//
// Small helpers shared by the reference kernels. One place for broadcasting and index math.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ingot::cpu {

/// Maps a flat index of `out_shape` to the flat index of an input of `in_shape` that
/// broadcasts to it (numpy rules; in_shape aligned to the right).
class BroadcastIndexer {
 public:
  BroadcastIndexer(const Shape64& out_shape, const Shape64& in_shape);
  int64_t operator()(int64_t out_index) const;

 private:
  Shape64 out_strides_;
  Shape64 in_strides_;  // 0 for broadcast dims
  bool identity_ = false;
};

/// Multi-index of flat index `flat` in `shape` (row-major).
Shape64 unravel_index(int64_t flat, const Shape64& shape);
/// Flat index of multi-index `idx` in a tensor with `strides`.
int64_t ravel_index(const Shape64& idx, const Shape64& strides);

/// Calls f(input_flat, output_flat) for every element of `shape` in row-major order, where the
/// output index advances by map_strides[d] along dim d (0 for a reduced or broadcast dim).
template <class F>
void for_each_mapped(const Shape64& shape, const Shape64& map_strides, F&& f) {
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  const size_t r = shape.size();
  Shape64 idx(r, 0);
  int64_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, o);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        o += map_strides[d];
        break;
      }
      o -= map_strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

/// Integer contents of a tensor of any integer dtype (e.g. axes, shape, pads inputs).
std::vector<int64_t> tensor_to_i64(const Tensor& t);
/// Float contents of any numeric dtype as doubles.
std::vector<double> tensor_to_f64(const Tensor& t);

/// A fused epilogue's activation (FusedConv / FusedGemm / QuantGemm `activation`, its numbers
/// in `params`): "" (none), Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSwish, HardSigmoid, Gelu
/// (erf), GeluTanh, Silu; an unknown name leaves x as it is (op inference rejects those).
double apply_activation(const std::string& act, const std::vector<float>& params, double x);

/// The integer range of an integer dtype (int/uint 2..32 bits); false for others.
bool int_range(DataType t, int64_t* lo, int64_t* hi);
/// Stores a real value into a quantized element as QuantizeLinear does after dividing by the
/// scale: integers round half to even and saturate, float8/float4 convert with
/// round-to-nearest-even (saturating per `saturate`); other types store v as it is.
void store_quantized(Tensor& y, int64_t i, double v, bool saturate);

}  // namespace ingot::cpu
