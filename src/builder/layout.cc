// Copyright ingot authors. Apache-2.0.
#include "builder/layout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "backend/device.h"
#include "builder/precision.h"
#include "ir/op_registry.h"
#include "ir/verify.h"
#include "passes/passes.h"

namespace ingot::builder {

namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

bool is_quant_conv(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "QuantConv"; }

bool is_conv(const ir::Node& n) {
  if (n.domain().empty()) return n.op_type() == "Conv";
  return n.domain() == "ingot" && (n.op_type() == "FusedConv" || n.op_type() == "QuantConv") &&
         n.attrs().get_int("transposed", 0) == 0 && n.attrs().get_int("channels_last", 0) == 0;
}

// The residual's input index: FusedConv's (X, W, B, R) or QuantConv's (X, W, x_scale, w_scale, B,
// R, y_scale). A plain Conv has none there.
size_t residual_input(const ir::Node& n) { return is_quant_conv(n) ? 5 : 3; }

// The channels-last form of conv `n`: a QuantConv stays one, a Conv or FusedConv becomes a
// FusedConv.
const char* channels_last_op(const ir::Node& n) { return is_quant_conv(n) ? "QuantConv" : "FusedConv"; }

// n's inputs with X, W and the residual replaced by their channels-last stand-ins `x`, `w`, `r`
// (the bias and a QuantConv's scales keep theirs), trailing absent inputs dropped.
std::vector<ir::Value*> channels_last_inputs(const ir::Node& n, ir::Value* x, ir::Value* w, ir::Value* r) {
  std::vector<ir::Value*> ins(n.inputs().begin(), n.inputs().end());
  const size_t ri = residual_input(n);
  if (ins.size() <= ri) ins.resize(ri + 1, nullptr);
  ins[0] = x;
  ins[1] = w;
  ins[ri] = r;
  while (!ins.empty() && !ins.back()) ins.pop_back();
  return ins;
}

class Layout {
 public:
  Layout(ir::Graph& g, const backend::Backend& be, const std::string& mode, LayoutReport& r, const LayoutTiming* t)
      : g_(g), be_(be), mode_(mode), r_(r), timing_(t) {}

  Status run() {
    std::vector<ir::Node*> convs;
    for (const auto& n : g_.nodes())
      if (is_conv(*n) && eligible(*n)) convs.push_back(n.get());
    if (convs.empty()) return Status::Ok();
    if (g_.opset("ingot") == 0) g_.set_opset_import("ingot", 1);  // FusedConv is an ingot op
    if (mode_ == "auto" && timing_ && timing_->cache && timing_->options && !be_.device().is_host()) {
      INGOT_ASSIGN_OR_RETURN(int pays, channels_last_pays(convs));
      if (pays == 0) return Status::Ok();  // measured: channels-first is faster here
    }
    for (ir::Node* n : convs) INGOT_RETURN_IF_ERROR(convert(*n));
    if (r_.channels_last_convs == 0) return Status::Ok();
    INGOT_RETURN_IF_ERROR(inline_pointwise());
    INGOT_RETURN_IF_ERROR(cancel_transpose_pairs());
    // Move the remaining channels-first islands (pooling, elementwise ops between convs) into the
    // region, so more pairs meet and cancel.
    for (int moves = 0; moves < 100000; ++moves) {
      INGOT_ASSIGN_OR_RETURN(bool moved, sink_transposes());
      if (!moved) break;
      INGOT_RETURN_IF_ERROR(g_.topological_sort());
      INGOT_RETURN_IF_ERROR(cancel_transpose_pairs());
    }
    for (const auto& [w, wk] : krsc_) {
      (void)wk;
      if (w->uses().empty()) g_.remove_initializer(w);  // only the KRSC copy is read now
    }
    for (ir::Value* c : replaced_constants_)
      if (c->uses().empty()) g_.remove_initializer(c);  // an NHWC copy replaced it
    INGOT_RETURN_IF_ERROR(g_.topological_sort());
    INGOT_RETURN_IF_ERROR(ir::infer_graph(g_));
    for (const auto& n : g_.nodes()) {
      if (n->op_type() != "Transpose" || !created_.count(n.get())) continue;
      ++r_.reformats;
      r_.reformat_values.push_back(n->output(0)->name());
    }
    return ir::verify_graph(g_);
  }

 private:
  // ingot::Pointwise nodes are opaque to the sinking below (their bodies carry channels-first
  // shapes): their ops go back into the graph, and the builder runs fuse_pointwise again after
  // this pass. A body that reads anything but its inputs and its own values stays fused.
  Status inline_pointwise() {
    std::vector<ir::Node*> fused;
    for (const auto& n : g_.nodes())
      if (n->domain() == "ingot" && n->op_type() == "Pointwise" && n->outputs().size() == 1) fused.push_back(n.get());
    bool changed = false;
    for (ir::Node* n : fused) {
      const ir::Graph* body = n->attrs().get_graph("body");
      if (!body || body->inputs().size() != n->inputs().size() || body->outputs().size() != 1) continue;
      std::set<const ir::Value*> known(body->inputs().begin(), body->inputs().end());
      bool closed = true;
      for (const auto& bn : body->nodes()) {
        for (const ir::Value* v : bn->inputs()) closed &= !v || known.count(v) > 0;
        for (const ir::Value* o : bn->outputs()) known.insert(o);
      }
      if (!closed || !known.count(body->outputs()[0])) continue;
      std::map<const ir::Value*, ir::Value*> outer;
      for (size_t i = 0; i < body->inputs().size(); ++i) outer[body->inputs()[i]] = n->input(i);
      for (const auto& bn : body->nodes()) {
        std::vector<ir::Value*> ins, outs;
        for (const ir::Value* v : bn->inputs()) ins.push_back(v ? outer.at(v) : nullptr);
        // A Cast of a constant (precision lowering's widening of a reduced scale or shift) becomes
        // the converted constant: the sinking below moves transposes only past constant operands
        // (DenseNet's pre-activation BatchNorm + Relu between Concat and conv left two Transposes
        // and a Cast per dense layer, 124 Transposes in all).
        if (ir::Value* c = folded_cast(*bn, ins)) {
          outer[bn->output(0)] = c;
          continue;
        }
        for (const ir::Value* o : bn->outputs()) {
          ir::Value* nv = o ? g_.add_value(unique(o->name()), o->dtype(), o->shape()) : nullptr;
          if (o) outer[o] = nv;
          outs.push_back(nv);
        }
        g_.add_node(bn->op_type(), ins, outs, bn->attrs(), bn->name(), bn->domain());
      }
      ir::Value* old_out = n->output(0);
      ir::Value* out = outer.at(body->outputs()[0]);
      g_.replace_all_uses(old_out, out);
      INGOT_RETURN_IF_ERROR(g_.remove_node(n));
      adopt_name(old_out, out);
      changed = true;
    }
    if (changed) INGOT_RETURN_IF_ERROR(g_.topological_sort());
    return Status::Ok();
  }

