// Copyright ingot authors. Apache-2.0.
//
// Shape and data-movement ops (part 1): constants, shape queries, reshapes, concat/split,
// slice, expand/tile, constant-of-shape and range. Part 2 is tensor_index.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "ir/ops/all_ops.h"
#include "ir/ops/tensor_shared.h"

namespace ingot::ir {

std::optional<std::vector<int64_t>> tensor_known_ints(const InferenceContext& c, size_t i) {
  if (!c.has_input(i)) return std::nullopt;
  const Tensor* t = c.input_value(i);
  if (!t || t->dtype() == DataType::kString || is_float(t->dtype())) return std::nullopt;
  return t->to_i64_vector();
}

Tensor tensor_i64_value(const std::vector<int64_t>& v, bool scalar) {
  return Tensor::from_vector(DataType::kInt64, scalar ? Shape64{} : Shape64{static_cast<int64_t>(v.size())}, v);
}

std::optional<std::vector<int64_t>> tensor_axes_arg(const InferenceContext& c, size_t input, const char* attr,
                                                    bool* present) {
  if (c.opset() < 13 || (!c.has_input(input) && c.attrs().has(attr))) {
    *present = c.attrs().has(attr);
    return c.attrs().get_ints(attr);
  }
  *present = c.has_input(input);
  if (!c.has_input(input)) return std::vector<int64_t>{};
  return tensor_known_ints(c, input);
}

// When input i is the output of a Shape node whose input has a known rank: the dims it
// holds (possibly symbolic). Lets Gather/Slice of a shape fold even when other dims are
// symbolic (x.shape[1] of [N,3,4] is 3).
std::optional<std::vector<Dim>> tensor_shape_source(const InferenceContext& c, size_t i) {
  if (i >= c.node().inputs().size() || !c.node().inputs()[i]) return std::nullopt;
  const Node* p = c.node().inputs()[i]->producer();
  if (!p || p->op_type() != "Shape" || !p->domain().empty() || !p->input(0)) return std::nullopt;
  const Shape& s = p->input(0)->shape();
  if (!s.rank_known()) return std::nullopt;
  int64_t r = static_cast<int64_t>(s.rank());
  int64_t b = p->attrs().get_int("start", 0), e = p->attrs().get_int("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<int64_t>(b, 0, r);
  e = std::clamp<int64_t>(e, 0, r);
  if (e < b) e = b;
  return std::vector<Dim>(s.dims().begin() + b, s.dims().begin() + e);
}

namespace {

Dim dim_mul(const Dim& a, int64_t k) {
  if (k == 1) return a;
  if (k == 0) return Dim(0);
  if (a.is_known()) return Dim(a.value() * k);
  return Dim::unknown();
}

// The value of a reshape-like op when the input's value is known.
void forward_reshaped_value(InferenceContext& c, const Shape& out) {
  const Tensor* v = c.input_value(0);
  if (!v || !out.is_concrete()) return;
  auto r = v->reshaped(out.concrete());
  if (r.ok()) c.set_output_value(0, std::move(r).value());
}

Status infer_constant(InferenceContext& c) {
  const Attributes& a = c.attrs();
  Tensor t;
  int count = 0;
  if (const Tensor* v = a.get_tensor("value")) { t = *v; ++count; }
  if (a.has("value_float")) { t = Tensor::from_vector(DataType::kFloat32, {}, std::vector<float>{a.get_float("value_float", 0)}); ++count; }
  if (a.has("value_floats")) {
    auto f = a.get_floats("value_floats");
    t = Tensor::from_vector(DataType::kFloat32, {static_cast<int64_t>(f.size())}, f);
    ++count;
  }
  if (a.has("value_int")) { t = tensor_i64_value({a.get_int("value_int", 0)}, true); ++count; }
  if (a.has("value_ints")) { t = tensor_i64_value(a.get_ints("value_ints"), false); ++count; }
  if (a.has("value_string")) { t = Tensor::from_strings({}, {a.get_string("value_string", "")}); ++count; }
  if (a.has("value_strings")) {
    auto s = a.get_strings("value_strings");
    t = Tensor::from_strings({static_cast<int64_t>(s.size())}, s);
    ++count;
  }
  if (count != 1 || !t.defined()) return c.error("exactly one value attribute is required, got ", count);
  c.set_output(0, t.dtype(), Shape::from_concrete(t.shape()));
  c.set_output_value(0, t);
  return Status::Ok();
}

Status infer_reshape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  std::optional<std::vector<int64_t>> target;
  if (c.opset() < 5) target = c.attrs().get_ints("shape");
  else target = tensor_known_ints(c, 1);
  bool allowzero = c.attrs().get_int("allowzero", 0) != 0;
  if (!target) {
    const Shape& ss = c.opset() < 5 ? Shape::unknown_rank() : c.input_shape(1);
    if (ss.rank_known() && ss.rank() == 1 && ss[0].is_known() && ss[0].value() <= 64)  // ranks are small
      c.set_output(0, c.input_dtype(0), Shape(std::vector<Dim>(ss[0].value(), Dim::unknown())));
    else
      c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::Ok();
  }
  std::vector<Dim> out;
  int neg = -1;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t s = (*target)[i];
    if (s == -1) {
      if (neg >= 0) return c.error("shape has more than one -1");
      neg = static_cast<int>(i);
      out.push_back(Dim::unknown());
    } else if (s == 0 && !allowzero) {
      if (!in.rank_known()) { out.push_back(Dim::unknown()); continue; }
      if (i >= in.rank()) return c.error("shape[", i, "] is 0 but the input has rank ", in.rank());
      out.push_back(in[i]);
    } else if (s < 0) {
      return c.error("invalid shape value ", s);
    } else {
      out.push_back(Dim(s));
    }
  }
  if (allowzero && neg >= 0)
    for (int64_t s : *target)
      if (s == 0) return c.error("allowzero with both 0 and -1 in the shape");
  if (in.rank_known()) {
    // Cancel symbolic dims that appear on both sides, then the rest must be known.
    std::vector<Dim> rest_in = in.dims();
    std::vector<Dim> rest_out;
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) == neg) continue;
      const Dim& d = out[i];
      if (!d.is_known()) {
        auto it = std::find_if(rest_in.begin(), rest_in.end(),
                               [&](const Dim& x) { return x.is_symbol() && d.is_symbol() && x == d; });
        if (it != rest_in.end()) { rest_in.erase(it); continue; }
      }
      rest_out.push_back(d);
    }
    bool all_known = true;
    int64_t pin = 1, pout = 1;
    for (const Dim& d : rest_in) { if (d.is_known()) pin = mul_dims(pin, d.value()); else all_known = false; }
    for (const Dim& d : rest_out) { if (d.is_known()) pout = mul_dims(pout, d.value()); else all_known = false; }
    if (all_known) {
      if (neg >= 0) {
        if (pout == 0 ? pin != 0 : pin % pout != 0)
          return c.error("cannot reshape ", in.to_string(), " to ", Shape(out).to_string());
        out[neg] = Dim(pout == 0 ? 0 : pin / pout);
      } else if (pin != pout) {
        return c.error("cannot reshape ", in.to_string(), " (", pin, " elements) to ", Shape(out).to_string());
      }
    }
  }
  Shape os(out);
  c.set_output(0, c.input_dtype(0), os);
  forward_reshaped_value(c, os);
  return Status::Ok();
}

