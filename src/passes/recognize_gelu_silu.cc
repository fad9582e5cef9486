// Copyright ingot authors. Apache-2.0.
//
// recognize_gelu_silu: finds smooth activations written out of primitive ops.
//
//   GELU (erf)   a = Add(Erf(Div(x, √2) | Mul(x, 1/√2)), 1), then 0.5·x·a in
//   any grouping:
//                Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a,
//                0.5))
//   GELU (tanh)  a = Add(Tanh(Mul(Add(x, Mul(x³, 0.044715)), √(2/π))), 1), same
//   0.5·x·a tail;
//                x³ as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x))
//   SiLU         Mul(x, Sigmoid(x))
//   HardSwish    Mul(x, HardSigmoid(x){alpha=1/6, beta=0.5})
// Operand order of every Add/Mul is free.
//
// Result: Gelu (ai.onnx opset >= 20) or ingot::Gelu
// {approximate="none"|"tanh"}; ingot::Silu; HardSwish (opset >= 14).
//
// Refused: constants that differ from the exact ones beyond float rounding
// (1e-5 relative) — a GELU with a tweaked coefficient is another function;
// HardSigmoid with other alpha/beta (not HardSwish); any intermediate read
// outside the pattern or exposed as a graph output. Only the top-level graph is
// rewritten.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_recognize_gelu_silu();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

bool near(double a, double b) {
  return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b));
}
bool is_const(const Value *v, double want) {
  std::optional<double> s = literal_scalar(v);
  return s && near(*s, want);
}

/// For a binary node with one scalar operand near `c`: the other operand.
Value *operand_beside_const(const Node *n, double c) {
  if (n == nullptr || n->inputs().size() != 2)
    return nullptr;
  if (is_const(n->input(1), c))
    return n->input(0);
  if (is_const(n->input(0), c))
    return n->input(1);
  return nullptr;
}

/// The 0.5·x·a tail after `a` (= 1 + erf(..) or 1 + tanh(..)); appends its
/// nodes, returns the result value or nullptr.
Value *match_half_x_times(const Graph &g, Value *a, Value *x,
                          std::vector<Node *> *nodes) {
  Node *m1 = single_onnx_consumer(g, a, "Mul");
  if (m1 == nullptr)
    return nullptr;
  Value *o1 = other_input(m1, a);
  if (o1 == nullptr)
    return nullptr;
  if (o1 == x) { // Mul(Mul(x, a), 0.5)
    Node *m2 = single_onnx_consumer(g, m1->output(0), "Mul");
    if (m2 == nullptr || operand_beside_const(m2, 0.5) != m1->output(0))
      return nullptr;
    nodes->insert(nodes->end(), {m1, m2});
    return m2->output(0);
  }
  if (is_const(o1, 0.5)) { // Mul(x, Mul(a, 0.5))
    Node *m2 = single_onnx_consumer(g, m1->output(0), "Mul");
    if (m2 == nullptr || other_input(m2, m1->output(0)) != x)
      return nullptr;
    nodes->insert(nodes->end(), {m1, m2});
    return m2->output(0);
  }
  Node *half = onnx_producer(o1, "Mul"); // Mul(Mul(x, 0.5), a)
  if (half != nullptr && operand_beside_const(half, 0.5) == x) {
    nodes->insert(nodes->end(), {half, m1});
    return m1->output(0);
  }
  return nullptr;
}

/// x when `c` is x³ (Pow(x, 3), Mul(Mul(x, x), x), Mul(x, Mul(x, x))).
Value *cube_base(const Value *c, std::vector<Node *> *nodes) {
  if (Node *p = onnx_producer(c, "Pow")) {
    if (!is_const(p->input(1), 3.0))
      return nullptr;
    nodes->push_back(p);
    return p->input(0);
  }
  Node *m = onnx_producer(c, "Mul");
  if (m == nullptr)
    return nullptr;
  for (int i = 0; i < 2; ++i) {
    Node *sq = onnx_producer(m->input(i), "Mul");
    Value *x = m->input(1 - i);
    if (sq != nullptr && sq->input(0) == x && sq->input(1) == x) {
      nodes->insert(nodes->end(), {sq, m});
      return x;
    }
  }
  return nullptr;
}

class RecognizeGeluSilu : public Pass {
public:
  const char *name() const override { return "recognize_gelu_silu"; }

