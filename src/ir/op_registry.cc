// Copyright ingot authors. Apache-2.0.
#include "ir/op_registry.h"

#include <mutex>
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

Status infer_node_impl(const Node& node, const OpRegistry& registry, KnownValues& known) {
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
  InferenceContext ctx(node, opset, std::move(types), std::move(values));
  if (schema->inference()) INGOT_RETURN_IF_ERROR(schema->inference()(ctx));
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    Value* o = node.outputs()[i];
    if (!o) continue;
    INGOT_RETURN_IF_ERROR(merge_type(o, ctx.output(i), node));
    if (const Tensor* t = ctx.output_value(i)) known[o] = *t;
  }
  return Status::Ok();
}

}  // namespace

Status infer_node(const Node& node, const OpRegistry& registry) {
  KnownValues known;
  return infer_node_impl(node, registry, known);
}

Status infer_graph(Graph& graph, const OpRegistry& registry) {
  KnownValues known;
  for (const auto& n : graph.nodes()) INGOT_RETURN_IF_ERROR(infer_node_impl(*n, registry, known));
  return Status::Ok();
}

}  // namespace ingot::ir
