// Copyright ingot authors. Apache-2.0.
//
// The parts of the cuDNN graph-API convolution tactics their families share (see
// cudnn_graph_conv_common.h).
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include "backend/cuda/conv/cudnn_graph_conv_common.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "backend/cuda/core/env_switch.h"

namespace ingot::backend::cuda {

namespace fe = cudnn_frontend;

namespace {

// Whether the graph family fuses activations other than Relu. INGOT_CUDNN_CONV_ACTIVATIONS=relu
// turns them off (the builder then splits such layers into the conv and a pointwise kernel): a
// switch to measure one form against the other on the same binaries.
bool fuses_all_activations() {
  static const bool all = !env_is("INGOT_CUDNN_CONV_ACTIVATIONS", "relu");
  return all;
}

}  // namespace

// Strides of channels-first dims `d` stored packed channels-first, or channels-last (N, spatial..., C).
std::vector<int64_t> strides_for(const std::vector<int64_t>& d, bool channels_last) {
  const size_t n = d.size();
  std::vector<int64_t> s(n, 1);
  if (!channels_last) {
    for (size_t i = n - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
    return s;
  }
  s[1] = 1;  // C innermost
  int64_t acc = d[1];
  for (size_t i = n - 1; i >= 2; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  s[0] = acc;
  return s;
}

// Output dims of the convolution (channels-first, cuDNN's nd).
std::array<int64_t, kConvMaxNd> conv_output_dims(const ConvSpec& s, const ConvKey& k) {
  std::array<int64_t, kConvMaxNd> y{};
  y[0] = k.x[0];
  y[1] = k.w[0];
  for (int i = 2; i < k.nd; ++i) {
    const int j = s.spatial == 1 ? i - 3 : i - 2;  // 1-D: dim 2 is the inserted H = 1
    const int64_t pad = j < 0 ? 0 : s.pads[j], str = j < 0 ? 1 : s.strides[j], dil = j < 0 ? 1 : s.dilations[j];
    y[i] = (k.x[i] + 2 * pad - dil * (k.w[i] - 1) - 1) / str + 1;
  }
  return y;
}

// Whether add_activation has a form for the node's activation.
bool activation_supported(const ir::Node& node) {
  // Not Tanh: cuDNN's TANH_FWD gave NaN where tanh saturates to 1 (fp32/bf16, H200, cuDNN 9.19).
  static const char* kModes[] = {"", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Silu", "Gelu", "GeluTanh", "HardSwish"};
  const std::string a = node.attrs().get_string("activation", "");
  if (!a.empty() && a != "Relu" && !fuses_all_activations()) return false;
  if (a == "HardSigmoid") return node.attrs().get_floats("activation_params").size() >= 2;
  for (const char* m : kModes)
    if (a == m) return true;
  return false;
}

// act(y) as cuDNN pointwise operations: the modes cuDNN has (Relu with its clips and slope for
// Relu6/Clip and LeakyRelu, Sigmoid, Swish for SiLU, both Gelus). HardSigmoid and HardSwish have
// no mode; they are a chain: h = clip(alpha * y + beta, 0, 1) (MUL and ADD by scalars passed by
// value, then Relu clipped at 1), and HardSwish multiplies y by h (alpha 1/6, beta 1/2: MobileNetV3's
// activation after its 1x1 convs). Tanh's mode gave NaN; the builder splits that layer.
Result<std::shared_ptr<fe::graph::Tensor_attributes>> add_activation(fe::graph::Graph& g,
                                                                     std::shared_ptr<fe::graph::Tensor_attributes> y,
                                                                     const ConvSpec& s, const ir::Node& node) {
  const std::string& a = s.activation;
  const std::vector<float>& p = s.activation_params;
  if (a != "Relu" && !fuses_all_activations())
    return unsupported(node.describe(), ": activation ", a, " (INGOT_CUDNN_CONV_ACTIVATIONS=relu)");
  auto attrs = fe::graph::Pointwise_attributes().set_name("act").set_compute_data_type(fe::DataType_t::FLOAT);
  if (a == "Relu") {
    attrs.set_mode(fe::PointwiseMode_t::RELU_FWD);
  } else if (a == "LeakyRelu" && p.size() >= 1) {
    attrs.set_mode(fe::PointwiseMode_t::RELU_FWD).set_relu_lower_clip(0.0f).set_relu_lower_clip_slope(p[0]);
  } else if (a == "Clip" && p.size() >= 2) {
    attrs.set_mode(fe::PointwiseMode_t::RELU_FWD)
        .set_relu_lower_clip(std::isinf(p[0]) ? std::numeric_limits<float>::lowest() : p[0])
        .set_relu_upper_clip(std::isinf(p[1]) ? std::numeric_limits<float>::max() : p[1]);
  } else if (a == "Sigmoid") {
    attrs.set_mode(fe::PointwiseMode_t::SIGMOID_FWD);
  } else if (a == "Silu") {
    attrs.set_mode(fe::PointwiseMode_t::SWISH_FWD).set_swish_beta(1.0f);
  } else if (a == "Gelu") {
    attrs.set_mode(fe::PointwiseMode_t::GELU_FWD);
  } else if (a == "GeluTanh") {
    attrs.set_mode(fe::PointwiseMode_t::GELU_APPROX_TANH_FWD);
  } else if (a == "HardSwish" || (a == "HardSigmoid" && p.size() >= 2)) {
    const bool swish = a == "HardSwish";
    auto op = [](const char* name, fe::PointwiseMode_t mode) {
      return fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(
          fe::DataType_t::FLOAT);
    };
    auto h = g.pointwise(y, g.tensor(swish ? 1.0f / 6.0f : p[0]), op("hard_alpha", fe::PointwiseMode_t::MUL));
    h = g.pointwise(h, g.tensor(swish ? 0.5f : p[1]), op("hard_beta", fe::PointwiseMode_t::ADD));
    h = g.pointwise(h, op("hard_clip", fe::PointwiseMode_t::RELU_FWD).set_relu_lower_clip(0.0f).set_relu_upper_clip(1.0f));
    return swish ? g.pointwise(y, h, op("hard_swish", fe::PointwiseMode_t::MUL)) : h;
  } else {
    return unsupported(node.describe(), ": cuDNN has no pointwise mode for activation ", a);
  }
  return g.pointwise(y, attrs);
}

std::string conv_spec_signature(const ConvSpec& s, int windows) {
  std::string sig;
  for (int i = 0; i < windows; ++i)
    sig += " " + std::to_string(s.pads[i]) + "," + std::to_string(s.strides[i]) + "," + std::to_string(s.dilations[i]);
  sig += " a" + s.activation;
  for (float v : s.activation_params) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    sig += "," + std::to_string(bits);
  }
  return sig;
}

std::string conv_dims_signature(const ConvKey& k) {
  std::string sig = " n" + std::to_string(k.nd);
  for (int i = 0; i < k.nd; ++i) sig += "," + std::to_string(k.x[i]) + "/" + std::to_string(k.w[i]);
  return sig;
}

Status list_graph_conv_plans(fe::graph::Graph& g, cudnnHandle_t handle, const ir::Node& node, bool no_tf32) {
  INGOT_FE_CHECK(g.validate(), node, "graph validate");
  INGOT_FE_CHECK(g.build_operation_graph(handle), node, "graph operation graph");
  INGOT_FE_CHECK(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), node, "graph heuristics");
  if (no_tf32) g.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE});
  g.deselect_workspace_greater_than(kGraphConvWorkspaceBytes);
  INGOT_FE_CHECK(g.check_support(handle), node, "graph support");
  return Status::Ok();
}

