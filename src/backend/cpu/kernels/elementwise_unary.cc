// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for the unary elementwise ops: math functions, activations, rounding,
// sign/abs/neg, IsNaN/IsInf, Not/BitwiseNot, Clip and PRelu. Floats are computed in double
// and rounded once to the output type; integer inputs of the ops that allow them (Abs, Neg,
// Sign, Relu, Clip, Shrink, ...) are computed exactly in int64/uint64.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/shape.h"

namespace ingot::cpu {

void register_elementwise_unary_kernels(KernelRegistry& r);

namespace {

Result<Tensor*> output0(KernelContext& k, DataType dt, const Shape64& shape) {
  Tensor& y = k.output(0);
  if (y.defined() && y.dtype() == dt && y.shape() == shape) return &y;
  return k.allocate_output(0, dt, shape);
}

bool is_std_float(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

using FloatFn = std::function<double(double)>;
/// Builds the scalar function from the node's attributes.
using FloatFnFactory = std::function<FloatFn(const KernelContext&)>;

/// y = f(x) for float inputs (typed fast paths for f32/f64, the generic accessors otherwise).
Status apply_float(KernelContext& k, const FloatFn& f, bool allow_int) {
  const Tensor& x = *k.input(0);
  DataType dt = x.dtype();
  if (!is_std_float(dt) && !(allow_int && (is_integer(dt) && !is_sub_byte(dt))))
    return k.unsupported_case("type ", data_type_name(dt));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, dt, x.shape()));
  int64_t n = x.numel();
  if (dt == DataType::kFloat32) {
    const float* px = x.data<float>();
    float* py = y->mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) py[i] = static_cast<float>(f(static_cast<double>(px[i])));
  } else if (dt == DataType::kFloat64) {
    const double* px = x.data<double>();
    double* py = y->mutable_data<double>();
    for (int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y->set_f64(i, f(x.get_f64(i)));
  }
  return Status::Ok();
}

KernelFn float_kernel(FloatFnFactory make, bool allow_int = false) {
  return [make, allow_int](KernelContext& k) -> Status { return apply_float(k, make(k), allow_int); };
}

KernelFn float_kernel(FloatFn f, bool allow_int = false) {
  return [f, allow_int](KernelContext& k) -> Status { return apply_float(k, f, allow_int); };
}

/// Ops defined on integers too, with a separate exact integer function for signed types.
/// Unsigned inputs are rejected, passed through (Abs) or mapped to 0/1 (Sign).
enum class Unsigned { kReject, kIdentity, kSign };
using IntFn = std::function<int64_t(int64_t)>;
KernelFn int_or_float_kernel(FloatFn f, IntFn fi, Unsigned u) {
  return [f, fi, u](KernelContext& k) -> Status {
    const Tensor& x = *k.input(0);
    DataType dt = x.dtype();
    if (is_std_float(dt)) return apply_float(k, f, false);
    if (!is_integer(dt) || is_sub_byte(dt)) return k.unsupported_case("type ", data_type_name(dt));
    bool is_unsigned = !is_signed_integer(dt);
    if (is_unsigned && u == Unsigned::kReject) return k.unsupported_case("type ", data_type_name(dt));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, dt, x.shape()));
    int64_t n = x.numel();
    if (is_unsigned) {
      // get/set_i64 round-trip every unsigned width bit-exactly (uint64 through two's complement).
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = x.get_i64(i);
        y->set_i64(i, u == Unsigned::kIdentity ? v : (v != 0 ? 1 : 0));
      }
      return Status::Ok();
    }
    for (int64_t i = 0; i < n; ++i) y->set_i64(i, fi(x.get_i64(i)));
    return Status::Ok();
  };
}

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

double round_half_even(double x) {
  if (!std::isfinite(x)) return x;
  double r = std::round(x);  // half away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5) r = 2.0 * std::round(x / 2.0);
  return r;
}

