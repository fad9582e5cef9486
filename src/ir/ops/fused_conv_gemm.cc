// Copyright ingot authors. Apache-2.0.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_fused_conv_gemm_ops(OpRegistry& r) { (void)r; }

}  // namespace ingot::ir
