// Copyright ingot authors. Apache-2.0.
//
// fuse_qkv_projection: one GEMM for an attention's three input projections.
//
//   q = FusedGemm(x, Wq, bq)   k = FusedGemm(x, Wk, bk)   v = FusedGemm(x, Wv, bv)
//   y = ingot::Attention(q, k, v[, mask]) {3-D, q_num_heads = kv_num_heads = H}
// becomes
//   qkv = FusedGemm(x, [Wq | Wk | Wv], [bq | bk | bv])      (weights concatenated on N; a MatMul
//                                                          when none has a bias: packed_projection.h)
//   y   = ingot::Attention(qkv, -, -[, mask]) {qkv_packed = 1}
//
// The attention kernels read Q, K and V out of the packed [B, S, 3*H*D] tensor through their
// strides, so nothing is copied. One GEMM with N = 3*H*D fills the GPU where three with N = H*D
// cannot at small batches (BERT-base at 128 tokens: 6 output tiles each), and it saves two
// launches per layer.
//
// Matched: FusedGemm kind "matmul" with a 2-D constant weight [K, N] and an optional constant
// bias [N] (or plain MatMuls by 2-D constants: bias-free projections such as T5's, or Whisper's
// k_proj beside biased q and v: a zero bias third), no activation, no residual, identical attributes, the same input x, each output read
// only by the attention. Refused (noted): Gemm-kind projections (2-D tensors, not the 3-D form
// the packed attention takes), projections with an epilogue, differing weight shapes or types
// (grouped-query K/V with fewer heads), and projections whose outputs are read elsewhere.
//
// Quantized projections (ingot::QuantGemm, fuse_quant_gemm's) pack the same way when they read
// the same quantized x with the same x_scale and write the same type: W [N, K] concatenated on
// N, w_scale kept when the three are one equal value, else (int8) spread per output channel;
// FP8 weights need one equal value (cuBLASLt's FP8 scales are per tensor; insert_qdq gives the
// layers reading one input one FP8 weight scale for this).
#include <memory>
#include <string>
#include <vector>

#include "passes/packed_projection.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_fuse_qkv_projection();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_qkv_projection";

bool is_ingot(const Node* n, const char* op) { return n && n->domain() == kIngotDomain && n->op_type() == op; }

/// The float values of a constant as a vector (empty when not a constant).
std::vector<double> constant_values(const Value* v) {
  std::optional<Tensor> t = v ? constant_value(v) : std::nullopt;
  return t ? t->to_f64_vector() : std::vector<double>{};
}

/// A bias-free projection left as ai.onnx MatMul (T5's, whose layers have no biases, so no
/// epilogue made a FusedGemm of them).
bool is_plain_matmul(const Node* n) {
  return n && n->domain().empty() && n->op_type() == "MatMul" && n->inputs().size() == 2;
}

