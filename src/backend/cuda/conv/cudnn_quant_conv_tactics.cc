// Copyright ingot authors. Apache-2.0.
//
// cuDNN graph-API tactics (through cudnn-frontend) for ingot::QuantConv (ir/ops/quant.cc):
//   Y = act(x_scale * w_scale[m] * conv(X, W) + B[m] + R), then with y_scale Y / y_scale as int8
//   (or fp8), without it Y in output_dtype (float32, float16, bfloat16),
// as one operation graph per call shape, which cuDNN runs as one fused kernel:
//
//   X, W (int8: compute INT32, exact; float8e4m3fn: compute FLOAT) -> conv_fprop -> the sums
//     (fp32; for int8 the int32 accumulators where cuDNN takes no fp32 ones) -> MUL x_scale
//     [1,1,1,1] -> MUL w_scale ([1,1,1,1] or [1,M,1,1]) [-> ADD B [1,M,1,1]] [-> ADD R]
//     [-> the activation, as the FusedConv graph family forms it (add_activation)]
//     [-> DIV y_scale [1,1,1,1]] -> Y
//
// every pointwise operation in fp32. The scales are device tensors read by the kernel (never on
// the host: engines are captured into CUDA graphs); B and R keep their own float types (the
// precision pass may leave fp16 ones beside an fp32 or int8 Y). Tensor UIDs follow the node's
// input order, then Y, so execution passes the device pointers in that order, absent ones skipped.
//
// Layout: channels_last = 1 only (X, R, Y NHWC, W KRSC), what the builder's layout pass makes of
// a 2-D QuantConv: cuDNN's 8-bit convolutions read no other layout but its vectorized ones. Refused
// in supports(), so that the builder splits the layer into DequantizeLinear and a float conv as it
// did before this family: channels-first, 1-D / 3-D, group != 1 (no grouped 8-bit engines are
// asked for), C or M not a multiple of 4 (the int8 NHWC rule; the same byte alignment for fp8), W
// without known C and M, a per-channel w_scale that is not [M], a y_scale Y of another 8-bit type
// than X, fp8 below sm_90 (cuDNN's fp8 convolutions are Hopper's), activations add_activation has
// no form for (Tanh). Where a device is present, candidates() also asks cuDNN for plans at the
// node's shapes (unknown dims guessed as the FusedConv family guesses them) and offers none when it
// has none; a shape without a plan at enqueue is kUnsupported naming the node, never a crash.
//
// "cuda.cudnn.graph.quant_conv.<i>" runs the i-th execution plan of cuDNN's heuristics (mode A,
// then the fallback list) that builds within kWorkspaceBytes, as cudnn_graph_conv_tactics.cc's
// candidates do: the graph of a signature is shared by the process, plans are cached per tactic
// (lookups take no lock), and the engine keeps the chosen plan serialized for the builder's opt
// shapes (params {2, i, record}) so a loaded engine does not compile it again.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/conv/cudnn_graph_conv_common.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/param_bytes.h"
#include "backend/cuda/core/plan_cache.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_quant_conv_family();

