// Copyright ingot authors. Apache-2.0.
//
// pack_rotary_qkv: one GEMM and one rotation for a rotary attention's Q, K and V (Llama, Qwen2,
// Mistral: grouped-query heads, RoPE on Q and K), where fuse_qkv_projection cannot pack them
// (its thirds must be equal, and Q and K pass through RoPE before the attention).
//
//   q = Reshape(MatMul(x, Wq)) [B,S,Hq,D]   k = Reshape(MatMul(x, Wk)) [B,S,Hkv,D]   v = MatMul(x, Wv)
//   y = ingot::Attention {views}(RoPE(q, cos, sin), RoPE(k, cos, sin), v)
// becomes
//   qkv = MatMul(x, [Wq | Wk | Wv])                                  [B,S,(Hq+2Hkv)*D]
//   qk  = ingot::RotaryEmbedding {heads=Hq+Hkv, head_size=D}(qkv, cos, sin)   [B,S,Hq+Hkv,D]
//   y   = ingot::Attention {views: Q and K inside qk, V inside qkv}(qk, qk, qkv)
//
// Per layer two GEMM launches and one rotation go; the rotation reads the Q and K heads at the
// start of each packed row (they share cos/sin: one position per row), and the attention reads
// its operands through the views (ir/ops/attention_views.h), so nothing is copied.
//
// Matched (after attention_strided_views, which gives the attention its views): an
// ingot::Attention with views whose Q and K are ingot::RotaryEmbedding outputs (interleaved 0,
// the same cos and sin) of Reshapes [B,S,H,D] of projections, V a projection's output (or a
// Reshape of it), each read as its contiguous [B,S,H,D] (Sq = Skv); the projections plain
// MatMuls or FusedGemm {kind="matmul"} with at most a constant bias, no epilogue, one input x,
// constant 2-D weights of one type and K, the same attributes; every intermediate read only on
// this path. Refused (noted) otherwise.
#include <memory>
#include <string>
#include <vector>

#include "ir/ops/attention_views.h"
#include "ir/ops/rotary.h"
#include "passes/packed_projection.h"
#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_pack_rotary_qkv();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "pack_rotary_qkv";

bool is_ingot(const Node* n, const char* op) { return n && n->domain() == kIngotDomain && n->op_type() == op; }
bool is_onnx(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }
const Node* producer(const Value* v) { return v ? v->producer() : nullptr; }

/// The same value, or constants of one type, shape and contents.
bool same_value(const Value* a, const Value* b) {
  if (a == b) return true;
  std::optional<Tensor> x = a ? constant_value(a) : std::nullopt, y = b ? constant_value(b) : std::nullopt;
  return x && y && x->dtype() == y->dtype() && x->shape() == y->shape() && x->to_f64_vector() == y->to_f64_vector();
}