Status infer_flatten(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.rank_known()) { c.set_output(0, c.input_dtype(0), Shape({Dim::unknown(), Dim::unknown()})); return Status::Ok(); }
  int64_t r = static_cast<int64_t>(in.rank());
  int64_t axis = c.attrs().get_int("axis", 1);
  if (axis < -r || axis > r) return c.error("axis ", axis, " out of range for rank ", r);
  if (axis < 0) axis += r;
  auto prod = [&](int64_t b, int64_t e) -> Dim {
    int64_t p = 1;
    std::vector<Dim> unknown;
    for (int64_t i = b; i < e; ++i) {
      if (in[i].is_known()) p = mul_dims(p, in[i].value());
      else unknown.push_back(in[i]);
    }
    if (unknown.empty()) return Dim(p);
    if (unknown.size() == 1 && p == 1) return unknown[0];
    if (p == 0) return Dim(0);
    return Dim::unknown();
  };
  Shape os({prod(0, axis), prod(axis, r)});
  c.set_output(0, c.input_dtype(0), os);
  forward_reshaped_value(c, os);
  return Status::Ok();
}

Status infer_squeeze(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  bool present = false;
  auto axes = tensor_axes_arg(c, 1, "axes", &present);
  if (!in.rank_known() || !axes) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
  int64_t r = static_cast<int64_t>(in.rank());
  std::vector<bool> drop(r, false);
  if (!present) {
    for (int64_t i = 0; i < r; ++i) {
      if (!in[i].is_known()) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
      drop[i] = in[i].value() == 1;
    }
  } else {
    for (int64_t a : *axes) {
      INGOT_ASSIGN_OR_RETURN(int64_t n, normalize_axis(a, r));
      if (in[n].is_known() && in[n].value() != 1)
        return c.error("cannot squeeze axis ", a, " of size ", in[n].value(), " in ", in.to_string());
      drop[n] = true;
    }
  }
  std::vector<Dim> out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(in[i]);
  c.set_output(0, c.input_dtype(0), Shape(out));
  forward_reshaped_value(c, Shape(out));
  return Status::Ok();
}

