// Copyright ingot authors. Apache-2.0.
#include "backend/cpu/executor.h"

#include <cstring>
#include <unordered_map>

#include "backend/cpu/kernels/all_kernels.h"
#include "ir/op_registry.h"

namespace ingot::cpu {

KernelContext::KernelContext(const ir::Node& node, int64_t opset, std::vector<const Tensor*> inputs,
                             std::vector<Tensor> outputs, SubgraphRunner run_subgraph)
    : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(std::move(outputs)),
      run_subgraph_(std::move(run_subgraph)) {}

bool KernelContext::has_output(size_t i) const {
  return i < node_.outputs().size() && node_.outputs()[i] != nullptr;
}

Result<Tensor*> KernelContext::allocate_output(size_t i, DataType dtype, Shape64 shape) {
  if (i >= outputs_.size()) return internal_error(node_.describe(), ": no output ", i);
  INGOT_ASSIGN_OR_RETURN(outputs_[i], Tensor::zeros(dtype, std::move(shape)));
  return &outputs_[i];
}

Result<std::vector<Tensor>> KernelContext::run_subgraph(const ir::Graph& g,
                                                        const std::vector<Tensor>& inputs) const {
  if (!run_subgraph_) return internal_error(node_.describe(), ": no subgraph runner");
  return run_subgraph_(g, inputs);
}

const KernelRegistry& KernelRegistry::global() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    register_all_kernels(*r);
    return r;
  }();
  return *reg;
}

void KernelRegistry::add(const std::string& op_type, KernelFn fn, const std::string& domain) {
  kernels_[{op_type, ir::canonical_domain(domain)}] = std::move(fn);
}

const KernelFn* KernelRegistry::find(const std::string& op_type, const std::string& domain) const {
  auto it = kernels_.find({op_type, ir::canonical_domain(domain)});
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::op_types() const {
  std::vector<std::string> v;
  for (const auto& [k, f] : kernels_) v.push_back(k.second.empty() ? k.first : k.second + ":" + k.first);
  return v;
}

namespace {

// Inference with concrete inputs, then the kernel. `outputs` holds caller views (or undefined).
Status execute_node(const ir::Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                    const SubgraphRunner& run_subgraph, bool zero_fill) {
  const ir::OpSchema* schema = ir::OpRegistry::global().find(node.op_type(), node.domain());
  int64_t opset = node.owner() ? node.owner()->opset(node.domain()) : 0;
  const KernelFn* kernel = KernelRegistry::global().find(node.op_type(), node.domain());
  if (!schema || !kernel)
    return unsupported("no CPU kernel for op ", node.describe(), " (domain '",
                       node.domain().empty() ? "ai.onnx" : node.domain(), "', opset ", opset, ")");
  std::vector<ir::TensorType> types;
  for (const Tensor* t : inputs) {
    ir::TensorType tt;
    if (t) {
      tt.dtype = t->dtype();
      tt.shape = ir::Shape::from_concrete(t->shape());
    }
    types.push_back(std::move(tt));
  }
  ir::InferenceContext ictx(node, opset, std::move(types), inputs);
  if (schema->inference()) {
    Status s = schema->inference()(ictx);
    if (!s.ok()) return Status(s.code() == StatusCode::kInvalidModel ? StatusCode::kInvalidArgument : s.code(), s.message());
  }
  outputs.resize(node.outputs().size());
  std::vector<Tensor> views = outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!node.outputs()[i]) continue;
    const ir::TensorType& t = ictx.output(i);
    bool concrete = t.dtype != DataType::kUndefined && t.shape.is_concrete();
    if (outputs[i].defined()) {
      if (concrete && (outputs[i].shape() != t.shape.concrete() || outputs[i].dtype() != t.dtype))
        return internal_error(node.describe(), ": output ", i, " view is ", data_type_name(outputs[i].dtype()),
                              shape_to_string(outputs[i].shape()), " but the op produces ", data_type_name(t.dtype),
                              t.shape.to_string());
      if (zero_fill && outputs[i].nbytes()) std::memset(outputs[i].mutable_raw(), 0, outputs[i].nbytes());
    } else if (concrete) {
      INGOT_ASSIGN_OR_RETURN(outputs[i], Tensor::zeros(t.dtype, t.shape.concrete()));
    }
  }
  KernelContext kctx(node, opset, inputs, std::move(outputs), run_subgraph);
  INGOT_RETURN_IF_ERROR((*kernel)(kctx));
  outputs = std::move(kctx.outputs());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!node.outputs()[i]) continue;
    if (!outputs[i].defined())
      return internal_error(node.describe(), ": kernel left output ", i, " ('", node.outputs()[i]->name(), "') unset");
    // A kernel that allocated its own output although a view was given: copy into the view.
    if (views[i].defined() && outputs[i].raw() != views[i].raw()) {
      if (outputs[i].shape() != views[i].shape() || outputs[i].dtype() != views[i].dtype())
        return internal_error(node.describe(), ": output ", i, " came back with another shape");
      if (views[i].dtype() == DataType::kString) views[i].mutable_strings() = outputs[i].strings();
      else if (views[i].nbytes()) std::memcpy(views[i].mutable_raw(), outputs[i].raw(), views[i].nbytes());
      outputs[i] = views[i];
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<Tensor>> run_node(const ir::Node& node, const std::vector<const Tensor*>& inputs,
                                     const SubgraphRunner& run_subgraph) {
  std::vector<Tensor> outputs(node.outputs().size());
  INGOT_RETURN_IF_ERROR(execute_node(node, inputs, outputs, run_subgraph, true));
  return outputs;
}

Status run_node_into(const ir::Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                     const SubgraphRunner& run_subgraph, bool zero_fill) {
  return execute_node(node, inputs, outputs, run_subgraph, zero_fill);
}

Result<Tensor> run_inner_op(const KernelContext& k, const std::string& op_type, ir::Attributes attrs,
                            const std::vector<const Tensor*>& inputs, const std::string& domain) {
  ir::Graph tmp("fused_inner");
  int64_t opset = k.node().owner() ? k.node().owner()->opset("") : 0;
  tmp.set_opset_import("", opset > 0 ? opset : 17);
  if (!domain.empty()) tmp.set_opset_import(domain, 1);
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(inputs[i] ? tmp.add_value("in" + std::to_string(i)) : nullptr);
  ir::Value* out = tmp.add_value("out");
  const ir::Node* n = tmp.add_node(op_type, ins, {out}, std::move(attrs), k.node().name(), domain);
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_node(*n, inputs));
  return outs[0];
}

