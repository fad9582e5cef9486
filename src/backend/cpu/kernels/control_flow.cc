// Copyright ingot authors. Apache-2.0.
//
// If, Loop and Scan: the body runs through KernelContext::run_subgraph; this file slices
// scan inputs and stacks per-iteration outputs.
#include <algorithm>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

namespace {

// Copies n elements of any dtype from src[src_off..] to dst[dst_off..].
void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) dst.mutable_strings()[dst_off + i] = src.strings()[src_off + i];
  } else if (is_sub_byte(src.dtype())) {
    bool fl = is_float(src.dtype());
    for (int64_t i = 0; i < n; ++i) {
      if (fl) dst.set_f64(dst_off + i, src.get_f64(src_off + i));
      else dst.set_i64(dst_off + i, src.get_i64(src_off + i));
    }
  } else {
    size_t es = static_cast<size_t>(data_type_bits(src.dtype()) / 8);
    std::memcpy(static_cast<uint8_t*>(dst.mutable_raw()) + dst_off * es,
                static_cast<const uint8_t*>(src.raw()) + src_off * es, n * es);
  }
}

// Element `idx` along `axis` (the axis removed).
Result<Tensor> take_along(const Tensor& t, size_t axis, int64_t idx) {
  Shape64 out_shape = t.shape();
  out_shape.erase(out_shape.begin() + axis);
  INGOT_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(t.dtype(), out_shape));
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= t.dim(i);
  for (size_t i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  int64_t d = t.dim(axis);
  for (int64_t o = 0; o < outer; ++o) copy_elems(t, (o * d + idx) * inner, out, o * inner, inner);
  return out;
}

// Writes `part` as element `idx` along `axis` of `dst` (whose shape is part's with the axis).
void put_along(const Tensor& part, Tensor& dst, size_t axis, int64_t idx) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= dst.dim(i);
  for (size_t i = axis + 1; i < dst.rank(); ++i) inner *= dst.dim(i);
  int64_t d = dst.dim(axis);
  for (int64_t o = 0; o < outer; ++o) copy_elems(part, o * inner, dst, (o * d + idx) * inner, inner);
}

Shape64 insert_dim(Shape64 s, size_t axis, int64_t n) {
  s.insert(s.begin() + axis, n);
  return s;
}

bool truthy(const Tensor& t) { return t.numel() > 0 && t.get_i64(0) != 0; }

Status check_body_tensor(const KernelContext& k, const ir::Graph& body) {
  for (const ir::Value* v : body.outputs())
    if (!v->non_tensor_kind().empty())
      return k.unsupported_case("body output '", v->name(), "' is not a tensor (", v->non_tensor_kind(), ")",
                                "; only tensors are supported");
  return Status::Ok();
}

Status run_if(KernelContext& k) {
  const Tensor& cond = *k.input(0);
  if (cond.numel() != 1) return k.error("cond must hold one element, got ", shape_to_string(cond.shape()));
  const ir::Graph* branch = k.attrs().get_graph(truthy(cond) ? "then_branch" : "else_branch");
  if (!branch) return k.error("missing branch graph");
  INGOT_RETURN_IF_ERROR(check_body_tensor(k, *branch));
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, k.run_subgraph(*branch, {}));
  if (outs.size() != k.num_outputs())
    return k.error("branch produced ", outs.size(), " outputs, the node has ", k.num_outputs());
  for (size_t i = 0; i < outs.size(); ++i)
    if (k.has_output(i)) k.output(i) = outs[i];
  return Status::Ok();
}

