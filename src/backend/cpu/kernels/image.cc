// Copyright ingot authors. Apache-2.0.
//
// Resize and Upsample reference kernels. Resize is separable: each resized axis is handled
// by one 1-D pass in double, with per-output-position taps (source index, weight). Nearest
// mode instead gathers source elements directly, so it works for every dtype (strings too).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_image_sample_kernels(KernelRegistry& r);  // image_sample.cc

namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Ctm { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCrop, kTfHalfPixelNN };
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeParams {
  Mode mode = Mode::kNearest;
  Ctm ctm = Ctm::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::vector<int64_t> axes;    // resized axes, in processing order
  std::vector<double> scales;   // per dim (rank entries)
  Shape64 out_shape;            // per dim
  std::vector<double> roi;      // 2*rank entries (start..., end...) or empty
};

// Element i of a float32 tensor as the float it holds (keeps ONNX scales' float semantics).
double as_float(const Tensor& t, int64_t i) { return static_cast<double>(static_cast<float>(t.get_f64(i))); }

const Tensor* nonempty(const KernelContext& k, size_t i) {
  const Tensor* t = k.input(i);
  return (t && t->numel() > 0) ? t : nullptr;
}

// Axes, scales, output shape and roi from attributes and inputs. `scales_in`/`sizes_in`/
// `roi_in` may be null; `attr_scales` is Upsample-7's attribute.
Status resolve_geometry(KernelContext& k, const Shape64& in, const Tensor* roi_in, const Tensor* scales_in,
                        const Tensor* sizes_in, const std::vector<float>* attr_scales, ResizeParams& p) {
  const int64_t r = static_cast<int64_t>(in.size());
  p.axes.clear();
  if (k.attrs().has("axes")) {
    for (int64_t a : k.attrs().get_ints("axes")) {
      if (a < -r || a >= r) return k.error("axes value ", a, " out of range for rank ", r);
      p.axes.push_back(a < 0 ? a + r : a);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) p.axes.push_back(i);
  }
  const size_t na = p.axes.size();
  p.scales.assign(r, 1.0);
  p.out_shape = in;
  if (scales_in && sizes_in) return k.error("only one of 'scales' and 'sizes' may be given");
  if (attr_scales || scales_in) {
    std::vector<double> s;
    if (attr_scales) {
      for (float f : *attr_scales) s.push_back(f);
    } else {
      for (int64_t i = 0; i < scales_in->numel(); ++i) s.push_back(as_float(*scales_in, i));
    }
    if (s.size() != na) return k.error("scales has ", s.size(), " values, expected ", na);
    for (size_t i = 0; i < na; ++i) {
      if (!(s[i] > 0)) return k.error("scales must be positive, got ", s[i]);
      p.scales[p.axes[i]] = s[i];
      p.out_shape[p.axes[i]] = static_cast<int64_t>(std::floor(s[i] * static_cast<double>(in[p.axes[i]])));
    }
  } else if (sizes_in) {
    if (sizes_in->numel() != static_cast<int64_t>(na))
      return k.error("sizes has ", sizes_in->numel(), " values, expected ", na);
    std::string policy = k.attrs().get_string("keep_aspect_ratio_policy", "stretch");
    for (size_t i = 0; i < na; ++i) {
      int64_t sz = sizes_in->get_i64(static_cast<int64_t>(i));
      if (sz < 0) return k.error("sizes must be non-negative, got ", sz);
      if (in[p.axes[i]] == 0) return k.error("cannot resize an empty axis to size ", sz);
      p.out_shape[p.axes[i]] = sz;
      p.scales[p.axes[i]] = static_cast<double>(sz) / static_cast<double>(in[p.axes[i]]);
    }
    if (policy != "stretch") {
      double s = p.scales[p.axes[0]];
      for (int64_t a : p.axes) s = policy == "not_larger" ? std::min(s, p.scales[a]) : std::max(s, p.scales[a]);
      for (int64_t a : p.axes) {
        p.scales[a] = s;
        p.out_shape[a] = static_cast<int64_t>(s * static_cast<double>(in[a]) + 0.5);
      }
    }
  } else {
    return k.error("one of 'scales' and 'sizes' must be given");
  }
  p.roi.clear();
  if (roi_in && p.ctm == Ctm::kTfCrop) {
    if (roi_in->numel() != static_cast<int64_t>(2 * na))
      return k.error("roi has ", roi_in->numel(), " values, expected ", 2 * na);
    p.roi.assign(2 * r, 0.0);
    for (int64_t i = 0; i < r; ++i) p.roi[r + i] = 1.0;
    for (size_t i = 0; i < na; ++i) {
      p.roi[p.axes[i]] = as_float(*roi_in, static_cast<int64_t>(i));
      p.roi[r + p.axes[i]] = as_float(*roi_in, static_cast<int64_t>(na + i));
    }
  }
  return Status::Ok();
}

