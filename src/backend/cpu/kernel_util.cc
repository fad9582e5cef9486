// Copyright ingot authors. Apache-2.0.
#include "backend/cpu/kernel_util.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace ingot::cpu {

BroadcastIndexer::BroadcastIndexer(const Shape64& out_shape, const Shape64& in_shape) {
  identity_ = out_shape == in_shape;
  out_strides_ = shape_strides(out_shape);
  in_strides_.assign(out_shape.size(), 0);
  Shape64 in_strides = shape_strides(in_shape);
  size_t offset = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i)
    in_strides_[offset + i] = in_shape[i] == 1 ? 0 : in_strides[i];
}

int64_t BroadcastIndexer::operator()(int64_t out_index) const {
  if (identity_) return out_index;
  int64_t in = 0;
  for (size_t d = 0; d < out_strides_.size(); ++d) {
    int64_t q = out_index / out_strides_[d];
    out_index -= q * out_strides_[d];
    in += q * in_strides_[d];
  }
  return in;
}

Shape64 unravel_index(int64_t flat, const Shape64& shape) {
  Shape64 idx(shape.size(), 0);
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 0) continue;
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t ravel_index(const Shape64& idx, const Shape64& strides) {
  int64_t f = 0;
  for (size_t d = 0; d < idx.size(); ++d) f += idx[d] * strides[d];
  return f;
}

std::vector<int64_t> tensor_to_i64(const Tensor& t) { return t.to_i64_vector(); }
std::vector<double> tensor_to_f64(const Tensor& t) { return t.to_f64_vector(); }

namespace {
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

double apply_activation(const std::string& act, const std::vector<float>& p, double x) {
  if (act.empty()) return x;
  if (act == "Relu") return std::isnan(x) ? x : std::max(0.0, x);
  if (act == "Clip") return std::isnan(x) ? x : std::min<double>(std::max<double>(x, p[0]), p[1]);
  if (act == "LeakyRelu") return x < 0 ? p[0] * x : x;
  if (act == "Sigmoid") return sigmoid(x);
  if (act == "Tanh") return std::tanh(x);
  if (act == "HardSwish") return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
  if (act == "HardSigmoid") return std::max(0.0, std::min(1.0, double(p[0]) * x + p[1]));
  if (act == "Gelu") return gelu(x);
  if (act == "GeluTanh") return gelu_tanh(x);
  if (act == "Silu") return x * sigmoid(x);
  return x;
}

bool int_range(DataType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case DataType::kUInt8: *lo = 0; *hi = 255; return true;
    case DataType::kInt8: *lo = -128; *hi = 127; return true;
    case DataType::kUInt16: *lo = 0; *hi = 65535; return true;
    case DataType::kInt16: *lo = -32768; *hi = 32767; return true;
    case DataType::kUInt32: *lo = 0; *hi = 4294967295LL; return true;
    case DataType::kInt32: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); return true;
    case DataType::kUInt4: *lo = 0; *hi = 15; return true;
    case DataType::kInt4: *lo = -8; *hi = 7; return true;
    case DataType::kUInt2: *lo = 0; *hi = 3; return true;
    case DataType::kInt2: *lo = -2; *hi = 1; return true;
    default: return false;
  }
}

void store_quantized(Tensor& y, int64_t i, double v, bool saturate) {
  DataType t = y.dtype();
  int64_t lo, hi;
  if (int_range(t, &lo, &hi)) {
    double r;
    if (std::isnan(v)) r = 0;
    else r = std::nearbyint(std::min(std::max(v, static_cast<double>(lo)), static_cast<double>(hi)));
    y.set_i64(i, static_cast<int64_t>(r));
    return;
  }
  if (is_float8(t) || t == DataType::kFloat4E2M1) {
    // v is representable in float here (a float/half quotient), so one rounding happens.
    uint8_t b = float_to_small_float(static_cast<float>(v), t, saturate || t == DataType::kFloat4E2M1);
    if (t == DataType::kFloat4E2M1) {
      uint8_t* d = y.mutable_data<uint8_t>();
      int shift = static_cast<int>(i & 1) * 4;
      d[i / 2] = static_cast<uint8_t>((d[i / 2] & ~(0xf << shift)) | ((b & 0xf) << shift));
    } else {
      y.mutable_data<uint8_t>()[i] = b;
    }
    return;
  }
  y.set_f64(i, v);
}

}  // namespace ingot::cpu