template <class T>
T clamp_value(T v, T lo, T hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

Status clip_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  DataType dt = x.dtype();
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, dt, x.shape()));
  int64_t n = x.numel();
  auto scalar_input = [&](size_t i, const char* what) -> Status {
    if (k.has_input(i) && k.input(i)->numel() != 1)
      return k.error(what, " must be a scalar, got ", shape_to_string(k.input(i)->shape()));
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(scalar_input(1, "min"));
  INGOT_RETURN_IF_ERROR(scalar_input(2, "max"));
  if (is_std_float(dt)) {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (k.opset() < 11) {
      lo = k.attrs().get_float("min", -std::numeric_limits<float>::max());
      hi = k.attrs().get_float("max", std::numeric_limits<float>::max());
    } else {
      if (k.has_input(1)) lo = k.input(1)->get_f64(0);
      if (k.has_input(2)) hi = k.input(2)->get_f64(0);
    }
    // numpy.clip semantics: min(max(x, lo), hi) (so lo > hi gives hi everywhere); NaN stays.
    for (int64_t i = 0; i < n; ++i) {
      double v = x.get_f64(i);
      if (!std::isnan(v)) v = std::min(std::max(v, lo), hi);
      y->set_f64(i, v);
    }
    return Status::Ok();
  }
  if (!is_integer(dt) || is_sub_byte(dt)) return k.unsupported_case("type ", data_type_name(dt));
  if (dt == DataType::kUInt64) {
    uint64_t lo = 0, hi = std::numeric_limits<uint64_t>::max();
    if (k.has_input(1)) lo = k.input(1)->data<uint64_t>()[0];
    if (k.has_input(2)) hi = k.input(2)->data<uint64_t>()[0];
    const uint64_t* px = x.data<uint64_t>();
    uint64_t* py = y->mutable_data<uint64_t>();
    for (int64_t i = 0; i < n; ++i) py[i] = std::min(std::max(px[i], lo), hi);
    return Status::Ok();
  }
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (k.has_input(1)) lo = k.input(1)->get_i64(0);
  if (k.has_input(2)) hi = k.input(2)->get_i64(0);
  for (int64_t i = 0; i < n; ++i) y->set_i64(i, std::min(std::max(x.get_i64(i), lo), hi));
  return Status::Ok();
}

Status prelu_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& s = *k.input(1);
  if (x.dtype() != s.dtype()) return k.error("X and slope types differ");
  auto b = ir::broadcast_shapes(x.shape(), s.shape());
  if (!b.ok() || *b != x.shape())
    return k.error("slope ", shape_to_string(s.shape()), " does not broadcast to ", shape_to_string(x.shape()));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, x.dtype(), x.shape()));
  int64_t n = x.numel();
  BroadcastIndexer is(x.shape(), s.shape());
  if (x.dtype() == DataType::kFloat32) {
    const float* px = x.data<float>();
    const float* ps = s.data<float>();
    float* py = y->mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) py[i] = px[i] < 0 ? px[i] * ps[is(i)] : px[i];
    return Status::Ok();
  }
  if (is_std_float(x.dtype())) {
    for (int64_t i = 0; i < n; ++i) {
      double v = x.get_f64(i);
      y->set_f64(i, v < 0 ? v * s.get_f64(is(i)) : v);
    }
    return Status::Ok();
  }
  if (!is_integer(x.dtype()) || is_sub_byte(x.dtype())) return k.unsupported_case("type ", data_type_name(x.dtype()));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = x.get_i64(i);
    y->set_i64(i, v < 0 ? static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(s.get_i64(is(i)))) : v);
  }
  return Status::Ok();
}

Status isnan_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (!is_float(x.dtype())) return k.unsupported_case("type ", data_type_name(x.dtype()));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, DataType::kBool, x.shape()));
  uint8_t* py = y->mutable_data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = std::isnan(x.get_f64(i)) ? 1 : 0;
  return Status::Ok();
}

Status isinf_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (!is_float(x.dtype())) return k.unsupported_case("type ", data_type_name(x.dtype()));
  bool neg = k.attrs().get_int("detect_negative", 1) != 0;
  bool pos = k.attrs().get_int("detect_positive", 1) != 0;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, DataType::kBool, x.shape()));
  uint8_t* py = y->mutable_data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.get_f64(i);
    py[i] = std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg)) ? 1 : 0;
  }
  return Status::Ok();
}

Status not_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.dtype() != DataType::kBool) return k.error("input must be bool, got ", data_type_name(x.dtype()));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, DataType::kBool, x.shape()));
  const uint8_t* px = x.data<uint8_t>();
  uint8_t* py = y->mutable_data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] ? 0 : 1;
  return Status::Ok();
}