// Source coordinate of output position y along one axis. Sets `extrapolate` for
// tf_crop_and_resize positions outside the input.
double source_coord(const ResizeParams& p, double y, int64_t in_len, int64_t out_len, double scale, double roi0,
                    double roi1, bool& extrapolate) {
  extrapolate = false;
  const double in_w = static_cast<double>(in_len);
  const double out_w = scale * in_w;  // the fractional output width, as the spec defines it
  switch (p.ctm) {
    case Ctm::kAlignCorners:
      return out_w == 1 ? 0.0 : y * (in_w - 1) / (out_w - 1);
    case Ctm::kAsymmetric:
      return y / scale;
    case Ctm::kTfCrop: {
      // roi arithmetic in float like the float32 roi tensor.
      double extent = static_cast<float>(static_cast<float>(roi1) - static_cast<float>(roi0));
      double start = static_cast<float>(static_cast<float>(roi0) * static_cast<float>(in_len - 1));
      double x = out_w == 1 ? extent * (in_w - 1) / 2 : y * extent * (in_w - 1) / (out_w - 1);
      x = x + start;
      extrapolate = x < 0 || x > in_w - 1;
      return x;
    }
    case Ctm::kPytorchHalfPixel:
      return out_w == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case Ctm::kHalfPixel:
      return (y + 0.5) / scale - 0.5;
    case Ctm::kHalfPixelSymmetric: {
      double adjustment = static_cast<double>(out_len) / out_w;
      double center = in_w / 2;
      double offset = center * (1 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
    case Ctm::kTfHalfPixelNN:
      return (y + 0.5) / scale;
  }
  return 0.0;
}

double cubic_kernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Taps of one output position: source indexes (clamped into the input) and weights.
struct Taps {
  bool extrapolate = false;
  bool zero = false;  // nearest with exclude_outside picked a position outside the input
  std::vector<int64_t> idx;
  std::vector<double> w;
};

Taps compute_taps(const ResizeParams& p, int64_t y, int64_t in_len, int64_t out_len, double scale, double roi0,
                  double roi1) {
  Taps t;
  double x = source_coord(p, static_cast<double>(y), in_len, out_len, scale, roi0, roi1, t.extrapolate);
  // Prefer the pixel on the left of x: ratio in (0, 1].
  double fl = std::floor(x);
  int64_t base = static_cast<int64_t>(fl);
  double ratio = x - fl;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  if (p.mode == Mode::kNearest) {
    int64_t pick = base + 1;
    if (ratio != 1) {
      switch (p.nearest) {
        case NearestMode::kRoundPreferFloor: pick = ratio <= 0.5 ? base : base + 1; break;
        case NearestMode::kRoundPreferCeil: pick = ratio < 0.5 ? base : base + 1; break;
        case NearestMode::kFloor: pick = base; break;
        case NearestMode::kCeil: pick = base + 1; break;
        case NearestMode::kSimple: pick = scale < 1 ? base + 1 : base; break;
      }
    }
    // exclude_outside zeroes the weight of an outside pick, leaving nothing to renormalize.
    t.zero = p.exclude_outside && (pick < 0 || pick >= in_len);
    t.idx.push_back(std::min(std::max<int64_t>(pick, 0), in_len - 1));
    t.w.push_back(1.0);
    return t;
  }
  std::vector<double> coeffs;
  if (!p.antialias) {
    if (p.mode == Mode::kLinear) {
      coeffs = {1 - ratio, ratio};
    } else {
      coeffs = {cubic_kernel(ratio + 1, p.cubic_a), cubic_kernel(ratio, p.cubic_a), cubic_kernel(1 - ratio, p.cubic_a),
                cubic_kernel(2 - ratio, p.cubic_a)};
    }
  } else {
    double s = std::min(scale, 1.0);
    double support = p.mode == Mode::kLinear ? 1.0 : 2.0;
    int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1;
    int64_t n = 2 - 2 * start;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      double arg = (static_cast<double>(start + j) - ratio) * s;
      double c = p.mode == Mode::kLinear ? std::min(std::max(1 - std::fabs(arg), 0.0), 1.0) : cubic_kernel(arg, p.cubic_a);
      coeffs.push_back(c);
      sum += c;
    }
    for (double& c : coeffs) c /= sum;
  }
  const int64_t n = static_cast<int64_t>(coeffs.size());
  const int64_t first = base + 1 - n / 2;
  if (p.exclude_outside) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = first + j;
      if (i < 0 || i >= in_len) coeffs[j] = 0;
      sum += coeffs[j];
    }
    if (sum != 0)
      for (double& c : coeffs) c /= sum;
  }
  for (int64_t j = 0; j < n; ++j) {
    t.idx.push_back(std::min(std::max<int64_t>(first + j, 0), in_len - 1));
    t.w.push_back(coeffs[j]);
  }
  return t;
}

