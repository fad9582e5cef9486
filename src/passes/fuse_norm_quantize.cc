// Copyright ingot authors. Apache-2.0.
//
// fuse_norm_quantize: a LayerNorm or RMSNorm and the per-tensor QuantizeLinear that reads its result
// as one ingot::LayerNormQuantize.
//
//   y  = LayerNormalization(X, scale, [B]) {axis, epsilon}   ai.onnx (Mean / InvStdDev unused) or ingot
//      | RMSNormalization(X, scale) {axis, epsilon}           ai.onnx or ingot
//   yq = QuantizeLinear(y, s, z)   s: a constant, one value > 0; z: a constant, one value 0, int8 or
//                                  float8e4m3fn (it gives yq its type); no block_size, no precision
//   [other readers of y: a transformer's residual Add, a QuantGemm's residual]
// becomes
//   [y], yq = ingot::LayerNormQuantize(X, scale, [B], s, z) {axis, epsilon, rms, saturate}
// with y kept where something besides the QuantizeLinear reads it or it is a graph output. Several
// QuantizeLinears of y with the same s, z and saturate (Q/DQ models that quantize each reader
// apart) all become the one yq.
//
// In an INT8 / FP8 transformer every LayerNorm feeds the next block's quantized GEMMs (QKV, FFN1),
// whose QuantizeLinear re-reads the norm's fp16 output to write the 8-bit copy they take (BERT-base:
// 24 such steps, about 270 us of 2.9 ms at batch 64). The fused kernel writes both copies from the
// registers that computed the norm. It computes exactly what the two nodes did: Y as the norm node
// stored it, then QuantizeLinear of those stored numbers.
//
// Refused (noted, and only where a QuantizeLinear reads the norm): a Mean or InvStdDev output that
// is read, a stash_type other than float32, X not float32 / float16 / bfloat16 or a scale or bias of
// another type, a QuantizeLinear with a scale that is not a constant single value > 0 (per-channel,
// blocked or computed), no zero point or one that is not a constant 0 of int8 or float8e4m3fn type
// (uint8, asymmetric), or a `precision` attribute (its quotient would be computed in another type).
// The builder splits the node back into the norm and a QuantizeLinear where the backend has no
// device tactic for it (builder/split_fusions.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_norm_quantize";
constexpr const char* kWhat = "norm + QuantizeLinear";

bool is_norm(const Node& n) {
  if (n.domain() != "" && n.domain() != kIngotDomain) return false;
  return n.op_type() == "LayerNormalization" || n.op_type() == "RMSNormalization";
}

bool is_quantize_of(const Node& n, const Value* y) {
  return n.domain().empty() && n.op_type() == "QuantizeLinear" && n.input(0) == y && n.outputs().size() == 1 &&
         n.output(0);
}

// What a QuantizeLinear's quantization is, when LayerNormQuantize can take it.
struct Quantization {
  double scale = 0;
  DataType type = DataType::kUndefined;
  int64_t saturate = 1;
  bool operator==(const Quantization& o) const { return scale == o.scale && type == o.type && saturate == o.saturate; }
};

// The quantization of QuantizeLinear `q`, or nullopt with `why` the fused node cannot take it.
std::optional<Quantization> quantization(const Node& q, std::string* why) {
  auto no = [why](std::string reason) {
    *why = "the QuantizeLinear " + reason;
    return std::nullopt;
  };
  const ir::Attributes& at = q.attrs();
  if (at.get_int("block_size", 0) != 0) return no("is blocked");
  if (at.get_int("precision", 0) != 0) return no("has a precision attribute");
  const std::optional<Tensor> s = constant_value(q.input(1));
  if (!s || !is_float(s->dtype())) return no("has a scale that is not a float constant");
  if (s->numel() != 1) return no("has a scale per channel");
  if (!(s->get_f64(0) > 0)) return no("has a scale that is not positive");
  const Value* zv = q.inputs().size() > 2 ? q.input(2) : nullptr;
  const std::optional<Tensor> z = zv ? constant_value(zv) : std::nullopt;
  if (!z) return no("has no constant zero point (uint8)");
  if (z->dtype() != DataType::kInt8 && z->dtype() != DataType::kFloat8E4M3FN)
    return no(std::string("quantizes to ") + data_type_name(z->dtype()));
  if (z->numel() != 1 || z->get_f64(0) != 0.0) return no("has a zero point that is not 0");
  const int64_t odt = at.get_int("output_dtype", 0);
  if (odt != 0 && odt != static_cast<int64_t>(z->dtype())) return no("has an output_dtype unlike its zero point's");
  return Quantization{s->get_f64(0), z->dtype(), at.get_int("saturate", 1)};
}

