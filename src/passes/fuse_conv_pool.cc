// Copyright ingot authors. Apache-2.0.
//
// fuse_conv_pool: a CNN stem's max pooling and the convolution before it as one ingot::FusedConvPool.
//
//   c = ingot::FusedConv(X, W, [B]) {2-D, activation}
//   y = ingot::Pool(c) {mode "max", the conv's channels_last}   (or MaxPool(c) after a channels-first conv)
// becomes
//   y = ingot::FusedConvPool(X, W, [B]) {the conv's attributes, pool_kernel_shape, pool_strides, pool_pads,
//                                        pool_dilations, pool_ceil_mode}
//
// ResNet, ResNeXt, DenseNet and FCN-ResNet open with Conv 7x7/2 + BN + ReLU then MaxPool 3x3/2 pad 1; at
// batch 64 the conv's output (64 x 64 x 112 x 112 fp16, 102 MB) is written once and read back once only to
// be pooled to a quarter of its size. The CUDA tactic pools in the convolution's epilogue, so that tensor
// never reaches memory.
//
// The builder runs this after its layout pass (the layout pass turns a MaxPool in a channels-last region
// into ingot::Pool {channels_last = 1}, so conv and pool then share a layout) and passes `runs`: the pair
// becomes one node only where the backend has a tactic for that exact node (and, timed, no slower than the
// two steps: builder/timed_fusions.cc). Refused (noted): a conv output read elsewhere or a graph output (it
// would have to be written after all), a residual input (the pool would have to read the residual sum, which
// the op does not state), ConvTranspose, other than 4-D tensors, a pool auto_pad other than NOTSET (the op
// takes explicit pads, and SAME pads depend on the conv's output size), MaxPool's Indices output or
// storage_order, pool attributes the op has no counterpart for, a layout or type that differs between the
// two. Average pooling is not matched.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/fused_conv_pool.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "fuse_conv_pool";

bool is_onnx(const Node* n, const char* op) { return n && n->domain().empty() && n->op_type() == op; }
bool is_ingot(const Node* n, const char* op) { return n && n->domain() == kIngotDomain && n->op_type() == op; }

// A max pooling this pass may absorb: ONNX MaxPool or ingot::Pool {mode "max"}, one input.
bool is_max_pool(const Node* n) {
  if (!n || n->inputs().size() != 1 || !n->input(0) || n->outputs().empty() || !n->output(0)) return false;
  if (is_onnx(n, "MaxPool")) return true;
  return is_ingot(n, "Pool") && n->attrs().get_string("mode", "") == "max";
}

// FusedConv attributes FusedConvPool does not take: the layer is never transposed and has no residual.
bool is_dropped_conv_attr(const std::string& name) {
  return name == "transposed" || name == "output_padding" || name == "output_shape" ||
         name == "residual_before_activation";
}

class FuseConvPool final : public Pass {
 public:
  explicit FuseConvPool(FusionCheck runs) : runs_(std::move(runs)) {}
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> pools;
    for (const auto& n : g.nodes())
      if (is_max_pool(n.get())) pools.push_back(n.get());
    bool changed = false;
    for (Node* p : pools) {
      INGOT_ASSIGN_OR_RETURN(bool done, fuse(g, ctx, p));
      changed |= done;
    }
    if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());  // the fused nodes were appended
    return changed;
  }

 private:
  Result<bool> fuse(Graph& g, PassContext& ctx, Node* pool) {
    Value* c = pool->input(0);
    Node* conv = c->producer();
    if (!is_ingot(conv, "FusedConv") || conv->outputs().size() != 1) return false;
    // Found a convolution and its pooling; now what would stop them.
    const ir::Attributes& ca = conv->attrs();
    const int64_t cl = ca.get_int("channels_last", 0);
    const bool onnx_pool = is_onnx(pool, "MaxPool");
    if (onnx_pool) {
      const Value* indices = pool->output(1);
      if (indices && (!indices->uses().empty() || is_graph_output(g, indices)))
        return refuse(ctx, pool, "MaxPool's Indices output is used");
      if (pool->attrs().get_int("storage_order", 0) != 0) return refuse(ctx, pool, "storage_order is not 0");
    }
    if ((onnx_pool ? 0 : pool->attrs().get_int("channels_last", 0)) != cl)
      return refuse(ctx, pool, "the pooling's layout differs from the convolution's");
    if (ca.get_int("transposed", 0) != 0) return refuse(ctx, pool, "the convolution is transposed");
    if (conv->inputs().size() > 3 && conv->input(3)) return refuse(ctx, pool, "the convolution adds a residual");
    if (fusion::single_consumer(g, c) != pool || is_graph_output(g, c))
      return refuse(ctx, pool, "the convolution's output is read elsewhere");
    if (pool->attrs().get_string("auto_pad", "NOTSET") != "NOTSET")
      return refuse(ctx, pool, "the pooling's auto_pad is " + pool->attrs().get_string("auto_pad", ""));
    if (!c->shape().rank_known() || c->shape().rank() != 4) return refuse(ctx, pool, "the convolution is not 2-D");
    Value* out = pool->output(0);
    if (c->dtype() != out->dtype()) return refuse(ctx, pool, "mixed types");
    ir::Attributes attrs;
    for (const auto& [name, a] : ca.all())
      if (!is_dropped_conv_attr(name)) attrs.set(name, a);
    for (const auto& [name, a] : pool->attrs().all()) {
      if (const char* to = ir::fused_pool_attr(name))
        attrs.set(to, a);
      else if (name != "auto_pad" && name != "mode" && name != "channels_last" && name != "storage_order")
        return refuse(ctx, pool, "the pooling's attribute " + name + " has no counterpart");
    }
    if (!attrs.has("pool_kernel_shape")) return refuse(ctx, pool, "the pooling has no kernel_shape");
    std::vector<Value*> inputs = {conv->input(0), conv->input(1)};
    if (conv->inputs().size() > 2 && conv->input(2)) inputs.push_back(conv->input(2));
    Value* y = g.add_value(unique_value_name(g, out->name() + ".convpool", "."), out->dtype(), out->shape());
    Node* fused = g.add_node("FusedConvPool", inputs, {y}, std::move(attrs), pool->name(), kIngotDomain);
    std::string why;
    INGOT_ASSIGN_OR_RETURN(bool keep, fusion::keep_fused_node(g, fused, {conv, pool}, runs_, &why));
    if (!keep) return refuse(ctx, pool, why.empty() ? "the backend has no tactic for the fused node" : why);
    fused->absorb_origins(*conv);
    fused->absorb_origins(*pool);
    g.replace_all_uses(out, y);
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, {pool, conv}, kName));
    take_over_name(g, out, y);
    return true;
  }

  Result<bool> refuse(PassContext& ctx, const Node* pool, const std::string& why) {
    ctx.note(name(), refusal_note("convolution + max pooling", pool->op_type(), pool, why));
    return false;
  }

  FusionCheck runs_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_conv_pool(FusionCheck runs) { return std::make_unique<FuseConvPool>(std::move(runs)); }

}  // namespace ingot::passes
