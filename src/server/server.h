// Copyright ingot authors. Apache-2.0.
//
// `ingot serve`: a KServe v2 (Open Inference Protocol) HTTP/REST and gRPC server over a model
// repository, with dynamic batching, Triton's statistics extension, Prometheus metrics on
// their own port and a JSON-lines access log. Uses only ingot's public API.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ingot/logger.h"
#include "ingot/status.h"

namespace ingot::server {

struct ServerOptions {
  std::string model_repository;
  std::string address = "127.0.0.1";
  int http_port = 8000;                  ///< 0: any free port (see Server::http_port)
  int metrics_port = 8002;               ///< 0: any free port; -1: no metrics endpoint
  int grpc_port = 8001;                  ///< 0: any free port; -1: no gRPC endpoint (also when built without gRPC)
  size_t max_request_bytes = 64u << 20;  ///< larger bodies get 413
  int http_threads = 64;                 ///< connections served at once (each keep-alive client holds one)
  std::string access_log;                ///< JSON lines: "" = stderr, "off" = none, else a file path
  /// Triton's --exit-on-error: start() fails, naming each model and why, when a model of the
  /// repository does not load. false: serve the others, the failed ones UNAVAILABLE (and the
  /// server not ready) until they are fixed and loaded or unloaded.
  bool exit_on_error = true;
};

class Server {
 public:
  /// `logger` outlives the server.
  Server(ServerOptions options, Logger& logger);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Loads the repository (models that fail are logged and reported UNAVAILABLE), binds the
  /// ports and serves on background threads. Fails when a port cannot be bound, the repository
  /// cannot be read, or (with exit_on_error) a model does not load.
  Status start();
  /// The bound ports (after start).
  int http_port() const;
  int metrics_port() const;
  int grpc_port() const;  ///< -1 when gRPC is off
  /// Stops accepting inference (503, not ready), answers everything queued, then stops the
  /// listeners. Idempotent.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::server
