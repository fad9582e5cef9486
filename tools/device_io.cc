// Copyright ingot authors. Apache-2.0.
#include "device_io.h"

#include <cstring>

#ifdef INGOT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace ingot::tools {

namespace {

#ifdef INGOT_WITH_CUDA
Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kInternal, std::string(what) + ": " + cudaGetErrorString(e));
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
#endif

Status no_cuda() {
  return Status(StatusCode::kUnsupported,
                "this is a cuda engine, but the ingot tools were built without CUDA (rebuild with -DINGOT_CUDA=ON)");
}

bool known_dims(const std::vector<int64_t>& d) {
  for (int64_t x : d)
    if (x < 0) return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<IoBuffers>> IoBuffers::create(const Engine& engine, ExecutionContext& ctx) {
  std::unique_ptr<IoBuffers> b(new IoBuffers(engine, ctx));
  b->device_ = engine.backend() != "cpu";
  if (!b->device_) return b;
#ifdef INGOT_WITH_CUDA
  cudaStream_t s = nullptr;
  Status st = cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  if (!st.ok()) return st;
  b->stream_ = s;
  return b;
#else
  return no_cuda();
#endif
}

IoBuffers::~IoBuffers() {
#ifdef INGOT_WITH_CUDA
  if (stream_) cudaStreamSynchronize(as_stream(stream_));
  for (auto& [name, b] : buffers_) {
    unpin(b);
    if (b.device) cudaFree(b.device);
  }
  if (stream_) cudaStreamDestroy(as_stream(stream_));
#endif
}

Status IoBuffers::reserve(Buffer& b, size_t bytes) {
  b.bytes = bytes;
  if (!device_ || bytes <= b.capacity) return Status::Ok();
#ifdef INGOT_WITH_CUDA
  if (b.device) {
    // The old buffer may still be read by enqueued work.
    Status s = synchronize();
    if (!s.ok()) return s;
    cudaFree(b.device);
    b.device = nullptr;
    b.capacity = 0;
  }
  Status s = cuda_status(cudaMalloc(&b.device, bytes), "cudaMalloc");
  if (!s.ok()) {
    b.device = nullptr;
    return Status(StatusCode::kOutOfMemory, s.message());
  }
  b.capacity = bytes;
  return Status::Ok();
#else
  return no_cuda();
#endif
}

void IoBuffers::pin(Buffer& b) {
  unpin(b);
#ifdef INGOT_WITH_CUDA
  // Small tensors gain nothing, and their pages may be shared with others already registered.
  constexpr size_t kMinPinned = 64 << 10;
  if (!device_ || b.host.data.size() < kMinPinned) return;
  if (cudaHostRegister(b.host.data.data(), b.host.data.size(), cudaHostRegisterDefault) == cudaSuccess)
    b.pinned = b.host.data.data();
  else
    cudaGetLastError();  // stays pageable
#endif
}

void IoBuffers::unpin(Buffer& b) {
#ifdef INGOT_WITH_CUDA
  if (b.pinned) cudaHostUnregister(b.pinned);
#endif
  b.pinned = nullptr;
}

Status IoBuffers::upload(const HostTensor& t) {
  if (device_ && t.dtype == DataType::kString)
    return Status(StatusCode::kInvalidArgument, "input '" + t.name + "': string tensors run on cpu engines only");
  Status s = ctx_.set_input_shape(t.name, t.shape);
  if (!s.ok()) return s;
  Buffer& b = buffers_[t.name];
  if (device_) {
    // Enqueued copies may still read the old host copy.
    s = synchronize();
    if (!s.ok()) return s;
  }
  unpin(b);
  b.host = t;
  pin(b);
  s = reserve(b, t.data.size());
  if (!s.ok()) return s;
  if (!device_) {
    void* p = t.dtype == DataType::kString ? static_cast<void*>(b.host.strings.data())
                                            : static_cast<void*>(b.host.data.data());
    return ctx_.set_tensor_address(t.name, p);
  }
  s = ctx_.set_tensor_address(t.name, b.device);
  if (!s.ok()) return s;
  return copy_inputs_to_device();
}

Status IoBuffers::upload_all(const std::vector<HostTensor>& inputs) {
  for (const HostTensor& t : inputs) {
    Status s = upload(t);
    if (!s.ok()) return s;
  }
  if (!device_) return Status::Ok();
  Status s = ctx_.infer_shapes();
  if (!s.ok()) return s;
  for (const IoTensorDesc& d : engine_.io_tensors()) {
    if (d.is_input) continue;
    if (d.dtype == DataType::kString)
      return Status(StatusCode::kInvalidArgument, "output '" + d.name + "': string tensors run on cpu engines only");
    auto shape = ctx_.tensor_shape(d.name);
    if (!shape.ok()) return shape.status();
    Buffer& b = buffers_[d.name];
    if (!known_dims(*shape)) {
      // Data-dependent dims: the context sizes and holds it; download reads tensor_address.
      s = ctx_.set_tensor_address(d.name, nullptr);
      if (!s.ok()) return s;
      continue;
    }
    auto h = HostTensor::zeros(d.name, d.dtype, *shape);
    if (!h.ok()) return h.status();
    unpin(b);
    b.host = std::move(h).value();
    pin(b);
    s = reserve(b, b.host.data.size());
    if (!s.ok()) return s;
    s = ctx_.set_tensor_address(d.name, b.host.data.empty() ? nullptr : b.device);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status IoBuffers::copy_inputs_to_device() {
  if (!device_) return Status::Ok();
#ifdef INGOT_WITH_CUDA
  for (const IoTensorDesc& d : engine_.io_tensors()) {
    if (!d.is_input) continue;
    auto it = buffers_.find(d.name);
    if (it == buffers_.end() || it->second.host.data.empty()) continue;
    Buffer& b = it->second;
    Status s = cuda_status(cudaMemcpyAsync(b.device, b.host.data.data(), b.host.data.size(), cudaMemcpyHostToDevice,
                                           as_stream(stream_)),
                           "copying an input to the device");
    if (!s.ok()) return s;
  }
  return Status::Ok();
#else
  return no_cuda();
#endif
}

Status IoBuffers::copy_out(const std::string& name, Buffer& b, bool wait) {
  auto shape = ctx_.tensor_shape(name);
  if (!shape.ok()) return shape.status();
  DataType dtype = DataType::kUndefined;
  for (const IoTensorDesc& d : engine_.io_tensors())
    if (d.name == name) dtype = d.dtype;
  if (b.host.name != name || b.host.dtype != dtype || b.host.shape != *shape) {
    auto h = HostTensor::zeros(name, dtype, *shape);
    if (!h.ok()) return h.status();
    Status s = synchronize();  // enqueued copies may still write the old staging
    if (!s.ok()) return s;
    unpin(b);
    b.host = std::move(h).value();
    pin(b);
  }
  const void* src = ctx_.tensor_address(name);
  if (!device_) {
    if (!src) return Status::Ok();
    if (dtype == DataType::kString) {
      const std::string* s = static_cast<const std::string*>(src);
      b.host.strings.assign(s, s + b.host.numel());
    } else if (!b.host.data.empty()) {
      std::memcpy(b.host.data.data(), src, b.host.data.size());
    }
    return Status::Ok();
  }
#ifdef INGOT_WITH_CUDA
  if (src && !b.host.data.empty()) {
    Status s = cuda_status(cudaMemcpyAsync(b.host.data.data(), src, b.host.data.size(), cudaMemcpyDeviceToHost,
                                           as_stream(stream_)),
                           "copying an output to the host");
    if (!s.ok()) return s;
  }
  return wait ? synchronize() : Status::Ok();
#else
  (void)wait;
  return no_cuda();
#endif
}

Status IoBuffers::copy_outputs_to_host() {
  for (const IoTensorDesc& d : engine_.io_tensors()) {
    if (d.is_input) continue;
    Status s = copy_out(d.name, buffers_[d.name], false);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Result<HostTensor> IoBuffers::download(const std::string& name) {
  Status s = synchronize();
  if (!s.ok()) return s;
  Buffer& b = buffers_[name];
  s = copy_out(name, b, true);
  if (!s.ok()) return s;
  return b.host;
}

Result<std::vector<HostTensor>> IoBuffers::download_all() {
  Status s = synchronize();
  if (!s.ok()) return s;
  std::vector<HostTensor> outs;
  for (const IoTensorDesc& d : engine_.io_tensors()) {
    if (d.is_input) continue;
    auto h = download(d.name);
    if (!h.ok()) return h.status();
    outs.push_back(std::move(h).value());
  }
  return outs;
}

Status IoBuffers::synchronize() {
#ifdef INGOT_WITH_CUDA
  if (stream_) return cuda_status(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
#endif
  return Status::Ok();
}

Result<std::unique_ptr<GpuEvent>> GpuEvent::create(bool device) {
  std::unique_ptr<GpuEvent> e(new GpuEvent());
  if (!device) return e;
#ifdef INGOT_WITH_CUDA
  cudaEvent_t ev = nullptr;
  Status s = cuda_status(cudaEventCreate(&ev), "cudaEventCreate");
  if (!s.ok()) return s;
  e->event_ = ev;
  return e;
#else
  return no_cuda();
#endif
}

GpuEvent::~GpuEvent() {
#ifdef INGOT_WITH_CUDA
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
}

Status GpuEvent::record(void* stream) {
#ifdef INGOT_WITH_CUDA
  if (event_) return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(event_), as_stream(stream)), "cudaEventRecord");
#else
  (void)stream;
#endif
  return Status::Ok();
}

Result<float> GpuEvent::elapsed_since(const GpuEvent& start) const {
#ifdef INGOT_WITH_CUDA
  if (event_ && start.event_) {
    float ms = 0;
    Status s = cuda_status(
        cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(event_)),
        "cudaEventElapsedTime");
    if (!s.ok()) return s;
    return ms;
  }
#else
  (void)start;
#endif
  return 0.0f;
}

void start_device_context() {
#ifdef INGOT_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) cudaFree(nullptr);
  cudaGetLastError();
#endif
}

Result<GpuInfo> current_gpu() {
#ifdef INGOT_WITH_CUDA
  int device = 0;
  Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice");
  if (!s.ok()) return s;
  cudaDeviceProp p{};
  s = cuda_status(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  if (!s.ok()) return s;
  GpuInfo g;
  g.name = p.name;
  g.sm = p.major * 10 + p.minor;
  return g;
#else
  return no_cuda();
#endif
}

}  // namespace ingot::tools
