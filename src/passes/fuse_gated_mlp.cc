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

#include "passes/packed_projection.h"
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
      if (is_ingot(s, "Silu") && s->input(0) && is_packable_projection(s->input(0)->producer()) &&
          is_packable_projection(other))
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
    const Value* gv = silu->input(0);
    const ir::Shape& wg = gate->input(1)->shape();
    if (!wg.rank_known() || wg.rank() != 2 || !wg[1].is_known() || wg != up->input(1)->shape() ||
        gv->dtype() != up->output(0)->dtype())
      return refuse(ctx, mul, "the gate and up weights differ in shape, or the outputs in type");
    const std::string base = gate->name().empty() ? "gate_up" : gate->name() + "_gate_up";
    ir::Shape gu_shape = gv->shape();
    if (gu_shape.rank_known() && gu_shape.rank() >= 1) {
      ir::Dim& last = gu_shape[gu_shape.rank() - 1];
      last = last.is_known() ? ir::Dim(2 * last.value()) : ir::Dim::unknown();
    }
    std::string why;
    INGOT_ASSIGN_OR_RETURN(Node* gemm, add_packed_projection(g, {gate, up}, gu_shape, base, &why));
    if (!gemm) return refuse(ctx, mul, why);
    Value* gu = gemm->output(0);
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