class FuseQkvProjection final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> attentions;
    for (const auto& n : g.nodes())
      if (is_ingot(n.get(), "Attention") && n->attrs().get_int("qkv_packed", 0) == 0) attentions.push_back(n.get());
    bool changed = false;
    for (Node* a : attentions) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, ctx, a));
      changed |= done;
    }
    return changed;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* att) {
    const int64_t hq = att->attrs().get_int("q_num_heads", 0), hk = att->attrs().get_int("kv_num_heads", 0);
    if (att->inputs().size() < 3 || hq <= 0 || hq != hk) return false;  // 4-D or grouped-query form
    Node* proj[3];
    for (int i = 0; i < 3; ++i) {
      Value* v = att->input(i);
      proj[i] = v ? v->producer() : nullptr;
      if (i == 0 && is_ingot(proj[0], "QuantGemm")) break;  // the quantized form, below
      if (!is_ingot(proj[i], "FusedGemm") && !is_plain_matmul(proj[i])) return false;
      if (single_consumer(g, v) != att) return refuse(ctx, att, "projection " + proj[i]->describe() + " is read elsewhere");
    }
    if (is_ingot(proj[0], "QuantGemm")) return fuse_quantized(g, ctx, att);
    if (proj[0] == proj[1] || proj[1] == proj[2] || proj[0] == proj[2]) return false;
    for (Node* p : proj) {
      if (!is_packable_projection(p))
        return refuse(ctx, att, p->describe() + " is not a MatMul projection without an activation or residual");
      if (p->input(1)->shape() != proj[0]->input(1)->shape())
        return refuse(ctx, att, "Q, K and V weights differ in shape or type");
    }
    const std::string base = proj[0]->name().empty() ? "qkv" : proj[0]->name() + "_qkv";
    ir::Shape qkv_shape = att->input(0)->shape();
    if (qkv_shape.rank_known() && qkv_shape.rank() == 3)
      qkv_shape[2] = qkv_shape[2].is_known() ? ir::Dim(3 * qkv_shape[2].value()) : ir::Dim::unknown();
    std::string why;
    INGOT_ASSIGN_OR_RETURN(Node* gemm, add_packed_projection(g, {proj[0], proj[1], proj[2]}, qkv_shape, base, &why));
    if (!gemm) return refuse(ctx, att, why);
    Value* qkv = gemm->output(0);
    return pack_attention(g, att, proj, qkv);
  }

  // Three ingot::QuantGemm projections as one (see the header).
  Result<bool> fuse_quantized(Graph& g, PassContext& ctx, Node* att) {
    Node* proj[3];
    for (int i = 0; i < 3; ++i) {
      Value* v = att->input(i);
      proj[i] = v ? v->producer() : nullptr;
      if (!is_ingot(proj[i], "QuantGemm")) return refuse(ctx, att, "Q, K and V are not all quantized projections");
      if (single_consumer(g, v) != att) return refuse(ctx, att, "projection " + proj[i]->describe() + " is read elsewhere");
    }
    if (proj[0] == proj[1] || proj[1] == proj[2] || proj[0] == proj[2]) return false;
    Value* x = proj[0]->input(0);
    const DataType q = x->dtype();
    const std::vector<double> sx = constant_values(proj[0]->input(2));
    std::vector<Tensor> weights, biases;
    std::vector<std::vector<double>> w_scales;
    for (Node* p : proj) {
      if (!p->attrs().get_string("activation", "").empty() || p->inputs().size() > 5)
        return refuse(ctx, att, p->describe() + " has an activation, a residual or a quantized output");
      if (p->input(0) != x || constant_values(p->input(2)) != sx || sx.size() != 1)
        return refuse(ctx, att, "Q, K and V quantize different inputs");
      if (p->attrs().get_int("output_dtype", 1) != proj[0]->attrs().get_int("output_dtype", 1))
        return refuse(ctx, att, "projections write different types");
      std::optional<Tensor> w = constant_value(p->input(1));
      std::vector<double> ws = constant_values(p->input(3));
      if (!w || w->rank() != 2 || ws.empty() || (ws.size() != 1 && static_cast<int64_t>(ws.size()) != w->dim(0)))
        return refuse(ctx, att, p->describe() + " has no constant weight and scale");
      if (!weights.empty() && w->shape() != weights[0].shape())
        return refuse(ctx, att, "Q, K and V weights differ in shape");
      const int64_t n = w->dim(0);
      const Value* bv = p->inputs().size() > 4 ? p->input(4) : nullptr;
      std::optional<Tensor> b = bv ? constant_value(bv) : std::nullopt;
      if (bv && (!b || b->numel() != n)) return refuse(ctx, att, p->describe() + " has a bias that is not a constant [N]");
      if (!b) b = Tensor::zeros(DataType::kFloat32, {n}).value();
      if (!biases.empty() && b->dtype() != biases[0].dtype()) return refuse(ctx, att, "the biases differ in type");
      weights.push_back(std::move(*w));
      biases.push_back(std::move(*b));
      w_scales.push_back(std::move(ws));
    }
    const bool one_scale = w_scales[0].size() == 1 && w_scales[1] == w_scales[0] && w_scales[2] == w_scales[0];
    if (!one_scale && q != DataType::kInt8)
      return refuse(ctx, att, "the fp8 weights have different scales (cuBLASLt's fp8 scales are per tensor)");
    ir::Attributes cat;
    cat.set_int("axis", 0);
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> w_cat, eval_op("Concat", weights, cat, &g));
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> b_cat, eval_op("Concat", biases, cat, &g));
    Tensor scale = Tensor::zeros(DataType::kFloat32, one_scale ? Shape64{} : Shape64{3 * weights[0].dim(0)}).value();
    if (one_scale) {
      scale.set_f64(0, w_scales[0][0]);
    } else {
      const int64_t n = weights[0].dim(0);
      for (int i = 0; i < 3; ++i)
        for (int64_t j = 0; j < n; ++j) scale.set_f64(i * n + j, w_scales[i][w_scales[i].size() == 1 ? 0 : j]);
    }
    const std::string base = proj[0]->name().empty() ? "qkv" : proj[0]->name() + "_qkv";
    Value* w = make_initializer(g, base + "_weight", std::move(w_cat[0]));
    Value* b = make_initializer(g, base + "_bias", std::move(b_cat[0]));
    Value* ws = make_initializer(g, base + "_weight_scale", std::move(scale));
    ir::Shape qkv_shape = att->input(0)->shape();
    if (qkv_shape.rank_known() && qkv_shape.rank() == 3)
      qkv_shape[2] = qkv_shape[2].is_known() ? ir::Dim(3 * qkv_shape[2].value()) : ir::Dim::unknown();
    Value* qkv = g.add_value(unique_value_name(g, base, "."), att->input(0)->dtype(), qkv_shape);
    ir::Attributes gemm_attrs;
    gemm_attrs.set_int("output_dtype", proj[0]->attrs().get_int("output_dtype", 1));
    Node* gemm = g.add_node("QuantGemm", {x, w, proj[0]->input(2), ws, b}, {qkv}, std::move(gemm_attrs), base,
                            kIngotDomain);
    for (Node* p : proj) gemm->absorb_origins(*p);
    return pack_attention(g, att, proj, qkv);
  }

  // The attention reads the packed projection's output (qkv_packed = 1); the three go.
  Result<bool> pack_attention(Graph& g, Node* att, Node* const proj[3], Value* qkv) {
    std::vector<Value*> ins = {qkv, nullptr, nullptr};
    for (size_t i = 3; i < att->inputs().size(); ++i) ins.push_back(att->input(i));
    ir::Attributes attrs = att->attrs();
    attrs.set_int("qkv_packed", 1);
    Value* out = att->output(0);
    Value* fused_out = g.add_value(unique_value_name(g, out->name() + ".packed", "."), out->dtype(), out->shape());
    Node* packed = g.add_node("Attention", ins, {fused_out}, std::move(attrs), att->name(), kIngotDomain);
    packed->absorb_origins(*att);
    g.replace_all_uses(out, fused_out);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, {att, proj[0], proj[1], proj[2]}, kName));
    take_over_name(g, out, fused_out);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* att, const std::string& why) {
    ctx.note(name(), refusal_note("packed QKV projection", "Attention", att, why));
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qkv_projection() { return std::make_unique<FuseQkvProjection>(); }

}  // namespace ingot::passes
