// Copyright ingot authors. Apache-2.0.
//
// fuse_squeeze_excite: a squeeze-excite block as one ingot::SqueezeExcite.
//
//   p = ReduceMean(x, spatial axes, keepdims)      (or GlobalAveragePool, channels-first)
//   h = FusedConv(p, W1, B1) {1x1, activation}      (ReLU / SiLU, or none)
//   g = FusedConv(h, W2, B2) {1x1, gate activation} (Sigmoid / HardSigmoid; or a plain Conv followed by
//                                                    a standalone Sigmoid / HardSigmoid)
//   y = Mul(x, g)                                   (either operand order)
// becomes
//   y = ingot::SqueezeExcite(x, W1, B1, W2, B2) {channels_last, activation, gate_activation}
//
// EfficientNet, MobileNetV3, RegNetY, EfficientNetV2 and MaxViT have one per block. Unfused, the block is
// five launches at batch 1 (a split pooling and its combine, two one-pixel convs of a few microseconds each
// that cuDNN runs as general convolutions, the broadcast Mul); the CUDA tactic runs it in three (pool
// partials; combine + FC1; FC2 + the scaling). The pooled means, the hidden layer and the gate stay fp32
// in the fused op where the unfused chain rounded each to the storage type.
//
// The builder runs this after its layout pass (the chain is then channels-last or channels-first as a
// whole: the FusedConvs' channels_last, the pooling's axes) and before it splits fused convolutions the
// backend cannot run, and passes `runs`: a block becomes one node only where the backend has a tactic for
// that exact node (and, timed, no slower than the steps it replaces: builder/timed_fusions.cc). Refused (noted): intermediate values read elsewhere, convolutions other than 1x1 with
// no padding, group or residual, non-constant weights, mixed types, layouts or pooling axes.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_squeeze_excite";

bool is_onnx(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }
bool is_ingot(const Node* n, const char* op) { return n && n->domain() == kIngotDomain && n->op_type() == op; }

// A 1x1 convolution of one pixel's channels: FusedConv (no residual) or Conv, group 1, not transposed, no
// padding, unit strides and dilations, a constant 4-D weight with 1x1 spatial dims. `channels_last` is set
// to the node's layout.
bool is_pixel_fc(const Node* n, int64_t* channels_last) {
  if (!n || !(is_ingot(n, "FusedConv") || is_onnx(n, "Conv")) || n->outputs().size() != 1) return false;
  if (n->inputs().size() < 2 || !n->input(0) || !n->input(1)) return false;
  if (n->inputs().size() > 3 && n->input(3)) return false;
  const ir::Attributes& a = n->attrs();
  if (a.get_int("group", 1) != 1 || a.get_int("transposed", 0) != 0 || a.get_string("auto_pad", "NOTSET") != "NOTSET")
    return false;
  for (int64_t p : a.get_ints("pads", {}))
    if (p != 0) return false;
  for (int64_t s : a.get_ints("strides", {}))
    if (s != 1) return false;
  const int64_t cl = a.get_int("channels_last", 0);
  const std::optional<Tensor> w = constant_value(n->input(1));
  if (!w || w->rank() != 4 || w->dim(cl ? 1 : 2) != 1 || w->dim(cl ? 2 : 3) != 1) return false;
  if (n->inputs().size() > 2 && n->input(2) && !constant_value(n->input(2))) return false;
  *channels_last = cl;
  return true;
}

