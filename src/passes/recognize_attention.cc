// Copyright ingot authors. Apache-2.0.
//
// recognize_attention: finds scaled dot-product attention as exporters write it
// on 4-D per-head tensors [B, H, S, D]:
//
//   scores = MatMul(Q', K')          Q' = Q scaled by any chain of scalar
//   Mul/Div;
//                                    K' = K^T (a Transpose, or the head-split
//                                    Transpose whose perm already puts D before
//                                    S) scaled the same way
//   scores scaled by scalar Mul/Div (any number, any operand order for Mul)
//   [Add(scores, mask) | Where(bool_mask, scores, -inf)]
//   probs = Softmax(scores, last axis)
//   out   = MatMul(probs, V)
//
// Result: one ingot::Attention(Q, K, V[, mask]) {scale, is_causal=0} with the
// semantics of ONNX Attention (opset 23) on 4-D inputs; the product of every
// peeled scalar is `scale` (set explicitly, so the op's 1/√D default never
// applies). K^T is undone by composing the Transpose's perm (or by inserting
// Transpose[0,1,3,2] when K^T was not produced by one). Head split/merge
// Reshape/Transposes stay as they were. ONNX Attention nodes are left alone.
//
// Refused (noted), because Attention could not express it:
//  - a mask that is not additive: Mul(scores, m), Where(m, -inf, scores), Where
//  with a
//    finite fill (a fully masked row would give a uniform row instead of
//    Attention's zeros);
//  - a mask that broadcasts the scores to a larger shape; non-4-D operands;
//  unknown dims;
//  - scaling applied after the mask, Softmax on another axis;
//  - intermediates (scores, probabilities) read elsewhere or exposed as graph
//  outputs.
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

std::unique_ptr<Pass> make_recognize_attention();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

/// Walks back through Mul(v, c) / Mul(c, v) / Div(v, c) with scalar constants
/// c, folding them into *scale; returns the unscaled value.
Value *peel_scale(Value *v, double *scale, std::vector<Node *> *nodes) {
  for (;;) {
    Node *p = v->producer();
    if (p == nullptr || !p->domain().empty() || p->inputs().size() != 2)
      return v;
    if (p->op_type() == "Div") {
      std::optional<double> c = literal_scalar(p->input(1));
      if (!c || *c == 0.0)
        return v;
      *scale /= *c;
      v = p->input(0);
    } else if (p->op_type() == "Mul") {
      std::optional<double> c = literal_scalar(p->input(1));
      Value *next = p->input(0);
      if (!c) {
        c = literal_scalar(p->input(0));
        next = p->input(1);
      }
      if (!c)
        return v;
      *scale *= *c;
      v = next;
    } else {
      return v;
    }
    nodes->push_back(p);
  }
}

bool rank4(const Value *v) {
  return v->shape().rank_known() && v->shape().rank() == 4;
}

bool fully_named(const ir::Shape &s) {
  if (!s.rank_known())
    return false;
  for (const ir::Dim &d : s.dims())
    if (d.is_unknown())
      return false;
  return true;
}

class RecognizeAttention : public Pass {
public:
  const char *name() const override { return "recognize_attention"; }

  Result<bool> run(Graph &g, PassContext &ctx) override {
    std::vector<Node *> softmaxes;
    for (const auto &n : g.nodes())
      if (n->op_type() == "Softmax" && n->domain().empty())
        softmaxes.push_back(n.get());
    std::set<const Node *> removed;
    bool changed = false;
    for (Node *sm : softmaxes) {
      if (removed.count(sm) != 0)
        continue;
      INGOT_ASSIGN_OR_RETURN(bool did, try_match(g, ctx, sm, &removed));
      changed = changed || did;
    }
    if (changed) {
      INGOT_RETURN_IF_ERROR(g.topological_sort());
    }
    return changed;
  }

private:
  Result<bool> refuse(PassContext &ctx, const Node *sm,
                      const std::string &why) {
    ctx.note(name(), refusal_note("attention", "Softmax", sm, why));
    return false;
  }