  Result<bool> run(Graph &g, PassContext &ctx) override {
    return match_at_anchors(
        g,
        [](const Node &n) {
          const std::string &op = n.op_type();
          return n.domain().empty() && (op == "Erf" || op == "Tanh" ||
                                        op == "Sigmoid" || op == "HardSigmoid");
        },
        [&](Node *a, std::set<const Node *> *removed) { return try_match(g, ctx, a, removed); });
  }

private:
  Result<bool> try_match(Graph &g, PassContext &ctx, Node *anchor,
                         std::set<const Node *> *removed) {
    const std::string &op = anchor->op_type();
    std::vector<Node *> nodes;
    Value *x = nullptr;
    Value *out = nullptr;
    std::string fused_op, domain;
    ir::Attributes attrs;
    if (op == "Sigmoid" || op == "HardSigmoid") {
      x = anchor->input(0);
      Node *mul = single_onnx_consumer(g, anchor->output(0), "Mul");
      if (mul == nullptr || other_input(mul, anchor->output(0)) != x)
        return false;
      if (op == "HardSigmoid") {
        const double alpha = anchor->attrs().get_float("alpha", 0.2f);
        const double beta = anchor->attrs().get_float("beta", 0.5f);
        if (!near(alpha, 1.0 / 6.0) || !near(beta, 0.5)) {
          ctx.note(name(),
                   refusal_note("x*HardSigmoid(x)", "", anchor,
                                "alpha/beta are not 1/6 and 0.5, so it is not "
                                "HardSwish"));
          return false;
        }
        if (g.opset("") < 14)
          return false;
        fused_op = "HardSwish";
      } else {
        fused_op = "Silu";
        domain = kIngotDomain;
      }
      nodes = {anchor, mul};
      out = mul->output(0);
    } else {
      bool erf = op == "Erf";
      Value *inner = anchor->input(0);
      if (erf) {
        Node *d = onnx_producer(inner, "Div");
        if (d != nullptr && is_const(d->input(1), std::sqrt(2.0))) {
          x = d->input(0);
        } else {
          d = onnx_producer(inner, "Mul");
          x = operand_beside_const(d, 1.0 / std::sqrt(2.0));
        }
        if (x == nullptr)
          return false;
        nodes.push_back(d);
      } else {
        Node *sc = onnx_producer(inner, "Mul");
        Value *r =
            operand_beside_const(sc, 0.79788456080286535588 /* sqrt(2/pi) */);
        Node *add = onnx_producer(r, "Add");
        if (add == nullptr)
          return false;
        for (int i = 0; i < 2 && x == nullptr; ++i) {
          Node *q = onnx_producer(add->input(i), "Mul");
          Value *cube = operand_beside_const(q, 0.044715);
          if (cube == nullptr)
            continue;
          std::vector<Node *> cube_nodes;
          Value *base = cube_base(cube, &cube_nodes);
          if (base != nullptr && base == add->input(1 - i)) {
            x = base;
            nodes = cube_nodes;
            nodes.insert(nodes.end(), {q, add, sc});
          }
        }
        if (x == nullptr)
          return false;
      }
      nodes.push_back(anchor);
      Node *plus = single_onnx_consumer(g, anchor->output(0), "Add");
      if (plus == nullptr ||
          operand_beside_const(plus, 1.0) != anchor->output(0))
        return false;
      nodes.push_back(plus);
      out = match_half_x_times(g, plus->output(0), x, &nodes);
      if (out == nullptr)
        return false;
      fused_op = "Gelu";
      attrs.set_string("approximate", erf ? "none" : "tanh");
      if (g.opset("") < 20)
        domain = kIngotDomain;
    }
    if (!self_contained(g, nodes, nodes.back())) {
      ctx.note(name(), refusal_note(fused_op, op, anchor,
                                    "an intermediate is read outside the "
                                    "pattern"));
      return false;
    }
    if (!domain.empty() && g.opset(domain) == 0)
      g.set_opset_import(domain, 1);
    Value *fused_out = g.add_value(unique_value_name(g, out->name() + ".fused", "."),
                                   out->dtype(), out->shape());
    Node *fused = g.add_node(
        fused_op, {x}, {fused_out}, std::move(attrs),
        anchor->name().empty() ? fused_op : anchor->name() + "/" + fused_op,
        domain);
    for (Node *d : nodes)
      fused->absorb_origins(*d);
    g.replace_all_uses(out, fused_out);
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      removed->insert(*it);
      INGOT_RETURN_IF_ERROR(g.remove_node(*it));
    }
    take_over_name(g, out, fused_out);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> make_recognize_gelu_silu() {
  return std::make_unique<RecognizeGeluSilu>();
}

} // namespace ingot::passes