Status infer_unsqueeze(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  bool present = false;
  auto axes = tensor_axes_arg(c, 1, "axes", &present);
  if (!axes) {
    const Shape& as = c.input_shape(1);
    if (in.rank_known() && as.rank_known() && as.rank() == 1 && as[0].is_known())
      c.set_output(0, c.input_dtype(0), Shape(std::vector<Dim>(in.rank() + as[0].value(), Dim::unknown())));
    else
      c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::Ok();
  }
  if (!present) return c.error("axes is required");
  if (!in.rank_known()) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
  int64_t r = static_cast<int64_t>(in.rank() + axes->size());
  std::vector<bool> ins(r, false);
  for (int64_t a : *axes) {
    if (a < -r || a >= r) return c.error("axis ", a, " out of range for output rank ", r);
    if (a < 0) a += r;
    if (ins[a]) return c.error("axis ", a, " repeated");
    ins[a] = true;
  }
  std::vector<Dim> out;
  size_t j = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[i] ? Dim(1) : in[j++]);
  c.set_output(0, c.input_dtype(0), Shape(out));
  forward_reshaped_value(c, Shape(out));
  return Status::Ok();
}

Status infer_transpose(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.rank_known()) {
    if (c.attrs().has("perm"))
      c.set_output(0, c.input_dtype(0), Shape(std::vector<Dim>(c.attrs().get_ints("perm").size(), Dim::unknown())));
    else
      c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(in.rank());
  std::vector<int64_t> perm = c.attrs().get_ints("perm");
  if (!c.attrs().has("perm"))
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r) return c.error("perm has ", perm.size(), " entries for rank ", r);
  std::vector<bool> seen(r, false);
  std::vector<Dim> out;
  for (int64_t p : perm) {
    if (p < -r || p >= r) return c.error("perm entry ", p, " out of range for rank ", r);
    if (p < 0) p += r;
    if (seen[p]) return c.error("perm entry ", p, " repeated");
    seen[p] = true;
    out.push_back(in[p]);
  }
  c.set_output(0, c.input_dtype(0), Shape(out));
  return Status::Ok();
}