Status build_graph_conv_plan(const ir::Node& node, const ConvSpec& s, const ConvKey& conv, const std::string& signature,
                             const GraphConvMaker& make, int index, cudnnHandle_t handle, GraphConvPlan* p) {
  p->y = conv_output_dims(s, conv);
  p->shared = shared_graph(signature);
  SharedGraph& sg = *p->shared;
  std::lock_guard<std::mutex> lock(sg.mu);
  INGOT_RETURN_IF_ERROR(ensure_graph(sg, make));
  INGOT_ASSIGN_OR_RETURN(PickedPlan picked, pick_plan(sg, handle, index, kGraphConvWorkspaceBytes, node.describe()));
  p->graph = sg.graph;
  p->plan_index = picked.index;
  p->workspace = picked.workspace;
  p->engine = picked.name;
  return Status::Ok();
}

Status load_graph_conv_plan(const ir::Node& node, const ConvSpec& s, const ConvKey& conv, const GraphConvRecord& rec,
                            cudnnHandle_t handle, GraphConvPlan* p) {
  int64_t ws = 0;
  INGOT_ASSIGN_OR_RETURN(p->graph, deserialize_plan(handle, rec.blob, kGraphConvWorkspaceBytes, &ws, node.describe()));
  p->y = conv_output_dims(s, conv);
  p->plan_index = 0;  // a deserialized graph holds the one plan
  p->workspace = ws;
  p->engine = rec.engine + " (deserialized)";
  return Status::Ok();
}