bool identity_axis(const ResizeParams& p, int64_t axis, int64_t in_len) {
  const int64_t r = static_cast<int64_t>(p.out_shape.size());
  if (std::fabs(p.scales[axis] - 1.0) > 1e-9 || p.out_shape[axis] != in_len) return false;
  if (!p.roi.empty() && (std::fabs(p.roi[axis]) > 1e-9 || std::fabs(p.roi[axis + r] - 1.0) > 1e-9)) return false;
  return true;
}

void store_rounded(Tensor& t, int64_t i, double v) {
  DataType dt = t.dtype();
  if (is_integer(dt)) {
    v = std::nearbyint(v);
    int bits = data_type_bits(dt);
    double lo = is_signed_integer(dt) ? -std::ldexp(1.0, bits - 1) : 0.0;
    double hi = is_signed_integer(dt) ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
    if (std::isnan(v)) v = 0;
    v = std::min(std::max(v, lo), hi);
    if (bits == 64) {
      if (v >= hi) { t.set_i64(i, is_signed_integer(dt) ? std::numeric_limits<int64_t>::max() : -1); return; }
    }
    t.set_i64(i, static_cast<int64_t>(v));
    return;
  }
  t.set_f64(i, v);
}

// Nearest: gather source elements (any dtype).
Status run_nearest(KernelContext& k, const Tensor& x, Tensor& y, const ResizeParams& p) {
  const Shape64& in = x.shape();
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<std::vector<int64_t>> src(r);  // per dim, per output position; -1 = extrapolate, -2 = zero
  for (int64_t d = 0; d < r; ++d) {
    src[d].resize(p.out_shape[d]);
    bool resized = false;
    for (int64_t a : p.axes) resized = resized || a == d;
    if (!resized || identity_axis(p, d, in[d])) {
      for (int64_t o = 0; o < p.out_shape[d]; ++o) src[d][o] = o;
      continue;
    }
    double r0 = p.roi.empty() ? 0.0 : p.roi[d], r1 = p.roi.empty() ? 1.0 : p.roi[d + r];
    for (int64_t o = 0; o < p.out_shape[d]; ++o) {
      Taps t = compute_taps(p, o, in[d], p.out_shape[d], p.scales[d], r0, r1);
      src[d][o] = t.extrapolate ? -1 : t.zero ? -2 : t.idx[0];
    }
  }
  const Shape64 in_strides = shape_strides(in);
  const int64_t total = y.numel();
  const bool is_str = x.dtype() == DataType::kString;
  const int bits = data_type_bits(x.dtype());
  const bool bytewise = !is_str && bits % 8 == 0;
  const size_t esize = bytewise ? static_cast<size_t>(bits / 8) : 0;
  Shape64 idx(r, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t s = 0;
    bool extrap = false, zero = false;
    for (int64_t d = 0; d < r; ++d) {
      int64_t v = src[d][idx[d]];
      if (v == -1) extrap = true;
      else if (v == -2) zero = true;
      else s += v * in_strides[d];
    }
    if (zero && !extrap) {
      if (!is_str) store_rounded(y, o, 0.0);
    } else if (extrap) {
      if (!is_str) store_rounded(y, o, p.extrapolation);
    } else if (is_str) {
      y.mutable_strings()[o] = x.strings()[s];
    } else if (bytewise) {
      std::memcpy(static_cast<uint8_t*>(y.mutable_raw()) + o * esize, static_cast<const uint8_t*>(x.raw()) + s * esize,
                  esize);
    } else if (is_integer(x.dtype())) {
      y.set_i64(o, x.get_i64(s));
    } else {
      y.set_f64(o, x.get_f64(s));
    }
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < p.out_shape[d]) break;
      idx[d] = 0;
    }
  }
  (void)k;
  return Status::Ok();
}

