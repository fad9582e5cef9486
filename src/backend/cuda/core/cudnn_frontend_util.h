// Copyright ingot authors. Apache-2.0.
//
// What the cudnn-frontend (graph API) tactics share: their error check and element types.
// Included only where INGOT_WITH_CUDNN_FRONTEND is defined (cudnn_frontend.h is heavy).
#pragma once

#include <cudnn_frontend.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "core/dtype.h"
#include "core/status.h"

namespace ingot::backend::cuda {

/// A cudnn-frontend call that failed: unsupported (the family then offers nothing or the
/// autotuner drops the candidate), naming the node, the stage and cuDNN's message.
#define INGOT_FE_CHECK(expr, node, what)                                                                      \
  do {                                                                                                        \
    ::cudnn_frontend::error_t ingot_fe_st_ = (expr);                                                          \
    if (!ingot_fe_st_.is_good())                                                                              \
      return ::ingot::make_status(::ingot::StatusCode::kUnsupported, (node).describe(), ": cuDNN ", what,    \
                                  ": ", ingot_fe_st_.get_message());                                          \
  } while (0)

inline cudnn_frontend::DataType_t fe_type(DataType t) {
  switch (t) {
    case DataType::kFloat16: return cudnn_frontend::DataType_t::HALF;
    case DataType::kBFloat16: return cudnn_frontend::DataType_t::BFLOAT16;
    default: return cudnn_frontend::DataType_t::FLOAT;
  }
}

inline cudnn_frontend::DataType_t fe_type(FloatType t) {
  switch (t) {
    case FloatType::kF16: return cudnn_frontend::DataType_t::HALF;
    case FloatType::kBF16: return cudnn_frontend::DataType_t::BFLOAT16;
    default: return cudnn_frontend::DataType_t::FLOAT;
  }
}

/// One cuDNN operation graph per distinct problem in the process, shared by every tactic, step
/// and engine that runs it: made (heuristics asked) once, each plan built once. Runtime-fusion
/// plans compile with NVRTC when built (0.1-1 s each); before sharing, every candidate list, every
/// candidate i (which needs plans 0..i tried) and every engine load built them again. Building
/// takes `mu`; executing a built plan takes nothing (plans are never rebuilt or moved once built).
struct SharedGraph {
  std::mutex mu;
  bool made = false;
  Status status;  // the make function's
  std::shared_ptr<cudnn_frontend::graph::Graph> graph;
  std::vector<int8_t> built;  // per heuristics plan: 0 not tried, 1 built, -1 does not build
};

/// The process's graph for `signature` (a string naming everything the graph is made from and the
/// device); a fresh one of the caller's own once the registry holds kMaxSharedGraphs.
std::shared_ptr<SharedGraph> shared_graph(const std::string& signature);

/// Makes sg's graph with `make` on first use (the caller holds sg.mu); the make status after.
Status ensure_graph(SharedGraph& sg, const std::function<Result<std::shared_ptr<cudnn_frontend::graph::Graph>>()>& make);

/// Whether heuristics plan `i` of a made graph builds, building it on first ask (caller holds sg.mu).
bool plan_builds(SharedGraph& sg, cudnnHandle_t handle, int64_t i);

/// The current device's ordinal, for signatures ("d<n> ").
std::string device_tag();

/// A heuristics plan of a made graph: its index in the graph's list, workspace and name.
struct PickedPlan {
  int64_t index = 0;
  int64_t workspace = 0;
  std::string name;
};

/// The `nth` (0-based) plan of sg's made graph that builds and needs at most `max_workspace`
/// bytes, in the heuristics' order, building plans up to it on first ask (the caller holds sg.mu);
/// kUnsupported naming `who` when there are fewer ("... buildable plans of ...").
Result<PickedPlan> pick_plan(SharedGraph& sg, cudnnHandle_t handle, int nth, int64_t max_workspace,
                             const std::string& who);

/// A graph holding the one plan in `blob` (serialize_plan's), built without compiling anything,
/// and its workspace; kUnsupported when this cuDNN refuses the blob (bytes that are not its
/// format included) or the plan needs more than `max_workspace` bytes.
Result<std::shared_ptr<cudnn_frontend::graph::Graph>> deserialize_plan(cudnnHandle_t handle,
                                                                       const std::vector<uint8_t>& blob,
                                                                       int64_t max_workspace, int64_t* workspace,
                                                                       const std::string& who);

/// sg's built plan `index` serialized for deserialize_plan (the caller holds sg.mu): it is made
/// the graph's candidate, which is what the graph serializes. kUnsupported when cuDNN cannot.
Result<std::vector<uint8_t>> serialize_plan(SharedGraph& sg, cudnnHandle_t handle, int64_t index,
                                            const std::string& who);

}  // namespace ingot::backend::cuda
