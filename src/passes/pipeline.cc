// Copyright ingot authors. Apache-2.0.
//
// The default optimization pipeline: the one list that says which passes run, in which order,
// and why there.
#include "passes/pass_manager.h"
#include "passes/passes.h"

namespace ingot::passes {

namespace {
std::vector<std::unique_ptr<Pass>> cleanup_group() {
  std::vector<std::unique_ptr<Pass>> v;
  v.push_back(make_remove_noops());
  v.push_back(make_fold_constants());
  v.push_back(make_simplify_algebra());
  v.push_back(make_eliminate_common_subexpressions());
  v.push_back(make_remove_dead_nodes());
  return v;
}
}  // namespace

PassManager default_pipeline() {
  PassManager pm;
  // 1. Cleanup and folding first, so later patterns see the real dataflow: Identity/Dropout
  //    and no-op Reshape/Transpose/Cast/... would otherwise sit between the nodes a pattern
  //    looks for. These feed each other (folding makes shapes known, which exposes no-ops;
  //    algebra leaves constant subexpressions; CSE and folding leave dead nodes), so they run
  //    together until none changes the graph; remove_dead_nodes ends each round.
  pm.add_fixed_point(cleanup_group());

  // 2. Pattern recognition before fusion: the decomposed LayerNorm / GELU / SiLU / attention
  //    forms are made of the very Add/Mul/Div/... nodes that bias-activation fusion and
  //    pointwise fusion would otherwise swallow piecemeal; and a recognised Gelu is what lets
  //    fuse_conv_gemm put GELU into a GEMM epilogue.
  //    Einsums that are batched matrix products become MatMuls first (MaxViT spells its
  //    attention with two), so GEMM tactics run them and attention recognition can see them.
  pm.add(make_lower_einsum());
  pm.add(make_recognize_layernorm());
  //    RoPE's rotate_half (Slice, Slice, Neg, Concat, then Mul/Mul/Add) as one op: otherwise
  //    fuse_pointwise takes the Mul/Mul/Add alone and the Slices and Concat stay copies of x.
  pm.add(make_recognize_rotary());
  pm.add(make_recognize_gelu_silu());
  //    Softmax before attention: a decomposed Exp/ReduceSum/Div softmax inside attention has
  //    to be one Softmax for recognize_attention to see the pattern.
  pm.add(make_recognize_softmax());
  pm.add(make_recognize_attention());
  //    The attention broadcasts its mask itself: the [B,1,S,S] copy exporters make of a
  //    [B,1,1,S] padding mask goes (before fuse_pointwise hides the Where that builds it).
  pm.add(make_narrow_attention_mask());

  // 3. Fusion. BatchNormalization folds into the preceding Conv/Gemm weights first, so that
  //    Conv -> BN -> Relu becomes Conv -> Relu and fuses into one FusedConv; conv/gemm
  //    epilogues (bias, activation, residual) next; pointwise chains last, so they do not take
  //    the bias/activation/residual Adds that belong in an epilogue.
  //    Explicitly quantized linear layers and convolutions (DequantizeLinear on both operands)
  //    first: fusing their bias and activation as float layers would lose the 8-bit operands.
  //    It folds a quantized conv's BatchNormalization into its per-channel scale itself (the
  //    8-bit weights cannot take it), so it runs before fold_batchnorm.
  pm.add(make_fuse_quant_gemm());
  //    A LayerNorm / RMSNorm then writes the 8-bit copy of its output that the next quantized GEMMs
  //    read, in the same kernel: the QuantizeLinear it fuses is in place by now in both routes
  //    (insert_qdq wrote it before the pipeline; an explicit Q/DQ model has it), recognize_layernorm
  //    has made the norm one node, and fuse_quant_gemm has just taken the DequantizeLinear after it.
  pm.add(make_fuse_norm_quantize());
  pm.add(make_fold_batchnorm());
  //    1-D convolutions as 2-D ones of height 1 (after BatchNorm folds into them, before their
  //    epilogues fuse), so channels-last regions and the 2-D conv kernels take them too.
  pm.add(make_lift_conv1d());
  //    Patch convolutions (kernel == stride: ViT's patch embedding, Swin's and ConvNeXt's stems)
  //    as a Transpose and a GEMM, before fuse_conv_gemm gives the GEMM its bias.
  pm.add(make_lower_patchify_conv());
  pm.add(make_fuse_conv_gemm());
  //    An attention's Q/K/V projections become one GEMM once each is a FusedGemm with its bias
  //    (they read one input; the packed attention reads the three thirds of its output).
  pm.add(make_fuse_qkv_projection());
  //    A gated MLP's gate and up projections become one GEMM the same way (they read one input;
  //    ingot::SwiGLU reads the two halves of its rows), before fuse_pointwise takes the
  //    SiLU and the product.
  pm.add(make_fuse_gated_mlp());
  //    The layout nodes left around an attention (head splits of packed projections, Gathers
  //    and Slices of a [.., 3, H, D] tensor, head merges) become strided views the attention
  //    reads and writes in place; after the packed form, which is already copy-free.
  pm.add(make_attention_strided_views());
  //    What the views leave behind (a head merge's Reshape gone, a Gemm between Reshapes now
  //    readable as a MatMul) is tidied, and the layers it exposes get their epilogues too.
  pm.add_fixed_point(cleanup_group());
  //    A rotary attention's Q, K and V (grouped-query heads, which fuse_qkv_projection leaves) as
  //    one GEMM and one rotation, the attention reading them through new views: after the views
  //    exist, and after the cleanup has made Q's and K's cos/sin tables one value each.
  pm.add(make_pack_rotary_qkv());
  pm.add(make_fuse_conv_gemm());
  pm.add(make_fuse_pointwise());

  // 4. The folds above leave their old weights behind: a last cleanup round drops them.
  pm.add_fixed_point(cleanup_group());
  return pm;
}

}  // namespace ingot::passes
