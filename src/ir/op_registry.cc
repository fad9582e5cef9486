// Copyright ingot authors. Apache-2.0.
#include "ir/op_registry.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "ir/ops/all_ops.h"

namespace ingot::ir {

std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

InferenceContext::InferenceContext(const Node& node, int64_t opset, std::vector<TensorType> input_types,
                                   std::vector<const Tensor*> input_values)
    : node_(node), opset_(opset), inputs_(std::move(input_types)), values_(std::move(input_values)),
      outputs_(node.outputs().size()), output_values_(node.outputs().size()) {}

bool InferenceContext::has_input(size_t i) const {
  return i < inputs_.size() && i < node_.inputs().size() && node_.inputs()[i] != nullptr;
}

bool InferenceContext::has_output(size_t i) const {
  return i < outputs_.size() && node_.outputs()[i] != nullptr;
}

void InferenceContext::set_output(size_t i, DataType dtype, Shape shape) {
  if (i >= outputs_.size()) return;
  outputs_[i].dtype = dtype;
  outputs_[i].shape = std::move(shape);
}

void InferenceContext::set_output_value(size_t i, Tensor value) {
  if (i < output_values_.size()) output_values_[i] = std::move(value);
}

const Tensor* InferenceContext::output_value(size_t i) const {
  return i < output_values_.size() && output_values_[i].defined() ? &output_values_[i] : nullptr;
}

Status InferenceContext::propagate_broadcast(size_t output, DataType dtype) {
  Shape s;
  bool first = true;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!has_input(i)) continue;
    if (first) {
      s = inputs_[i].shape;
      first = false;
      continue;
    }
    auto r = broadcast_shapes(s, inputs_[i].shape);
    if (!r.ok()) return error(r.status().message());
    s = *r;
  }
  set_output(output, dtype, s);
  return Status::Ok();
}

Status InferenceContext::propagate_same(size_t output, size_t input) {
  if (!has_input(input)) return error("input ", input, " is missing");
  set_output(output, inputs_[input].dtype, inputs_[input].shape);
  return Status::Ok();
}

Status OpSchema::validate(const Node& node, int64_t opset) const {
  auto where = [&]() {
    std::string d = node.describe() + " (domain '" + (domain_.empty() ? "ai.onnx" : domain_) +
                    "', opset " + std::to_string(opset) + ")";
    return d;
  };
  if (opset < min_opset_ || (max_opset_ >= 0 && opset > max_opset_)) {
    return unsupported(where(), ": ingot implements ", op_type_, " for opsets ", min_opset_, " to ",
                       max_opset_ < 0 ? std::string("newest") : std::to_string(max_opset_));
  }
  int n_in = static_cast<int>(node.inputs().size());
  while (n_in > 0 && node.inputs()[n_in - 1] == nullptr) --n_in;  // trailing omitted optionals
  if (n_in < min_in_ || (max_in_ >= 0 && n_in > max_in_))
    return invalid_model(where(), ": has ", n_in, " inputs, expected ", min_in_, " to ",
                         max_in_ < 0 ? std::string("any") : std::to_string(max_in_));
  for (int i = 0; i < min_in_ && i < n_in; ++i)
    if (!node.inputs()[i])
      return invalid_model(where(), ": required input ", i, " is missing");
  int n_out = static_cast<int>(node.outputs().size());
  if (n_out < min_out_ || (max_out_ >= 0 && n_out > max_out_))
    return invalid_model(where(), ": has ", n_out, " outputs, expected ", min_out_, " to ",
                         max_out_ < 0 ? std::string("any") : std::to_string(max_out_));
  for (const auto& [name, a] : node.attrs().all()) {
    const AttrSpec* spec = nullptr;
    for (const auto& s : attrs_)
      if (s.name == name) spec = &s;
    if (!spec) return invalid_model(where(), ": unknown attribute '", name, "'");
    if (spec->type != a.type)
      return invalid_model(where(), ": attribute '", name, "' must be ", attr_type_name(spec->type),
                           ", got ", attr_type_name(a.type));
  }
  for (const auto& s : attrs_)
    if (s.required && !node.attrs().has(s.name))
      return invalid_model(where(), ": required attribute '", s.name, "' is missing");
  return Status::Ok();
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    register_all_ops(*r);
    return r;
  }();
  return *reg;
}

