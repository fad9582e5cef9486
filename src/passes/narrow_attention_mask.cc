// Copyright ingot authors. Apache-2.0.
//
// narrow_attention_mask: an attention's mask computed at the smallest shape it varies in.
//
// Exporters build a padding mask [B, 1, 1, S] and then broadcast it to [B, 1, S, S] before the
// attention reads it: transformers' bidirectional mask is And(all-true [1, 1, S, 1], padding)
// turned into a float bias by Where(mask, 0, min); other exports Expand it. Attention broadcasts
// its mask itself, so the wide copy only costs: at BERT-base batch 64 the fused SDPA read a
// 4 MB fp32 [B, 1, S, S] bias per layer (76 us a layer against 24 us with the [B, 1, 1, S] one).
//
// Pattern (the mask input of ingot::Attention or ai.onnx Attention, followed upwards):
//   Expand(x, shape)                         -> x
//   And(x, c) / Or(x, c), c constant all-true / all-false (either operand order) -> x
//   Where(m, a, b), Not(m), Cast(m) whose other operands are single elements, m narrowed to n
//                                            -> the same op on n (a new node)
// The narrowed value replaces the mask when it has the same last dim as the mask: a shorter
// last axis would mean "keys past it are hidden" to Attention, not a broadcast. The wide nodes
// stay for other readers and are removed as dead otherwise.
// Refused silently: anything else (the mask stays as it is).
//
// A mask that is the causal lower triangle (a constant, or Where of a constant bool, as exporters
// fold decoders' masks at fixed shapes) goes altogether: the attention's is_causal = 1 instead.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_registry.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_narrow_attention_mask();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "narrow_attention_mask";

bool is_onnx(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }

bool is_attention(const Node& n) {
  return n.op_type() == "Attention" && (n.domain().empty() || n.domain() == kIngotDomain);
}

/// Whether `v` is a constant bool tensor whose every element is `value`.
bool constant_all(const Value* v, bool value) {
  if (!v || v->dtype() != DataType::kBool) return false;
  std::optional<Tensor> t = constant_value(v);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if ((t->get_f64(i) != 0) != value) return false;
  return true;
}

bool single_element(const Value* v) {
  return v && v->shape().rank_known() && v->shape().is_concrete() && shape_numel(v->shape().concrete()) == 1 &&
         v->shape().rank() <= 1;
}

