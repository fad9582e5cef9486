// Copyright ingot authors. Apache-2.0.
//
// recognize_rotary: finds rotary position embeddings in the Llama/Qwen2 "rotate_half" form that
// torch.onnx exports,
//
//   lo = Slice(x, [0], [D/2], [-1], [1]);  hi = Slice(x, [D/2], [D | INT64_MAX], [-1], [1])
//   r = Concat {axis=-1}(Neg(hi), lo)
//   y = Add(Mul(x, cos), Mul(r, sin))       (operands of each Mul and of the Add in either order)
//
// and replaces it by one ingot::RotaryEmbedding(x, cos, sin), so a GPU runs one kernel that
// reads x once instead of two Slices, a Neg, a Concat and a pointwise Mul/Mul/Add. y keeps its
// name and value; x and cos/sin may have other readers. Anchored at the Add.
//
// Refused (noted in the PassContext when the shape of the pattern is there, graph unchanged),
// because the fused op would compute something else or lose a value:
//  - slice bounds that are not constants, not the two halves of the last axis, a step other
//    than 1, or Neg on the lower half (a sign flip, not a rotation);
//  - a Concat on another axis;
//  - x's rank unknown or below 2, its last dim D unknown or odd;
//  - cos/sin whose last dim is not D or whose other dims would enlarge x (a dim neither 1 nor
//    provably x's), or whose dtype differs from x's;
//  - any intermediate read outside the pattern or exposed as a graph output.
// Only the top-level graph is rewritten.
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/ops/rotary.h"
#include "ir/ops/tensor_shared.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_recognize_rotary();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

/// [start, end) that a Slice takes from the last axis of its input (`rank` dims, the last `d`
/// long), clamped as ONNX does; nullopt when its bounds are not constant, it slices another axis
/// too, or its step is not 1.
std::optional<std::pair<int64_t, int64_t>> last_axis_range(const Graph& g, const Node* s, int64_t rank, int64_t d) {
  std::vector<std::optional<Tensor>> held(s->inputs().size());
  std::vector<const Tensor*> in(s->inputs().size(), nullptr);
  for (size_t i = 1; i < s->inputs().size(); ++i) {
    if (s->input(i) == nullptr) continue;
    held[i] = constant_value(s->input(i));
    if (!held[i] || !is_integer(held[i]->dtype())) return std::nullopt;
    in[i] = &*held[i];
  }
  std::vector<int64_t> starts, ends, axes, steps;
  bool known = false;
  if (!ir::tensor_slice_params(nullptr, g.opset(""), s->attrs(), in, rank, &starts, &ends, &axes, &steps, &known)
           .ok() ||
      !known || axes.size() != 1 || axes[0] != rank - 1 || steps[0] != 1)
    return std::nullopt;
  int64_t begin = 0, end = 0, count = 0;
  ir::tensor_slice_range(d, starts[0], ends[0], 1, &begin, &end, &count);
  return std::make_pair(begin, begin + count);
}

/// The nodes of one rotate_half RoPE ending in `add`, matched by structure alone (the values are
/// checked afterwards, so a near miss can say why it was refused).
struct RotaryNodes {
  Node *lo = nullptr, *hi = nullptr, *neg = nullptr, *cat = nullptr, *mul_sin = nullptr, *mul_cos = nullptr;
  Value *x = nullptr, *cos = nullptr, *sin = nullptr;
};