Status infer_concat(InferenceContext& c) {
  if (!c.attrs().has("axis") && c.opset() >= 4) return c.error("attribute 'axis' is required");
  int64_t axis = c.attrs().get_int("axis", 1);
  DataType dt = DataType::kUndefined;
  Shape out = Shape::unknown_rank();
  bool first = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    if (dt == DataType::kUndefined) dt = c.input_dtype(i);
    const Shape& s = c.input_shape(i);
    if (!s.rank_known()) continue;
    if (first) {
      if (s.rank() == 0) return c.error("cannot concatenate scalars");
      INGOT_ASSIGN_OR_RETURN(axis, normalize_axis(axis, static_cast<int64_t>(s.rank())));
      out = s;
      first = false;
      continue;
    }
    if (s.rank() != out.rank()) return c.error("inputs have ranks ", out.rank(), " and ", s.rank());
    for (size_t d = 0; d < s.rank(); ++d) {
      if (static_cast<int64_t>(d) == axis) {
        out[d] = out[d].is_known() && s[d].is_known() ? Dim(out[d].value() + s[d].value()) : Dim::unknown();
      } else if (out[d].is_known() && s[d].is_known()) {
        if (out[d].value() != s[d].value())
          return c.error("input shapes ", out.to_string(), " and ", s.to_string(), " differ outside axis ", axis);
      } else if (!out[d].is_known() && (s[d].is_known() || out[d].is_unknown())) {
        out[d] = s[d];
      }
    }
  }
  // Any input of unknown rank makes the axis size unknown.
  if (out.rank_known())
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i) && !c.input_shape(i).rank_known()) out[axis] = Dim::unknown();
  c.set_output(0, dt, out);
  // Fold small integer values (shape computations).
  std::vector<int64_t> vals;
  bool all = out.rank_known() && out.rank() == 1 && (dt == DataType::kInt64 || dt == DataType::kInt32);
  for (size_t i = 0; all && i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const Tensor* v = c.input_value(i);
    if (!v || v->numel() > 1024) { all = false; break; }
    auto x = v->to_i64_vector();
    vals.insert(vals.end(), x.begin(), x.end());
  }
  if (all) {
    Tensor t = Tensor::zeros(dt, {static_cast<int64_t>(vals.size())}).value();
    for (size_t i = 0; i < vals.size(); ++i) t.set_i64(static_cast<int64_t>(i), vals[i]);
    c.set_output_value(0, t);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<int64_t>> tensor_split_sizes(int64_t dim, int64_t opset, bool has_split,
                                                const std::vector<int64_t>& split, int64_t num_outputs,
                                                bool uneven) {
  if (has_split) {
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return invalid_argument("negative split size ", s);
      sum += s;
    }
    if (dim >= 0 && sum != dim) return invalid_argument("split sizes sum to ", sum, ", dim is ", dim);
    return split;
  }
  (void)opset;
  if (num_outputs <= 0) return invalid_argument("number of outputs must be positive");
  if (dim < 0) return invalid_argument("unknown dim");
  std::vector<int64_t> out;
  if (uneven) {
    int64_t chunk = (dim + num_outputs - 1) / num_outputs;
    int64_t left = dim;
    for (int64_t i = 0; i < num_outputs; ++i) {
      int64_t s = std::min(chunk, left);
      out.push_back(s);
      left -= s;
    }
  } else {
    if (dim % num_outputs != 0)
      return invalid_argument("dim ", dim, " does not split evenly into ", num_outputs, " outputs");
    out.assign(num_outputs, dim / num_outputs);
  }
  return out;
}

namespace {

Status infer_split(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  size_t n_out = c.num_outputs();
  auto unknown_all = [&]() {
    for (size_t i = 0; i < n_out; ++i) {
      Shape s = in;
      if (s.rank_known()) {
        auto ax = normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(s.rank()));
        if (ax.ok()) s[*ax] = Dim::unknown();
      }
      c.set_output(i, c.input_dtype(0), s);
    }
    return Status::Ok();
  };
  if (!in.rank_known()) return unknown_all();
  INGOT_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c.attrs().get_int("axis", 0), static_cast<int64_t>(in.rank())));
  bool has_split = false;
  std::vector<int64_t> split;
  if (c.opset() < 13) {
    has_split = c.attrs().has("split");
    split = c.attrs().get_ints("split");
  } else if (c.has_input(1)) {
    auto v = tensor_known_ints(c, 1);
    if (!v) return unknown_all();
    has_split = true;
    split = *v;
  }
  if (has_split && split.size() != n_out)
    return c.error("split has ", split.size(), " entries for ", n_out, " outputs");
  int64_t num = static_cast<int64_t>(n_out);
  bool uneven = false;
  if (!has_split && c.opset() >= 18) {
    if (!c.attrs().has("num_outputs")) return c.error("either 'split' or 'num_outputs' is required");
    num = c.attrs().get_int("num_outputs", 0);
    if (num != static_cast<int64_t>(n_out)) return c.error("num_outputs is ", num, " but the node has ", n_out, " outputs");
    uneven = true;
  }
  if (!has_split && !in[axis].is_known()) return unknown_all();
  auto sizes = tensor_split_sizes(in[axis].is_known() ? in[axis].value() : -1, c.opset(), has_split, split, num, uneven);
  if (!sizes.ok()) return c.error(sizes.status().message());
  for (size_t i = 0; i < n_out; ++i) {
    Shape s = in;
    s[axis] = Dim((*sizes)[i]);
    c.set_output(i, c.input_dtype(0), s);
  }
  return Status::Ok();
}

}  // namespace

