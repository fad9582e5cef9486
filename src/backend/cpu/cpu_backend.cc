// Copyright ingot authors. Apache-2.0.
//
// The CPU backend for engines: one tactic, "cpu.reference", that runs a step on the reference
// kernels, writing straight into the step's arena or binding views. CPU engines go through
// the same lowering, memory planning, serialization and runtime as GPU engines, which is what
// lets CI test all of it without a GPU. (Reference kernels allocate scratch internally, so the
// no-allocation guarantee of enqueue belongs to GPU backends.)
#include "backend/cpu/executor.h"
#include "backend/cpu/kernel.h"
#include "backend/device.h"
#include "backend/tactic.h"

namespace ingot::backend {

namespace {

class CpuReferenceTactic : public Tactic {
 public:
  std::string name() const override { return "cpu.reference"; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>&) const override {
    return cpu::KernelRegistry::global().find(node.op_type(), node.domain()) != nullptr;
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }
  bool handles_dynamic_outputs() const override { return true; }
  Status enqueue(StepIO& io) const override {
    return cpu::run_node_into(*io.node, io.inputs, *io.outputs, io.subgraph_runner, !io.in_place);
  }
};

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device& device() const override { return host_device(); }
  std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node,
                                                  const std::vector<ir::TensorType>& inputs) const override {
    std::vector<std::unique_ptr<Tactic>> v;
    auto t = std::make_unique<CpuReferenceTactic>();
    if (t->supports(node, inputs)) v.push_back(std::move(t));
    return v;
  }
  Result<std::unique_ptr<Tactic>> create_tactic(const std::string& name, const std::vector<uint8_t>&) const override {
    if (name == "cpu.reference") return std::unique_ptr<Tactic>(new CpuReferenceTactic());
    return unsupported("the cpu backend has no tactic '", name, "' (engine built by another ingot version?)");
  }
};

}  // namespace

}  // namespace ingot::backend

#ifdef INGOT_WITH_CUDA
namespace ingot::backend::cuda {
Result<const Backend*> cuda_backend();  // cuda/cuda_backend.cc
}
#endif

namespace ingot::backend {

Result<const Backend*> find_backend(const std::string& name) {
  static const CpuBackend cpu;
  if (name == "cpu") return static_cast<const Backend*>(&cpu);
#ifdef INGOT_WITH_CUDA
  if (name == "cuda") return cuda::cuda_backend();
#else
  if (name == "cuda") return unsupported("this ingot was built without CUDA (-DINGOT_CUDA=OFF)");
#endif
  return invalid_argument("unknown backend '", name, "' (backends: cpu, cuda)");
}

}  // namespace ingot::backend
