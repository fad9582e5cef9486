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

  Result<bool> run(Graph& g, PassContext&) override {
    narrowed_.clear();
    std::vector<Node*> attentions;
    for (const auto& n : g.nodes())
      if (is_attention(*n) && n->inputs().size() > 3 && n->input(3)) attentions.push_back(n.get());
    bool changed = false;
    for (Node* a : attentions) {
      Value* mask = a->input(3);
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

  std::map<Value*, Value*> narrowed_;
};

}  // namespace

std::unique_ptr<Pass> make_narrow_attention_mask() { return std::make_unique<NarrowAttentionMask>(); }

}  // namespace ingot::passes
