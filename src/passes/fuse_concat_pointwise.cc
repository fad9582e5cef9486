// Copyright ingot authors. Apache-2.0.
//
// fuse_concat_pointwise: a Concat whose only reader is an ingot::Pointwise computing over the whole
// concatenated tensor becomes part of that Pointwise: the fused node reads the Concat's pieces
// where they lie, its body starts with the Concat, and the concatenated tensor is never written.
//
//   c = Concat(x1, ..., xk; axis)               y = Pointwise(x1, ..., xk, others...) {
//   y = Pointwise(c, others...) { body(c, ...) }   c = Concat(x1, ..., xk; axis); body(c, ...) }
//
// DenseNet is the model that needs it: each of its layers concatenates every earlier feature map
// of its block and normalizes the result (BatchNorm + Relu, one Pointwise after fold_batchnorm and
// the precision pass); the Concat copies the whole block's features once per layer, and the
// Pointwise reads them all again (58 Concats and as many Pointwise steps in DenseNet-121).
//
// Runs in the builder after its last fuse_pointwise (not in the pipeline), where Pointwise nodes
// and layouts are final. Requires: the Concat's output read by exactly one node, that Pointwise,
// once, not a graph output; every piece of the Concat's type, which the body reads unconverted; and
// the Pointwise's output of the Concat's shape (the concatenated value is not broadcast), so the
// fused kernel walks the Concat's elements one to one. `runs` (the builder's: a device tactic for
// the fused node, and measured no slower than the two steps) decides each fusion.
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_concat_pointwise";

bool is_pointwise(const Node& n) { return n.domain() == kIngotDomain && n.op_type() == "Pointwise"; }

class FuseConcatPointwise final : public Pass {
 public:
  explicit FuseConcatPointwise(FusionCheck runs) : runs_(std::move(runs)) {}
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> concats;
    for (const auto& n : g.nodes())
      if (fusion::is_onnx_op(*n, "Concat")) concats.push_back(n.get());
    int fused = 0;
    for (Node* c : concats) {
      INGOT_ASSIGN_OR_RETURN(bool f, fuse(g, ctx, c));
      fused += f;
    }
    if (fused == 0) return false;
    INGOT_RETURN_IF_ERROR(g.topological_sort());  // the fused nodes were appended
    ctx.note(kName, "fused " + std::to_string(fused) + " Concat(s) into the Pointwise reading them");
    return true;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* c) {
    if (c->outputs().size() != 1 || !c->output(0) || c->inputs().size() < 2) return false;
    Value* cat = c->output(0);
    Node* p = fusion::single_consumer(g, cat);
    if (!p || !is_pointwise(*p) || is_graph_output(g, cat)) return false;
    const Graph* body = p->attrs().get_graph("body");
    if (!body || body->inputs().size() != p->inputs().size() || body->outputs().size() != 1 || p->outputs().size() != 1)
      return refuse(ctx, c, "the Pointwise has no body of one output matching its inputs");
    if (!body->nodes().empty() && fusion::is_onnx_op(*body->nodes()[0], "Concat"))
      return refuse(ctx, c, "the Pointwise already starts with a Concat (one per kernel)");
    size_t at = p->inputs().size();
    for (size_t i = 0; i < p->inputs().size(); ++i) {
      if (p->input(i) != cat) continue;
      if (at != p->inputs().size()) return refuse(ctx, c, "the Pointwise reads the Concat twice");
      at = i;
    }
    if (at == p->inputs().size()) return false;
    for (Value* x : c->inputs())
      if (!x || x->dtype() != cat->dtype()) return refuse(ctx, c, "a piece is absent or of another type");
    const Value* bcat = body->inputs()[at];
    if (bcat->dtype() != cat->dtype()) return refuse(ctx, c, "the body reads the Concat in another type");
    if (!cat->shape().rank_known() || p->output(0)->shape() != cat->shape())
      return refuse(ctx, c, "the Pointwise's output is not of the Concat's shape");

    // The new body: the pieces, then the Pointwise's other inputs; the Concat; the old body's nodes.
    auto nb = std::make_shared<Graph>("pointwise", &g);
    std::map<const Value*, Value*> inner;
    std::vector<Value*> outer, pieces;
    for (Value* x : c->inputs()) {
      pieces.push_back(nb->add_input(unique_value_name(*nb, x->name(), "."), x->dtype(), x->shape()));
      outer.push_back(x);
    }
    for (size_t i = 0; i < p->inputs().size(); ++i) {
      if (i == at) continue;
      const Value* b = body->inputs()[i];
      inner[b] = nb->add_input(unique_value_name(*nb, b->name(), "."), b->dtype(), b->shape());
      outer.push_back(p->input(i));
    }
    inner[bcat] = nb->add_value(unique_value_name(*nb, bcat->name(), "."), bcat->dtype(), bcat->shape());
    nb->add_node("Concat", pieces, {inner[bcat]}, c->attrs(), c->name());
    for (const auto& n : body->nodes()) {
      std::vector<Value*> ins, outs;
      for (const Value* v : n->inputs()) ins.push_back(v ? inner.at(v) : nullptr);
      for (const Value* v : n->outputs()) {
        if (!v) {
          outs.push_back(nullptr);
          continue;
        }
        inner[v] = nb->add_value(unique_value_name(*nb, v->name(), "."), v->dtype(), v->shape());
        outs.push_back(inner[v]);
      }
      nb->add_node(n->op_type(), ins, outs, n->attrs(), n->name(), n->domain());
    }
    nb->add_output(inner.at(body->outputs()[0]));

    ir::Attributes attrs = p->attrs();
    ir::Attribute a;
    a.type = ir::AttrType::kGraph;
    a.g = nb;
    attrs.set("body", std::move(a));
    Value* out = p->output(0);
    Value* y = g.add_value(unique_value_name(g, out->name() + ".cat", "."), out->dtype(), out->shape());
    Node* f = g.add_node("Pointwise", outer, {y}, std::move(attrs), p->name(), kIngotDomain);
    std::string why;
    INGOT_ASSIGN_OR_RETURN(bool keep, fusion::keep_fused_node(g, f, {c, p}, runs_, &why));
    if (!keep) return refuse(ctx, c, why.empty() ? "the backend has no tactic for the fused node" : why);
    f->absorb_origins(*c);
    f->absorb_origins(*p);
    g.replace_all_uses(out, y);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, {p, c}, kName));
    take_over_name(g, out, y);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* c, const std::string& why) {
    ctx.note(name(), refusal_note("Concat + Pointwise", "Concat", c, why));
    return false;
  }

  FusionCheck runs_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_concat_pointwise(FusionCheck runs) {
  return std::make_unique<FuseConcatPointwise>(std::move(runs));
}

}  // namespace ingot::passes
