// Copyright ingot authors. Apache-2.0.
//
// Loading and running engines. An Engine is immutable and shared: its weights live once, in
// a read-only region; every ExecutionContext has its own activation arena and bindings, so
// contexts can run on different threads at once. A context is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/data_type.h"
#include "ingot/logger.h"
#include "ingot/status.h"

namespace ingot {

struct IoTensorDesc {
  std::string name;
  DataType dtype = DataType::kUndefined;
  /// Model dims; -1 where the dim is open (bound per profile), with its symbol in dim_names.
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  bool is_input = false;
};

/// One step of the engine, for inspection and profiling.
struct LayerDesc {
  std::string name;                  ///< node name (or "<op>_<index>")
  std::string op;                    ///< op type, "domain::Op" outside ai.onnx
  std::string tactic;                ///< chosen tactic
  std::string precision;             ///< element type it computes in: "f32", "f16", "bf16", "i64", ...
  std::string layout;                ///< "NHWC" for channels-last convolutions, "" otherwise
  std::vector<std::string> origins;  ///< model nodes a fused step stands for
  std::vector<std::string> inputs, outputs;
};

struct MemoryFigures {
  uint64_t arena_bytes = 0;        ///< activation memory of one context
  uint64_t weight_bytes = 0;       ///< shared by every context
  uint64_t lower_bound_bytes = 0;  ///< largest sum of simultaneously live activations
  uint64_t workspace_bytes = 0;
};

class ExecutionContext;

/// Receives per-layer timings while a context with a profiler runs (like TensorRT's IProfiler),
/// on the enqueueing thread: a step's device time on CUDA engines that can be captured, else the
/// host's wall time from just before the step's enqueue to the end of a synchronize after it
/// (which includes the host's enqueue cost and the synchronization's latency, ~10 us).
/// ExecutionContext::set_profiler and profile_timing() say which.
class Profiler {
 public:
  virtual ~Profiler() = default;
  virtual void report_layer_time(int layer_index, const char* layer_name, float milliseconds) noexcept = 0;
  /// The host's time inside the step's enqueue call alone (argument setup, library calls, launches),
  /// reported just before report_layer_time: beside the step's time, it shows which steps are
  /// host-bound when queries run without a CUDA graph. Ignored unless overridden.
  virtual void report_layer_enqueue_time(int layer_index, const char* layer_name, float milliseconds) noexcept {
    (void)layer_index, (void)layer_name, (void)milliseconds;
  }
};

/// Sees every tensor a step produces (for per-layer accuracy comparison). `data` is host
/// memory valid only during the call. Slows execution; for debugging only.
class TensorListener {
 public:
  virtual ~TensorListener() = default;
  virtual void on_tensor(int layer_index, const char* tensor_name, DataType dtype, const std::vector<int64_t>& dims,
                         const void* data) noexcept = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const std::vector<IoTensorDesc>& io_tensors() const = 0;
  virtual int num_profiles() const = 0;
  /// min/opt/max of `input` in `profile`; error for unknown names or fixed inputs.
  virtual Status profile_dimensions(int profile, const std::string& input, std::vector<int64_t>* min,
                                    std::vector<int64_t>* opt, std::vector<int64_t>* max) const = 0;
  virtual const std::vector<LayerDesc>& layers() const = 0;
  virtual MemoryFigures memory() const = 0;
  virtual std::string backend() const = 0;
  /// A new context with its own arena (allocated now; kOutOfMemory when it does not fit).
  virtual Result<std::unique_ptr<ExecutionContext>> create_execution_context() const = 0;
};

class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;
  /// Selects the profile later shapes are checked against (default 0).
  virtual Status set_optimization_profile(int profile) = 0;
  virtual int optimization_profile() const = 0;
  /// Sets an input's dims. Fails, naming the input, the dim, the value and the allowed range,
  /// when outside the active profile or when the rank or a fixed dim differs.
  virtual Status set_input_shape(const std::string& name, const std::vector<int64_t>& dims) = 0;
  /// Binds caller memory (host memory on the CPU backend, device memory on CUDA) to an input
  /// or output. The caller keeps it alive and large enough for the current shape until the
  /// enqueued work is done. Outputs left unbound are held by the context (tensor_address).
  /// String tensors (CPU engines only) bind an array of std::string, one per element.
  virtual Status set_tensor_address(const std::string& name, void* address) = 0;
  /// The bound address, or the context-held memory of an unbound output after enqueue.
  virtual const void* tensor_address(const std::string& name) const = 0;
  /// Propagates the input shapes through the graph; after it, tensor_shape gives every output's
  /// dims (-1 for data-dependent dims, known only after enqueue).
  virtual Status infer_shapes() = 0;
  /// Current dims of an input or output (after infer_shapes or enqueue).
  virtual Result<std::vector<int64_t>> tensor_shape(const std::string& name) const = 0;
  /// Runs the engine on `stream` (a cudaStream_t for CUDA engines; ignored, and the call is
  /// synchronous, for CPU engines). Fails when an input is unbound or shapes are not set.
  virtual Status enqueue(void* stream = nullptr) = 0;
  /// Per-layer timing during enqueue; nullptr turns it off. Not owned. On a CUDA engine whose
  /// steps can all be captured, enqueue replays a CUDA graph of the steps with a timing event
  /// between every two, and reports each step's device time (what a graph run spends on it: no
  /// host enqueue, no synchronize latency); it still reports the host time of each step's
  /// enqueue once, while capturing. Otherwise (CPU engines, a step that cannot be captured, the
  /// legacy default stream, a tensor listener) it reports host wall time from each step's
  /// enqueue to a synchronize after it. profile_timing() says which.
  virtual void set_profiler(Profiler* profiler) = 0;
  /// After an enqueue with a profiler: "device: ..." or "host: ..." and why (see set_profiler).
  virtual std::string profile_timing() const = 0;
  /// Every intermediate tensor during enqueue; nullptr turns it off. Not owned.
  virtual void set_tensor_listener(TensorListener* listener) = 0;
  /// CUDA engines: capture the whole enqueue into a CUDA graph, once per set of input shapes
  /// and bindings, and replay it on later enqueues (far fewer launch gaps at small batch).
  /// When a step cannot be captured (a host-fallback step, data-dependent shapes, an attached
  /// profiler or listener), enqueue runs plain launches and cuda_graph_status() says why. On the
  /// legacy default stream (nullptr), the capture happens on a stream of the context's own and
  /// the graph is launched on the legacy stream. Replayed outputs are bit-identical to plain
  /// enqueue. Fails with kUnsupported on CPU engines when enabling.
  virtual Status set_cuda_graph_mode(bool enabled) = 0;
  /// Empty when the last enqueue replayed (or captured) a graph or the mode is off; otherwise
  /// the reason it ran plain launches, naming the step at fault.
  virtual std::string cuda_graph_status() const = 0;
  /// How many captured graphs the context keeps for later replay. A graph is kept per set of
  /// input shapes and bindings (up to 16, the oldest dropped first), so a context that
  /// alternates between a few batch sizes and fixed buffers (a server's prepared sizes) replays
  /// each from its first enqueue after the first capture. Graphs whose run allocated buffers
  /// of its own (an unbound output, sizes known only from the shapes) are not kept.
  virtual int cuda_graphs_held() const { return 0; }
};

class Runtime {
 public:
  explicit Runtime(Logger& logger = default_logger());
  /// Loads an engine from memory (copied once into an owned, aligned buffer).
  Result<std::shared_ptr<Engine>> deserialize(const void* data, size_t size) const;
  /// Loads an engine file (memory-mapped: weights are used in place). Fails with a message
  /// saying what differs (version, backend, GPU arch, libraries) and what to do, or what is
  /// corrupt.
  Result<std::shared_ptr<Engine>> deserialize_file(const std::string& path) const;

 private:
  Logger* logger_;
};

}  // namespace ingot
