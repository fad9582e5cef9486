// Copyright ingot authors. Apache-2.0.
//
// Reductions (Reduce*, ArgMax/ArgMin), the softmax family and the cumulative ops. The
// normalization ops and the losses are in reduction_norm.cc.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_reduction_norm_ops(OpRegistry& r);  // reduction_norm.cc

namespace {

// Integer contents of a small index tensor (axes).
std::vector<int64_t> index_values(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

// Opset from which the op takes `axes` as an input rather than an attribute.
int64_t axes_input_opset(const std::string& op) { return op == "ReduceSum" ? 13 : 18; }

Status infer_reduce(InferenceContext& c) {
  if (!c.has_input(0)) return c.error("input 0 is missing");
  const DataType dt = c.input_dtype(0);
  const Shape& in = c.input_shape(0);
  const bool keepdims = c.attrs().get_int("keepdims", 1) != 0;
  const bool noop = c.attrs().get_int("noop_with_empty_axes", 0) != 0;
  const bool axes_from_input = c.opset() >= axes_input_opset(c.node().op_type());
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (c.attrs().has("axes")) return c.error("attribute 'axes' is not allowed from opset ", c.opset());
    if (c.has_input(1)) {
      const Tensor* v = c.input_value(1);
      if (!v) {
        // Axes unknown: the rank is known only when dims are kept.
        if (!in.rank_known()) { c.set_output(0, dt, Shape::unknown_rank()); return Status::Ok(); }
        const Shape& as = c.input_shape(1);
        if (keepdims) {
          c.set_output(0, dt, Shape(std::vector<Dim>(in.rank(), Dim::unknown())));
        } else if (as.rank_known() && as.rank() == 1 && as[0].is_known() && as[0].value() > 0) {
          int64_t r = static_cast<int64_t>(in.rank()) - as[0].value();
          c.set_output(0, dt, r >= 0 ? Shape(std::vector<Dim>(static_cast<size_t>(r), Dim::unknown()))
                                     : Shape::unknown_rank());
        } else {
          c.set_output(0, dt, Shape::unknown_rank());
        }
        return Status::Ok();
      }
      if (v->rank() > 1) return c.error("axes must be a 1-D tensor, got rank ", v->rank());
      axes = index_values(*v);
    }
  } else {
    if (c.has_input(1)) return c.error("axes input is not allowed before opset ", axes_input_opset(c.node().op_type()));
    axes = c.attrs().get_ints("axes");
  }
  if (axes.empty() && noop && axes_from_input) return c.propagate_same(0, 0);
  if (!in.rank_known()) { c.set_output(0, dt, Shape::unknown_rank()); return Status::Ok(); }
  const int64_t rank = static_cast<int64_t>(in.rank());
  std::vector<bool> reduce(in.rank(), axes.empty());
  for (int64_t a : axes) {
    auto n = normalize_axis(a, rank);
    if (!n.ok()) return c.error("axis ", a, " out of range for rank ", rank);
    reduce[static_cast<size_t>(*n)] = true;
  }
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i) {
    if (!reduce[i]) out.push_back(in[i]);
    else if (keepdims) out.push_back(Dim(1));
  }
  c.set_output(0, dt, Shape(out));
  return Status::Ok();
}

Status infer_arg(InferenceContext& c) {
  if (!c.has_input(0)) return c.error("input 0 is missing");
  const Shape& in = c.input_shape(0);
  const bool keepdims = c.attrs().get_int("keepdims", 1) != 0;
  if (!in.rank_known()) { c.set_output(0, DataType::kInt64, Shape::unknown_rank()); return Status::Ok(); }
  const int64_t rank = static_cast<int64_t>(in.rank());
  int64_t a = c.attrs().get_int("axis", 0);
  auto n = normalize_axis(a, rank);
  if (!n.ok()) return c.error("axis ", a, " out of range for rank ", rank);
  std::vector<Dim> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != *n) out.push_back(in[static_cast<size_t>(i)]);
    else if (keepdims) out.push_back(Dim(1));
  }
  c.set_output(0, DataType::kInt64, Shape(out));
  return Status::Ok();
}

Status infer_softmax(InferenceContext& c) {
  if (!c.has_input(0)) return c.error("input 0 is missing");
  const Shape& in = c.input_shape(0);
  if (in.rank_known()) {
    const int64_t rank = static_cast<int64_t>(in.rank());
    int64_t a = c.attrs().get_int("axis", c.opset() >= 13 ? -1 : 1);
    // Before opset 13 the input is coerced to 2-D at `axis`, which may equal the rank.
    bool ok = c.opset() >= 13 ? normalize_axis(a, rank).ok() : (a >= -rank && a <= rank);
    if (rank == 0 && c.opset() >= 13) ok = (a == 0 || a == -1);
    if (!ok) return c.error("axis ", a, " out of range for rank ", rank);
  }
  return c.propagate_same(0, 0);
}

Status infer_cumulative(InferenceContext& c) {
  if (!c.has_input(0) || !c.has_input(1)) return c.error("inputs x and axis are required");
  const Shape& as = c.input_shape(1);
  if (as.rank_known() && as.rank() > 1) return c.error("axis must be a scalar, got shape ", as.to_string());
  const DataType at = c.input_dtype(1);
  if (at != DataType::kUndefined && at != DataType::kInt32 && at != DataType::kInt64)
    return c.error("axis must be int32 or int64, got ", data_type_name(at));
  const Tensor* v = c.input_value(1);
  const Shape& in = c.input_shape(0);
  if (v && in.rank_known()) {
    if (v->numel() != 1) return c.error("axis must hold one value, got ", v->numel());
    int64_t a = v->get_i64(0);
    if (!normalize_axis(a, static_cast<int64_t>(in.rank())).ok())
      return c.error("axis ", a, " out of range for rank ", in.rank());
  }
  return c.propagate_same(0, 0);
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    r.add(op).inputs(1, 2).outputs(1, 1).opsets(1)
        .attr("axes", AttrType::kInts)
        .attr("keepdims", AttrType::kInt)
        .attr("noop_with_empty_axes", AttrType::kInt)
        .infer(infer_reduce);
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    r.add(op).inputs(1, 1).outputs(1, 1).opsets(1)
        .attr("axis", AttrType::kInt)
        .attr("keepdims", AttrType::kInt)
        .attr("select_last_index", AttrType::kInt)
        .infer(infer_arg);
  }
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    r.add(op).inputs(1, 1).outputs(1, 1).opsets(1).attr("axis", AttrType::kInt).infer(infer_softmax);
  }
  r.add("CumSum").inputs(2, 2).outputs(1, 1).opsets(11)
      .attr("exclusive", AttrType::kInt)
      .attr("reverse", AttrType::kInt)
      .infer(infer_cumulative);
  r.add("CumProd").inputs(2, 2).outputs(1, 1).opsets(26)
      .attr("exclusive", AttrType::kInt)
      .attr("reverse", AttrType::kInt)
      .infer(infer_cumulative);
  register_reduction_norm_ops(r);
}

}  // namespace ingot::ir
