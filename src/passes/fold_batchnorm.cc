// Copyright ingot authors. Apache-2.0.
//
// fold_batchnorm: folds an inference-mode per-channel affine transform into the weights of the
// layer before it, so the transform costs nothing at run time.
//
// Matches
//   BatchNormalization(Conv | ConvTranspose | Gemm (X, W [, B]))   with constant W, optional
//       constant B, constant scale/B/mean/var, and the layer's output read only by the BN;
//   Mul(Conv(X, W [, B]), s) and Add(Conv(X, W [, B]), b)            with s, b constants that
//       broadcast per output channel ([M], [M,1,1], [1,M,1,1], or a single value).
// Produces the same layer with W' = W·k and B' = (B − mean)·k + β (k = γ/√(var+ε) per output
// channel) as new initializers, taking over the folded node's output name.
// A BatchNormalization no layer takes (after a Concat, a pooling, an input) becomes Mul + Add
// by per-channel constants, which fuse with what follows.
// Refuses (with a note): non-constant weights or statistics, a layer output read by other
// nodes too (they need the unfolded value), training mode (BN with extra outputs or
// training_mode=1), Gemm with transposed layouts it cannot scale (none: both are handled) or a
// C that does not broadcast to [N].
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"

namespace ingot::passes {

std::unique_ptr<passes::Pass> make_fold_batchnorm();

namespace {

using fusion::is_onnx_op;

constexpr const char* kName = "fold_batchnorm";

// Per output channel multiplier k and offset c: the layer's output y becomes y·k + c.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

// An inference BatchNormalization's constant statistics as y = x·k + c per channel (k = γ/√(var+ε),
// c = β − mean·k); empty when a statistic is not a constant of `channels` values.
ChannelAffine batchnorm_affine(const ir::Node& bn, int64_t channels) {
  std::vector<std::vector<double>> p;
  for (size_t i = 1; i < 5; ++i) {
    const ir::Value* v = bn.input(i);
    if (!v || !v->initializer() || v->initializer()->numel() != channels) return {};
    p.push_back(v->initializer()->to_f64_vector());
  }
  const double eps = bn.attrs().get_float("epsilon", 1e-5f);
  ChannelAffine aff;
  for (int64_t c = 0; c < channels; ++c) {
    const double k = p[0][c] / std::sqrt(p[3][c] + eps);
    aff.scale.push_back(k);
    aff.shift.push_back(p[1][c] - p[2][c] * k);
  }
  return aff;
}

// Reads a constant that broadcasts per channel against an output of rank `rank` with channel
// axis `axis` and `channels` channels; empty on mismatch.
std::vector<double> per_channel(const Tensor& t, size_t rank, size_t axis, int64_t channels) {
  if (t.rank() > rank) return {};
  if (t.numel() == 1) return std::vector<double>(channels, t.get_f64(0));
  size_t offset = rank - t.rank();
  for (size_t i = 0; i < t.rank(); ++i) {
    int64_t want = i + offset == axis ? channels : 1;
    if (t.dim(i) != want) return {};
  }
  std::vector<double> v(channels);
  for (int64_t c = 0; c < channels; ++c) v[c] = t.get_f64(c);
  return v;
}

class FoldBatchNorm final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(ir::Graph& g, PassContext& ctx) override {
    bool changed = false;
    refusals_.clear();
    for (bool again = true; again;) {
      again = false;
      for (const auto& up : g.nodes()) {
        ir::Node* n = up.get();
        INGOT_ASSIGN_OR_RETURN(bool done, try_fold(g, *n));
        if (done) {
          again = changed = true;
          break;  // the node list changed
        }
      }
    }
    // What no layer took: inference BatchNormalization becomes x·k + c with per-channel constants
    // (TensorRT's scale layer), elementwise ops every backend runs and fuse_pointwise merges with
    // the activation after it (DenseNet's pre-activation BN -> Relu -> Conv).
    std::vector<ir::Node*> standalone;
    for (const auto& up : g.nodes())
      if (is_onnx_op(*up, "BatchNormalization")) standalone.push_back(up.get());
    for (ir::Node* bn : standalone) {
      const std::string what = bn->describe();  // bn is gone once rewritten
      INGOT_ASSIGN_OR_RETURN(bool done, to_scale_shift(g, *bn));
      if (!done) continue;
      changed = true;
      refusals_.push_back(what + " runs as a per-channel scale and shift (Mul, Add): no layer before it to fold into");
    }
    // The scan restarts after every fold, so a refusal is seen several times: report it once.
    for (const std::string& r : refusals_) ctx.note(kName, r);
    return changed;
  }

