// Copyright ingot authors. Apache-2.0.
//
// Fusion follows the backend: the optimizer fuses a layer's epilogue (bias, activation,
// residual) into one ingot::FusedConv / ingot::FusedGemm without knowing which backend will run
// it, and a backend may lack a kernel for that exact form (a GPU convolution with a HardSwish or
// SiLU epilogue, say). Running such a node on the host fallback would cost a round trip to the
// CPU on every run and rule out CUDA graphs, so the builder splits it back instead: the layer
// keeps the part of its epilogue the backend runs fused (the bias; the residual when it is added
// before the activation), and the rest becomes plain elementwise ONNX ops after it (the
// activation, a residual Add), which the layout pass can move through and fuse_pointwise then
// gathers into one ingot::Pointwise kernel.
//
// Refuses (leaves the node as it is, so the build reports it on the host): a node whose every
// reduced form the backend also lacks, and every node on a host backend (there the reference
// kernels run every form).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/tactic.h"
#include "core/status.h"
#include "ir/graph.h"

namespace ingot::builder {

struct SplitReport {
  int split = 0;                   ///< fused nodes split back
  std::vector<std::string> notes;  ///< one per split node: what it kept and what it moved out
};

/// Whether `be` offers a tactic for `n` that is not the host fallback: at its current types, or,
/// when `reduced` is fp16/bf16, with its float inputs and output in that type (what precision
/// lowering would make of it).
bool has_device_tactic(const backend::Backend& be, const ir::Node& n, DataType reduced = DataType::kUndefined);

/// Asks `ask` about the channels-last twin of 2-D ingot::FusedConv or QuantConv `n` (NHWC X, residual and Y,
/// KRSC W, channels_last = 1: the form the layout pass gives it), a stand-in node added to `g` for
/// the question and removed again; false for any other node. cuDNN fuses SiLU and its other
/// runtime-compiled epilogues only channels-last, so the split-back and precision passes, which run
/// before the layout pass, ask about both forms (session 16: asking about the channels-first node
/// alone split EfficientNet's 17 SiLU convs, 0.7 ms of batch 64's 3.8 ms).
bool ask_channels_last_twin(ir::Graph& g, const ir::Node& n, const std::function<bool(const ir::Node&)>& ask);

/// Splits every FusedConv / FusedGemm of `g` that `be` would run only on its host fallback, and
/// every QuantGemm / QuantConv it has no device tactic for (into DequantizeLinear and the float
/// layer: MatMul and its epilogue ops, or a FusedConv split further as needed), and every
/// LayerNormQuantize it has no device tactic for (into the norm and a QuantizeLinear). The
/// builder calls it before precision lowering with the reduced type it may lower to (so a layer
/// whose fused form runs only in fp16 is kept, and one the backend lacks in every type is split
/// before the precision pass decides its type), and again after it at the final types. The
/// split-out ops are plain ONNX ops; run fuse_pointwise afterwards to merge them.
/// `channels_last`: also keep a 2-D FusedConv / QuantConv the backend runs only channels-last (the layout pass
/// may yet make it so); the builder then calls this again after the layout pass, without it.
Status split_host_fusions(ir::Graph& g, const backend::Backend& be, SplitReport* report,
                          DataType reduced = DataType::kUndefined, bool channels_last = false);

}  // namespace ingot::builder
