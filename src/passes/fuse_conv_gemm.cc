// Copyright ingot authors. Apache-2.0.
//
// fuse_conv_gemm: folds the epilogue of a Conv, Gemm or MatMul into one ingot::FusedConv or
// ingot::FusedGemm, so the backend writes the layer output once instead of once per op.
//
// Matches, starting at Conv / ConvTranspose / Gemm / MatMul (default domain) and following
// single readers (ConvTranspose becomes FusedConv {transposed=1}):
//   [Add(y, bias)]  bias constant, per output channel (Conv*: axis 1; Gemm/MatMul: last axis);
//                   merged with the layer's own constant bias / C;
//   then, in either order, at most one of each:
//   activation      Relu, Clip (constant min/max: Relu6 too), LeakyRelu, Sigmoid, Tanh,
//                   HardSwish, HardSigmoid, Gelu (approximate none/tanh), and x·Sigmoid(x) (SiLU);
//   Add(y, r)       a residual: r not constant, with y's exact (known or symbolic) shape.
// Left out of a Gemm/MatMul: an activation that gates a product (act(y) * z, z another tensor of
// y's shape: Llama's SiLU gate), which fuses with that Mul in fuse_pointwise instead.
// Refuses: values read by more than the chain (they are
// needed unfused), non-float outputs, a bias that would broadcast the output up, a non-constant
// existing bias combined with a new bias. A lone layer with nothing to fuse stays as it is.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "passes/activation_match.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"