  // The constant a float-to-float Cast of an initializer computes, as a new initializer; nullptr
  // for any other node.
  ir::Value* folded_cast(const ir::Node& n, const std::vector<ir::Value*>& ins) {
    if (!n.domain().empty() || n.op_type() != "Cast" || ins.size() != 1 || !ins[0] || !ins[0]->initializer() ||
        n.outputs().size() != 1 || !n.output(0))
      return nullptr;
    const Tensor& c = *ins[0]->initializer();
    const DataType to = n.output(0)->dtype();
    if (!is_float(c.dtype()) || !is_float(to)) return nullptr;
    auto t = convert_tensor(c, to);
    if (!t.ok()) return nullptr;
    return g_.add_initializer(unique(n.output(0)->name()), std::move(t).value());
  }

  std::string unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; g_.find_value(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  ir::Value* transposed(ir::Value* v, const std::vector<int64_t>& perm, const std::string& suffix) {
    auto key = std::make_pair(v, perm);
    auto it = transposes_.find(key);
    if (it != transposes_.end()) return it->second;
    const ir::Shape& in = v->shape();
    ir::Shape out = ir::Shape::unknown_rank();
    if (in.rank_known() && in.rank() == perm.size()) {
      std::vector<ir::Dim> d;
      for (int64_t p : perm) d.push_back(in.dims()[static_cast<size_t>(p)]);
      out = ir::Shape(d);
    }
    ir::Value* t = g_.add_value(unique(v->name() + suffix), v->dtype(), out);
    ir::Attributes a;
    a.set_ints("perm", perm);
    created_.insert(g_.add_node("Transpose", {v}, {t}, std::move(a), t->name()));
    transposes_[key] = t;
    return t;
  }

  static bool concrete(const ir::Value* v) { return !v || v->shape().is_concrete(); }

  Result<double> best_ms(const ir::Node& n) { return measured_best_ms(be_, n, *timing_); }

  Shape64 permuted(const Shape64& s, const std::vector<int64_t>& perm) {
    Shape64 out;
    for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
    return out;
  }

  // Times both layouts: 1 when the channels-last region (convs + edge transposes) is faster, 0
  // when not, -1 when it cannot be measured (shapes not fixed, nothing runs).
  Result<int> channels_last_pays(const std::vector<ir::Node*>& convs) {
    for (const ir::Node* n : convs)
      for (const ir::Value* v : n->inputs())
        if (!concrete(v) || !concrete(n->output(0))) return -1;
    std::set<const ir::Node*> in_region(convs.begin(), convs.end());
    double nchw = 0, nhwc = 0;
    std::vector<ir::Node*> temp_nodes;
    std::vector<ir::Value*> temp_inits;
    auto cleanup = [&]() -> Status {
      for (auto it = temp_nodes.rbegin(); it != temp_nodes.rend(); ++it) INGOT_RETURN_IF_ERROR(g_.remove_node(*it));
      return Status::Ok();
    };
    std::set<const ir::Value*> entries, exits;
    // The model's own permutes next to a convolution (ConvNeXt's around its channels-last
    // LayerNorm): channels-last makes them cancel, channels-first runs them. They cost the
    // channels-first side, not the region.
    std::set<const ir::Node*> model_permutes;
    auto model_permute = [](const ir::Node* p, const std::vector<int64_t>& perm) {
      return p && p->domain().empty() && p->op_type() == "Transpose" && p->attrs().get_ints("perm") == perm &&
             p->input(0) && p->input(0)->shape().is_concrete();
    };
    std::map<const ir::Value*, bool> from_memo, to_memo;
    for (ir::Node* n : convs) {
      INGOT_ASSIGN_OR_RETURN(double a, best_ms(*n));
      nchw += a;
      // The same convolution channels-last, on stand-in values with the permuted shapes.
      ir::Value* x = n->input(0);
      ir::Value* w = n->input(1);
      ir::Value* xt = g_.add_value(unique(x->name() + "/nhwc_probe"), x->dtype(),
                                   ir::Shape::from_concrete(permuted(x->shape().concrete(), kToNhwc)));
      ir::Value* wk = nullptr;
      auto wi = krsc_.find(w);
      if (wi != krsc_.end()) {
        wk = wi->second;
      } else {
        INGOT_ASSIGN_OR_RETURN(Tensor data, permute_dims(*w->initializer(), {0, 2, 3, 1}));
        wk = g_.add_initializer(unique(w->name() + "/krsc"), std::move(data));
        krsc_[w] = wk;
      }
      const ir::Value* r = n->input(residual_input(*n));
      ir::Value* rt = r ? g_.add_value(unique(r->name() + "/nhwc_probe"), r->dtype(),
                                       ir::Shape::from_concrete(permuted(r->shape().concrete(), kToNhwc)))
                        : nullptr;
      std::vector<ir::Value*> ins = channels_last_inputs(*n, xt, wk, rt);
      ir::Value* yt = g_.add_value(unique(n->output(0)->name() + "/nhwc_probe"), n->output(0)->dtype(),
                                   ir::Shape::from_concrete(permuted(n->output(0)->shape().concrete(), kToNhwc)));
      ir::Attributes attrs;
      for (const auto& [k, at] : n->attrs().all()) attrs.set(k, at);
      attrs.set_int("channels_last", 1);
      ir::Node* probe =
          g_.add_node(channels_last_op(*n), ins, {yt}, std::move(attrs), n->name() + "/nhwc_probe", "ingot");
      temp_nodes.push_back(probe);
      INGOT_ASSIGN_OR_RETURN(double b, best_ms(*probe));
      nhwc += b;
      // Reformats where the region meets channels-first ops; the elementwise ops, pools, reductions
      // and Concats between its convolutions move into it (sink_transposes) and need none.
      for (size_t i : {size_t{0}, residual_input(*n)}) {
        const ir::Value* v = n->input(i);
        if (!v || from_region(v, in_region, from_memo)) continue;
        if (model_permute(v->producer(), kToNchw) && v->uses().size() == 1) {
          model_permutes.insert(v->producer());
          continue;
        }
        entries.insert(v);
      }
      const ir::Value* y = n->output(0);
      if (!to_region(y, in_region, to_memo)) {
        bool permuted_away = !is_graph_output(y) && !y->uses().empty();
        for (const auto& [user, idx] : y->uses()) permuted_away = permuted_away && model_permute(user, kToNhwc);
        if (!permuted_away) {
          exits.insert(y);
          continue;
        }
        for (const auto& [user, idx] : y->uses()) model_permutes.insert(user);
      }
    }
    // The reformats at the region's edges.
    auto time_transpose = [&](const ir::Value* v, const std::vector<int64_t>& perm, bool from_nhwc) -> Result<double> {
      Shape64 in_shape = from_nhwc ? permuted(v->shape().concrete(), kToNhwc) : v->shape().concrete();
      ir::Value* src = g_.add_value(unique(v->name() + "/reformat_probe_in"), v->dtype(), ir::Shape::from_concrete(in_shape));
      ir::Value* dst = g_.add_value(unique(v->name() + "/reformat_probe"), v->dtype(),
                                    ir::Shape::from_concrete(permuted(in_shape, perm)));
      ir::Attributes a;
      a.set_ints("perm", perm);
      ir::Node* t = g_.add_node("Transpose", {src}, {dst}, std::move(a), dst->name());
      temp_nodes.push_back(t);
      return best_ms(*t);
    };
    for (const ir::Value* v : entries) {
      INGOT_ASSIGN_OR_RETURN(double t, time_transpose(v, kToNhwc, false));
      nhwc += t;
    }
    for (const ir::Value* v : exits) {
      INGOT_ASSIGN_OR_RETURN(double t, time_transpose(v, kToNchw, true));
      nhwc += t;
    }
    for (const ir::Node* p : model_permutes) {
      INGOT_ASSIGN_OR_RETURN(double t, time_transpose(p->input(0), p->attrs().get_ints("perm"), false));
      nchw += t;
    }
    INGOT_RETURN_IF_ERROR(cleanup());
    r_.nchw_ms = nchw;
    r_.nhwc_ms = nhwc;
    if (!std::isfinite(nchw) && !std::isfinite(nhwc)) return -1;
    if (nhwc < nchw) return 1;
    for (const auto& [w, wk] : krsc_) {  // not used: channels-first stays
      (void)w;
      g_.remove_initializer(wk);
    }
    krsc_.clear();
    return 0;
  }

  bool eligible(const ir::Node& n) const {
    const ir::Value* x = n.input(0);
    const ir::Value* w = n.input(1);
    if (!x || !w || !w->initializer() || !x->shape().rank_known() || x->shape().rank() != 4) return false;
    if (w->initializer()->shape().size() != 4) return false;
    DataType t = x->dtype();
    // An 8-bit convolution counts as reduced precision: its tensor-core kernels read NHWC too.
    if (is_quant_conv(n)) return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN;
    if (mode_ == "auto") return t == DataType::kFloat16 || t == DataType::kBFloat16;
    return is_float(t) && t != DataType::kFloat64;
  }

  bool has_real_tactic(const ir::Node& n) const {
    for (const auto& c : be_.candidates(n, backend::node_input_types(n)))
      if (c->capturable()) return true;  // not the host fallback, which synchronizes
    return false;
  }

  Status convert(ir::Node& n) {
    if (!eligible(n)) return Status::Ok();
    ir::Value* x = n.input(0);
    ir::Value* w = n.input(1);
    ir::Value* r = n.input(residual_input(n));
    ir::Value* y = n.output(0);
    // Weights KCRS -> KRSC, once per weight.
    ir::Value* wk = nullptr;
    auto wi = krsc_.find(w);
    if (wi != krsc_.end()) {
      wk = wi->second;
    } else {
      INGOT_ASSIGN_OR_RETURN(Tensor data, permute_dims(*w->initializer(), {0, 2, 3, 1}));
      wk = g_.add_initializer(unique(w->name() + "/krsc"), std::move(data));
      krsc_[w] = wk;
    }
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all()) attrs.set(k, a);
    attrs.set_int("channels_last", 1);
    std::vector<ir::Dim> yd;
    if (y->shape().rank_known() && y->shape().rank() == 4)
      for (int64_t p : kToNhwc) yd.push_back(y->shape().dims()[static_cast<size_t>(p)]);
    ir::Value* yt = g_.add_value(unique(y->name() + "/nhwc"), y->dtype(),
                                 yd.empty() ? ir::Shape::unknown_rank() : ir::Shape(yd));
    ir::Value* xt = transposed(x, kToNhwc, "/nhwc");
    ir::Value* rt = r ? transposed(r, kToNhwc, "/nhwc") : nullptr;
    ir::Node* nc = g_.add_node(channels_last_op(n), channels_last_inputs(n, xt, wk, rt), {yt}, std::move(attrs),
                               n.name(), "ingot");
    for (const std::string& o : n.origins()) nc->add_origin(o);
    if (n.origins().empty()) nc->add_origin(n.name());
    if (!has_real_tactic(*nc)) {
      // Roll back: the backend would run this layout on the host (or has no channels-last
      // QuantConv). The transposes made for it go too, unless another conv reads them.
      INGOT_RETURN_IF_ERROR(g_.remove_node(nc));
      for (ir::Value* t : {xt, rt})
        if (t) INGOT_RETURN_IF_ERROR(drop_unread_transpose(t));
      return Status::Ok();
    }
    ir::Value* back = transposed(yt, kToNchw, "/nchw");
    g_.replace_all_uses(y, back);
    INGOT_RETURN_IF_ERROR(g_.remove_node(&n));
    std::string name = y->name();
    g_.rename_value(y, unique(name + "/replaced"));
    g_.rename_value(back, name);
    ++r_.channels_last_convs;
    return Status::Ok();
  }

