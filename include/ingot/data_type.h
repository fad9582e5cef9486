// Copyright ingot authors. Apache-2.0.
//
// Element types of tensors. The numeric values equal ONNX's TensorProto.DataType so an
// ONNX dtype converts by a cast.
#pragma once

#include <cstdint>

namespace ingot {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

/// Short name used in text forms and messages: "f32", "f16", "bf16", "i64", "u8", "bool",
/// "f8e4m3fn", "i4", "str", ... Returns "undefined" for values outside the enum.
const char* data_type_name(DataType t);

}  // namespace ingot
