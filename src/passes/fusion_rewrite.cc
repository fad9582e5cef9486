// Copyright ingot authors. Apache-2.0.
#include "passes/fusion_rewrite.h"

#include <algorithm>
#include <set>
#include <string>

#include "passes/pass.h"

namespace ingot::passes::fusion {

ir::Node* single_consumer(const ir::Graph& g, const ir::Value* v) {
  ir::Node* n = passes::single_consumer(g, v);
  return n && n->owner() == &g ? n : nullptr;
}

ir::Value* other_operand(const ir::Node& n, const ir::Value* v) {
  if (n.inputs().size() != 2 || !n.input(0) || !n.input(1)) return nullptr;
  if (n.input(0) == v && n.input(1) != v) return n.input(1);
  if (n.input(1) == v && n.input(0) != v) return n.input(0);
  return nullptr;
}

bool is_onnx_op(const ir::Node& n, const char* op_type) { return n.domain().empty() && n.op_type() == op_type; }

bool is_ingot_activation(const ir::Node& n) {
  return n.domain() == kIngotDomain && (n.op_type() == "Silu" || n.op_type() == "Gelu");
}

bool is_elementwise(const ir::Node& n) {
  static const std::set<std::string> kOps = {
      "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf", "Floor", "Ceil",
      "Round", "Sign", "Sin", "Cos", "Tan", "Softplus", "Softsign", "HardSwish", "HardSigmoid", "LeakyRelu",
      "Elu", "Selu", "Celu", "Gelu", "Mish", "ThresholdedRelu", "Clip", "PRelu", "Add", "Sub", "Mul",
      "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
      "Xor", "Not", "Where", "Cast"};
  if ((!n.domain().empty() || !kOps.count(n.op_type())) && !is_ingot_activation(n)) return false;
  if (n.outputs().size() != 1 || !n.output(0)) return false;
  for (const ir::Value* v : n.inputs())
    if (!v) return n.op_type() == "Clip";  // Clip may omit min or max
  if (n.op_type() == "Cast") {  // the casts a fused kernel computes exactly as the reference does
    const ir::Value* in = n.input(0);
    return in && is_plain_cast(in->dtype(), n.output(0)->dtype());
  }
  return true;
}

Result<bool> keep_fused_node(ir::Graph& g, ir::Node* fused, const std::vector<const ir::Node*>& parts,
                             const FusionCheck& runs, std::string* why) {
  if (!runs) return true;
  const Result<bool> keep = runs(*fused, parts, why);
  if (keep.ok() && *keep) return true;
  INGOT_RETURN_IF_ERROR(g.remove_node(fused));
  if (!keep.ok()) return keep.status();
  return false;
}

size_t node_index(const ir::Graph& g, const ir::Node* n) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].get() == n) return i;
  return g.nodes().size();
}

Result<ir::Node*> replace_with_fused(ir::Graph& g, const std::string& op_type, const std::string& domain,
                                     const std::vector<ir::Value*>& inputs, ir::Attributes attrs,
                                     const std::string& name, ir::Value* last,
                                     const std::vector<ir::Node*>& absorbed) {
  ir::Value* out = g.add_value("", last->dtype(), last->shape());
  ir::Node* fused = g.add_node(op_type, inputs, {out}, std::move(attrs), name, domain);
  for (const ir::Node* a : absorbed) fused->absorb_origins(*a);
  g.replace_all_uses(last, out);
  // Consumers first, so every removed node's outputs are already unread.
  std::vector<ir::Node*> order = absorbed;
  std::sort(order.begin(), order.end(),
            [&g](const ir::Node* a, const ir::Node* b) { return node_index(g, a) > node_index(g, b); });
  for (ir::Node* a : order) INGOT_RETURN_IF_ERROR(g.remove_node(a));
  std::string public_name = last->name();
  g.rename_value(last, "");
  g.rename_value(out, public_name);
  INGOT_RETURN_IF_ERROR(g.topological_sort());
  return fused;
}

}  // namespace ingot::passes::fusion
