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
// the fallback list) that builds at the call's shape, within kWorkspaceBytes. Plans are built on
// a shape's first call and cached in the tactic (lookups take no lock). Execution passes the
// device pointers in ascending tensor-UID order (cudnn-frontend's variant-pack template), so a
// steady-state call allocates nothing on the host.
//
// Build cost: a plan of a runtime-fusion engine is compiled (NVRTC) when built, ~0.1-1 s. One
// operation graph per distinct convolution is shared by the whole process (SharedGraph), so each
// plan builds once however many candidates (candidate i needs plans 0..i tried), layouts, steps
// and engines ask for it. The engine stores the chosen plan serialized for the builder's opt
// shapes (params {2, i, record}), and a loaded engine's first query deserializes it instead of
// compiling again; other shapes, or a blob this cuDNN refuses, build as before.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/conv/cudnn_graph_conv_common.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/param_bytes.h"
#include "backend/cuda/core/plan_cache.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_graph_conv_family();

namespace {

namespace fe = cudnn_frontend;

constexpr int64_t kWorkspaceBytes = 64ll << 20;
constexpr int kMaxCandidates = 3;
constexpr const char* kPrefix = "cuda.cudnn.graph.conv.";

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

struct GraphPlan {
  ConvKey key;
  std::array<int64_t, kConvMaxNd> y{};  // channels-first output dims
  std::shared_ptr<SharedGraph> shared;    // null for a plan deserialized from an engine
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan_index = 0;
  int64_t workspace = 0;
  std::string engine;  // the plan's name, for messages
};

// A plan serialized into an engine: the call dims it was built for and cuDNN's blob.
struct PlanRecord {
  ConvKey key;  // node unset
  int64_t workspace = 0;
  std::string engine;
  std::vector<uint8_t> blob;
};


// The operation graph for a key, with its execution plans listed (not yet built).
Result<std::shared_ptr<fe::graph::Graph>> make_graph(const ir::Node& node, const ConvSpec& s, const ConvKey& k,
                                                     cudnnHandle_t handle) {
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

  INGOT_FE_CHECK(g->validate(), node, "graph validate");
  INGOT_FE_CHECK(g->build_operation_graph(handle), node, "graph operation graph");
  INGOT_FE_CHECK(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), node, "graph heuristics");
  if (k.dtype == DataType::kFloat32) g->deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE});  // no TF32
  g->deselect_workspace_greater_than(kWorkspaceBytes);
  INGOT_FE_CHECK(g->check_support(handle), node, "graph support");
  return g;
}

// What make_graph builds from (the spec and the key's dims, not the node) and the device: equal
// signatures give the same cuDNN graph.
std::string graph_signature(const ConvSpec& s, const ConvKey& k) {
  std::string sig = device_tag() + "conv s" + std::to_string(s.spatial);
  for (int i = 0; i < 3; ++i)
    sig += " " + std::to_string(s.pads[i]) + "," + std::to_string(s.strides[i]) + "," + std::to_string(s.dilations[i]);
  sig += " a" + s.activation;
  for (float v : s.activation_params) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    sig += "," + std::to_string(bits);
  }
  sig += " r" + std::to_string(s.residual_after_activation) + " n" + std::to_string(k.nd);
  for (int i = 0; i < k.nd; ++i) sig += "," + std::to_string(k.x[i]) + "/" + std::to_string(k.w[i]);
  sig += " f" + std::to_string(k.bias) + std::to_string(k.residual) + std::to_string(k.channels_last) + " t" +
         std::to_string(static_cast<int>(k.dtype));
  return sig;
}

// Makes the shared graph on first use; the caller holds sg.mu.
Status ensure_made(SharedGraph& sg, const ir::Node& node, const ConvSpec& s, const ConvKey& key, cudnnHandle_t handle) {
  return ensure_graph(sg, [&] { return make_graph(node, s, key, handle); });
}

