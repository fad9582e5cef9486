// Copyright ingot authors. Apache-2.0.
//
// If, Loop and Scan. Their bodies are graphs held by attributes; inference types the body
// inputs from the node's inputs, runs infer_graph on the body and derives the node's output
// types from the body outputs. Only tensor values are supported: sequence or optional values
// crossing the subgraph boundary are reported as unsupported.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

namespace {

// Same rank: dims that differ become unknown; otherwise the rank is unknown.
Shape merge_shapes(const Shape& a, const Shape& b) {
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank()) return Shape::unknown_rank();
  Shape out = a;
  for (size_t i = 0; i < a.rank(); ++i)
    if (a[i] != b[i]) out[i] = Dim::unknown();
  return out;
}

// At run time the executor passes every input value and the node's outputs were typed at
// import: the kernel sizes its outputs itself, so the body need not be re-inferred (which
// would mutate the shared graph on every execution).
bool skip_body_inference(const InferenceContext& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i) && !c.input_value(i)) return false;
  for (const Value* o : c.node().outputs())
    if (o && !o->has_type()) return false;
  return true;
}

// "a sequence", "an optional".
std::string kind_phrase(const std::string& kind) {
  bool vowel = !kind.empty() && std::string("aeiou").find(kind[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + kind;
}

Status check_tensor_values(const InferenceContext& c, const Graph& body, const char* attr) {
  for (const Value* v : body.inputs())
    if (!v->non_tensor_kind().empty())
      return unsupported(c.node().describe(), ": ", attr, " input '", v->name(), "' is ", kind_phrase(v->non_tensor_kind()),
                         "; only tensors are supported across subgraph boundaries");
  for (const Value* v : body.outputs())
    if (!v->non_tensor_kind().empty())
      return unsupported(c.node().describe(), ": ", attr, " output '", v->name(), "' is ", kind_phrase(v->non_tensor_kind()),
                         "; only tensors are supported across subgraph boundaries");
  for (const Value* v : c.node().inputs())
    if (v && !v->non_tensor_kind().empty())
      return unsupported(c.node().describe(), ": input '", v->name(), "' is ", kind_phrase(v->non_tensor_kind()),
                         "; only tensors are supported");
  for (const Value* v : c.node().outputs())
    if (v && !v->non_tensor_kind().empty())
      return unsupported(c.node().describe(), ": output '", v->name(), "' is ", kind_phrase(v->non_tensor_kind()),
                         "; only tensors are supported");
  return Status::Ok();
}

Result<Graph*> body_graph(const InferenceContext& c, const char* attr) {
  const Graph* g = c.attrs().get_graph(attr);
  if (!g) return c.error("missing graph attribute '", attr, "'");
  INGOT_RETURN_IF_ERROR(check_tensor_values(c, *g, attr));
  return const_cast<Graph*>(g);
}

// Types a body input from what the node knows, keeping what the model declared.
void type_body_input(Value* in, DataType dtype, const Shape& shape) {
  if (!in->has_type() && dtype != DataType::kUndefined) in->set_dtype(dtype);
  if (!in->shape().rank_known()) in->set_shape(shape);
}

Status infer_body(const InferenceContext& c, Graph& body, const char* attr) {
  Status s = infer_graph(body);
  if (s.ok()) return s;
  return Status(s.code(), c.node().describe() + ": in " + attr + ": " + s.message());
}

// Forgets shapes computed inside the body so a second inference pass can relax them.
void forget_body_shapes(Graph& body) {
  for (const auto& n : body.nodes())
    for (Value* o : n->outputs())
      if (o) o->set_shape(Shape::unknown_rank());
}

Status infer_if(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(Graph * then_g, body_graph(c, "then_branch"));
  INGOT_ASSIGN_OR_RETURN(Graph * else_g, body_graph(c, "else_branch"));
  if (then_g->outputs().size() != c.num_outputs() || else_g->outputs().size() != c.num_outputs())
    return c.error("then_branch has ", then_g->outputs().size(), " outputs and else_branch ",
                   else_g->outputs().size(), ", the node ", c.num_outputs());
  if (!then_g->inputs().empty() || !else_g->inputs().empty()) return c.error("If branches take no inputs");
  if (c.input_shape(0).rank_known()) {
    int64_t n = 1;
    for (const Dim& d : c.input_shape(0).dims()) n = d.is_known() && n >= 0 ? mul_dims(n, d.value()) : -1;
    if (n >= 0 && n != 1) return c.error("cond must hold one element, got shape ", c.input_shape(0).to_string());
  }
  if (skip_body_inference(c)) return Status::Ok();
  INGOT_RETURN_IF_ERROR(infer_body(c, *then_g, "then_branch"));
  INGOT_RETURN_IF_ERROR(infer_body(c, *else_g, "else_branch"));
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    const Value* a = then_g->outputs()[i];
    const Value* b = else_g->outputs()[i];
    if (a->has_type() && b->has_type() && a->dtype() != b->dtype())
      return c.error("output ", i, " is ", data_type_name(a->dtype()), " in then_branch but ",
                     data_type_name(b->dtype()), " in else_branch");
    DataType dt = a->has_type() ? a->dtype() : b->dtype();
    c.set_output(i, dt, merge_shapes(a->shape(), b->shape()));
  }
  return Status::Ok();
}

Status infer_loop(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(Graph * body, body_graph(c, "body"));
  size_t n_carried = c.num_inputs() >= 2 ? c.num_inputs() - 2 : 0;
  if (body->inputs().size() != n_carried + 2)
    return c.error("body takes ", body->inputs().size(), " inputs; expected ", n_carried + 2,
                   " (iteration number, condition and ", n_carried, " loop-carried values)");
  if (body->outputs().size() < n_carried + 1)
    return c.error("body has ", body->outputs().size(), " outputs; expected at least ", n_carried + 1);
  size_t n_scan = body->outputs().size() - 1 - n_carried;
  if (c.num_outputs() != n_carried + n_scan)
    return c.error("node has ", c.num_outputs(), " outputs; the body produces ", n_carried,
                   " loop-carried values and ", n_scan, " scan outputs");
  for (size_t i = 0; i < n_carried; ++i)
    if (!c.has_input(2 + i))
      return unsupported(c.node().describe(), ": loop-carried value ", i,
                         " is omitted (an empty optional); only tensors are supported");
  if (c.has_input(0) && c.input_shape(0).rank_known() && c.input_shape(0).rank() > 1)
    return c.error("M must be a scalar");
  if (skip_body_inference(c)) return Status::Ok();
  type_body_input(body->inputs()[0], DataType::kInt64, Shape{});
  type_body_input(body->inputs()[1], DataType::kBool, Shape{});
  for (size_t i = 0; i < n_carried; ++i)
    type_body_input(body->inputs()[2 + i], c.input_dtype(2 + i), c.input_shape(2 + i));
  INGOT_RETURN_IF_ERROR(infer_body(c, *body, "body"));
  // A loop-carried value whose shape changes between iterations: relax and infer again.
  bool relaxed = false;
  for (size_t i = 0; i < n_carried; ++i) {
    Value* in = body->inputs()[2 + i];
    Shape merged = merge_shapes(in->shape(), body->outputs()[1 + i]->shape());
    if (merged != in->shape()) {
      in->set_shape(merged);
      relaxed = true;
    }
  }
  if (relaxed) {
    forget_body_shapes(*body);
    INGOT_RETURN_IF_ERROR(infer_body(c, *body, "body"));
  }
  for (size_t i = 0; i < n_carried; ++i) {
    const Value* out = body->outputs()[1 + i];
    DataType dt = out->has_type() ? out->dtype() : c.input_dtype(2 + i);
    c.set_output(i, dt, merge_shapes(c.input_shape(2 + i), out->shape()));
  }
  for (size_t k = 0; k < n_scan; ++k) {
    const Value* out = body->outputs()[1 + n_carried + k];
    Shape s = Shape::unknown_rank();
    if (out->shape().rank_known()) {
      std::vector<Dim> dims{Dim::unknown()};
      for (const Dim& d : out->shape().dims()) dims.push_back(d);
      s = Shape(dims);
    }
    c.set_output(n_carried + k, out->dtype(), s);
  }
  return Status::Ok();
}

// Removes dim `axis` of a rank-known shape.
Shape drop_dim(const Shape& s, int64_t axis) {
  std::vector<Dim> dims = s.dims();
  dims.erase(dims.begin() + axis);
  return Shape(dims);
}

Status infer_scan(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(Graph * body, body_graph(c, "body"));
  int64_t m = c.attrs().get_int("num_scan_inputs", -1);
  bool v8 = c.opset() < 9;
  size_t first = v8 ? 1 : 0;  // opset 8 starts with the optional sequence_lens
  if (m < 1 || static_cast<size_t>(m) + first > c.num_inputs())
    return c.error("num_scan_inputs ", m, " does not fit the ", c.num_inputs(), " inputs");
  size_t n_state = c.num_inputs() - first - static_cast<size_t>(m);
  if (body->inputs().size() != n_state + static_cast<size_t>(m))
    return c.error("body takes ", body->inputs().size(), " inputs; expected ", n_state + m);
  if (body->outputs().size() < n_state || c.num_outputs() != body->outputs().size())
    return c.error("node has ", c.num_outputs(), " outputs, body ", body->outputs().size(), " (", n_state,
                   " state variables)");
  size_t n_scan_out = body->outputs().size() - n_state;
  std::vector<int64_t> in_axes = c.attrs().get_ints("scan_input_axes");
  std::vector<int64_t> out_axes = c.attrs().get_ints("scan_output_axes");
  if (!in_axes.empty() && in_axes.size() != static_cast<size_t>(m))
    return c.error("scan_input_axes has ", in_axes.size(), " entries for ", m, " scan inputs");
  if (!out_axes.empty() && out_axes.size() != n_scan_out)
    return c.error("scan_output_axes has ", out_axes.size(), " entries for ", n_scan_out, " scan outputs");
  for (size_t i = 0; i < first + n_state + m; ++i)
    if (i >= first && !c.has_input(i)) return c.error("input ", i, " is required");
  // Sequence length (and batch for opset 8) from the scan inputs.
  Dim seq = Dim::unknown(), batch = Dim::unknown();
  std::vector<Shape> slice_shapes;
  for (int64_t j = 0; j < m; ++j) {
    const Shape& s = c.input_shape(first + n_state + j);
    if (!s.rank_known()) {
      slice_shapes.push_back(Shape::unknown_rank());
      continue;
    }
    if (v8) {
      if (s.rank() < 2) return c.error("scan input ", j, " needs rank >= 2 (batch, sequence), got ", s.to_string());
      if (j == 0) batch = s[0], seq = s[1];
      slice_shapes.push_back(drop_dim(drop_dim(s, 0), 0));
    } else {
      int64_t a = in_axes.empty() ? 0 : in_axes[j];
      auto na = normalize_axis(a, static_cast<int64_t>(s.rank()));
      if (!na.ok()) return c.error("scan_input_axes[", j, "]: ", na.status().message());
      if (seq.is_unknown()) seq = s[*na];
      slice_shapes.push_back(drop_dim(s, *na));
    }
  }
  if (skip_body_inference(c)) return Status::Ok();
  for (size_t i = 0; i < n_state; ++i) {
    Shape s = c.input_shape(first + i);
    if (v8 && s.rank_known()) {
      if (s.rank() < 1) return c.error("state input ", i, " needs a batch dim");
      s = drop_dim(s, 0);
    }
    type_body_input(body->inputs()[i], c.input_dtype(first + i), s);
  }
  for (int64_t j = 0; j < m; ++j)
    type_body_input(body->inputs()[n_state + j], c.input_dtype(first + n_state + j), slice_shapes[j]);
  INGOT_RETURN_IF_ERROR(infer_body(c, *body, "body"));
  for (size_t i = 0; i < n_state; ++i) {
    const Value* out = body->outputs()[i];
    Shape s = merge_shapes(body->inputs()[i]->shape(), out->shape());
    if (v8 && s.rank_known()) {
      std::vector<Dim> dims{batch};
      for (const Dim& d : s.dims()) dims.push_back(d);
      s = Shape(dims);
    }
    c.set_output(i, out->has_type() ? out->dtype() : c.input_dtype(first + i), s);
  }
  for (size_t k = 0; k < n_scan_out; ++k) {
    const Value* out = body->outputs()[n_state + k];
    Shape s = Shape::unknown_rank();
    if (out->shape().rank_known()) {
      std::vector<Dim> dims = out->shape().dims();
      if (v8) {
        dims.insert(dims.begin(), seq);
        dims.insert(dims.begin(), batch);
      } else {
        int64_t a = out_axes.empty() ? 0 : out_axes[k];
        auto na = normalize_axis(a, static_cast<int64_t>(dims.size()) + 1);
        if (!na.ok()) return c.error("scan_output_axes[", k, "]: ", na.status().message());
        dims.insert(dims.begin() + *na, seq);
      }
      s = Shape(dims);
    }
    c.set_output(n_state + k, out->dtype(), s);
  }
  return Status::Ok();
}

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
  r.add("If").inputs(1, 1).outputs(1, -1).opsets(1)
      .attr("then_branch", AttrType::kGraph, true)
      .attr("else_branch", AttrType::kGraph, true)
      .infer(infer_if);
  r.add("Loop").inputs(0, -1).outputs(1, -1).opsets(1)
      .attr("body", AttrType::kGraph, true)
      .infer(infer_loop);
  r.add("Scan").inputs(0, -1).outputs(1, -1).opsets(8)
      .attr("body", AttrType::kGraph, true)
      .attr("num_scan_inputs", AttrType::kInt, true)
      .attr("directions", AttrType::kInts)
      .attr("scan_input_axes", AttrType::kInts)
      .attr("scan_input_directions", AttrType::kInts)
      .attr("scan_output_axes", AttrType::kInts)
      .attr("scan_output_directions", AttrType::kInts)
      .infer(infer_scan);
}

}  // namespace ingot::ir
