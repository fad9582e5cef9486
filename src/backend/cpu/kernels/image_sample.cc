// Copyright ingot authors. Apache-2.0.
//
// GridSample, AffineGrid and RoiAlign reference kernels.
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_image_sample_kernels(KernelRegistry& r);

namespace {

// ---------------------------------------------------------------- GridSample

enum class GsMode { kLinear, kNearest, kCubic };
enum class GsPad { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by bouncing off the borders.
double gs_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    double n = std::floor(dx / rng);
    double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    double n = std::floor(dx / rng);
    double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys cubic convolution weights (A = -0.75) for taps x0-1..x0+2 at fraction t.
void gs_cubic_coeffs(double t, double c[4]) {
  const double a = -0.75;
  auto k1 = [&](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto k2 = [&](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  c[0] = k2(t + 1);
  c[1] = k1(t);
  c[2] = k1(1 - t);
  c[3] = k2(2 - t);
}

Status grid_sample_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& grid = *k.input(1);
  const auto& a = k.attrs();
  std::string ms = a.get_string("mode", k.opset() < 20 ? "bilinear" : "linear");
  GsMode mode;
  if (ms == "linear" || ms == "bilinear") mode = GsMode::kLinear;
  else if (ms == "nearest") mode = GsMode::kNearest;
  else if (ms == "cubic" || ms == "bicubic") mode = GsMode::kCubic;
  else return k.error("unsupported mode '", ms, "'");
  std::string ps = a.get_string("padding_mode", "zeros");
  GsPad pad;
  if (ps == "zeros") pad = GsPad::kZeros;
  else if (ps == "border") pad = GsPad::kBorder;
  else if (ps == "reflection") pad = GsPad::kReflection;
  else return k.error("unsupported padding_mode '", ps, "'");
  const bool align = a.get_int("align_corners", 0) != 0;

  const int64_t r = static_cast<int64_t>(x.rank());
  if (r < 3 || static_cast<int64_t>(grid.rank()) != r) return k.error("X and grid must have the same rank >= 3");
  const int64_t nd = r - 2;
  if (grid.dim(r - 1) != nd) return k.error("grid's last dim must be ", nd);
  if (grid.dim(0) != x.dim(0)) return k.error("grid batch ", grid.dim(0), " differs from X batch ", x.dim(0));
  const int64_t N = x.dim(0), C = x.dim(1);
  Shape64 in_sp(x.shape().begin() + 2, x.shape().end());
  Shape64 out_shape = {N, C};
  for (int64_t i = 1; i < r - 1; ++i) out_shape.push_back(grid.dim(i));
  Tensor& y = k.output(0);
  if (!y.defined() || y.shape() != out_shape) {
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(0, x.dtype(), out_shape));
    (void)t;
  }
  const int64_t in_sp_n = shape_numel(in_sp);
  const int64_t out_sp_n = shape_numel(Shape64(out_shape.begin() + 2, out_shape.end()));
  if (y.numel() == 0) return Status::Ok();
  const Shape64 in_strides = shape_strides(in_sp);
  std::vector<double> lo(nd), hi(nd);
  for (int64_t i = 0; i < nd; ++i) {
    lo[i] = align ? 0.0 : -0.5;
    hi[i] = align ? static_cast<double>(in_sp[i]) - 1 : static_cast<double>(in_sp[i]) - 0.5;
  }
  std::vector<double> xv = x.to_f64_vector();
  // Source index along dim i after padding; -1 means "zero".
  auto fetch_index = [&](int64_t i, int64_t idx) -> int64_t {
    const int64_t d = in_sp[i];
    switch (pad) {
      case GsPad::kZeros: return (idx >= 0 && idx < d) ? idx : -1;
      case GsPad::kBorder: return std::min(std::max<int64_t>(idx, 0), d - 1);
      case GsPad::kReflection: {
        int64_t v = static_cast<int64_t>(gs_reflect(static_cast<double>(idx), lo[i], hi[i]));
        return std::min(std::max<int64_t>(v, 0), d - 1);
      }
    }
    return -1;
  };
  const int taps = mode == GsMode::kNearest ? 1 : mode == GsMode::kLinear ? 2 : 4;
  std::vector<std::vector<int64_t>> tap_idx(nd, std::vector<int64_t>(taps));
  std::vector<std::vector<double>> tap_w(nd, std::vector<double>(taps));
  std::vector<double> acc(C);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < out_sp_n; ++o) {
      for (int64_t i = 0; i < nd; ++i) {
        // grid's last axis lists coordinates innermost dim first (x, y, z).
        float g = static_cast<float>(grid.get_f64((n * out_sp_n + o) * nd + (nd - 1 - i)));
        float len = static_cast<float>(in_sp[i]);
        float c = align ? (g + 1.0f) / 2.0f * (len - 1.0f) : ((g + 1.0f) * len - 1.0f) / 2.0f;
        if (mode == GsMode::kNearest) c = std::nearbyint(c);
        if (c < lo[i] || c > hi[i]) {
          if (pad == GsPad::kBorder) c = std::min(std::max(c, 0.0f), len - 1.0f);
          else if (pad == GsPad::kReflection) c = static_cast<float>(gs_reflect(c, lo[i], hi[i]));
        }
        if (mode == GsMode::kNearest) {
          tap_idx[i][0] = fetch_index(i, static_cast<int64_t>(c));
          tap_w[i][0] = 1.0;
        } else {
          double x0 = std::floor(static_cast<double>(c));
          double t = static_cast<double>(c) - x0;
          int64_t i0 = static_cast<int64_t>(x0);
          if (mode == GsMode::kLinear) {
            tap_w[i][0] = 1 - t;
            tap_w[i][1] = t;
            tap_idx[i][0] = fetch_index(i, i0);
            tap_idx[i][1] = fetch_index(i, i0 + 1);
          } else {
            double cc[4];
            gs_cubic_coeffs(t, cc);
            for (int j = 0; j < 4; ++j) {
              tap_w[i][j] = cc[j];
              tap_idx[i][j] = fetch_index(i, i0 - 1 + j);
            }
          }
        }
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      // Every combination of taps across the spatial dims.
      int64_t combos = 1;
      for (int64_t i = 0; i < nd; ++i) combos *= taps;
      for (int64_t cmb = 0; cmb < combos; ++cmb) {
        int64_t rem = cmb, off = 0;
        double w = 1.0;
        bool zero = false;
        for (int64_t i = nd - 1; i >= 0; --i) {
          int j = static_cast<int>(rem % taps);
          rem /= taps;
          if (tap_idx[i][j] < 0) zero = true;
          else off += tap_idx[i][j] * in_strides[i];
          w *= tap_w[i][j];
        }
        if (zero || w == 0) continue;
        for (int64_t ch = 0; ch < C; ++ch) acc[ch] += w * xv[static_cast<size_t>((n * C + ch) * in_sp_n + off)];
      }
      for (int64_t ch = 0; ch < C; ++ch) y.set_f64((n * C + ch) * out_sp_n + o, acc[ch]);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- AffineGrid

Status affine_grid_kernel(KernelContext& k) {
  const Tensor& theta = *k.input(0);
  const Tensor& size_t_ = *k.input(1);
  const bool align = k.attrs().get_int("align_corners", 0) != 0;
  std::vector<int64_t> size = tensor_to_i64(size_t_);
  if (size.size() != 4 && size.size() != 5) return k.error("size must have 4 or 5 values");
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;
  if (theta.rank() != 3 || theta.dim(1) != nd || theta.dim(2) != nd + 1)
    return k.error("theta must be [N,", nd, ",", nd + 1, "] for size of ", size.size(), " values");
  const int64_t N = size[0];
  if (theta.dim(0) != N) return k.error("theta batch ", theta.dim(0), " differs from size[0]=", N);
  for (int64_t v : size)
    if (v < 0) return k.error("size values must be non-negative");
  Shape64 out_shape = {N};
  for (int64_t i = 2; i < static_cast<int64_t>(size.size()); ++i) out_shape.push_back(size[i]);
  out_shape.push_back(nd);
  Tensor& y = k.output(0);
  if (!y.defined() || y.shape() != out_shape) {
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(0, theta.dtype(), out_shape));
    (void)t;
  }
  // Base coordinates along each spatial dim (in [-1, 1]).
  std::vector<std::vector<double>> base(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t L = size[2 + i];
    for (int64_t j = 0; j < L; ++j) {
      double v;
      if (align) v = L == 1 ? -1.0 : -1.0 + static_cast<double>(j) * (2.0 / static_cast<double>(L - 1));
      else v = -1.0 + (2.0 / static_cast<double>(L)) / 2 + static_cast<double>(j) * (2.0 / static_cast<double>(L));
      base[i].push_back(v);
    }
  }
  Shape64 sp(size.begin() + 2, size.end());
  const int64_t sp_n = shape_numel(sp);
  std::vector<double> th = theta.to_f64_vector();
  std::vector<double> h(nd + 1);
  for (int64_t n = 0; n < N; ++n) {
    Shape64 idx(nd, 0);
    for (int64_t p = 0; p < sp_n; ++p) {
      // Homogeneous point: innermost dim's coordinate first (x, y, z, 1).
      for (int64_t i = 0; i < nd; ++i) h[i] = base[nd - 1 - i][idx[nd - 1 - i]];
      h[nd] = 1.0;
      for (int64_t row = 0; row < nd; ++row) {
        double s = 0;
        for (int64_t col = 0; col <= nd; ++col) s += th[static_cast<size_t>((n * nd + row) * (nd + 1) + col)] * h[col];
        y.set_f64((n * sp_n + p) * nd + row, s);
      }
      for (int64_t d = nd - 1; d >= 0; --d) {
        if (++idx[d] < sp[d]) break;
        idx[d] = 0;
      }
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- RoiAlign

Status roi_align_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& rois = *k.input(1);
  const Tensor& bidx = *k.input(2);
  const auto& a = k.attrs();
  std::string mode = a.get_string("mode", "avg");
  if (mode != "avg" && mode != "max") return k.error("unsupported mode '", mode, "'");
  const bool is_max = mode == "max";
  std::string ctm = k.opset() >= 16 ? a.get_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return k.error("unsupported coordinate_transformation_mode '", ctm, "'");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t oh = a.get_int("output_height", 1), ow = a.get_int("output_width", 1);
  const int64_t sampling_ratio = a.get_int("sampling_ratio", 0);
  const double spatial_scale = a.get_float("spatial_scale", 1.0f);
  if (x.rank() != 4) return k.error("X must have rank 4");
  if (rois.rank() != 2 || rois.dim(1) != 4) return k.error("rois must be [num_rois, 4]");
  if (bidx.rank() != 1 || bidx.dim(0) != rois.dim(0)) return k.error("batch_indices must be [num_rois]");
  if (oh < 1 || ow < 1) return k.error("output_height/output_width must be >= 1");
  if (sampling_ratio < 0) return k.error("sampling_ratio must be >= 0");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  if ((H == 0 || W == 0) && R > 0 && C > 0) return k.error("X has an empty spatial dim");
  Shape64 out_shape = {R, C, oh, ow};
  Tensor& y = k.output(0);
  if (!y.defined() || y.shape() != out_shape) {
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(0, x.dtype(), out_shape));
    (void)t;
  }
  std::vector<double> xv = x.to_f64_vector();
  struct Sample {
    int64_t pos[4];
    double w[4];
  };
  for (int64_t n = 0; n < R; ++n) {
    int64_t b = bidx.get_i64(n);
    if (b < 0 || b >= N) return k.error("batch index ", b, " out of range [0, ", N, ")");
    const double offset = half_pixel ? 0.5 : 0.0;
    double sw = rois.get_f64(n * 4 + 0) * spatial_scale - offset;
    double sh = rois.get_f64(n * 4 + 1) * spatial_scale - offset;
    double ew = rois.get_f64(n * 4 + 2) * spatial_scale - offset;
    double eh = rois.get_f64(n * 4 + 3) * spatial_scale - offset;
    double rw = ew - sw, rh = eh - sh;
    if (!half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const int64_t gh = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
    const int64_t gw = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ph = 0; ph < oh; ++ph) {
      for (int64_t pw = 0; pw < ow; ++pw) {
        std::vector<Sample> samples;
        for (int64_t iy = 0; iy < gh; ++iy) {
          double yy = sh + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            double xx = sw + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (!(yy < -1.0 || yy > static_cast<double>(H) || xx < -1.0 || xx > static_cast<double>(W))) {
              double yv = std::max(yy, 0.0), xv2 = std::max(xx, 0.0);
              int64_t yl = static_cast<int64_t>(yv), xl = static_cast<int64_t>(xv2), yh2, xh;
              if (yl >= H - 1) { yh2 = yl = H - 1; yv = static_cast<double>(yl); } else { yh2 = yl + 1; }
              if (xl >= W - 1) { xh = xl = W - 1; xv2 = static_cast<double>(xl); } else { xh = xl + 1; }
              double ly = yv - static_cast<double>(yl), lx = xv2 - static_cast<double>(xl);
              double hy = 1.0 - ly, hx = 1.0 - lx;
              s = Sample{{yl * W + xl, yl * W + xh, yh2 * W + xl, yh2 * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            }
            samples.push_back(s);
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          const double* img = &xv[static_cast<size_t>((b * C + c) * H * W)];
          double out = 0;
          bool first = true;
          for (const Sample& s : samples) {
            if (!is_max) {
              out += s.w[0] * img[s.pos[0]] + s.w[1] * img[s.pos[1]] + s.w[2] * img[s.pos[2]] + s.w[3] * img[s.pos[3]];
            } else {
              double v = std::max(std::max(s.w[0] * img[s.pos[0]], s.w[1] * img[s.pos[1]]),
                                  std::max(s.w[2] * img[s.pos[2]], s.w[3] * img[s.pos[3]]));
              out = first ? v : std::max(out, v);
              first = false;
            }
          }
          if (!is_max) out /= count;
          y.set_f64(((n * C + c) * oh + ph) * ow + pw, out);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void register_image_sample_kernels(KernelRegistry& r) {
  r.add("GridSample", grid_sample_kernel);
  r.add("AffineGrid", affine_grid_kernel);
  r.add("RoiAlign", roi_align_kernel);
}

}  // namespace ingot::cpu
