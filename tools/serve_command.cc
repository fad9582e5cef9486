// Copyright ingot authors. Apache-2.0.
//
// `ingot serve`: flags → ServerOptions, start the server, wait for SIGTERM/SIGINT, drain, exit.
#include "serve_command.h"

#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <mutex>

#include "options.h"
#include "server/server.h"

namespace ingot::tools {

namespace {

class ServeLogger : public Logger {
 public:
  explicit ServeLogger(bool verbose) : verbose_(verbose) {}
  void log(Severity s, const char* msg) noexcept override {
    if (s > Severity::kInfo && !verbose_) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::cerr << "ingot serve: "
              << (s == Severity::kError     ? "error: "
                  : s == Severity::kWarning ? "warning: "
                                            : "")
              << msg << "\n";
  }

 private:
  bool verbose_;
  std::mutex mu_;
};

}  // namespace

void serve_help() {
  std::cout << "usage: ingot serve --model-repository DIR [options]\n"
               "       ingot serve MODEL.gguf [options]   (an OpenAI-compatible LLM server: ingot serve MODEL.gguf --help)\n\n"
               "Serves the models of a Triton-style repository (<DIR>/<model>/config.pbtxt, <DIR>/<model>/<version>/\n"
               "model.onnx or model.engine) over the KServe v2 HTTP/REST and gRPC protocols with dynamic batching. An "
               ".onnx is\n"
               "built on load and its engine kept beside it. SIGTERM/SIGINT: stop accepting, answer what is queued, "
               "exit 0.\n\n"
               "options:\n"
               "  --model-repository DIR   the model repository (required)\n"
               "  --address ADDR           bind address (default 127.0.0.1)\n"
               "  --http-port N            HTTP/REST port (default 8000; 0 = any free port)\n"
               "  --metrics-port N         Prometheus /metrics port (default 8002; 0 = any free; -1 = off)\n"
               "  --grpc-port N            gRPC port (default 8001; 0 = any free; -1 = off)\n"
               "  --max-request-bytes N    larger request bodies get 413 (default 67108864)\n"
               "  --http-threads N         connections served at once (default 64)\n"
               "  --access-log FILE|off    JSON-lines access log (default stderr)\n"
               "  --exit-on-error true|false  exit at start-up when a model does not load, naming each (default\n"
               "                           true, as Triton); false serves the others, the failed ones UNAVAILABLE\n"
               "  --verbose                also the library's verbose messages (builder notes)\n";
}

int serve_command(const std::vector<std::string>& args) {
  server::ServerOptions options;
  bool verbose = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    auto value = [&]() {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot serve: " << a << " needs a value\n";
        return false;
      }
      v = args[++i];
      return true;
    };
    auto as_int = [&](long long lo, long long hi, long long& out) { return parse_int_arg("ingot serve", a, v, lo, hi, out); };
    long long n = 0;
    if (a == "-h" || a == "--help") {
      serve_help();
      return 0;
    } else if (a == "--model-repository" || a == "--model-store") {
      if (!value()) return 2;
      options.model_repository = v;
    } else if (a == "--address") {
      if (!value()) return 2;
      options.address = v;
    } else if (a == "--http-port") {
      if (!value() || !as_int(0, 65535, n)) return 2;
      options.http_port = static_cast<int>(n);
    } else if (a == "--metrics-port") {
      if (!value() || !as_int(-1, 65535, n)) return 2;
      options.metrics_port = static_cast<int>(n);
    } else if (a == "--grpc-port") {
      if (!value() || !as_int(-1, 65535, n)) return 2;
      options.grpc_port = static_cast<int>(n);
    } else if (a == "--max-request-bytes") {
      if (!value() || !as_int(1, 1ll << 40, n)) return 2;
      options.max_request_bytes = static_cast<size_t>(n);
    } else if (a == "--http-threads") {
      if (!value() || !as_int(1, 4096, n)) return 2;
      options.http_threads = static_cast<int>(n);
    } else if (a == "--access-log") {
      if (!value()) return 2;
      options.access_log = v;
    } else if (a == "--exit-on-error" || a.rfind("--exit-on-error=", 0) == 0) {
      // Triton spells it --exit-on-error=false; a separate value is taken too.
      if (a.size() > 15) v = a.substr(16);
      else if (!value()) return 2;
      if (v != "true" && v != "false") {
        std::cerr << "ingot serve: --exit-on-error takes true or false, got '" << v << "'\n";
        return 2;
      }
      options.exit_on_error = v == "true";
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::cerr << "ingot serve: unknown option '" << a << "' (see ingot serve --help)\n";
      return 2;
    }
  }
  if (options.model_repository.empty()) {
    std::cerr << "ingot serve: --model-repository DIR is required\n";
    return 2;
  }
  // Block the stop signals in every thread (they inherit the mask) and wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

  ServeLogger logger(verbose);
  server::Server server(options, logger);
  Status st = server.start();
  if (!st.ok()) {
    std::cerr << "ingot serve: " << st.message() << "\n";
    return 1;
  }
  std::cerr << "ingot serve: HTTP on " << options.address << ":" << server.http_port();
  if (server.grpc_port() > 0) std::cerr << ", gRPC on " << options.address << ":" << server.grpc_port();
  if (server.metrics_port() > 0)
    std::cerr << ", metrics on " << options.address << ":" << server.metrics_port() << "/metrics";
  std::cerr << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << "ingot serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining" << std::endl;
  server.shutdown();
  std::cerr << "ingot serve: stopped" << std::endl;
  return 0;
}

}  // namespace ingot::tools