  // Removes our transpose that makes `t` when nothing reads `t`.
  Status drop_unread_transpose(ir::Value* t) {
    ir::Node* p = t->producer();
    if (!p || !created_.count(p) || !t->uses().empty() || is_graph_output(t)) return Status::Ok();
    created_.erase(p);
    for (auto it = transposes_.begin(); it != transposes_.end();)
      it = it->second == t ? transposes_.erase(it) : std::next(it);
    return g_.remove_node(p);
  }

  // A value made by one of our NHWC -> NCHW transposes: its NHWC source, else nullptr.
  // The NHWC value `v` is a channels-first view of: the input of a Transpose to NCHW, ours or the
  // model's own (ConvNeXt permutes back to NCHW before its layer scale and residual Add).
  ir::Value* nhwc_source(const ir::Value* v) const {
    const ir::Node* p = v ? v->producer() : nullptr;
    if (!p || p->op_type() != "Transpose" || !p->domain().empty() || p->attrs().get_ints("perm") != kToNchw ||
        !p->input(0) || !p->input(0)->shape().rank_known() || p->input(0)->shape().rank() != 4)
      return nullptr;
    return p->input(0);
  }

  static bool is_sinkable_elementwise(const ir::Node& n) {
    static const std::set<std::string> kOps = {"Relu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu",
                                               "Clip", "Add", "Sub", "Mul", "Div", "Max", "Min", "Erf", "Abs",
                                               "Neg", "Sqrt", "Exp", "Softplus", "Elu", "Selu", "Gelu",
                                               "Cast", "Mish", "Reciprocal", "Pow", "Where", "PRelu"};
    if (!n.domain().empty() || n.outputs().size() != 1 || !n.output(0)) return false;
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear") return per_tensor(n);
    return kOps.count(n.op_type()) > 0;
  }