// Stacks per-iteration tensors along `axis` (reversed when `reverse`); `fallback` gives
// dtype and per-iteration shape when there were no iterations.
Result<Tensor> stack(const KernelContext& k, const std::vector<Tensor>& parts, size_t axis, bool reverse,
                     const ir::Value& decl, size_t which) {
  if (parts.empty()) {
    if (!decl.has_type()) return k.error("scan output ", which, " has no iterations and no declared type");
    Shape64 per;
    if (decl.shape().is_concrete()) per = decl.shape().concrete();
    if (axis > per.size()) axis = 0;
    return Tensor::zeros(decl.dtype(), insert_dim(per, axis, 0));
  }
  const Tensor& p0 = parts[0];
  if (axis > p0.rank()) return k.error("scan output axis ", axis, " out of range for rank ", p0.rank() + 1);
  for (size_t t = 1; t < parts.size(); ++t)
    if (parts[t].shape() != p0.shape() || parts[t].dtype() != p0.dtype())
      return k.error("scan output ", which, " changes shape between iterations: ", shape_to_string(p0.shape()),
                     " then ", shape_to_string(parts[t].shape()));
  int64_t n = static_cast<int64_t>(parts.size());
  INGOT_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(p0.dtype(), insert_dim(p0.shape(), axis, n)));
  for (int64_t t = 0; t < n; ++t) put_along(parts[t], out, axis, reverse ? n - 1 - t : t);
  return out;
}

Status run_loop(KernelContext& k) {
  const ir::Graph* body = k.attrs().get_graph("body");
  if (!body) return k.error("missing body graph");
  INGOT_RETURN_IF_ERROR(check_body_tensor(k, *body));
  size_t n_carried = k.num_inputs() - 2;
  if (body->inputs().size() != n_carried + 2 || body->outputs().size() < n_carried + 1)
    return k.error("body signature does not match the node");
  size_t n_scan = body->outputs().size() - 1 - n_carried;
  bool has_m = k.has_input(0), has_cond = k.has_input(1);
  if (!has_m && !has_cond) return k.unsupported_case("a Loop without trip count or condition never ends");
  int64_t max_trip = has_m ? k.input(0)->get_i64(0) : INT64_MAX;
  bool cond = has_cond ? truthy(*k.input(1)) : true;
  std::vector<Tensor> carried;
  for (size_t i = 0; i < n_carried; ++i) {
    if (!k.has_input(2 + i)) return k.unsupported_case("loop-carried value ", i, " is omitted");
    carried.push_back(*k.input(2 + i));
  }
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t it = 0; it < max_trip && cond; ++it) {
    std::vector<Tensor> ins;
    ins.push_back(Tensor::from_vector<int64_t>(DataType::kInt64, {}, {it}));
    ins.push_back(Tensor::from_vector<uint8_t>(DataType::kBool, {}, {static_cast<uint8_t>(cond)}));
    for (const Tensor& c : carried) ins.push_back(c);
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, k.run_subgraph(*body, ins));
    if (outs.size() != 1 + n_carried + n_scan) return k.error("body returned ", outs.size(), " outputs");
    if (has_cond) cond = truthy(outs[0]);
    for (size_t i = 0; i < n_carried; ++i) carried[i] = outs[1 + i];
    for (size_t j = 0; j < n_scan; ++j) scans[j].push_back(outs[1 + n_carried + j]);
  }
  for (size_t i = 0; i < n_carried; ++i)
    if (k.has_output(i)) k.output(i) = carried[i];
  for (size_t j = 0; j < n_scan; ++j) {
    if (!k.has_output(n_carried + j)) continue;
    INGOT_ASSIGN_OR_RETURN(k.output(n_carried + j),
                           stack(k, scans[j], 0, false, *body->outputs()[1 + n_carried + j], j));
  }
  return Status::Ok();
}

// One Scan pass over sequences of length `len` (scan inputs already sliced per batch for
// opset 8). Returns final states and, per scan output, the per-iteration values in order.
struct ScanResult {
  std::vector<Tensor> states;
  std::vector<std::vector<Tensor>> scans;
};

Result<ScanResult> scan_pass(KernelContext& k, const ir::Graph& body, std::vector<Tensor> states,
                             const std::vector<Tensor>& inputs, const std::vector<size_t>& axes,
                             const std::vector<bool>& reverse, int64_t len) {
  ScanResult r;
  size_t n_out = body.outputs().size() - states.size();
  r.scans.resize(n_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> ins = states;
    for (size_t j = 0; j < inputs.size(); ++j) {
      INGOT_ASSIGN_OR_RETURN(Tensor s, take_along(inputs[j], axes[j], reverse[j] ? len - 1 - t : t));
      ins.push_back(std::move(s));
    }
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, k.run_subgraph(body, ins));
    if (outs.size() != body.outputs().size()) return k.error("body returned ", outs.size(), " outputs");
    for (size_t i = 0; i < states.size(); ++i) states[i] = outs[i];
    for (size_t j = 0; j < n_out; ++j) r.scans[j].push_back(outs[states.size() + j]);
  }
  r.states = std::move(states);
  return r;
}

