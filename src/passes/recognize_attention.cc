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
//   [Add(scores, mask) | Add(Add(scores, bias), mask) (T5: one mask, their sum) |
//    Where(bool_mask, scores, -inf)]
//   probs = Softmax(scores, last axis)
//           [Where(IsNaN(probs), 0, probs): PyTorch's SDPA export zeroing fully masked rows]
//   out   = MatMul(probs, V)
//
// Result: one ingot::Attention(Q, K, V[, mask]) {scale, is_causal=0} with the
// semantics of ONNX Attention (opset 23) on 4-D inputs; the product of every
// peeled scalar is `scale` (set explicitly, so the op's 1/√D default never
// applies). K^T is undone by composing the Transpose's perm (or by inserting
// Transpose[0,1,3,2] when K^T was not produced by one). When Q, K and V come
// from head splits x [B,S,H·D] -> Reshape [B,S,H,D] -> Transpose [0,2,1,3] (K:
// perm [0,2,3,1], or that split followed by Transpose [0,1,3,2]) and the
// output goes through the merge Transpose [0,2,1,3] -> Reshape [B,S,H·D], all
// read once, the Attention takes the 3-D tensors {q_num_heads = kv_num_heads =
// H} and those 8 (or 9) layout nodes go too; otherwise they stay and the
// Attention is 4-D. ONNX Attention nodes are left alone.
//
// Swin's shifted windows: the scores [B·P, H, N, N] (plus the relative-position bias) go through
// Reshape [B, P, H, N, N] -> Add(mask [1, P, 1, N, N]) -> Reshape [B·P, H, N, N] before the
// Softmax: the window mask is the same for every image. The Attention then takes the sum of the
// bias and the window mask as one [P, H, N, N] mask with mask_batch_period = P (batch entry
// b·P + w reads mask entry w); the two Reshapes and the Add go. The new mask nodes read constants
// only, so the cleanup after folds them into one initializer.
//
// MaxViT's scores [B, G, H, N, M] (5-D, after lower_einsum) are matched too: Attention runs on
// the [B·G, H, ...] views of Q, K and V and its output is reshaped back (see try_5d).
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

/// The head split x [B, S, H·D] -> Reshape [B, S, H, D] -> Transpose `perm`
/// ending in `v` (the Transpose's output), each read once; appends the two
/// nodes and returns x, or nullptr. *heads gets H.
Value *head_split(const Graph &g, Value *v, const std::vector<int64_t> &perm,
                  int64_t *heads, std::vector<Node *> *nodes) {
  Node *tr = onnx_producer(v, "Transpose");
  if (tr == nullptr || tr->attrs().get_ints("perm") != perm ||
      !has_single_consumer(g, v))
    return nullptr;
  Node *rs = onnx_producer(tr->input(0), "Reshape");
  if (rs == nullptr || !has_single_consumer(g, tr->input(0)))
    return nullptr;
  Value *x = rs->input(0);
  const ir::Shape &s3 = x->shape(), &s4 = rs->output(0)->shape();
  if (!s3.rank_known() || s3.rank() != 3 || !s4.rank_known() ||
      s4.rank() != 4 || !(s3[0] == s4[0]) || !(s3[1] == s4[1]) ||
      !s3[2].is_known() || !s4[2].is_known() || !s4[3].is_known() ||
      s3[2].value() != s4[2].value() * s4[3].value())
    return nullptr;
  *heads = s4[2].value();
  nodes->insert(nodes->end(), {tr, rs});
  return x;
}

/// Swin's window mask around the scores (see the file comment): `back` is the Reshape feeding
/// the Softmax. On a match: the 4-D scores before the split, the mask value, the window count
/// P and the three nodes.
struct WindowMask {
  Value *scores = nullptr;  ///< [B·P, H, N, N]
  Value *mask = nullptr;    ///< broadcasts to [1, P, H, N, N]
  std::vector<int64_t> mask_dims;  ///< the mask right-aligned to 5 dims
  int64_t period = 0;
  std::vector<Node *> nodes;
};

