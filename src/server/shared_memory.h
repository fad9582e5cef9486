// Copyright ingot authors. Apache-2.0.
//
// Triton's system shared-memory extension: clients put a POSIX shared-memory object (shm_open
// key) under a region name, then infer requests name the region, offset and byte size of an
// input (read from there instead of the request body) or of an output (written there instead of
// the response). Large tensors then skip HTTP/gRPC framing and copies: a ResNet-50 image is
// 602 KB of fp32, so serving tens of thousands a second through request bodies alone would be
// tens of GB/s of socket traffic.
//
// A region stays mapped (MAP_SHARED, read-write) from register to unregister; requests in flight
// hold their own reference, so unregistering never unmaps memory a request is using. Inputs are
// read in place (view()), not copied. With a GPU present (CUDA builds) the mapping is also
// page-locked with cudaHostRegister, so a cuda engine's batcher copies each request's rows
// straight from the region to the device by DMA (53.8 GB/s on the H200 against 6.9 GB/s from
// pageable memory); where pinning fails the region is still served, through a staging copy.
//
// Triton's CUDA shared-memory extension shares the region names: a client registers a cudaIpc
// handle of device memory it allocated, and requests name that region like a system one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/infer_request.h"

namespace ingot::server {

/// Which extension a region belongs to: system (POSIX shm, key and offset) or CUDA (a cudaIpc
/// handle to device memory on device_id). Both share one namespace of region names, as Triton's.
enum class SharedMemoryKind { kSystem, kCuda };

struct SharedMemoryRegionInfo {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
  SharedMemoryKind kind = SharedMemoryKind::kSystem;
  int64_t device_id = -1;  ///< kCuda
};

class SharedMemoryManager {
 public:
  SharedMemoryManager();
  ~SharedMemoryManager();

  /// Maps `byte_size` bytes at `offset` of the shared-memory object `key` under `name`. Errors
  /// (400): a name already registered, an empty key, an object that does not exist or is smaller
  /// than offset + byte_size, a zero size.
  std::optional<RequestError> register_region(const std::string& name, const std::string& key, uint64_t offset,
                                              uint64_t byte_size);
  /// Triton's CUDA shared-memory extension: opens `raw_handle` (a cudaIpcMemHandle_t, 64 bytes,
  /// from cudaIpcGetMemHandle in the client's process) on `device_id` as a region of `byte_size`
  /// bytes. Errors (400) name the region: a name already registered, a handle of the wrong size,
  /// no such device, a handle CUDA cannot open, an ingot built without CUDA.
  std::optional<RequestError> register_cuda_region(const std::string& name, const std::string& raw_handle,
                                                   int64_t device_id, uint64_t byte_size);
  /// Unmaps / closes `name` of `kind` (every region of that kind when empty); unknown names, and
  /// names of the other kind, are an error (400).
  std::optional<RequestError> unregister(const std::string& name, SharedMemoryKind kind = SharedMemoryKind::kSystem);
  /// The regions of `kind` named `name` (all of that kind when empty); unknown names are an error.
  std::optional<RequestError> status(const std::string& name, std::vector<SharedMemoryRegionInfo>* out,
                                     SharedMemoryKind kind = SharedMemoryKind::kSystem) const;

  /// Points `out` at `ref`'s bytes (offset and size inside the region) in place, holding the
  /// region mapped for as long as `out` lives. System regions only (a CUDA region's bytes are
  /// device memory: see attach_inputs).
  std::optional<RequestError> view(const SharedMemoryRef& ref, ExternalBytes* out) const;
  /// Writes `bytes` (host memory) at `ref` (a copy to the device for a CUDA region); `bytes`
  /// must fit in ref.byte_size.
  std::optional<RequestError> write(const SharedMemoryRef& ref, const void* data, size_t bytes) const;

  /// The protocol-independent half of an infer request (HTTP and gRPC): every input that names a
  /// system region reads it in place (view()), one in a CUDA region points at the device memory
  /// (ExternalBytes::device: the batcher copies it device to device); errors (400) name the input.
  std::optional<RequestError> attach_inputs(InferRequest* request) const;

 private:
  struct Region;
  std::shared_ptr<Region> find(const SharedMemoryRef& ref, std::optional<RequestError>* error) const;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_;
};

}  // namespace ingot::server
