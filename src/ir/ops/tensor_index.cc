// Copyright ingot authors. Apache-2.0.
//
// Shape and data-movement ops (part 2): gather/scatter, pad, depth/space rearrangement,
// one-hot, data-dependent ops (NonZero, TopK, Compress, Unique) and friends.
#include <algorithm>
#include <optional>

#include "ir/ops/all_ops.h"
#include "ir/ops/tensor_shared.h"

namespace ingot::ir {


namespace {

Status set_unknown_rank(InferenceContext& c, size_t o, DataType dt) {
  c.set_output(o, dt, Shape::unknown_rank());
  return Status::Ok();
}

Status infer_gather(InferenceContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  DataType dt = c.input_dtype(0);
  if (!data.rank_known() || !idx.rank_known()) return set_unknown_rank(c, 0, dt);
  int64_t r = static_cast<int64_t>(data.rank());
  if (r == 0) return c.error("data must have rank >= 1");
  int64_t axis = c.attrs().get_int("axis", 0);
  if (axis < -r || axis >= r) return c.error("axis ", axis, " out of range for rank ", r);
  if (axis < 0) axis += r;
  std::vector<Dim> out(data.dims().begin(), data.dims().begin() + axis);
  out.insert(out.end(), idx.dims().begin(), idx.dims().end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  c.set_output(0, dt, Shape(out));
  // Fold gathers from small 1-D integer tensors (Shape -> Gather).
  const Tensor* dv = c.input_value(0);
  auto iv = tensor_known_ints(c, 1);
  if (dv && iv && r == 1 && dv->numel() <= 1024 && !is_float(dt) && dt != DataType::kString && iv->size() <= 1024) {
    const Tensor* it = c.input_value(1);
    Tensor t = Tensor::zeros(dt, it->shape()).value();
    int64_t n = dv->dim(0);
    for (size_t i = 0; i < iv->size(); ++i) {
      int64_t k = (*iv)[i];
      if (k < -n || k >= n) return c.error("index ", k, " out of range for axis of size ", n);
      t.set_i64(static_cast<int64_t>(i), dv->get_i64(k < 0 ? k + n : k));
    }
    c.set_output_value(0, t);
  } else if (auto src = tensor_shape_source(c, 0); src && iv && r == 1 && iv->size() <= 1024) {
    // Gather from Shape(x) where x is partly symbolic: fold when the gathered dims are known.
    int64_t n = static_cast<int64_t>(src->size());
    std::vector<int64_t> vals;
    for (int64_t k : *iv) {
      if (k < -n || k >= n) return c.error("index ", k, " out of range for axis of size ", n);
      const Dim& d = (*src)[k < 0 ? k + n : k];
      if (!d.is_known()) return Status::Ok();
      vals.push_back(d.value());
    }
    Tensor t = Tensor::from_vector(DataType::kInt64, c.input_value(1)->shape(), vals);
    c.set_output_value(0, t);
  }
  return Status::Ok();
}

Status infer_gather_elements(InferenceContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  if (data.rank_known() && idx.rank_known()) {
    if (data.rank() != idx.rank()) return c.error("data rank ", data.rank(), " != indices rank ", idx.rank());
    INGOT_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(data.rank())));
    (void)axis;
  }
  c.set_output(0, c.input_dtype(0), idx);
  return Status::Ok();
}

Status infer_gather_nd(InferenceContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  DataType dt = c.input_dtype(0);
  int64_t b = c.attrs().get_int("batch_dims", 0);
  if (!data.rank_known() || !idx.rank_known()) return set_unknown_rank(c, 0, dt);
  int64_t r = static_cast<int64_t>(data.rank()), q = static_cast<int64_t>(idx.rank());
  if (r < 1 || q < 1) return c.error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return c.error("batch_dims ", b, " out of range");
  if (!idx[q - 1].is_known()) return set_unknown_rank(c, 0, dt);
  int64_t last = idx[q - 1].value();
  if (last < 1 || last > r - b) return c.error("indices last dim ", last, " out of range for data rank ", r);
  std::vector<Dim> out(idx.dims().begin(), idx.dims().end() - 1);
  out.insert(out.end(), data.dims().begin() + b + last, data.dims().end());
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_pad(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  if (!in.rank_known()) return set_unknown_rank(c, 0, dt);
  int64_t r = static_cast<int64_t>(in.rank());
  std::string mode = c.attrs().get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.error("unknown mode '", mode, "'");
  std::optional<std::vector<int64_t>> pads;
  if (c.opset() < 2) pads = c.attrs().get_ints("paddings");
  else if (c.opset() < 11) pads = c.attrs().get_ints("pads");
  else if (!c.has_input(1)) return c.error("input 'pads' is required");
  else pads = tensor_known_ints(c, 1);
  std::vector<int64_t> axes;
  if (c.opset() >= 18 && c.has_input(3)) {
    auto a = tensor_known_ints(c, 3);
    if (!a) pads = std::nullopt;
    else axes = *a;
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (!pads) {
    c.set_output(0, dt, Shape(std::vector<Dim>(r, Dim::unknown())));
    return Status::Ok();
  }
  int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads->size()) != 2 * na)
    return c.error("pads has ", pads->size(), " entries, expected ", 2 * na);
  Shape out = in;
  for (int64_t i = 0; i < na; ++i) {
    int64_t a = axes[i];
    if (a < -r || a >= r) return c.error("axis ", a, " out of range for rank ", r);
    if (a < 0) a += r;
    int64_t p = (*pads)[i] + (*pads)[i + na];
    if (p == 0) continue;
    if (in[a].is_known()) {
      int64_t d = in[a].value() + p;
      if (d < 0) return c.error("pads make axis ", a, " negative");
      out[a] = Dim(d);
    } else {
      out[a] = Dim::unknown();
    }
  }
  c.set_output(0, dt, out);
  return Status::Ok();
}

Status infer_depth_space(InferenceContext& c, bool to_space) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  int64_t b = c.attrs().get_int("blocksize", 0);
  if (b <= 0) return c.error("blocksize must be positive");
  if (!in.rank_known()) return c.set_output(0, dt, Shape(std::vector<Dim>(4))), Status::Ok();
  if (in.rank() != 4) return c.error("input must have rank 4, got ", in.to_string());
  Shape out = in;
  auto mul = [](const Dim& d, int64_t k) { return d.is_known() ? Dim(d.value() * k) : Dim::unknown(); };
  auto div = [&](const Dim& d, int64_t k, Status* st) {
    if (!d.is_known()) return Dim::unknown();
    if (d.value() % k != 0) *st = c.error("dim ", d.value(), " is not divisible by ", k);
    return Dim(d.value() / k);
  };
  Status st = Status::Ok();
  if (to_space) {
    out[1] = div(in[1], b * b, &st);
    out[2] = mul(in[2], b);
    out[3] = mul(in[3], b);
  } else {
    out[1] = mul(in[1], b * b);
    out[2] = div(in[2], b, &st);
    out[3] = div(in[3], b, &st);
  }
  INGOT_RETURN_IF_ERROR(st);
  c.set_output(0, dt, out);
  return Status::Ok();
}