bool window_mask(const Graph &g, Node *back, WindowMask *w) {
  Node *add = onnx_producer(back->input(0), "Add");
  if (add == nullptr || !has_single_consumer(g, back->input(0)))
    return false;
  const ir::Shape &s4 = back->output(0)->shape(), &s5 = add->output(0)->shape();
  if (!fully_named(s4) || s4.rank() != 4 || !fully_named(s5) || s5.rank() != 5)
    return false;
  if (s5[0].value() * s5[1].value() != s4[0].value() || !(s5[2] == s4[1]) || !(s5[3] == s4[2]) ||
      !(s5[4] == s4[3]))
    return false;
  for (int i = 0; i < 2; ++i) {
    Node *split = onnx_producer(add->input(i), "Reshape");
    Value *m = add->input(1 - i);
    if (split == nullptr || !has_single_consumer(g, add->input(i)) || !(split->output(0)->shape() == s5) ||
        !(split->input(0)->shape() == s4) || !m->shape().rank_known() || m->shape().rank() > 5)
      continue;
    std::vector<int64_t> d(5, 1);
    const ir::Shape &ms = m->shape();
    bool ok = fully_named(ms);
    for (size_t j = 0; ok && j < ms.rank(); ++j) d[5 - ms.rank() + j] = ms[j].value();
    // The mask must not depend on the image (dim 0) nor widen the scores.
    for (size_t j = 0; ok && j < 5; ++j) ok = d[j] == 1 || (j > 0 && d[j] == s5[j].value());
    if (!ok)
      continue;
    w->scores = split->input(0);
    w->mask = m;
    w->mask_dims = d;
    w->period = s5[1].value();
    w->nodes = {back, add, split};
    return true;
  }
  return false;
}

class RecognizeAttention : public Pass {
public:
  const char *name() const override { return "recognize_attention"; }

  Result<bool> run(Graph &g, PassContext &ctx) override {
    return match_at_anchors(
        g, [](const Node &n) { return n.op_type() == "Softmax" && n.domain().empty(); },
        [&](Node *a, std::set<const Node *> *removed) { return try_match(g, ctx, a, removed); });
  }

private:
  /// The 3-D form: when Q, K and V come from head splits of [B, S, H·D]
  /// tensors and the output goes through the head merge, one Attention on the
  /// 3-D tensors {q_num_heads = kv_num_heads = H} replaces the 8 layout nodes
  /// too. False (graph untouched) when the layout does not match.
  Result<bool> try_3d(Graph &g, Node *sm, Value *q, Value *kt, Value *v,
                      Node *pv, Value *mask, double scale, int64_t period,
                      std::vector<Node *> nodes,
                      std::set<const Node *> *removed) {
    const std::vector<int64_t> split = {0, 2, 1, 3};
    std::vector<Node *> layout;
    int64_t hq = 0, hk = 0, hv = 0;
    Value *q3 = head_split(g, q, split, &hq, &layout);
    Value *k3 = head_split(g, kt, {0, 2, 3, 1}, &hk, &layout);
    if (k3 == nullptr && q3 != nullptr) {
      // K^T as Transpose[0,1,3,2] of a regular head split.
      Node *ktr = onnx_producer(kt, "Transpose");
      if (ktr != nullptr &&
          ktr->attrs().get_ints("perm") == std::vector<int64_t>{0, 1, 3, 2} &&
          has_single_consumer(g, kt)) {
        k3 = head_split(g, ktr->input(0), split, &hk, &layout);
        if (k3 != nullptr)
          layout.push_back(ktr);
      }
    }
    Value *v3 = head_split(g, v, split, &hv, &layout);
    if (q3 == nullptr || k3 == nullptr || v3 == nullptr || hq != hk ||
        hq != hv)
      return false;
    Value *ctx4 = pv->output(0);
    Node *merge_tr = single_onnx_consumer(g, ctx4, "Transpose");
    if (merge_tr == nullptr ||
        merge_tr->attrs().get_ints("perm") != split)
      return false;
    Node *merge_rs =
        single_onnx_consumer(g, merge_tr->output(0), "Reshape");
    if (merge_rs == nullptr)
      return false;
    const ir::Shape &c4 = ctx4->shape(), &o3 = merge_rs->output(0)->shape();
    if (!c4.rank_known() || c4.rank() != 4 || !o3.rank_known() ||
        o3.rank() != 3 || !(o3[0] == c4[0]) || !(o3[1] == c4[2]) ||
        !c4[1].is_known() || !c4[3].is_known() || !o3[2].is_known() ||
        o3[2].value() != c4[1].value() * c4[3].value())
      return false;
    layout.insert(layout.end(), {merge_tr, merge_rs});
    nodes.insert(nodes.end(), layout.begin(), layout.end());

    ir::Attributes attrs = attention_attrs(scale, period);
    attrs.set_int("q_num_heads", hq);
    attrs.set_int("kv_num_heads", hq);
    INGOT_RETURN_IF_ERROR(replace_with_attention(g, sm, nodes, merge_rs->output(0),
                                                 {q3, k3, v3}, mask,
                                                 std::move(attrs), removed));
    return true;
  }