namespace {

namespace fe = cudnn_frontend;

constexpr int64_t kWorkspaceBytes = 64ll << 20;
constexpr int kMaxCandidates = 3;
constexpr const char* kPrefix = "cuda.cudnn.graph.quant_conv.";
constexpr uint8_t kRecordVersion = 2;  // params {2, index, record}; {1, index} names the index alone

// QuantConv's inputs.
constexpr size_t kXScaleInput = 2, kWScaleInput = 3, kYScaleInput = 6;

// Tensor UIDs: the node's input order, then Y (execution takes pointers in this order).
enum : int64_t { kUidX = 1, kUidW, kUidXScale, kUidWScale, kUidB, kUidR, kUidYScale, kUidY };

bool is_8bit(DataType t) { return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN; }

fe::DataType_t fe_io_type(DataType t) {
  if (t == DataType::kInt8) return fe::DataType_t::INT8;
  if (t == DataType::kFloat8E4M3FN) return fe::DataType_t::FP8_E4M3;
  return fe_type(t);
}

// Whether `s` holds exactly `v` elements (a scalar, or a vector of known length).
bool numel_is(const ir::Shape& s, int64_t v) {
  if (!s.rank_known() || s.rank() > 1) return false;
  return s.rank() == 0 ? v == 1 : s[0].is_known() && s[0].value() == v;
}

// A call as its graph depends on it: the convolution (conv.dtype is X's and W's type) and the
// epilogue's types and forms.
struct QuantKey {
  ConvKey conv;
  DataType y = DataType::kUndefined;
  DataType bias = DataType::kUndefined;      // kUndefined: none
  DataType residual = DataType::kUndefined;  // kUndefined: none
  bool per_channel = false;                  // w_scale [M] (else one value)
  bool y_scale = false;                      // Y quantized by y_scale
  bool same_epilogue(const QuantKey& o) const {
    return y == o.y && bias == o.bias && residual == o.residual && per_channel == o.per_channel && y_scale == o.y_scale;
  }
  /// The same call dims and types, whichever node (a plan serialized in an engine has none).
  bool same_call(const QuantKey& o) const { return conv.same_call(o.conv) && same_epilogue(o); }
  bool operator==(const QuantKey& o) const { return conv == o.conv && same_epilogue(o); }
};

// What supports() decides from types (see the header): the spec on success.
Status check_node(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec_out = nullptr) {
  if (!is_quant_conv_op(node)) return unsupported(node.describe(), ": not a QuantConv");
  if (in.size() < 4 || !node.output(0)) return unsupported(node.describe(), ": needs X, W, x_scale, w_scale and Y");
  if (!activation_supported(node))
    return unsupported(node.describe(), ": no cuDNN form of activation '", node.attrs().get_string("activation", ""),
                       "'");
  ConvSpec s;
  INGOT_RETURN_IF_ERROR(check_conv_types(node, in, &s));  // ranks, window, channels, group split, B and R shapes
  if (!s.channels_last || s.spatial != 2)
    return unsupported(node.describe(), ": cuDNN's 8-bit convolutions read 2-D NHWC / KRSC only (channels_last = 1)");
  if (s.group != 1) return unsupported(node.describe(), ": group ", s.group, " (grouped 8-bit convolutions)");
  const DataType q = in[0].dtype;
  if (!is_8bit(q) || in[1].dtype != q)
    return unsupported(node.describe(), ": X and W must both be int8 or both float8e4m3fn, got ", data_type_name(q),
                       " and ", data_type_name(in[1].dtype));
  if (q == DataType::kFloat8E4M3FN) {
    const int cc = current_device_info().cc;
    if (cc != 0 && cc < 90)
      return unsupported(node.describe(), ": cuDNN's fp8 convolutions need sm_90, the device is sm_", cc);
  }
  const ir::Shape& w = in[1].shape;  // KRSC
  if (!w[0].is_known() || !w[3].is_known())
    return unsupported(node.describe(), ": W ", w.to_string(), " without known output and input channels");
  const int64_t m = w[0].value(), c = w[3].value();
  if (m % 4 != 0 || c % 4 != 0)
    return unsupported(node.describe(), ": ", c, " input and ", m,
                       " output channels (cuDNN's 8-bit NHWC convolutions need multiples of 4)");
  if (in[kXScaleInput].dtype != DataType::kFloat32 || in[kWScaleInput].dtype != DataType::kFloat32)
    return unsupported(node.describe(), ": x_scale and w_scale must be float32");
  if (!numel_is(in[kXScaleInput].shape, 1)) return unsupported(node.describe(), ": x_scale must be one value");
  if (!numel_is(in[kWScaleInput].shape, 1) && !numel_is(in[kWScaleInput].shape, m))
    return unsupported(node.describe(), ": w_scale ", in[kWScaleInput].shape.to_string(), " is neither one value nor [",
                       m, "]");
  const DataType y = node.output(0)->dtype();
  if (node.input(kYScaleInput)) {
    if (in.size() <= kYScaleInput || in[kYScaleInput].dtype != DataType::kFloat32 ||
        !numel_is(in[kYScaleInput].shape, 1))
      return unsupported(node.describe(), ": y_scale must be one float32 value");
    if (y != q)
      return unsupported(node.describe(), ": a ", data_type_name(q), " convolution quantizing to ", data_type_name(y));
  } else if (!is_conv_dtype(y)) {
    return unsupported(node.describe(), ": output ", data_type_name(y));
  }
  if (s.bias_input >= 0 && !is_conv_dtype(in[static_cast<size_t>(s.bias_input)].dtype))
    return unsupported(node.describe(), ": bias of ", data_type_name(in[static_cast<size_t>(s.bias_input)].dtype));
  if (s.residual_input >= 0) {
    const DataType r = in[static_cast<size_t>(s.residual_input)].dtype;
    if (!is_conv_dtype(r) || (!node.input(kYScaleInput) && r != y))
      return unsupported(node.describe(), ": residual of ", data_type_name(r), " for a ", data_type_name(y), " output");
  }
  if (spec_out) *spec_out = s;
  return Status::Ok();
}

// The operation graph for a key with the convolution's output (the sums) of type `sums`, with its
// execution plans listed (not yet built).
Result<std::shared_ptr<fe::graph::Graph>> try_graph(const ir::Node& node, const ConvSpec& s, const QuantKey& k,
                                                    cudnnHandle_t handle, fe::DataType_t sums) {
  const ConvKey& c = k.conv;
  if (c.nd != 4 || !c.channels_last) return unsupported(node.describe(), ": not a 2-D channels-last convolution");
  const bool int8 = c.dtype == DataType::kInt8;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_io_type(c.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> xd(c.x.begin(), c.x.begin() + 4), wd(c.w.begin(), c.w.begin() + 4);
  const std::array<int64_t, kConvMaxNd> ya = conv_output_dims(s, c);
  const std::vector<int64_t> yd(ya.begin(), ya.begin() + 4);
  for (int64_t v : yd)
    if (v <= 0) return invalid_argument(node.describe(), ": empty convolution output");
  const std::vector<int64_t> one = {1, 1, 1, 1}, per_m = {1, c.w[0], 1, 1};
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& d, DataType t) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(d)
                         .set_stride(strides_for(d, true))
                         .set_data_type(fe_io_type(t)));
  };
  auto X = tensor("x", kUidX, xd, c.dtype);
  auto W = tensor("w", kUidW, wd, c.dtype);
  auto y = g->conv_fprop(X, W,
                         fe::graph::Conv_fprop_attributes()
                             .set_name("conv")
                             .set_padding({s.pads[0], s.pads[1]})
                             .set_stride({s.strides[0], s.strides[1]})
                             .set_dilation({s.dilations[0], s.dilations[1]})
                             .set_compute_data_type(int8 ? fe::DataType_t::INT32 : fe::DataType_t::FLOAT));
  y->set_data_type(sums);
  auto pointwise = [&](const char* name, fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
  };
  y = g->pointwise(y, tensor("x_scale", kUidXScale, one, DataType::kFloat32),
                   pointwise("x_scale", fe::PointwiseMode_t::MUL));
  y = g->pointwise(y, tensor("w_scale", kUidWScale, k.per_channel ? per_m : one, DataType::kFloat32),
                   pointwise("w_scale", fe::PointwiseMode_t::MUL));
  if (k.bias != DataType::kUndefined)
    y = g->pointwise(y, tensor("b", kUidB, per_m, k.bias), pointwise("bias", fe::PointwiseMode_t::ADD));
  if (k.residual != DataType::kUndefined)
    y = g->pointwise(y, tensor("r", kUidR, yd, k.residual), pointwise("residual", fe::PointwiseMode_t::ADD));
  if (!s.activation.empty()) {
    INGOT_ASSIGN_OR_RETURN(y, add_activation(*g, y, s, node));
  }
  if (k.y_scale)
    y = g->pointwise(y, tensor("y_scale", kUidYScale, one, DataType::kFloat32),
                     pointwise("y_scale", fe::PointwiseMode_t::DIV));
  y->set_output(true).set_uid(kUidY).set_dim(yd).set_stride(strides_for(yd, true)).set_data_type(fe_io_type(k.y));

  INGOT_FE_CHECK(g->validate(), node, "graph validate");
  INGOT_FE_CHECK(g->build_operation_graph(handle), node, "graph operation graph");
  INGOT_FE_CHECK(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), node, "graph heuristics");
  g->deselect_workspace_greater_than(kWorkspaceBytes);
  INGOT_FE_CHECK(g->check_support(handle), node, "graph support");
  return g;
}