class FuseNormQuantize final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> norms;
    for (const auto& n : g.nodes())
      if (is_norm(*n) && !n->outputs().empty() && n->output(0)) norms.push_back(n.get());
    int fused = 0;
    for (Node* n : norms) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, ctx, n));
      fused += done ? 1 : 0;
    }
    if (fused == 0) return false;
    INGOT_RETURN_IF_ERROR(g.topological_sort());  // the fused nodes were appended
    ctx.note(kName, std::to_string(fused) + " norm(s) write their quantized output themselves (LayerNormQuantize)");
    return true;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* norm) {
    Value* y = norm->output(0);
    std::vector<Node*> quants;
    for (const auto& [user, idx] : y->uses())
      if (idx == 0 && user->owner() == &g && is_quantize_of(*user, y)) quants.push_back(user);
    if (quants.empty()) return false;
    // A QuantizeLinear reads the norm; now what would stop them.
    const bool rms = norm->op_type() == "RMSNormalization";
    for (size_t o = 1; o < norm->outputs().size(); ++o) {
      const Value* stat = norm->output(o);
      if (stat && (!stat->uses().empty() || is_graph_output(g, stat)))
        return refuse(ctx, norm, o == 1 ? "its Mean output is used" : "its InvStdDev output is used");
    }
    if (norm->attrs().get_int("stash_type", 1) != 1) return refuse(ctx, norm, "its stash_type is not float32");
    const DataType t = y->dtype();
    if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
      return refuse(ctx, norm, std::string("it computes in ") + data_type_name(t));
    const Value* b = norm->inputs().size() > 2 ? norm->input(2) : nullptr;
    if (!norm->input(0) || norm->input(0)->dtype() != t || !norm->input(1) || norm->input(1)->dtype() != t ||
        (b && b->dtype() != t))
      return refuse(ctx, norm, "its inputs are not all of one type");
    // The first QuantizeLinear it can take sets the quantization; the others with the same one join.
    std::optional<Quantization> want;
    Node* first = nullptr;
    std::vector<Node*> taken;
    std::string why;
    for (Node* q : quants) {
      std::string not_this;
      const std::optional<Quantization> qz = quantization(*q, &not_this);
      if (!qz) {
        why = not_this;
        continue;
      }
      if (!want) {
        want = qz;
        first = q;
      } else if (!(*qz == *want) || is_graph_output(g, q->output(0))) {
        continue;  // it keeps reading y
      }
      taken.push_back(q);
    }
    if (!first) return refuse(ctx, norm, why);
    bool keep_y = is_graph_output(g, y);
    for (const auto& [user, idx] : y->uses()) {
      (void)idx;
      keep_y |= std::find(taken.begin(), taken.end(), user) == taken.end();
    }

    Value* yq = g.add_value(unique_value_name(g, first->output(0)->name() + ".fused", "."), want->type, y->shape());
    Value* y_out = keep_y ? g.add_value(unique_value_name(g, y->name() + ".fused", "."), t, y->shape()) : nullptr;
    ir::Attributes attrs;
    attrs.set_int("axis", norm->attrs().get_int("axis", -1));
    attrs.set_float("epsilon", norm->attrs().get_float("epsilon", 1e-5f));
    attrs.set_int("rms", rms ? 1 : 0);
    attrs.set_int("saturate", want->saturate);
    std::vector<Value*> ins = {norm->input(0), norm->input(1), rms ? nullptr : norm->input(2), first->input(1),
                               first->input(2)};
    Node* fused = g.add_node("LayerNormQuantize", ins, {y_out, yq}, std::move(attrs), norm->name(), kIngotDomain);
    if (g.opset(kIngotDomain) == 0) g.set_opset_import(kIngotDomain, 1);
    fused->absorb_origins(*norm);
    for (Node* q : taken) {
      fused->absorb_origins(*q);
      g.replace_all_uses(q->output(0), yq);
    }
    if (keep_y) g.replace_all_uses(y, y_out);
    Value* first_out = first->output(0);
    std::vector<Node*> gone = taken;
    gone.push_back(norm);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, gone, kName));
    take_over_name(g, first_out, yq);
    if (keep_y) take_over_name(g, y, y_out);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* norm, const std::string& why) {
    ctx.note(name(), refusal_note(kWhat, norm->op_type(), norm, why));
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_norm_quantize() { return std::make_unique<FuseNormQuantize>(); }

}  // namespace ingot::passes