// Whether `n` averages `x` over its spatial axes keeping them: ReduceMean over {1, 2} (channels-last)
// or {2, 3}, or GlobalAveragePool (channels-first).
bool is_spatial_mean(const Node* n, int64_t channels_last) {
  if (!n || n->outputs().size() != 1 || !n->input(0)) return false;
  if (is_onnx(n, "GlobalAveragePool")) return channels_last == 0;
  if (!is_onnx(n, "ReduceMean") || n->attrs().get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (n->inputs().size() > 1 && n->input(1)) {
    auto c = constant_ints(n->input(1));
    if (!c) return false;
    axes = *c;
  } else {
    axes = n->attrs().get_ints("axes", {});
  }
  if (axes.size() != 2) return false;
  for (int64_t& a : axes)
    if (a < 0) a += 4;
  std::sort(axes.begin(), axes.end());
  return channels_last ? axes == std::vector<int64_t>{1, 2} : axes == std::vector<int64_t>{2, 3};
}

class FuseSqueezeExcite final : public Pass {
 public:
  explicit FuseSqueezeExcite(FusionCheck runs) : runs_(std::move(runs)) {}
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> muls;
    for (const auto& n : g.nodes())
      if (is_onnx(n.get(), "Mul") && n->inputs().size() == 2 && n->outputs().size() == 1) muls.push_back(n.get());
    bool changed = false;
    for (Node* m : muls) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, ctx, m));
      changed |= done;
    }
    if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());  // the fused nodes were appended
    return changed;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* mul) {
    for (int side = 0; side < 2; ++side) {
      Value* x = mul->input(1 - side);
      Value* gate = mul->input(side);
      if (!x || !gate || x == gate) continue;
      // The gate's producer: FC2 with its activation, or a standalone Sigmoid / HardSigmoid of it.
      Node* act = gate->producer();
      Node* fc2 = act;
      std::string gate_act;
      std::vector<float> gate_params;
      if (is_onnx(act, "Sigmoid") || is_onnx(act, "HardSigmoid")) {
        fc2 = act->input(0) ? act->input(0)->producer() : nullptr;
        gate_act = act->op_type();
        if (gate_act == "HardSigmoid")
          gate_params = {act->attrs().get_float("alpha", 0.2f), act->attrs().get_float("beta", 0.5f)};
      } else {
        act = nullptr;
      }
      int64_t cl2 = 0, cl1 = 0;
      if (!is_pixel_fc(fc2, &cl2)) continue;
      Node* fc1 = fc2->input(0)->producer();
      if (!is_pixel_fc(fc1, &cl1) || cl1 != cl2) continue;
      Node* pool = fc1->input(0)->producer();
      if (!is_spatial_mean(pool, cl1) || pool->input(0) != x) continue;
      // Found the shape of a block; now what would stop it.
      if (act) {
        if (!fc2->attrs().get_string("activation", "").empty())
          return refuse(ctx, mul, "the second convolution has an activation before the gate's");
      } else {
        gate_act = fc2->attrs().get_string("activation", "");
        gate_params = fc2->attrs().get_floats("activation_params");
      }
      if (single_consumer(g, pool->output(0)) != fc1 || single_consumer(g, fc1->output(0)) != fc2 ||
          single_consumer(g, fc2->output(0)) != (act ? act : mul) || (act && single_consumer(g, gate) != mul) ||
          is_graph_output(g, pool->output(0)) || is_graph_output(g, fc1->output(0)) ||
          is_graph_output(g, fc2->output(0)) || (act && is_graph_output(g, gate)))
        return refuse(ctx, mul, "the pooling, a convolution or the gate is read elsewhere");
      const DataType t = x->dtype();
      for (const Value* v : {pool->output(0), fc1->output(0), fc2->output(0), gate, mul->output(0)})
        if (v->dtype() != t) return refuse(ctx, mul, "mixed types");
      const ir::Shape& xs = x->shape();
      if (!xs.rank_known() || xs.rank() != 4 || !xs[cl1 ? 3 : 1].is_known())
        return refuse(ctx, mul, "x is not 4-D with known channels");
      if (mul->output(0)->shape() != xs) return refuse(ctx, mul, "the gate broadcasts x to another shape");
      auto bias = [](Node* n) { return n->inputs().size() > 2 ? n->input(2) : nullptr; };
      ir::Attributes attrs;
      attrs.set_int("channels_last", cl1);
      attrs.set_string("activation", fc1->attrs().get_string("activation", ""));
      if (!fc1->attrs().get_floats("activation_params").empty())
        attrs.set_floats("activation_params", fc1->attrs().get_floats("activation_params"));
      attrs.set_string("gate_activation", gate_act);
      if (!gate_params.empty()) attrs.set_floats("gate_activation_params", gate_params);
      Value* out = mul->output(0);
      Value* y = g.add_value(unique_value_name(g, out->name() + ".se", "."), out->dtype(), out->shape());
      Node* se = g.add_node("SqueezeExcite", {x, fc1->input(1), bias(fc1), fc2->input(1), bias(fc2)}, {y},
                            std::move(attrs), mul->name(), kIngotDomain);
      std::vector<const Node*> parts = {pool, fc1, fc2};
      if (act) parts.push_back(act);
      parts.push_back(mul);
      std::string why;
      INGOT_ASSIGN_OR_RETURN(bool keep, fusion::keep_fused_node(g, se, parts, runs_, &why));
      if (!keep) return refuse(ctx, mul, why.empty() ? "the backend has no tactic for the fused block" : why);
      for (Node* n : {pool, fc1, fc2, act, mul})
        if (n) se->absorb_origins(*n);
      g.replace_all_uses(out, y);
      std::vector<Node*> gone = {mul};
      if (act) gone.push_back(act);
      gone.insert(gone.end(), {fc2, fc1, pool});
      INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, gone, kName));
      take_over_name(g, out, y);
      return true;
    }
    return false;
  }

  Result<bool> refuse(PassContext& ctx, const Node* mul, const std::string& why) {
    ctx.note(name(), refusal_note("squeeze-excite block", "Mul", mul, why));
    return false;
  }

  FusionCheck runs_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_squeeze_excite(FusionCheck runs) {
  return std::make_unique<FuseSqueezeExcite>(std::move(runs));
}

}  // namespace ingot::passes