// The operation graph for a key: the sums handed to the epilogue as fp32 (what PyTorch's cuDNN
// int8 convolution declares), else, for int8, as the int32 accumulators themselves, whichever
// cuDNN takes first; the first refusal when neither.
Result<std::shared_ptr<fe::graph::Graph>> make_graph(const ir::Node& node, const ConvSpec& s, const QuantKey& k,
                                                     cudnnHandle_t handle) {
  auto g = try_graph(node, s, k, handle, fe::DataType_t::FLOAT);
  if (g.ok() || k.conv.dtype != DataType::kInt8) return g;
  auto g32 = try_graph(node, s, k, handle, fe::DataType_t::INT32);
  return g32.ok() ? g32 : g;
}

// What make_graph builds from (the spec's window and epilogue, the key's dims and types) and the
// device: equal signatures give the same cuDNN graph.
std::string graph_signature(const ConvSpec& s, const QuantKey& k) {
  std::string sig = device_tag() + "quant_conv";
  for (int i = 0; i < 2; ++i)
    sig += " " + std::to_string(s.pads[i]) + "," + std::to_string(s.strides[i]) + "," + std::to_string(s.dilations[i]);
  sig += " a" + s.activation;
  for (float v : s.activation_params) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    sig += "," + std::to_string(bits);
  }
  sig += " n" + std::to_string(k.conv.nd);
  for (int i = 0; i < k.conv.nd; ++i) sig += "," + std::to_string(k.conv.x[i]) + "/" + std::to_string(k.conv.w[i]);
  sig += " l" + std::to_string(k.conv.channels_last) + " t";
  for (DataType t : {k.conv.dtype, k.y, k.bias, k.residual}) sig += std::to_string(static_cast<int>(t)) + ",";
  sig += " c" + std::to_string(k.per_channel) + " q" + std::to_string(k.y_scale);
  return sig;
}

