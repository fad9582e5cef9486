// Copyright ingot authors. Apache-2.0.
//
// nn family: MatMul, Gemm, Conv, ConvTranspose, DeformConv, pooling, MaxUnpool, Col2Im.
// Einsum lives in nn_einsum.cc.
//
//   ingot::Pool(X) (domain "ingot", opset 1): MaxPool (mode "max") or AveragePool (mode
//     "average") with the same window attributes, meaning the same thing (kernel_shape, strides,
//     pads, dilations, auto_pad, ceil_mode; count_include_pad for "average" only). With
//     `channels_last` = 1, X and Y are [N, spatial..., C]; the builder's layout pass makes these
//     inside channels-last regions. MaxPool's Indices output (and so storage_order) has no
//     counterpart: pools that need it stay MaxPool.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_nn_einsum_ops(OpRegistry& r);

namespace {

bool is_float_type(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16 || t == DataType::kUndefined;
}

// ---------------------------------------------------------------------------------------
// MatMul
Status infer_matmul(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  if (!a.rank_known() || !b.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (a.rank() == 0 || b.rank() == 0) return c.error("MatMul operands must have rank >= 1");
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), Dim(1));
  if (b1) bd.push_back(Dim(1));
  const Dim& ka = ad.back();
  const Dim& kb = bd[bd.size() - 2];
  if (ka.is_known() && kb.is_known() && ka.value() != kb.value())
    return c.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  Shape abatch(std::vector<Dim>(ad.begin(), ad.end() - 2));
  Shape bbatch(std::vector<Dim>(bd.begin(), bd.end() - 2));
  auto bs = broadcast_shapes(abatch, bbatch);
  if (!bs.ok()) return c.error(bs.status().message());
  std::vector<Dim> out = bs->dims();
  if (!a1) out.push_back(ad[ad.size() - 2]);
  if (!b1) out.push_back(bd.back());
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Gemm
Status infer_gemm(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  bool ta = c.attrs().get_int("transA", 0) != 0, tb = c.attrs().get_int("transB", 0) != 0;
  Dim m, n;
  if (a.rank_known()) {
    if (a.rank() != 2) return c.error("A must be 2-D, got ", a.to_string());
    m = ta ? a[1] : a[0];
  }
  if (b.rank_known()) {
    if (b.rank() != 2) return c.error("B must be 2-D, got ", b.to_string());
    n = tb ? b[0] : b[1];
  }
  if (a.rank_known() && b.rank_known()) {
    Dim ka = ta ? a[0] : a[1], kb = tb ? b[1] : b[0];
    if (ka.is_known() && kb.is_known() && ka.value() != kb.value())
      return c.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  }
  c.set_output(0, dt, Shape({m, n}));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Convolution / pooling window arithmetic

struct WindowAttrs {
  std::string auto_pad;
  std::vector<int64_t> kernel, strides, dilations, pads;
  bool ceil_mode = false;
};

// Reads window attributes for `nsp` spatial dims; kernel from attribute or `kernel_fallback`.
Status read_window(InferenceContext& c, size_t nsp, const std::vector<int64_t>& kernel_fallback,
                   WindowAttrs* w) {
  const Attributes& at = c.attrs();
  w->auto_pad = at.get_string("auto_pad", "NOTSET");
  if (w->auto_pad != "NOTSET" && w->auto_pad != "SAME_UPPER" && w->auto_pad != "SAME_LOWER" &&
      w->auto_pad != "VALID")
    return c.error("unknown auto_pad '", w->auto_pad, "'");
  w->kernel = at.has("kernel_shape") ? at.get_ints("kernel_shape") : kernel_fallback;
  w->strides = at.get_ints("strides", std::vector<int64_t>(nsp, 1));
  w->dilations = at.get_ints("dilations", std::vector<int64_t>(nsp, 1));
  w->pads = at.get_ints("pads", std::vector<int64_t>(2 * nsp, 0));
  w->ceil_mode = at.get_int("ceil_mode", 0) != 0;
  if (!w->kernel.empty() && w->kernel.size() != nsp)
    return c.error("kernel_shape has ", w->kernel.size(), " dims, expected ", nsp);
  if (w->strides.size() != nsp) return c.error("strides has ", w->strides.size(), " dims, expected ", nsp);
  if (w->dilations.size() != nsp)
    return c.error("dilations has ", w->dilations.size(), " dims, expected ", nsp);
  if (w->pads.size() != 2 * nsp) return c.error("pads has ", w->pads.size(), " values, expected ", 2 * nsp);
  for (int64_t s : w->strides)
    if (s <= 0) return c.error("strides must be positive");
  for (int64_t d : w->dilations)
    if (d <= 0) return c.error("dilations must be positive");
  for (int64_t p : w->pads)
    if (p < 0) return c.error("pads must be non-negative");
  for (int64_t k : w->kernel)
    if (k <= 0) return c.error("kernel_shape must be positive");
  return Status::Ok();
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Output size of one spatial dim of a forward window op (Conv/pools).
Result<int64_t> window_out(const InferenceContext& c, const WindowAttrs& w, size_t i, int64_t in) {
  int64_t dk = (w.kernel[i] - 1) * w.dilations[i] + 1;
  int64_t s = w.strides[i];
  int64_t out;
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    out = ceil_div(in, s);
  } else if (w.auto_pad == "VALID") {
    out = floor_div(in - dk, s) + 1;
  } else {
    int64_t span = in + w.pads[i] + w.pads[i + w.kernel.size()] - dk;
    if (w.ceil_mode) {
      out = ceil_div(span, s) + 1;
      if ((out - 1) * s >= in + w.pads[i]) --out;
    } else {
      out = floor_div(span, s) + 1;
    }
  }
  if (out < 0) return c.error("window larger than padded input (dim ", i, ")");
  return out;
}

// Spatial output dims of a window op on input shape x ([N, C, spatial...]).
Status window_spatial(InferenceContext& c, const Shape& x, const WindowAttrs& w, std::vector<Dim>* out) {
  for (size_t i = 0; i + 2 < x.rank(); ++i) {
    const Dim& d = x[i + 2];
    if (!d.is_known() || w.kernel.empty()) {
      out->push_back(Dim::unknown());
      continue;
    }
    INGOT_ASSIGN_OR_RETURN(int64_t o, window_out(c, w, i, d.value()));
    out->push_back(Dim(o));
  }
  return Status::Ok();
}

Status infer_conv(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  const Shape& wsh = c.input_shape(1);
  int64_t group = c.attrs().get_int("group", 1);
  if (group <= 0) return c.error("group must be positive");
  size_t rank = x.rank_known() ? x.rank() : (wsh.rank_known() ? wsh.rank() : 0);
  if (!x.rank_known() && !wsh.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (rank < 3) return c.error("input must have rank >= 3");
  if (x.rank_known() && wsh.rank_known() && x.rank() != wsh.rank())
    return c.error("X ", x.to_string(), " and W ", wsh.to_string(), " ranks differ");
  size_t nsp = rank - 2;
  std::vector<int64_t> kfb;
  if (wsh.rank_known()) {
    bool all = true;
    for (size_t i = 2; i < wsh.rank(); ++i) all = all && wsh[i].is_known();
    if (all)
      for (size_t i = 2; i < wsh.rank(); ++i) kfb.push_back(wsh[i].value());
  }
  WindowAttrs w;
  INGOT_RETURN_IF_ERROR(read_window(c, nsp, kfb, &w));
  if (x.rank_known() && wsh.rank_known() && x[1].is_known() && wsh[1].is_known() &&
      x[1].value() != wsh[1].value() * group)
    return c.error("input channels ", x[1].value(), " != W channels ", wsh[1].value(), " * group ", group);
  std::vector<Dim> out;
  out.push_back(x.rank_known() ? x[0] : Dim::unknown());
  out.push_back(wsh.rank_known() ? wsh[0] : Dim::unknown());
  if (x.rank_known()) {
    INGOT_RETURN_IF_ERROR(window_spatial(c, x, w, &out));
  } else {
    for (size_t i = 0; i < nsp; ++i) out.push_back(Dim::unknown());
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_conv_transpose(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  const Shape& wsh = c.input_shape(1);
  int64_t group = c.attrs().get_int("group", 1);
  if (group <= 0) return c.error("group must be positive");
  if (!x.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (x.rank() < 3) return c.error("input must have rank >= 3");
  size_t nsp = x.rank() - 2;
  if (wsh.rank_known() && wsh.rank() != x.rank())
    return c.error("X ", x.to_string(), " and W ", wsh.to_string(), " ranks differ");
  std::vector<int64_t> kfb;
  if (wsh.rank_known()) {
    bool all = true;
    for (size_t i = 2; i < wsh.rank(); ++i) all = all && wsh[i].is_known();
    if (all)
      for (size_t i = 2; i < wsh.rank(); ++i) kfb.push_back(wsh[i].value());
  }
  WindowAttrs w;
  INGOT_RETURN_IF_ERROR(read_window(c, nsp, kfb, &w));
  std::vector<int64_t> opad = c.attrs().get_ints("output_padding", std::vector<int64_t>(nsp, 0));
  std::vector<int64_t> oshape = c.attrs().get_ints("output_shape");
  if (opad.size() != nsp) return c.error("output_padding has ", opad.size(), " dims, expected ", nsp);
  if (!oshape.empty() && oshape.size() != nsp && oshape.size() != nsp + 2)
    return c.error("output_shape has ", oshape.size(), " dims, expected ", nsp);
  if (oshape.size() == nsp + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (wsh.rank_known() && x[1].is_known() && wsh[0].is_known() && x[1].value() != wsh[0].value())
    return c.error("input channels ", x[1].value(), " != W dim 0 ", wsh[0].value());
  std::vector<Dim> out;
  out.push_back(x[0]);
  out.push_back(wsh.rank_known() && wsh[1].is_known() ? Dim(wsh[1].value() * group) : Dim::unknown());
  for (size_t i = 0; i < nsp; ++i) {
    if (!oshape.empty()) {
      out.push_back(Dim(oshape[i]));
      continue;
    }
    const Dim& d = x[i + 2];
    if (!d.is_known() || w.kernel.empty()) {
      out.push_back(Dim::unknown());
      continue;
    }
    int64_t in = d.value();
    int64_t o;
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      o = in * w.strides[i];
    } else {
      int64_t dk = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t pb = w.auto_pad == "VALID" ? 0 : w.pads[i], pe = w.auto_pad == "VALID" ? 0 : w.pads[i + nsp];
      o = w.strides[i] * (in - 1) + opad[i] + dk - pb - pe;
    }
    if (o < 0) return c.error("negative output size");
    out.push_back(Dim(o));
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_pool(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  if (!x.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    if (c.has_output(1)) c.set_output(1, DataType::kInt64, Shape::unknown_rank());
    return Status::Ok();
  }
  if (x.rank() < 3) return c.error("input must have rank >= 3, got ", x.to_string());
  WindowAttrs w;
  INGOT_RETURN_IF_ERROR(read_window(c, x.rank() - 2, {}, &w));
  if (w.kernel.empty()) return c.error("kernel_shape is required");
  std::vector<Dim> out{x[0], x[1]};
  INGOT_RETURN_IF_ERROR(window_spatial(c, x, w, &out));
  c.set_output(0, dt, Shape(out));
  if (c.has_output(1)) c.set_output(1, DataType::kInt64, Shape(out));
  return Status::Ok();
}

Status infer_ingot_pool(InferenceContext& c) {
  const std::string mode = c.attrs().get_string("mode", "");
  if (mode != "max" && mode != "average") return c.error("mode must be 'max' or 'average', got '", mode, "'");
  if (mode == "max" && c.attrs().has("count_include_pad")) return c.error("count_include_pad needs mode 'average'");
  const int64_t channels_last = c.attrs().get_int("channels_last", 0);
  if (channels_last != 0 && channels_last != 1) return c.error("channels_last must be 0 or 1, got ", channels_last);
  if (!channels_last || !c.input_shape(0).rank_known()) return infer_pool(c);
  // Channels-last: the channels-first pool's inference on the permuted view.
  const size_t rank = c.input_shape(0).rank();
  if (rank < 3) return c.error("input must have rank >= 3, got ", c.input_shape(0).to_string());
  TensorType x{c.input_dtype(0), permute_shape(c.input_shape(0), channels_first_perm(rank))};
  InferenceContext inner(c.node(), c.opset(), {x}, {nullptr});
  INGOT_RETURN_IF_ERROR(infer_pool(inner));
  const TensorType& y = inner.output(0);
  c.set_output(0, y.dtype, permute_shape(y.shape, channels_last_perm(rank)));
  return Status::Ok();
}

Status infer_global_pool(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  if (!x.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (x.rank() < 2) return c.error("input must have rank >= 2, got ", x.to_string());
  std::vector<Dim> out{x[0], x[1]};
  for (size_t i = 2; i < x.rank(); ++i) out.push_back(Dim(1));
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_max_unpool(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  if (c.has_input(2)) {
    const Tensor* os = c.input_value(2);
    if (os) {
      std::vector<Dim> d;
      for (int64_t i = 0; i < os->numel(); ++i) d.push_back(Dim(os->get_i64(i)));
      c.set_output(0, dt, Shape(d));
    } else {
      const Shape& s2 = c.input_shape(2);
      if (s2.rank_known() && s2.rank() == 1 && s2[0].is_known())
        c.set_output(0, dt, Shape(std::vector<Dim>(s2[0].value(), Dim::unknown())));
      else
        c.set_output(0, dt, x.rank_known() ? Shape(std::vector<Dim>(x.rank(), Dim::unknown()))
                                           : Shape::unknown_rank());
    }
    return Status::Ok();
  }
  if (!x.rank_known()) {
    c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  if (x.rank() < 3) return c.error("input must have rank >= 3");
  size_t nsp = x.rank() - 2;
  WindowAttrs w;
  INGOT_RETURN_IF_ERROR(read_window(c, nsp, {}, &w));
  if (w.kernel.empty()) return c.error("kernel_shape is required");
  std::vector<Dim> out{x[0], x[1]};
  for (size_t i = 0; i < nsp; ++i) {
    if (!x[i + 2].is_known()) {
      out.push_back(Dim::unknown());
      continue;
    }
    out.push_back(Dim((x[i + 2].value() - 1) * w.strides[i] + w.kernel[i] - w.pads[i] - w.pads[i + nsp]));
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_col2im(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Shape& x = c.input_shape(0);
  const Tensor* img = c.input_value(1);
  const Tensor* blk = c.input_value(2);
  Dim n = x.rank_known() && x.rank() == 3 ? x[0] : Dim::unknown();
  if (x.rank_known() && x.rank() != 3) return c.error("input must be 3-D, got ", x.to_string());
  if (!img) {
    const Shape& s1 = c.input_shape(1);
    if (s1.rank_known() && s1.rank() == 1 && s1[0].is_known())
      c.set_output(0, dt, Shape(std::vector<Dim>(s1[0].value() + 2, Dim::unknown())));
    else
      c.set_output(0, dt, Shape::unknown_rank());
    return Status::Ok();
  }
  std::vector<Dim> out{n, Dim::unknown()};
  if (blk && x.rank_known() && x[1].is_known()) {
    int64_t prod = 1;
    for (int64_t i = 0; i < blk->numel(); ++i) prod = mul_dims(prod, blk->get_i64(i));
    if (prod <= 0 || x[1].value() % prod != 0)
      return c.error("input dim 1 (", x[1].value(), ") is not a multiple of the block size ", prod);
    out[1] = Dim(x[1].value() / prod);
  }
  for (int64_t i = 0; i < img->numel(); ++i) out.push_back(Dim(img->get_i64(i)));
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r.add("MatMul").inputs(2, 2).outputs(1, 1).opsets(1).infer(infer_matmul);
  r.add("Gemm")
      .inputs(2, 3)
      .outputs(1, 1)
      .opsets(1)
      .attr("alpha", AttrType::kFloat)
      .attr("beta", AttrType::kFloat)
      .attr("transA", AttrType::kInt)
      .attr("transB", AttrType::kInt)
      .attr("broadcast", AttrType::kInt)
      .infer(infer_gemm);
  auto window = [](OpSchema& s) -> OpSchema& {
    return s.attr("auto_pad", AttrType::kString)
        .attr("kernel_shape", AttrType::kInts)
        .attr("pads", AttrType::kInts)
        .attr("strides", AttrType::kInts)
        .attr("dilations", AttrType::kInts);
  };
  window(r.add("Conv").inputs(2, 3).outputs(1, 1).opsets(1))
      .attr("group", AttrType::kInt)
      .infer([](InferenceContext& c) {
        if (!is_float_type(c.input_dtype(0))) return c.error("Conv needs a float input");
        return infer_conv(c);
      });
  window(r.add("ConvTranspose").inputs(2, 3).outputs(1, 1).opsets(1))
      .attr("group", AttrType::kInt)
      .attr("output_padding", AttrType::kInts)
      .attr("output_shape", AttrType::kInts)
      .infer(infer_conv_transpose);
  r.add("DeformConv")
      .inputs(3, 5)
      .outputs(1, 1)
      .opsets(19)
      .attr("dilations", AttrType::kInts)
      .attr("group", AttrType::kInt)
      .attr("kernel_shape", AttrType::kInts)
      .attr("offset_group", AttrType::kInt)
      .attr("pads", AttrType::kInts)
      .attr("strides", AttrType::kInts)
      .infer(infer_conv);
  window(r.add("MaxPool").inputs(1, 1).outputs(1, 2).opsets(1))
      .attr("ceil_mode", AttrType::kInt)
      .attr("storage_order", AttrType::kInt)
      .infer(infer_pool);
  window(r.add("AveragePool").inputs(1, 1).outputs(1, 1).opsets(1))
      .attr("ceil_mode", AttrType::kInt)
      .attr("count_include_pad", AttrType::kInt)
      .infer(infer_pool);
  window(r.add("LpPool").inputs(1, 1).outputs(1, 1).opsets(2))
      .attr("ceil_mode", AttrType::kInt)
      .attr("p", AttrType::kInt)
      .infer(infer_pool);  // LpPool-1 had a float `p`; opset 2+ has an int
  window(r.add("Pool", "ingot").inputs(1, 1).outputs(1, 1).opsets(1))
      .attr("mode", AttrType::kString, true)
      .attr("ceil_mode", AttrType::kInt)
      .attr("count_include_pad", AttrType::kInt)
      .attr("channels_last", AttrType::kInt)
      .infer(infer_ingot_pool)
      .doc("MaxPool / AveragePool (mode), channels-last when channels_last = 1");
  r.add("GlobalAveragePool").inputs(1, 1).outputs(1, 1).opsets(1).infer(infer_global_pool);
  r.add("GlobalMaxPool").inputs(1, 1).outputs(1, 1).opsets(1).infer(infer_global_pool);
  r.add("GlobalLpPool").inputs(1, 1).outputs(1, 1).opsets(2).attr("p", AttrType::kInt).infer(infer_global_pool);
  r.add("MaxUnpool")
      .inputs(2, 3)
      .outputs(1, 1)
      .opsets(9)
      .attr("kernel_shape", AttrType::kInts, true)
      .attr("pads", AttrType::kInts)
      .attr("strides", AttrType::kInts)
      .infer(infer_max_unpool);
  r.add("Col2Im")
      .inputs(3, 3)
      .outputs(1, 1)
      .opsets(18)
      .attr("dilations", AttrType::kInts)
      .attr("pads", AttrType::kInts)
      .attr("strides", AttrType::kInts)
      .infer(infer_col2im);
  register_nn_einsum_ops(r);
}

}  // namespace ingot::ir