Status bitwise_not_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  DataType dt = x.dtype();
  if (!is_integer(dt) || is_sub_byte(dt)) return k.unsupported_case("type ", data_type_name(dt));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, dt, x.shape()));
  // Complementing every byte complements the value, whatever the integer width.
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  uint8_t* py = static_cast<uint8_t*>(y->mutable_raw());
  for (size_t i = 0; i < x.nbytes(); ++i) py[i] = static_cast<uint8_t>(~px[i]);
  return Status::Ok();
}

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  using F = FloatFn;
  // ---- pure float math
  r.add("Sqrt", float_kernel(F([](double x) { return std::sqrt(x); })));
  r.add("Reciprocal", float_kernel(F([](double x) { return 1.0 / x; })));
  r.add("Exp", float_kernel(F([](double x) { return std::exp(x); })));
  r.add("Log", float_kernel(F([](double x) { return std::log(x); })));
  r.add("Erf", float_kernel(F([](double x) { return std::erf(x); })));
  r.add("Sin", float_kernel(F([](double x) { return std::sin(x); })));
  r.add("Cos", float_kernel(F([](double x) { return std::cos(x); })));
  r.add("Tan", float_kernel(F([](double x) { return std::tan(x); })));
  r.add("Asin", float_kernel(F([](double x) { return std::asin(x); })));
  r.add("Acos", float_kernel(F([](double x) { return std::acos(x); })));
  r.add("Atan", float_kernel(F([](double x) { return std::atan(x); })));
  r.add("Sinh", float_kernel(F([](double x) { return std::sinh(x); })));
  r.add("Cosh", float_kernel(F([](double x) { return std::cosh(x); })));
  r.add("Asinh", float_kernel(F([](double x) { return std::asinh(x); })));
  r.add("Acosh", float_kernel(F([](double x) { return std::acosh(x); })));
  r.add("Atanh", float_kernel(F([](double x) { return std::atanh(x); })));
  r.add("Tanh", float_kernel(F([](double x) { return std::tanh(x); })));
  r.add("Sigmoid", float_kernel(F(sigmoid)));
  r.add("Floor", float_kernel(F([](double x) { return std::floor(x); })));
  r.add("Ceil", float_kernel(F([](double x) { return std::ceil(x); })));
  r.add("Round", float_kernel(F(round_half_even)));
  r.add("Softplus", float_kernel(F(softplus)));
  r.add("Softsign", float_kernel(F([](double x) { return x / (1.0 + std::fabs(x)); })));
  r.add("Mish", float_kernel(F([](double x) { return x * std::tanh(softplus(x)); })));
  r.add("HardSwish", float_kernel(F([](double x) {
          return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
        })));

  // ---- activations with attributes (attributes are float32 in ONNX: widen as stored)
  r.add("HardSigmoid", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 0.2f), b = k.attrs().get_float("beta", 0.5f);
          return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
        })));
  r.add("LeakyRelu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 0.01f);
          return [a](double x) { return x < 0 ? a * x : x; };
        })));
  r.add("Elu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 1.0f);
          return [a](double x) { return x < 0 ? a * std::expm1(x) : x; };
        })));
  r.add("Selu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 1.67326319217681884765625f);
          double g = k.attrs().get_float("gamma", 1.05070102214813232421875f);
          return [a, g](double x) { return x > 0 ? g * x : g * (a * std::exp(x) - a); };
        })));
  r.add("Celu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 1.0f);
          return [a](double x) { return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a)); };
        })));
  r.add("ThresholdedRelu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 1.0f);
          return [a](double x) { return x > a ? x : 0.0; };
        })));
  r.add("Swish", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double a = k.attrs().get_float("alpha", 1.0f);
          return [a](double x) { return x * sigmoid(a * x); };
        })));
  r.add("Gelu", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          if (k.attrs().get_string("approximate", "none") == "tanh") {
            return [](double x) {
              const double c = 0.79788456080286535588;  // sqrt(2 / pi)
              return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
            };
          }
          return [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); };
        })));
  // Shrink accepts every numeric type; results of integer inputs are exact in double.
  r.add("Shrink", float_kernel(FloatFnFactory([](const KernelContext& k) -> F {
          double bias = k.attrs().get_float("bias", 0.0f), l = k.attrs().get_float("lambd", 0.5f);
          return [bias, l](double x) { return x < -l ? x + bias : (x > l ? x - bias : 0.0); };
        }), /*allow_int=*/true));

  // ---- defined on integers too
  r.add("Abs", int_or_float_kernel([](double x) { return std::fabs(x); },
                                   [](int64_t x) { return x < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(x)) : x; },
                                   Unsigned::kIdentity));
  r.add("Neg", int_or_float_kernel([](double x) { return -x; },
                                   [](int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }, Unsigned::kReject));
  r.add("Sign", int_or_float_kernel([](double x) { return std::isnan(x) ? x : (x > 0) - (x < 0); },
                                    [](int64_t x) -> int64_t { return (x > 0) - (x < 0); }, Unsigned::kSign));
  r.add("Relu", int_or_float_kernel([](double x) { return std::isnan(x) ? x : std::max(0.0, x); },
                                    [](int64_t x) { return std::max<int64_t>(0, x); }, Unsigned::kReject));

  r.add("Clip", clip_kernel);
  r.add("PRelu", prelu_kernel);
  r.add("IsNaN", isnan_kernel);
  r.add("IsInf", isinf_kernel);
  r.add("Not", not_kernel);
  r.add("BitwiseNot", bitwise_not_kernel);
}

}  // namespace ingot::cpu