namespace {

// Values computed so far, with the enclosing scope for subgraphs.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_map<const ir::Value*, Tensor> values;
  std::function<const Tensor*(const ir::Value*)> outer;  // values of an engine's context
  const Tensor* find(const ir::Value* v) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->values.find(v);
      if (it != s->values.end()) return &it->second;
      if (s->outer)
        if (const Tensor* t = s->outer(v)) return t;
    }
    return v->initializer();
  }
};

Status check_input(const ir::Value& decl, const Tensor& t) {
  if (decl.has_type() && decl.dtype() != t.dtype())
    return invalid_argument("input '", decl.name(), "' must be ", data_type_name(decl.dtype()), ", got ",
                            data_type_name(t.dtype()));
  const ir::Shape& s = decl.shape();
  if (!s.rank_known()) return Status::Ok();
  if (s.rank() != t.rank())
    return invalid_argument("input '", decl.name(), "' must have rank ", s.rank(), " ", s.to_string(), ", got ",
                            shape_to_string(t.shape()));
  for (size_t i = 0; i < s.rank(); ++i)
    if (s[i].is_known() && s[i].value() != t.dim(i))
      return invalid_argument("input '", decl.name(), "' dim ", i, " must be ", s[i].value(), ", got ",
                              t.dim(i), " (shape ", shape_to_string(t.shape()), ")");
  return Status::Ok();
}

Result<std::vector<Tensor>> run_graph(const ir::Graph& graph, Scope& scope,
                                      std::map<std::string, Tensor>* keep) {
  SubgraphRunner runner = [&scope, keep](const ir::Graph& g, const std::vector<Tensor>& ins)
      -> Result<std::vector<Tensor>> {
    if (ins.size() != g.inputs().size())
      return invalid_argument("subgraph '", g.name(), "' takes ", g.inputs().size(), " inputs, got ", ins.size());
    Scope child;
    child.parent = &scope;
    for (size_t i = 0; i < ins.size(); ++i) child.values[g.inputs()[i]] = ins[i];
    return run_graph(g, child, nullptr);
  };
  for (const auto& node : graph.nodes()) {
    std::vector<const Tensor*> ins;
    for (const ir::Value* v : node->inputs()) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor* t = scope.find(v);
      if (!t) return invalid_argument(node->describe(), ": input '", v->name(), "' has no value");
      ins.push_back(t);
    }
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_node(*node, ins, runner));
    for (size_t i = 0; i < outs.size(); ++i) {
      const ir::Value* o = node->outputs()[i];
      if (!o) continue;
      if (keep) (*keep)[o->name()] = outs[i];
      scope.values[o] = std::move(outs[i]);
    }
  }
  std::vector<Tensor> results;
  for (const ir::Value* o : graph.outputs()) {
    const Tensor* t = scope.find(o);
    if (!t) return invalid_model("graph output '", o->name(), "' is never computed");
    results.push_back(*t);
  }
  return results;
}

}  // namespace

SubgraphRunner make_subgraph_runner(std::function<const Tensor*(const ir::Value*)> lookup) {
  return [lookup](const ir::Graph& g, const std::vector<Tensor>& ins) -> Result<std::vector<Tensor>> {
    if (ins.size() != g.inputs().size())
      return invalid_argument("subgraph '", g.name(), "' takes ", g.inputs().size(), " inputs, got ", ins.size());
    Scope scope;
    scope.outer = lookup;
    for (size_t i = 0; i < ins.size(); ++i) scope.values[g.inputs()[i]] = ins[i];
    return run_graph(g, scope, nullptr);
  };
}

Result<std::vector<Tensor>> Executor::run(const ir::Graph& graph, const std::map<std::string, Tensor>& inputs) {
  intermediates_.clear();
  Scope scope;
  for (const ir::Value* in : graph.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end()) {
      if (in->initializer()) continue;
      return invalid_argument("missing graph input '", in->name(), "'");
    }
    INGOT_RETURN_IF_ERROR(check_input(*in, it->second));
    scope.values[in] = it->second;
  }
  for (const auto& [name, t] : inputs) {
    const ir::Value* v = graph.find_value(name);
    bool is_input = false;
    for (const ir::Value* in : graph.inputs()) is_input |= in == v;
    if (!is_input) return invalid_argument("'", name, "' is not an input of the graph");
  }
  return run_graph(graph, scope, options_.keep_intermediates ? &intermediates_ : nullptr);
}

}  // namespace ingot::cpu
