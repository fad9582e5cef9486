// Copyright ingot authors. Apache-2.0.
//
// fuse_gated_mlp: one GEMM for a gated MLP's gate and up projections (Llama, Qwen2, Mistral,
// T5 v1.1-style SwiGLU).
//
//   g = MatMul(x, Wg)   u = MatMul(x, Wu)   y = Mul(ingot::Silu(g), u)
// becomes
//   gu = MatMul(x, [Wg | Wu])        (weights concatenated on N; FusedGemm with [bg | bu] if biased)
//   y  = ingot::SwiGLU(gu)           (silu of the first half of each row times the second half)
//
// One GEMM with N = 2 * ff where there were two with N = ff: one launch fewer per layer, and at
// small batches twice the output tiles to fill the GPU. The activation reads both halves of the
// packed rows itself, so nothing is copied. TensorRT and vLLM fuse this pair the same way
// (vLLM's MergedColumnParallelLinear + SiluAndMul).
//
// Matched: an ai.onnx Mul of an ingot::Silu (recognize_gelu_silu's) of one projection and of a
// second projection, either operand order. Each projection is a plain MatMul or a FusedGemm
// {kind="matmul"} with an optional constant bias [N] and no epilogue (fuse_conv_gemm keeps a
// SiLU that gates a product out of the GEMM for this); both read the same x with constant 2-D
// weights [K, N] of one shape and type, the same attributes; the gate is read only by the Silu,
// the Silu and the up projection only by the Mul. Refused (noted): different inputs, weight
// shapes or types, epilogues, values read elsewhere.
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_fuse_gated_mlp();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_gated_mlp";

bool is_ingot(const Node* n, const char* op) { return n && n->domain() == kIngotDomain && n->op_type() == op; }
bool is_onnx(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }

/// A projection this pass packs: a plain MatMul, or a FusedGemm {kind="matmul"} without an
/// activation or residual (a bias at most).
bool is_projection(const Node* n) {
  if (is_onnx(n, "MatMul")) return n->inputs().size() == 2;
  return is_ingot(n, "FusedGemm") && n->attrs().get_string("kind", "gemm") == "matmul" &&
         n->attrs().get_string("activation", "").empty() && n->inputs().size() <= 3;
}

/// A projection's attributes as a FusedGemm's (a plain MatMul is {kind="matmul"}).
ir::Attributes attrs_of(const Node* p) {
  ir::Attributes a = p->attrs();
  if (is_onnx(p, "MatMul")) a.set_string("kind", "matmul");
  return a;
}

class FuseGatedMlp final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> muls;
    for (const auto& n : g.nodes())
      if (is_onnx(n.get(), "Mul") && n->inputs().size() == 2) muls.push_back(n.get());
    bool changed = false;
    for (Node* m : muls) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, ctx, m));
      changed |= done;
    }
    return changed;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* mul) {
    // Which operand is the SiLU of a projection (the gate), which the other projection (up).
    int side = -1;
    for (int i = 0; i < 2 && side < 0; ++i) {
      const Node* s = mul->input(i) ? mul->input(i)->producer() : nullptr;
      const Node* other = mul->input(1 - i) ? mul->input(1 - i)->producer() : nullptr;
      if (is_ingot(s, "Silu") && s->input(0) && is_projection(s->input(0)->producer()) && is_projection(other))
        side = i;
    }
    if (side < 0) return false;
    Node* silu = mul->input(side)->producer();
    Node* gate = silu->input(0)->producer();
    Node* up = mul->input(1 - side)->producer();
    if (gate == up) return false;
    if (single_consumer(g, silu->input(0)) != silu || single_consumer(g, silu->output(0)) != mul ||
        single_consumer(g, up->output(0)) != mul)
      return refuse(ctx, mul, "the gate, its SiLU or the up projection is read elsewhere");
    Value* x = gate->input(0);
    if (up->input(0) != x) return refuse(ctx, mul, "the gate and up projections read different inputs");
    if (!same_scalar_attrs(attrs_of(gate), attrs_of(up))) return refuse(ctx, mul, "the projections differ in attributes");
    std::vector<Tensor> weights, biases;
    bool any_bias = false;
    for (const Node* p : {gate, up}) {
      std::optional<Tensor> w = constant_value(p->input(1));
      if (!w || w->rank() != 2) return refuse(ctx, mul, p->describe() + " has no constant 2-D weight");
      if (!weights.empty() && (w->shape() != weights[0].shape() || w->dtype() != weights[0].dtype()))
        return refuse(ctx, mul, "the gate and up weights differ in shape or type");
      std::optional<Tensor> b;
      if (p->inputs().size() > 2 && p->input(2) != nullptr) {
        b = constant_value(p->input(2));
        if (!b || b->numel() != w->dim(1) || b->dtype() != w->dtype())
          return refuse(ctx, mul, p->describe() + " has a bias that is not a constant [N]");
        any_bias = true;
      } else {
        INGOT_ASSIGN_OR_RETURN(Tensor z, Tensor::zeros(w->dtype(), {w->dim(1)}));
        b = std::move(z);
      }
      INGOT_ASSIGN_OR_RETURN(Tensor flat, b->reshaped({w->dim(1)}));
      weights.push_back(std::move(*w));
      biases.push_back(std::move(flat));
    }
    const Value* gv = silu->input(0);
    if (gv->shape() != up->output(0)->shape() || gv->dtype() != up->output(0)->dtype())
      return refuse(ctx, mul, "the gate and up outputs differ in shape or type");
    ir::Attributes cat;
    cat.set_int("axis", 1);
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> w_cat, eval_op("Concat", weights, cat, &g));
    const std::string base = gate->name().empty() ? "gate_up" : gate->name() + "_gate_up";
    Value* w = make_initializer(g, base + "_weight", std::move(w_cat[0]));
    ir::Shape gu_shape = gv->shape();
    if (gu_shape.rank_known() && gu_shape.rank() >= 1) {
      ir::Dim& last = gu_shape[gu_shape.rank() - 1];
      last = last.is_known() ? ir::Dim(2 * last.value()) : ir::Dim::unknown();
    }
    Value* gu = g.add_value(unique_value_name(g, base, "."), gv->dtype(), gu_shape);
    Node* gemm;
    if (any_bias) {
      cat.set_int("axis", 0);
      INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> b_cat, eval_op("Concat", biases, cat, &g));
      Value* b = make_initializer(g, base + "_bias", std::move(b_cat[0]));
      gemm = g.add_node("FusedGemm", {x, w, b}, {gu}, attrs_of(gate), base, kIngotDomain);
    } else {  // no bias and no epilogue: a plain product
      gemm = g.add_node("MatMul", {x, w}, {gu}, ir::Attributes(), base);
    }
    gemm->absorb_origins(*gate);
    gemm->absorb_origins(*up);
    Value* out = mul->output(0);
    Value* y = g.add_value(unique_value_name(g, out->name() + ".swiglu", "."), out->dtype(), out->shape());
    Node* act = g.add_node("SwiGLU", {gu}, {y}, ir::Attributes(), mul->name(), kIngotDomain);
    act->absorb_origins(*silu);
    act->absorb_origins(*mul);
    g.replace_all_uses(out, y);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, {mul, silu, gate, up}, kName));
    take_over_name(g, out, y);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* mul, const std::string& why) {
    ctx.note(name(), refusal_note("packed gate/up projection", "Mul", mul, why));
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_gated_mlp() { return std::make_unique<FuseGatedMlp>(); }

}  // namespace ingot::passes