// Linear / cubic: separable passes in double.
Status run_interpolating(KernelContext& k, const Tensor& x, Tensor& y, const ResizeParams& p) {
  if (x.dtype() == DataType::kString || x.dtype() == DataType::kBool)
    return k.error("mode linear/cubic does not support dtype ", data_type_name(x.dtype()));
  const int64_t r = static_cast<int64_t>(x.rank());
  Shape64 shape = x.shape();
  std::vector<double> cur = x.to_f64_vector();
  for (int64_t d : p.axes) {
    const int64_t in_len = shape[d], out_len = p.out_shape[d];
    if (identity_axis(p, d, in_len)) continue;
    double r0 = p.roi.empty() ? 0.0 : p.roi[d], r1 = p.roi.empty() ? 1.0 : p.roi[d + r];
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= shape[i];
    for (int64_t i = d + 1; i < r; ++i) inner *= shape[i];
    std::vector<double> next(static_cast<size_t>(outer * out_len * inner), 0.0);
    if (in_len == 0 && out_len > 0) return k.error("cannot interpolate an empty axis");
    for (int64_t o = 0; o < out_len; ++o) {
      Taps t = compute_taps(p, o, in_len, out_len, p.scales[d], r0, r1);
      for (int64_t a = 0; a < outer; ++a) {
        double* dst = &next[static_cast<size_t>((a * out_len + o) * inner)];
        if (t.extrapolate) {
          for (int64_t b = 0; b < inner; ++b) dst[b] = p.extrapolation;
          continue;
        }
        const double* srcbase = &cur[static_cast<size_t>(a * in_len * inner)];
        for (size_t j = 0; j < t.idx.size(); ++j) {
          const double w = t.w[j];
          if (w == 0) continue;
          const double* s = srcbase + t.idx[j] * inner;
          for (int64_t b = 0; b < inner; ++b) dst[b] += w * s[b];
        }
      }
    }
    cur.swap(next);
    shape[d] = out_len;
  }
  for (int64_t i = 0; i < y.numel(); ++i) store_rounded(y, i, cur[static_cast<size_t>(i)]);
  return Status::Ok();
}

Status ensure_output(KernelContext& k, const Tensor& x, const ResizeParams& p) {
  Tensor& y = k.output(0);
  if (!y.defined() || y.shape() != p.out_shape) {
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(0, x.dtype(), p.out_shape));
    (void)t;
  }
  return Status::Ok();
}

