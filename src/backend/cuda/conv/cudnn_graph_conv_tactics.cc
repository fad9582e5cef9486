// Copyright ingot authors. Apache-2.0.
//
// cuDNN graph-API tactics (through cudnn-frontend) for Conv and ingot::FusedConv: one operation
// graph per call shape, conv_fprop followed by the node's epilogue as pointwise operations
// (+ bias, + residual, the activation, in the node's order), which cuDNN runs as one fused kernel where
// an engine offers it (on Hopper: the sm90 implicit-GEMM kernels with an epilogue, or a
// runtime-compiled fusion). This is the path to the tensor-core kernels the legacy
// cudnnConvolutionForward API (cudnn_conv_tactics.cc) does not reach at small batches: on the
// H200 it chose CUDA-core implicit_convolve_sgemm and Winograd kernels for ResNet-50 at batch 1.
//
// Layouts: NCHW (packed) or, for FusedConv channels_last = 1, NHWC activations with KRSC
// filters; both are given to cuDNN as channels-first dims with the layout's strides. 1-D convs
// become 2-D with a height of 1. fp16/bf16 run with fp32 accumulation and fp32 intermediates;
// fp32 refuses tensor-core engines (they would compute in TF32).
//
// "cuda.cudnn.graph.conv.<i>" runs the i-th execution plan of cuDNN's heuristics (mode A, then
// the fallback list) that builds at the call's shape, within kGraphConvWorkspaceBytes. Plans are
// built on a shape's first call and cached in the tactic (lookups take no lock). Execution passes
// the device pointers in ascending tensor-UID order (cudnn-frontend's variant-pack template), so a
// steady-state call allocates nothing on the host. That machinery is GraphConvTactic
// (cudnn_graph_conv_common.h), which the QuantConv family uses too; this file gives it the graph,
// its signature, the call's key and tensors, and the record's key bytes (FusedConvGraph).
//
// Build cost: a plan of a runtime-fusion engine is compiled (NVRTC) when built, ~0.1-1 s. One
// operation graph per distinct convolution is shared by the whole process (SharedGraph), so each
// plan builds once however many candidates (candidate i needs plans 0..i tried), layouts, steps
// and engines ask for it. The engine stores the chosen plan serialized for the builder's opt
// shapes (params {2, i, record}), and a loaded engine's first query deserializes it instead of
// compiling again; other shapes, or a blob this cuDNN refuses, build as before.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/conv/cudnn_graph_conv_common.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/param_bytes.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_graph_conv_family();

namespace {

namespace fe = cudnn_frontend;

// Tensor UIDs (execution takes pointers in this order; absent tensors are skipped).
enum : int64_t { kUidX = 1, kUidW = 2, kUidB = 3, kUidR = 4, kUidY = 5 };

// One pixel in, a 1x1 kernel, no padding (squeeze-excite's convs on pooled [N, C, 1, 1]): NCHW and
// NHWC are the same bytes, and so are KCRS and KRSC weights, so the key says channels-last and the
// graph gets channels-last strides. cuDNN's channels-first plans for these were wrong on the H200:
// RegNetY-1.6GF's conv + Sigmoid [64, 30, 1, 1] -> [64, 336, 1, 1] on plan 1 gave values up to 716
// (2026-12-03), MobileNetV3's squeeze conv at batch 64 a cosine of 0.40 (2026-12-01). The
// channels-last plans are cuDNN's (and our tests') main path.
ConvKey graph_key(ConvKey k, const ConvSpec& s) {
  if (k.channels_last || s.spatial != 2 || k.nd != 4) return k;
  const bool one_pixel = k.x[2] == 1 && k.x[3] == 1 && k.w[2] == 1 && k.w[3] == 1 && s.pads[0] == 0 && s.pads[1] == 0;
  if (one_pixel) k.channels_last = true;
  return k;
}

// The family's part of GraphConvTactic (see cudnn_graph_conv_common.h).
struct FusedConvGraph {
  using Key = ConvKey;
  static constexpr const char* kPrefix = "cuda.cudnn.graph.conv.";
  static constexpr int kMinCandidates = 1;  // the graph made but listing no plan: still offer one

  static const ConvKey& conv(const ConvKey& k) { return k; }
  static ConvKey& conv(ConvKey& k) { return k; }

  static bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    return conv_handles_op(node) && activation_supported(node) && check_conv_types(node, inputs).ok();
  }

  // Ascending UIDs: x, w, [b], [r] (then y).
  static Result<bool> read_call(const StepIO&, ConvCall& c, const Tactic&, GraphConvArgs<ConvKey>* a) {
    if (c.empty) return false;
    c.key = graph_key(c.key, c.spec);
    a->key = c.key;
    a->in = {c.x, c.w, c.b, c.r};
    return true;
  }

  static Result<ConvKey> opt_key(const ir::Node& node, const std::vector<Shape64>& in, ConvSpec* spec) {
    if (in.size() < 2 || node.outputs().empty() || !node.outputs()[0]) return unsupported("no device or shapes");
    INGOT_ASSIGN_OR_RETURN(*spec, parse_conv_spec(node, static_cast<int>(in[0].size()) - 2));
    auto present = [&](int i) {
      return i >= 0 && static_cast<size_t>(i) < node.inputs().size() && node.inputs()[static_cast<size_t>(i)];
    };
    const Shape64 xs = spec->channels_last ? to_channels_first(in[0]) : in[0];
    const Shape64 ws = spec->channels_last ? to_channels_first(in[1]) : in[1];
    INGOT_ASSIGN_OR_RETURN(ConvKey key, make_conv_key(node, *spec, node.outputs()[0]->dtype(), xs, ws,
                                                      present(spec->bias_input), present(spec->residual_input)));
    return graph_key(key, *spec);
  }

