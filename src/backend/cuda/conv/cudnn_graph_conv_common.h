// Copyright ingot authors. Apache-2.0.
//
// What the cuDNN graph-API convolution families share (cudnn_graph_conv_tactics.cc: Conv and
// ingot::FusedConv; cudnn_quant_conv_tactics.cc: ingot::QuantConv): the strides of a layout, the
// convolution's output dims, the node's activation as cuDNN pointwise operations, and the plan
// machinery around a family's graph (GraphConvTactic): one shared graph per signature, the i-th
// buildable plan of its heuristics, plans cached per tactic, the plan record kept in an engine's
// params and loaded back, execution with pointers in tensor-UID order. Included only where
// INGOT_WITH_CUDNN_FRONTEND is defined (cudnn_frontend.h is heavy).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/param_bytes.h"
#include "backend/cuda/core/plan_cache.h"

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

/// The part of a graph signature both families write from the spec: the first `windows` pads,
/// strides and dilations (" p,s,d" each), then " a<activation>" and its parameters' bits (",<u32>").
std::string conv_spec_signature(const ConvSpec& s, int windows);

/// The part of a graph signature from the key's dims: " n<nd>", then ",<x[i]>/<w[i]>" per dim.
std::string conv_dims_signature(const ConvKey& k);

/// Both families' bounds: the workspace a plan may need (plans needing more are passed over, and
/// workspace_bytes() asks for this much) and the candidates offered ("<prefix>0" .. "<prefix>2").
constexpr int64_t kGraphConvWorkspaceBytes = 64ll << 20;
constexpr int kGraphConvMaxCandidates = 3;
/// params {2, i, record} hold a plan record; {1, i} names the index alone (Tactic::serialize).
constexpr uint8_t kGraphConvRecordVersion = 2;
/// The most input tensors a family's graph takes (QuantConv: X, W, x_scale, w_scale, B, R, y_scale).
constexpr size_t kGraphConvMaxInputs = 8;

/// A plan of a family's graph for one call, built (build_graph_conv_plan) or deserialized from an
/// engine's record (load_graph_conv_plan).
struct GraphConvPlan {
  std::array<int64_t, kConvMaxNd> y{};  // channels-first output dims
  std::shared_ptr<SharedGraph> shared;  // null for a plan deserialized from an engine
  std::shared_ptr<cudnn_frontend::graph::Graph> graph;
  int64_t plan_index = 0;
  int64_t workspace = 0;
  std::string engine;  // the plan's name, for messages
};

/// A plan serialized into an engine, beside the family's key (the call it was built for).
struct GraphConvRecord {
  int64_t workspace = 0;
  std::string engine;
  std::vector<uint8_t> blob;
};

/// Makes a family's operation graph for one signature, its execution plans listed (not yet built).
using GraphConvMaker = std::function<Result<std::shared_ptr<cudnn_frontend::graph::Graph>>()>;

/// Lists a family graph's execution plans: validates it, builds its operation graph, asks the
/// heuristics (mode A, then the fallback list), drops tensor-core plans when `no_tf32` (fp32 would
/// compute in TF32) and plans needing more than kGraphConvWorkspaceBytes, and checks support.
/// kUnsupported naming the node and the stage cuDNN refused.
Status list_graph_conv_plans(cudnn_frontend::graph::Graph& g, cudnnHandle_t handle, const ir::Node& node,
                             bool no_tf32);

/// The plan of the process's graph for `signature` (made with `make` on first use) that is the
/// index-th to build among the heuristics' list within kGraphConvWorkspaceBytes; p->y from `s` and
/// `conv`. kUnsupported naming the node when the graph cannot be made or has fewer plans.
Status build_graph_conv_plan(const ir::Node& node, const ConvSpec& s, const ConvKey& conv, const std::string& signature,
                             const GraphConvMaker& make, int index, cudnnHandle_t handle, GraphConvPlan* p);

/// The plan in an engine's record (no compilation), for a call of the record's dims.
Status load_graph_conv_plan(const ir::Node& node, const ConvSpec& s, const ConvKey& conv, const GraphConvRecord& rec,
                            cudnnHandle_t handle, GraphConvPlan* p);

/// p's built plan serialized for load_graph_conv_plan (takes p.shared->mu); kUnsupported when
/// cuDNN cannot, or the blob is empty or over 64 MiB.
Result<std::vector<uint8_t>> serialize_graph_conv_plan(const GraphConvPlan& p, cudnnHandle_t handle,
                                                       const ir::Node& node);

/// How many candidates to offer for the graph of `signature` (made with `make` on first use): the
/// plans cuDNN's heuristics list, clamped to [min_count, kGraphConvMaxCandidates]; 0 when the graph
/// cannot be made (cuDNN takes no plan).
int graph_conv_plan_count(const std::string& signature, const GraphConvMaker& make, int min_count);

