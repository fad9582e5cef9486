// Copyright ingot authors. Apache-2.0.
//
// Cast, CastLike and BitCast. Quantization kernels are in quant_linear.cc.
//
// Cast follows ONNX (and its numpy reference): float -> integer truncates toward zero and
// wraps like a C cast of the truncated value; integer -> integer wraps; anything -> bool is
// "!= 0"; narrowing to fp16/bf16/fp8/fp4 rounds to nearest even exactly once (a double source
// goes through float with round-to-odd, which keeps the final rounding correct); `saturate`
// applies to the fp8 formats; float8e8m0 honours `round_mode` (up/down/nearest). Numbers
// format to strings as numpy does (shortest round-trip digits), strings parse with strtod.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_quant_linear_kernels(KernelRegistry& r);  // quant_linear.cc
void register_quant_conv_kernels(KernelRegistry& r);    // quant_conv.cc

namespace {

enum class RoundMode { kUp, kDown, kNearest };

/// float8e8m0 from a float, as onnx.numpy_helper.to_float8e8m0 does (the sign is ignored).
uint8_t to_e8m0(float x, bool saturate, RoundMode mode) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t exp = (u >> 23) & 0xff;
  if (exp == 0xff) return 0xff;
  bool up = false;
  if (mode == RoundMode::kNearest) {
    bool g = (u & 0x400000) != 0, r = (u & 0x200000) != 0, s = (u & 0x1fffff) != 0;
    bool lsb = exp > 0;
    up = g && (r || s || lsb);
  } else if (mode == RoundMode::kUp) {
    up = (u & 0x7fffff) != 0;
  }
  if (up) {
    if (exp == 0xfe && saturate) return 0xfe;
    ++exp;  // 0xfe + 1 = 0xff (NaN) when not saturating
  }
  return static_cast<uint8_t>(exp);
}

