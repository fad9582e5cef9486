// Copyright ingot authors. Apache-2.0.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include "backend/cuda/core/cudnn_frontend_util.h"

#include <cuda_runtime_api.h>

#include <exception>
#include <unordered_map>

namespace ingot::backend::cuda {

std::shared_ptr<SharedGraph> shared_graph(const std::string& signature) {
  constexpr size_t kMaxSharedGraphs = 4096;  // a server seeing ever new shapes stops sharing, not growing
  static std::mutex mu;
  // Never destroyed: graphs hold cuDNN descriptors, whose destructors must not run after the CUDA
  // runtime is torn down at exit (the same reason cudnn_thread_handle never destroys its handles).
  static auto* graphs = new std::unordered_map<std::string, std::shared_ptr<SharedGraph>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = graphs->find(signature);
  if (it != graphs->end()) return it->second;
  auto g = std::make_shared<SharedGraph>();
  if (graphs->size() < kMaxSharedGraphs) graphs->emplace(signature, g);
  return g;
}

Status ensure_graph(SharedGraph& sg, const std::function<Result<std::shared_ptr<cudnn_frontend::graph::Graph>>()>& make) {
  if (!sg.made) {
    sg.made = true;
    auto g = make();
    sg.status = g.status();
    if (g.ok()) {
      sg.graph = *g;
      sg.built.assign(static_cast<size_t>(std::max<int64_t>(sg.graph->get_execution_plan_count(), 0)), 0);
    }
  }
  return sg.status;
}

bool plan_builds(SharedGraph& sg, cudnnHandle_t handle, int64_t i) {
  if (i < 0 || static_cast<size_t>(i) >= sg.built.size()) return false;
  int8_t& state = sg.built[static_cast<size_t>(i)];
  if (state == 0) state = sg.graph->build_plan_at_index(handle, i).is_good() ? 1 : -1;
  return state > 0;
}

Result<PickedPlan> pick_plan(SharedGraph& sg, cudnnHandle_t handle, int nth, int64_t max_workspace,
                             const std::string& who) {
  if (!sg.graph) return unsupported(who, ": no cuDNN graph");
  const int64_t count = static_cast<int64_t>(sg.built.size());
  int built = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!plan_builds(sg, handle, i)) continue;
    if (built++ < nth) continue;
    PickedPlan p;
    if (!sg.graph->get_workspace_size_plan_at_index(i, p.workspace).is_good() || p.workspace > max_workspace) continue;
    p.index = i;
    if (!sg.graph->get_plan_name_at_index(i, p.name).is_good()) p.name = "plan " + std::to_string(i);
    return p;
  }
  return unsupported(who, ": cuDNN graph API has ", built, " buildable plans of ", count, ", no plan number ", nth);
}

Result<std::shared_ptr<cudnn_frontend::graph::Graph>> deserialize_plan(cudnnHandle_t handle,
                                                                       const std::vector<uint8_t>& blob,
                                                                       int64_t max_workspace, int64_t* workspace,
                                                                       const std::string& who) {
  auto g = std::make_shared<cudnn_frontend::graph::Graph>();
  // No warm-up run: a first query runs eagerly, before any CUDA graph capture. The frontend parses
  // the blob with nlohmann::json, which throws on bytes that are not UBJSON.
  try {
    auto st = g->deserialize(handle, blob, false, /*run_warmup=*/false);
    if (!st.is_good()) return unsupported(who, ": cuDNN plan deserialize: ", st.get_message());
  } catch (const std::exception& e) {
    return unsupported(who, ": cuDNN plan deserialize: ", e.what());
  }
  int64_t ws = 0;
  auto st = g->get_workspace_size(ws);
  if (!st.is_good()) return unsupported(who, ": cuDNN deserialized plan workspace: ", st.get_message());
  if (ws > max_workspace) return unsupported(who, ": deserialized plan needs ", ws, " workspace bytes");
  *workspace = ws;
  return g;
}

Result<std::vector<uint8_t>> serialize_plan(SharedGraph& sg, cudnnHandle_t handle, int64_t index,
                                            const std::string& who) {
  if (!sg.graph) return unsupported(who, ": no cuDNN graph");
  // Built already: this only makes it the graph's candidate, which serialize() writes.
  auto st = sg.graph->build_plan_at_index(handle, index);
  if (!st.is_good()) return unsupported(who, ": cuDNN plan select: ", st.get_message());
  std::vector<uint8_t> blob;
  try {
    st = sg.graph->serialize(blob, /*serialize_structure=*/false);
    if (!st.is_good()) return unsupported(who, ": cuDNN plan serialize: ", st.get_message());
  } catch (const std::exception& e) {
    return unsupported(who, ": cuDNN plan serialize: ", e.what());
  }
  return blob;
}

std::string device_tag() {
  int dev = 0;
  (void)cudaGetDevice(&dev);
  return "d" + std::to_string(dev) + " ";
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