  // A QuantizeLinear / DequantizeLinear with one scale and zero point (constant scalars): an
  // elementwise op in any layout, so a residual's DequantizeLinear between two QuantConvs moves
  // into their region. Per-axis and blocked forms name an NCHW axis and stay.
  static bool per_tensor(const ir::Node& n) {
    if (n.attrs().get_int("block_size", 0) != 0) return false;
    for (size_t i = 1; i < n.inputs().size(); ++i) {
      const ir::Value* v = n.input(i);
      if (v && (!v->initializer() || v->initializer()->rank() != 0)) return false;
    }
    return true;
  }

  // Whether every reader of the channels-first view `v` is an op this pass moves into the region:
  // then the transpose that makes `v` dies once they have all moved, and moving the first of
  // several readers adds no transpose for long (a squeeze-excite input feeds the pooling and the
  // gate's Mul; a DenseNet feature map feeds every later Concat of its block).
  bool readers_can_move(const ir::Value* v) const {
    if (v->uses().size() == 1) return true;
    if (is_graph_output(v)) return false;
    for (const auto& [user, idx] : v->uses()) {
      (void)idx;
      if (user->owner() != &g_ || !movable(*user)) return false;
    }
    return true;
  }

  bool is_graph_output(const ir::Value* v) const {
    for (const ir::Value* o : g_.outputs())
      if (o == v) return true;
    return false;
  }

  // An op the sinking below moves into a channels-last region (elementwise ops, pooling,
  // reductions that keep dims, Concat), or a Pointwise, which it takes apart first.
  static bool movable(const ir::Node& n) {
    static const std::set<std::string> kMovable = {"Concat", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum",
                                                   "GlobalAveragePool", "GlobalMaxPool", "MaxPool", "AveragePool",
                                                   "Gather", "Split"};
    if (n.domain() == "ingot" && n.op_type() == "Pointwise") return true;
    return n.domain().empty() && (is_sinkable_elementwise(n) || kMovable.count(n.op_type()) > 0);
  }

  // For the layout estimate: whether `v` is computed inside the would-be region, by one of its
  // convolutions or by movable ops whose other inputs are constants or from the region too; such
  // a value needs no reformat on its way into a convolution.
  bool from_region(const ir::Value* v, const std::set<const ir::Node*>& region, std::map<const ir::Value*, bool>& memo) {
    if (!v || v->initializer()) return true;
    auto it = memo.find(v);
    if (it != memo.end()) return it->second;
    memo[v] = false;  // a cycle cannot occur in a DAG; this also bounds the walk
    const ir::Node* p = v->producer();
    bool in = p && p->owner() == &g_ && (region.count(p) || movable(*p));
    if (in && !region.count(p))
      for (const ir::Value* i : p->inputs()) in = in && from_region(i, region, memo);
    return memo[v] = in;
  }

  // For the layout estimate: whether every reader of `v` stays in the region (a convolution's X or
  // residual, or movable ops whose readers do), so `v` needs no reformat on its way out.
  bool to_region(const ir::Value* v, const std::set<const ir::Node*>& region, std::map<const ir::Value*, bool>& memo) {
    auto it = memo.find(v);
    if (it != memo.end()) return it->second;
    memo[v] = false;
    bool in = !is_graph_output(v);
    for (const auto& [user, idx] : v->uses()) {
      if (!in) break;
      if (region.count(user))
        in = idx == 0 || static_cast<size_t>(idx) == residual_input(*user);  // X or the residual
      else if (user->owner() != &g_ || !movable(*user)) in = false;
      else
        for (const ir::Value* o : user->outputs()) in = in && (!o || to_region(o, region, memo));
    }
    return memo[v] = in;
  }

  // NCHW axis -> NHWC axis of a rank-4 tensor.
  static int64_t nhwc_axis(int64_t a) { return a == 0 ? 0 : a == 1 ? 3 : a - 1; }