Status run_resize(KernelContext& k, const Tensor& x, ResizeParams& p) {
  INGOT_RETURN_IF_ERROR(ensure_output(k, x, p));
  Tensor& y = k.output(0);
  if (y.numel() == 0) return Status::Ok();
  if (x.numel() == 0) return k.error("cannot resize an empty input to a non-empty output");
  if (p.mode == Mode::kNearest) return run_nearest(k, x, y, p);
  return run_interpolating(k, x, y, p);
}

Status resize_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const auto& a = k.attrs();
  ResizeParams p;
  std::string mode = a.get_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::kNearest;
  else if (mode == "linear") p.mode = Mode::kLinear;
  else if (mode == "cubic" && k.opset() >= 11) p.mode = Mode::kCubic;
  else return k.error("unsupported mode '", mode, "'");
  if (k.opset() < 11) {
    p.ctm = Ctm::kAsymmetric;
    p.nearest = NearestMode::kSimple;
    INGOT_RETURN_IF_ERROR(resolve_geometry(k, x.shape(), nullptr, nonempty(k, 1), nullptr, nullptr, p));
    return run_resize(k, x, p);
  }
  std::string ctm = a.get_string("coordinate_transformation_mode", "half_pixel");
  if (ctm == "half_pixel") p.ctm = Ctm::kHalfPixel;
  else if (ctm == "half_pixel_symmetric") p.ctm = Ctm::kHalfPixelSymmetric;
  else if (ctm == "pytorch_half_pixel") p.ctm = Ctm::kPytorchHalfPixel;
  else if (ctm == "align_corners") p.ctm = Ctm::kAlignCorners;
  else if (ctm == "asymmetric") p.ctm = Ctm::kAsymmetric;
  else if (ctm == "tf_crop_and_resize") p.ctm = Ctm::kTfCrop;
  else if (ctm == "tf_half_pixel_for_nn") p.ctm = Ctm::kTfHalfPixelNN;
  else return k.error("unsupported coordinate_transformation_mode '", ctm, "'");
  std::string nm = a.get_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") p.nearest = NearestMode::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil") p.nearest = NearestMode::kRoundPreferCeil;
  else if (nm == "floor") p.nearest = NearestMode::kFloor;
  else if (nm == "ceil") p.nearest = NearestMode::kCeil;
  else return k.error("unsupported nearest_mode '", nm, "'");
  p.cubic_a = a.get_float("cubic_coeff_a", -0.75f);
  p.exclude_outside = a.get_int("exclude_outside", 0) != 0;
  p.antialias = a.get_int("antialias", 0) != 0;
  p.extrapolation = a.get_float("extrapolation_value", 0.0f);
  const Tensor* roi = nonempty(k, 1);
  if (p.ctm == Ctm::kTfCrop && !roi) return k.error("tf_crop_and_resize needs a non-empty 'roi' input");
  INGOT_RETURN_IF_ERROR(resolve_geometry(k, x.shape(), roi, nonempty(k, 2), nonempty(k, 3), nullptr, p));
  return run_resize(k, x, p);
}

Status upsample_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  ResizeParams p;
  std::string mode = k.attrs().get_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = Mode::kLinear;
  else return k.error("unsupported mode '", mode, "'");
  p.ctm = Ctm::kAsymmetric;
  p.nearest = NearestMode::kSimple;
  if (k.attrs().has("scales")) {
    std::vector<float> s = k.attrs().get_floats("scales");
    INGOT_RETURN_IF_ERROR(resolve_geometry(k, x.shape(), nullptr, nullptr, nullptr, &s, p));
  } else {
    if (!k.has_input(1)) return k.error("Upsample needs 'scales' (attribute or input)");
    INGOT_RETURN_IF_ERROR(resolve_geometry(k, x.shape(), nullptr, k.input(1), nullptr, nullptr, p));
  }
  for (double s : p.scales)
    if (s < 1) return k.error("Upsample scales must be >= 1, got ", s);
  return run_resize(k, x, p);
}

}  // namespace

void register_image_kernels(KernelRegistry& r) {
  r.add("Resize", resize_kernel);
  r.add("Upsample", upsample_kernel);
  register_image_sample_kernels(r);
}

}  // namespace ingot::cpu
