// Copyright ingot authors. Apache-2.0.
//
// lift_conv1d: a 1-D convolution is a 2-D one over an image of height 1.
//
//   Conv(x [N,C,W], w [K,C/g,k])  ->  Reshape(Conv(Reshape(x, [N,C,1,W]), w [K,C/g,1,k]), [N,K,W'])
//
// with kernel_shape [1,k], pads [0,p0,0,p1], strides [1,s], dilations [1,d]. The Reshapes move no
// data (the builder runs them in place). What it buys: every 2-D machinery applies to audio and
// sequence models' convolutions -- the channels-last layout and its tensor-core kernels, the
// depthwise and grouped kernels, epilogue fusion. Whisper's front end (two Conv1d + Gelu on
// [32,80,3000] mel frames) ran channels-first at 32 TFLOP/s, 1.9 ms of the encoder's 5 ms at batch 32.
//
// So that consecutive 1-D convolutions meet as 2-D ones, the Reshape back to rank 3 sinks below
// the elementwise ops that follow a lifted conv (Gelu, Relu, a Mul by a constant, ...: one
// non-constant input, the others constants, broadcast the same way after a unit axis is inserted
// before the last), and a lifted conv that reads such a Reshape reads its rank-4 input directly.
//
// Left alone: a Conv whose input rank is not known to be 3, a weight that is not a constant,
// an auto_pad other than NOTSET/VALID (SAME_* pads a height-1 kernel by nothing too, but is left
// to the backends as it is), and ConvTranspose.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_lift_conv1d();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "lift_conv1d";

/// [a, b, c] -> [a, b, 1, c] (the unit axis a lifted tensor gains).
ir::Shape lifted_shape(const ir::Shape& s) {
  std::vector<ir::Dim> d = s.dims();
  d.insert(d.begin() + 2, ir::Dim(1));
  return ir::Shape(d);
}

