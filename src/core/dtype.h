// Copyright ingot authors. Apache-2.0.
//
// Facts about element types and the small float formats ONNX uses. Float16 and BFloat16 are
// storage types: arithmetic converts to float (the reference backend computes in fp32).
// The fp8/fp4 formats are converted with the functions at the bottom (see float8.cc), which
// follow ONNX's Cast semantics including its `saturate` attribute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "ingot/data_type.h"

namespace ingot {

/// Bits per element: 32 for f32, 4 for int4/uint4/float4e2m1, 2 for int2, 0 for string
/// (strings are held out of line) and undefined.
int data_type_bits(DataType t);
/// True for every floating format (fp64 .. fp4), false for complex.
bool is_float(DataType t);
bool is_integer(DataType t);  ///< int2..int64, uint2..uint64 (not bool)
bool is_signed_integer(DataType t);
bool is_sub_byte(DataType t);  ///< packed: int4/uint4/float4e2m1/int2/uint2
bool is_float8(DataType t);
/// Casts that a fused elementwise kernel, computing in C++ float / double / integer arithmetic,
/// reproduces bit for bit against the reference Cast: between float16, bfloat16, float32 and
/// float64; and from bool or an 8-64-bit integer type to bool, such an integer type (wrapping),
/// float32, float64, float16, or (from types of at most 16 bits, exact in float32) bfloat16.
/// Not: float to integer or bool (the reference's saturation and NaN rules), float8, sub-byte
/// types, strings.
bool is_plain_cast(DataType from, DataType to);
/// Parses a short name ("f32", "float32", "float", "i64", "int64", ...); kUndefined if unknown.
DataType parse_data_type(const std::string& name);
/// True for values the enum names (kUndefined excluded).
bool is_valid_data_type(int32_t value);

float half_bits_to_float(uint16_t h);
uint16_t float_to_half_bits(float f);  ///< round to nearest even; overflow to inf

struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(float_to_half_bits(f)) {}
  operator float() const { return half_bits_to_float(bits); }  // NOLINT
  static Float16 from_bits(uint16_t b) { Float16 h; h.bits = b; return h; }
};

inline float bfloat16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bfloat16_bits(float f);  ///< round to nearest even, NaN stays NaN

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  operator float() const { return bfloat16_bits_to_float(bits); }  // NOLINT
  static BFloat16 from_bits(uint16_t b) { BFloat16 h; h.bits = b; return h; }
};

/// fp8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0) and fp4 (e2m1, one nibble in the low bits)
/// to float.
float small_float_to_float(uint8_t bits, DataType t);
/// float to fp8/fp4 bits with round-to-nearest-even. `saturate` as in ONNX Cast: true clamps
/// out-of-range finite values to the largest finite value of the format; false makes them
/// inf (or NaN where the format has no inf).
uint8_t float_to_small_float(float f, DataType t, bool saturate = true);

}  // namespace ingot
