// Copyright ingot authors. Apache-2.0.
//
// The KServe v2 gRPC endpoint (inference.GRPCInferenceService: ServerLive, ServerReady,
// ModelReady, ServerMetadata, ModelMetadata, ModelInfer with raw or typed tensor contents, and
// Triton's system shared-memory RPCs), serving the same repository, batchers and shared-memory
// regions as the HTTP endpoint.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "ingot/status.h"
#include "server/model_repository.h"
#include "server/shared_memory.h"

namespace ingot::server {

class GrpcServer {
 public:
  /// `repository`, `shared_memory` and `draining` outlive the server; `draining` true answers
  /// UNAVAILABLE.
  GrpcServer(ModelRepository& repository, SharedMemoryManager& shared_memory, const std::atomic<bool>& draining,
             size_t max_message_bytes);
  ~GrpcServer();
  /// Binds `address:port` (0 = any free port) and serves on gRPC's own threads.
  Status start(const std::string& address, int port);
  int port() const { return port_; }
  /// Finishes the calls in flight, then stops. Idempotent.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t max_message_bytes_ = 0;
  int port_ = -1;
};

}  // namespace ingot::server