/// A record's part after the family's key header: x[nd] and w[nd] of `conv` as int32, workspace as
/// int64, name length u32 + name, blob length u32 + blob, in the host's byte order.
void put_graph_conv_record(const ConvKey& conv, const GraphConvRecord& r, std::vector<uint8_t>& out);

/// Reads what put_graph_conv_record wrote into conv->x, conv->w (conv->nd set) and *r; false when a
/// dim is not positive, the workspace negative, the blob empty, anything is cut short or left over.
bool get_graph_conv_record(ParamReader& rd, ConvKey* conv, GraphConvRecord* r);

/// Runs `plan` on io.stream: device pointers in ascending tensor-UID order, the present entries of
/// `in` (nullptr: an absent tensor, skipped), then y.
Status execute_graph_conv_plan(cudnnHandle_t handle, const StepIO& io, const GraphConvPlan& plan,
                               const std::array<const Tensor*, kGraphConvMaxInputs>& in, Tensor* y);

/// A step as a family's graph takes it: the call's key, and its input tensors in ascending UID
/// order (nullptr for absent ones); Y, the output, has the largest UID.
template <class Key>
struct GraphConvArgs {
  Key key;
  std::array<const Tensor*, kGraphConvMaxInputs> in{};
};

/// The tactic "<Family::kPrefix><i>" of a graph-API convolution family: runs the i-th execution
/// plan of cuDNN's heuristics (mode A, then the fallback list) that builds at the call's shape,
/// within kGraphConvWorkspaceBytes. Plans are built on a shape's first call from the process's
/// shared graph of the call's signature and cached in the tactic (lookups take no lock); the engine
/// stores the plan built for the builder's opt shapes (params {2, i, record}), and a loaded
/// engine's first call of those dims deserializes it instead of compiling it again (other dims, or
/// a blob this cuDNN refuses, build as before). Family, what differs:
///   using Key: the call as the graph depends on it (== with the node, same_call without);
///   kPrefix; kMinCandidates: offered when cuDNN's heuristics list fewer plans;
///   conv(key): its ConvKey (the dims);
///   supports(node, inputs): Tactic::supports, and whether candidates() offers any;
///   read_call(io, c, tactic, &args): the key and tensors of a step read by read_conv_call (c), with
///     the family's checks; false when there is nothing to run (an empty output);
///   opt_key(node, shapes, &spec): the key at the builder's shapes (serialize_for);
///   guessed_key(node, inputs, &spec): the key at types, symbolic dims guessed (candidates);
///   signature(spec, key): everything make_graph builds from, and the device;
///   make_graph(node, spec, key, handle): the operation graph, plans listed;
///   put_key(key, out) / get_key(rd, &key): the record's bytes between {2, i} and the dims (nd,
///     flags, types), get_key refusing values out of range.
template <class Family>
class GraphConvTactic : public Tactic {
 public:
  using Key = typename Family::Key;
  struct Plan : GraphConvPlan {
    Key key;
  };
  struct Record : GraphConvRecord {
    Key key;  // node unset
  };

  explicit GraphConvTactic(int index, std::optional<Record> record = std::nullopt)
      : index_(index), record_(std::move(record)) {}

  std::string name() const override { return Family::kPrefix + std::to_string(index_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    return Family::supports(node, inputs);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override {
    return kGraphConvWorkspaceBytes;
  }

  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    if (!io.node) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(ConvCall c, read_conv_call(io));
    GraphConvArgs<Key> a;
    INGOT_ASSIGN_OR_RETURN(const bool run, Family::read_call(io, c, *this, &a));
    if (!run) return Status::Ok();
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const Plan* plan = cache_.find(a.key);
    std::unique_ptr<Plan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<Plan>();
      // The engine's plan for this call when it has one and this cuDNN takes it back.
      if (!record_ || !record_->key.same_call(a.key) || !load_plan(node, c.spec, a.key, handle, local.get()).ok())
        INGOT_RETURN_IF_ERROR(build_plan(node, c.spec, a.key, index_, handle, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_RETURN_IF_ERROR(check_conv_output(c, plan->y));
    return execute_graph_conv_plan(handle, io, *plan, a.in, c.y);
  }

  std::vector<uint8_t> serialize() const override { return {1, static_cast<uint8_t>(index_)}; }

  // The plan at the builder's opt shapes, serialized (it was built when this candidate was
  // timed, so this compiles nothing new); the plain form when cuDNN cannot serialize it.
  std::vector<uint8_t> serialize_for(const ir::Node& node, const std::vector<Shape64>& in) const override {
    auto rec = plan_record(node, in);
    return rec.ok() ? encode_record(index_, *rec) : serialize();
  }

  /// TacticFamily::candidates: one tactic per plan to offer (plan_count).
  static std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node,
                                                         const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    if (!Family::supports(node, inputs)) return out;
    const int n = plan_count(node, inputs);
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<GraphConvTactic>(i));
    return out;
  }

  /// TacticFamily::create: "<prefix><i>" with 0 <= i < kGraphConvMaxCandidates; params empty,
  /// {1, i} or a plan record {2, i, ...} (serialize_for).
  static std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
    const bool record = params.size() > 2 && params[0] == kGraphConvRecordVersion;
    const int index =
        conv_tactic_index(name, Family::kPrefix, kGraphConvMaxCandidates, record ? std::vector<uint8_t>{} : params);
    if (index < 0) return nullptr;
    if (!record) return std::make_unique<GraphConvTactic>(index);
    auto rec = decode_record(params, index);
    return rec ? std::make_unique<GraphConvTactic>(index, std::move(rec)) : nullptr;
  }

