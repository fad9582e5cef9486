// Copyright ingot authors. Apache-2.0.
//
// Normalization ops (BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN) and
// the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

namespace {

// Checks that `axis` is valid for input 0 (when its rank is known) and returns it normalized
// (or -1 when the rank is unknown).
Result<int64_t> checked_axis(InferenceContext& c, int64_t axis) {
  const Shape& in = c.input_shape(0);
  if (!in.rank_known()) return int64_t{-1};
  auto n = normalize_axis(axis, static_cast<int64_t>(in.rank()));
  if (!n.ok()) return c.error("axis ", axis, " out of range for rank ", in.rank());
  return *n;
}

// Input 0 needs rank >= `min_rank` when its rank is known.
Status require_rank(InferenceContext& c, size_t min_rank) {
  const Shape& in = c.input_shape(0);
  if (in.rank_known() && in.rank() < min_rank)
    return c.error("input must have rank >= ", min_rank, ", got ", in.to_string());
  return Status::Ok();
}

Status infer_batchnorm(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(require_rank(c, 2));
  INGOT_RETURN_IF_ERROR(c.propagate_same(0, 0));
  for (size_t o = 1; o < c.num_outputs(); ++o) {
    if (!c.has_output(o)) continue;
    size_t src = (o % 2 == 1) ? 3 : 4;  // mean-like outputs follow input 3, var-like input 4
    c.set_output(o, c.input_dtype(src), c.input_shape(src));
  }
  return Status::Ok();
}

Status infer_layernorm(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(c.propagate_same(0, 0));
  INGOT_ASSIGN_OR_RETURN(int64_t axis, checked_axis(c, c.attrs().get_int("axis", -1)));
  const int64_t stash = c.attrs().get_int("stash_type", 1);
  if (!is_valid_data_type(static_cast<int32_t>(stash)) || !is_float(static_cast<DataType>(stash)))
    return c.error("stash_type ", stash, " is not a floating type");
  const Shape& in = c.input_shape(0);
  Shape stat = Shape::unknown_rank();
  if (in.rank_known()) {
    std::vector<Dim> d;
    for (size_t i = 0; i < in.rank(); ++i) d.push_back(static_cast<int64_t>(i) < axis ? in[i] : Dim(1));
    stat = Shape(d);
  }
  for (size_t o = 1; o < 3; ++o)
    if (c.has_output(o)) c.set_output(o, static_cast<DataType>(stash), stat);
  return Status::Ok();
}

Status infer_loss(InferenceContext& c) {
  if (!c.has_input(0) || !c.has_input(1)) return c.error("inputs scores and target are required");
  const std::string reduction = c.attrs().get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return c.error("reduction must be 'none', 'sum' or 'mean', got '", reduction, "'");
  const Shape& x = c.input_shape(0);
  const Shape& t = c.input_shape(1);
  if (x.rank_known() && x.rank() < 2) return c.error("input must have rank >= 2, got ", x.to_string());
  if (x.rank_known() && t.rank_known() && t.rank() + 1 != x.rank())
    return c.error("target rank ", t.rank(), " must be input rank ", x.rank(), " - 1");
  DataType tt = c.input_dtype(1);
  if (tt != DataType::kUndefined && tt != DataType::kInt32 && tt != DataType::kInt64)
    return c.error("target must be int32 or int64, got ", data_type_name(tt));
  if (reduction == "none") {
    Shape out = t;
    if (!t.rank_known() && x.rank_known()) {
      std::vector<Dim> d;
      for (size_t i = 0; i < x.rank(); ++i)
        if (i != 1) d.push_back(x[i]);
      out = Shape(d);
    }
    c.set_output(0, c.input_dtype(0), out);
  } else {
    c.set_output(0, c.input_dtype(0), Shape());
  }
  if (c.num_outputs() > 1 && c.has_output(1)) c.set_output(1, c.input_dtype(0), x);
  return Status::Ok();
}

}  // namespace