class LiftConv1d final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    lifted_of_.clear();  // one pass object may run on many graphs
    std::vector<Node*> convs;
    for (const auto& n : g.nodes())
      if (n->domain().empty() && n->op_type() == "Conv") convs.push_back(n.get());
    int lifted = 0;
    for (Node* n : convs) {  // graph order: a conv's producer chain is lifted before it
      INGOT_ASSIGN_OR_RETURN(bool done, lift(g, n));
      lifted += done;
    }
    if (lifted) {
      // The rank-3 views a later lifted conv no longer reads.
      for (const auto& [v3, v4] : lifted_of_) {
        (void)v4;
        Node* p = v3->producer();
        if (p && v3->uses().empty() && !is_graph_output(g, v3)) INGOT_RETURN_IF_ERROR(g.remove_node(p));
      }
      lifted_of_.clear();
      INGOT_RETURN_IF_ERROR(g.topological_sort());
      ctx.note(kName, std::to_string(lifted) + " 1-D convolution(s) run as 2-D ones of height 1");
    }
    return lifted > 0;
  }

 private:
  // rank-3 value -> its rank-4 source, for the Reshapes this pass made (they only drop the unit axis).
  std::map<const Value*, Value*> lifted_of_;

  /// `v` [N,C,W] as [N,C,1,W]: the rank-4 source when a lifted conv made `v`, else a Reshape.
  Value* to_rank4(Graph& g, Value* v, const Node* for_node) {
    auto it = lifted_of_.find(v);
    if (it != lifted_of_.end()) return it->second;
    Value* out = g.add_value(unique_value_name(g, v->name() + ".h1", "."), v->dtype(), lifted_shape(v->shape()));
    Node* r = g.add_node("Reshape", {v, make_int64s(g, v->name() + ".h1_shape", {0, 0, 1, -1})}, {out}, {},
                         for_node->name() + "/lift_in");
    r->absorb_origins(*for_node);
    lifted_of_[v] = out;  // a second reader (another conv) reuses it
    return out;
  }

  /// `y3` [N,K,W'] (still made by `origin`, about to go) as a Reshape of `y4` [N,K,1,W'], with the
  /// elementwise ops that read it alone moved above that Reshape onto the lifted tensor.
  Status reshape_back(Graph& g, Value* y4, Value* y3, Node* origin) {
    std::vector<Node*> gone = {origin};
    for (;;) {
      Node* u = single_consumer(g, y3);
      if (!u || !fusion::is_elementwise(*u) || !sinkable(*u, y3)) break;
      std::vector<Value*> ins;
      for (Value* in : u->inputs()) ins.push_back(in == y3 ? y4 : lifted_constant(g, in));
      Value* out3 = u->output(0);
      Value* out4 = g.add_value(unique_value_name(g, out3->name() + ".h1", "."), out3->dtype(),
                                lifted_shape(out3->shape()));
      Node* u4 = g.add_node(u->op_type(), ins, {out4}, u->attrs(), u->name(), u->domain());
      u4->absorb_origins(*u);
      gone.push_back(u);
      y4 = out4;
      y3 = out3;
    }
    Value* back = g.add_value(unique_value_name(g, y3->name() + ".w", "."), y3->dtype(), y3->shape());
    Node* r = g.add_node("Reshape", {y4, make_int64s(g, y3->name() + ".w_shape", {0, 0, -1})}, {back}, {},
                         origin->name() + "/lift_out");
    r->absorb_origins(*origin);
    INGOT_RETURN_IF_ERROR(replace_value(g, y3, back));
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, gone, kName));
    lifted_of_[back] = y4;
    return Status::Ok();
  }

  /// Whether `u` reads `y3` once and every other input is a constant that broadcasts against a
  /// rank-3 tensor (rank <= 3): lifting inserts its unit axis the same way.
  bool sinkable(const Node& u, const Value* y3) const {
    int reads = 0;
    for (const Value* in : u.inputs()) {
      if (in == y3) {
        ++reads;
        continue;
      }
      if (!in) continue;  // an optional input left out (Clip's min, say)
      auto c = constant_value(in);
      if (!c || c->rank() > 3) return false;
    }
    const Value* out = u.output(0);
    return reads == 1 && out->shape().rank_known() && out->shape().rank() == 3;
  }

  /// A constant input of an elementwise op on [N,C,W], for the op on [N,C,1,W]: scalars and
  /// rank <= 1 constants broadcast as they are; [C,W]/[N,C,W]-shaped ones gain the unit axis.
  Value* lifted_constant(Graph& g, Value* c) {
    if (!c) return c;
    auto t = constant_value(c);
    if (!t || t->rank() <= 1) return c;
    Shape64 s = t->shape();
    while (s.size() < 3) s.insert(s.begin(), 1);
    s.insert(s.begin() + 2, 1);
    auto r = t->reshaped(s);
    if (!r.ok()) return c;  // cannot happen: same element count
    return make_initializer(g, c->name() + ".h1", std::move(*r));
  }

  Result<bool> lift(Graph& g, Node* n) {
    Value* x = n->input(0);
    Value* w = n->input(1);
    Value* y = n->output(0);
    if (!x || !w || !y || n->outputs().size() != 1 || !x->shape().rank_known() || x->shape().rank() != 3 ||
        !y->shape().rank_known() || y->shape().rank() != 3)
      return false;
    auto wt = constant_value(w);
    if (!wt || wt->rank() != 3) return false;
    const std::string pad = n->attrs().get_string("auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return false;
    const ir::Attributes& a = n->attrs();
    auto one = [](const std::vector<int64_t>& v, int64_t fallback) { return v.size() == 1 ? v[0] : fallback; };
    const std::vector<int64_t> pads = a.get_ints("pads", {0, 0});
    if (pads.size() != 2 || a.get_ints("strides", {1}).size() != 1 || a.get_ints("dilations", {1}).size() != 1)
      return false;
    ir::Attributes attrs;
    for (const auto& [k, v] : a.all()) attrs.set(k, v);
    attrs.set_ints("kernel_shape", {1, wt->shape()[2]});
    attrs.set_ints("strides", {1, one(a.get_ints("strides", {1}), 1)});
    attrs.set_ints("dilations", {1, one(a.get_ints("dilations", {1}), 1)});
    attrs.set_ints("pads", {0, pads[0], 0, pads[1]});
    auto w4 = wt->reshaped({wt->shape()[0], wt->shape()[1], 1, wt->shape()[2]});
    if (!w4.ok()) return w4.status();
    Value* wv = make_initializer(g, w->name() + ".h1", std::move(*w4));
    std::vector<Value*> ins = {to_rank4(g, x, n), wv};
    if (n->inputs().size() > 2 && n->input(2)) ins.push_back(n->input(2));
    Value* y4 = g.add_value(unique_value_name(g, y->name() + ".h1", "."), y->dtype(), lifted_shape(y->shape()));
    Node* c = g.add_node("Conv", ins, {y4}, std::move(attrs), n->name());
    c->absorb_origins(*n);
    INGOT_RETURN_IF_ERROR(reshape_back(g, y4, y, n));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_lift_conv1d() { return std::make_unique<LiftConv1d>(); }

}  // namespace ingot::passes
