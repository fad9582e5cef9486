// Copyright ingot authors. Apache-2.0.
//
// Type-name tables of tensor_types.h.
#include "server/tensor_types.h"

#include <limits>

namespace ingot::server {

namespace {
struct TypeRow {
  const char* protocol;
  DataType type;
  size_t size;
};
constexpr TypeRow kTypes[] = {
    {"BOOL", DataType::kBool, 1},     {"UINT8", DataType::kUInt8, 1},   {"UINT16", DataType::kUInt16, 2},
    {"UINT32", DataType::kUInt32, 4}, {"UINT64", DataType::kUInt64, 8}, {"INT8", DataType::kInt8, 1},
    {"INT16", DataType::kInt16, 2},   {"INT32", DataType::kInt32, 4},   {"INT64", DataType::kInt64, 8},
    {"FP16", DataType::kFloat16, 2},  {"FP32", DataType::kFloat32, 4},  {"FP64", DataType::kFloat64, 8},
    {"BF16", DataType::kBFloat16, 2}, {"BYTES", DataType::kString, 0},
};
}  // namespace

DataType datatype_from_protocol(const std::string& name) {
  for (const TypeRow& r : kTypes) {
    if (name == r.protocol) return r.type;
  }
  return DataType::kUndefined;
}

const char* datatype_to_protocol(DataType t) {
  for (const TypeRow& r : kTypes) {
    if (t == r.type) return r.protocol;
  }
  return "";
}

size_t element_size(DataType t) {
  for (const TypeRow& r : kTypes) {
    if (t == r.type) return r.size;
  }
  return 0;
}

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace ingot::server