  // Replaces n (one output, rank 4) by `op` on NHWC inputs with `attrs`, its output transposed back.
  Result<bool> replace_channels_last(ir::Node& n, const std::vector<ir::Value*>& ins, ir::Attributes attrs) {
    const ir::Shape& ys = n.output(0)->shape();
    ir::Value* out = g_.add_value(unique(n.output(0)->name() + "/nhwc"), n.output(0)->dtype(),
                                  ir::Shape({ys[0], ys[2], ys[3], ys[1]}));
    ir::Node* m = g_.add_node(n.op_type(), ins, {out}, std::move(attrs), n.name());
    for (const std::string& o : n.origins()) m->add_origin(o);
    ir::Value* old_out = n.output(0);
    ir::Value* back = to_nchw_after(out, old_out);
    INGOT_RETURN_IF_ERROR(g_.remove_node(&n));
    adopt_name(old_out, back);
    return true;
  }

  // Concat of channels-last sources along any axis (DenseNet joins feature maps along C): the
  // same Concat on the sources along the NHWC axis. Every input must come from the region; a
  // source read by other Concats too is fine (they move next, and its transpose dies with them).
  Result<bool> sink_concat(ir::Node& n) {
    const ir::Value* y = n.output(0);
    if (!y || n.outputs().size() != 1 || !y->shape().rank_known() || y->shape().rank() != 4) return false;
    int64_t axis = n.attrs().get_int("axis", 1);
    if (axis < 0) axis += 4;
    if (axis < 0 || axis > 3) return false;
    std::vector<ir::Value*> ins;
    for (ir::Value* v : n.inputs()) {
      ir::Value* src = nhwc_source(v);
      if (!src) return false;
      if (!readers_can_move(v)) return false;
      ins.push_back(src);
    }
    ir::Attributes attrs;
    attrs.set_int("axis", nhwc_axis(axis));
    return replace_channels_last(n, ins, std::move(attrs));
  }

  // Gather along one axis by constant 1-D indices (ShuffleNet's channel shuffle, after
  // simplify_algebra) of a channels-last source: the same Gather along the NHWC axis.
  Result<bool> sink_gather(ir::Node& n) {
    if (n.outputs().size() != 1 || !n.output(0) || !n.input(1)) return false;
    const Tensor* idx = n.input(1)->initializer();
    ir::Value* src = nhwc_source(n.input(0));
    if (!idx || idx->rank() != 1 || !src || !readers_can_move(n.input(0))) return false;
    const ir::Value* y = n.output(0);
    if (!y->shape().rank_known() || y->shape().rank() != 4) return false;
    int64_t axis = n.attrs().get_int("axis", 0);
    if (axis < 0) axis += 4;
    if (axis < 0 || axis > 3) return false;
    ir::Attributes attrs;
    attrs.set_int("axis", nhwc_axis(axis));
    return replace_channels_last(n, {src, n.input(1)}, std::move(attrs));
  }

  // Split of a channels-last source (ShuffleNet's two branches): the same Split along the NHWC
  // axis, each output transposed back (those transposes meet the readers' and cancel).
  Result<bool> sink_split(ir::Node& n) {
    ir::Value* src = nhwc_source(n.input(0));
    if (!src || !readers_can_move(n.input(0))) return false;
    if (n.inputs().size() > 1 && n.input(1) && !n.input(1)->initializer()) return false;
    int64_t axis = n.attrs().get_int("axis", 0);
    if (axis < 0) axis += 4;
    if (axis < 0 || axis > 3) return false;
    std::vector<ir::Value*> outs;
    for (ir::Value* o : n.outputs()) {
      if (!o || !o->shape().rank_known() || o->shape().rank() != 4) return false;
      const ir::Shape& ys = o->shape();
      outs.push_back(g_.add_value(unique(o->name() + "/nhwc"), o->dtype(), ir::Shape({ys[0], ys[2], ys[3], ys[1]})));
    }
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all())
      if (k != "axis") attrs.set(k, a);
    attrs.set_int("axis", nhwc_axis(axis));
    std::vector<ir::Value*> ins = {src};
    for (size_t i = 1; i < n.inputs().size(); ++i) ins.push_back(n.input(i));
    ir::Node* m = g_.add_node("Split", ins, outs, std::move(attrs), n.name());
    for (const std::string& o : n.origins()) m->add_origin(o);
    std::vector<ir::Value*> old_outs(n.outputs().begin(), n.outputs().end());
    std::vector<ir::Value*> backs;
    for (size_t i = 0; i < outs.size(); ++i) backs.push_back(to_nchw_after(outs[i], old_outs[i]));
    INGOT_RETURN_IF_ERROR(g_.remove_node(&n));
    for (size_t i = 0; i < outs.size(); ++i) adopt_name(old_outs[i], backs[i]);
    return true;
  }