std::optional<RotaryNodes> match_structure(Node* add) {
  for (int k = 0; k < 2; ++k) {
    RotaryNodes m;
    m.mul_sin = onnx_producer(add->input(k), "Mul");
    m.mul_cos = onnx_producer(add->input(1 - k), "Mul");
    if (m.mul_sin == nullptr || m.mul_cos == nullptr || m.mul_sin == m.mul_cos) continue;
    for (int j = 0; j < 2; ++j) {
      m.cat = onnx_producer(m.mul_sin->input(j), "Concat");
      if (m.cat == nullptr || m.cat->inputs().size() != 2) continue;
      m.neg = onnx_producer(m.cat->input(0), "Neg");
      m.hi = m.neg != nullptr ? onnx_producer(m.neg->input(0), "Slice") : nullptr;
      m.lo = onnx_producer(m.cat->input(1), "Slice");
      if (m.hi == nullptr || m.lo == nullptr || m.hi->input(0) != m.lo->input(0)) continue;
      m.x = m.lo->input(0);
      m.sin = m.mul_sin->input(1 - j);
      m.cos = other_input(m.mul_cos, m.x);
      if (m.cos == nullptr) continue;
      // cos/sin computed by the matched nodes themselves (Mul(r, r), Mul(x, Neg(..))) would be
      // removed with them.
      const std::set<const Node*> nodes = {m.lo, m.hi, m.neg, m.cat, m.mul_sin, m.mul_cos};
      if (nodes.count(m.cos->producer()) != 0 || nodes.count(m.sin->producer()) != 0) continue;
      return m;
    }
  }
  return std::nullopt;
}

class RecognizeRotary : public Pass {
 public:
  const char* name() const override { return "recognize_rotary"; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    return match_at_anchors(
        g, [](const Node& n) { return n.op_type() == "Add" && n.domain().empty() && n.inputs().size() == 2; },
        [&](Node* a, std::set<const Node*>* removed) { return try_match(g, ctx, a, removed); });
  }