  /// The TacticFamily `name` of these tactics.
  static TacticFamily family(const char* name) { return TacticFamily{name, candidates, create}; }

  /// How many plans this family's tactics took from engine records (tests).
  static int64_t plans_deserialized() { return deserialized_.load(std::memory_order_relaxed); }

 private:
  static Status build_plan(const ir::Node& node, const ConvSpec& s, const Key& key, int index, cudnnHandle_t handle,
                           Plan* p) {
    p->key = key;
    return build_graph_conv_plan(node, s, Family::conv(key), Family::signature(s, key),
                                 [&] { return Family::make_graph(node, s, key, handle); }, index, handle, p);
  }

  Status load_plan(const ir::Node& node, const ConvSpec& s, const Key& key, cudnnHandle_t handle, Plan* p) const {
    INGOT_RETURN_IF_ERROR(load_graph_conv_plan(node, s, Family::conv(key), *record_, handle, p));
    p->key = key;
    deserialized_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();
  }

  Result<Record> plan_record(const ir::Node& node, const std::vector<Shape64>& in) const {
    if (!cuda_device_present()) return unsupported("no device or shapes");
    ConvSpec spec;
    INGOT_ASSIGN_OR_RETURN(Key key, Family::opt_key(node, in, &spec));
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    Plan p;
    INGOT_RETURN_IF_ERROR(build_plan(node, spec, key, index_, handle, &p));
    Record r;
    r.key = key;
    Family::conv(r.key).node = nullptr;
    r.workspace = p.workspace;
    r.engine = p.engine;
    INGOT_ASSIGN_OR_RETURN(r.blob, serialize_graph_conv_plan(p, handle, node));
    return r;
  }

  // Record encoding: {2, index, Family::put_key's bytes, put_graph_conv_record's}.
  static std::vector<uint8_t> encode_record(int index, const Record& r) {
    std::vector<uint8_t> out = {kGraphConvRecordVersion, static_cast<uint8_t>(index)};
    Family::put_key(r.key, out);
    put_graph_conv_record(Family::conv(r.key), r, out);
    return out;
  }

  // The record of params {2, index, ...}; nullopt when anything is out of range or left over.
  static std::optional<Record> decode_record(const std::vector<uint8_t>& params, int index) {
    ParamReader rd(params);
    uint8_t version = 0, idx = 0;
    if (!rd.get(&version) || !rd.get(&idx) || version != kGraphConvRecordVersion || idx != index) return std::nullopt;
    Record r;
    if (!Family::get_key(rd, &r.key) || !get_graph_conv_record(rd, &Family::conv(r.key), &r)) return std::nullopt;
    return r;
  }

  // How many plans to offer: those cuDNN's heuristics list at the node's (guessed) shapes, up to
  // kGraphConvMaxCandidates (at least Family::kMinCandidates); none when cuDNN takes no plan; 1
  // when that cannot be asked (no device). Which of them build is found when they are timed.
  static int plan_count(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    if (!cuda_device_present()) return 1;
    ConvSpec spec;
    auto key = Family::guessed_key(node, inputs, &spec);
    if (!key.ok()) return 1;
    auto handle = cudnn_thread_handle(node);
    if (!handle.ok()) return 1;
    return graph_conv_plan_count(
        Family::signature(spec, *key), [&] { return Family::make_graph(node, spec, *key, *handle); },
        Family::kMinCandidates);
  }

  int index_;
  std::optional<Record> record_;  // from the engine
  mutable PlanCache<Plan> cache_;
  static inline std::atomic<int64_t> deserialized_{0};
};

}  // namespace ingot::backend::cuda