  // ReduceMean / ReduceMax / ... keeping dims (squeeze-excite's pooling) over a channels-last
  // source: the same reduction over the NHWC axes. Refused: keepdims = 0 (the rank changes), axes
  // that are not constant, an empty axes list.
  Result<bool> sink_reduce(ir::Node& n) {
    static const std::set<std::string> kOps = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum"};
    if (!kOps.count(n.op_type()) || n.outputs().size() != 1 || !n.output(0)) return false;
    ir::Value* src = nhwc_source(n.input(0));
    if (!src || !readers_can_move(n.input(0)) || n.attrs().get_int("keepdims", 1) != 1) return false;
    const ir::Value* y = n.output(0);
    if (!y->shape().rank_known() || y->shape().rank() != 4) return false;
    // ReduceSum takes axes as an input from opset 13, the others from opset 18.
    const bool axes_input = n.inputs().size() > 1;
    std::vector<int64_t> axes;
    if (axes_input) {
      const ir::Value* a = n.input(1);
      if (!a || !a->initializer() || a->initializer()->dtype() != DataType::kInt64) return false;
      for (int64_t i = 0; i < a->initializer()->numel(); ++i) axes.push_back(a->initializer()->get_i64(i));
    } else {
      axes = n.attrs().get_ints("axes");
    }
    if (axes.empty()) return false;
    std::vector<int64_t> mapped;
    for (int64_t a : axes) {
      if (a < 0) a += 4;
      if (a < 0 || a > 3) return false;
      mapped.push_back(nhwc_axis(a));
    }
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all())
      if (k != "axes") attrs.set(k, a);
    std::vector<ir::Value*> ins = {src};
    if (axes_input) {
      ins.push_back(g_.add_initializer(unique(n.input(1)->name() + "/nhwc"),
                                       Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(mapped.size())}, mapped)));
    } else {
      attrs.set_ints("axes", mapped);
    }
    return replace_channels_last(n, ins, std::move(attrs));
  }

  ir::Value* to_nchw_after(ir::Value* nhwc, ir::Value* old_out) {
    ir::Value* back = transposed(nhwc, kToNchw, "/nchw");
    g_.replace_all_uses(old_out, back);
    return back;
  }

  void adopt_name(ir::Value* old_out, ir::Value* back) {
    std::string name = old_out->name();
    g_.rename_value(old_out, unique(name + "/replaced"));
    g_.rename_value(back, name);
  }

  Result<bool> sink_transposes() {
    std::vector<ir::Node*> nodes;
    for (const auto& n : g_.nodes()) nodes.push_back(n.get());
    for (ir::Node* n : nodes) {
      if (!n->domain().empty() || !n->output(0)) continue;
      if (n->op_type() == "Split") {
        INGOT_ASSIGN_OR_RETURN(bool moved, sink_split(*n));
        if (moved) return true;
        continue;
      }
      if (n->outputs().size() != 1) continue;
      // GlobalAveragePool / GlobalMaxPool of an NCHW view: a reduction over the NHWC source's H, W.
      if ((n->op_type() == "GlobalAveragePool" || n->op_type() == "GlobalMaxPool") && n->inputs().size() == 1) {
        ir::Value* src = nhwc_source(n->input(0));
        if (!src || !src->shape().rank_known() || src->shape().rank() != 4) continue;
        const ir::Shape& ss = src->shape();
        ir::Value* r = g_.add_value(unique(n->output(0)->name() + "/nhwc"), src->dtype(),
                                    ir::Shape({ss[0], ir::Dim(1), ir::Dim(1), ss[3]}));
        const char* op = n->op_type() == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax";
        const int64_t opset = g_.opset("");
        ir::Attributes a;
        a.set_int("keepdims", 1);
        std::vector<ir::Value*> ins = {src};
        if (opset >= 18) {  // axes became an input in opset 18
          ir::Value* axes = g_.add_initializer(unique(r->name() + "/axes"),
                                               Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 2}));
          ins.push_back(axes);
        } else {
          a.set_ints("axes", {1, 2});
        }
        g_.add_node(op, ins, {r}, std::move(a), n->name());
        ir::Value* old_out = n->output(0);
        ir::Value* back = to_nchw_after(r, old_out);
        INGOT_RETURN_IF_ERROR(g_.remove_node(n));
        adopt_name(old_out, back);
        return true;
      }
      if (n->op_type() == "MaxPool" || n->op_type() == "AveragePool") {
        INGOT_ASSIGN_OR_RETURN(bool moved, sink_pool(*n));
        if (moved) return true;
        continue;
      }
      if (n->op_type() == "Gather") {
        INGOT_ASSIGN_OR_RETURN(bool moved, sink_gather(*n));
        if (moved) return true;
        continue;
      }
      if (n->op_type() == "Concat" || n->op_type().rfind("Reduce", 0) == 0) {
        INGOT_ASSIGN_OR_RETURN(bool moved, n->op_type() == "Concat" ? sink_concat(*n) : sink_reduce(*n));
        if (moved) return true;
        continue;
      }
      if (!is_sinkable_elementwise(*n)) continue;
      const ir::Value* y = n->output(0);
      if (!y->shape().rank_known() || y->shape().rank() != 4) continue;
      bool any = false, ok = true;
      for (const ir::Value* v : n->inputs()) {
        if (!v) continue;
        if (nhwc_source(v)) {
          any = true;
          ok &= readers_can_move(v);  // else the transpose stays, and one more would follow
        } else if (!(v->initializer() && v->initializer()->rank() <= 4 && v->initializer()->dtype() != DataType::kString))
          ok = false;
      }
      if (!any || !ok) {
        INGOT_ASSIGN_OR_RETURN(bool hoisted, hoist_elementwise(*n));
        if (hoisted) return true;
        continue;
      }
      std::vector<ir::Value*> ins;
      for (ir::Value* v : n->inputs()) {
        if (!v) {
          ins.push_back(nullptr);
        } else if (ir::Value* src = nhwc_source(v)) {
          ins.push_back(src);
        } else {
          INGOT_ASSIGN_OR_RETURN(ir::Value * c, nhwc_constant(v));
          ins.push_back(c);
        }
      }
      const ir::Shape& ys = y->shape();
      ir::Value* out = g_.add_value(unique(y->name() + "/nhwc"), y->dtype(), ir::Shape({ys[0], ys[2], ys[3], ys[1]}));
      ir::Attributes attrs;
      for (const auto& [k, a] : n->attrs().all()) attrs.set(k, a);
      ir::Node* m = g_.add_node(n->op_type(), ins, {out}, std::move(attrs), n->name());
      for (const std::string& o : n->origins()) m->add_origin(o);
      ir::Value* old_out = n->output(0);
      ir::Value* back = to_nchw_after(out, old_out);
      INGOT_RETURN_IF_ERROR(g_.remove_node(n));
      adopt_name(old_out, back);
      return true;
    }
    return false;
  }

  static int64_t numel_of(const ir::Value* v) {
    int64_t n = 1;
    for (int64_t d : v->shape().concrete()) n *= d;
    return n;
  }

  // A constant operand of an elementwise op moving to NHWC: a scalar as it is (it broadcasts the
  // same in any layout), else lifted to rank 4 as NCHW broadcasting reads it and permuted to NHWC.
  Result<ir::Value*> nhwc_constant(ir::Value* v) {
    const Tensor& c = *v->initializer();
    if (c.rank() == 0 || c.numel() == 1) return v;
    Shape64 full(4 - c.rank(), 1);
    full.insert(full.end(), c.shape().begin(), c.shape().end());
    INGOT_ASSIGN_OR_RETURN(Tensor reshaped, Tensor::zeros(c.dtype(), full));
    std::memcpy(reshaped.mutable_raw(), c.raw(), c.nbytes());  // same data, rank-4 view
    INGOT_ASSIGN_OR_RETURN(Tensor perm, permute_dims(reshaped, {0, 2, 3, 1}));
    replaced_constants_.insert(v);
    return g_.add_initializer(unique(v->name() + "/nhwc"), std::move(perm));
  }

  // The other direction: an elementwise op whose every reader is a Transpose to NHWC (a
  // channels-first value only convolutions of the region read: MaxViT's BatchNorm between its
  // window un-partition and each MBConv, whose input the MBConv's residual reads as NHWC too)
  // moves into the region, on NHWC views of its inputs. Done only when that makes no more
  // transposes than it removes: an input that is a region value's channels-first view, or that a
  // convolution already reads as NHWC, costs none; constants are permuted once. A chain of such
  // ops (a BatchNorm's Mul then Add) moves one op at a time, the transpose climbing each time (an
  // op moves at most once: nothing moves back, so this ends). At its top the transpose may meet
  // another reader's (one transpose for both) or fold into the model's own view chain
  // (simplify_region_edges).
  Result<bool> hoist_elementwise(ir::Node& n) {
    ir::Value* y = n.output(0);
    if (!y->shape().rank_known() || y->shape().rank() != 4 || is_graph_output(y) || y->uses().empty()) return false;
    std::set<ir::Node*> readers;
    for (const auto& [user, idx] : y->uses()) {
      (void)idx;
      if (user->owner() != &g_ || user->op_type() != "Transpose" || !user->domain().empty() ||
          user->attrs().get_ints("perm") != kToNhwc || !user->output(0) || is_graph_output(user->output(0)))
        return false;
      readers.insert(user);
    }
    size_t cost = 0;
    for (ir::Value* v : n.inputs()) {
      if (!v) continue;
      if (v->initializer()) {
        if (v->initializer()->rank() > 4 || v->initializer()->dtype() == DataType::kString) return false;
        continue;
      }
      if (!v->shape().rank_known() || v->shape().rank() != 4) return false;  // a lower-rank activation broadcasts
      if (nhwc_source(v) || transposes_.count(std::make_pair(v, kToNhwc))) continue;
      // A new transpose must move no more bytes than the one it replaces (a QuantizeLinear's int8
      // output stays the thing transposed, not its fp32 input).
      if (data_type_bits(v->dtype()) > data_type_bits(y->dtype())) return false;
      if (!(v->shape() == y->shape()) &&
          !(v->shape().is_concrete() && y->shape().is_concrete() && numel_of(v) <= numel_of(y)))
        return false;
      ++cost;
    }
    if (cost > readers.size()) return false;
    std::vector<ir::Value*> ins;
    for (ir::Value* v : n.inputs()) {
      if (!v) {
        ins.push_back(nullptr);
      } else if (v->initializer()) {
        INGOT_ASSIGN_OR_RETURN(ir::Value * c, nhwc_constant(v));
        ins.push_back(c);
      } else if (ir::Value* src = nhwc_source(v)) {
        ins.push_back(src);
      } else {
        ins.push_back(transposed(v, kToNhwc, "/nhwc"));
      }
    }
    const ir::Shape& ys = y->shape();
    ir::Value* out = g_.add_value(unique(y->name() + "/nhwc"), y->dtype(), ir::Shape({ys[0], ys[2], ys[3], ys[1]}));
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all()) attrs.set(k, a);
    ir::Node* m = g_.add_node(n.op_type(), ins, {out}, std::move(attrs), n.name());
    for (const std::string& o : n.origins()) m->add_origin(o);
    for (ir::Node* t : readers) {
      ir::Value* to = t->output(0);
      g_.replace_all_uses(to, out);
      for (auto it = transposes_.begin(); it != transposes_.end();)
        it = it->second == to ? transposes_.erase(it) : std::next(it);
      created_.erase(t);
      INGOT_RETURN_IF_ERROR(g_.remove_node(t));
    }
    INGOT_RETURN_IF_ERROR(g_.remove_node(&n));
    return true;
  }

  // MaxPool / AveragePool over the two spatial dims of an NCHW view that only it reads: an
  // ingot::Pool{channels_last=1} on the NHWC source, with the same window attributes. Refused
  // (the pool stays channels-first): MaxPool's Indices output, storage_order = 1 (it only orders
  // Indices) and any attribute ingot::Pool does not have, other spatial ranks, and pools the
  // backend would run only on the host.
  Result<bool> sink_pool(ir::Node& n) {
    if (refused_pools_.count(&n) || n.inputs().size() != 1) return false;
    for (size_t o = 1; o < n.outputs().size(); ++o)
      if (n.output(o)) return false;  // Indices
    ir::Value* v = n.input(0);
    ir::Value* src = v ? nhwc_source(v) : nullptr;
    const ir::Shape& ys = n.output(0)->shape();
    if (!src || !readers_can_move(v) || !src->shape().rank_known() || src->shape().rank() != 4 || !ys.rank_known() ||
        ys.rank() != 4)
      return false;
    const bool max = n.op_type() == "MaxPool";
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all()) {
      if (k == "storage_order" && max && a.type == ir::AttrType::kInt && a.i == 0) continue;  // the default
      const bool known = k == "auto_pad" || k == "kernel_shape" || k == "pads" || k == "strides" || k == "dilations" ||
                         k == "ceil_mode" || (!max && k == "count_include_pad");
      if (!known) {
        refused_pools_.insert(&n);
        return false;
      }
      attrs.set(k, a);
    }
    attrs.set_string("mode", max ? "max" : "average");
    attrs.set_int("channels_last", 1);
    ir::Value* out = g_.add_value(unique(n.output(0)->name() + "/nhwc"), n.output(0)->dtype(),
                                  ir::Shape({ys[0], ys[2], ys[3], ys[1]}));
    ir::Node* m = g_.add_node("Pool", {src}, {out}, std::move(attrs), n.name(), "ingot");
    for (const std::string& o : n.origins()) m->add_origin(o);
    if (!has_real_tactic(*m)) {
      INGOT_RETURN_IF_ERROR(g_.remove_node(m));
      refused_pools_.insert(&n);
      return false;
    }
    ir::Value* old_out = n.output(0);
    ir::Value* back = to_nchw_after(out, old_out);
    INGOT_RETURN_IF_ERROR(g_.remove_node(&n));
    adopt_name(old_out, back);
    return true;
  }

  // Transpose(Transpose(v, p1), p2) with p1 o p2 = identity reads v directly.
  Status cancel_transpose_pairs() {
    bool changed = true;
    while (changed) {
      changed = false;
      for (const auto& n : g_.nodes()) {
        if (n->op_type() != "Transpose" || !n->domain().empty() || !n->input(0) || !n->output(0)) continue;
        const ir::Node* p = n->input(0)->producer();
        if (!p || p->op_type() != "Transpose" || !p->domain().empty() || !p->input(0)) continue;
        std::vector<int64_t> p1 = p->attrs().get_ints("perm"), p2 = n->attrs().get_ints("perm");
        if (p1.empty() || p1.size() != p2.size()) continue;
        bool identity = true;
        for (size_t j = 0; j < p2.size(); ++j)
          identity &= p2[j] >= 0 && static_cast<size_t>(p2[j]) < p1.size() && p1[static_cast<size_t>(p2[j])] == static_cast<int64_t>(j);
        ir::Value* out = n->output(0);
        bool is_output = false;
        for (const ir::Value* o : g_.outputs()) is_output |= o == out;
        if (!identity || is_output || out->uses().empty()) continue;
        g_.replace_all_uses(out, p->input(0));
        changed = true;
      }
      // Drop transposes nobody reads any more.
      bool removed = true;
      while (removed) {
        removed = false;
        for (const auto& n : g_.nodes()) {
          // Ours and the model's own (ConvNeXt permutes to channels-last around each LayerNorm:
          // once a pair cancels, both halves are dead and would still run as steps).
          if (n->op_type() != "Transpose" || !n->domain().empty() || !n->output(0)) continue;
          ir::Value* out = n->output(0);
          bool is_output = false;
          for (const ir::Value* o : g_.outputs()) is_output |= o == out;
          if (!out->uses().empty() || is_output) continue;
          created_.erase(n.get());
          for (auto it = transposes_.begin(); it != transposes_.end();)
            it = it->second == out ? transposes_.erase(it) : std::next(it);
          INGOT_RETURN_IF_ERROR(g_.remove_node(n.get()));
          removed = true;
          break;
        }
      }
    }
    return Status::Ok();
  }

  ir::Graph& g_;
  const backend::Backend& be_;
  std::string mode_;
  LayoutReport& r_;
  const LayoutTiming* timing_;
  std::map<std::pair<ir::Value*, std::vector<int64_t>>, ir::Value*> transposes_;
  std::map<ir::Value*, ir::Value*> krsc_;
  std::set<const ir::Node*> created_;
  std::set<ir::Value*> replaced_constants_;
  std::set<const ir::Node*> refused_pools_;  // stay channels-first; not tried again
};

}  // namespace

