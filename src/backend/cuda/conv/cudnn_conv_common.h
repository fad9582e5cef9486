// Copyright ingot authors. Apache-2.0.
//
// What the cuDNN convolution families share (cudnn_conv_tactics.cc: the legacy
// cudnnConvolutionForward API; cudnn_graph_conv_tactics.cc: the v9 graph API through
// cudnn-frontend; cudnn_quant_conv_tactics.cc: ingot::QuantConv through the graph API): which
// nodes they take and what the node asks for (ConvSpec), the type checks supports() makes, the
// concrete dims of a call (ConvKey), one cuDNN handle per thread, and the cuDNN error check.
//
// Semantics (see ir/ops/fused_conv_gemm.cc): y = act(conv(x, w) + b + r), act any FusedConv
// activation (the legacy family takes "" and Relu only), r the residual, added before the activation unless residual_before_activation = 0. FusedConv with
// channels_last = 1 has X/Y/R in NHWC and W in KRSC (2-D only).
#pragma once
#ifdef INGOT_WITH_CUDNN

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/tactic.h"
#include "core/status.h"

namespace ingot::backend::cuda {

#define INGOT_CUDNN_CHECK(expr, node)                                                                          \
  do {                                                                                                         \
    cudnnStatus_t ingot_cudnn_st_ = (expr);                                                                    \
    if (ingot_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                               \
      return ::ingot::make_status(ingot_cudnn_st_ == CUDNN_STATUS_NOT_SUPPORTED ? StatusCode::kUnsupported    \
                                                                                : StatusCode::kInternal,      \
                                  (node).describe(), ": ", #expr, " failed: ",                                \
                                  cudnnGetErrorString(ingot_cudnn_st_));                                       \
  } while (0)

constexpr int kConvMaxNd = 5;  // N, C and up to 3 spatial dims

/// Conv (default domain) or ingot::FusedConv.
bool conv_handles_op(const ir::Node& n);

/// ingot::QuantConv (ir/ops/quant.cc): parse_conv_spec, check_conv_types, read_conv_call and
/// guessed_conv_key take it too (its bias is input 4, its residual input 5, added before the
/// activation), leaving its 8-bit and scale types to its own family (cudnn_quant_conv_tactics.cc).
bool is_quant_conv_op(const ir::Node& n);

/// What the node asks for, before shapes are known.
struct ConvSpec {
  int spatial = 0;  // 1, 2 or 3
  std::array<int, 3> pads{}, strides{}, dilations{};
  std::vector<int64_t> kernel_shape;  // empty: from W
  int64_t group = 1;
  bool relu = false;          // activation == "Relu"
  std::string activation;     // FusedConv's activation ("" none); the legacy family runs Relu only
  std::vector<float> activation_params;
  bool residual_after_activation = false;  // FusedConv residual_before_activation = 0 (with an activation)
  int bias_input = -1;      // input 2 when present (QuantConv: 4)
  int residual_input = -1;  // FusedConv's input 3 when present (QuantConv: 5)
  bool channels_last = false;  // FusedConv / QuantConv channels_last = 1: X/Y/R NHWC, W KRSC (2-D only)
};

/// `spatial` comes from X's rank (the attributes may all be defaulted). A residual added after
/// a Relu is accepted here; families that cannot run it refuse it themselves.
Result<ConvSpec> parse_conv_spec(const ir::Node& node, int spatial);

bool is_conv_dtype(DataType t);  // fp32, fp16, bf16

/// supports(): every decision that can be made from types, over every binding of symbolic dims.
/// For a QuantConv only the shapes (X, W, group, bias, residual): its types are its family's.
Status check_conv_types(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec_out = nullptr);

/// Channels-last dims in the channels-first order cuDNN's descriptors take ([N, H, W, C] ->
/// [N, C, H, W]; [K, R, S, C] -> [K, C, R, S]).
Shape64 to_channels_first(const Shape64& d);
ir::Shape to_channels_first(const ir::Shape& s);

/// Concrete dims of a call as cuDNN sees them (channels-first order): 1-D convs become 2-D
/// with a height of 1.
struct ConvKey {
  const ir::Node* node = nullptr;
  int nd = 0;
  std::array<int, kConvMaxNd> x{}, w{};
  bool bias = false, residual = false, channels_last = false;
  DataType dtype = DataType::kFloat32;
  /// The same call dims and types, whichever node (a plan serialized in an engine has none).
  bool same_call(const ConvKey& o) const {
    return nd == o.nd && x == o.x && w == o.w && bias == o.bias && residual == o.residual &&
           channels_last == o.channels_last && dtype == o.dtype;
  }
  bool operator==(const ConvKey& o) const { return node == o.node && same_call(o); }
};

/// x, w in channels-first order.
Result<ConvKey> make_conv_key(const ir::Node& node, const ConvSpec& s, DataType dtype, const Shape64& x,
                              const Shape64& w, bool bias, bool residual);

/// A step's tensors as the families' enqueue reads them, checked: X, W, the optional bias and
/// residual, the output, and the call's key (channels-first dims; its dtype the output's, a
/// QuantConv's X's, whose tensors may each have their own type).
struct ConvCall {
  ConvSpec spec;
  const Tensor *x = nullptr, *w = nullptr, *b = nullptr, *r = nullptr;
  Tensor* y = nullptr;
  Shape64 ys;  // y's dims in channels-first order
  ConvKey key;
  bool empty = false;  // the output has no elements: nothing to launch (key not set)
};
Result<ConvCall> read_conv_call(const StepIO& io);

/// Whether the output the plan computes (`plan_y`, cuDNN's nd dims) is the view the step was
/// given (1-D convs: the inserted H = 1 is skipped); an internal error naming both when not.
template <class Int>
Status check_conv_output(const ConvCall& c, const std::array<Int, kConvMaxNd>& plan_y) {
  bool same = c.ys.size() == c.x->shape().size();
  for (size_t i = 0, j = 0; same && i < static_cast<size_t>(c.key.nd); ++i) {
    if (c.spec.spatial == 1 && i == 2) continue;  // the inserted H = 1
    same = c.ys[j++] == static_cast<int64_t>(plan_y[i]);
  }
  if (same) return Status::Ok();
  return internal_error(c.key.node->describe(), ": output ", shape_to_string(c.y->shape()),
                        " differs from cuDNN's convolution output");
}

/// The key for a node's types with symbolic dims guessed (1 for the batch, 32 elsewhere): what
/// candidates() asks cuDNN about when choosing how many tactics to offer.
Result<ConvKey> guessed_conv_key(const ir::Node& node, const std::vector<ir::TensorType>& inputs, ConvSpec* spec_out);

/// Both families name their tactics "<prefix><i>", 0 <= i < count (one digit), with params
/// {1, i} (or none): i, or -1 when `name`/`params` are not such a tactic.
int conv_tactic_index(const std::string& name, const char* prefix, int count, const std::vector<uint8_t>& params);

/// One cuDNN handle per (thread, device), created on first use in that thread, so setting the
/// stream before each call never races with another thread. Never destroyed (a thread-exit
/// destructor could run after the CUDA runtime is torn down): a program that keeps starting new
/// threads that run convolutions leaks one handle per thread.
Result<cudnnHandle_t> cudnn_thread_handle(const ir::Node& node);


}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN
