// Copyright ingot authors. Apache-2.0.
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_fused_pattern_kernels(KernelRegistry& r) { (void)r; }

}  // namespace ingot::cpu