Result<double> measured_best_ms(const backend::Backend& be, const ir::Node& n, const LayoutTiming& timing) {
  const std::vector<ir::TensorType> types = backend::node_input_types(n);
  std::vector<DataType> in_t, out_t;
  std::vector<Shape64> in_s, out_s;
  for (const ir::Value* v : n.inputs()) {
    if (v && !v->shape().is_concrete()) return std::numeric_limits<double>::infinity();
    in_t.push_back(v ? v->dtype() : DataType::kUndefined);
    in_s.push_back(v ? v->shape().concrete() : Shape64{});
  }
  for (const ir::Value* v : n.outputs()) {
    if (v && !v->shape().is_concrete()) return std::numeric_limits<double>::infinity();
    out_t.push_back(v ? v->dtype() : DataType::kUndefined);
    out_s.push_back(v ? v->shape().concrete() : Shape64{});
  }
  std::vector<std::unique_ptr<backend::Tactic>> cands;
  for (auto& c : be.candidates(n, types))
    if (c->capturable() && !c->is_host_fallback() && (timing.options->tf32 || !c->uses_tf32()))
      cands.push_back(std::move(c));
  if (cands.empty()) return std::numeric_limits<double>::infinity();
  std::string key = timing_key(timing.identity, n, in_t, in_s, out_t, out_s);
  TuneOptions wide = *timing.options;
  wide.time_single = true;  // compared by time, even with one candidate
  INGOT_ASSIGN_OR_RETURN(size_t i, choose_tactic(be, n, cands, key, in_s, out_s, wide, *timing.cache, *timing.stats));
  const std::map<std::string, double>* known = timing.cache->find(key);
  if (known && known->count(cands[i]->name())) return known->at(cands[i]->name());
  return std::numeric_limits<double>::infinity();
}