class PackRotaryQkv final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> attentions;
    for (const auto& n : g.nodes())
      if (is_ingot(n.get(), "Attention") && ir::attention_has_views(n->attrs()) && n->inputs().size() >= 3)
        attentions.push_back(n.get());
    bool changed = false;
    for (Node* a : attentions) {
      INGOT_ASSIGN_OR_RETURN(bool done, pack(g, ctx, a));
      changed |= done;
    }
    return changed;
  }

 private:
  Result<bool> pack(Graph& g, PassContext& ctx, Node* att) {
    Node* rope[2] = {const_cast<Node*>(producer(att->input(0))), const_cast<Node*>(producer(att->input(1)))};
    for (Node* r : rope)
      if (!is_ingot(r, "RotaryEmbedding") || r->attrs().get_int("interleaved", 0) != 0 || r->attrs().has("heads"))
        return false;  // not the rotary form at all: nothing to say
    if (rope[0] == rope[1]) return false;
    ir::AttentionViews v;
    if (!ir::parse_attention_views(att->attrs(), &v).empty()) return false;
    const int64_t B = v.batch, S = v.q_len, Hq = v.q_heads, Hk = v.kv_heads, D = v.head_size;
    if (v.kv_len != S) return refuse(ctx, att, "the keys are not the queries' positions");
    // Q, K and V each read as a contiguous [B, S, H, D] of their own tensor (a stride along a dim
    // of size 1 says nothing).
    const int64_t h_of[3] = {Hq, Hk, Hk};
    const char* names[3] = {"Q", "K", "V"};
    for (int i = 0; i < 3; ++i) {
      const int64_t* w = v.view[i];
      const bool ok = w[0] == 0 && (B == 1 || w[1] == S * h_of[i] * D) && (h_of[i] == 1 || w[2] == D) &&
                      (S == 1 || w[3] == h_of[i] * D);
      if (!ok)
        return refuse(ctx, att, std::string(names[i]) + " is read as [offset " + std::to_string(w[0]) + ", strides " +
                                    std::to_string(w[1]) + ", " + std::to_string(w[2]) + ", " + std::to_string(w[3]) +
                                    "], not as a contiguous [B, S, H, D]");
    }
    for (int i = 1; i < 3; ++i)
      if (!same_value(rope[0]->input(i), rope[1]->input(i)))
        return refuse(ctx, att, "Q and K rotate with different cos/sin");
    // Each rotation as the views read it (heads of D, so its pairs are the packed one's), with
    // tables that do not vary along the heads (one rotation then serves Q's and K's heads alike).
    for (int i = 0; i < 2; ++i) {
      const ir::Shape want{ir::Dim(B), ir::Dim(S), ir::Dim(h_of[i]), ir::Dim(D)};
      if (rope[i]->input(0)->shape() != want)
        return refuse(ctx, att, std::string(names[i]) + "'s rotation is not over [B, S, H, D] = " + want.to_string());
    }
    const ir::Shape one_head{ir::Dim(B), ir::Dim(S), ir::Dim(1), ir::Dim(D)};
    for (int i = 1; i < 3; ++i)
      if (!ir::rotary_param_fits(one_head, rope[0]->input(i)->shape(), /*provably=*/true))
        return refuse(ctx, att, "the cos/sin tables vary along the heads");
    // rope input <- Reshape <- projection; V <- projection (or a Reshape of one).
    Node* reshape[2];
    Node* proj[3];
    for (int i = 0; i < 2; ++i) {
      reshape[i] = const_cast<Node*>(producer(rope[i]->input(0)));
      if (!is_onnx(reshape[i], "Reshape")) return refuse(ctx, att, "Q or K is not a Reshape of a projection");
      proj[i] = const_cast<Node*>(producer(reshape[i]->input(0)));
    }
    Node* v_reshape = nullptr;
    proj[2] = const_cast<Node*>(producer(att->input(2)));
    if (is_onnx(proj[2], "Reshape")) {
      v_reshape = proj[2];
      proj[2] = const_cast<Node*>(producer(v_reshape->input(0)));
    }
    for (Node* p : proj)
      if (!is_packable_projection(p)) return refuse(ctx, att, "Q, K or V is not a MatMul projection without an epilogue");
    if (proj[0] == proj[1] || proj[1] == proj[2] || proj[0] == proj[2]) return false;
    // Every intermediate read only on this path.
    const std::vector<std::pair<const Value*, const Node*>> reads = {
        {att->input(0), att}, {att->input(1), att}, {rope[0]->input(0), rope[0]}, {rope[1]->input(0), rope[1]},
        {proj[0]->output(0), reshape[0]}, {proj[1]->output(0), reshape[1]},
        {proj[2]->output(0), v_reshape ? v_reshape : att}};
    for (const auto& [val, reader] : reads)
      if (single_consumer(g, val) != reader) return refuse(ctx, att, "a projection, reshape or rotation is read elsewhere");
    if (v_reshape && single_consumer(g, v_reshape->output(0)) != att)
      return refuse(ctx, att, "V's reshape is read elsewhere");
    const int64_t n_of[3] = {Hq * D, Hk * D, Hk * D};
    for (int i = 0; i < 3; ++i) {
      const ir::Shape& ps = proj[i]->output(0)->shape();
      if (!ps.rank_known() || ps.rank() != 3 || !(ps[0].is_known() && ps[0].value() == B) ||
          !(ps[1].is_known() && ps[1].value() == S) || !(ps[2].is_known() && ps[2].value() == n_of[i]))
        return refuse(ctx, att, proj[i]->describe() + " does not write [B, S, H * D]");
    }
    // The packed projection.
    const std::string base = proj[0]->name().empty() ? "qkv" : proj[0]->name() + "_qkv";
    const int64_t row = (Hq + 2 * Hk) * D, qk_row = (Hq + Hk) * D;
    const DataType dt = proj[0]->output(0)->dtype();
    std::string why;
    INGOT_ASSIGN_OR_RETURN(Node* gemm, add_packed_projection(g, {proj[0], proj[1], proj[2]},
                                                             ir::Shape{ir::Dim(B), ir::Dim(S), ir::Dim(row)}, base, &why));
    if (!gemm) return refuse(ctx, att, why);
    Value* qkv = gemm->output(0);

    // One rotation of the Q and K heads at the start of each packed row.
    Value* qk = g.add_value(unique_value_name(g, base + ".rotated", "."), dt,
                            ir::Shape{ir::Dim(B), ir::Dim(S), ir::Dim(Hq + Hk), ir::Dim(D)});
    ir::Attributes ra;
    ra.set_int("heads", Hq + Hk);
    ra.set_int("head_size", D);
    Node* rot = g.add_node("RotaryEmbedding", {qkv, rope[0]->input(1), rope[0]->input(2)}, {qk}, std::move(ra),
                           rope[0]->name(), kIngotDomain);
    for (Node* r : rope) rot->absorb_origins(*r);
    for (Node* r : reshape) rot->absorb_origins(*r);

    // The attention reads Q and K inside qk, V inside qkv.
    ir::Attributes aa = att->attrs();
    aa.set_ints("q_view", {0, S * qk_row, D, qk_row});
    aa.set_ints("k_view", {Hq * D, S * qk_row, D, qk_row});
    aa.set_ints("v_view", {(Hq + Hk) * D, S * row, D, row});
    std::vector<Value*> ins = {qk, qk, qkv};
    for (size_t i = 3; i < att->inputs().size(); ++i) ins.push_back(att->input(i));
    Value* out = att->output(0);
    Value* fused_out = g.add_value(unique_value_name(g, out->name() + ".packed", "."), out->dtype(), out->shape());
    Node* packed = g.add_node("Attention", ins, {fused_out}, std::move(aa), att->name(), kIngotDomain);
    packed->absorb_origins(*att);
    if (v_reshape) packed->absorb_origins(*v_reshape);
    g.replace_all_uses(out, fused_out);
    std::vector<Node*> gone = {att, rope[0], rope[1], reshape[0], reshape[1], proj[0], proj[1], proj[2]};
    if (v_reshape) gone.push_back(v_reshape);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, gone, kName));
    take_over_name(g, out, fused_out);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* att, const std::string& why) {
    ctx.note(name(), refusal_note("packed rotary QKV projection", "Attention", att, why));
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_pack_rotary_qkv() { return std::make_unique<PackRotaryQkv>(); }

}  // namespace ingot::passes
