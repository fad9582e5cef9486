// Copyright ingot authors. Apache-2.0.
#include "finite_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>

namespace ingot::tools {

namespace {

// |x| of a finite fp16 value from its bits (exponent 31 is Inf/NaN, handled by the caller).
double half_magnitude(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(m | 0x400, e - 25);
}

// Walks n elements: value(i) gives one as double (NaN/Inf where the element is), so every dtype
// shares the counting.
template <class ValueAt>
void scan_values(int64_t n, int64_t per_row, ValueAt value, NonFinite* r) {
  int64_t last_row = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double v = value(i);
    if (std::isfinite(v)) {
      r->max_abs = std::max(r->max_abs, std::fabs(v));
      continue;
    }
    if (std::isnan(v))
      ++r->nan;
    else
      ++r->inf;
    const int64_t row = per_row > 0 ? i / per_row : -1;
    if (row >= 0 && row != last_row) r->bad_rows.push_back(row), last_row = row;
  }
}

}  // namespace

NonFinite scan_non_finite(DataType dtype, const std::vector<int64_t>& shape, const void* data) {
  NonFinite r;
  r.numel = 1;
  for (int64_t d : shape) r.numel *= d;
  if (!data || r.numel <= 0) {
    r.numel = std::max<int64_t>(r.numel, 0);
    return r;
  }
  r.rows = shape.empty() ? 0 : shape[0];
  const int64_t per_row = r.rows > 0 ? r.numel / r.rows : 0;
  // In place, by dtype: fp16 and bf16 from their bits (no copy, no per-element tensor view).
  switch (dtype) {
    case DataType::kFloat32: {
      const float* p = static_cast<const float*>(data);
      scan_values(
          r.numel, per_row, [p](int64_t i) { return static_cast<double>(p[i]); }, &r);
      break;
    }
    case DataType::kFloat64: {
      const double* p = static_cast<const double*>(data);
      scan_values(
          r.numel, per_row, [p](int64_t i) { return p[i]; }, &r);
      break;
    }
    case DataType::kFloat16: {
      const uint16_t* p = static_cast<const uint16_t*>(data);
      scan_values(
          r.numel, per_row,
          [p](int64_t i) {
            const uint16_t h = p[i];
            if ((h & 0x7c00) == 0x7c00)
              return (h & 0x3ff) ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
            return half_magnitude(h);  // the sign does not matter to |x|
          },
          &r);
      break;
    }
    case DataType::kBFloat16: {
      const uint16_t* p = static_cast<const uint16_t*>(data);
      scan_values(
          r.numel, per_row,
          [p](int64_t i) {
            const uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
            float f;
            std::memcpy(&f, &bits, sizeof f);
            return static_cast<double>(f);
          },
          &r);
      break;
    }
    default:
      r.rows = 0;  // integer, bool and string tensors are always finite
      break;
  }
  return r;
}

NonFinite scan_non_finite(const HostTensor& t) {
  if (t.dtype == DataType::kString) {
    NonFinite r;
    r.numel = t.numel();
    return r;
  }
  return scan_non_finite(t.dtype, t.shape, t.data.empty() ? nullptr : t.data.data());
}

std::string index_ranges(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(v[i]);
    if (j > i) s += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return s;
}

void FiniteScan::on_tensor(int layer_index, const char* tensor_name, DataType dtype, const std::vector<int64_t>& dims,
                           const void* data) noexcept {
  try {
    ++seen_;
    if (dtype == DataType::kString) return;
    // The listener's host buffer is scanned where it lies (it lives for the callback).
    NonFinite f = scan_non_finite(dtype, dims, data);
    const std::string name = tensor_name ? tensor_name : "";
    if (f.numel > 0) max_abs_[name] = f.max_abs;
    if (f.any()) hits_.push_back({layer_index, name, dims, std::move(f)});
  } catch (...) {
    incomplete_ = true;  // out of memory: said in the report rather than thrown through the engine
  }
}

namespace {
// What fed the first bad step: inputs near fp16's limit mean overflow, small ones a wrong kernel.
void print_first_inputs(const FiniteScan& scan, const std::vector<LayerDesc>& layers, int step, std::ostream& os) {
  if (step < 0 || static_cast<size_t>(step) >= layers.size()) return;
  os << "  inputs of step " << step << " (largest finite |x|):";
  int named = 0;
  std::vector<std::string> said;
  for (const std::string& in : layers[step].inputs) {
    auto it = scan.max_abs().find(in);
    // An engine input or a weight is not seen by the listener; Mul(s, s) names s once.
    if (it == scan.max_abs().end() || std::find(said.begin(), said.end(), in) != said.end()) continue;
    char v[32];
    std::snprintf(v, sizeof v, "%.4g", it->second);
    os << " " << in << " " << v;
    said.push_back(in);
    ++named;
  }
  if (named == 0) os << " none recorded (engine inputs or weights)";
  os << "\n";
}
}  // namespace

void print_finite_report(const FiniteScan& scan, const Engine& engine, int max_steps, std::ostream& os) {
  const auto& layers = engine.layers();
  os << "non-finite check (every step's outputs, one run):";
  if (scan.incomplete()) os << " INCOMPLETE (a tensor could not be copied to the host)";
  if (scan.hits().empty()) {
    os << " all " << scan.tensors_seen() << " tensors of " << layers.size() << " steps are finite\n";
    return;
  }
  os << " " << scan.hits().size() << " of " << scan.tensors_seen() << " tensors hold NaN or Inf; the first at step "
     << scan.hits().front().step << "\n";
  int shown = 0;
  for (const FiniteScan::Hit& h : scan.hits()) {
    if (shown++ == max_steps) {
      os << "  ... " << scan.hits().size() - static_cast<size_t>(max_steps) << " more\n";
      break;
    }
    const LayerDesc* l = h.step >= 0 && static_cast<size_t>(h.step) < layers.size() ? &layers[h.step] : nullptr;
    os << "  step " << h.step << "  " << (l ? l->op + " '" + l->name + "'  tactic " + l->tactic : "?") << "  -> "
       << h.tensor << " [";
    for (size_t i = 0; i < h.dims.size(); ++i) os << (i ? "," : "") << h.dims[i];
    os << "]: " << h.found.nan << " NaN, " << h.found.inf << " Inf of " << h.found.numel;
    if (h.found.rows > 0)
      os << "; rows " << index_ranges(h.found.bad_rows) << " (" << h.found.bad_rows.size() << " of " << h.found.rows
         << ")";
    os << "\n";
    if (shown == 1) print_first_inputs(scan, layers, h.step, os);
  }
}

}  // namespace ingot::tools