  static ir::Attributes attention_attrs(double scale, int64_t period) {
    ir::Attributes attrs;
    attrs.set_float("scale", static_cast<float>(scale));
    attrs.set_int("is_causal", 0);
    if (period > 0)
      attrs.set_int("mask_batch_period", period);
    return attrs;
  }

  /// The window mask (right-aligned to [1, P, H, N, N]) as a 4-D [P', H', N', N'] value, added to
  /// `bias` (the scores' own additive mask, or null). Computed here when both are constants (the
  /// sum, [64, 3, 49, 49] in Swin-T's first stage, is over fold_constants' size limit, and it is
  /// the attention's own mask, not a weight blown up); else as new nodes.
  static Result<Value *> combined_window_mask(Graph &g, const WindowMask &w, Value *bias) {
    std::vector<int64_t> d4(w.mask_dims.begin() + 1, w.mask_dims.end());
    std::optional<Tensor> mc = constant_value(w.mask);
    std::optional<Tensor> bc = bias ? constant_value(bias) : std::nullopt;
    if (mc && (bias == nullptr || bc)) {
      INGOT_ASSIGN_OR_RETURN(Tensor m4, mc->reshaped(Shape64(d4.begin(), d4.end())));
      if (bias == nullptr)
        return make_initializer(g, w.mask->name() + "_4d", std::move(m4));
      INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> sum, eval_op("Add", {*bc, m4}, {}, &g));
      return make_initializer(g, w.mask->name() + "_with_bias", std::move(sum[0]));
    }
    Value *m4 = reshaped(g, w.mask, d4, w.nodes[1]->name() + "/mask_4d", "4d");
    if (bias == nullptr)
      return m4;
    return mask_sum(g, bias, m4, w.mask->name() + ".with_bias", w.nodes[1]->name() + "/mask_with_bias");
  }

  /// a + b by a new Add, typed as their right-aligned broadcast when both are fully known masks
  /// of rank <= 4 (unknown rank otherwise: inference fills it in).
  static Value *mask_sum(Graph &g, Value *a, Value *b, const std::string &value_name,
                         const std::string &node_name) {
    ir::Shape sum_shape = ir::Shape::unknown_rank();
    const ir::Shape &as = a->shape(), &bs = b->shape();
    if (fully_named(as) && fully_named(bs) && as.rank() <= 4 && bs.rank() <= 4) {
      std::vector<int64_t> x(4, 1), y(4, 1);
      for (size_t j = 0; j < as.rank(); ++j)
        x[4 - as.rank() + j] = as[j].value();
      for (size_t j = 0; j < bs.rank(); ++j)
        y[4 - bs.rank() + j] = bs[j].value();
      std::vector<ir::Dim> d;
      for (size_t j = 0; j < 4; ++j)
        d.emplace_back(std::max(x[j], y[j]));
      sum_shape = ir::Shape(d);
    }
    Value *sum = g.add_value(unique_value_name(g, value_name, "."), a->dtype(), sum_shape);
    g.add_node("Add", {a, b}, {sum}, {}, node_name);
    return sum;
  }

  /// One Attention node (ingot domain, named after the Softmax) reading `qkv`
  /// and `mask` (when there is one) in place of the matched `nodes`, whose
  /// result `out` it replaces and whose name it takes over; the nodes go.
  static Status replace_with_attention(Graph &g, const Node *sm,
                                       const std::vector<Node *> &nodes,
                                       Value *out, std::vector<Value *> qkv,
                                       Value *mask, ir::Attributes attrs,
                                       std::set<const Node *> *removed) {
    Value *fused_out =
        g.add_value(unique_value_name(g, out->name() + ".fused", "."),
                    out->dtype(), out->shape());
    if (mask != nullptr)
      qkv.push_back(mask);
    Node *fused =
        g.add_node("Attention", qkv, {fused_out}, std::move(attrs),
                   sm->name().empty() ? "Attention" : sm->name() + "/Attention",
                   kIngotDomain);
    for (Node *d : nodes)
      fused->absorb_origins(*d);
    g.replace_all_uses(out, fused_out);
    for (Node *d : nodes)
      removed->insert(d);
    INGOT_RETURN_IF_ERROR(
        remove_nodes_consumers_first(g, nodes, "recognize_attention"));
    take_over_name(g, out, fused_out);
    return Status::Ok();
  }

  /// `x` reshaped to `dims` by a new Reshape (a view: no copy where x is contiguous).
  /// Reshape(x, dims); `shape` is the result's shape when dims hold a -1 (a dynamic batch).
  static Value *reshaped(Graph &g, Value *x, const std::vector<int64_t> &dims, const std::string &node_name,
                         const std::string &tag = "flat", const ir::Shape *shape_of_y = nullptr) {
    Value *shape = make_initializer(g, x->name() + "_" + tag + "_shape",
                                    Tensor::from_vector<int64_t>(DataType::kInt64,
                                                                 {static_cast<int64_t>(dims.size())}, dims));
    std::vector<ir::Dim> d(dims.begin(), dims.end());
    Value *y = g.add_value(unique_value_name(g, x->name() + "." + tag, "."), x->dtype(),
                           shape_of_y ? *shape_of_y : ir::Shape(d));
    g.add_node("Reshape", {x, shape}, {y}, {}, node_name);
    return y;
  }

  /// 5-D scores [B, G, H, N, M] (MaxViT's window and grid attention): Q [B, G, H, N, D], K^T as
  /// Transpose(K [B, G, H, M, D], last two swapped), V [B, G, H, M, Dv] become 4-D by merging B
  /// and G (Reshapes), one Attention runs on them, and its [B·G, H, N, Dv] output is reshaped
  /// back. The mask must be the same for every B and G (rank <= 3, or a leading 1). B may be
  /// symbolic (a dynamic batch, the same symbol in Q, K, V and the output): the Reshapes then say
  /// -1 for B·G and for B.
  Result<bool> try_5d(Graph &g, PassContext &ctx, Node *sm, Value *q, Value *kt, Value *v, Node *pv,
                      Value *mask, double scale, std::vector<Node *> nodes,
                      std::set<const Node *> *removed) {
    // dims 1..4 known; dim 0 known or a symbol, recorded as -1 (then compared as a Dim below).
    auto dims5 = [](const Value *x, std::vector<int64_t> *d) {
      const ir::Shape &sh = x->shape();
      if (!fully_named(sh) || sh.rank() != 5)
        return false;
      for (size_t i = 0; i < 5; ++i) {
        if (!sh[i].is_known() && i > 0)
          return false;
        d->push_back(sh[i].is_known() ? sh[i].value() : -1);
      }
      return true;
    };
    Node *kt_tr = onnx_producer(kt, "Transpose");
    if (kt_tr == nullptr || kt_tr->attrs().get_ints("perm") != std::vector<int64_t>{0, 1, 2, 4, 3} ||
        !has_single_consumer(g, kt))
      return refuse(ctx, sm, "K^T of 5-D scores is not a Transpose of K's last two axes");
    Value *k = peel_scale(kt_tr->input(0), &scale, &nodes);  // MaxViT scales K before its transpose
    std::vector<int64_t> qd, kd, vd;
    if (!dims5(q, &qd) || !dims5(k, &kd) || !dims5(v, &vd))
      return refuse(ctx, sm, "Q, K or V of 5-D scores is not 5-D with known dims (but the batch)");
    const ir::Dim batch = q->shape()[0];
    if (!(k->shape()[0] == batch) || !(v->shape()[0] == batch))
      return refuse(ctx, sm, "Q, K and V of 5-D scores disagree on the batch");
    if (qd[0] != kd[0] || qd[0] != vd[0] || qd[1] != kd[1] || qd[1] != vd[1] || kd[2] != vd[2] ||
        qd[2] % kd[2] != 0 || kd[3] != vd[3] || qd[4] != kd[4])
      return refuse(ctx, sm, "Q, K and V of 5-D scores disagree on their dims");
    if (mask != nullptr) {
      const ir::Shape &ms = mask->shape();
      if (ms.rank() > 4 || (ms.rank() == 4 && ms[0].value() != 1))
        return refuse(ctx, sm, "the mask of 5-D scores differs per batch or window");
    }
    const ir::Shape &os = pv->output(0)->shape();
    if (!fully_named(os) || os.rank() != 5 || !(os[0] == batch))
      return refuse(ctx, sm, "the output of 5-D attention has unknown dims");
    nodes.push_back(kt_tr);
    if (!self_contained(g, nodes, pv))
      return refuse(ctx, sm, "an intermediate is read outside the pattern");
    if (g.opset(kIngotDomain) == 0)
      g.set_opset_import(kIngotDomain, 1);
    const bool open = !batch.is_known();
    const int64_t bg = open ? -1 : qd[0] * qd[1];
    const ir::Dim bg_dim = open ? ir::Dim() : ir::Dim(bg);
    auto shape4 = [&](const std::vector<int64_t> &d) {
      return ir::Shape({bg_dim, ir::Dim(d[2]), ir::Dim(d[3]), ir::Dim(d[4])});
    };
    const ir::Shape q4s = shape4(qd), k4s = shape4(kd), v4s = shape4(vd);
    const std::string base = sm->name().empty() ? "Attention" : sm->name() + "/Attention";
    Value *q4 = reshaped(g, q, {bg, qd[2], qd[3], qd[4]}, base + "/q_4d", "flat", &q4s);
    Value *k4 = reshaped(g, k, {bg, kd[2], kd[3], kd[4]}, base + "/k_4d", "flat", &k4s);
    Value *v4 = reshaped(g, v, {bg, vd[2], vd[3], vd[4]}, base + "/v_4d", "flat", &v4s);
    Value *out = pv->output(0);
    Value *y4 = g.add_value(unique_value_name(g, out->name() + ".4d", "."), out->dtype(),
                            ir::Shape({bg_dim, ir::Dim(qd[2]), ir::Dim(qd[3]), ir::Dim(vd[4])}));
    std::vector<Value *> ins = {q4, k4, v4};
    if (mask != nullptr)
      ins.push_back(mask);
    Node *att = g.add_node("Attention", ins, {y4}, attention_attrs(scale, 0), base, kIngotDomain);
    for (Node *d : nodes)
      att->absorb_origins(*d);
    std::vector<int64_t> od;
    for (const ir::Dim &dim : out->shape().dims())
      od.push_back(dim.is_known() ? dim.value() : -1);
    const ir::Shape y5s = out->shape();
    Value *y5 = reshaped(g, y4, od, base + "/y_5d", "flat", &y5s);
    g.replace_all_uses(out, y5);
    for (Node *d : nodes)
      removed->insert(d);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, nodes, "recognize_attention"));
    take_over_name(g, out, y5);
    return true;
  }

  Result<bool> refuse(PassContext &ctx, const Node *sm,
                      const std::string &why) {
    ctx.note(name(), refusal_note("attention", "Softmax", sm, why));
    return false;
  }

  Result<bool> try_match(Graph &g, PassContext &ctx, Node *sm,
                         std::set<const Node *> *removed) {
    Value *s_in = sm->input(0);
    // MaxViT: scores [B, G, H, N, M] over windows or grid cells G (its einsums, after
    // lower_einsum): matched as the 4-D form on [B·G, H, ...] (try_5d).
    const bool five = fully_named(s_in->shape()) && s_in->shape().rank() == 5;
    if (!rank4(s_in) && !five)
      return false;
    Value *probs = sm->output(0);
    // PyTorch's exported scaled_dot_product_attention zeroes the NaN rows a fully masked row
    // gives: Where(IsNaN(p), 0, p). Attention gives zeros there itself, so both go too.
    std::vector<Node *> nan_guard;
    if (probs->uses().size() == 2) {
      Node *isnan = nullptr, *where = nullptr;
      for (const auto &[user, idx] : probs->uses()) {
        if (user->domain().empty() && user->op_type() == "IsNaN") isnan = user;
        if (user->domain().empty() && user->op_type() == "Where" && idx == 2) where = user;
      }
      std::optional<double> zero = where ? literal_scalar(where->input(1)) : std::nullopt;
      if (isnan == nullptr || where == nullptr || where->input(0) != isnan->output(0) ||
          isnan->output(0)->uses().size() != 1 || !zero || *zero != 0.0)
        return false;
      nan_guard = {where, isnan};
      probs = where->output(0);
    }
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

    std::vector<Node *> nodes = {pv};
    nodes.insert(nodes.end(), nan_guard.begin(), nan_guard.end());
    nodes.push_back(sm);
    WindowMask window;
    if (Node *back = five ? nullptr : onnx_producer(s_in, "Reshape")) {
      if (!window_mask(g, back, &window))
        return false;
      nodes.insert(nodes.end(), window.nodes.begin(), window.nodes.end());
      s_in = window.scores;
    }
    Value *mask = nullptr, *second_mask = nullptr;
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
      // T5: Add(Add(scores, position_bias), padding_mask): the two biases are summed into one
      // mask by a new Add (shared by the layers once CSE merges their identical sums).
      for (int i = 0; i < 2 && qk == nullptr && window.mask == nullptr; ++i) {
        Node *inner = onnx_producer(add->input(i), "Add");
        if (inner == nullptr || !has_single_consumer(g, add->input(i)))
          continue;
        for (int j = 0; j < 2 && qk == nullptr; ++j) {
          double sc = 1.0;
          std::vector<Node *> ns;
          if (Node *m = find_qk(inner->input(j), &sc, &ns)) {
            qk = m, scale = sc, score_nodes = ns, mask = inner->input(1 - j);
            second_mask = add->input(1 - i);
            scores = inner->input(j);
            nodes.push_back(inner);
          }
        }
      }
      if (qk == nullptr)
        return false;
      nodes.push_back(add);
    } else if (Node *wh = onnx_producer(s_in, "Where")) {
      if (window.mask != nullptr)
        return refuse(ctx, sm, "a Where mask beside the window mask");
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
    if (window.mask != nullptr && mask != nullptr) {
      // The scores' own mask (Swin's relative-position bias) joins the window mask: it must be
      // the same for every batch entry.
      const ir::Shape &bs = mask->shape();
      if (!fully_named(bs) || bs.rank() > 4 || (bs.rank() == 4 && bs[0].value() != 1))
        return refuse(ctx, sm, "a per-batch mask beside the window mask");
    }
    for (Value *m : {mask, second_mask}) {
      if (m == nullptr)
        continue;
      if (!(s_in->shape() == qk->output(0)->shape()) ||
          !fully_named(s_in->shape()) || !m->shape().rank_known() ||
          m->shape().rank() > 4 || m->shape().rank() < 1 || m->dtype() != mask->dtype())
        return refuse(ctx, sm,
                      "the mask broadcasts the scores to another shape, is a "
                      "scalar, or has unknown shape");
    }
    Value *q = peel_scale(qk->input(0), &scale, &nodes);
    Value *kt = peel_scale(qk->input(1), &scale, &nodes);
    Value *v = pv->input(1);
    if (five) {
      if (second_mask != nullptr)
        return refuse(ctx, sm, "two masks on 5-D scores");
      return try_5d(g, ctx, sm, q, kt, v, pv, mask, scale, nodes, removed);
    }
    if (!rank4(q) || !rank4(kt) || !rank4(v))
      return refuse(ctx, sm, "Q, K or V is not 4-D");
    if (!self_contained(g, nodes, pv))
      return refuse(ctx, sm, "an intermediate is read outside the pattern");

    if (second_mask != nullptr)
      mask = mask_sum(g, mask, second_mask, mask->name() + ".plus_mask", sm->name() + "/mask_sum");
    int64_t period = 0;
    if (window.mask != nullptr) {
      INGOT_ASSIGN_OR_RETURN(mask, combined_window_mask(g, window, mask));
      // Batch entry b·P + w reads window w's mask; with one image the batch is the windows.
      const int64_t batch = s_in->shape()[0].value();
      if (window.mask_dims[1] > 1 && window.period < batch)
        period = window.period;
    }
    if (g.opset(kIngotDomain) == 0)
      g.set_opset_import(kIngotDomain, 1);
    INGOT_ASSIGN_OR_RETURN(bool merged,
                           try_3d(g, sm, q, kt, v, pv, mask, scale, period, nodes, removed));
    if (merged)
      return true;

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

    INGOT_RETURN_IF_ERROR(replace_with_attention(g, sm, nodes, pv->output(0),
                                                 {q, k, v}, mask,
                                                 attention_attrs(scale, period), removed));
    // The old K^T Transpose goes when nothing else reads it.
    if (kt_tr != nullptr && kt->uses().empty() && !is_graph_output(g, kt)) {
      removed->insert(kt_tr);
      INGOT_RETURN_IF_ERROR(g.remove_node(kt_tr));
    }
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> make_recognize_attention() {
  return std::make_unique<RecognizeAttention>();
}

} // namespace ingot::passes
