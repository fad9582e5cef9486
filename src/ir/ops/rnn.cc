// Copyright ingot authors. Apache-2.0.
//
// rnn family: RNN, GRU, LSTM (opset 7+, `layout` from opset 14).
//
// Inputs: X, W, R, [B], [sequence_lens], [initial_h] (+ [initial_c], [P] for LSTM).
// Outputs (all optional): Y, Y_h (+ Y_c for LSTM).
//   layout 0: X [seq, batch, in], Y [seq, dirs, batch, hidden], Y_h [dirs, batch, hidden]
//   layout 1: X [batch, seq, in], Y [batch, seq, dirs, hidden], Y_h [batch, dirs, hidden]
#include <string>
#include <vector>

#include "ir/ops/all_ops.h"

namespace ingot::ir {
namespace {

bool is_float_type(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16 || t == DataType::kUndefined;
}

// `gates`: 1 for RNN, 3 for GRU, 4 for LSTM; `num_state_outputs`: 2 (Y, Y_h) or 3 (+ Y_c).
Status infer_recurrent(InferenceContext& c, int64_t gates, size_t num_state_outputs) {
  const Attributes& a = c.attrs();
  DataType dt = c.input_dtype(0);
  if (!is_float_type(dt)) return c.error("X must be a floating-point tensor");
  std::string direction = a.get_string("direction", "forward");
  int64_t dirs;
  if (direction == "forward" || direction == "reverse") {
    dirs = 1;
  } else if (direction == "bidirectional") {
    dirs = 2;
  } else {
    return c.error("unknown direction '", direction, "'");
  }
  int64_t layout = a.get_int("layout", 0);
  if (layout != 0 && layout != 1) return c.error("layout must be 0 or 1, got ", layout);
  if (a.has("hidden_size") && a.get_int("hidden_size", 0) <= 0)
    return c.error("hidden_size must be positive");
  if (a.has("input_forget")) {
    int64_t v = a.get_int("input_forget", 0);
    if (v != 0 && v != 1) return c.error("input_forget must be 0 or 1");
  }

  const Shape& x = c.input_shape(0);
  const Shape& w = c.input_shape(1);
  const Shape& r = c.input_shape(2);
  Dim seq, batch, in_size, hidden;
  if (x.rank_known()) {
    if (x.rank() != 3) return c.error("X must be 3-D, got ", x.to_string());
    seq = layout == 0 ? x[0] : x[1];
    batch = layout == 0 ? x[1] : x[0];
    in_size = x[2];
  }
  if (a.has("hidden_size")) hidden = Dim(a.get_int("hidden_size", 0));
  if (w.rank_known()) {
    if (w.rank() != 3) return c.error("W must be 3-D, got ", w.to_string());
    if (w[0].is_known() && w[0].value() != dirs)
      return c.error("W has ", w[0].value(), " directions, direction '", direction, "' needs ", dirs);
    if (w[1].is_known()) {
      if (w[1].value() % gates != 0) return c.error("W dim 1 (", w[1].value(), ") is not a multiple of ", gates);
      Dim h(w[1].value() / gates);
      if (hidden.is_known() && hidden.value() != h.value())
        return c.error("W implies hidden size ", h.value(), " but hidden_size is ", hidden.value());
      if (!hidden.is_known()) hidden = h;
    }
    if (in_size.is_known() && w[2].is_known() && in_size.value() != w[2].value())
      return c.error("W input size ", w[2].value(), " differs from X input size ", in_size.value());
  }
  if (r.rank_known()) {
    if (r.rank() != 3) return c.error("R must be 3-D, got ", r.to_string());
    if (r[0].is_known() && r[0].value() != dirs)
      return c.error("R has ", r[0].value(), " directions, direction '", direction, "' needs ", dirs);
    if (r[2].is_known()) {
      if (hidden.is_known() && hidden.value() != r[2].value())
        return c.error("R implies hidden size ", r[2].value(), " but expected ", hidden.value());
      if (!hidden.is_known()) hidden = r[2];
    }
    if (r[1].is_known() && hidden.is_known() && r[1].value() != gates * hidden.value())
      return c.error("R dim 1 is ", r[1].value(), ", expected ", gates * hidden.value());
  }
  if (c.has_input(3) && c.input_shape(3).rank_known()) {
    const Shape& b = c.input_shape(3);
    if (b.rank() != 2) return c.error("B must be 2-D, got ", b.to_string());
    if (b[1].is_known() && hidden.is_known() && b[1].value() != 2 * gates * hidden.value())
      return c.error("B dim 1 is ", b[1].value(), ", expected ", 2 * gates * hidden.value());
  }
  if (c.has_input(4) && c.input_shape(4).rank_known() && c.input_shape(4).rank() != 1)
    return c.error("sequence_lens must be 1-D, got ", c.input_shape(4).to_string());

  Shape y = layout == 0 ? Shape{seq, Dim(dirs), batch, hidden} : Shape{batch, seq, Dim(dirs), hidden};
  Shape yh = layout == 0 ? Shape{Dim(dirs), batch, hidden} : Shape{batch, Dim(dirs), hidden};
  if (c.has_output(0)) c.set_output(0, dt, y);
  for (size_t i = 1; i < num_state_outputs; ++i)
    if (c.has_output(i)) c.set_output(i, dt, yh);
  return Status::Ok();
}

OpSchema& common_attrs(OpSchema& s) {
  return s.attr("activation_alpha", AttrType::kFloats)
      .attr("activation_beta", AttrType::kFloats)
      .attr("activations", AttrType::kStrings)
      .attr("clip", AttrType::kFloat)
      .attr("direction", AttrType::kString)
      .attr("hidden_size", AttrType::kInt)
      .attr("layout", AttrType::kInt);
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  common_attrs(r.add("RNN").inputs(3, 6).outputs(0, 2).opsets(7))
      .infer([](InferenceContext& c) { return infer_recurrent(c, 1, 2); });
  common_attrs(r.add("GRU").inputs(3, 6).outputs(0, 2).opsets(7))
      .attr("linear_before_reset", AttrType::kInt)
      .infer([](InferenceContext& c) { return infer_recurrent(c, 3, 2); });
  common_attrs(r.add("LSTM").inputs(3, 8).outputs(0, 3).opsets(7))
      .attr("input_forget", AttrType::kInt)
      .infer([](InferenceContext& c) { return infer_recurrent(c, 4, 3); });
}

}  // namespace ingot::ir