struct GraphPlan {
  QuantKey key;
  std::array<int64_t, kConvMaxNd> y{};  // channels-first output dims
  std::shared_ptr<SharedGraph> shared;  // null for a plan deserialized from an engine
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan_index = 0;
  int64_t workspace = 0;
  std::string engine;  // the plan's name, for messages
};

// A plan serialized into an engine: the call it was built for and cuDNN's blob.
struct PlanRecord {
  QuantKey key;  // node unset
  int64_t workspace = 0;
  std::string engine;
  std::vector<uint8_t> blob;
};

// The plan for `key` that is the index-th to build among the heuristics' list.
Status build_plan(const ir::Node& node, const ConvSpec& s, const QuantKey& key, int index, cudnnHandle_t handle,
                  GraphPlan* p) {
  p->key = key;
  p->y = conv_output_dims(s, key.conv);
  p->shared = shared_graph(graph_signature(s, key));
  SharedGraph& sg = *p->shared;
  std::lock_guard<std::mutex> lock(sg.mu);
  INGOT_RETURN_IF_ERROR(ensure_graph(sg, [&] { return make_graph(node, s, key, handle); }));
  INGOT_ASSIGN_OR_RETURN(PickedPlan picked, pick_plan(sg, handle, index, kWorkspaceBytes, node.describe()));
  p->graph = sg.graph;
  p->plan_index = picked.index;
  p->workspace = picked.workspace;
  p->engine = picked.name;
  return Status::Ok();
}

std::atomic<int64_t> g_deserialized{0};