OpSchema& OpRegistry::add(const std::string& op_type, const std::string& domain) {
  auto key = std::make_pair(op_type, canonical_domain(domain));
  auto& slot = schemas_[key];
  slot = std::make_unique<OpSchema>(op_type, canonical_domain(domain));
  return *slot;
}

const OpSchema* OpRegistry::find(const std::string& op_type, const std::string& domain) const {
  auto it = schemas_.find({op_type, canonical_domain(domain)});
  return it == schemas_.end() ? nullptr : it->second.get();
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> v;
  for (const auto& [k, s] : schemas_) v.push_back(s.get());
  return v;
}

namespace {

using KnownValues = std::unordered_map<const Value*, Tensor>;

// Keeps what the model declared where inference knows less; errors on dtype conflicts.
Status merge_type(Value* v, const TensorType& t, const Node& n) {
  if (v->has_type() && t.dtype != DataType::kUndefined && v->dtype() != t.dtype)
    return invalid_model(n.describe(), ": output '", v->name(), "' is declared ", data_type_name(v->dtype()),
                         " but the op produces ", data_type_name(t.dtype));
  if (t.dtype != DataType::kUndefined) v->set_dtype(t.dtype);
  const Shape& declared = v->shape();
  if (!t.shape.rank_known()) return Status::Ok();
  if (declared.rank_known() && declared.rank() == t.shape.rank()) {
    Shape merged = t.shape;
    for (size_t i = 0; i < merged.rank(); ++i)
      if (merged[i].is_unknown() || (merged[i].is_symbol() && declared[i].is_known())) merged[i] = declared[i];
    v->set_shape(merged);
  } else {
    v->set_shape(t.shape);
  }
  return Status::Ok();
}

// Shape arithmetic on symbolic dims. Exporters compute reshape targets from the input's own
// shape (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); with a symbolic batch those values are
// not constants, but each element is still a Dim ("batch", 128, ...). Tracking that lets Reshape
// and Expand keep their outputs' symbolic dims, so later passes can prove shapes equal.
// One element of a shape-valued int tensor: a constant (any sign: -1 and 0 mean something to
// Reshape), a symbol ("batch"), or unknown.
struct Elem {
  int64_t v = 0;
  std::string sym;
  bool unknown = false;
  static Elem of(const Dim& d) {
    Elem e;
    if (d.is_known()) e.v = d.value();
    else if (d.is_symbol()) e.sym = d.symbol_name();
    else e.unknown = true;
    return e;
  }
  static Elem constant(int64_t x) {
    Elem e;
    e.v = x;
    return e;
  }
  bool is_const() const { return !unknown && sym.empty(); }
  bool same(const Elem& o) const { return !unknown && !o.unknown && sym == o.sym && (!sym.empty() || v == o.v); }
  Dim dim() const { return unknown ? Dim() : !sym.empty() ? Dim::symbol(sym) : v >= 0 ? Dim(v) : Dim(); }
};

struct SymValue {
  std::vector<Elem> elems;  ///< the elements of a 1-D int tensor (one for a scalar)
  bool scalar = false;
};
using KnownDims = std::unordered_map<const Value*, SymValue>;

std::optional<SymValue> sym_input(const Node& n, size_t i, const std::vector<const Tensor*>& values,
                                  const KnownDims& kd) {
  const Value* v = n.input(i);
  if (!v) return std::nullopt;
  auto it = kd.find(v);
  if (it != kd.end()) return it->second;
  const Tensor* t = i < values.size() ? values[i] : nullptr;
  if (!t || !(t->dtype() == DataType::kInt64 || t->dtype() == DataType::kInt32 || t->dtype() == DataType::kBool) ||
      t->rank() > 1 || t->numel() > 64)
    return std::nullopt;
  SymValue s;
  s.scalar = t->rank() == 0;
  for (int64_t k = 0; k < t->numel(); ++k) s.elems.push_back(Elem::constant(t->get_i64(k)));
  return s;
}

std::optional<std::vector<int64_t>> const_ints(const Node& n, size_t i, const std::vector<const Tensor*>& values) {
  const Tensor* t = i < values.size() ? values[i] : nullptr;
  if (!n.input(i) || !t || t->rank() > 1 || t->dtype() == DataType::kString) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t->numel(); ++k) out.push_back(t->get_i64(k));
  return out;
}

