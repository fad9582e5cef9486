// Copyright ingot authors. Apache-2.0.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_all_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_reduction_ops(r);
  register_nn_ops(r);
  register_quant_ops(r);
  register_tensor_ops(r);
  register_attention_ops(r);
  register_image_ops(r);
  register_rnn_ops(r);
  register_fused_ops(r);
  register_control_flow_ops(r);
  register_misc_ops(r);
}

}  // namespace ingot::ir
