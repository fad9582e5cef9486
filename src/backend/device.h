// Copyright ingot authors. Apache-2.0.
//
// Where a backend's tensors live. The runtime allocates arenas, uploads weights and copies
// outputs only through this interface, so the same ExecutionContext serves CPU engines (host
// memory) and CUDA engines (device memory, stream-ordered copies).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"

namespace ingot::backend {

class Device {
 public:
  virtual ~Device() = default;
  /// True when tensors are host memory (the CPU backend): no copies needed to read them.
  virtual bool is_host() const = 0;
  /// `bytes` of memory, 256-byte aligned. kOutOfMemory with the size when it does not fit.
  virtual Result<void*> allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  /// Stream-ordered copies and fills (`stream` is a cudaStream_t on CUDA, ignored on the host).
  virtual Status copy_to_device(void* dst, const void* host_src, size_t bytes, void* stream) = 0;
  virtual Status copy_to_host(void* host_dst, const void* src, size_t bytes, void* stream) = 0;
  virtual Status copy_on_device(void* dst, const void* src, size_t bytes, void* stream) = 0;
  virtual Status fill(void* dst, int byte, size_t bytes, void* stream) = 0;
  /// Waits for everything enqueued on `stream`.
  virtual Status synchronize(void* stream) = 0;
  /// CUDA graphs (capture of everything enqueued on `stream`, then replay). The host device
  /// does not capture: begin_capture fails with kUnsupported.
  virtual Status begin_capture(void* stream) { return unsupported("the ", arch().empty() ? "host" : arch(), " device cannot capture graphs"); }
  /// Ends the capture begun on `stream` and instantiates it; the handle frees the graph.
  virtual Result<std::shared_ptr<void>> end_capture(void* stream) { return unsupported("no capture in progress"); }
  virtual Status launch_graph(void* graph, void* stream) { return unsupported("no graphs on this device"); }
  /// A stream of the device's own (CUDA: non-blocking), freed with the handle: where a context
  /// captures a graph it replays on the legacy default stream, which cannot be captured.
  virtual Result<std::shared_ptr<void>> create_stream() { return unsupported("no streams on this device"); }
  /// Timing markers (CUDA events) for per-step device times: record_marker puts one on `stream`,
  /// or, while the stream is being captured, into the graph as a node (a replay records it).
  /// marker_elapsed_ms: the device time between two completed markers. The host device has none.
  virtual Result<std::shared_ptr<void>> create_marker() { return unsupported("no timing markers on this device"); }
  virtual Status record_marker(void* marker, void* stream) { return unsupported("no timing markers on this device"); }
  virtual Result<float> marker_elapsed_ms(void* from, void* to) {
    return unsupported("no timing markers on this device");
  }
  /// "sm_90" for a CUDA device, "" for the host.
  virtual std::string arch() const = 0;
  /// Library versions an engine built here is bound to (e.g. "cudart" -> "13000").
  virtual std::map<std::string, std::string> library_versions() const = 0;
};

/// The host device (CPU backend).
Device& host_device();

}  // namespace ingot::backend