// The plan for `key` that is the index-th to build among the heuristics' list.
Status build_plan(const ir::Node& node, const ConvSpec& s, const ConvKey& key, int index, cudnnHandle_t handle,
                  GraphPlan* p) {
  p->key = key;
  p->y = conv_output_dims(s, key);
  p->shared = shared_graph(graph_signature(s, key));
  SharedGraph& sg = *p->shared;
  std::lock_guard<std::mutex> lock(sg.mu);
  INGOT_RETURN_IF_ERROR(ensure_made(sg, node, s, key, handle));
  p->graph = sg.graph;
  const int64_t count = static_cast<int64_t>(sg.built.size());
  int built = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!plan_builds(sg, handle, i)) continue;
    if (built++ < index) continue;
    int64_t ws = 0;
    if (!p->graph->get_workspace_size_plan_at_index(i, ws).is_good() || ws > kWorkspaceBytes) continue;
    p->plan_index = i;
    p->workspace = ws;
    if (!p->graph->get_plan_name_at_index(i, p->engine).is_good()) p->engine = "plan " + std::to_string(i);
    return Status::Ok();
  }
  return unsupported(node.describe(), ": cuDNN graph API has ", built, " buildable plans of ", count,
                     ", no plan number ", index);
}

std::atomic<int64_t> g_deserialized{0};

// A plan from an engine's record (no compilation), for a call of the record's dims.
Status load_plan(const ir::Node& node, const ConvCall& c, const PlanRecord& rec, cudnnHandle_t handle, GraphPlan* p) {
  auto g = std::make_shared<fe::graph::Graph>();
  // No warm-up capture: the runtime's first query runs eagerly before any CUDA graph capture.
  // The frontend parses the blob with nlohmann::json, which throws on bytes that are not UBJSON.
  try {
    INGOT_FE_CHECK(g->deserialize(handle, rec.blob, false, /*run_warmup=*/false), node, "plan deserialize");
  } catch (const std::exception& e) {
    return unsupported(node.describe(), ": cuDNN plan deserialize: ", e.what());
  }
  int64_t ws = 0;
  INGOT_FE_CHECK(g->get_workspace_size(ws), node, "deserialized plan workspace");
  if (ws > kWorkspaceBytes) return unsupported(node.describe(), ": deserialized plan needs ", ws, " workspace bytes");
  p->key = c.key;
  p->y = conv_output_dims(c.spec, c.key);
  p->graph = std::move(g);
  p->plan_index = 0;  // a deserialized graph holds the one plan
  p->workspace = ws;
  p->engine = rec.engine + " (deserialized)";
  g_deserialized.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

// Record encoding: {2, index, nd, flags (bias | residual << 1 | channels_last << 2), dtype,
// x[nd] and w[nd] as int32, workspace as int64, name length u32 + name, blob length u32 + blob},
// little-endian as the host writes it (engines are bound to their GPU and build anyway).
std::vector<uint8_t> encode_record(int index, const PlanRecord& r) {
  std::vector<uint8_t> out = {2, static_cast<uint8_t>(index), static_cast<uint8_t>(r.key.nd),
                              static_cast<uint8_t>(r.key.bias | (r.key.residual << 1) | (r.key.channels_last << 2)),
                              static_cast<uint8_t>(r.key.dtype)};
  for (int i = 0; i < r.key.nd; ++i) put_bytes<int32_t>(out, r.key.x[static_cast<size_t>(i)]);
  for (int i = 0; i < r.key.nd; ++i) put_bytes<int32_t>(out, r.key.w[static_cast<size_t>(i)]);
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
  uint8_t version = 0, idx = 0, nd = 0, flags = 0, dtype = 0;
  if (!rd.get(&version) || !rd.get(&idx) || !rd.get(&nd) || !rd.get(&flags) || !rd.get(&dtype)) return std::nullopt;
  if (version != 2 || idx != index || nd < 3 || nd > kConvMaxNd || flags > 7) return std::nullopt;
  const auto t = static_cast<DataType>(dtype);
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16) return std::nullopt;
  PlanRecord r;
  r.key.nd = nd;
  r.key.bias = flags & 1;
  r.key.residual = (flags >> 1) & 1;
  r.key.channels_last = (flags >> 2) & 1;
  r.key.dtype = t;
  for (int i = 0; i < nd; ++i)
    if (!rd.get(&r.key.x[static_cast<size_t>(i)]) || r.key.x[static_cast<size_t>(i)] <= 0) return std::nullopt;
  for (int i = 0; i < nd; ++i)
    if (!rd.get(&r.key.w[static_cast<size_t>(i)]) || r.key.w[static_cast<size_t>(i)] <= 0) return std::nullopt;
  uint32_t name_len = 0, blob_len = 0;
  const uint8_t* p = nullptr;
  if (!rd.get(&r.workspace) || r.workspace < 0 || !rd.get(&name_len) || !rd.bytes(name_len, &p)) return std::nullopt;
  r.engine.assign(reinterpret_cast<const char*>(p), name_len);
  if (!rd.get(&blob_len) || blob_len == 0 || !rd.bytes(blob_len, &p) || !rd.done()) return std::nullopt;
  r.blob.assign(p, p + blob_len);
  return r;
}