 private:
  std::vector<std::string> refusals_;

  // BatchNormalization(X, scale, B, mean, var) in inference mode with constant parameters and a
  // known channel count -> Add(Mul(X, k), c), k = scale/sqrt(var + eps) and c = B - mean·k shaped
  // [C, 1, ...] to broadcast along axis 1. Refuses (leaves the node) anything else.
  Result<bool> to_scale_shift(ir::Graph& g, ir::Node& bn) {
    ir::Value* x = bn.input(0);
    if (!x || !is_float(x->dtype()) || !x->shape().rank_known() || x->shape().rank() < 2) return false;
    if (bn.attrs().get_int("training_mode", 0) != 0) return false;
    for (size_t i = 1; i < bn.outputs().size(); ++i)
      if (bn.output(i)) return false;
    if (!x->shape()[1].is_known()) return false;
    const int64_t channels = x->shape()[1].value();
    const ChannelAffine aff = batchnorm_affine(bn, channels);
    if (aff.scale.empty() && channels > 0) return false;
    Shape64 shape(x->shape().rank() - 1, 1);
    shape[0] = channels;
    INGOT_ASSIGN_OR_RETURN(Tensor k, Tensor::zeros(x->dtype(), shape));
    INGOT_ASSIGN_OR_RETURN(Tensor c, Tensor::zeros(x->dtype(), shape));
    for (int64_t i = 0; i < channels; ++i) {
      k.set_f64(i, aff.scale[i]);
      c.set_f64(i, aff.shift[i]);
    }
    const std::string base = bn.name().empty() ? "batchnorm" : bn.name();
    ir::Value* kv = g.add_initializer(unique_value_name(g, base + "_scale"), std::move(k));
    ir::Value* cv = g.add_initializer(unique_value_name(g, base + "_shift"), std::move(c));
    ir::Value* scaled = g.add_value(unique_value_name(g, base + "_scaled"), x->dtype(), x->shape());
    ir::Node* mul = g.add_node("Mul", {x, kv}, {scaled}, {}, base + "/scale");
    mul->add_origin(bn.name());
    INGOT_ASSIGN_OR_RETURN(ir::Node* add, fusion::replace_with_fused(g, "Add", "", {scaled, cv}, {}, base + "/shift",
                                                                    bn.output(0), {&bn}));
    (void)add;
    return true;
  }