bool has_symbol(const SymValue& s) {
  for (const Elem& e : s.elems)
    if (!e.is_const()) return true;
  return false;
}

// The symbolic value of output 0 for the shape-arithmetic ops, when the inputs have one.
std::optional<SymValue> symbolic_output(const Node& n, int64_t opset, const std::vector<const Tensor*>& values,
                                        const KnownDims& kd) {
  if (!n.domain().empty() || n.outputs().size() != 1) return std::nullopt;
  const std::string& op = n.op_type();
  if (op == "Shape") {
    const Value* x = n.input(0);
    if (!x || !x->shape().rank_known()) return std::nullopt;
    int64_t r = static_cast<int64_t>(x->shape().rank());
    int64_t start = n.attrs().get_int("start", 0), end = n.attrs().get_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    SymValue s;
    for (int64_t k = start; k < end; ++k) s.elems.push_back(Elem::of(x->shape()[static_cast<size_t>(k)]));
    return s;
  }
  if (op == "Identity" || op == "Cast") {
    if (op == "Cast") {
      int64_t to = n.attrs().get_int("to", 0);
      if (to != static_cast<int64_t>(DataType::kInt64) && to != static_cast<int64_t>(DataType::kInt32)) return std::nullopt;
    }
    return sym_input(n, 0, values, kd);
  }
  if (op == "Gather") {
    auto data = sym_input(n, 0, values, kd);
    auto idx = const_ints(n, 1, values);
    if (!data || data->scalar || !idx || n.attrs().get_int("axis", 0) != 0) return std::nullopt;
    SymValue s;
    s.scalar = values[1]->rank() == 0;
    for (int64_t k : *idx) {
      if (k < 0) k += static_cast<int64_t>(data->elems.size());
      if (k < 0 || k >= static_cast<int64_t>(data->elems.size())) return std::nullopt;
      s.elems.push_back(data->elems[static_cast<size_t>(k)]);
    }
    return s;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    auto data = sym_input(n, 0, values, kd);
    if (!data) return std::nullopt;
    SymValue s = *data;
    if (op == "Unsqueeze") {
      if (!data->scalar) return std::nullopt;  // 1-D -> 2-D is no longer a shape value
      s.scalar = false;
    } else {
      if (data->scalar || data->elems.size() != 1) return std::nullopt;
      s.scalar = true;
    }
    return s;
  }
  if (op == "Concat") {
    if (n.attrs().get_int("axis", 0) != 0 && n.attrs().get_int("axis", 0) != -1) return std::nullopt;
    SymValue s;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      auto part = sym_input(n, i, values, kd);
      if (!part || part->scalar) return std::nullopt;
      s.elems.insert(s.elems.end(), part->elems.begin(), part->elems.end());
    }
    return s;
  }
  if (op == "Reshape") {
    // A shape value kept 1-D ([-1] or [n] targets), as torch writes before Expand.
    auto data = sym_input(n, 0, values, kd);
    auto target = const_ints(n, 1, values);
    if (!data || !target || target->size() != 1 ||
        ((*target)[0] != -1 && (*target)[0] != static_cast<int64_t>(data->elems.size())))
      return std::nullopt;
    SymValue s = *data;
    s.scalar = false;
    return s;
  }
  if (op == "ConstantOfShape") {
    auto shape = sym_input(n, 0, values, kd);
    if (!shape || shape->scalar || shape->elems.size() != 1 || !shape->elems[0].is_const() ||
        shape->elems[0].v < 0 || shape->elems[0].v > 64)
      return std::nullopt;
    const Attribute* a = n.attrs().find("value");
    int64_t fill = a && a->t.defined() && a->t.numel() == 1 && a->t.dtype() != DataType::kString ? a->t.get_i64(0) : 0;
    SymValue s;
    s.elems.assign(static_cast<size_t>(shape->elems[0].v), Elem::constant(fill));
    return s;
  }
  if (op == "Mul" || op == "Add" || op == "Equal" || op == "Where") {
    // Elementwise on shape values (a scalar broadcasts). Sizes are >= 0, so a symbol never
    // equals a negative constant: torch's Where(Equal(shape, -1), 1, shape) keeps the symbols.
    std::vector<SymValue> in;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      auto v = sym_input(n, i, values, kd);
      if (!v) return std::nullopt;
      in.push_back(*v);
    }
    if (in.size() != (op == "Where" ? 3u : 2u)) return std::nullopt;
    size_t len = 1;
    for (const SymValue& v : in) len = std::max(len, v.elems.size());
    for (const SymValue& v : in)
      if (v.elems.size() != len && v.elems.size() != 1) return std::nullopt;
    auto at = [&](const SymValue& v, size_t k) { return v.elems.size() == 1 ? v.elems[0] : v.elems[k]; };
    SymValue s;
    s.scalar = true;
    for (const SymValue& v : in) s.scalar = s.scalar && v.scalar;
    for (size_t k = 0; k < len; ++k) {
      if (op == "Where") {
        Elem c = at(in[0], k);
        if (!c.is_const()) return std::nullopt;
        s.elems.push_back(c.v ? at(in[1], k) : at(in[2], k));
        continue;
      }
      Elem a = at(in[0], k), b = at(in[1], k);
      if (op == "Equal") {
        if (a.is_const() && b.is_const()) s.elems.push_back(Elem::constant(a.v == b.v ? 1 : 0));
        else if (a.same(b)) s.elems.push_back(Elem::constant(1));
        else if ((a.is_const() && a.v < 0 && !b.unknown) || (b.is_const() && b.v < 0 && !a.unknown))
          s.elems.push_back(Elem::constant(0));
        else return std::nullopt;
      } else if (a.is_const() && b.is_const()) {
        int64_t r = 0;
        bool overflow = op == "Mul" ? __builtin_mul_overflow(a.v, b.v, &r) : __builtin_add_overflow(a.v, b.v, &r);
        if (overflow) return std::nullopt;
        s.elems.push_back(Elem::constant(r));
      } else if (op == "Mul" && ((a.is_const() && a.v == 1) || (b.is_const() && b.v == 1))) {
        s.elems.push_back(a.is_const() && a.v == 1 ? b : a);
      } else if (op == "Add" && ((a.is_const() && a.v == 0) || (b.is_const() && b.v == 0))) {
        s.elems.push_back(a.is_const() && a.v == 0 ? b : a);
      } else {
        Elem u;
        u.unknown = true;
        s.elems.push_back(u);
      }
    }
    return s;
  }
  if (op == "Slice" && opset >= 10) {
    auto data = sym_input(n, 0, values, kd);
    auto starts = const_ints(n, 1, values), ends = const_ints(n, 2, values);
    if (!data || data->scalar || !starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
    if (n.input(3)) {
      auto axes = const_ints(n, 3, values);
      if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
    }
    if (n.input(4)) {
      auto steps = const_ints(n, 4, values);
      if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
    }
    int64_t len = static_cast<int64_t>(data->elems.size());
    int64_t b = (*starts)[0], e = (*ends)[0];
    if (b < 0) b += len;
    if (e < 0) e += len;
    b = std::clamp<int64_t>(b, 0, len);
    e = std::clamp<int64_t>(e, 0, len);
    SymValue s;
    for (int64_t k = b; k < e; ++k) s.elems.push_back(data->elems[static_cast<size_t>(k)]);
    return s;
  }
  return std::nullopt;
}