Result<std::vector<uint8_t>> serialize_graph_conv_plan(const GraphConvPlan& p, cudnnHandle_t handle,
                                                       const ir::Node& node) {
  if (!p.shared) return unsupported(node.describe(), ": no shared cuDNN graph");
  std::lock_guard<std::mutex> lock(p.shared->mu);
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, serialize_plan(*p.shared, handle, p.plan_index, node.describe()));
  if (blob.empty() || blob.size() > (64u << 20)) return unsupported("plan blob size");
  return blob;
}

int graph_conv_plan_count(const std::string& signature, const GraphConvMaker& make, int min_count) {
  std::shared_ptr<SharedGraph> sg = shared_graph(signature);
  std::lock_guard<std::mutex> lock(sg->mu);
  if (!ensure_graph(*sg, make).ok()) return 0;  // cuDNN takes no plan: offer none
  return static_cast<int>(std::clamp<int64_t>(sg->graph->get_execution_plan_count(), min_count, kGraphConvMaxCandidates));
}

void put_graph_conv_record(const ConvKey& conv, const GraphConvRecord& r, std::vector<uint8_t>& out) {
  for (int i = 0; i < conv.nd; ++i) put_bytes<int32_t>(out, conv.x[static_cast<size_t>(i)]);
  for (int i = 0; i < conv.nd; ++i) put_bytes<int32_t>(out, conv.w[static_cast<size_t>(i)]);
  put_bytes<int64_t>(out, r.workspace);
  put_bytes<uint32_t>(out, static_cast<uint32_t>(r.engine.size()));
  out.insert(out.end(), r.engine.begin(), r.engine.end());
  put_bytes<uint32_t>(out, static_cast<uint32_t>(r.blob.size()));
  out.insert(out.end(), r.blob.begin(), r.blob.end());
}

bool get_graph_conv_record(ParamReader& rd, ConvKey* conv, GraphConvRecord* r) {
  for (int i = 0; i < conv->nd; ++i)
    if (!rd.get(&conv->x[static_cast<size_t>(i)]) || conv->x[static_cast<size_t>(i)] <= 0) return false;
  for (int i = 0; i < conv->nd; ++i)
    if (!rd.get(&conv->w[static_cast<size_t>(i)]) || conv->w[static_cast<size_t>(i)] <= 0) return false;
  uint32_t name_len = 0, blob_len = 0;
  const uint8_t* p = nullptr;
  if (!rd.get(&r->workspace) || r->workspace < 0 || !rd.get(&name_len) || !rd.bytes(name_len, &p)) return false;
  r->engine.assign(reinterpret_cast<const char*>(p), name_len);
  if (!rd.get(&blob_len) || blob_len == 0 || !rd.bytes(blob_len, &p) || !rd.done()) return false;
  r->blob.assign(p, p + blob_len);
  return true;
}

Status execute_graph_conv_plan(cudnnHandle_t handle, const StepIO& io, const GraphConvPlan& plan,
                               const std::array<const Tensor*, kGraphConvMaxInputs>& in, Tensor* y) {
  const ir::Node& node = *io.node;
  INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
  // Ascending UIDs: the inputs present, then y.
  std::array<void*, kGraphConvMaxInputs + 1> ptrs{};
  int n = 0;
  for (const Tensor* t : in)
    if (t) ptrs[static_cast<size_t>(n++)] = const_cast<void*>(t->raw());
  ptrs[static_cast<size_t>(n++)] = y->mutable_raw();
  fe::error_t st = plan.graph->execute_plan_at_index(handle, ptrs.data(), n, io.workspace, plan.plan_index);
  if (!st.is_good())
    return internal_error(node.describe(), ": cuDNN graph execute (", plan.engine, ") failed: ", st.get_message());
  INGOT_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
