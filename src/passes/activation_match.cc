// Copyright ingot authors. Apache-2.0.
#include "passes/activation_match.h"

#include <limits>
#include <utility>

#include "passes/fusion_rewrite.h"

namespace ingot::passes {

namespace {

using fusion::is_onnx_op;

// A scalar from a constant input (any single-element float tensor); nullopt otherwise.
std::optional<float> constant_scalar(const ir::Value* v) {
  if (!v || !v->initializer() || v->initializer()->numel() != 1) return std::nullopt;
  return static_cast<float>(v->initializer()->get_f64(0));
}

}  // namespace

std::optional<ActivationMatch> match_activation(const ir::Graph& g, ir::Value* v) {
  if (!v) return std::nullopt;
  // SiLU written out: Mul(v, Sigmoid(v)), v read by exactly those two nodes.
  if (v->uses().size() == 2 && !is_graph_output(g, v)) {
    ir::Node* a = v->uses()[0].first;
    ir::Node* b = v->uses()[1].first;
    if (is_onnx_op(*a, "Mul")) std::swap(a, b);
    if (is_onnx_op(*a, "Sigmoid") && is_onnx_op(*b, "Mul") && a->owner() == &g &&
        fusion::single_consumer(g, a->output(0)) == b && fusion::other_operand(*b, v) == a->output(0))
      return ActivationMatch{"Silu", {}, {a, b}, b->output(0)};
    return std::nullopt;
  }
  ir::Node* n = fusion::single_consumer(g, v);
  if (!n || n->outputs().size() != 1) return std::nullopt;
  // Besides ai.onnx activations, the ones pattern recognition creates for older opsets
  // (ingot::Gelu below opset 20, ingot::Silu) fuse the same way.
  if (!n->domain().empty() && !fusion::is_ingot_activation(*n)) return std::nullopt;
  const ir::Attributes& at = n->attrs();
  const std::string& op = n->op_type();
  ActivationMatch act{op, {}, {n}, n->output(0)};
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Silu") return act;
  if (op == "LeakyRelu") {
    act.params = {at.get_float("alpha", 0.01f)};
    return act;
  }
  if (op == "HardSigmoid") {
    act.params = {at.get_float("alpha", 0.2f), at.get_float("beta", 0.5f)};
    return act;
  }
  if (op == "Gelu") {
    std::string approx = at.get_string("approximate", "none");
    if (approx != "none" && approx != "tanh") return std::nullopt;
    act.name = approx == "tanh" ? "GeluTanh" : "Gelu";
    return act;
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (g.opset("") < 11) {
      lo = at.get_float("min", lo);
      hi = at.get_float("max", hi);
    } else {
      for (size_t i = 1; i < n->inputs().size(); ++i) {
        if (!n->input(i)) continue;
        std::optional<float> s = constant_scalar(n->input(i));
        if (!s) return std::nullopt;
        (i == 1 ? lo : hi) = *s;
      }
    }
    act.params = {lo, hi};
    return act;
  }
  return std::nullopt;
}

}  // namespace ingot::passes
