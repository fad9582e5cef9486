// Copyright ingot authors. Apache-2.0.
#include "builder/shape_propagation.h"

#include "backend/cpu/executor.h"
#include "ir/op_registry.h"

namespace ingot::builder {

namespace {
bool has_subgraph(const ir::Node& n) {
  for (const auto& [k, a] : n.attrs().all())
    if (a.g || !a.graphs.empty()) return true;
  return false;
}
bool is_random(const std::string& op) {
  return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial";
}
}  // namespace

Result<ShapeState> propagate_shapes(const ir::Graph& g, const std::map<const ir::Value*, Shape64>& input_shapes) {
  ShapeState st;
  for (const ir::Value* v : g.initializers()) st.shapes[v] = v->initializer()->shape();
  for (const auto& [v, s] : input_shapes) st.shapes[v] = s;
  const ir::OpRegistry& reg = ir::OpRegistry::global();
  for (const auto& node : g.nodes()) {
    const ir::OpSchema* schema = reg.find(node->op_type(), node->domain());
    if (!schema) return unsupported("unsupported op ", node->describe());
    std::vector<ir::TensorType> types;
    std::vector<const Tensor*> values;
    bool all_values_known = true;
    bool small = true;
    for (const ir::Value* v : node->inputs()) {
      ir::TensorType t;
      const Tensor* val = nullptr;
      if (v) {
        t.dtype = v->dtype();
        auto s = st.shapes.find(v);
        if (s != st.shapes.end()) {
          t.shape = ir::Shape::from_concrete(s->second);
          small &= shape_numel(s->second) <= kHostValueLimit;
        } else {
          t.shape = v->shape();
          small = false;
        }
        val = v->initializer();
        if (!val) {
          auto h = st.host_values.find(v);
          if (h != st.host_values.end()) val = &h->second;
        }
        if (!val) all_values_known = false;
      }
      types.push_back(std::move(t));
      values.push_back(val);
    }
    int64_t opset = g.opset(node->domain());
    ir::InferenceContext ctx(*node, opset, types, values);
    if (schema->inference()) {
      Status s = schema->inference()(ctx);
      if (!s.ok()) return Status(StatusCode::kInvalidArgument, s.message());
    }
    bool outputs_small = true;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const ir::Value* o = node->outputs()[i];
      if (!o) continue;
      const ir::TensorType& t = ctx.output(i);
      if (t.shape.is_concrete()) {
        st.shapes[o] = t.shape.concrete();
        outputs_small &= shape_numel(st.shapes[o]) <= kHostValueLimit;
      } else {
        st.dynamic.insert(o);
        st.partial[o] = t.shape;
        outputs_small = false;
      }
      if (const Tensor* v = ctx.output_value(i)) st.host_values[o] = *v;
    }
    bool need_values = false;
    for (const ir::Value* o : node->outputs())
      if (o && !st.host_values.count(o)) need_values = true;
    if (need_values && all_values_known && small && outputs_small && !has_subgraph(*node) &&
        !is_random(node->op_type()) && node->op_type() != "Dropout") {
      auto outs = cpu::run_node(*node, values);
      if (outs.ok()) {
        for (size_t i = 0; i < outs->size(); ++i)
          if (node->outputs()[i]) st.host_values[node->outputs()[i]] = (*outs)[i];
      }
    }
  }
  return st;
}

}  // namespace ingot::builder
