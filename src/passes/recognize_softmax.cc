// Copyright ingot authors. Apache-2.0.
//
// recognize_softmax: finds Softmax / LogSoftmax written out of reductions.
//
//   Softmax     e = Exp(t), Div(e, ReduceSum(e, a, keepdims=1))
//   LogSoftmax  Sub(t, Log(ReduceSum(Exp(t), a, keepdims=1)))
// where t is either Sub(x, ReduceMax(x, a, keepdims=1)) (the stabilized form: the result is
// the op on x and the max/Sub go too) or any other value (the op runs on t itself; Softmax
// and LogSoftmax are shift-invariant, so both forms are exact).
//
// Result: Softmax / LogSoftmax {axis=a}. Opset >= 13 gives the per-axis semantics the
// decomposition has; below 13 the op coerces its input to 2-D at `axis`, which equals the
// per-axis form only for the last axis, so older graphs are rewritten only then (rank known).
// It runs before recognize_attention, so a decomposed attention softmax becomes Softmax first.
//
// Refused (noted): more than one reduce axis or none (whole-tensor reduction), keepdims=0,
// axes given by a non-constant input, ReduceMax over another axis than ReduceSum, an
// intermediate (exp, sum, log) read elsewhere or exposed as a graph output, a non-last axis
// in an opset < 13 graph. Only the top-level graph is rewritten.
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_recognize_softmax();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "recognize_softmax";

/// Why a reduction does not fit, or its single axis (as written).
struct ReduceAxis {
  std::optional<int64_t> axis;
  std::string why;
};

/// The one reduce axis of a ReduceSum / ReduceMax with keepdims=1. Axes are an attribute
/// before opset 13 (ReduceSum) / 18 (ReduceMax) and the second input from then on.
ReduceAxis reduce_axis(const Graph& g, const Node* r) {
  const int64_t since = r->op_type() == "ReduceSum" ? 13 : 18;
  if (r->attrs().get_int("keepdims", 1) != 1) return {std::nullopt, "keepdims=0"};
  std::vector<int64_t> axes;
  if (g.opset("") < since) {
    axes = r->attrs().get_ints("axes");
  } else if (r->inputs().size() > 1 && r->input(1) != nullptr) {
    std::optional<std::vector<int64_t>> c = constant_ints(r->input(1));
    if (!c) return {std::nullopt, "the axes are not constant"};
    axes = *c;
  }
  if (axes.size() != 1) return {std::nullopt, "the reduction is not over exactly one axis"};
  return {axes[0], ""};
}

/// `a` normalized against `rank` when it is known and a is negative.
int64_t normalized(int64_t a, const Value* v) {
  if (a < 0 && v->shape().rank_known()) return a + static_cast<int64_t>(v->shape().rank());
  return a;
}

bool uses_only(const Graph& g, const Value* v, const std::set<const Node*>& readers) {
  if (is_graph_output(g, v)) return false;
  for (const auto& u : v->uses())
    if (readers.count(u.first) == 0) return false;
  return v->uses().size() == readers.size();
}

class RecognizeSoftmax : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    return match_at_anchors(
        g, [](const Node& n) { return n.domain().empty() && n.op_type() == "Exp"; },
        [&](Node* a, std::set<const Node*>* removed) { return try_match(g, ctx, a, removed); });
  }

 private:
  Result<bool> refuse(PassContext& ctx, const Node* anchor, const char* what, const std::string& why) {
    ctx.note(kName, refusal_note(what, "Exp", anchor, why));
    return false;
  }

  Result<bool> try_match(Graph& g, PassContext& ctx, Node* exp, std::set<const Node*>* removed) {
    Value* t = exp->input(0);
    Value* e = exp->output(0);
    if (!is_float(e->dtype())) return false;
    // Find the ReduceSum over e and decide which form this is.
    Node* sum = nullptr;
    for (const auto& u : e->uses())
      if (u.first->domain().empty() && u.first->op_type() == "ReduceSum" && u.first->input(0) == e) sum = u.first;
    if (sum == nullptr || sum->owner() != &g) return false;
    Value* s = sum->output(0);
    Node* div = nullptr;
    Node* log = nullptr;
    Node* sub = nullptr;
    for (const auto& u : s->uses()) {
      Node* n = u.first;
      if (!n->domain().empty()) continue;
      if (n->op_type() == "Div" && n->input(0) == e && n->input(1) == s) div = n;
      if (n->op_type() == "Log") log = n;
    }
    if (log != nullptr)
      for (const auto& u : log->output(0)->uses())
        if (u.first->domain().empty() && u.first->op_type() == "Sub" && u.first->input(0) == t &&
            u.first->input(1) == log->output(0))
          sub = u.first;
    const bool soft = div != nullptr;
    if (!soft && sub == nullptr) return false;
    const char* what = soft ? "softmax" : "log-softmax";

    ReduceAxis ra = reduce_axis(g, sum);
    if (!ra.axis) return refuse(ctx, exp, what, "ReduceSum: " + ra.why);
    const int64_t axis = normalized(*ra.axis, e);

    // Intermediates must be read only inside the pattern.
    std::vector<Node*> nodes;
    if (soft) {
      if (!uses_only(g, e, {sum, div}) || !uses_only(g, s, {div}))
        return refuse(ctx, exp, what, "an intermediate is read outside the pattern");
      nodes = {exp, sum, div};
    } else {
      if (!uses_only(g, e, {sum}) || !uses_only(g, s, {log}) || !uses_only(g, log->output(0), {sub}))
        return refuse(ctx, exp, what, "an intermediate is read outside the pattern");
      nodes = {exp, sum, log, sub};
    }
    Node* last = nodes.back();

    // Stabilized form: t = Sub(x, ReduceMax(x, same axis)); absorb it when read only here.
    Value* in = t;
    if (Node* shift = onnx_producer(t, "Sub")) {
      Node* mx = onnx_producer(shift->input(1), "ReduceMax");
      std::set<const Node*> t_readers = soft ? std::set<const Node*>{exp} : std::set<const Node*>{exp, sub};
      if (mx != nullptr && mx->input(0) == shift->input(0) && shift->owner() == &g && mx->owner() == &g &&
          uses_only(g, t, t_readers) && uses_only(g, mx->output(0), {shift})) {
        ReduceAxis rm = reduce_axis(g, mx);
        if (rm.axis && normalized(*rm.axis, shift->input(0)) == axis) {
          in = shift->input(0);
          nodes.insert(nodes.begin(), {mx, shift});
        }
      }
    }

    int64_t out_axis = axis;
    if (g.opset("") < 13) {
      // Old Softmax flattens to 2-D at `axis`: only the last axis matches the per-axis form.
      if (!in->shape().rank_known() || axis != static_cast<int64_t>(in->shape().rank()) - 1)
        return refuse(ctx, exp, what,
                      "opset < 13 Softmax coerces to 2-D; the axis is not the last one of a known rank");
    }
    ir::Attributes attrs;
    attrs.set_int("axis", out_axis);
    const std::string node_name = last->name();
    INGOT_ASSIGN_OR_RETURN(Node * fused, fusion::replace_with_fused(g, soft ? "Softmax" : "LogSoftmax", "", {in},
                                                                   std::move(attrs), node_name, last->output(0),
                                                                   nodes));
    (void)fused;
    for (Node* n : nodes) removed->insert(n);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_recognize_softmax() { return std::make_unique<RecognizeSoftmax>(); }

}  // namespace ingot::passes