class CudnnGraphConvTactic : public Tactic {
 public:
  explicit CudnnGraphConvTactic(int index, std::optional<PlanRecord> record = std::nullopt)
      : index_(index), record_(std::move(record)) {}

  std::string name() const override { return kPrefix + std::to_string(index_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    return conv_handles_op(node) && activation_supported(node) && check_conv_types(node, inputs).ok();
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return kWorkspaceBytes; }

  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(ConvCall c, read_conv_call(io));
    if (c.empty) return Status::Ok();
    c.key = graph_key(c.key, c.spec);
    const Tensor *x = c.x, *w = c.w, *b = c.b, *r = c.r;
    Tensor& y = *c.y;
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const GraphPlan* plan = cache_.find(c.key);
    std::unique_ptr<GraphPlan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<GraphPlan>();
      // The engine's plan for these dims when it has one and this cuDNN takes it back.
      if (!record_ || !record_->key.same_call(c.key) || !load_plan(node, c, *record_, handle, local.get()).ok())
        INGOT_RETURN_IF_ERROR(build_plan(node, c.spec, c.key, index_, handle, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_RETURN_IF_ERROR(check_conv_output(c, plan->y));

    INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
    // Ascending UIDs: x, w, [b], [r], y.
    std::array<void*, 5> ptrs{};
    int n = 0;
    ptrs[n++] = const_cast<void*>(x->raw());
    ptrs[n++] = const_cast<void*>(w->raw());
    if (b) ptrs[n++] = const_cast<void*>(b->raw());
    if (r) ptrs[n++] = const_cast<void*>(r->raw());
    ptrs[n++] = y.mutable_raw();
    fe::error_t st = plan->graph->execute_plan_at_index(handle, ptrs.data(), n, io.workspace, plan->plan_index);
    if (!st.is_good())
      return internal_error(node.describe(), ": cuDNN graph execute (", plan->engine, ") failed: ", st.get_message());
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {1, static_cast<uint8_t>(index_)}; }

  // The plan at the builder's opt shapes, serialized (it was built when this candidate was
  // timed, so this compiles nothing new); the plain form when cuDNN cannot serialize it.
  std::vector<uint8_t> serialize_for(const ir::Node& node, const std::vector<Shape64>& in) const override {
    auto rec = plan_record(node, in);
    return rec.ok() ? encode_record(index_, *rec) : serialize();
  }

 private:
  Result<PlanRecord> plan_record(const ir::Node& node, const std::vector<Shape64>& in) const {
    if (!cuda_device_present() || in.size() < 2 || node.outputs().empty() || !node.outputs()[0])
      return unsupported("no device or shapes");
    INGOT_ASSIGN_OR_RETURN(ConvSpec spec, parse_conv_spec(node, static_cast<int>(in[0].size()) - 2));
    auto present = [&](int i) {
      return i >= 0 && static_cast<size_t>(i) < node.inputs().size() && node.inputs()[static_cast<size_t>(i)];
    };
    const Shape64 xs = spec.channels_last ? to_channels_first(in[0]) : in[0];
    const Shape64 ws = spec.channels_last ? to_channels_first(in[1]) : in[1];
    INGOT_ASSIGN_OR_RETURN(ConvKey key, make_conv_key(node, spec, node.outputs()[0]->dtype(), xs, ws,
                                                      present(spec.bias_input), present(spec.residual_input)));
    key = graph_key(key, spec);
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    GraphPlan p;
    INGOT_RETURN_IF_ERROR(build_plan(node, spec, key, index_, handle, &p));
    PlanRecord r;
    r.key = key;
    r.key.node = nullptr;
    r.workspace = p.workspace;
    r.engine = p.engine;
    std::lock_guard<std::mutex> lock(p.shared->mu);
    // Built already: this only makes it the graph's candidate, which serialize() writes.
    INGOT_FE_CHECK(p.graph->build_plan_at_index(handle, p.plan_index), node, "plan select");
    try {
      INGOT_FE_CHECK(p.graph->serialize(r.blob, /*serialize_structure=*/false), node, "plan serialize");
    } catch (const std::exception& e) {
      return unsupported(node.describe(), ": cuDNN plan serialize: ", e.what());
    }
    if (r.blob.empty() || r.blob.size() > (64u << 20)) return unsupported("plan blob size");
    return r;
  }

  int index_;
  std::optional<PlanRecord> record_;  // from the engine
  mutable PlanCache<GraphPlan> cache_;
};

// How many plans to offer: those cuDNN's heuristics list at the node's (guessed) shapes, up to
// kMaxCandidates; 1 when that cannot be asked. Which of them build is found when they are timed.
int plan_count(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  if (!cuda_device_present()) return 1;
  ConvSpec spec;
  auto key = guessed_conv_key(node, inputs, &spec);
  if (!key.ok()) return 1;
  *key = graph_key(*key, spec);
  auto handle = cudnn_thread_handle(node);
  if (!handle.ok()) return 1;
  std::shared_ptr<SharedGraph> sg = shared_graph(graph_signature(spec, *key));
  std::lock_guard<std::mutex> lock(sg->mu);
  if (!ensure_made(*sg, node, spec, *key, *handle).ok()) return 0;  // cuDNN takes no plan: offer none
  return static_cast<int>(std::clamp<int64_t>(sg->graph->get_execution_plan_count(), 1, kMaxCandidates));
}

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (!conv_handles_op(node) || !activation_supported(node) || !check_conv_types(node, inputs).ok()) return out;
  int n = plan_count(node, inputs);
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<CudnnGraphConvTactic>(i));
  return out;
}

// "cuda.cudnn.graph.conv.<i>" with 0 <= i < kMaxCandidates; params empty, {1, i} or a plan
// record {2, i, ...} (serialize_for).
std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  const bool record = params.size() > 2 && params[0] == 2;
  const int index = conv_tactic_index(name, kPrefix, kMaxCandidates, record ? std::vector<uint8_t>{} : params);
  if (index < 0) return nullptr;
  if (!record) return std::make_unique<CudnnGraphConvTactic>(index);
  auto rec = decode_record(params, index);
  return rec ? std::make_unique<CudnnGraphConvTactic>(index, std::move(rec)) : nullptr;
}

}  // namespace

TacticFamily cudnn_graph_conv_family() { return TacticFamily{"cudnn.graph.conv", candidates, create}; }

int64_t cudnn_graph_conv_plans_deserialized() { return g_deserialized.load(std::memory_order_relaxed); }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
