// Copyright ingot authors. Apache-2.0.
//
// recognize_layernorm: finds LayerNorm and RMSNorm written out of primitive
// ops, as exporters emit them for models older than opset 17 (or from
// frameworks that decompose norms):
//
//   LayerNorm  m = ReduceMean(x); d = Sub(x, m); p = Pow(d, 2) | Mul(d, d); v =
//   ReduceMean(p)
//              s = Sqrt(Add(v, eps)); n = Div(d, s) | Mul(d, Reciprocal(s)) |
//              Mul(d, Div(1, s)) [y = Mul(n, gamma)] [z = Add(y, beta)]
//   RMSNorm    the same without the mean: p = Pow(x, 2) | Mul(x, x), n = x /
//   sqrt(v + eps)
//              [y = Mul(n, gamma)]
//
// Result: LayerNormalization (ai.onnx, opset >= 17) or
// ingot::LayerNormalization (same semantics, for older models);
// RMSNormalization (opset >= 23) or ingot::RMSNormalization. Missing gamma
// becomes a constant 1; operand order of Add/Mul does not matter.
//
// Refused (noted in the PassContext), because the fused op could not say the
// same thing:
//  - reductions over axes that are not the trailing ones (LayerNormalization
//  normalizes
//    x.shape[axis:]), different axes in the two ReduceMeans, keepdims=0,
//    unknown rank;
//  - gamma/beta that would broadcast over leading (non-normalized) dims or
//  enlarge the output;
//  - any intermediate read outside the pattern or exposed as a graph output
//  (the fused node
//    would not produce it).
// Only the top-level graph is rewritten.
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

std::unique_ptr<Pass> make_recognize_layernorm();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

