// Copyright ingot authors. Apache-2.0.
//
// The HTTP/REST endpoints of the KServe v2 protocol (plus Triton's statistics, model-config
// and repository extensions), the metrics endpoint and the access log (see server.h).
#include "server/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "ingot/version.h"
#include "server/infer_request.h"
#ifdef INGOT_SERVER_WITH_GRPC
#include "server/grpc_server.h"
#endif
#include "server/metrics.h"
#include "server/model_repository.h"
#include "server/shared_memory.h"
#include "server/tensor_types.h"

#ifdef INGOT_SERVER_WITH_ABSL
#include <absl/strings/escaping.h>
#endif

namespace ingot::server {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kModelPath = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

thread_local Clock::time_point t_request_start;  // set before routing, read by the access log

// Debian's prebuilt cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled
// into the library, so defining it here changes nothing). At 1024 simultaneous connections on a
// busy machine the accept queue overflowed and a few clients got "connection reset" instead of an
// answer (server.load, session 10). Calling listen() again on the bound socket raises the
// backlog (Linux takes the new value, capped by net.core.somaxconn): the socket is found among
// this process's descriptors as the listening TCP socket bound to `port`.
void widen_listen_backlog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

// Standard base64 (RFC 4648, as tritonclient writes a cudaIpc handle), by abseil.
bool base64_decode(const std::string& in, std::string* out) {
#ifdef INGOT_SERVER_WITH_ABSL
  return absl::Base64Unescape(in, out);
#else
  (void)in;
  (void)out;
  return false;
#endif
}

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}
void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, error_json(message));
}
int64_t ns_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

json tensor_metadata(const TensorSpec& s, bool batching) {
  std::vector<int64_t> shape = s.dims;
  if (batching) shape.insert(shape.begin(), -1);
  return {{"name", s.name}, {"datatype", datatype_to_protocol(s.dtype)}, {"shape", shape}};
}

// Writes access-log lines (JSON) to stderr or a file, one writer at a time.
class AccessLog {
 public:
  explicit AccessLog(const std::string& target) {
    if (target == "off") return;
    enabled_ = true;
    if (!target.empty()) {
      file_ = std::fopen(target.c_str(), "a");
      if (!file_) std::fprintf(stderr, "ingot serve: cannot open access log %s; logging to stderr\n", target.c_str());
    }
  }
  ~AccessLog() {
    if (file_) std::fclose(file_);
  }
  void write(const httplib::Request& req, const httplib::Response& res) {
    if (!enabled_) return;
    char ts[32];
    std::time_t now = std::time(nullptr);
    std::tm tm_utc;
    gmtime_r(&now, &tm_utc);
    std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
    json line = {{"time", ts},
                 {"remote", req.remote_addr},
                 {"method", req.method},
                 {"path", req.path},
                 {"status", res.status},
                 {"request_bytes", req.body.size()},
                 {"response_bytes", res.body.size()},
                 {"duration_us", ns_since(t_request_start) / 1000}};
    std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    std::FILE* f = file_ ? file_ : stderr;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fflush(f);
  }

 private:
  bool enabled_ = false;
  std::FILE* file_ = nullptr;
  std::mutex mu_;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  Logger* logger;
  Metrics metrics;
  ModelRepository repository;
  SharedMemoryManager shared_memory;
  AccessLog access_log;
  httplib::Server http;
  httplib::Server metrics_http;
  std::thread http_thread, metrics_thread;
  int http_port = -1, metrics_port = -1, grpc_port = -1;
#ifdef INGOT_SERVER_WITH_GRPC
  std::unique_ptr<GrpcServer> grpc;
#endif
  std::atomic<bool> draining{false};
  std::once_flag shutdown_once;

  Impl(ServerOptions o, Logger& l)
      : options(std::move(o)),
        logger(&l),
        repository(options.model_repository, l, metrics),
        access_log(options.access_log) {}