void tensor_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t* s, int64_t* e,
                        int64_t* count) {
  if (dim <= 0) {
    *s = *e = 0;
    *count = 0;
    return;
  }
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    *count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    *count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  *s = start;
  *e = end;
}

Status tensor_slice_params(const InferenceContext* c, int64_t opset, const Attributes& attrs,
                           const std::vector<const Tensor*>& in, int64_t rank, std::vector<int64_t>* starts,
                           std::vector<int64_t>* ends, std::vector<int64_t>* axes, std::vector<int64_t>* steps,
                           bool* known) {
  *known = true;
  auto get = [&](size_t i, std::vector<int64_t>* out, bool* present) {
    *present = i < in.size() && in[i] != nullptr;
    if (*present) *out = in[i]->to_i64_vector();
  };
  bool has_axes = false, has_steps = false;
  if (opset < 10) {
    *starts = attrs.get_ints("starts");
    *ends = attrs.get_ints("ends");
    has_axes = attrs.has("axes");
    *axes = attrs.get_ints("axes");
  } else {
    if (c) {
      for (size_t i = 1; i < 5; ++i)
        if (c->has_input(i) && !c->input_value(i)) { *known = false; }
      if (!*known) return Status::Ok();
    }
    bool p;
    get(1, starts, &p);
    get(2, ends, &p);
    get(3, axes, &has_axes);
    get(4, steps, &has_steps);
  }
  if (starts->size() != ends->size()) return invalid_argument("starts and ends differ in length");
  if (!has_axes) {
    axes->clear();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!has_steps) steps->assign(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    return invalid_argument("starts, ends, axes and steps must have the same length");
  std::vector<bool> seen(rank, false);
  for (auto& a : *axes) {
    if (a < -rank || a >= rank) return invalid_argument("axis ", a, " out of range for rank ", rank);
    if (a < 0) a += rank;
    if (seen[a]) return invalid_argument("axis ", a, " repeated");
    seen[a] = true;
  }
  for (int64_t s : *steps)
    if (s == 0) return invalid_argument("step 0");
  return Status::Ok();
}

namespace {

Status infer_slice(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (c.opset() >= 10 && (!c.has_input(1) || !c.has_input(2))) return c.error("starts and ends are required");
  if (!in.rank_known()) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
  int64_t r = static_cast<int64_t>(in.rank());
  std::vector<const Tensor*> vals;
  for (size_t i = 0; i < c.num_inputs(); ++i) vals.push_back(c.input_value(i));
  std::vector<int64_t> starts, ends, axes, steps;
  bool known = true;
  Status st = tensor_slice_params(&c, c.opset(), c.attrs(), vals, r, &starts, &ends, &axes, &steps, &known);
  if (!st.ok()) return c.error(st.message());
  Shape out = in;
  if (!known) {
    auto ax = c.has_input(3) ? tensor_known_ints(c, 3) : std::nullopt;
    if (ax && !c.has_input(3)) ax = std::nullopt;
    for (int64_t i = 0; i < r; ++i) {
      bool touched = true;
      if (ax) {
        touched = false;
        for (int64_t a : *ax) touched |= (a < 0 ? a + r : a) == i;
      }
      if (touched) out[i] = Dim::unknown();
    }
    c.set_output(0, c.input_dtype(0), out);
    return Status::Ok();
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (in[a].is_known()) {
      int64_t s, e, n;
      tensor_slice_range(in[a].value(), starts[i], ends[i], steps[i], &s, &e, &n);
      out[a] = Dim(n);
    } else if (!(steps[i] == 1 && starts[i] == 0 && ends[i] >= (int64_t{1} << 31) - 1)) {
      out[a] = Dim::unknown();
    }
  }
  c.set_output(0, c.input_dtype(0), out);
  // Fold 1-D integer slices (shape computations), also of partly symbolic shapes.
  if (starts.empty() || ends.empty() || steps.empty()) return Status::Ok();  // nothing sliced
  const Tensor* v = c.input_value(0);
  if (!v && r == 1) {
    if (auto src = tensor_shape_source(c, 0); src && static_cast<int64_t>(src->size()) == in[0].value()) {
      int64_t s, e, n;
      tensor_slice_range(in[0].value(), starts[0], ends[0], steps[0], &s, &e, &n);
      std::vector<int64_t> vals;
      for (int64_t i = 0; i < n; ++i) {
        const Dim& d = (*src)[s + i * steps[0]];
        if (!d.is_known()) return Status::Ok();
        vals.push_back(d.value());
      }
      c.set_output_value(0, tensor_i64_value(vals, false));
    }
    return Status::Ok();
  }
  if (v && r == 1 && out.is_concrete() && v->numel() <= 1024 && !is_float(v->dtype()) && v->dtype() != DataType::kString) {
    int64_t s, e, n;
    tensor_slice_range(v->dim(0), starts[0], ends[0], steps[0], &s, &e, &n);
    Tensor t = Tensor::zeros(v->dtype(), {n}).value();
    for (int64_t i = 0; i < n; ++i) t.set_i64(i, v->get_i64(s + i * steps[0]));
    c.set_output_value(0, t);
  }
  return Status::Ok();
}

// Shape from a known 1-D value, or a shape of known rank and unknown dims.
std::optional<std::vector<int64_t>> shape_input(InferenceContext& c, size_t i, Shape* fallback) {
  auto v = tensor_known_ints(c, i);
  if (v) return v;
  const Shape& ss = c.input_shape(i);
  if (ss.rank_known() && ss.rank() == 1 && ss[0].is_known())
    *fallback = Shape(std::vector<Dim>(ss[0].value(), Dim::unknown()));
  else
    *fallback = Shape::unknown_rank();
  return std::nullopt;
}

Status infer_expand(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  Shape fb;
  auto v = shape_input(c, 1, &fb);
  if (!v) {
    if (fb.rank_known() && in.rank_known() && in.rank() > fb.rank())
      fb = Shape(std::vector<Dim>(in.rank(), Dim::unknown()));
    else if (fb.rank_known() && in.rank_known()) {
      // Dims of the input that are > 1 survive the broadcast.
      size_t off = fb.rank() - in.rank();
      for (size_t i = 0; i < in.rank(); ++i)
        if (in[i].is_known() && in[i].value() != 1) fb[off + i] = in[i];
    }
    c.set_output(0, c.input_dtype(0), fb);
    return Status::Ok();
  }
  std::vector<Dim> dims;
  for (int64_t d : *v) {
    if (d < 0) return c.error("negative dim ", d, " in shape");
    dims.push_back(Dim(d));
  }
  if (!in.rank_known()) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
  auto b = broadcast_shapes(in, Shape(dims));
  if (!b.ok()) return c.error(b.status().message());
  c.set_output(0, c.input_dtype(0), *b);
  return Status::Ok();
}

Status infer_tile(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  auto rep = tensor_known_ints(c, 1);
  if (!in.rank_known()) { c.set_output(0, c.input_dtype(0), Shape::unknown_rank()); return Status::Ok(); }
  if (!rep) { c.set_output(0, c.input_dtype(0), Shape(std::vector<Dim>(in.rank(), Dim::unknown()))); return Status::Ok(); }
  if (rep->size() != in.rank()) return c.error("repeats has ", rep->size(), " entries for rank ", in.rank());
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i) {
    if ((*rep)[i] < 0) return c.error("negative repeat ", (*rep)[i]);
    out.push_back(dim_mul(in[i], (*rep)[i]));
  }
  c.set_output(0, c.input_dtype(0), Shape(out));
  return Status::Ok();
}

Status infer_constant_of_shape(InferenceContext& c) {
  DataType dt = DataType::kFloat32;
  if (const Tensor* v = c.attrs().get_tensor("value")) {
    if (v->numel() != 1) return c.error("value must have exactly one element");
    dt = v->dtype();
  }
  Shape fb;
  auto v = shape_input(c, 0, &fb);
  if (!v) { c.set_output(0, dt, fb); return Status::Ok(); }
  for (int64_t d : *v)
    if (d < 0) return c.error("negative dim ", d, " in shape");
  c.set_output(0, dt, Shape::from_concrete(*v));
  int64_t n = shape_numel(*v);
  if (n <= 1024) {
    Tensor t = Tensor::zeros(dt, *v).value();
    if (const Tensor* val = c.attrs().get_tensor("value")) {
      for (int64_t i = 0; i < n; ++i) {
        if (dt == DataType::kString) t.mutable_strings()[i] = val->strings()[0];
        else if (is_float(dt)) t.set_f64(i, val->get_f64(0));
        else t.set_i64(i, val->get_i64(0));
      }
    }
    c.set_output_value(0, t);
  }
  return Status::Ok();
}

Status infer_range(InferenceContext& c) {
  DataType dt = c.input_dtype(0);
  const Tensor* s = c.input_value(0);
  const Tensor* l = c.input_value(1);
  const Tensor* d = c.input_value(2);
  if (!s || !l || !d) { c.set_output(0, dt, Shape({Dim::unknown()})); return Status::Ok(); }
  if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1) return c.error("start, limit and delta must be scalars");
  int64_t n;
  if (is_float(dt)) {
    double st = s->get_f64(0), li = l->get_f64(0), de = d->get_f64(0);
    if (de == 0) return c.error("delta is 0");
    double cnt = std::ceil((li - st) / de);
    if (!std::isfinite(cnt)) return c.error("range length is not finite");
    n = std::max<int64_t>(0, static_cast<int64_t>(cnt));
  } else {
    int64_t st = s->get_i64(0), li = l->get_i64(0), de = d->get_i64(0);
    if (de == 0) return c.error("delta is 0");
    double cnt = std::ceil(static_cast<double>(li - st) / static_cast<double>(de));
    n = std::max<int64_t>(0, static_cast<int64_t>(cnt));
  }
  c.set_output(0, dt, Shape({Dim(n)}));
  if (n <= 1024 && !is_float(dt)) {
    Tensor t = Tensor::zeros(dt, {n}).value();
    for (int64_t i = 0; i < n; ++i) t.set_i64(i, s->get_i64(0) + i * d->get_i64(0));
    c.set_output_value(0, t);
  }
  return Status::Ok();
}

}  // namespace