 private:
  Result<bool> try_match(Graph& g, PassContext& ctx, Node* add, std::set<const Node*>* removed) {
    const std::optional<RotaryNodes> found = match_structure(add);
    if (!found) return false;
    const RotaryNodes& m = *found;
    auto refuse = [&](const std::string& why) -> Result<bool> {
      ctx.note(name(), refusal_note("rotary embedding", "Add", add, why));
      return false;
    };

    const ir::Shape& xs = m.x->shape();
    if (!xs.rank_known() || xs.rank() < 2) return refuse("x's rank is unknown or below 2");
    const int64_t rank = static_cast<int64_t>(xs.rank());
    const ir::Dim& dd = xs[xs.rank() - 1];
    if (!dd.is_known() || dd.value() % 2 != 0 || dd.value() == 0) return refuse("x's last dim is unknown, zero or odd");
    const int64_t d = dd.value(), half = d / 2;
    const int64_t axis = m.cat->attrs().get_int("axis", 0);
    if (axis != rank - 1 && axis != -1) return refuse("the Concat is not on the last axis");
    const auto lo_range = last_axis_range(g, m.lo, rank, d);
    const auto hi_range = last_axis_range(g, m.hi, rank, d);
    if (!lo_range || !hi_range) return refuse("a Slice is not a constant step-1 slice of the last axis alone");
    if (*lo_range != std::make_pair(int64_t{0}, half) || *hi_range != std::make_pair(half, d))
      return refuse("the Slices are not [0, D/2) for the second Concat operand and [D/2, D) negated for the first");
    if (!is_float(m.x->dtype()) || m.cos->dtype() != m.x->dtype() || m.sin->dtype() != m.x->dtype())
      return refuse("x, cos and sin are not of one floating type");
    if (!ir::rotary_param_fits(xs, m.cos->shape(), /*provably=*/true) ||
        !ir::rotary_param_fits(xs, m.sin->shape(), /*provably=*/true))
      return refuse("cos or sin does not have x's last dim or would broadcast x to a larger shape");
    const std::vector<Node*> nodes = {m.lo, m.hi, m.neg, m.cat, m.mul_sin, m.mul_cos, add};
    if (!self_contained(g, nodes, add)) return refuse("an intermediate is read outside the pattern");

    if (g.opset(kIngotDomain) == 0) g.set_opset_import(kIngotDomain, 1);
    Value* out = add->output(0);
    Value* fused_out = g.add_value(unique_value_name(g, out->name() + ".fused", "."), out->dtype(), out->shape());
    const std::string node_name = add->name().empty() ? "RotaryEmbedding" : add->name() + "/RotaryEmbedding";
    Node* fused = g.add_node("RotaryEmbedding", {m.x, m.cos, m.sin}, {fused_out}, {}, node_name, kIngotDomain);
    for (Node* n : nodes) fused->absorb_origins(*n);
    g.replace_all_uses(out, fused_out);
    for (Node* n : nodes) removed->insert(n);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, nodes, name()));
    take_over_name(g, out, fused_out);
    INGOT_ASSIGN_OR_RETURN(bool sunk, sink_input_transpose(g, fused, removed));
    if (sunk) ctx.note(name(), "'" + node_name + "' rotates before the head transpose, which the attention can read as a view");
    return true;
  }

  // RotaryEmbedding(Transpose(x0, p), cos, sin) with p keeping the last axis and cos/sin constants
  // -> Transpose(RotaryEmbedding(x0, cos', sin'), p), cos' = cos permuted back by p's inverse.
  // Llama's q/k are projected [B,S,H*D], viewed [B,S,H,D] and transposed to [B,H,S,D] before
  // the rotation: with the transpose below it, attention_strided_views makes it a strided read
  // of the rotated [B,S,H,D] tensor, and no Transpose kernel runs (two per layer before).
  Result<bool> sink_input_transpose(Graph& g, Node* rot, std::set<const Node*>* removed) {
    Value* x = rot->input(0);
    Node* t = onnx_producer(x, "Transpose");
    if (!t || !t->input(0) || !has_single_consumer(g, x) || !x->shape().rank_known()) return false;
    const size_t r = x->shape().rank();
    const std::vector<int64_t> p = t->attrs().get_ints("perm");
    if (p.size() != r || p[r - 1] != static_cast<int64_t>(r - 1)) return false;
    std::vector<size_t> inv(r);
    for (size_t i = 0; i < r; ++i) {
      if (p[i] < 0 || p[i] >= static_cast<int64_t>(r)) return false;
      inv[static_cast<size_t>(p[i])] = i;
    }
    Value* x0 = t->input(0);
    std::vector<Value*> params;
    for (Value* c : {rot->input(1), rot->input(2)}) {
      auto data = constant_value(c);
      if (!data || data->rank() > r) return false;
      Shape64 full = data->shape();
      while (full.size() < r) full.insert(full.begin(), 1);
      INGOT_ASSIGN_OR_RETURN(Tensor aligned, data->reshaped(full));
      INGOT_ASSIGN_OR_RETURN(Tensor permuted, permute_dims(aligned, inv));
      std::vector<ir::Dim> dims;
      for (int64_t d : permuted.shape()) dims.push_back(ir::Dim(d));
      if (!ir::rotary_param_fits(x0->shape(), ir::Shape(dims), /*provably=*/true)) return false;
      params.push_back(make_initializer(g, c->name() + ".unpermuted", std::move(permuted)));
    }
    Value* y = rot->output(0);
    Value* y0 = g.add_value(unique_value_name(g, y->name() + ".rotated", "."), y->dtype(), x0->shape());
    Node* rot0 = g.add_node("RotaryEmbedding", {x0, params[0], params[1]}, {y0}, {}, rot->name(), kIngotDomain);
    rot0->absorb_origins(*rot);
    Value* yt = g.add_value(unique_value_name(g, y->name() + ".t", "."), y->dtype(), y->shape());
    ir::Attributes attrs;
    attrs.set_ints("perm", p);
    Node* t2 = g.add_node("Transpose", {y0}, {yt}, std::move(attrs), t->name());
    t2->absorb_origins(*t);
    g.replace_all_uses(y, yt);
    removed->insert(rot);
    removed->insert(t);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, {rot, t}, name()));
    take_over_name(g, y, yt);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_recognize_rotary() { return std::make_unique<RecognizeRotary>(); }

}  // namespace ingot::passes
