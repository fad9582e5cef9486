// Copyright ingot authors. Apache-2.0.
//
// inference.GRPCInferenceService on gRPC's synchronous server (see grpc_server.h).
#include "server/grpc_server.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ingot/version.h"
#include "server/grpc_request.h"
#include "server/grpc_service.grpc.pb.h"
#include "server/tensor_types.h"

namespace ingot::server {

namespace {

using Clock = std::chrono::steady_clock;

grpc::Status to_grpc(const RequestError& e) {
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
  switch (e.http_status) {
    case 404:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case 413:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case 503:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case 504:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case 500:
      code = grpc::StatusCode::INTERNAL;
      break;
    default:
      break;
  }
  return grpc::Status(code, e.message);
}

// Packs typed contents of `dtype` into little-endian bytes; false with `why` when the field
// used does not fit the datatype.
}  // namespace

struct GrpcServer::Impl final : public inference::GRPCInferenceService::Service {
  Impl(ModelRepository& r, SharedMemoryManager& m, const std::atomic<bool>& d)
      : repository(r), shared_memory(m), draining(d) {}
  ModelRepository& repository;
  SharedMemoryManager& shared_memory;
  const std::atomic<bool>& draining;
  std::unique_ptr<grpc::Server> server;
  std::once_flag shutdown_once;

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* r) override {
    r->set_ready(!draining && repository.all_ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* q,
                          inference::ModelReadyResponse* r) override {
    RequestError e;
    r->set_ready(!draining && repository.find(q->name(), q->version(), &e) != nullptr);
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* r) override {
    r->set_name("ingot");
    r->set_version(ingot::version());
    for (const char* ext : {"system_shared_memory", "statistics", "model_repository"})
      r->add_extensions(ext);  // the extensions this endpoint serves
#ifdef INGOT_WITH_CUDA
    r->add_extensions("cuda_shared_memory");
#endif
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* q,
                             inference::ModelMetadataResponse* r) override {
    RequestError e;
    auto m = repository.find(q->name(), q->version(), &e);
    if (!m) return to_grpc(e);
    r->set_name(m->name);
    for (const auto& entry : repository.index()) {
      if (entry.name == m->name && !entry.version.empty()) r->add_versions(entry.version);
    }
    r->set_platform(m->platform);
    bool batching = m->signature.max_batch_size > 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (const TensorSpec& s : pass == 0 ? m->signature.inputs : m->signature.outputs) {
        auto* t = pass == 0 ? r->add_inputs() : r->add_outputs();
        t->set_name(s.name);
        t->set_datatype(datatype_to_protocol(s.dtype));
        if (batching) t->add_shape(-1);
        for (int64_t d : s.dims) t->add_shape(d);
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* q,
                           inference::ModelConfigResponse* r) override {
    RequestError e;
    auto m = repository.find(q->name(), q->version(), &e);
    if (!m) return to_grpc(e);
    *r->mutable_config() = m->config;
    return grpc::Status::OK;
  }
  // The same JSON entry as HTTP's /stats, parsed into the message (field names are Triton's in
  // both), so the two endpoints cannot disagree.
  grpc::Status ModelStatistics(grpc::ServerContext*, const inference::ModelStatisticsRequest* q,
                               inference::ModelStatisticsResponse* r) override {
    auto add = [&](const ServedModel& m) -> grpc::Status {
      auto* s = r->add_model_stats();
      google::protobuf::util::JsonParseOptions po;
      po.ignore_unknown_fields = true;
      if (!google::protobuf::util::JsonStringToMessage(m.stats->to_json(m.name, m.version_str), s, po).ok())
        return grpc::Status(grpc::StatusCode::INTERNAL, "statistics of model '" + m.name + "' did not convert");
      return grpc::Status::OK;
    };
    if (!q->name().empty()) {
      RequestError e;
      auto m = repository.find(q->name(), q->version(), &e);
      if (!m) return to_grpc(e);
      return add(*m);
    }
    for (const auto& entry : repository.index()) {
      if (entry.version.empty()) continue;
      RequestError e;
      if (auto m = repository.find(entry.name, entry.version, &e)) {
        grpc::Status st = add(*m);
        if (!st.ok()) return st;
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryIndex(grpc::ServerContext*, const inference::RepositoryIndexRequest* q,
                               inference::RepositoryIndexResponse* r) override {
    for (const auto& e : repository.index()) {
      if (q->ready() && e.state != "READY") continue;
      auto* m = r->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const inference::RepositoryModelLoadRequest* q,
                                   inference::RepositoryModelLoadResponse*) override {
    return repository_status(repository.load(q->model_name()));
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const inference::RepositoryModelUnloadRequest* q,
                                     inference::RepositoryModelUnloadResponse*) override {
    return repository_status(repository.unload(q->model_name()));
  }
  static grpc::Status repository_status(const Status& st) {
    if (st.ok()) return grpc::Status::OK;
    return grpc::Status(
        st.code() == StatusCode::kNotFound ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::INVALID_ARGUMENT,
        st.message());
  }
  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext*, const inference::SystemSharedMemoryStatusRequest* q,
                                        inference::SystemSharedMemoryStatusResponse* r) override {
    std::vector<SharedMemoryRegionInfo> regions;
    if (auto e = shared_memory.status(q->name(), &regions)) return to_grpc(*e);
    for (const SharedMemoryRegionInfo& info : regions) {
      auto& s = (*r->mutable_regions())[info.name];
      s.set_name(info.name);
      s.set_key(info.key);
      s.set_offset(info.offset);
      s.set_byte_size(info.byte_size);
    }
    return grpc::Status::OK;
  }
  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext*, const inference::SystemSharedMemoryRegisterRequest* q,
                                          inference::SystemSharedMemoryRegisterResponse*) override {
    if (auto e = shared_memory.register_region(q->name(), q->key(), q->offset(), q->byte_size())) return to_grpc(*e);
    return grpc::Status::OK;
  }
  grpc::Status SystemSharedMemoryUnregister(grpc::ServerContext*,
                                            const inference::SystemSharedMemoryUnregisterRequest* q,
                                            inference::SystemSharedMemoryUnregisterResponse*) override {
    if (auto e = shared_memory.unregister(q->name())) return to_grpc(*e);
    return grpc::Status::OK;
  }
  grpc::Status CudaSharedMemoryStatus(grpc::ServerContext*, const inference::CudaSharedMemoryStatusRequest* q,
                                      inference::CudaSharedMemoryStatusResponse* r) override {
    std::vector<SharedMemoryRegionInfo> regions;
    if (auto e = shared_memory.status(q->name(), &regions, SharedMemoryKind::kCuda)) return to_grpc(*e);
    for (const SharedMemoryRegionInfo& i : regions) {
      auto& s = (*r->mutable_regions())[i.name];
      s.set_name(i.name);
      s.set_device_id(static_cast<uint64_t>(i.device_id));
      s.set_byte_size(i.byte_size);
    }
    return grpc::Status::OK;
  }
  grpc::Status CudaSharedMemoryRegister(grpc::ServerContext*, const inference::CudaSharedMemoryRegisterRequest* q,
                                        inference::CudaSharedMemoryRegisterResponse*) override {
    if (auto e = shared_memory.register_cuda_region(q->name(), q->raw_handle(), q->device_id(), q->byte_size()))
      return to_grpc(*e);
    return grpc::Status::OK;
  }
  grpc::Status CudaSharedMemoryUnregister(grpc::ServerContext*, const inference::CudaSharedMemoryUnregisterRequest* q,
                                          inference::CudaSharedMemoryUnregisterResponse*) override {
    if (auto e = shared_memory.unregister(q->name(), SharedMemoryKind::kCuda)) return to_grpc(*e);
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* q,
                          inference::ModelInferResponse* r) override {
    // gRPC's synchronous API hands the request as const, but the message is the call's own,
    // created mutable and destroyed after this returns: its input bytes (MBs) are moved out.
    return infer_one(const_cast<inference::ModelInferRequest*>(q), r);
  }

  // Each request read from the stream runs on its own thread (up to kStreamInFlight at once, so
  // one stream's requests batch together) and its answer is written when it is ready, in
  // completion order, carrying the request's id; a failed request answers with error_message
  // and the stream goes on. The stream ends once the client closed its side and every answer
  // is written.
  static constexpr int kStreamInFlight = 64;
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>* stream) override {
    std::mutex mu;
    std::condition_variable cv;
    int in_flight = 0;
    bool write_failed = false;
    auto answer = [&](inference::ModelInferRequest& q) {
      inference::ModelStreamInferResponse out;
      grpc::Status st = infer_one(&q, out.mutable_infer_response());
      if (!st.ok()) {
        out.set_error_message(st.error_message());
        out.mutable_infer_response()->set_id(q.id());
        out.mutable_infer_response()->set_model_name(q.model_name());
        out.mutable_infer_response()->set_model_version(q.model_version());
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!write_failed && !stream->Write(out)) write_failed = true;
    };
    for (;;) {
      auto q = std::make_shared<inference::ModelInferRequest>();
      if (!stream->Read(q.get())) break;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < kStreamInFlight; });
      if (write_failed || ctx->IsCancelled()) break;
      ++in_flight;
      lock.unlock();
      std::thread([&, q] {
        answer(*q);
        std::lock_guard<std::mutex> done(mu);
        --in_flight;
        cv.notify_all();
      }).detach();
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_flight == 0; });
    return grpc::Status::OK;
  }