class NarrowAttentionMask final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    narrowed_.clear();
    triangle_.clear();
    std::vector<Node*> attentions;
    for (const auto& n : g.nodes())
      if (is_attention(*n) && n->inputs().size() > 3 && n->input(3)) attentions.push_back(n.get());
    bool changed = false;
    for (Node* a : attentions) {
      Value* mask = a->input(3);
      if (causal_pattern(*a, mask)) {
        // The mask says "key j <= query i" and nothing else: the attention's own causal mode
        // (no mask to read; cuDNN's causal SDPA skips the upper tiles).
        ir::Attributes attrs = a->attrs();
        attrs.set_int("is_causal", 1);
        std::vector<Value*> ins(a->inputs().begin(), a->inputs().begin() + 3);
        Value* out = a->output(0);
        Value* y = g.add_value(unique_value_name(g, out->name() + ".causal", "."), out->dtype(), out->shape());
        Node* c = g.add_node(a->op_type(), ins, {y}, std::move(attrs), a->name(), a->domain());
        c->absorb_origins(*a);
        g.replace_all_uses(out, y);
        INGOT_RETURN_IF_ERROR(g.remove_node(a));
        take_over_name(g, out, y);
        ctx.note(kName, "the mask of " + c->describe() + " is the causal triangle: is_causal=1, no mask read");
        changed = true;
        continue;
      }
      INGOT_ASSIGN_OR_RETURN(Value * n, narrow(g, mask));
      if (n == mask || !same_last_dim(n, mask)) continue;
      a->set_input(3, n);
      changed = true;
    }
    if (changed) {
      INGOT_RETURN_IF_ERROR(g.topological_sort());
      INGOT_RETURN_IF_ERROR(ir::infer_graph(g));  // the rebuilt nodes' exact types for the passes after
    }
    return changed;
  }

 private:
  static bool same_last_dim(const Value* a, const Value* b) {
    const ir::Shape& x = a->shape();
    const ir::Shape& y = b->shape();
    return x.rank_known() && y.rank_known() && x.rank() >= 1 && y.rank() >= 1 && x.rank() <= y.rank() &&
           x[x.rank() - 1].is_known() && x[x.rank() - 1] == y[y.rank() - 1];
  }

  /// The narrowest value whose broadcast equals `v` (v itself when none is found).
  Result<Value*> narrow(Graph& g, Value* v) {
    auto it = narrowed_.find(v);
    if (it != narrowed_.end()) return it->second;
    Value* out = v;
    Node* p = v->producer();
    if (is_onnx(p, "Expand") && p->input(0)) {
      INGOT_ASSIGN_OR_RETURN(out, narrow(g, p->input(0)));
    } else if ((is_onnx(p, "And") || is_onnx(p, "Or")) && p->inputs().size() == 2) {
      const bool neutral = p->op_type() == "And";  // x & true = x, x | false = x
      for (int i = 0; i < 2; ++i) {
        if (constant_all(p->input(1 - i), neutral) && p->input(i)) {
          INGOT_ASSIGN_OR_RETURN(out, narrow(g, p->input(i)));
          break;
        }
      }
    } else if ((is_onnx(p, "Where") || is_onnx(p, "Not") || is_onnx(p, "Cast")) && p->input(0) &&
               p->outputs().size() == 1) {
      bool rest_single = true;
      for (size_t i = 1; i < p->inputs().size(); ++i) rest_single &= single_element(p->input(i));
      if (rest_single) {
        INGOT_ASSIGN_OR_RETURN(Value * m, narrow(g, p->input(0)));
        if (m != p->input(0)) out = rebuilt(g, *p, m);
      }
    }
    narrowed_[v] = out;
    return out;
  }

  /// `p` again with input 0 replaced by `m`; its output shaped by inference from the new input.
  Value* rebuilt(Graph& g, const Node& p, Value* m) {
    ir::Shape shape = m->shape();
    for (size_t i = 1; i < p.inputs().size(); ++i) {  // single elements: rank <= 1 against m's rank
      const ir::Shape& s = p.input(i)->shape();
      if (s.rank() > shape.rank()) shape = s;
    }
    const Value* old = p.output(0);
    Value* out = g.add_value(unique_value_name(g, old->name() + ".narrow", "."), old->dtype(), shape);
    std::vector<Value*> ins(p.inputs().begin(), p.inputs().end());
    ins[0] = m;
    Node* n = g.add_node(p.op_type(), ins, {out}, p.attrs(), p.name().empty() ? "" : p.name() + "/narrow", p.domain());
    n->absorb_origins(p);
    return out;
  }

  /// Whether `mask` (Attention's input 3 of `a`) hides exactly the keys after each query: a
  /// constant [.., S, S] (bool: true = keep; float: 0 kept, <= -65504 hidden), or Where(c, 0,
  /// fill) of such a constant bool c, every leading index the same lower triangle. Exporters fold
  /// decoders' causal masks to such constants at fixed shapes (GPT-2, Llama, Qwen2: a
  /// [B, 1, S, S] fp32 bias read by every layer). Only without other masking (no past, no
  /// windows, not causal already, no padding lengths).
  bool causal_pattern(const Node& a, const Value* mask) {
    const ir::Attributes& at = a.attrs();
    if (a.outputs().size() != 1 || at.get_int("is_causal", 0) != 0 || at.get_int("left_window_size", -1) >= 0 ||
        at.get_int("right_window_size", -1) >= 0 || at.get_int("mask_batch_period", 0) != 0)
      return false;
    for (size_t i = 4; i < a.inputs().size(); ++i)
      if (a.input(i)) return false;  // past K/V or padding lengths shift the triangle
    const int64_t n = triangle_side(mask);
    // Q and K/V of that length (a square mask on a shorter query block would be misread).
    const ir::Shape& q = a.input(0)->shape();
    return n > 0 && q.rank_known() && q.rank() >= 3 && q[q.rank() - 2] == ir::Dim(n);
  }

  /// S when `mask` is the causal triangle [.., S, S] described above, else -1. Every layer of a
  /// decoder reads the same mask: it is scanned once (B*S*S elements) per run.
  int64_t triangle_side(const Value* mask) {
    auto it = triangle_.find(mask);
    if (it != triangle_.end()) return it->second;
    int64_t& side = triangle_[mask] = -1;
    std::optional<Tensor> keep;
    bool keep_if_zero = false;  // a float bias: kept where 0
    const Node* p = mask->producer();
    if (is_onnx(p, "Where") && p->inputs().size() == 3) {
      auto zero = scalar_value(p->input(1)), fill = scalar_value(p->input(2));
      if (!zero || *zero != 0.0 || !fill || !(*fill <= -65504.0)) return side;
      keep = constant_value(p->input(0));
      if (!keep || keep->dtype() != DataType::kBool) return side;
    } else {
      keep = constant_value(mask);
      if (!keep) return side;
      keep_if_zero = keep->dtype() != DataType::kBool;
    }
    const Shape64& s = keep->shape();
    if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2] || s.back() < 1) return side;
    const int64_t n = s.back();
    for (int64_t i = 0; i < keep->numel(); ++i) {
      const int64_t r = (i / n) % n, c = i % n;
      const double v = keep->get_f64(i);
      const bool kept = keep_if_zero ? v == 0.0 : v != 0.0;
      if (!keep_if_zero || kept) {
        if (kept != (c <= r)) return side;
      } else if (!(v <= -65504.0)) {
        return side;  // a finite penalty, not a hidden key
      }
    }
    return side = n;
  }

  std::map<Value*, Value*> narrowed_;
  std::map<const Value*, int64_t> triangle_;  // triangle_side() per mask value, this run
};

}  // namespace

std::unique_ptr<Pass> make_narrow_attention_mask() { return std::make_unique<NarrowAttentionMask>(); }

}  // namespace ingot::passes