namespace ingot::passes {

std::unique_ptr<passes::Pass> make_fuse_conv_gemm();

namespace {

using fusion::is_onnx_op;
using fusion::single_consumer;

constexpr const char* kName = "fuse_conv_gemm";

// A gated MLP's gate: act(x·W1) read only by a Mul with another layer's output of the same shape
// (Llama's silu(gate) * up, GeGLU). The activation then fuses into that Mul's pointwise kernel,
// which reads the GEMM output anyway; in the GEMM it can cost a pass of its own (cuBLASLt has no
// SiLU epilogue: the gate GEMM took 27.6 us against the plain up GEMM's 15 us at Llama b32).
bool gates_a_product(const ir::Graph& g, const ActivationMatch& act, const ir::Value* in) {
  ir::Node* m = single_consumer(g, act.out);
  if (!m || !is_onnx_op(*m, "Mul") || m->inputs().size() != 2) return false;
  const ir::Value* other = fusion::other_operand(*m, act.out);
  if (!other || other == in || other->initializer()) return false;
  const ir::Shape& a = act.out->shape();
  const ir::Shape& b = other->shape();
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank()) return false;
  for (size_t i = 0; i < a.rank(); ++i)
    if (!a[i].provably_equal(b[i])) return false;
  return true;
}

// Per-channel values of a constant that broadcasts along `axis` of a rank-`rank` output with
// `channels` channels without growing the output; empty otherwise.
std::vector<double> per_channel(const Tensor& t, size_t rank, size_t axis, int64_t channels) {
  if (t.rank() > rank || channels <= 0) return {};
  if (t.numel() == 1) return std::vector<double>(channels, t.get_f64(0));
  size_t offset = rank - t.rank();
  for (size_t i = 0; i < t.rank(); ++i)
    if (t.dim(i) != (i + offset == axis ? channels : 1)) return {};
  return t.to_f64_vector();
}

bool fully_named(const ir::Shape& s) {
  if (!s.rank_known()) return false;
  for (const ir::Dim& d : s.dims())
    if (d.is_unknown()) return false;
  return true;
}

class FuseConvGemm final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(ir::Graph& g, PassContext& ctx) override {
    std::vector<ir::Node*> anchors;
    for (const auto& n : g.nodes())
      if (is_onnx_op(*n, "Conv") || is_onnx_op(*n, "ConvTranspose") || is_onnx_op(*n, "Gemm") ||
          is_onnx_op(*n, "MatMul"))
        anchors.push_back(n.get());
    bool changed = false;
    for (ir::Node* a : anchors) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, *a, ctx));
      changed |= done;
    }
    if (changed) g.set_opset_import(kIngotDomain, 1);
    return changed;
  }

 private:
  Result<bool> fuse(ir::Graph& g, ir::Node& layer, PassContext& ctx) {
    const bool transposed = layer.op_type() == "ConvTranspose";
    const bool conv = layer.op_type() == "Conv" || transposed, gemm = layer.op_type() == "Gemm";
    ir::Value* cur = layer.output(0);
    if (!cur || !is_float(cur->dtype()) || !cur->shape().rank_known()) return false;
    const size_t rank = cur->shape().rank();
    if (rank < (conv ? 3u : 1u)) return false;
    const size_t axis = conv ? 1 : rank - 1;
    int64_t channels = cur->shape()[axis].is_known() ? cur->shape()[axis].value() : -1;
    std::vector<ir::Node*> absorbed{&layer};

    // Bias: merge a constant per-channel Add with the layer's own constant bias.
    ir::Value* bias_in = conv ? layer.input(2) : gemm ? layer.input(2) : nullptr;
    std::optional<std::vector<double>> new_bias;
    ir::Node* c = single_consumer(g, cur);
    if (c && is_onnx_op(*c, "Add")) {
      ir::Value* b = fusion::other_operand(*c, cur);
      if (b && b->initializer() && b->dtype() == cur->dtype()) {
        std::vector<double> v = per_channel(*b->initializer(), rank, axis, channels);
        std::vector<double> old(v.size(), 0.0);
        bool ok = !v.empty();
        if (ok && bias_in) {
          double beta = gemm ? layer.attrs().get_float("beta", 1.0f) : 1.0;
          std::vector<double> o = bias_in->initializer()
                                      ? per_channel(*bias_in->initializer(), gemm ? 2 : 1, gemm ? 1 : 0, channels)
                                      : std::vector<double>{};
          if (o.empty()) {
            ctx.note(kName, "refused bias " + c->describe() + " for " + layer.describe() +
                                ": the layer's own bias is not a per-channel constant");
            ok = false;
          }
          for (size_t i = 0; ok && i < o.size(); ++i) old[i] = beta * o[i];
        }
        if (ok) {
          for (size_t i = 0; i < v.size(); ++i) v[i] += old[i];
          new_bias = v;
          absorbed.push_back(c);
          cur = c->output(0);
        }
      }
    }

    std::optional<ActivationMatch> act;
    ir::Value* residual = nullptr;
    bool residual_first = false;
    for (int step = 0; step < 2; ++step) {
      if (!act && !(residual && !residual_first) ) {
        act = match_activation(g, cur);
        if (act && !conv && !residual && gates_a_product(g, *act, cur)) {
          ctx.note(kName, "left " + act->nodes.back()->describe() + " out of " + layer.describe() +
                              ": it gates a product, and fuses with that Mul instead");
          act.reset();
          break;
        }
        if (act) {
          absorbed.insert(absorbed.end(), act->nodes.begin(), act->nodes.end());
          cur = act->out;
          continue;
        }
      }
      ir::Node* r = single_consumer(g, cur);
      if (residual || !r || !is_onnx_op(*r, "Add")) break;
      ir::Value* other = fusion::other_operand(*r, cur);
      if (!other || other->initializer()) break;
      if (other->dtype() != cur->dtype() || !fully_named(cur->shape()) || other->shape() != cur->shape()) {
        ctx.note(kName, "refused residual " + r->describe() + " for " + layer.describe() +
                            ": operand shape " + other->shape().to_string() + " is not the output shape " +
                            cur->shape().to_string());
        break;
      }
      residual = other;
      residual_first = !act;
      absorbed.push_back(r);
      cur = r->output(0);
    }
    if (absorbed.size() == 1) return false;

    ir::Attributes attrs;
    for (const auto& [k, v] : layer.attrs().all())
      if (k != "broadcast") attrs.set(k, v);
    if (act) {
      attrs.set_string("activation", act->name);
      if (!act->params.empty()) attrs.set_floats("activation_params", act->params);
      if (residual) attrs.set_int("residual_before_activation", residual_first ? 1 : 0);
    }
    std::vector<ir::Value*> inputs{layer.input(0), layer.input(1), bias_in};
    if (new_bias) {
      INGOT_ASSIGN_OR_RETURN(Tensor bt, Tensor::zeros(cur->dtype(), {channels}));
      for (int64_t i = 0; i < channels; ++i) bt.set_f64(i, (*new_bias)[i]);
      inputs[2] = g.add_initializer(unique_value_name(g, layer.name().empty() ? "fused_bias" : layer.name() + "_bias"), bt);
      if (gemm) attrs.set_float("beta", 1.0f);
    }
    if (transposed) attrs.set_int("transposed", 1);
    if (!conv && !gemm) attrs.set_string("kind", "matmul");
    if (gemm) attrs.set_string("kind", "gemm");
    if (residual) inputs.push_back(residual);
    while (inputs.size() > 2 && !inputs.back()) inputs.pop_back();
    INGOT_ASSIGN_OR_RETURN(ir::Node* fused,
                           fusion::replace_with_fused(g, conv ? "FusedConv" : "FusedGemm", kIngotDomain, inputs,
                                                      std::move(attrs), layer.name(), cur, absorbed));
    (void)fused;
    return true;
  }
};

}  // namespace

std::unique_ptr<passes::Pass> make_fuse_conv_gemm() { return std::make_unique<FuseConvGemm>(); }

}  // namespace ingot::passes
