// Copyright ingot authors. Apache-2.0.
//
// Helpers the op and unit tests share. Header-only, so each test file stays a single
// translation unit glob-added to ingot_unit_tests.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ingot::test {

/// Literal tensors of the common test dtypes, shape first as in Tensor::from_vector.
inline Tensor f32(Shape64 shape, std::vector<float> v) { return Tensor::from_vector(DataType::kFloat32, shape, v); }
inline Tensor i64(Shape64 shape, std::vector<int64_t> v) { return Tensor::from_vector(DataType::kInt64, shape, v); }

}  // namespace ingot::test