void register_tensor_ops(OpRegistry& r) {
  r.add("Constant").inputs(0, 0).outputs(1, 1).opsets(1)
      .attr("value", AttrType::kTensor).attr("value_float", AttrType::kFloat).attr("value_floats", AttrType::kFloats)
      .attr("value_int", AttrType::kInt).attr("value_ints", AttrType::kInts).attr("value_string", AttrType::kString)
      .attr("value_strings", AttrType::kStrings)
      .infer(infer_constant);
  r.add("Identity").inputs(1, 1).outputs(1, 1).opsets(1).infer([](InferenceContext& c) {
    INGOT_RETURN_IF_ERROR(c.propagate_same(0, 0));
    if (const Tensor* v = c.input_value(0)) c.set_output_value(0, *v);
    return Status::Ok();
  });
  r.add("Dropout").inputs(1, 3).outputs(1, 2).opsets(1)
      .attr("ratio", AttrType::kFloat).attr("seed", AttrType::kInt).attr("is_test", AttrType::kInt)
      .attr("consumed_inputs", AttrType::kInts)
      .infer([](InferenceContext& c) {
        INGOT_RETURN_IF_ERROR(c.propagate_same(0, 0));
        if (c.has_output(1))
          c.set_output(1, c.opset() < 10 ? c.input_dtype(0) : DataType::kBool, c.input_shape(0));
        return Status::Ok();
      });
  r.add("Shape").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("start", AttrType::kInt).attr("end", AttrType::kInt)
      .infer([](InferenceContext& c) {
        const Shape& in = c.input_shape(0);
        if (!in.rank_known()) { c.set_output(0, DataType::kInt64, Shape({Dim::unknown()})); return Status::Ok(); }
        int64_t r = static_cast<int64_t>(in.rank());
        int64_t s = c.attrs().get_int("start", 0), e = c.attrs().get_int("end", r);
        if (s < 0) s += r;
        if (e < 0) e += r;
        s = std::clamp<int64_t>(s, 0, r);
        e = std::clamp<int64_t>(e, 0, r);
        int64_t n = std::max<int64_t>(0, e - s);
        c.set_output(0, DataType::kInt64, Shape({Dim(n)}));
        std::vector<int64_t> v;
        for (int64_t i = s; i < s + n; ++i) {
          if (!in[i].is_known()) return Status::Ok();
          v.push_back(in[i].value());
        }
        c.set_output_value(0, tensor_i64_value(v, false));
        return Status::Ok();
      });
  r.add("Size").inputs(1, 1).outputs(1, 1).opsets(1).infer([](InferenceContext& c) {
    c.set_output(0, DataType::kInt64, Shape());
    const Shape& in = c.input_shape(0);
    if (in.is_concrete()) c.set_output_value(0, tensor_i64_value({shape_numel(in.concrete())}, true));
    return Status::Ok();
  });
  r.add("Reshape").inputs(1, 2).outputs(1, 1).opsets(1)
      .attr("shape", AttrType::kInts).attr("allowzero", AttrType::kInt).attr("consumed_inputs", AttrType::kInts)
      .infer(infer_reshape);
  r.add("Flatten").inputs(1, 1).outputs(1, 1).opsets(1).attr("axis", AttrType::kInt).infer(infer_flatten);
  r.add("Squeeze").inputs(1, 2).outputs(1, 1).opsets(1).attr("axes", AttrType::kInts).infer(infer_squeeze);
  r.add("Unsqueeze").inputs(1, 2).outputs(1, 1).opsets(1).attr("axes", AttrType::kInts).infer(infer_unsqueeze);
  r.add("Transpose").inputs(1, 1).outputs(1, 1).opsets(1).attr("perm", AttrType::kInts).infer(infer_transpose);
  r.add("Concat").inputs(1, -1).outputs(1, 1).opsets(1).attr("axis", AttrType::kInt).infer(infer_concat);
  r.add("Split").inputs(1, 2).outputs(1, -1).opsets(1)
      .attr("axis", AttrType::kInt).attr("split", AttrType::kInts).attr("num_outputs", AttrType::kInt)
      .infer(infer_split);
  r.add("Slice").inputs(1, 5).outputs(1, 1).opsets(1)
      .attr("starts", AttrType::kInts).attr("ends", AttrType::kInts).attr("axes", AttrType::kInts)
      .infer(infer_slice);
  r.add("Expand").inputs(2, 2).outputs(1, 1).opsets(8).infer(infer_expand);
  r.add("Tile").inputs(2, 3).outputs(1, 1).opsets(6).infer(infer_tile);
  r.add("ConstantOfShape").inputs(1, 1).outputs(1, 1).opsets(9).attr("value", AttrType::kTensor)
      .infer(infer_constant_of_shape);
  r.add("Range").inputs(3, 3).outputs(1, 1).opsets(11).infer(infer_range);
  register_tensor_index_ops(r);
}

}  // namespace ingot::ir
