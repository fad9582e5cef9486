// Copyright ingot authors. Apache-2.0.
//
// fp8 / fp4 conversions (see dtype.h). Formats, as ONNX defines them:
//   E4M3FN    bias 7,  no inf, NaN = S.1111.111, max 448
//   E4M3FNUZ  bias 8,  no inf, no -0, NaN = 0x80, max 240
//   E5M2      bias 15, IEEE-like: inf = S.11111.00, NaN = S.11111.xx, max 57344
//   E5M2FNUZ  bias 16, no inf, no -0, NaN = 0x80, max 57344
//   E2M1      bias 1,  no inf/NaN, max 6 (a nibble in the low 4 bits)
//   E8M0      exponent only, 2^(e-127), 0xFF = NaN, no sign, no zero
// float -> small float rounds to nearest even; out-of-range finite values and infinities
// saturate to +-max when `saturate`, otherwise become inf (E5M2) or NaN (the others).
// E2M1 always saturates (it has neither), E8M0 rounds up as ONNX Cast does by default.
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/dtype.h"

namespace ingot {

namespace {

struct Format {
  int exp_bits;
  int mant_bits;
  int bias;
  bool fnuz;     // NaN is 0x80, no negative zero
  bool has_inf;  // IEEE inf/NaN encoding in the top exponent (E5M2)
  double max;    // largest finite value
};

bool format_of(DataType t, Format* f) {
  switch (t) {
    case DataType::kFloat8E4M3FN: *f = {4, 3, 7, false, false, 448.0}; return true;
    case DataType::kFloat8E4M3FNUZ: *f = {4, 3, 8, true, false, 240.0}; return true;
    case DataType::kFloat8E5M2: *f = {5, 2, 15, false, true, 57344.0}; return true;
    case DataType::kFloat8E5M2FNUZ: *f = {5, 2, 16, true, false, 57344.0}; return true;
    case DataType::kFloat4E2M1: *f = {2, 1, 1, false, false, 6.0}; return true;
    default: return false;
  }
}

uint8_t sign_bit(const Format& f) { return static_cast<uint8_t>(1u << (f.exp_bits + f.mant_bits)); }

// Encodes a value already rounded to the format's precision (0 <= a <= max).
uint8_t encode_magnitude(double a, const Format& f) {
  if (a == 0) return 0;
  int e2;
  double m = std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;                 // a = (2m) * 2^e
  int emin = 1 - f.bias;
  if (e < emin) {  // subnormal: exponent field 0
    double mant = std::ldexp(a, f.mant_bits - emin);
    return static_cast<uint8_t>(mant);
  }
  int mant = static_cast<int>(std::ldexp(2 * m - 1, f.mant_bits));
  return static_cast<uint8_t>(((e + f.bias) << f.mant_bits) | mant);
}

uint8_t nan_bits(const Format& f, bool negative) {
  if (f.fnuz) return 0x80;
  if (f.has_inf) return static_cast<uint8_t>((negative ? 0x80 : 0) | 0x7e);  // E5M2 quiet NaN
  if (f.exp_bits == 2) return 0;  // E2M1 has no NaN
  return static_cast<uint8_t>((negative ? 0x80 : 0) | 0x7f);  // E4M3FN
}

uint8_t float_to_e8m0(float x, bool saturate) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t exp = (u >> 23) & 0xff;
  if (exp == 0xff) return 0xff;  // NaN and inf
  // Round up: any fraction bumps the exponent (a subnormal input goes to 2^-126).
  if ((u & 0x7fffff) != 0) {
    if (exp == 0xfe) {
      if (!saturate) return 0xff;
    } else {
      ++exp;
    }
  }
  return static_cast<uint8_t>(exp);
}

}  // namespace

float small_float_to_float(uint8_t bits, DataType t) {
  if (t == DataType::kFloat8E8M0) {
    if (bits == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(bits) - 127);
  }
  Format f;
  if (!format_of(t, &f)) return std::numeric_limits<float>::quiet_NaN();
  int total = f.exp_bits + f.mant_bits + 1;
  bits = static_cast<uint8_t>(bits & ((1u << total) - 1));
  if (f.fnuz && bits == 0x80) return std::numeric_limits<float>::quiet_NaN();
  bool neg = (bits & sign_bit(f)) != 0;
  int exp = (bits >> f.mant_bits) & ((1 << f.exp_bits) - 1);
  int mant = bits & ((1 << f.mant_bits) - 1);
  int exp_all = (1 << f.exp_bits) - 1;
  double v;
  if (f.has_inf && exp == exp_all) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.fnuz && f.exp_bits == 4 && exp == exp_all && mant == (1 << f.mant_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();  // E4M3FN
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mant_bits), exp - f.bias);
  }
  return static_cast<float>(neg ? -v : v);
}

uint8_t float_to_small_float(float x, DataType t, bool saturate) {
  if (t == DataType::kFloat8E8M0) return float_to_e8m0(x, saturate);
  Format f;
  if (!format_of(t, &f)) return 0;
  bool neg = std::signbit(x);
  uint8_t sign = neg ? sign_bit(f) : 0;
  uint8_t zero = f.fnuz ? 0 : sign;  // FNUZ has no negative zero
  if (std::isnan(x)) return nan_bits(f, neg);
  bool always_saturate = f.exp_bits == 2;  // E2M1 can express neither inf nor NaN
  auto overflow = [&]() -> uint8_t {
    if (saturate || always_saturate) return static_cast<uint8_t>(sign | encode_magnitude(f.max, f));
    if (f.has_inf) return static_cast<uint8_t>(sign | 0x7c);
    return nan_bits(f, neg);
  };
  if (std::isinf(x)) return overflow();
  double a = std::fabs(static_cast<double>(x));
  if (a == 0) return zero;
  int e2;
  std::frexp(a, &e2);
  int e = std::max(e2 - 1, 1 - f.bias);   // exponent of the quantum's binade
  double q = std::ldexp(1.0, e - f.mant_bits);  // spacing of representable values there
  double r = std::nearbyint(a / q) * q;          // round half to even (exact arithmetic)
  if (r > f.max) return overflow();
  if (r == 0) return zero;  // underflow keeps the sign (no -0 in FNUZ)
  return static_cast<uint8_t>(sign | encode_magnitude(r, f));
}

}  // namespace ingot