  void routes();
  void infer(const httplib::Request& req, const std::string& body, httplib::Response& res);
  std::string too_large(const httplib::Request& req) const;  ///< the 413 answer's message
  std::shared_ptr<ServedModel> model_or_404(const httplib::Match& m, httplib::Response& res) {
    RequestError e;
    auto model = repository.find(m[1].str(), m.size() > 2 ? m[2].str() : "", &e);
    if (!model) send_error(res, e.http_status, e.message);
    return model;
  }
};

std::string Server::Impl::too_large(const httplib::Request& req) const {
  return "request body of " + req.get_header_value("Content-Length") + " bytes exceeds the limit of " +
         std::to_string(options.max_request_bytes) + " bytes (--max-request-bytes)";
}

void Server::Impl::routes() {
  int threads = options.http_threads > 0 ? options.http_threads : 64;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(options.max_request_bytes);
  http.set_keep_alive_max_count(100000);
  http.set_tcp_nodelay(true);  // headers and body go out in separate writes: no Nagle wait on the second
  http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    t_request_start = Clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { access_log.write(req, res); });
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413) {
          send_error(res, 413, too_large(req));
        } else if (res.status == 404) {
          send_error(res, 404, "no endpoint " + req.method + " " + req.path);
        } else {
          send_error(res, res.status, "HTTP error " + std::to_string(res.status));
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });

  http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    res.status = !draining && repository.all_ready() ? 200 : 503;
  });
  http.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    json j = {{"name", "ingot"},
              {"version", ingot::version()},
              {"extensions",
               {"binary_tensor_data", "statistics", "model_repository", "model_configuration", "system_shared_memory",
#ifdef INGOT_WITH_CUDA
                "cuda_shared_memory"
#endif
               }}};
    send_json(res, 200, j.dump(-1, ' ', false, json::error_handler_t::replace));
  });
  // The version group is optional: req.matches[2] is empty without it.
  http.Get(kModelPath, [this](const httplib::Request& req, httplib::Response& res) {
    auto m = model_or_404(req.matches, res);
    if (!m) return;
    bool batching = m->signature.max_batch_size > 0;
    json inputs = json::array(), outputs = json::array();
    for (const TensorSpec& s : m->signature.inputs) inputs.push_back(tensor_metadata(s, batching));
    for (const TensorSpec& s : m->signature.outputs) outputs.push_back(tensor_metadata(s, batching));
    json versions = json::array();
    for (const auto& e : repository.index()) {
      if (e.name == m->name && !e.version.empty()) versions.push_back(e.version);
    }
    json j = {
        {"name", m->name}, {"versions", versions}, {"platform", m->platform}, {"inputs", inputs}, {"outputs", outputs}};
    send_json(res, 200, j.dump(-1, ' ', false, json::error_handler_t::replace));
  });
  http.Get(std::string(kModelPath) + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    if (model_or_404(req.matches, res)) res.status = draining ? 503 : 200;
  });
  http.Get(std::string(kModelPath) + "/config", [this](const httplib::Request& req, httplib::Response& res) {
    auto m = model_or_404(req.matches, res);
    if (!m) return;
    send_json(res, 200, model_config_json(m->config));
  });
  http.Get(std::string(kModelPath) + "/stats", [this](const httplib::Request& req, httplib::Response& res) {
    auto m = model_or_404(req.matches, res);
    if (!m) return;
    send_json(res, 200, "{\"model_stats\":[" + m->stats->to_json(m->name, m->version_str) + "]}");
  });
  http.Get("/v2/models/stats", [this](const httplib::Request&, httplib::Response& res) {
    std::string all;
    for (const auto& e : repository.index()) {
      if (e.version.empty()) continue;
      RequestError err;
      if (auto m = repository.find(e.name, e.version, &err))
        all += (all.empty() ? "" : ",") + m->stats->to_json(m->name, m->version_str);
    }
    send_json(res, 200, "{\"model_stats\":[" + all + "]}");
  });
  // The body is read here, not by httplib's default handler: that one appends to an unreserved
  // string (its regrowth copied each 9.6 MB request about twice). Content-Length sizes it once;
  // httplib still refuses a body over set_payload_max_length with 413 before any of it is read.
  http.Post(std::string(kModelPath) + "/infer",
            [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
              std::string body;
              if (req.has_header("Content-Length")) {
                const unsigned long long n = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
                const size_t cap = options.max_request_bytes > 0 ? options.max_request_bytes : size_t{1} << 30;
                body.reserve(static_cast<size_t>(std::min<unsigned long long>(n, cap)));
              }
              if (!read([&](const char* data, size_t n) {
                    body.append(data, n);
                    return true;
                  })) {
                if (res.status == 413) return send_error(res, 413, too_large(req));
                return send_error(res, 400, "the request body could not be read");
              }
              infer(req, body, res);
            });
  http.Post("/v2/repository/index", [this](const httplib::Request&, httplib::Response& res) {
    json arr = json::array();
    for (const auto& e : repository.index()) {
      json j = {{"name", e.name}, {"state", e.state}};
      if (!e.version.empty()) j["version"] = e.version;
      if (!e.reason.empty()) j["reason"] = e.reason;
      arr.push_back(j);
    }
    send_json(res, 200, arr.dump(-1, ' ', false, json::error_handler_t::replace));
  });
  // System shared memory (Triton's extension): register / status / unregister, per region or all.
  http.Post(
      R"(/v2/systemsharedmemory/region/([^/]+)/register)", [this](const httplib::Request& req, httplib::Response& res) {
        json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
        auto key = body.is_object() ? body.find("key") : body.end();
        if (!body.is_object() || key == body.end() || !key->is_string())
          return send_error(res, 400, "register needs a JSON body {\"key\": ..., \"offset\": ..., \"byte_size\": ...}");
        // "offset" may be left out (0); "byte_size" may not.
        auto num = [&](const char* f, bool required, uint64_t* v) {
          auto it = body.find(f);
          if (it == body.end()) return !required;
          if (!it->is_number_unsigned()) return false;
          *v = it->get<uint64_t>();
          return true;
        };
        uint64_t offset = 0, byte_size = 0;
        if (!num("offset", false, &offset) || !num("byte_size", true, &byte_size))
          return send_error(res, 400, "register: offset and byte_size must be non-negative integers");
        if (auto e = shared_memory.register_region(req.matches[1].str(), key->get<std::string>(), offset, byte_size))
          return send_error(res, e->http_status, e->message);
        send_json(res, 200, "{}");
      });
  http.Get(R"(/v2/systemsharedmemory(?:/region/([^/]+))?/status)",
           [this](const httplib::Request& req, httplib::Response& res) {
             std::vector<SharedMemoryRegionInfo> regions;
             if (auto e = shared_memory.status(req.matches[1].str(), &regions))
               return send_error(res, e->http_status, e->message);
             json arr = json::array();
             for (const auto& r : regions)
               arr.push_back({{"name", r.name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}});
             send_json(res, 200, arr.dump(-1, ' ', false, json::error_handler_t::replace));
           });
  http.Post(R"(/v2/systemsharedmemory(?:/region/([^/]+))?/unregister)",
            [this](const httplib::Request& req, httplib::Response& res) {
              if (auto e = shared_memory.unregister(req.matches[1].str()))
                return send_error(res, e->http_status, e->message);
              send_json(res, 200, "{}");
            });
  // CUDA shared memory (Triton's extension): a cudaIpc handle, base64 in {"raw_handle": {"b64": ...}}.
  http.Post(
      R"(/v2/cudasharedmemory/region/([^/]+)/register)", [this](const httplib::Request& req, httplib::Response& res) {
        json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
        const char* usage =
            "register needs a JSON body {\"raw_handle\": {\"b64\": ...}, \"device_id\": ..., \"byte_size\": ...}";
        if (!body.is_object()) return send_error(res, 400, usage);
        auto handle = body.find("raw_handle");
        auto device = body.find("device_id");
        auto size = body.find("byte_size");
        if (handle == body.end() || !handle->is_object() || !handle->contains("b64") || !(*handle)["b64"].is_string() ||
            device == body.end() || !device->is_number_integer() || size == body.end() || !size->is_number_unsigned())
          return send_error(res, 400, usage);
        std::string raw;
        if (!base64_decode((*handle)["b64"].get<std::string>(), &raw))
          return send_error(res, 400, "register: raw_handle.b64 is not base64");
        if (auto e = shared_memory.register_cuda_region(req.matches[1].str(), raw, device->get<int64_t>(),
                                                        size->get<uint64_t>()))
          return send_error(res, e->http_status, e->message);
        send_json(res, 200, "{}");
      });
  http.Get(R"(/v2/cudasharedmemory(?:/region/([^/]+))?/status)",
           [this](const httplib::Request& req, httplib::Response& res) {
             std::vector<SharedMemoryRegionInfo> regions;
             if (auto e = shared_memory.status(req.matches[1].str(), &regions, SharedMemoryKind::kCuda))
               return send_error(res, e->http_status, e->message);
             json arr = json::array();
             for (const auto& r : regions)
               arr.push_back({{"name", r.name}, {"device_id", r.device_id}, {"byte_size", r.byte_size}});
             send_json(res, 200, arr.dump(-1, ' ', false, json::error_handler_t::replace));
           });
  http.Post(R"(/v2/cudasharedmemory(?:/region/([^/]+))?/unregister)",
            [this](const httplib::Request& req, httplib::Response& res) {
              if (auto e = shared_memory.unregister(req.matches[1].str(), SharedMemoryKind::kCuda))
                return send_error(res, e->http_status, e->message);
              send_json(res, 200, "{}");
            });
  http.Post(R"(/v2/repository/models/([^/]+)/(load|unload))",
            [this](const httplib::Request& req, httplib::Response& res) {
              std::string name = req.matches[1].str();
              Status st = req.matches[2].str() == "load" ? repository.load(name) : repository.unload(name);
              if (st.ok()) {
                send_json(res, 200, "{}");
              } else {
                send_error(res, st.code() == StatusCode::kNotFound ? 404 : 400, st.message());
              }
            });

  metrics_http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.serialize(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

void Server::Impl::infer(const httplib::Request& req, const std::string& body, httplib::Response& res) {
  Clock::time_point start = t_request_start;
  if (draining) return send_error(res, 503, "the server is shutting down");
  auto model = model_or_404(req.matches, res);
  if (!model) return;
  auto fail = [&](int status, const std::string& message) {
    model->stats->request_failed(ns_since(start));
    send_error(res, status, message);
  };
  std::optional<size_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string v = req.get_header_value("Inference-Header-Content-Length");
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-') {
      return fail(400, "Inference-Header-Content-Length '" + v + "' is not a byte count");
    }
    header_length = static_cast<size_t>(n);
  }
  InferRequest request;
  if (auto e = parse_infer_request(body.data(), body.size(), header_length, &request)) {
    return fail(e->http_status, "model '" + model->name + "': " + e->message);
  }
  if (auto e = shared_memory.attach_inputs(&request)) return fail(e->http_status, e->message);
  int64_t batch_size = 1;
  if (auto e = validate_request(request, model->signature, &batch_size)) return fail(e->http_status, e->message);
  std::vector<RequestedOutput> requested = request.outputs;
  bool binary_default = request.binary_outputs;
  std::string id = request.id;
  InferResult result = model->batcher->infer(std::move(request), batch_size);
  if (result.error) return fail(result.error->http_status, result.error->message);
  std::vector<OutputTensor> outs;
  for (const OwnedOutput& o : result.outputs) {
    bool binary = binary_default;
    std::optional<SharedMemoryRef> shm;
    for (const RequestedOutput& r : requested) {
      if (r.name == o.name) {
        binary = r.binary;
        shm = r.shm;
      }
    }
    if (shm) {
      if (auto e = shared_memory.write(*shm, o.data.data(), o.data.size()))
        return fail(e->http_status, "output '" + o.name + "': " + e->message);
    }
    outs.push_back(OutputTensor{o.name, o.dtype, o.shape, o.data.data(), o.data.size(), binary, shm});
  }
  std::optional<size_t> out_header;
  std::string response = build_infer_response(model->name, model->version_str, id, outs, &out_header);
  res.status = 200;
  if (out_header) {
    res.set_header("Inference-Header-Content-Length", std::to_string(*out_header));
    res.set_content(std::move(response), "application/octet-stream");
  } else {
    res.set_content(std::move(response), "application/json");
  }
  model->stats->request_succeeded(ns_since(start), result.queue_ns, result.input_ns, result.compute_ns,
                                  result.output_ns);
}

