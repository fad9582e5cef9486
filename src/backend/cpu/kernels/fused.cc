// Copyright ingot authors. Apache-2.0.
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_fused_conv_gemm_kernels(KernelRegistry& r);  // fused_conv_gemm.cc
void register_fused_pattern_kernels(KernelRegistry& r);    // fused_pattern.cc

void register_fused_kernels(KernelRegistry& r) {
  register_fused_conv_gemm_kernels(r);
  register_fused_pattern_kernels(r);
}

}  // namespace ingot::cpu
