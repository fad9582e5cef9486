// Copyright ingot authors. Apache-2.0.
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_all_kernels(KernelRegistry& r) {
  register_elementwise_kernels(r);
  register_reduction_kernels(r);
  register_nn_kernels(r);
  register_quant_kernels(r);
  register_tensor_kernels(r);
  register_attention_kernels(r);
  register_image_kernels(r);
  register_rnn_kernels(r);
  register_fused_kernels(r);
  register_control_flow_kernels(r);
  register_misc_kernels(r);
}

}  // namespace ingot::cpu
