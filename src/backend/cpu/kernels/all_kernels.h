// Copyright ingot authors. Apache-2.0.
//
// One registration function per kernel family; all_kernels.cc calls them all.
#pragma once

#include "backend/cpu/kernel.h"

namespace ingot::cpu {

void register_elementwise_kernels(KernelRegistry& r);
void register_reduction_kernels(KernelRegistry& r);
void register_nn_kernels(KernelRegistry& r);
void register_quant_kernels(KernelRegistry& r);
void register_tensor_kernels(KernelRegistry& r);
void register_attention_kernels(KernelRegistry& r);
void register_image_kernels(KernelRegistry& r);
void register_rnn_kernels(KernelRegistry& r);
void register_fused_kernels(KernelRegistry& r);
void register_control_flow_kernels(KernelRegistry& r);
void register_misc_kernels(KernelRegistry& r);

void register_all_kernels(KernelRegistry& r);

}  // namespace ingot::cpu
