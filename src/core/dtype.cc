// Copyright ingot authors. Apache-2.0.
#include "core/dtype.h"

#include <cmath>

namespace ingot {

namespace {
struct TypeInfo {
  DataType type;
  const char* name;
  int bits;
};
constexpr TypeInfo kTypes[] = {
    {DataType::kFloat32, "f32", 32},       {DataType::kUInt8, "u8", 8},
    {DataType::kInt8, "i8", 8},            {DataType::kUInt16, "u16", 16},
    {DataType::kInt16, "i16", 16},         {DataType::kInt32, "i32", 32},
    {DataType::kInt64, "i64", 64},         {DataType::kString, "str", 0},
    {DataType::kBool, "bool", 8},          {DataType::kFloat16, "f16", 16},
    {DataType::kFloat64, "f64", 64},       {DataType::kUInt32, "u32", 32},
    {DataType::kUInt64, "u64", 64},        {DataType::kComplex64, "c64", 64},
    {DataType::kComplex128, "c128", 128},  {DataType::kBFloat16, "bf16", 16},
    {DataType::kFloat8E4M3FN, "f8e4m3fn", 8}, {DataType::kFloat8E4M3FNUZ, "f8e4m3fnuz", 8},
    {DataType::kFloat8E5M2, "f8e5m2", 8},  {DataType::kFloat8E5M2FNUZ, "f8e5m2fnuz", 8},
    {DataType::kUInt4, "u4", 4},           {DataType::kInt4, "i4", 4},
    {DataType::kFloat4E2M1, "f4e2m1", 4},  {DataType::kFloat8E8M0, "f8e8m0", 8},
    {DataType::kUInt2, "u2", 2},           {DataType::kInt2, "i2", 2},
};
const TypeInfo* find(DataType t) {
  for (const auto& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}
}  // namespace

const char* data_type_name(DataType t) {
  const TypeInfo* i = find(t);
  return i ? i->name : "undefined";
}

int data_type_bits(DataType t) {
  const TypeInfo* i = find(t);
  return i ? i->bits : 0;
}

bool is_valid_data_type(int32_t value) { return find(static_cast<DataType>(value)) != nullptr; }

bool is_float(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kFloat16:
    case DataType::kBFloat16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

bool is_signed_integer(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kInt4: case DataType::kInt2:
      return true;
    default:
      return false;
  }
}

bool is_integer(DataType t) {
  switch (t) {
    case DataType::kUInt8: case DataType::kUInt16: case DataType::kUInt32:
    case DataType::kUInt64: case DataType::kUInt4: case DataType::kUInt2:
      return true;
    default:
      return is_signed_integer(t);
  }
}

bool is_sub_byte(DataType t) {
  int b = data_type_bits(t);
  return b > 0 && b < 8;
}

bool is_float8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ ||
         t == DataType::kFloat8E5M2 || t == DataType::kFloat8E5M2FNUZ ||
         t == DataType::kFloat8E8M0;
}

bool is_plain_cast(DataType from, DataType to) {
  auto std_float = [](DataType t) {
    return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
  };
  auto int_or_bool = [](DataType t) { return t == DataType::kBool || (is_integer(t) && !is_sub_byte(t)); };
  if (std_float(from)) return std_float(to);
  if (!int_or_bool(from)) return false;
  if (int_or_bool(to) || to == DataType::kFloat32 || to == DataType::kFloat64 || to == DataType::kFloat16) return true;
  return to == DataType::kBFloat16 && data_type_bits(from) <= 16;
}

DataType parse_data_type(const std::string& name) {
  for (const auto& i : kTypes)
    if (name == i.name) return i.type;
  static const struct { const char* n; DataType t; } kAliases[] = {
      {"float", DataType::kFloat32},   {"float32", DataType::kFloat32},
      {"double", DataType::kFloat64},  {"float64", DataType::kFloat64},
      {"float16", DataType::kFloat16}, {"half", DataType::kFloat16},
      {"bfloat16", DataType::kBFloat16}, {"int8", DataType::kInt8},
      {"int16", DataType::kInt16},     {"int32", DataType::kInt32},
      {"int64", DataType::kInt64},     {"uint8", DataType::kUInt8},
      {"uint16", DataType::kUInt16},   {"uint32", DataType::kUInt32},
      {"uint64", DataType::kUInt64},   {"string", DataType::kString},
  };
  for (const auto& a : kAliases)
    if (name == a.n) return a.t;
  return DataType::kUndefined;
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffff;
  if (abs >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                       // below the smallest normal: subnormal or 0
    // value = abs_float; half subnormal step is 2^-24.
    float af;
    std::memcpy(&af, &abs, 4);
    float scaled = af * 16777216.0f;  // 2^24, exact
    float r = std::nearbyint(scaled);  // default rounding mode is nearest-even
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t half = exp << 10 | mant >> 13;
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

}  // namespace ingot
