// Copyright ingot authors. Apache-2.0.
//
// Input/output memory for the commands that run engines (run, compare, benchmark). An engine
// reads its bindings from its own memory: host memory for cpu engines, device memory for cuda
// ones (as trtexec binds cudaMalloc'd buffers). IoBuffers hides which, so the commands drive
// both backends the same way; the benchmark also uses the stream and the event timers to split
// a query into H2D copy, GPU compute and D2H copy. Without INGOT_WITH_CUDA everything CUDA
// compiles out and a cuda engine gets a clear error.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingot/engine.h"
#include "ingot/reference.h"
#include "ingot/status.h"

namespace ingot::tools {

class IoBuffers {
 public:
  /// Buffers for `ctx` (a context of `engine`, which must outlive them). On a cuda engine this
  /// creates a stream; kUnimplemented when the tools were built without CUDA.
  static Result<std::unique_ptr<IoBuffers>> create(const Engine& engine, ExecutionContext& ctx);
  ~IoBuffers();
  IoBuffers(const IoBuffers&) = delete;
  IoBuffers& operator=(const IoBuffers&) = delete;

  bool on_device() const { return device_; }
  /// The cudaStream_t to enqueue on; nullptr for cpu engines.
  void* stream() const { return stream_; }

  /// Sets the input's shape, keeps a host copy, copies it into engine memory (asynchronously on
  /// the stream) and binds it. String tensors: cpu engines only.
  Status upload(const HostTensor& t);
  /// Every input in turn, then binds outputs whose shapes are known after infer_shapes (cuda;
  /// outputs with data-dependent dims stay with the context).
  Status upload_all(const std::vector<HostTensor>& inputs);
  /// Copies the kept host inputs into engine memory again (the timed H2D of a benchmark).
  Status copy_inputs_to_device();
  /// Copies every output into host staging without waiting (the timed D2H of a benchmark).
  Status copy_outputs_to_host();
  /// The output after a finished enqueue, shape from ExecutionContext::tensor_shape.
  Result<HostTensor> download(const std::string& name);
  /// Every output, in engine order (waits for the stream first).
  Result<std::vector<HostTensor>> download_all();
  Status synchronize();

 private:
  IoBuffers(const Engine& engine, ExecutionContext& ctx) : engine_(engine), ctx_(ctx) {}
  struct Buffer {
    void* device = nullptr;  // cudaMalloc'd (cuda engines)
    size_t capacity = 0;
    size_t bytes = 0;
    HostTensor host;         // the input as given, or the output's staging
    void* pinned = nullptr;  // host.data's bytes while page-locked (cudaHostRegister)
  };
  Status reserve(Buffer& b, size_t bytes);
  /// Page-locks b.host's bytes, as trtexec's host buffers are: copies from pageable memory run at
  /// a seventh of the speed on the H200 and block the host. Best effort: unpinned on failure.
  void pin(Buffer& b);
  void unpin(Buffer& b);
  Status copy_out(const std::string& name, Buffer& b, bool wait);

  const Engine& engine_;
  ExecutionContext& ctx_;
  bool device_ = false;
  void* stream_ = nullptr;
  std::map<std::string, Buffer> buffers_;
};

/// A CUDA event on a stream, for GPU-side timing. No-ops (0 ms) on cpu engines.
class GpuEvent {
 public:
  static Result<std::unique_ptr<GpuEvent>> create(bool device);
  ~GpuEvent();
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;
  Status record(void* stream);
  /// Milliseconds from `start` to this event; both must have completed (synchronize first).
  Result<float> elapsed_since(const GpuEvent& start) const;

 private:
  GpuEvent() = default;
  void* event_ = nullptr;
};

/// The GPU the tools run on (device 0 of this process), for roofline figures.
struct GpuInfo {
  std::string name;  ///< e.g. "NVIDIA H200"
  int sm = 0;        ///< compute capability as major*10+minor (90 for Hopper); 0 when unknown
};
/// Queries the current device; kUnsupported without CUDA in the build, the CUDA error otherwise.
Result<GpuInfo> current_gpu();
/// Creates the CUDA context now (cudaFree(0)) when the build has CUDA and a device is there, so
/// a timed engine load measures the load, not the driver's start. No-op otherwise.
void start_device_context();

}  // namespace ingot::tools