Server::Server(ServerOptions options, Logger& logger) : impl_(std::make_unique<Impl>(std::move(options), logger)) {}

Server::~Server() { shutdown(); }

Status Server::start() {
  Impl& s = *impl_;
  Status st = s.repository.load_all();
  if (!st.ok()) return st;
  if (s.options.exit_on_error) {
    std::string failed;
    for (const auto& e : s.repository.index())
      if (e.state != "READY") failed += "\n  model '" + e.name + "': " + e.reason;
    if (!failed.empty()) {
      s.repository.stop_all();
      return Status(StatusCode::kInvalidModel,
                    "models failed to load (--exit-on-error false serves the others):" + failed);
    }
  }
  s.routes();
  auto bind = [&](httplib::Server& svr, int port, const char* what, int* bound) -> Status {
    *bound =
        port == 0 ? svr.bind_to_any_port(s.options.address) : (svr.bind_to_port(s.options.address, port) ? port : -1);
    if (*bound <= 0) {
      return Status(StatusCode::kIoError, std::string("cannot bind the ") + what + " port " + s.options.address + ":" +
                                              std::to_string(port) + " (in use? --" + what + "-port)");
    }
    return Status::Ok();
  };
  st = bind(s.http, s.options.http_port, "http", &s.http_port);
  if (!st.ok()) return st;
  widen_listen_backlog(s.http_port);
  if (s.options.metrics_port >= 0) {
    st = bind(s.metrics_http, s.options.metrics_port, "metrics", &s.metrics_port);
    if (!st.ok()) return st;
    s.metrics_thread = std::thread([&s] { s.metrics_http.listen_after_bind(); });
  }
#ifdef INGOT_SERVER_WITH_GRPC
  if (s.options.grpc_port >= 0) {
    s.grpc = std::make_unique<GrpcServer>(s.repository, s.shared_memory, s.draining, s.options.max_request_bytes);
    st = s.grpc->start(s.options.address, s.options.grpc_port);
    if (!st.ok()) return st;
    s.grpc_port = s.grpc->port();
  }
#endif
  s.http_thread = std::thread([&s] { s.http.listen_after_bind(); });
  return Status::Ok();
}

int Server::http_port() const { return impl_->http_port; }
int Server::metrics_port() const { return impl_->metrics_port; }
int Server::grpc_port() const { return impl_->grpc_port; }

void Server::shutdown() {
  Impl& s = *impl_;
  std::call_once(s.shutdown_once, [&s] {
    s.draining = true;
    s.repository.stop_all();  // every queued request is answered before the listeners stop
    s.http.stop();
#ifdef INGOT_SERVER_WITH_GRPC
    if (s.grpc) s.grpc->shutdown();
#endif
    s.metrics_http.stop();
    if (s.http_thread.joinable()) s.http_thread.join();
    if (s.metrics_thread.joinable()) s.metrics_thread.join();
  });
}

}  // namespace ingot::server