/// Sorted, normalized ReduceMean axes (attribute before opset 18, input after);
/// nullopt when they are not constant or keepdims is 0.
std::optional<std::vector<int64_t>> mean_axes(const Node *n, int64_t rank) {
  if (n->attrs().get_int("keepdims", 1) != 1)
    return std::nullopt;
  std::vector<int64_t> axes;
  if (n->inputs().size() > 1 && n->input(1) != nullptr) {
    const Tensor *t = n->input(1)->initializer();
    if (t == nullptr)
      return std::nullopt;
    for (int64_t i = 0; i < t->numel(); ++i)
      axes.push_back(static_cast<int64_t>(t->get_f64(i)));
  } else if (n->attrs().has("axes")) {
    axes = n->attrs().get_ints("axes");
  }
  if (axes.empty()) {
    if (n->attrs().get_int("noop_with_empty_axes", 0) != 0)
      return std::nullopt;
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    if (a < -rank || a >= rank)
      return std::nullopt;
    if (a < 0)
      a += rank;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

/// gamma/beta must broadcast into the normalized dims only and leave the shape
/// unchanged.
bool fits_normalized(const Value *p, const Value *x, int64_t k) {
  const ir::Shape &ps = p->shape();
  const ir::Shape &xs = x->shape();
  if (!ps.rank_known() || !xs.rank_known() ||
      static_cast<int64_t>(ps.rank()) > k)
    return false;
  const size_t off = xs.rank() - ps.rank();
  for (size_t i = 0; i < ps.rank(); ++i) {
    const ir::Dim &d = ps[i];
    if (d.is_known() && d.value() == 1)
      continue;
    const ir::Dim &e = xs[off + i];
    if (!(d.is_known() && e.is_known() && d.value() == e.value()))
      return false;
  }
  return true;
}

class RecognizeLayerNorm : public Pass {
public:
  const char *name() const override { return "recognize_layernorm"; }

  Result<bool> run(Graph &g, PassContext &ctx) override {
    return match_at_anchors(
        g, [](const Node &n) { return n.op_type() == "Sqrt" && n.domain().empty(); },
        [&](Node *a, std::set<const Node *> *removed) { return try_match(g, ctx, a, removed); });
  }

private:
  Result<bool> try_match(Graph &g, PassContext &ctx, Node *sq,
                         std::set<const Node *> *removed) {
    std::vector<Node *> nodes; // producer → consumer order
    Node *add_eps = onnx_producer(sq->input(0), "Add");
    if (add_eps == nullptr)
      return false;
    std::optional<double> eps = literal_scalar(add_eps->input(1));
    Value *v = add_eps->input(0);
    if (!eps) {
      eps = literal_scalar(add_eps->input(0));
      v = add_eps->input(1);
    }
    Node *mean2 = onnx_producer(v, "ReduceMean");
    if (!eps || mean2 == nullptr)
      return false;
    Value *p = mean2->input(0);
    Value *a = nullptr;
    Node *square = nullptr;
    if (Node *pw = onnx_producer(p, "Pow")) {
      std::optional<double> e = literal_scalar(pw->input(1));
      if (e && *e == 2.0)
        square = pw, a = pw->input(0);
    } else if (Node *m = onnx_producer(p, "Mul")) {
      if (m->input(0) == m->input(1))
        square = m, a = m->input(0);
    }
    if (square == nullptr)
      return false;

    Node *sub = onnx_producer(a, "Sub");
    Node *mean1 =
        sub != nullptr ? onnx_producer(sub->input(1), "ReduceMean") : nullptr;
    const bool layer = mean1 != nullptr && mean1->input(0) == sub->input(0);
    Value *x = layer ? sub->input(0) : a;
    const char *kind = layer ? "LayerNorm" : "RMSNorm";
    if (!x->shape().rank_known()) {
      ctx.note(name(), refusal_note(kind, "Sqrt", sq, "input rank unknown"));
      return false;
    }
    const int64_t rank = static_cast<int64_t>(x->shape().rank());
    auto axes2 = mean_axes(mean2, rank);
    auto axes1 = layer ? mean_axes(mean1, rank) : axes2;
    bool trailing = axes2 && axes1 && *axes1 == *axes2 && !axes2->empty();
    if (trailing)
      for (size_t i = 0; i < axes2->size(); ++i)
        trailing = trailing &&
                   (*axes2)[i] == rank - static_cast<int64_t>(axes2->size()) +
                                      static_cast<int64_t>(i);
    if (!trailing) {
      ctx.note(name(), refusal_note(kind, "Sqrt", sq,
                                    "reduction is not over the trailing axes "
                                    "(or keepdims=0 / axes differ)"));
      return false;
    }
    const int64_t k = static_cast<int64_t>(axes2->size());
    if (layer)
      nodes.insert(nodes.end(), {mean1, sub});
    nodes.insert(nodes.end(), {square, mean2, add_eps, sq});

    // Forward: the division by the root.
    Value *s = sq->output(0);
    Node *user = single_consumer(g, s);
    if (user == nullptr)
      return false;
    Value *n = nullptr;
    if (user->op_type() == "Div" && user->domain().empty() &&
        user->input(1) == s && user->input(0) == a) {
      nodes.push_back(user);
      n = user->output(0);
    } else {
      const bool recip =
          user->op_type() == "Reciprocal" && user->domain().empty();
      const bool one_over =
          user->op_type() == "Div" && user->domain().empty() &&
          user->input(1) == s &&
          literal_scalar(user->input(0)) == std::optional<double>(1.0);
      if (!recip && !one_over)
        return false;
      Node *mul = single_onnx_consumer(g, user->output(0), "Mul");
      if (mul == nullptr || other_input(mul, user->output(0)) != a)
        return false;
      nodes.insert(nodes.end(), {user, mul});
      n = mul->output(0);
    }
    Value *out = n;
    Value *gamma = nullptr;
    Value *beta = nullptr;
    if (Node *mg = single_onnx_consumer(g, out, "Mul")) {
      Value *cand = other_input(mg, out);
      if (cand != nullptr && fits_normalized(cand, x, k)) {
        gamma = cand;
        nodes.push_back(mg);
        out = mg->output(0);
      }
    }
    if (layer && gamma != nullptr) {
      if (Node *ab = single_onnx_consumer(g, out, "Add")) {
        Value *cand = other_input(ab, out);
        if (cand != nullptr && fits_normalized(cand, x, k)) {
          beta = cand;
          nodes.push_back(ab);
          out = ab->output(0);
        }
      }
    }
    if (!self_contained(g, nodes, nodes.back())) {
      ctx.note(name(), refusal_note(kind, "Sqrt", sq,
                                    "an intermediate is read outside the "
                                    "pattern"));
      return false;
    }

    if (gamma == nullptr) {
      const DataType t =
          x->dtype() == DataType::kUndefined ? DataType::kFloat32 : x->dtype();
      INGOT_ASSIGN_OR_RETURN(Tensor one, Tensor::zeros(t, {1}));
      one.set_f64(0, 1.0);
      gamma = g.add_initializer(unique_value_name(g, out->name() + ".scale", "."),
                                std::move(one));
    }
    const int64_t needed = layer ? 17 : 23;
    const bool onnx_op = g.opset("") >= needed;
    const std::string domain = onnx_op ? "" : kIngotDomain;
    if (!onnx_op && g.opset(kIngotDomain) == 0)
      g.set_opset_import(kIngotDomain, 1);
    ir::Attributes attrs;
    attrs.set_int("axis", -k);
    attrs.set_float("epsilon", static_cast<float>(*eps));
    std::vector<Value *> ins = {x, gamma};
    if (beta != nullptr)
      ins.push_back(beta);
    Value *fused_out = g.add_value(unique_value_name(g, out->name() + ".fused", "."),
                                   out->dtype(), out->shape());
    const std::string op = layer ? "LayerNormalization" : "RMSNormalization";
    Node *fused = g.add_node(op, ins, {fused_out}, std::move(attrs),
                             fresh_node_name(g, sq, op), domain);
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

  static std::string fresh_node_name(const Graph &g, const Node *anchor,
                                     const std::string &op) {
    (void)g;
    return anchor->name().empty() ? op : anchor->name() + "/" + op;
  }
};

} // namespace

std::unique_ptr<Pass> make_recognize_layernorm() {
  return std::make_unique<RecognizeLayerNorm>();
}

} // namespace ingot::passes