Status run_scan(KernelContext& k) {
  const ir::Graph* body = k.attrs().get_graph("body");
  if (!body) return k.error("missing body graph");
  INGOT_RETURN_IF_ERROR(check_body_tensor(k, *body));
  int64_t m = k.attrs().get_int("num_scan_inputs", 0);
  bool v8 = k.opset() < 9;
  size_t first = v8 ? 1 : 0;
  if (m < 1 || first + static_cast<size_t>(m) > k.num_inputs()) return k.error("bad num_scan_inputs ", m);
  size_t n_state = k.num_inputs() - first - static_cast<size_t>(m);
  if (body->inputs().size() != n_state + static_cast<size_t>(m) || body->outputs().size() < n_state)
    return k.error("body signature does not match the node");
  size_t n_out = body->outputs().size() - n_state;

  if (!v8) {
    std::vector<int64_t> in_axes = k.attrs().get_ints("scan_input_axes", std::vector<int64_t>(m, 0));
    std::vector<int64_t> in_dirs = k.attrs().get_ints("scan_input_directions", std::vector<int64_t>(m, 0));
    std::vector<int64_t> out_axes = k.attrs().get_ints("scan_output_axes", std::vector<int64_t>(n_out, 0));
    std::vector<int64_t> out_dirs = k.attrs().get_ints("scan_output_directions", std::vector<int64_t>(n_out, 0));
    if (in_axes.size() != static_cast<size_t>(m) || in_dirs.size() != static_cast<size_t>(m) ||
        out_axes.size() != n_out || out_dirs.size() != n_out)
      return k.error("scan axes/directions attributes have the wrong length");
    std::vector<Tensor> states, inputs;
    for (size_t i = 0; i < n_state; ++i) states.push_back(*k.input(i));
    std::vector<size_t> axes;
    std::vector<bool> rev;
    int64_t len = -1;
    for (int64_t j = 0; j < m; ++j) {
      const Tensor& x = *k.input(n_state + j);
      int64_t a = in_axes[j] < 0 ? in_axes[j] + static_cast<int64_t>(x.rank()) : in_axes[j];
      if (a < 0 || a >= static_cast<int64_t>(x.rank()))
        return k.error("scan_input_axes[", j, "] = ", in_axes[j], " out of range for rank ", x.rank());
      if (len >= 0 && x.dim(a) != len)
        return k.error("scan inputs have different sequence lengths (", len, " and ", x.dim(a), ")");
      len = x.dim(a);
      inputs.push_back(x);
      axes.push_back(static_cast<size_t>(a));
      rev.push_back(in_dirs[j] != 0);
    }
    INGOT_ASSIGN_OR_RETURN(ScanResult r, scan_pass(k, *body, states, inputs, axes, rev, len));
    for (size_t i = 0; i < n_state; ++i) k.output(i) = r.states[i];
    for (size_t j = 0; j < n_out; ++j) {
      int64_t per_rank = r.scans[j].empty() ? 0 : static_cast<int64_t>(r.scans[j][0].rank());
      if (r.scans[j].empty() && body->outputs()[n_state + j]->shape().rank_known())
        per_rank = static_cast<int64_t>(body->outputs()[n_state + j]->shape().rank());
      int64_t a = out_axes[j] < 0 ? out_axes[j] + per_rank + 1 : out_axes[j];
      if (a < 0 || a > per_rank) return k.error("scan_output_axes[", j, "] = ", out_axes[j], " out of range");
      INGOT_ASSIGN_OR_RETURN(k.output(n_state + j), stack(k, r.scans[j], static_cast<size_t>(a), out_dirs[j] != 0,
                                                          *body->outputs()[n_state + j], j));
    }
    return Status::Ok();
  }

  // Opset 8: every input has a leading batch dim; scan inputs are [batch, seq, ...].
  std::vector<int64_t> dirs = k.attrs().get_ints("directions", std::vector<int64_t>(m, 0));
  if (dirs.size() != static_cast<size_t>(m)) return k.error("directions must have ", m, " entries");
  const Tensor& x0 = *k.input(first + n_state);
  if (x0.rank() < 2) return k.error("scan inputs need [batch, sequence, ...] dims");
  int64_t batch = x0.dim(0), max_len = x0.dim(1);
  for (size_t i = first; i < k.num_inputs(); ++i)
    if (k.input(i)->rank() < 1 || k.input(i)->dim(0) != batch) return k.error("input ", i, " has the wrong batch size");
  std::vector<int64_t> lens(batch, max_len);
  if (k.has_input(0)) {
    std::vector<int64_t> l = k.input(0)->to_i64_vector();
    if (static_cast<int64_t>(l.size()) != batch) return k.error("sequence_lens must have ", batch, " entries");
    for (int64_t b = 0; b < batch; ++b) {
      if (l[b] < 0 || l[b] > max_len) return k.error("sequence_lens[", b, "] = ", l[b], " out of range");
      lens[b] = l[b];
    }
  }
  std::vector<std::vector<Tensor>> state_parts(n_state), out_parts(n_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> states, inputs;
    for (size_t i = 0; i < n_state; ++i) {
      INGOT_ASSIGN_OR_RETURN(Tensor s, take_along(*k.input(first + i), 0, b));
      states.push_back(std::move(s));
    }
    for (int64_t j = 0; j < m; ++j) {
      const Tensor& x = *k.input(first + n_state + j);
      if (x.rank() < 2 || x.dim(1) != max_len) return k.error("scan inputs have different sequence lengths");
      INGOT_ASSIGN_OR_RETURN(Tensor s, take_along(x, 0, b));
      if (lens[b] < max_len) {
        // Keep only the first lens[b] steps so reverse scans start at the last valid one.
        Shape64 sh = s.shape();
        sh[0] = lens[b];
        INGOT_ASSIGN_OR_RETURN(Tensor cut, Tensor::zeros(s.dtype(), sh));
        copy_elems(s, 0, cut, 0, cut.numel());
        s = cut;
      }
      inputs.push_back(std::move(s));
    }
    std::vector<size_t> axes(m, 0);
    std::vector<bool> rev;
    for (int64_t d : dirs) rev.push_back(d != 0);
    INGOT_ASSIGN_OR_RETURN(ScanResult r, scan_pass(k, *body, states, inputs, axes, rev, lens[b]));
    for (size_t i = 0; i < n_state; ++i) state_parts[i].push_back(r.states[i]);
    for (size_t j = 0; j < n_out; ++j) {
      INGOT_ASSIGN_OR_RETURN(Tensor st, stack(k, r.scans[j], 0, false, *body->outputs()[n_state + j], j));
      if (st.dim(0) < max_len) {  // pad the sequence dim with zeros
        Shape64 sh = st.shape();
        sh[0] = max_len;
        INGOT_ASSIGN_OR_RETURN(Tensor padded, Tensor::zeros(st.dtype(), sh));
        copy_elems(st, 0, padded, 0, st.numel());
        st = padded;
      }
      out_parts[j].push_back(std::move(st));
    }
  }
  for (size_t i = 0; i < n_state; ++i) {
    INGOT_ASSIGN_OR_RETURN(k.output(i), stack(k, state_parts[i], 0, false, *body->outputs()[i], i));
  }
  for (size_t j = 0; j < n_out; ++j) {
    INGOT_ASSIGN_OR_RETURN(k.output(n_state + j), stack(k, out_parts[j], 0, false, *body->outputs()[n_state + j], j));
  }
  return Status::Ok();
}

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add("If", run_if);
  r.add("Loop", run_loop);
  r.add("Scan", run_scan);
}

}  // namespace ingot::cpu
