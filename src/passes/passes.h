// Copyright ingot authors. Apache-2.0.
//
// Factories for every pass; each is defined in src/passes/<name>.cc. One line per pass, in
// pipeline order, so adding a pass is one line here and one in pipeline.cc.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ingot::passes {

// ---- cleanup and folding (run together to a fixed point) ----
std::unique_ptr<Pass> make_remove_noops();                    // remove_noops.cc
std::unique_ptr<Pass> make_fold_constants();                  // fold_constants.cc
std::unique_ptr<Pass> make_simplify_algebra();                // simplify_algebra.cc
std::unique_ptr<Pass> make_eliminate_common_subexpressions(); // eliminate_common_subexpressions.cc
std::unique_ptr<Pass> make_remove_dead_nodes();               // remove_dead_nodes.cc

// ---- pattern recognition ----
std::unique_ptr<Pass> make_lower_einsum();          // lower_einsum.cc
std::unique_ptr<Pass> make_recognize_layernorm();   // recognize_layernorm.cc
std::unique_ptr<Pass> make_recognize_rotary();      // recognize_rotary.cc
std::unique_ptr<Pass> make_recognize_gelu_silu();   // recognize_gelu_silu.cc
std::unique_ptr<Pass> make_recognize_softmax();     // recognize_softmax.cc
std::unique_ptr<Pass> make_recognize_attention();   // recognize_attention.cc
std::unique_ptr<Pass> make_narrow_attention_mask(); // narrow_attention_mask.cc

// ---- fusion ----
std::unique_ptr<Pass> make_fold_batchnorm();        // fold_batchnorm.cc
std::unique_ptr<Pass> make_lift_conv1d();           // lift_conv1d.cc
std::unique_ptr<Pass> make_lower_patchify_conv();   // lower_patchify_conv.cc
std::unique_ptr<Pass> make_fuse_conv_gemm();        // fuse_conv_gemm.cc
std::unique_ptr<Pass> make_fuse_qkv_projection();   // fuse_qkv_projection.cc
std::unique_ptr<Pass> make_fuse_gated_mlp();        // fuse_gated_mlp.cc
std::unique_ptr<Pass> make_attention_strided_views(); // attention_strided_views.cc
std::unique_ptr<Pass> make_pack_rotary_qkv();       // pack_rotary_qkv.cc
std::unique_ptr<Pass> make_fuse_pointwise();        // fuse_pointwise.cc
std::unique_ptr<Pass> make_fuse_quant_gemm();       // fuse_quant_gemm.cc
std::unique_ptr<Pass> make_fuse_norm_quantize();    // fuse_norm_quantize.cc
/// Whether a fused node (still in the graph) should replace `parts`; `why` says why not. An error stops the pass.
using FusionCheck =
    std::function<Result<bool>(const ir::Node& fused, const std::vector<const ir::Node*>& parts, std::string* why)>;
/// After the builder's layout pass (not in the pipeline): squeeze-excite blocks become one
/// ingot::SqueezeExcite where `runs` (the builder's: a device tactic, and measured no slower; empty: always)
/// accepts the node.
std::unique_ptr<Pass> make_fuse_squeeze_excite(FusionCheck runs = {});  // fuse_squeeze_excite.cc
/// After the builder's layout pass (not in the pipeline): an ingot::FusedConv (2-D, no residual) read only by a
/// max pooling (MaxPool, or ingot::Pool {mode "max"} in the conv's layout) becomes one ingot::FusedConvPool
/// where `runs` accepts the node (a CNN stem: the conv's output is then never written).
std::unique_ptr<Pass> make_fuse_conv_pool(FusionCheck runs = {});  // fuse_conv_pool.cc
/// After the builder's last fuse_pointwise (not in the pipeline): a Concat read only by a Pointwise over
/// the whole concatenated tensor moves into that Pointwise's body where `runs` accepts the fused node
/// (DenseNet's Concat + BatchNorm + Relu).
std::unique_ptr<Pass> make_fuse_concat_pointwise(FusionCheck runs = {});  // fuse_concat_pointwise.cc
/// Names of the passes the builder runs outside the pipeline (after its layout choice), which
/// --disable-pass also takes.
inline std::vector<const char*> builder_pass_names() {
  return {"fuse_squeeze_excite", "fuse_conv_pool", "fuse_concat_pointwise"};
}
/// A DequantizeLinear of a constant 8-bit weight that a MatMul/Gemm/Conv reads: fold_constants
/// keeps it for fuse_quant_gemm (which folds the ones it does not fuse).
bool keeps_quantized_weight(const ir::Node& n);

}  // namespace ingot::passes