/// double -> float rounding to odd: correct input for a second rounding to any format with
/// at most 22 mantissa bits.
float to_float_odd(long double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || std::isinf(v)) return f;
  if (static_cast<long double>(f) == v) return f;
  if (std::fabs(static_cast<long double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= 1;
  std::memcpy(&f, &u, 4);
  return f;
}

void set_nibble(Tensor& t, int64_t i, uint8_t v) {
  uint8_t* d = t.mutable_data<uint8_t>();
  int shift = static_cast<int>(i & 1) * 4;
  d[i / 2] = static_cast<uint8_t>((d[i / 2] & ~(0xf << shift)) | ((v & 0xf) << shift));
}

struct CastOpts {
  bool saturate = true;
  RoundMode round = RoundMode::kUp;
};

/// Stores a float value (already correctly representable as `f`, i.e. rounded once to float
/// or rounded-to-odd) into a narrow float element.
void store_narrow(Tensor& y, int64_t i, float f, const CastOpts& o) {
  DataType t = y.dtype();
  switch (t) {
    case DataType::kFloat16: y.mutable_data<uint16_t>()[i] = float_to_half_bits(f); return;
    case DataType::kBFloat16: y.mutable_data<uint16_t>()[i] = float_to_bfloat16_bits(f); return;
    case DataType::kFloat8E8M0: y.mutable_data<uint8_t>()[i] = to_e8m0(f, o.saturate, o.round); return;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
      y.mutable_data<uint8_t>()[i] = float_to_small_float(f, t, o.saturate);
      return;
    case DataType::kFloat4E2M1: set_nibble(y, i, float_to_small_float(f, t, true)); return;
    default: y.set_f64(i, f); return;
  }
}

/// Stores an exact-or-wide value into a float element of y with a single correct rounding.
void store_float(Tensor& y, int64_t i, long double v, const CastOpts& o) {
  switch (y.dtype()) {
    case DataType::kFloat64: y.mutable_data<double>()[i] = static_cast<double>(v); return;
    case DataType::kFloat32: y.mutable_data<float>()[i] = static_cast<float>(v); return;
    default: store_narrow(y, i, to_float_odd(v), o); return;
  }
}

bool is_intlike(DataType t) { return is_integer(t) || t == DataType::kBool; }

// ---- strings

/// Shortest decimal that reads back to the same value of type t, formatted like numpy's
/// str(): positional for 1e-4 <= |v| < 1e16 (with ".0" for integral values), else
/// scientific "1.5e-07".
std::string format_float(double v, DataType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  auto same = [&](double back) {
    switch (t) {
      case DataType::kFloat64: return back == v;
      case DataType::kFloat32: return static_cast<float>(back) == static_cast<float>(v);
      case DataType::kFloat16: return float_to_half_bits(static_cast<float>(back)) == float_to_half_bits(static_cast<float>(v));
      case DataType::kBFloat16:
        return float_to_bfloat16_bits(static_cast<float>(back)) == float_to_bfloat16_bits(static_cast<float>(v));
      default: return static_cast<float>(back) == static_cast<float>(v);
    }
  };
  char buf[64];
  int p = 1;
  for (; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*e", p - 1, v);
    if (same(std::strtod(buf, nullptr))) break;
  }
  std::string s(buf);
  bool neg = s[0] == '-';
  if (neg) s = s.substr(1);
  size_t epos = s.find('e');
  int exp = std::atoi(s.c_str() + epos + 1);
  std::string digits;
  for (size_t k = 0; k < epos; ++k)
    if (s[k] != '.') digits += s[k];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool iequals(const std::string& a, const char* b) {
  size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

Status parse_into(KernelContext& k, const std::string& raw, Tensor& y, int64_t i, const CastOpts& o) {
  std::string s = trim(raw);
  DataType t = y.dtype();
  if (t == DataType::kBool) {
    if (iequals(s, "true")) { y.set_i64(i, 1); return Status::Ok(); }
    if (iequals(s, "false")) { y.set_i64(i, 0); return Status::Ok(); }
  }
  if (s.empty()) return k.error("cannot convert an empty string to ", data_type_name(t));
  const char* c = s.c_str();
  char* end = nullptr;
  if (is_intlike(t)) {
    errno = 0;
    if (t == DataType::kUInt64 && s[0] != '-') {
      unsigned long long u = std::strtoull(c, &end, 10);
      if (*end == '\0' && errno == 0) { y.mutable_data<uint64_t>()[i] = u; return Status::Ok(); }
    } else {
      long long v = std::strtoll(c, &end, 10);
      if (*end == '\0' && errno == 0) { y.set_i64(i, v); return Status::Ok(); }
    }
  }
  double d = std::strtod(c, &end);
  if (end == c || *end != '\0') return k.error("cannot convert string \"", raw, "\" to ", data_type_name(t));
  if (is_intlike(t)) y.set_f64(i, d);
  else store_float(y, i, d, o);
  return Status::Ok();
}

std::string format_element(const Tensor& x, int64_t i) {
  DataType t = x.dtype();
  if (t == DataType::kBool) return x.get_i64(i) ? "True" : "False";
  if (t == DataType::kUInt64) return std::to_string(x.data<uint64_t>()[i]);
  if (is_integer(t)) return std::to_string(x.get_i64(i));
  return format_float(x.get_f64(i), t);
}

/// Converts every element of x into y (already allocated with the target dtype, same numel).
Status cast_into(KernelContext& k, const Tensor& x, Tensor& y, bool saturate, const std::string& round_mode) {
  CastOpts o;
  o.saturate = saturate;
  if (round_mode == "up" || round_mode.empty()) o.round = RoundMode::kUp;
  else if (round_mode == "down") o.round = RoundMode::kDown;
  else if (round_mode == "nearest") o.round = RoundMode::kNearest;
  else return k.error("unknown round_mode '", round_mode, "'");
  DataType from = x.dtype(), to = y.dtype();
  int64_t n = x.numel();
  if (from == DataType::kComplex64 || from == DataType::kComplex128 || to == DataType::kComplex64 ||
      to == DataType::kComplex128)
    return k.unsupported_case("Cast of complex types");
  if (from == to) {
    if (from == DataType::kString) y.mutable_strings() = x.strings();
    else if (x.nbytes() > 0) std::memcpy(y.mutable_raw(), x.raw(), x.nbytes());
    return Status::Ok();
  }
  if (from == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) INGOT_RETURN_IF_ERROR(parse_into(k, x.strings()[i], y, i, o));
    return Status::Ok();
  }
  if (to == DataType::kString) {
    auto& out = y.mutable_strings();
    for (int64_t i = 0; i < n; ++i) out[i] = format_element(x, i);
    return Status::Ok();
  }
  if (is_intlike(from)) {
    if (is_intlike(to)) {
      for (int64_t i = 0; i < n; ++i) y.set_i64(i, x.get_i64(i));
      return Status::Ok();
    }
    for (int64_t i = 0; i < n; ++i) {
      long double v = from == DataType::kUInt64 ? static_cast<long double>(x.data<uint64_t>()[i])
                                                : static_cast<long double>(x.get_i64(i));
      store_float(y, i, v, o);
    }
    return Status::Ok();
  }
  // float source
  if (is_intlike(to)) {
    for (int64_t i = 0; i < n; ++i) y.set_f64(i, x.get_f64(i));
    return Status::Ok();
  }
  if (from == DataType::kFloat32 && to == DataType::kFloat64) {
    const float* s = x.data<float>();
    double* d = y.mutable_data<double>();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    return Status::Ok();
  }
  for (int64_t i = 0; i < n; ++i) store_float(y, i, x.get_f64(i), o);
  return Status::Ok();
}

}  // namespace

void register_quant_kernels(KernelRegistry& r) {
  r.add("Cast", [](KernelContext& k) -> Status {
    const Tensor& x = *k.input(0);
    DataType to = static_cast<DataType>(k.attrs().get_int("to", 0));
    Tensor& y = k.output(0);
    if (!y.defined() || y.dtype() != to) {
      INGOT_ASSIGN_OR_RETURN(Tensor * p, k.allocate_output(0, to, x.shape()));
      (void)p;
    }
    return cast_into(k, x, k.output(0), k.attrs().get_int("saturate", 1) != 0,
                     k.attrs().get_string("round_mode", "up"));
  });
  r.add("CastLike", [](KernelContext& k) -> Status {
    const Tensor& x = *k.input(0);
    DataType to = k.input(1)->dtype();
    Tensor& y = k.output(0);
    if (!y.defined() || y.dtype() != to) {
      INGOT_ASSIGN_OR_RETURN(Tensor * p, k.allocate_output(0, to, x.shape()));
      (void)p;
    }
    return cast_into(k, x, k.output(0), k.attrs().get_int("saturate", 1) != 0,
                     k.attrs().get_string("round_mode", "up"));
  });
  r.add("BitCast", [](KernelContext& k) -> Status {
    const Tensor& x = *k.input(0);
    DataType to = static_cast<DataType>(k.attrs().get_int("to", 0));
    if (x.dtype() == DataType::kString || to == DataType::kString)
      return k.error("BitCast does not apply to strings");
    if (data_type_bits(x.dtype()) != data_type_bits(to))
      return k.error("bit widths differ: ", data_type_name(x.dtype()), " vs ", data_type_name(to));
    Tensor& y = k.output(0);
    if (!y.defined() || y.dtype() != to) {
      INGOT_ASSIGN_OR_RETURN(Tensor * p, k.allocate_output(0, to, x.shape()));
      (void)p;
    }
    if (x.nbytes() > 0) std::memcpy(k.output(0).mutable_raw(), x.raw(), x.nbytes());
    return Status::Ok();
  });
  register_quant_linear_kernels(r);
  register_quant_conv_kernels(r);
}

}  // namespace ingot::cpu
