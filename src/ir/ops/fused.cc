// Copyright ingot authors. Apache-2.0.
//
// Ops that only the optimizer creates, in domain "ingot" (opset 1): fused Conv/Gemm with
// bias, activation and residual; fused pointwise subgraphs; recognised norms and attention.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_fused_conv_gemm_ops(OpRegistry& r);  // fused_conv_gemm.cc
void register_fused_pattern_ops(OpRegistry& r);    // fused_pattern.cc

void register_fused_ops(OpRegistry& r) {
  register_fused_conv_gemm_ops(r);
  register_fused_pattern_ops(r);
}

}  // namespace ingot::ir