  Result<bool> try_match(Graph &g, PassContext &ctx, Node *sm,
                         std::set<const Node *> *removed) {
    Value *s_in = sm->input(0);
    if (!rank4(s_in))
      return false;
    Value *probs = sm->output(0);
    if (probs->uses().size() != 1)
      return false;
    Node *pv = probs->uses()[0].first;
    if (pv->op_type() != "MatMul" || !pv->domain().empty() ||
        pv->input(0) != probs)
      return false;
    const int64_t axis =
        sm->attrs().get_int("axis", g.opset("") >= 13 ? -1 : 1);
    if (axis != -1 && axis != 3)
      return refuse(ctx, sm, "Softmax is not over the last axis");

    std::vector<Node *> nodes = {pv, sm};
    Value *mask = nullptr;
    Value *scores = s_in;
    double scale = 1.0;
    auto find_qk = [&](Value *v, double *sc,
                       std::vector<Node *> *ns) -> Node * {
      Value *base = peel_scale(v, sc, ns);
      return onnx_producer(base, "MatMul");
    };
    std::vector<Node *> score_nodes;
    Node *qk = nullptr;
    if (Node *add = onnx_producer(s_in, "Add")) {
      for (int i = 0; i < 2 && qk == nullptr; ++i) {
        double sc = 1.0;
        std::vector<Node *> ns;
        if (Node *m = find_qk(add->input(i), &sc, &ns)) {
          qk = m, scale = sc, score_nodes = ns, mask = add->input(1 - i);
          scores = add->input(i);
        }
      }
      if (qk == nullptr)
        return false;
      nodes.push_back(add);
    } else if (Node *wh = onnx_producer(s_in, "Where")) {
      std::optional<double> fill = literal_scalar(wh->input(2));
      if (!fill || !(std::isinf(*fill) && *fill < 0))
        return refuse(ctx, sm,
                      "Where mask does not select the scores or fills with a "
                      "finite value");
      scores = wh->input(1);
      mask = wh->input(0);
      qk = find_qk(scores, &scale, &score_nodes);
      if (qk == nullptr)
        return false;
      nodes.push_back(wh);
    } else {
      qk = find_qk(s_in, &scale, &score_nodes);
      if (qk == nullptr) {
        if (onnx_producer(s_in, "Mul") || onnx_producer(s_in, "Where"))
          return refuse(ctx, sm, "the mask is not additive");
        return false;
      }
    }
    nodes.insert(nodes.end(), score_nodes.begin(), score_nodes.end());
    nodes.push_back(qk);
    if (mask != nullptr) {
      if (!(s_in->shape() == qk->output(0)->shape()) ||
          !fully_named(s_in->shape()) || !mask->shape().rank_known() ||
          mask->shape().rank() > 4 || mask->shape().rank() < 1)
        return refuse(ctx, sm,
                      "the mask broadcasts the scores to another shape, is a "
                      "scalar, or has unknown shape");
    }
    Value *q = peel_scale(qk->input(0), &scale, &nodes);
    Value *kt = peel_scale(qk->input(1), &scale, &nodes);
    Value *v = pv->input(1);
    if (!rank4(q) || !rank4(kt) || !rank4(v))
      return refuse(ctx, sm, "Q, K or V is not 4-D");
    if (!self_contained(g, nodes, pv))
      return refuse(ctx, sm, "an intermediate is read outside the pattern");

    // K in [B, H, S, D]: compose the Transpose producing K^T, or transpose back
    // explicitly.
    std::vector<int64_t> perm = {0, 1, 3, 2};
    Value *k_src = kt;
    Node *kt_tr = onnx_producer(kt, "Transpose");
    if (kt_tr != nullptr) {
      std::vector<int64_t> p = kt_tr->attrs().get_ints("perm");
      if (p.size() == 4) {
        std::swap(p[2], p[3]);
        perm = p;
        k_src = kt_tr->input(0);
      }
    }
    ir::Shape k_shape = ir::Shape::unknown_rank();
    if (k_src->shape().rank_known() && k_src->shape().rank() == 4) {
      std::vector<ir::Dim> d;
      for (int64_t a : perm)
        d.push_back(k_src->shape()[static_cast<size_t>(a)]);
      k_shape = ir::Shape(d);
    }
    if (g.opset(kIngotDomain) == 0)
      g.set_opset_import(kIngotDomain, 1);
    Value *k =
        g.add_value(unique_value_name(g, kt->name() + ".bhsd", "."), kt->dtype(),
                    k_shape);
    ir::Attributes tattrs;
    tattrs.set_ints("perm", perm);
    const std::string &k_base = kt_tr != nullptr ? kt_tr->name() : qk->name();
    Node *k_node = g.add_node("Transpose", {k_src}, {k}, std::move(tattrs),
                              k_base.empty() ? "" : k_base + "/k_bhsd");
    if (kt_tr != nullptr)
      k_node->absorb_origins(*kt_tr);

    Value *out = pv->output(0);
    Value *fused_out = g.add_value(unique_value_name(g, out->name() + ".fused", "."),
                                   out->dtype(), out->shape());
    ir::Attributes attrs;
    attrs.set_float("scale", static_cast<float>(scale));
    attrs.set_int("is_causal", 0);
    std::vector<Value *> ins = {q, k, v};
    if (mask != nullptr)
      ins.push_back(mask);
    Node *fused =
        g.add_node("Attention", ins, {fused_out}, std::move(attrs),
                   sm->name().empty() ? "Attention" : sm->name() + "/Attention",
                   kIngotDomain);
    for (Node *d : nodes)
      fused->absorb_origins(*d);

    g.replace_all_uses(out, fused_out);
    for (Node *d : nodes)
      removed->insert(d);
    INGOT_RETURN_IF_ERROR(
        remove_nodes_consumers_first(g, nodes, "recognize_attention"));
    // The old K^T Transpose goes when nothing else reads it.
    if (kt_tr != nullptr && kt->uses().empty() && !is_graph_output(g, kt)) {
      removed->insert(kt_tr);
      INGOT_RETURN_IF_ERROR(g.remove_node(kt_tr));
    }
    take_over_name(g, out, fused_out);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> make_recognize_attention() {
  return std::make_unique<RecognizeAttention>();
}

} // namespace ingot::passes
