// Copyright ingot authors. Apache-2.0.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include "backend/cuda/core/cudnn_frontend_util.h"

#include <cuda_runtime_api.h>

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

std::string device_tag() {
  int dev = 0;
  (void)cudaGetDevice(&dev);
  return "d" + std::to_string(dev) + " ";
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
