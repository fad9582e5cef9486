// Copyright ingot authors. Apache-2.0.
//
// The activation a fused layer's epilogue takes in: one matcher for every pass that forms a layer
// with an `activation` attribute (fuse_conv_gemm's FusedConv / FusedGemm, fuse_quant_gemm's
// QuantGemm / QuantConv), so they accept the same activations under the same names, and the
// reference kernels (backend/cpu/kernel_util.h apply_activation), the CUDA epilogues and the
// builder's split-back (builder/split_fusions.cc) read one vocabulary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ingot::passes {

/// An activation reading a layer's result, as a fused epilogue names it.
struct ActivationMatch {
  /// Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSwish, HardSigmoid, Gelu (erf), GeluTanh, Silu.
  std::string name;
  /// Clip: {min, max} (+-inf where absent); LeakyRelu: {alpha}; HardSigmoid: {alpha, beta}.
  std::vector<float> params;
  std::vector<ir::Node*> nodes;  ///< the nodes it absorbs, in order (two for SiLU written out)
  ir::Value* out = nullptr;      ///< the activation's result
};

/// The activation that is the only reader of `v` in `g` (`v` not a graph output): an ai.onnx
/// Relu, Sigmoid, Tanh, HardSwish, LeakyRelu, HardSigmoid, Gelu (approximate none or tanh), Clip
/// with constant bounds (attributes below opset 11), ingot::Gelu / ingot::Silu, or SiLU written
/// out as Mul(v, Sigmoid(v)). std::nullopt for anything else.
std::optional<ActivationMatch> match_activation(const ir::Graph& g, ir::Value* v);

}  // namespace ingot::passes
