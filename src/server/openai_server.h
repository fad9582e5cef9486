// Copyright ingot authors. Apache-2.0.
//
// An OpenAI-compatible HTTP server over an LlmEngine (issue 22; what `vllm serve` offers):
//   GET  /v1/models            the served model
//   POST /v1/completions       prompt (a string, strings, or token ids) -> text_completion
//   POST /v1/chat/completions  messages -> chat.completion (ChatML template)
//   GET  /health               200 while serving
//   GET  /metrics              Prometheus: TTFT, time per output token and end-to-end latency
//                              histograms, prompt/generated token and finished/refused request
//                              counters, running/waiting requests, KV blocks in use (vLLM's set)
// Both POSTs take max_tokens, temperature, top_p, top_k (vLLM's), seed, stop, ignore_eos
// (vLLM's), n = 1, and stream (server-sent events, "data: [DONE]" last; stream_options.
// include_usage adds a usage chunk). Errors are OpenAI's error object: 400 for bad requests or
// parameters ingot does not take (logprobs, echo, best_of, tools, n > 1), 404 for another model
// name, 413 for a body over max_request_bytes, 503 when the engine's queue is full (overload is
// refused, never dropped).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "ingot/llm.h"

namespace ingot::server {

struct OpenAiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 ///< 0: any free port (port() says which)
  std::string model_name;          ///< the name clients send as "model"
  int64_t chat_max_tokens = 256;   ///< a chat request's max_tokens when it gives none
  int threads = 64;                ///< HTTP worker threads (each open request holds one)
  size_t max_request_bytes = 16u << 20;  ///< larger bodies get 413 before any of them is read
};

class OpenAiServer {
 public:
  static Result<std::unique_ptr<OpenAiServer>> create(std::shared_ptr<LlmEngine> engine, OpenAiServerOptions options);
  ~OpenAiServer();
  /// Binds and serves on a background thread; returns once the socket listens.
  Status start();
  /// Serves on this thread until stop() (from another thread or a signal handler).
  Status serve_forever();
  void stop();
  int port() const;

 private:
  OpenAiServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::server