Status infer_onehot(InferenceContext& c) {
  const Shape& idx = c.input_shape(0);
  DataType dt = c.input_dtype(2);
  if (!idx.rank_known()) return set_unknown_rank(c, 0, dt);
  int64_t r = static_cast<int64_t>(idx.rank()) + 1;
  int64_t axis = c.attrs().get_int("axis", -1);
  if (axis < -r || axis >= r) return c.error("axis ", axis, " out of range for output rank ", r);
  if (axis < 0) axis += r;
  Dim depth = Dim::unknown();
  if (const Tensor* d = c.input_value(1)) {
    if (d->numel() != 1) return c.error("depth must have one element");
    int64_t v = is_float(d->dtype()) ? static_cast<int64_t>(d->get_f64(0)) : d->get_i64(0);
    if (v < 1) return c.error("depth must be positive, got ", v);
    depth = Dim(v);
  }
  std::vector<Dim> out = idx.dims();
  out.insert(out.begin() + axis, depth);
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_topk(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  if (c.opset() >= 10 && !c.has_input(1)) return c.error("input 'K' is required");
  if (!in.rank_known()) {
    set_unknown_rank(c, 0, dt);
    return set_unknown_rank(c, 1, DataType::kInt64);
  }
  int64_t r = static_cast<int64_t>(in.rank());
  INGOT_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c.attrs().get_int("axis", -1), r));
  Dim k = Dim::unknown();
  if (c.opset() < 10) {
    k = Dim(c.attrs().get_int("k", 0));
  } else if (auto v = tensor_known_ints(c, 1)) {
    if (v->size() != 1) return c.error("K must have one element");
    k = Dim((*v)[0]);
  }
  if (k.is_known()) {
    if (k.value() < 0) return c.error("k must be non-negative, got ", k.value());
    if (in[axis].is_known() && k.value() > in[axis].value())
      return c.error("k ", k.value(), " exceeds axis size ", in[axis].value());
  }
  Shape out = in;
  out[axis] = k;
  c.set_output(0, dt, out);
  if (c.num_outputs() > 1) c.set_output(1, DataType::kInt64, out);
  return Status::Ok();
}

