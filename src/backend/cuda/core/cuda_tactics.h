// Copyright ingot authors. Apache-2.0.
//
// How CUDA tactic families plug into the cuda backend. The backend is one folder per op family
// (gemm/, conv/, attention/, pointwise/, norm/, pool/, reduce/, data_movement/, resize/, topk/,
// quant/) beside core/ (the backend itself, checks, device facts, plan cache, timing kernels).
// In a family's folder, <family>_tactics.cc holds the Tactic classes (host side) and
// <family>_kernels.cu the device code with a plain C++ launcher; each family exposes one
// TacticFamily. The backend asks every family for candidates, in order; the
// builder keeps the first supported one (autotuning across candidates comes next).
//
// Contract for a CUDA Tactic's enqueue (see backend/tactic.h, StepIO):
//  - every Tensor in io.inputs / *io.outputs is a view whose raw() is a DEVICE pointer (never
//    dereference it on the host); dtype and shape are the current ones;
//  - io.stream is the cudaStream_t to launch on; no host synchronization, no allocation;
//  - io.workspace is a device buffer of at least workspace_bytes() at the max shapes;
//  - check every launch (INGOT_CUDA_CHECK / cudaGetLastError) and return a Status naming the
//    node on failure.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "backend/tactic.h"

namespace ingot::backend::cuda {

/// The kernels' float type for a tensor dtype; false for anything but f32/f16/bf16.
inline bool to_float_type(DataType t, FloatType* out) {
  switch (t) {
    case DataType::kFloat32: *out = FloatType::kF32; return true;
    case DataType::kFloat16: *out = FloatType::kF16; return true;
    case DataType::kBFloat16: *out = FloatType::kBF16; return true;
    default: return false;
  }
}

struct TacticFamily {
  std::string name;  ///< e.g. "elementwise"; tactic names start with "cuda.<name>."
  /// Candidates for a node (empty when the family does not handle it).
  std::function<std::vector<std::unique_ptr<Tactic>>(const ir::Node&, const std::vector<ir::TensorType>&)> candidates;
  /// Rebuilds a tactic from its name and params (nullptr when the name is not this family's).
  std::function<std::unique_ptr<Tactic>(const std::string& name, const std::vector<uint8_t>& params)> create;
};

TacticFamily pointwise_family();    // pointwise_tactics.cc: ingot::Pointwise (NVRTC-generated kernels)
TacticFamily elementwise_family();  // elementwise_tactics.cc: pointwise ops, Softmax, LayerNorm, Transpose
TacticFamily cublaslt_family();     // cublaslt_tactics.cc: MatMul, Gemm, ingot::FusedGemm
TacticFamily cublaslt_conv_family(); // cublaslt_tactics.cc: 1x1 stride-1 channels-last ingot::FusedConv as one GEMM
TacticFamily quant_gemm_family();   // quant_gemm_tactics.cc: ingot::QuantGemm (int8, fp8) through cuBLASLt and CUTLASS; 1x1 int8 QuantConvs through CUTLASS
TacticFamily attention_family();    // attention_tactics.cc: Attention, ingot::Attention
TacticFamily pool_family();          // pool_tactics.cc: MaxPool, AveragePool, GlobalMax/AveragePool
TacticFamily reduce_family();        // reduce_tactics.cc: Reduce*, ArgMax, ArgMin
TacticFamily data_movement_family(); // data_movement_tactics.cc: Reshape..Shape, Concat, Slice, Gather, Pad, ...
TacticFamily norm_family();          // norm_tactics.cc: RMSNormalization, GroupNormalization
TacticFamily rotary_family();        // pointwise/rotary_tactics.cc: ingot::RotaryEmbedding
TacticFamily swiglu_family();        // pointwise/swiglu_tactics.cc: ingot::SwiGLU
TacticFamily quant_family();         // quant_tactics.cc: QuantizeLinear, DequantizeLinear (int8/uint8/fp8 e4m3fn)
TacticFamily resize_family();        // resize_tactics.cc: Resize (nearest, linear, cubic)
TacticFamily topk_family();          // topk_tactics.cc: TopK
TacticFamily depthwise_conv_family(); // conv/depthwise_conv_tactics.cc: depthwise Conv / FusedConv, any activation
TacticFamily small_channel_conv_family(); // conv/small_channel_conv_tactics.cc: channels-last FusedConv with C <= 4 (stems)
TacticFamily stem_pool_conv_family();     // conv/stem_pool_conv_tactics.cc: ingot::FusedConvPool (ResNet's stem + max pool)
TacticFamily pixel_conv_family();         // conv/pixel_conv_tactics.cc: 1x1 Conv / FusedConv on one pixel (squeeze-excite FCs)
TacticFamily squeeze_excite_family();     // pool/squeeze_excite_tactics.cc: ingot::SqueezeExcite (pool, FC1, FC2, scale)
TacticFamily grouped_conv_family();       // conv/grouped_conv_tactics.cc: channels-last grouped FusedConv, widths 2-64
#ifdef INGOT_WITH_CUDNN
TacticFamily cudnn_conv_family();   // cudnn_conv_tactics.cc: Conv, ingot::FusedConv (legacy API)
#endif
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
TacticFamily cudnn_graph_conv_family();  // cudnn_graph_conv_tactics.cc: the same through the graph API
/// Plans the graph-API convolutions took from engines (deserialized, not built) in this process.
int64_t cudnn_graph_conv_plans_deserialized();
TacticFamily cudnn_quant_conv_family();  // conv/cudnn_quant_conv_tactics.cc: channels-last int8 / fp8 ingot::QuantConv
/// Plans the QuantConv family took from engines (deserialized, not built) in this process.
int64_t cudnn_quant_conv_plans_deserialized();
TacticFamily cudnn_sdpa_family();        // cudnn_sdpa_tactics.cc: Attention through cuDNN's fused SDPA
TacticFamily cudnn_matmul_family();      // cudnn_matmul_tactics.cc: FusedGemm with exact Gelu as one cuDNN graph
#endif
#ifdef INGOT_WITH_CUTLASS
TacticFamily cutlass_gemm_family();      // cutlass_gemm_tactics.cc: FusedGemm with bias (+ exact Gelu) as one CUTLASS sm90 kernel
#endif

}  // namespace ingot::backend::cuda