  // Folds `post` into the layer producing its input when it can; records why not otherwise.
  Result<bool> try_fold(ir::Graph& g, ir::Node& post) {
    bool is_bn = is_onnx_op(post, "BatchNormalization");
    bool is_mul = is_onnx_op(post, "Mul"), is_add = is_onnx_op(post, "Add");
    if (!is_bn && !is_mul && !is_add) return false;
    ir::Value* x = post.input(0);
    ir::Value* other = is_bn ? nullptr : fusion::other_operand(post, x);
    if (!is_bn && (!other || !other->initializer())) {
      // Either operand may be the layer output.
      x = post.input(1);
      other = fusion::other_operand(post, x);
      if (!other || !other->initializer()) return false;
    }
    ir::Node* layer = x ? x->producer() : nullptr;
    if (!layer || layer->owner() != &g) return false;
    bool conv = is_onnx_op(*layer, "Conv"), convt = is_onnx_op(*layer, "ConvTranspose");
    bool gemm = is_onnx_op(*layer, "Gemm");
    if (!(conv || (is_bn && (convt || gemm)))) return false;
    std::string what = post.describe() + " into " + layer->describe();
    auto refuse = [&](const std::string& why) -> Result<bool> {
      if (std::find(refusals_.begin(), refusals_.end(), "refused " + what + ": " + why) == refusals_.end())
        refusals_.push_back("refused " + what + ": " + why);
      return false;
    };
    if (is_bn) {
      if (post.attrs().get_int("training_mode", 0) != 0) return refuse("training mode");
      for (size_t i = 1; i < post.outputs().size(); ++i)
        if (post.output(i)) return refuse("training mode (running statistics are outputs)");
      for (size_t i = 1; i < 5; ++i)
        if (!post.input(i) || !post.input(i)->initializer()) return refuse("statistics are not constant");
    }
    if (fusion::single_consumer(g, x) != &post) return refuse("the layer output has other readers");
    ir::Value* w = layer->input(1);
    ir::Value* b = layer->input(2);
    if (!w || !w->initializer()) return refuse("weights are not constant");
    if (b && !b->initializer()) return refuse("bias is not constant");
    const Tensor& wt = *w->initializer();
    if (!is_float(wt.dtype()) || wt.rank() < 2) return refuse("weights are not a float tensor of rank >= 2");
    int64_t group = layer->attrs().get_int("group", 1);
    bool trans_b = layer->attrs().get_int("transB", 0) != 0;
    int64_t channels = conv ? wt.dim(0) : convt ? wt.dim(1) * group : trans_b ? wt.dim(0) : wt.dim(1);

    ChannelAffine aff;
    if (is_bn) {
      for (size_t i = 1; i < 5; ++i) {
        const Tensor& t = *post.input(i)->initializer();
        if (t.numel() != channels) return refuse("statistics have " + std::to_string(t.numel()) + " values, layer has " + std::to_string(channels) + " channels");
      }
      aff = batchnorm_affine(post, channels);
    } else {
      if (!x->shape().rank_known() || x->shape().rank() < 3) return refuse("output rank unknown");
      std::vector<double> v = per_channel(*other->initializer(), x->shape().rank(), 1, channels);
      if (v.empty()) return refuse("constant is not per output channel");
      if (other->dtype() != x->dtype()) return refuse("constant dtype differs");
      aff.scale.assign(channels, 1.0);
      aff.shift.assign(channels, 0.0);
      (is_mul ? aff.scale : aff.shift) = v;
    }

    // New weights: scale every element by its output channel's k.
    INGOT_ASSIGN_OR_RETURN(Tensor nw, Tensor::zeros(wt.dtype(), wt.shape()));
    Shape64 st = shape_strides(wt.shape());
    for (int64_t i = 0; i < wt.numel(); ++i) {
      int64_t d0 = i / st[0], d1 = (i / st[1]) % wt.dim(1);
      int64_t oc = conv ? d0 : convt ? (d0 / (wt.dim(0) / group)) * wt.dim(1) + d1 : trans_b ? d0 : d1;
      nw.set_f64(i, wt.get_f64(i) * aff.scale[oc]);
    }
    ir::Attributes attrs = layer->attrs();
    // New bias: (B·k + shift). Gemm's bias is beta·C broadcast to [M, N]; it must be per column.
    std::vector<double> old_bias(channels, 0.0);
    if (b) {
      const Tensor& bt = *b->initializer();
      std::vector<double> v = gemm ? per_channel(bt, 2, 1, channels) : per_channel(bt, 1, 0, channels);
      if (v.empty()) return refuse("bias is not per output channel");
      double beta = gemm ? layer->attrs().get_float("beta", 1.0f) : 1.0;
      for (int64_t c = 0; c < channels; ++c) old_bias[c] = beta * v[c];
    }
    if (gemm) attrs.set_float("beta", 1.0f);
    INGOT_ASSIGN_OR_RETURN(Tensor nb, Tensor::zeros(wt.dtype(), {channels}));
    for (int64_t c = 0; c < channels; ++c) nb.set_f64(c, old_bias[c] * aff.scale[c] + aff.shift[c]);

    // A second fold of the same layer reuses the base name: w_folded, w_folded_1, ...
    auto folded_name = [&g](const std::string& base) {
      const std::string suffix = "_folded";
      bool has = base.size() >= suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0;
      return unique_value_name(g, has ? base : base + suffix);
    };
    ir::Value* nwv = g.add_initializer(folded_name(w->name()), nw);
    ir::Value* nbv = g.add_initializer(folded_name(b ? b->name() : layer->name() + "_bias"), nb);
    // Keep the layer's identity (name, origins) and add the folded node's.
    std::vector<ir::Node*> absorbed{layer, &post};
    INGOT_ASSIGN_OR_RETURN(ir::Node* fused, fusion::replace_with_fused(g, layer->op_type(), layer->domain(),
                                                                      {layer->input(0), nwv, nbv}, attrs, layer->name(),
                                                                      post.output(0), absorbed));
    (void)fused;
    return true;
  }
};

}  // namespace

std::unique_ptr<passes::Pass> make_fold_batchnorm() { return std::make_unique<FoldBatchNorm>(); }

}  // namespace ingot::passes