// A plan from an engine's record (no compilation), for a call of the record's dims.
Status load_plan(const ir::Node& node, const ConvSpec& s, const QuantKey& key, const PlanRecord& rec,
                 cudnnHandle_t handle, GraphPlan* p) {
  int64_t ws = 0;
  INGOT_ASSIGN_OR_RETURN(p->graph, deserialize_plan(handle, rec.blob, kWorkspaceBytes, &ws, node.describe()));
  p->key = key;
  p->y = conv_output_dims(s, key.conv);
  p->plan_index = 0;  // a deserialized graph holds the one plan
  p->workspace = ws;
  p->engine = rec.engine + " (deserialized)";
  g_deserialized.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

bool record_type_ok(uint8_t t, bool optional) {
  const auto d = static_cast<DataType>(t);
  return is_8bit(d) || is_conv_dtype(d) || (optional && d == DataType::kUndefined);
}

// Record encoding: {2, index, nd (4), flags (per_channel | y_scale << 1 | channels_last << 2),
// X, Y, B, R types (kUndefined: absent), x[nd] and w[nd] as int32, workspace as int64, name length
// u32 + name, blob length u32 + blob}, in the host's byte order (engines are bound to their GPU).
std::vector<uint8_t> encode_record(int index, const PlanRecord& r) {
  const QuantKey& k = r.key;
  std::vector<uint8_t> out = {kRecordVersion,
                              static_cast<uint8_t>(index),
                              static_cast<uint8_t>(k.conv.nd),
                              static_cast<uint8_t>(k.per_channel | (k.y_scale << 1) | (k.conv.channels_last << 2)),
                              static_cast<uint8_t>(k.conv.dtype),
                              static_cast<uint8_t>(k.y),
                              static_cast<uint8_t>(k.bias),
                              static_cast<uint8_t>(k.residual)};
  for (int i = 0; i < k.conv.nd; ++i) put_bytes<int32_t>(out, k.conv.x[static_cast<size_t>(i)]);
  for (int i = 0; i < k.conv.nd; ++i) put_bytes<int32_t>(out, k.conv.w[static_cast<size_t>(i)]);
  put_bytes<int64_t>(out, r.workspace);
  put_bytes<uint32_t>(out, static_cast<uint32_t>(r.engine.size()));
  out.insert(out.end(), r.engine.begin(), r.engine.end());
  put_bytes<uint32_t>(out, static_cast<uint32_t>(r.blob.size()));
  out.insert(out.end(), r.blob.begin(), r.blob.end());
  return out;
}

// The record of params {2, index, ...}; nullopt when anything is out of range or left over.
std::optional<PlanRecord> decode_record(const std::vector<uint8_t>& params, int index) {
  ParamReader rd(params);
  uint8_t version = 0, idx = 0, nd = 0, flags = 0, xt = 0, yt = 0, bt = 0, rt = 0;
  if (!rd.get(&version) || !rd.get(&idx) || !rd.get(&nd) || !rd.get(&flags) || !rd.get(&xt) || !rd.get(&yt) ||
      !rd.get(&bt) || !rd.get(&rt))
    return std::nullopt;
  if (version != kRecordVersion || idx != index || nd != 4 || flags > 7) return std::nullopt;
  if (!is_8bit(static_cast<DataType>(xt)) || !record_type_ok(yt, false) || !record_type_ok(bt, true) ||
      !record_type_ok(rt, true))
    return std::nullopt;
  PlanRecord r;
  QuantKey& k = r.key;
  k.conv.nd = nd;
  k.conv.dtype = static_cast<DataType>(xt);
  k.per_channel = flags & 1;
  k.y_scale = (flags >> 1) & 1;
  k.conv.channels_last = (flags >> 2) & 1;
  k.y = static_cast<DataType>(yt);
  k.bias = static_cast<DataType>(bt);
  k.residual = static_cast<DataType>(rt);
  k.conv.bias = k.bias != DataType::kUndefined;
  k.conv.residual = k.residual != DataType::kUndefined;
  for (int i = 0; i < nd; ++i)
    if (!rd.get(&k.conv.x[static_cast<size_t>(i)]) || k.conv.x[static_cast<size_t>(i)] <= 0) return std::nullopt;
  for (int i = 0; i < nd; ++i)
    if (!rd.get(&k.conv.w[static_cast<size_t>(i)]) || k.conv.w[static_cast<size_t>(i)] <= 0) return std::nullopt;
  uint32_t name_len = 0, blob_len = 0;
  const uint8_t* p = nullptr;
  if (!rd.get(&r.workspace) || r.workspace < 0 || !rd.get(&name_len) || !rd.bytes(name_len, &p)) return std::nullopt;
  r.engine.assign(reinterpret_cast<const char*>(p), name_len);
  if (!rd.get(&blob_len) || blob_len == 0 || !rd.bytes(blob_len, &p) || !rd.done()) return std::nullopt;
  r.blob.assign(p, p + blob_len);
  return r;
}

// The epilogue's part of a key from the node's input types `in` (and its output's type).
void set_epilogue(const ir::Node& node, const std::vector<ir::TensorType>& in, const ConvSpec& spec, QuantKey* k) {
  k->y = node.output(0)->dtype();
  if (spec.bias_input >= 0) k->bias = in[static_cast<size_t>(spec.bias_input)].dtype;
  if (spec.residual_input >= 0) k->residual = in[static_cast<size_t>(spec.residual_input)].dtype;
  k->per_channel = !numel_is(in[kWScaleInput].shape, 1);
  k->y_scale = node.input(kYScaleInput) != nullptr;
}

// The key for a node's types (check_node's) with symbolic dims guessed (guessed_conv_key's guesses).
Result<QuantKey> guessed_key(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec) {
  QuantKey k;
  INGOT_ASSIGN_OR_RETURN(k.conv, guessed_conv_key(node, in, spec));
  set_epilogue(node, in, *spec, &k);
  return k;
}

class CudnnQuantConvTactic : public Tactic {
 public:
  explicit CudnnQuantConvTactic(int index, std::optional<PlanRecord> record = std::nullopt)
      : index_(index), record_(std::move(record)) {}

  std::string name() const override { return kPrefix + std::to_string(index_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    return check_node(node, inputs).ok();
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return kWorkspaceBytes; }

  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    if (!io.node) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(ConvCall c, read_conv_call(io));  // X, W, B, R, Y and the conv's key
    auto input = [&](size_t i) -> const Tensor* { return i < io.inputs.size() ? io.inputs[i] : nullptr; };
    const Tensor* xs = input(kXScaleInput);
    const Tensor* ws = input(kWScaleInput);
    const Tensor* ys = node.input(kYScaleInput) ? input(kYScaleInput) : nullptr;
    if (!xs || !ws || (node.input(kYScaleInput) && !ys))
      return invalid_argument(node.describe(), ": missing x_scale, w_scale or y_scale");
    if (c.empty) return Status::Ok();
    QuantKey key;
    key.conv = c.key;
    key.y = c.y->dtype();
    key.bias = c.b ? c.b->dtype() : DataType::kUndefined;
    key.residual = c.r ? c.r->dtype() : DataType::kUndefined;
    key.per_channel = ws->numel() != 1;
    key.y_scale = ys != nullptr;
    const int64_t m = c.w->shape()[0];
    if (!c.spec.channels_last || c.spec.group != 1 || key.conv.nd != 4 || !is_8bit(c.x->dtype()) ||
        c.w->dtype() != c.x->dtype() || xs->dtype() != DataType::kFloat32 || ws->dtype() != DataType::kFloat32 ||
        xs->numel() != 1 || (key.per_channel && ws->numel() != m) ||
        (ys && (ys->dtype() != DataType::kFloat32 || ys->numel() != 1)) ||
        (ys ? key.y != c.x->dtype() : !is_conv_dtype(key.y)) || (c.b && !is_conv_dtype(key.bias)) ||
        (c.r && !is_conv_dtype(key.residual)))
      return invalid_argument(node.describe(), ": tensors do not match the tactic ", name(), " (X ",
                              data_type_name(c.x->dtype()), ", Y ", data_type_name(key.y), ", w_scale of ", ws->numel(),
                              " values)");
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const GraphPlan* plan = cache_.find(key);
    std::unique_ptr<GraphPlan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<GraphPlan>();
      // The engine's plan for this call when it has one and this cuDNN takes it back.
      if (!record_ || !record_->key.same_call(key) || !load_plan(node, c.spec, key, *record_, handle, local.get()).ok())
        INGOT_RETURN_IF_ERROR(build_plan(node, c.spec, key, index_, handle, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_RETURN_IF_ERROR(check_conv_output(c, plan->y));

    INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
    // Ascending UIDs: x, w, x_scale, w_scale, [b], [r], [y_scale], y.
    std::array<void*, 8> ptrs{};
    int n = 0;
    for (const Tensor* t : {c.x, c.w, xs, ws, c.b, c.r, ys})
      if (t) ptrs[static_cast<size_t>(n++)] = const_cast<void*>(t->raw());
    ptrs[static_cast<size_t>(n++)] = c.y->mutable_raw();
    fe::error_t st = plan->graph->execute_plan_at_index(handle, ptrs.data(), n, io.workspace, plan->plan_index);
    if (!st.is_good())
      return internal_error(node.describe(), ": cuDNN graph execute (", plan->engine, ") failed: ", st.get_message());
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {1, static_cast<uint8_t>(index_)}; }

  // The plan at the builder's opt shapes, serialized (built when this candidate was timed, so
  // this compiles nothing new); the plain form when cuDNN cannot serialize it.
  std::vector<uint8_t> serialize_for(const ir::Node& node, const std::vector<Shape64>& in) const override {
    auto rec = plan_record(node, in);
    return rec.ok() ? encode_record(index_, *rec) : serialize();
  }

 private:
  Result<PlanRecord> plan_record(const ir::Node& node, const std::vector<Shape64>& in) const {
    if (!cuda_device_present() || in.size() < 4 || !node.output(0)) return unsupported("no device or shapes");
    const std::vector<ir::TensorType> types = node_input_types(node);
    ConvSpec spec;
    INGOT_RETURN_IF_ERROR(check_node(node, types, &spec));
    QuantKey key;
    INGOT_ASSIGN_OR_RETURN(key.conv,
                           make_conv_key(node, spec, types[0].dtype, to_channels_first(in[0]), to_channels_first(in[1]),
                                         spec.bias_input >= 0, spec.residual_input >= 0));
    set_epilogue(node, types, spec, &key);
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    GraphPlan p;
    INGOT_RETURN_IF_ERROR(build_plan(node, spec, key, index_, handle, &p));
    PlanRecord r;
    r.key = key;
    r.key.conv.node = nullptr;
    r.workspace = p.workspace;
    r.engine = p.engine;
    std::lock_guard<std::mutex> lock(p.shared->mu);
    INGOT_ASSIGN_OR_RETURN(r.blob, serialize_plan(*p.shared, handle, p.plan_index, node.describe()));
    if (r.blob.empty() || r.blob.size() > (64u << 20)) return unsupported("plan blob size");
    return r;
  }

  int index_;
  std::optional<PlanRecord> record_;  // from the engine
  mutable PlanCache<GraphPlan> cache_;
};

// How many plans to offer: those cuDNN's heuristics list at the node's (guessed) shapes, up to
// kMaxCandidates; none when cuDNN takes no plan; 1 when that cannot be asked (no device).
int plan_count(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  if (!cuda_device_present()) return 1;
  ConvSpec spec;
  auto key = guessed_key(node, inputs, &spec);
  if (!key.ok()) return 1;
  auto handle = cudnn_thread_handle(node);
  if (!handle.ok()) return 1;
  std::shared_ptr<SharedGraph> sg = shared_graph(graph_signature(spec, *key));
  std::lock_guard<std::mutex> lock(sg->mu);
  if (!ensure_graph(*sg, [&] { return make_graph(node, spec, *key, *handle); }).ok()) return 0;
  return static_cast<int>(std::clamp<int64_t>(sg->graph->get_execution_plan_count(), 0, kMaxCandidates));
}

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (!check_node(node, inputs).ok()) return out;
  const int n = plan_count(node, inputs);
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<CudnnQuantConvTactic>(i));
  return out;
}

// "cuda.cudnn.graph.quant_conv.<i>" with 0 <= i < kMaxCandidates; params empty, {1, i} or a plan
// record {2, i, ...} (serialize_for).
std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  const bool record = params.size() > 2 && params[0] == kRecordVersion;
  const int index = conv_tactic_index(name, kPrefix, kMaxCandidates, record ? std::vector<uint8_t>{} : params);
  if (index < 0) return nullptr;
  if (!record) return std::make_unique<CudnnQuantConvTactic>(index);
  auto rec = decode_record(params, index);
  return rec ? std::make_unique<CudnnQuantConvTactic>(index, std::move(rec)) : nullptr;
}

}  // namespace

TacticFamily cudnn_quant_conv_family() { return TacticFamily{"cudnn.graph.quant_conv", candidates, create}; }

int64_t cudnn_quant_conv_plans_deserialized() { return g_deserialized.load(std::memory_order_relaxed); }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
