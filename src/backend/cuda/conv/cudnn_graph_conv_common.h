// Copyright ingot authors. Apache-2.0.
//
// What the cuDNN graph-API convolution families share (cudnn_graph_conv_tactics.cc: Conv and
// ingot::FusedConv; cudnn_quant_conv_tactics.cc: ingot::QuantConv): the strides of a layout, the
// convolution's output dims, and the node's activation as cuDNN pointwise operations. Included
// only where INGOT_WITH_CUDNN_FRONTEND is defined (cudnn_frontend.h is heavy).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/core/cudnn_frontend_util.h"

namespace ingot::backend::cuda {

/// Strides of channels-first dims `d` stored packed channels-first, or channels-last (N, spatial..., C).
std::vector<int64_t> strides_for(const std::vector<int64_t>& d, bool channels_last);

/// Output dims of the convolution (channels-first, cuDNN's nd).
std::array<int64_t, kConvMaxNd> conv_output_dims(const ConvSpec& s, const ConvKey& k);

/// Whether add_activation has a form for the node's activation (its "activation" and
/// "activation_params" attributes). INGOT_CUDNN_CONV_ACTIVATIONS=relu leaves Relu alone.
bool activation_supported(const ir::Node& node);

/// act(y) as cuDNN pointwise operations, for s.activation (not empty) with s.activation_params.
Result<std::shared_ptr<cudnn_frontend::graph::Tensor_attributes>> add_activation(
    cudnn_frontend::graph::Graph& g, std::shared_ptr<cudnn_frontend::graph::Tensor_attributes> y, const ConvSpec& s,
    const ir::Node& node);

}  // namespace ingot::backend::cuda