Status choose_conv_layout(ir::Graph& g, const backend::Backend& be, const std::string& mode, LayoutReport* report,
                          const LayoutTiming* timing) {
  LayoutReport local;
  if (mode == "nchw") return Status::Ok();
  if (mode != "auto" && mode != "nhwc")
    return invalid_argument("conv layout must be auto, nhwc or nchw, got '", mode, "'");
  Layout l(g, be, mode, report ? *report : local, timing);
  return l.run();
}

Status simplify_region_edges(ir::Graph& g, passes::PassContext& ctx, LayoutReport* report) {
  INGOT_ASSIGN_OR_RETURN(bool simplified, passes::make_simplify_algebra()->run(g, ctx));
  if (!simplified) return Status::Ok();
  INGOT_RETURN_IF_ERROR(g.topological_sort());  // rewrites append their nodes at the end
  INGOT_RETURN_IF_ERROR(passes::make_remove_dead_nodes()->run(g, ctx).status());
  if (report) {  // the reformats still Transposes (one that moved only unit axes is a Reshape now)
    std::set<std::string> ours(report->reformat_values.begin(), report->reformat_values.end());
    report->reformats = 0;
    report->reformat_values.clear();
    for (const auto& n : g.nodes()) {
      if (n->op_type() != "Transpose" || !n->output(0) || !ours.count(n->output(0)->name())) continue;
      ++report->reformats;
      report->reformat_values.push_back(n->output(0)->name());
    }
  }
  return Status::Ok();
}

}  // namespace ingot::builder
