// Copyright ingot authors. Apache-2.0.
//
// Small helpers shared by the reference kernels. One place for broadcasting and index math.
#pragma once

#include <cstdint>
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

/// Integer contents of a tensor of any integer dtype (e.g. axes, shape, pads inputs).
std::vector<int64_t> tensor_to_i64(const Tensor& t);
/// Float contents of any numeric dtype as doubles.
std::vector<double> tensor_to_f64(const Tensor& t);

}  // namespace ingot::cpu
