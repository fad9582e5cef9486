// Copyright ingot authors. Apache-2.0.
//
// Element types as the KServe v2 protocol names them ("FP32", "INT64", ...), as Triton's
// config.pbtxt names them (TYPE_FP32, ...) and as ingot's DataType; conversions and sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ingot/data_type.h"

namespace ingot::server {

/// "FP32" → kFloat32; kUndefined for names the protocol does not have.
DataType datatype_from_protocol(const std::string& name);
/// kFloat32 → "FP32"; "" for types the protocol cannot carry.
const char* datatype_to_protocol(DataType t);
/// Bytes per element of a fixed-size type; 0 for BYTES/strings and unsupported types.
size_t element_size(DataType t);
/// Product of dims; -1 when a dim is negative or the product overflows int64.
int64_t element_count(const std::vector<int64_t>& dims);
/// "[1,3,224]"
std::string dims_string(const std::vector<int64_t>& dims);

}  // namespace ingot::server