  // One request to its response (ModelInfer, and each request of a stream).
  grpc::Status infer_one(inference::ModelInferRequest* q, inference::ModelInferResponse* r) {
    Clock::time_point start = Clock::now();
    auto ns = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(); };
    if (draining) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    RequestError e;
    auto m = repository.find(q->model_name(), q->model_version(), &e);
    if (!m) return to_grpc(e);
    auto fail = [&](const RequestError& err) {
      m->stats->request_failed(ns());
      return to_grpc(RequestError{err.http_status, "model '" + m->name + "': " + err.message});
    };
    InferRequest request;
    if (auto pe = infer_request_from_proto(q, &request)) return fail(*pe);
    if (auto se = shared_memory.attach_inputs(&request)) return fail(*se);
    int64_t batch = 1;
    if (auto ve = validate_request(request, m->signature, &batch)) return fail(*ve);
    std::vector<RequestedOutput> requested = request.outputs;
    InferResult result = m->batcher->infer(std::move(request), batch);
    if (result.error) return fail(*result.error);
    r->set_model_name(m->name);
    r->set_model_version(m->version_str);
    r->set_id(q->id());
    for (OwnedOutput& o : result.outputs) {
      std::optional<SharedMemoryRef> shm;
      for (const RequestedOutput& want : requested)
        if (want.name == o.name) shm = want.shm;
      auto* t = r->add_outputs();
      t->set_name(o.name);
      t->set_datatype(datatype_to_protocol(o.dtype));
      for (int64_t d : o.shape) t->add_shape(d);
      if (shm) {
        if (auto we = shared_memory.write(*shm, o.data.data(), o.data.size()))
          return fail(RequestError{we->http_status, "output '" + o.name + "': " + we->message});
        (*t->mutable_parameters())["shared_memory_region"].set_string_param(shm->region);
        (*t->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(o.data.size()));
        if (shm->offset)
          (*t->mutable_parameters())["shared_memory_offset"].set_int64_param(static_cast<int64_t>(shm->offset));
        // An empty entry keeps raw_output_contents[i] the i-th output's, as clients index it.
        r->add_raw_output_contents();
      } else {
        r->add_raw_output_contents(std::move(o.data));
      }
    }
    m->stats->request_succeeded(ns(), result.queue_ns, result.input_ns, result.compute_ns, result.output_ns);
    return grpc::Status::OK;
  }
};

GrpcServer::GrpcServer(ModelRepository& repository, SharedMemoryManager& shared_memory,
                       const std::atomic<bool>& draining, size_t max_message_bytes)
    : impl_(std::make_unique<Impl>(repository, shared_memory, draining)) {
  max_message_bytes_ = max_message_bytes;
}

GrpcServer::~GrpcServer() { shutdown(); }

Status GrpcServer::start(const std::string& address, int port) {
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(address + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &bound);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(max_message_bytes_, INT32_MAX)));
  builder.SetMaxSendMessageSize(INT32_MAX);
  builder.RegisterService(impl_.get());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || bound <= 0) {
    return Status(StatusCode::kIoError,
                  "cannot bind the grpc port " + address + ":" + std::to_string(port) + " (in use? --grpc-port)");
  }
  port_ = bound;
  return Status::Ok();
}

void GrpcServer::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    if (impl_->server) {
      impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30));
      impl_->server->Wait();
    }
  });
}

}  // namespace ingot::server
