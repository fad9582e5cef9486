// Copyright ingot authors. Apache-2.0.
//
// Host side shared by the attention tactics (attention_tactics.cc: our flash and generic
// kernels; cudnn_sdpa_tactics.cc: cuDNN's fused SDPA): which nodes they take and the
// parameters of a step's current tensors.
#pragma once

#include <vector>

#include "backend/cuda/attention/attention_kernels.h"
#include "backend/tactic.h"

namespace ingot::backend::cuda {

/// Whether a node is an attention the CUDA tactics can take, apart from each kernel's own
/// limits: Q/K/V of one float type, no past key/value or extra outputs, an optional bool or
/// float mask of rank 1-4. Sets the (static) head size and the type.
bool attention_supports_node(const ir::Node& node, const std::vector<ir::TensorType>& in, int64_t* head_size,
                             FloatType* type);

/// Whether the node is ingot::Attention {qkv_packed = 1} (Q, K, V side by side in input 0).
bool attention_qkv_packed(const ir::Node& node);

/// The Q/K/V input types as an unpacked node has them: for ingot::Attention {qkv_packed = 1},
/// input 0's [B, S, 3*H*D] given as three [B, S, H*D] inputs; other nodes' types unchanged.
std::vector<ir::TensorType> unpacked_attention_inputs(const ir::Node& node, const std::vector<ir::TensorType>& in);

/// The kernel parameters for a step's current tensors, checking what shapes could get wrong.
Status make_attention_params(const ir::Node& node, const StepIO& io, AttentionParams* p);

}  // namespace ingot::backend::cuda
