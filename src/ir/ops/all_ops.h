// Copyright ingot authors. Apache-2.0.
//
// One registration function per op family; all_ops.cc calls them all.
#pragma once

#include "ir/op_registry.h"

namespace ingot::ir {

void register_elementwise_ops(OpRegistry& r);   // ops/elementwise.cc: math, activations, logic, Cast
void register_reduction_ops(OpRegistry& r);     // ops/reduction.cc: Reduce*, ArgMax, Softmax, norms, CumSum
void register_nn_ops(OpRegistry& r);            // ops/nn.cc: MatMul, Gemm, Conv, pooling, Einsum, Attention
void register_quant_ops(OpRegistry& r);         // ops/quant.cc: Q/DQ, integer MatMul/Conv
void register_tensor_ops(OpRegistry& r);        // ops/tensor.cc: shape and data movement
void register_attention_ops(OpRegistry& r);     // ops/attention.cc: Attention, RotaryEmbedding, ...
void register_image_ops(OpRegistry& r);         // ops/image.cc: Resize, GridSample, RoiAlign, ...
void register_rnn_ops(OpRegistry& r);           // ops/rnn.cc: RNN, GRU, LSTM
void register_fused_ops(OpRegistry& r);         // ops/fused*.cc: ops the optimizer creates (domain "ingot")
void register_control_flow_ops(OpRegistry& r);  // ops/control_flow.cc: If, Loop, Scan
void register_misc_ops(OpRegistry& r);          // ops/misc.cc: losses, signal, sequences, ...

void register_all_ops(OpRegistry& r);

}  // namespace ingot::ir
