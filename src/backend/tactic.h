// Copyright ingot authors. Apache-2.0.
//
// The Tactic and Backend interfaces: every candidate implementation of a node on a backend is a
// Tactic, and the builder (and its autotuner) sees only this interface.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace ingot::backend {

/// Everything a tactic needs to run one step.
struct StepIO {
  const ir::Node* node = nullptr;
  std::vector<const Tensor*> inputs;  ///< nullptr for omitted optional inputs
  /// Output views (into the arena or caller bindings) with their current shapes; a tactic
  /// writes every element. An undefined Tensor marks a data-dependent output the tactic must
  /// allocate (kDynamic storage).
  std::vector<Tensor>* outputs = nullptr;
  void* workspace = nullptr;
  void* stream = nullptr;  ///< cudaStream_t on the CUDA backend; unused on the CPU
  /// The output view aliases an input (the planner made the step in place): do not clear it.
  bool in_place = false;
  /// Runs If/Loop/Scan bodies with the context's values as outer scope (CPU backend).
  std::function<Result<std::vector<Tensor>>(const ir::Graph&, const std::vector<Tensor>&)> subgraph_runner;
  /// Memory for a data-dependent output (undefined entry of *outputs) on the backend's device;
  /// the context owns it until the next enqueue.
  std::function<Result<Tensor>(DataType, const Shape64&)> allocate_output;
};

/// `n`'s input types as its values hold them now (an omitted optional input: an undefined type),
/// what Backend::candidates and Tactic::supports take.
inline std::vector<ir::TensorType> node_input_types(const ir::Node& n) {
  std::vector<ir::TensorType> types;
  types.reserve(n.inputs().size());
  for (const ir::Value* v : n.inputs()) {
    ir::TensorType t;
    if (v) {
      t.dtype = v->dtype();
      t.shape = v->shape();
    }
    types.push_back(std::move(t));
  }
  return types;
}

class Tactic {
 public:
  virtual ~Tactic() = default;
  /// Stable name recorded in the engine, e.g. "cpu.reference", "cuda.cublaslt.algo17".
  virtual std::string name() const = 0;
  /// Whether this tactic can run `node` with these input types over the whole profile range.
  virtual bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const = 0;
  /// Scratch bytes needed at the given (maximum) input shapes.
  virtual uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& input_shapes) const = 0;
  /// One-time work at build (pack or reorder weights). Default: nothing.
  virtual Status prepare(const ir::Node& node) { return Status::Ok(); }
  /// Runs the step. Must not allocate or lock in the steady state on GPU backends.
  virtual Status enqueue(StepIO& io) const = 0;
  /// Whether enqueue may be recorded into a CUDA graph: no host synchronization, no host
  /// reads of device data, the same launches every time for the same shapes and pointers.
  virtual bool capturable() const { return true; }
  /// Whether this is the backend's catch-all that runs a node on the host (the CUDA backend's
  /// host fallback: copies, a reference kernel, a synchronize). The builder splits fused nodes
  /// rather than choose it, and names (or, when told, refuses) every step left on it.
  virtual bool is_host_fallback() const { return false; }
  /// Whether enqueue can size outputs the plan could not (data-dependent shapes: the output
  /// view is undefined and the tactic allocates it through StepIO::allocate_output).
  virtual bool handles_dynamic_outputs() const { return false; }
  /// Whether the tactic computes fp32 GEMMs/convolutions with TF32 tensor cores (kept only when
  /// BuilderConfig::tf32 allows it).
  virtual bool uses_tf32() const { return false; }
  /// Parameters that pin this choice (an algorithm id, tile sizes); restored by the backend's
  /// create_tactic.
  virtual std::vector<uint8_t> serialize() const { return {}; }
  /// serialize() plus what the tactic can build ahead for the input shapes it will mostly run
  /// at (the builder passes the first profile's opt shapes), so an engine's first query need not
  /// build it: e.g. a cuDNN plan with its runtime-compiled kernel. create_tactic takes both forms.
  virtual std::vector<uint8_t> serialize_for(const ir::Node& node, const std::vector<Shape64>& input_shapes) const {
    (void)node;
    (void)input_shapes;
    return serialize();
  }
};

class Device;

/// What a tactic timing counts. kStream: the time between back-to-back enqueues on a stream, so
/// a tactic whose host enqueue outlasts its kernels is charged its host time (what a loop of
/// enqueues without a CUDA graph sees). kDevice: device time alone, the runs queued behind a
/// device-side wait first (what a CUDA graph replay sees), as TensorRT times tactics.
enum class TimingMode { kStream = 0, kDevice = 1 };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Where this backend's tensors live.
  virtual Device& device() const = 0;
  /// Candidate tactics for a node, best guess first. Empty: the backend cannot run it.
  virtual std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node,
                                                          const std::vector<ir::TensorType>& inputs) const = 0;
  /// Rebuilds a tactic recorded in an engine; error when the name is unknown to this build.
  virtual Result<std::unique_ptr<Tactic>> create_tactic(const std::string& name,
                                                         const std::vector<uint8_t>& params) const = 0;
  /// Times `tactic` for the autotuner: `runs` enqueues after `warmup`, each on the next of the
  /// `ios` sets in turn (several copies of the inputs, so small cases are not served from L2);
  /// returns the median milliseconds per enqueue as `mode` counts them. kUnsupported when this
  /// backend does not time tactics (the CPU backend offers one candidate per node).
  virtual Result<double> time_enqueue(const Tactic& tactic, std::vector<StepIO>& ios, int warmup, int runs,
                                      TimingMode mode) const {
    (void)mode;
    return unsupported("the ", name(), " backend does not time tactics");
  }
};

/// The backend named "cpu" or "cuda"; kUnsupported when not built in.
Result<const Backend*> find_backend(const std::string& name);

}  // namespace ingot::backend