void register_reduction_norm_ops(OpRegistry& r) {
  r.add("BatchNormalization").inputs(5, 5).outputs(1, 5).opsets(1)
      .attr("epsilon", AttrType::kFloat)
      .attr("momentum", AttrType::kFloat)
      .attr("training_mode", AttrType::kInt)
      .attr("spatial", AttrType::kInt)
      .attr("is_test", AttrType::kInt)
      .attr("consumed_inputs", AttrType::kInts)
      .infer(infer_batchnorm);
  r.add("InstanceNormalization").inputs(3, 3).outputs(1, 1).opsets(1)
      .attr("epsilon", AttrType::kFloat)
      .attr("consumed_inputs", AttrType::kInts)
      .infer([](InferenceContext& c) {
        INGOT_RETURN_IF_ERROR(require_rank(c, 3));
        return c.propagate_same(0, 0);
      });
  r.add("LayerNormalization").inputs(2, 3).outputs(1, 3).opsets(17)
      .attr("axis", AttrType::kInt)
      .attr("epsilon", AttrType::kFloat)
      .attr("stash_type", AttrType::kInt)
      .infer(infer_layernorm);
  r.add("GroupNormalization").inputs(3, 3).outputs(1, 1).opsets(18)
      .attr("num_groups", AttrType::kInt, true)
      .attr("epsilon", AttrType::kFloat)
      .attr("stash_type", AttrType::kInt)
      .infer([](InferenceContext& c) {
        INGOT_RETURN_IF_ERROR(require_rank(c, 2));
        const int64_t g = c.attrs().get_int("num_groups", 0);
        if (g <= 0) return c.error("num_groups must be positive, got ", g);
        const Shape& in = c.input_shape(0);
        if (in.rank_known() && in[1].is_known() && in[1].value() % g != 0)
          return c.error("channels ", in[1].value(), " are not divisible by num_groups ", g);
        return c.propagate_same(0, 0);
      });
  r.add("RMSNormalization").inputs(2, 2).outputs(1, 1).opsets(23)
      .attr("axis", AttrType::kInt)
      .attr("epsilon", AttrType::kFloat)
      .attr("stash_type", AttrType::kInt)
      .infer([](InferenceContext& c) {
        INGOT_RETURN_IF_ERROR(checked_axis(c, c.attrs().get_int("axis", -1)).status());
        return c.propagate_same(0, 0);
      });
  r.add("LpNormalization").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("axis", AttrType::kInt)
      .attr("p", AttrType::kInt)
      .infer([](InferenceContext& c) {
        const int64_t p = c.attrs().get_int("p", 2);
        if (p != 1 && p != 2) return c.error("p must be 1 or 2, got ", p);
        INGOT_RETURN_IF_ERROR(checked_axis(c, c.attrs().get_int("axis", -1)).status());
        return c.propagate_same(0, 0);
      });
  r.add("MeanVarianceNormalization").inputs(1, 1).outputs(1, 1).opsets(9)
      .attr("axes", AttrType::kInts)
      .infer([](InferenceContext& c) {
        for (int64_t a : c.attrs().get_ints("axes", {0, 2, 3}))
          INGOT_RETURN_IF_ERROR(checked_axis(c, a).status());
        return c.propagate_same(0, 0);
      });
  r.add("LRN").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("alpha", AttrType::kFloat)
      .attr("beta", AttrType::kFloat)
      .attr("bias", AttrType::kFloat)
      .attr("size", AttrType::kInt, true)
      .infer([](InferenceContext& c) {
        INGOT_RETURN_IF_ERROR(require_rank(c, 2));
        const int64_t size = c.attrs().get_int("size", 0);
        if (size <= 0) return c.error("size must be positive, got ", size);
        return c.propagate_same(0, 0);
      });
  r.add("NegativeLogLikelihoodLoss").inputs(2, 3).outputs(1, 1).opsets(12)
      .attr("ignore_index", AttrType::kInt)
      .attr("reduction", AttrType::kString)
      .infer(infer_loss);
  r.add("SoftmaxCrossEntropyLoss").inputs(2, 3).outputs(1, 2).opsets(12)
      .attr("ignore_index", AttrType::kInt)
      .attr("reduction", AttrType::kString)
      .infer(infer_loss);
}

}  // namespace ingot::ir
