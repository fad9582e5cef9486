// Copyright ingot authors. Apache-2.0.
//
// Image ops: Resize, Upsample, GridSample, AffineGrid, RoiAlign (schemas and inference).
#include <cmath>
#include <string>
#include <vector>

#include "ir/ops/all_ops.h"

namespace ingot::ir {
namespace {

bool value_present(const InferenceContext& c, size_t i) {
  return c.has_input(i);
}

// Known and non-empty constant input value, else nullptr.
const Tensor* nonempty_value(const InferenceContext& c, size_t i) {
  if (!c.has_input(i)) return nullptr;
  const Tensor* t = c.input_value(i);
  if (t && t->numel() == 0) return nullptr;
  return t;
}

// True when input i is present and not known to be empty (a real scales/sizes input).
bool maybe_nonempty(const InferenceContext& c, size_t i) {
  if (!c.has_input(i)) return false;
  const Tensor* t = c.input_value(i);
  if (t) return t->numel() != 0;
  const Shape& s = c.input_shape(i);
  if (s.rank_known() && s.rank() == 1 && s[0].is_known() && s[0].value() == 0) return false;
  return true;
}

// Shared by Resize (all opsets) and Upsample: output shape from X's shape plus scales or sizes.
// `scales_idx` / `sizes_idx` are input positions (-1 when the opset has no such input);
// `attr_scales` is Upsample-7's attribute.
Status infer_resize_like(InferenceContext& c, int scales_idx, int sizes_idx, const std::vector<float>* attr_scales) {
  DataType dt = c.input_dtype(0);
  const Shape& xs = c.input_shape(0);
  if (!xs.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(xs.rank());
  std::vector<int64_t> axes;
  bool axes_given = c.attrs().has("axes");
  if (axes_given) {
    for (int64_t a : c.attrs().get_ints("axes")) {
      auto na = normalize_axis(a, r);
      if (!na.ok()) return c.error("axes value ", a, " out of range for rank ", r);
      for (int64_t b : axes)
        if (b == na.value()) return c.error("axes has duplicate value ", a);
      axes.push_back(na.value());
    }
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  std::vector<Dim> out = xs.dims();
  for (int64_t a : axes) out[a] = Dim::unknown();

  bool has_scales = attr_scales != nullptr || (scales_idx >= 0 && maybe_nonempty(c, scales_idx));
  bool has_sizes = sizes_idx >= 0 && maybe_nonempty(c, sizes_idx);
  if (has_scales && has_sizes) return c.error("only one of 'scales' and 'sizes' may be given");
  if (!has_scales && !has_sizes) {
    if (scales_idx >= 0 && value_present(c, scales_idx) && !c.input_value(scales_idx)) {
      // Unknown-size scales input: nothing more to know.
      c.set_output(0, dt, Shape(out));
      return Status::Ok();
    }
    return c.error("one of 'scales' and 'sizes' must be given");
  }
  if (has_scales) {
    std::vector<double> scales;
    if (attr_scales) {
      for (float f : *attr_scales) scales.push_back(f);
    } else if (const Tensor* t = nonempty_value(c, scales_idx)) {
      for (int64_t i = 0; i < t->numel(); ++i) scales.push_back(static_cast<float>(t->get_f64(i)));
    } else {
      c.set_output(0, dt, Shape(out));
      return Status::Ok();
    }
    if (scales.size() != axes.size())
      return c.error("scales has ", scales.size(), " values, expected ", axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!(scales[i] > 0)) return c.error("scales must be positive, got ", scales[i]);
      const Dim& d = xs[axes[i]];
      if (scales[i] == 1.0) out[axes[i]] = d;  // keeps symbols
      else if (d.is_known()) out[axes[i]] = Dim(static_cast<int64_t>(std::floor(scales[i] * static_cast<double>(d.value()))));
    }
    c.set_output(0, dt, Shape(out));
    return Status::Ok();
  }
  const Tensor* st = nonempty_value(c, sizes_idx);
  if (!st) {
    c.set_output(0, dt, Shape(out));
    return Status::Ok();
  }
  if (st->numel() != static_cast<int64_t>(axes.size()))
    return c.error("sizes has ", st->numel(), " values, expected ", axes.size());
  std::string policy = c.attrs().get_string("keep_aspect_ratio_policy", "stretch");
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < st->numel(); ++i) {
    sizes.push_back(st->get_i64(i));
    if (sizes.back() < 0) return c.error("sizes must be non-negative, got ", sizes.back());
  }
  if (policy == "stretch") {
    for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = Dim(sizes[i]);
  } else if (policy == "not_larger" || policy == "not_smaller") {
    bool all_known = true;
    for (int64_t a : axes) all_known = all_known && xs[a].is_known();
    if (all_known) {
      double s = 0;
      for (size_t i = 0; i < axes.size(); ++i) {
        double si = static_cast<double>(sizes[i]) / static_cast<double>(xs[axes[i]].value());
        if (i == 0 || (policy == "not_larger" ? si < s : si > s)) s = si;
      }
      for (int64_t a : axes) out[a] = Dim(static_cast<int64_t>(s * static_cast<double>(xs[a].value()) + 0.5));
    }
  } else {
    return c.error("unknown keep_aspect_ratio_policy '", policy, "'");
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status check_one_of(InferenceContext& c, const std::string& attr, const std::string& value,
                    std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (value == a) return Status::Ok();
  return c.error("unsupported ", attr, " '", value, "'");
}

Status infer_resize(InferenceContext& c) {
  if (c.opset() < 11) {
    INGOT_RETURN_IF_ERROR(check_one_of(c, "mode", c.attrs().get_string("mode", "nearest"), {"nearest", "linear"}));
    return infer_resize_like(c, 1, -1, nullptr);
  }
  const auto& a = c.attrs();
  INGOT_RETURN_IF_ERROR(check_one_of(c, "mode", a.get_string("mode", "nearest"), {"nearest", "linear", "cubic"}));
  INGOT_RETURN_IF_ERROR(check_one_of(c, "coordinate_transformation_mode",
                                     a.get_string("coordinate_transformation_mode", "half_pixel"),
                                     {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"}));
  INGOT_RETURN_IF_ERROR(check_one_of(c, "nearest_mode", a.get_string("nearest_mode", "round_prefer_floor"),
                                     {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
  return infer_resize_like(c, 2, 3, nullptr);
}

Status infer_upsample(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(
      check_one_of(c, "mode", c.attrs().get_string("mode", "nearest"), {"nearest", "linear", "bilinear"}));
  if (c.attrs().has("scales")) {
    std::vector<float> s = c.attrs().get_floats("scales");
    return infer_resize_like(c, -1, -1, &s);
  }
  if (c.num_inputs() < 2 || !c.has_input(1)) return c.error("Upsample needs 'scales' (attribute or input)");
  return infer_resize_like(c, 1, -1, nullptr);
}

Status infer_grid_sample(InferenceContext& c) {
  const auto& a = c.attrs();
  INGOT_RETURN_IF_ERROR(check_one_of(c, "mode", a.get_string("mode", c.opset() < 20 ? "bilinear" : "linear"),
                                     {"bilinear", "linear", "nearest", "bicubic", "cubic"}));
  INGOT_RETURN_IF_ERROR(check_one_of(c, "padding_mode", a.get_string("padding_mode", "zeros"),
                                     {"zeros", "border", "reflection"}));
  DataType dt = c.input_dtype(0);
  const Shape& xs = c.input_shape(0);
  const Shape& gs = c.input_shape(1);
  int64_t r = xs.rank_known() ? static_cast<int64_t>(xs.rank()) : (gs.rank_known() ? static_cast<int64_t>(gs.rank()) : -1);
  if (r < 0) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (r < 3) return c.error("X must have rank >= 3, got ", r);
  if (xs.rank_known() && gs.rank_known() && xs.rank() != gs.rank())
    return c.error("grid rank ", gs.rank(), " differs from X rank ", xs.rank());
  if (gs.rank_known() && gs[gs.rank() - 1].is_known() && gs[gs.rank() - 1].value() != r - 2)
    return c.error("grid's last dim must be ", r - 2, ", got ", gs[gs.rank() - 1].value());
  std::vector<Dim> out(r);
  if (xs.rank_known()) {
    out[0] = xs[0];
    out[1] = xs[1];
  }
  if (gs.rank_known()) {
    if (!out[0].is_known() && gs[0].is_known()) out[0] = gs[0];
    if (!xs.rank_known()) out[0] = gs[0];
    for (int64_t i = 2; i < r; ++i) out[i] = gs[i - 1];
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_affine_grid(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& ts = c.input_shape(0);
  const Tensor* size = c.input_value(1);
  const Shape& ss = c.input_shape(1);
  int64_t n = -1;
  if (size) n = size->numel();
  else if (ss.rank_known() && ss.rank() == 1 && ss[0].is_known()) n = ss[0].value();
  if (ts.rank_known()) {
    if (ts.rank() != 3) return c.error("theta must have rank 3, got ", ts.rank());
    if (ts[1].is_known() && ts[2].is_known()) {
      int64_t k = ts[1].value();
      if (ts[2].value() != k + 1 || (k != 2 && k != 3))
        return c.error("theta must be [N,2,3] or [N,3,4], got ", ts.to_string());
      if (n >= 0 && n != k + 2) return c.error("size must have ", k + 2, " values, got ", n);
      n = k + 2;
    }
  }
  if (n < 0) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (n != 4 && n != 5) return c.error("size must have 4 or 5 values, got ", n);
  std::vector<Dim> out(n);  // [N, (D,) H, W, n-2]
  out[n - 1] = Dim(n - 2);
  if (ts.rank_known()) out[0] = ts[0];
  if (size) {
    for (int64_t i = 0; i < n; ++i)
      if (size->get_i64(i) < 0) return c.error("size values must be non-negative");
    if (out[0].is_known() && out[0].value() != size->get_i64(0))
      return c.error("size[0]=", size->get_i64(0), " differs from theta batch ", out[0].value());
    out[0] = Dim(size->get_i64(0));
    for (int64_t i = 2; i < n; ++i) out[i - 1] = Dim(size->get_i64(i));
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_roi_align(InferenceContext& c) {
  const auto& a = c.attrs();
  INGOT_RETURN_IF_ERROR(check_one_of(c, "mode", a.get_string("mode", "avg"), {"avg", "max"}));
  if (c.opset() >= 16)
    INGOT_RETURN_IF_ERROR(check_one_of(c, "coordinate_transformation_mode",
                                       a.get_string("coordinate_transformation_mode", "half_pixel"),
                                       {"half_pixel", "output_half_pixel"}));
  int64_t oh = a.get_int("output_height", 1), ow = a.get_int("output_width", 1);
  if (oh < 1 || ow < 1) return c.error("output_height/output_width must be >= 1");
  const Shape& xs = c.input_shape(0);
  const Shape& rs = c.input_shape(1);
  const Shape& bs = c.input_shape(2);
  if (xs.rank_known() && xs.rank() != 4) return c.error("X must have rank 4, got ", xs.rank());
  if (rs.rank_known() && rs.rank() != 2) return c.error("rois must have rank 2, got ", rs.rank());
  if (rs.rank_known() && rs[1].is_known() && rs[1].value() != 4)
    return c.error("rois must have 4 columns, got ", rs[1].value());
  if (bs.rank_known() && bs.rank() != 1) return c.error("batch_indices must have rank 1, got ", bs.rank());
  Dim num = Dim::unknown();
  if (rs.rank_known()) num = rs[0];
  if (!num.is_known() && bs.rank_known()) num = bs[0];
  if (rs.rank_known() && bs.rank_known() && rs[0].is_known() && bs[0].is_known() && rs[0].value() != bs[0].value())
    return c.error("rois has ", rs[0].value(), " rows but batch_indices has ", bs[0].value());
  Dim ch = xs.rank_known() ? xs[1] : Dim::unknown();
  c.set_output(0, c.input_dtype(0), Shape({num, ch, Dim(oh), Dim(ow)}));
  return Status::Ok();
}

}  // namespace

void register_image_ops(OpRegistry& r) {
  r.add("Resize").inputs(1, 4).outputs(1, 1).opsets(10)
      .attr("mode", AttrType::kString)
      .attr("coordinate_transformation_mode", AttrType::kString)
      .attr("cubic_coeff_a", AttrType::kFloat)
      .attr("exclude_outside", AttrType::kInt)
      .attr("extrapolation_value", AttrType::kFloat)
      .attr("nearest_mode", AttrType::kString)
      .attr("antialias", AttrType::kInt)
      .attr("axes", AttrType::kInts)
      .attr("keep_aspect_ratio_policy", AttrType::kString)
      .infer(infer_resize);

  r.add("Upsample").inputs(1, 2).outputs(1, 1).opsets(7, 10)
      .attr("mode", AttrType::kString)
      .attr("scales", AttrType::kFloats)
      .infer(infer_upsample);

  r.add("GridSample").inputs(2, 2).outputs(1, 1).opsets(16)
      .attr("mode", AttrType::kString)
      .attr("padding_mode", AttrType::kString)
      .attr("align_corners", AttrType::kInt)
      .infer(infer_grid_sample);

  r.add("AffineGrid").inputs(2, 2).outputs(1, 1).opsets(20)
      .attr("align_corners", AttrType::kInt)
      .infer(infer_affine_grid);

  r.add("RoiAlign").inputs(3, 3).outputs(1, 1).opsets(10)
      .attr("mode", AttrType::kString)
      .attr("coordinate_transformation_mode", AttrType::kString)
      .attr("output_height", AttrType::kInt)
      .attr("output_width", AttrType::kInt)
      .attr("sampling_ratio", AttrType::kInt)
      .attr("spatial_scale", AttrType::kFloat)
      .infer(infer_roi_align);
}

}  // namespace ingot::ir
