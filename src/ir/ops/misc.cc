// Copyright ingot authors. Apache-2.0.
//
// Miscellaneous ops: signal processing (DFT, STFT, windows, MelWeightMatrix),
// NonMaxSuppression and Det. String ops, TfIdfVectorizer and the ai.onnx.ml ops are in
// misc_strings.cc.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_misc_string_ops(OpRegistry& r);  // misc_strings.cc

namespace {

// The scalar integer value of input i, when known.
bool known_int(const InferenceContext& c, size_t i, int64_t* v) {
  const Tensor* t = c.input_value(i);
  if (!t || t->numel() != 1) return false;
  *v = t->get_i64(0);
  return true;
}

Result<DataType> output_datatype(const InferenceContext& c, int64_t fallback) {
  int64_t dt = c.attrs().get_int("output_datatype", fallback);
  if (!is_valid_data_type(static_cast<int32_t>(dt)) || !is_float(static_cast<DataType>(dt)))
    return c.error("output_datatype ", dt, " is not a supported floating type");
  return static_cast<DataType>(dt);
}

Status infer_dft(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  bool inverse = c.attrs().get_int("inverse", 0) != 0;
  bool onesided = c.attrs().get_int("onesided", 0) != 0;
  DataType dt = c.input_dtype(0);
  if (!in.rank_known()) return c.set_output(0, dt, Shape::unknown_rank()), Status::Ok();
  int64_t r = static_cast<int64_t>(in.rank());
  if (r < 2) return c.error("input needs rank >= 2 ([..., signal, 1 or 2]), got ", in.to_string());
  if (in[r - 1].is_known() && in[r - 1].value() != 1 && in[r - 1].value() != 2)
    return c.error("the last dim must be 1 (real) or 2 (complex), got ", in.to_string());
  int64_t axis = 0;
  bool axis_known = true;
  if (c.opset() >= 20) {
    axis = -2;
    if (c.has_input(2)) axis_known = known_int(c, 2, &axis);
  } else {
    axis = c.attrs().get_int("axis", 1);
  }
  std::vector<Dim> dims = in.dims();
  dims[r - 1] = (inverse && onesided) ? 1 : 2;
  if (!axis_known) {
    for (int64_t i = 0; i < r - 1; ++i) dims[i] = Dim::unknown();
    c.set_output(0, dt, Shape(dims));
    return Status::Ok();
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r - 1) return c.error("axis out of range for input of rank ", r, " (the last dim is not a signal dim)");
  Dim n = Dim::unknown();
  if (c.has_input(1)) {
    int64_t len;
    if (known_int(c, 1, &len)) {
      if (len < 1) return c.error("dft_length must be positive, got ", len);
      n = len;
    }
  } else if (in[axis].is_known()) {
    n = (inverse && onesided) ? 2 * (in[axis].value() - 1) : in[axis].value();
  }
  if (n.is_known() && !inverse && onesided) n = n.value() / 2 + 1;
  dims[axis] = n;
  c.set_output(0, dt, Shape(dims));
  return Status::Ok();
}

Status infer_stft(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  DataType dt = c.input_dtype(0);
  if (in.rank_known() && in.rank() != 3)
    return c.error("signal must be [batch, length, 1 or 2], got ", in.to_string());
  int64_t fl = -1, step = -1;
  if (c.has_input(3)) known_int(c, 3, &fl);
  if (fl < 0 && c.has_input(2) && c.input_shape(2).rank_known()) {
    if (c.input_shape(2).rank() != 1) return c.error("window must be 1-D");
    if (c.input_shape(2)[0].is_known()) fl = c.input_shape(2)[0].value();
  }
  known_int(c, 1, &step);
  if (step == 0) return c.error("frame_step must be positive");
  bool onesided = c.attrs().get_int("onesided", 1) != 0;
  Dim batch = in.rank_known() ? in[0] : Dim::unknown();
  Dim frames = Dim::unknown(), bins = Dim::unknown();
  if (fl < 0 && !c.has_input(3) && !c.has_input(2) && in.rank_known() && in[1].is_known()) fl = in[1].value();
  if (fl >= 0) bins = onesided ? fl / 2 + 1 : fl;
  if (fl >= 0 && step > 0 && in.rank_known() && in[1].is_known()) {
    if (in[1].value() < fl) return c.error("frame_length ", fl, " exceeds the signal length ", in[1].value());
    frames = 1 + (in[1].value() - fl) / step;
  }
  c.set_output(0, dt, Shape{batch, frames, bins, 2});
  return Status::Ok();
}

Status infer_window(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(DataType dt, output_datatype(c, 1));
  int64_t n;
  if (c.input_shape(0).rank_known() && c.input_shape(0).rank() > 1) return c.error("size must be a scalar");
  if (known_int(c, 0, &n)) {
    if (n < 0) return c.error("size must be non-negative, got ", n);
    c.set_output(0, dt, Shape{n});
  } else {
    c.set_output(0, dt, Shape{Dim::unknown()});
  }
  return Status::Ok();
}

Status infer_mel(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(DataType dt, output_datatype(c, 1));
  int64_t mel, dft;
  Dim a = Dim::unknown(), b = Dim::unknown();
  if (known_int(c, 1, &dft)) a = dft / 2 + 1;
  if (known_int(c, 0, &mel)) b = mel;
  c.set_output(0, dt, Shape{a, b});
  return Status::Ok();
}

Status infer_nms(InferenceContext& c) {
  const Shape& boxes = c.input_shape(0);
  const Shape& scores = c.input_shape(1);
  if (boxes.rank_known() && (boxes.rank() != 3 || (boxes[2].is_known() && boxes[2].value() != 4)))
    return c.error("boxes must be [batches, boxes, 4], got ", boxes.to_string());
  if (scores.rank_known() && scores.rank() != 3)
    return c.error("scores must be [batches, classes, boxes], got ", scores.to_string());
  c.set_output(0, DataType::kInt64, Shape{Dim::unknown(), 3});
  return Status::Ok();
}

Status infer_det(InferenceContext& c) {
  const Shape& s = c.input_shape(0);
  if (!s.rank_known()) return c.set_output(0, c.input_dtype(0), Shape::unknown_rank()), Status::Ok();
  if (s.rank() < 2) return c.error("input must have rank >= 2, got ", s.to_string());
  const Dim& m = s[s.rank() - 2];
  const Dim& n = s[s.rank() - 1];
  if (m.is_known() && n.is_known() && m.value() != n.value())
    return c.error("the last two dims must be equal (square matrices), got ", s.to_string());
  std::vector<Dim> dims(s.dims().begin(), s.dims().end() - 2);
  c.set_output(0, c.input_dtype(0), Shape(dims));
  return Status::Ok();
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add("DFT").inputs(1, 3).outputs(1, 1).opsets(17)
      .attr("axis", AttrType::kInt)
      .attr("inverse", AttrType::kInt)
      .attr("onesided", AttrType::kInt)
      .infer(infer_dft);
  r.add("STFT").inputs(2, 4).outputs(1, 1).opsets(17)
      .attr("onesided", AttrType::kInt)
      .infer(infer_stft);
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    r.add(w).inputs(1, 1).outputs(1, 1).opsets(17)
        .attr("output_datatype", AttrType::kInt)
        .attr("periodic", AttrType::kInt)
        .infer(infer_window);
  r.add("MelWeightMatrix").inputs(5, 5).outputs(1, 1).opsets(17)
      .attr("output_datatype", AttrType::kInt)
      .infer(infer_mel);
  r.add("NonMaxSuppression").inputs(2, 5).outputs(1, 1).opsets(10)
      .attr("center_point_box", AttrType::kInt)
      .infer(infer_nms);
  r.add("Det").inputs(1, 1).outputs(1, 1).opsets(11)
      .infer(infer_det);
  register_misc_string_ops(r);
}

}  // namespace ingot::ir