// Reshape / Expand whose target is a symbolic shape value: the output shape from it, where the
// op's own inference (which needs a constant target) knew less.
std::optional<Shape> symbolic_target_shape(const Node& n, const std::vector<const Tensor*>& values,
                                           const KnownDims& kd) {
  if (!n.domain().empty() || n.inputs().size() < 2 || !n.input(0)) return std::nullopt;
  const std::string& op = n.op_type();
  if (op == "Range" && n.inputs().size() == 3) {
    // Range(0, n, 1) has n elements, n symbolic or not.
    auto start = sym_input(n, 0, values, kd), limit = sym_input(n, 1, values, kd), delta = sym_input(n, 2, values, kd);
    if (!start || !limit || !delta || start->elems.size() != 1 || limit->elems.size() != 1 ||
        delta->elems.size() != 1 || !start->elems[0].is_const() || start->elems[0].v != 0 ||
        !delta->elems[0].is_const() || delta->elems[0].v != 1 || limit->elems[0].is_const())
      return std::nullopt;
    return Shape({limit->elems[0].dim()});
  }
  if (op != "Reshape" && op != "Expand") return std::nullopt;
  auto target = sym_input(n, 1, values, kd);
  if (!target || target->scalar || !has_symbol(*target)) return std::nullopt;
  const Shape& in = n.input(0)->shape();
  if (op == "Expand") {
    std::vector<Dim> t;
    for (const Elem& e : target->elems) t.push_back(e.dim());
    auto b = broadcast_shapes(in, Shape(t));
    if (!b.ok()) return std::nullopt;
    return *b;
  }
  if (n.attrs().get_int("allowzero", 0) != 0) return std::nullopt;
  std::vector<Dim> out;
  int minus_one = -1;
  for (size_t i = 0; i < target->elems.size(); ++i) {
    const Elem& e = target->elems[i];
    if (e.is_const() && e.v == 0) {
      if (!in.rank_known() || i >= in.rank()) return std::nullopt;
      out.push_back(in[i]);
    } else if (e.is_const() && e.v == -1) {
      if (minus_one >= 0) return std::nullopt;
      minus_one = static_cast<int>(i);
      out.push_back(Dim());
    } else if (e.is_const() && e.v < -1) {
      return std::nullopt;
    } else {
      out.push_back(e.dim());
    }
  }
  if (minus_one >= 0 && in.rank_known()) {
    // -1: the input's dims left once the target's symbolic dims are matched one by one.
    std::vector<Dim> rest = in.dims();
    int64_t known_rest = 1;
    bool ok = true;
    for (size_t i = 0; i < out.size() && ok; ++i) {
      if (static_cast<int>(i) == minus_one) continue;
      auto hit = std::find(rest.begin(), rest.end(), out[i]);
      if (!out[i].is_known() && hit != rest.end()) rest.erase(hit);
      else if (out[i].is_known()) ok = !__builtin_mul_overflow(known_rest, std::max<int64_t>(out[i].value(), 1), &known_rest);
      else ok = false;
    }
    int64_t prod = 1;
    for (const Dim& d : rest) {
      ok = ok && d.is_known();
      if (ok) ok = !__builtin_mul_overflow(prod, d.value(), &prod);
    }
    if (ok && known_rest > 0 && prod % known_rest == 0) out[static_cast<size_t>(minus_one)] = Dim(prod / known_rest);
  }
  return Shape(out);
}