  static Result<ConvKey> guessed_key(const ir::Node& node, const std::vector<ir::TensorType>& inputs, ConvSpec* spec) {
    INGOT_ASSIGN_OR_RETURN(ConvKey key, guessed_conv_key(node, inputs, spec));
    return graph_key(key, *spec);
  }

  static Result<std::shared_ptr<fe::graph::Graph>> make_graph(const ir::Node& node, const ConvSpec& s,
                                                              const ConvKey& k, cudnnHandle_t handle);
  static std::string signature(const ConvSpec& s, const ConvKey& k);

  // Record encoding: {2, index, nd, flags (bias | residual << 1 | channels_last << 2), dtype,
  // x[nd] and w[nd] as int32, workspace as int64, name length u32 + name, blob length u32 + blob},
  // little-endian as the host writes it (engines are bound to their GPU and build anyway). These
  // are the bytes from nd to dtype.
  static void put_key(const ConvKey& k, std::vector<uint8_t>& out) {
    out.push_back(static_cast<uint8_t>(k.nd));
    out.push_back(static_cast<uint8_t>(k.bias | (k.residual << 1) | (k.channels_last << 2)));
    out.push_back(static_cast<uint8_t>(k.dtype));
  }

  static bool get_key(ParamReader& rd, ConvKey* k) {
    uint8_t nd = 0, flags = 0, dtype = 0;
    if (!rd.get(&nd) || !rd.get(&flags) || !rd.get(&dtype)) return false;
    if (nd < 3 || nd > kConvMaxNd || flags > 7) return false;
    const auto t = static_cast<DataType>(dtype);
    if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16) return false;
    k->nd = nd;
    k->bias = flags & 1;
    k->residual = (flags >> 1) & 1;
    k->channels_last = (flags >> 2) & 1;
    k->dtype = t;
    return true;
  }
};

// The operation graph for a key, with its execution plans listed (not yet built).
Result<std::shared_ptr<fe::graph::Graph>> FusedConvGraph::make_graph(const ir::Node& node, const ConvSpec& s,
                                                                     const ConvKey& k, cudnnHandle_t handle) {
  const fe::DataType_t io = fe_type(k.dtype);
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  std::vector<int64_t> xd(k.x.begin(), k.x.begin() + k.nd), wd(k.w.begin(), k.w.begin() + k.nd);
  const std::array<int64_t, kConvMaxNd> ya = conv_output_dims(s, k);
  std::vector<int64_t> yd(ya.begin(), ya.begin() + k.nd);
  for (int64_t v : yd)
    if (v <= 0) return invalid_argument(node.describe(), ": empty convolution output");
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& d) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(d)
                         .set_stride(strides_for(d, k.channels_last))
                         .set_data_type(io));
  };
  auto X = tensor("x", kUidX, xd);
  auto W = tensor("w", kUidW, wd);
  std::vector<int64_t> pads, strides, dils;
  for (int i = 2; i < k.nd; ++i) {
    const int j = s.spatial == 1 ? i - 3 : i - 2;
    pads.push_back(j < 0 ? 0 : s.pads[j]);
    strides.push_back(j < 0 ? 1 : s.strides[j]);
    dils.push_back(j < 0 ? 1 : s.dilations[j]);
  }
  auto y = g->conv_fprop(X, W,
                         fe::graph::Conv_fprop_attributes()
                             .set_name("conv")
                             .set_padding(pads)
                             .set_stride(strides)
                             .set_dilation(dils)
                             .set_compute_data_type(fe::DataType_t::FLOAT));
  auto pointwise = [&](const char* name, fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
  };
  if (k.bias) {
    std::vector<int64_t> bd(static_cast<size_t>(k.nd), 1);
    bd[1] = k.w[0];
    y = g->pointwise(y, tensor("b", kUidB, bd), pointwise("bias", fe::PointwiseMode_t::ADD));
  }
  std::shared_ptr<fe::graph::Tensor_attributes> R;
  if (k.residual) R = tensor("r", kUidR, yd);
  if (R && !s.residual_after_activation) y = g->pointwise(y, R, pointwise("residual", fe::PointwiseMode_t::ADD));
  if (!s.activation.empty()) {
    INGOT_ASSIGN_OR_RETURN(y, add_activation(*g, y, s, node));
  }
  if (R && s.residual_after_activation) y = g->pointwise(y, R, pointwise("residual", fe::PointwiseMode_t::ADD));
  y->set_output(true).set_uid(kUidY).set_dim(yd).set_stride(strides_for(yd, k.channels_last)).set_data_type(io);

  INGOT_RETURN_IF_ERROR(list_graph_conv_plans(*g, handle, node, /*no_tf32=*/k.dtype == DataType::kFloat32));
  return g;
}

// What make_graph builds from (the spec and the key's dims, not the node) and the device: equal
// signatures give the same cuDNN graph.
std::string FusedConvGraph::signature(const ConvSpec& s, const ConvKey& k) {
  std::string sig = device_tag() + "conv s" + std::to_string(s.spatial) + conv_spec_signature(s, 3);
  sig += " r" + std::to_string(s.residual_after_activation) + conv_dims_signature(k);
  sig += " f" + std::to_string(k.bias) + std::to_string(k.residual) + std::to_string(k.channels_last) + " t" +
         std::to_string(static_cast<int>(k.dtype));
  return sig;
}

using CudnnGraphConvTactic = GraphConvTactic<FusedConvGraph>;

}  // namespace

TacticFamily cudnn_graph_conv_family() { return CudnnGraphConvTactic::family("cudnn.graph.conv"); }

int64_t cudnn_graph_conv_plans_deserialized() { return CudnnGraphConvTactic::plans_deserialized(); }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