Status infer_compress(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  Dim n = Dim::unknown();
  if (const Tensor* cond = c.input_value(1)) {
    int64_t limit = -1;
    if (!c.attrs().has("axis")) { if (in.is_concrete()) limit = shape_numel(in.concrete()); }
    else if (in.rank_known()) {
      auto a = normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(in.rank()));
      if (a.ok() && in[*a].is_known()) limit = in[*a].value();
    }
    if (limit >= 0) {
      if (cond->numel() > limit) return c.error("condition has ", cond->numel(), " entries, more than ", limit);
      int64_t cnt = 0;
      for (int64_t i = 0; i < cond->numel(); ++i) cnt += cond->get_i64(i) != 0;
      n = Dim(cnt);
    }
  }
  if (!c.attrs().has("axis")) {
    c.set_output(0, dt, Shape({n}));
    return Status::Ok();
  }
  if (!in.rank_known()) return set_unknown_rank(c, 0, dt);
  INGOT_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(in.rank())));
  Shape out = in;
  out[axis] = n;
  c.set_output(0, dt, out);
  return Status::Ok();
}

Status infer_unique(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  Dim inv = Dim::unknown();
  if (c.attrs().has("axis")) {
    if (!in.rank_known()) {
      set_unknown_rank(c, 0, dt);
    } else {
      INGOT_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(in.rank())));
      Shape out = in;
      out[axis] = Dim::unknown();
      inv = in[axis];
      c.set_output(0, dt, out);
    }
  } else {
    c.set_output(0, dt, Shape({Dim::unknown()}));
    if (in.is_concrete()) inv = Dim(shape_numel(in.concrete()));
  }
  for (size_t i = 1; i < c.num_outputs(); ++i)
    c.set_output(i, DataType::kInt64, Shape({i == 2 ? inv : Dim::unknown()}));
  return Status::Ok();
}

Status infer_center_crop_pad(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  if (!in.rank_known()) return set_unknown_rank(c, 0, dt);
  int64_t r = static_cast<int64_t>(in.rank());
  std::vector<int64_t> axes = c.attrs().get_ints("axes");
  if (!c.attrs().has("axes"))
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  for (auto& a : axes) {
    if (a < -r || a >= r) return c.error("axis ", a, " out of range for rank ", r);
    if (a < 0) a += r;
  }
  Shape out = in;
  auto sv = tensor_known_ints(c, 1);
  if (sv && sv->size() != axes.size()) return c.error("shape has ", sv->size(), " entries for ", axes.size(), " axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sv && (*sv)[i] < 0) return c.error("negative target size ", (*sv)[i]);
    out[axes[i]] = sv ? Dim((*sv)[i]) : Dim::unknown();
  }
  c.set_output(0, dt, out);
  return Status::Ok();
}

}  // namespace

void register_tensor_index_ops(OpRegistry& r) {
  r.add("Gather").inputs(2, 2).outputs(1, 1).opsets(1).attr("axis", AttrType::kInt).infer(infer_gather);
  r.add("GatherElements").inputs(2, 2).outputs(1, 1).opsets(11).attr("axis", AttrType::kInt)
      .infer(infer_gather_elements);
  r.add("GatherND").inputs(2, 2).outputs(1, 1).opsets(11).attr("batch_dims", AttrType::kInt).infer(infer_gather_nd);
  auto same0 = [](InferenceContext& c) { return c.propagate_same(0, 0); };
  r.add("ScatterElements").inputs(3, 3).outputs(1, 1).opsets(11)
      .attr("axis", AttrType::kInt).attr("reduction", AttrType::kString).infer(same0);
  r.add("Scatter").inputs(3, 3).outputs(1, 1).opsets(9, 10).attr("axis", AttrType::kInt).infer(same0);
  r.add("ScatterND").inputs(3, 3).outputs(1, 1).opsets(11).attr("reduction", AttrType::kString).infer(same0);
  r.add("TensorScatter").inputs(2, 3).outputs(1, 1).opsets(24)
      .attr("axis", AttrType::kInt).attr("mode", AttrType::kString).infer(same0);
  r.add("Pad").inputs(1, 4).outputs(1, 1).opsets(1)
      .attr("mode", AttrType::kString).attr("pads", AttrType::kInts).attr("paddings", AttrType::kInts)
      .attr("value", AttrType::kFloat).infer(infer_pad);
  r.add("DepthToSpace").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("blocksize", AttrType::kInt, true).attr("mode", AttrType::kString)
      .infer([](InferenceContext& c) {
        std::string m = c.attrs().get_string("mode", "DCR");
        if (m != "DCR" && m != "CRD") return c.error("unknown mode '", m, "'");
        return infer_depth_space(c, true);
      });
  r.add("SpaceToDepth").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("blocksize", AttrType::kInt, true).attr("mode", AttrType::kString)
      .infer([](InferenceContext& c) {
        std::string m = c.attrs().get_string("mode", "DCR");
        if (m != "DCR" && m != "CRD") return c.error("unknown mode '", m, "'");
        return infer_depth_space(c, false);
      });
  r.add("OneHot").inputs(3, 3).outputs(1, 1).opsets(9).attr("axis", AttrType::kInt).infer(infer_onehot);
  r.add("NonZero").inputs(1, 1).outputs(1, 1).opsets(9).infer([](InferenceContext& c) {
    const Shape& in = c.input_shape(0);
    c.set_output(0, DataType::kInt64, Shape({in.rank_known() ? Dim(static_cast<int64_t>(in.rank())) : Dim::unknown(),
                                             Dim::unknown()}));
    return Status::Ok();
  });
  r.add("TopK").inputs(1, 2).outputs(2, 2).opsets(1)
      .attr("k", AttrType::kInt).attr("axis", AttrType::kInt).attr("largest", AttrType::kInt)
      .attr("sorted", AttrType::kInt).infer(infer_topk);
  r.add("Trilu").inputs(1, 2).outputs(1, 1).opsets(14).attr("upper", AttrType::kInt).infer([](InferenceContext& c) {
    const Shape& in = c.input_shape(0);
    if (in.rank_known() && in.rank() < 2) return c.error("input must have rank >= 2, got ", in.to_string());
    return c.propagate_same(0, 0);
  });
  r.add("EyeLike").inputs(1, 1).outputs(1, 1).opsets(9)
      .attr("dtype", AttrType::kInt).attr("k", AttrType::kInt).infer([](InferenceContext& c) {
        const Shape& in = c.input_shape(0);
        if (in.rank_known() && in.rank() != 2) return c.error("input must be 2-D, got ", in.to_string());
        DataType dt = c.input_dtype(0);
        if (c.attrs().has("dtype")) {
          int64_t v = c.attrs().get_int("dtype", 1);
          if (!is_valid_data_type(static_cast<int32_t>(v))) return c.error("invalid dtype ", v);
          dt = static_cast<DataType>(v);
        }
        c.set_output(0, dt, in.rank_known() ? in : Shape(std::vector<Dim>(2)));
        return Status::Ok();
      });
  r.add("ReverseSequence").inputs(2, 2).outputs(1, 1).opsets(10)
      .attr("batch_axis", AttrType::kInt).attr("time_axis", AttrType::kInt).infer([](InferenceContext& c) {
        const Shape& in = c.input_shape(0);
        int64_t b = c.attrs().get_int("batch_axis", 1), t = c.attrs().get_int("time_axis", 0);
        if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
          return c.error("batch_axis and time_axis must be 0 and 1 in some order");
        if (in.rank_known() && in.rank() < 2) return c.error("input must have rank >= 2");
        return c.propagate_same(0, 0);
      });
  r.add("Compress").inputs(2, 2).outputs(1, 1).opsets(9).attr("axis", AttrType::kInt).infer(infer_compress);
  r.add("Unique").inputs(1, 1).outputs(1, 4).opsets(11)
      .attr("axis", AttrType::kInt).attr("sorted", AttrType::kInt).infer(infer_unique);
  r.add("CenterCropPad").inputs(2, 2).outputs(1, 1).opsets(18).attr("axes", AttrType::kInts)
      .infer(infer_center_crop_pad);
}

}  // namespace ingot::ir