/// Most elements of folded values one inference pass keeps. Each fold is small (shape
/// computations), but a graph of many thousands of them, e.g. from nested function calls, would
/// otherwise spend minutes folding; past the budget, values simply stay unknown.
constexpr int64_t kFoldBudgetElements = int64_t{1} << 22;

bool shares_storage(const Tensor& t, const Node& node, const std::vector<const Tensor*>& inputs) {
  if (!t.raw()) return true;  // strings, or nothing stored
  for (const Tensor* v : inputs)
    if (v && v->raw() == t.raw()) return true;
  for (const auto& [name, a] : node.attrs().all())
    if (a.type == AttrType::kTensor && a.t.raw() == t.raw()) return true;
  return false;
}

Status infer_node_impl(const Node& node, const OpRegistry& registry, KnownValues& known, KnownDims& known_dims,
                       int64_t& fold_left) {
  const OpSchema* schema = registry.find(node.op_type(), node.domain());
  int64_t opset = node.owner() ? node.owner()->opset(node.domain()) : 0;
  if (!schema)
    return unsupported("unsupported op ", node.describe(), " (domain '",
                       node.domain().empty() ? "ai.onnx" : node.domain(), "', opset ", opset, ")");
  INGOT_RETURN_IF_ERROR(schema->validate(node, opset));
  std::vector<TensorType> types;
  std::vector<const Tensor*> values;
  for (const Value* v : node.inputs()) {
    TensorType t;
    const Tensor* val = nullptr;
    if (v) {
      t.dtype = v->dtype();
      t.shape = v->shape();
      val = v->initializer();
      if (!val) {
        auto it = known.find(v);
        if (it != known.end()) val = &it->second;
      }
    }
    types.push_back(std::move(t));
    values.push_back(val);
  }
  std::vector<const Tensor*> value_ptrs = values;
  InferenceContext ctx(node, opset, std::move(types), std::move(values));
  if (schema->inference()) INGOT_RETURN_IF_ERROR(schema->inference()(ctx));
  if (auto sym = symbolic_target_shape(node, value_ptrs, known_dims)) {
    const TensorType& t = ctx.output(0);
    bool less = !t.shape.rank_known();
    if (t.shape.rank_known() && t.shape.rank() == sym->rank())
      for (size_t k = 0; k < sym->rank(); ++k) less |= t.shape[k].is_unknown() && !(*sym)[k].is_unknown();
    if (less) ctx.set_output(0, t.dtype != DataType::kUndefined ? t.dtype : node.input(0)->dtype(), *sym);
  }
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    Value* o = node.outputs()[i];
    if (!o) continue;
    INGOT_RETURN_IF_ERROR(merge_type(o, ctx.output(i), node));
    if (const Tensor* t = ctx.output_value(i)) {
      // A value that shares storage with an input value or a tensor attribute (Constant,
      // Identity, a Reshape of a known value) was not computed: it costs nothing.
      const int64_t cost = shares_storage(*t, node, value_ptrs) ? 0 : t->numel();
      if (cost <= fold_left) {
        fold_left -= cost;
        known[o] = *t;
      }
    }
  }
  if (node.outputs().size() == 1 && node.output(0) && !ctx.output_value(0)) {
    if (auto sym = symbolic_output(node, opset, value_ptrs, known_dims)) {
      Value* o = node.output(0);
      DataType dt = o->dtype();
      if (!has_symbol(*sym) && (dt == DataType::kInt64 || dt == DataType::kInt32 || dt == DataType::kBool)) {
        // Every element constant: an ordinary known value for the ops downstream.
        Shape64 shape = sym->scalar ? Shape64{} : Shape64{static_cast<int64_t>(sym->elems.size())};
        auto t = Tensor::zeros(dt, shape);
        if (t.ok()) {
          for (size_t k = 0; k < sym->elems.size(); ++k) t->set_f64(static_cast<int64_t>(k), static_cast<double>(sym->elems[k].v));
          known[o] = std::move(t).value();
        }
      } else {
        known_dims[o] = *sym;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status infer_node(const Node& node, const OpRegistry& registry) {
  KnownValues known;
  KnownDims known_dims;
  int64_t fold_left = kFoldBudgetElements;
  return infer_node_impl(node, registry, known, known_dims, fold_left);
}

Status infer_graph(Graph& graph, const OpRegistry& registry) {
  KnownValues known;
  KnownDims known_dims;
  int64_t fold_left = kFoldBudgetElements;
  for (const auto& n : graph.nodes())
    INGOT_RETURN_IF_ERROR(infer_node_impl(*n, registry, known, known_dims, fold_left));
  return Status::Ok();
}

}  // namespace ingot::ir
