// Copyright ingot authors. Apache-2.0.
//
// Dynamic batching (see dynamic_batcher.h).
#include "server/dynamic_batcher.h"

#include <algorithm>
#include <cstring>

#include "server/tensor_types.h"

#ifdef INGOT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ingot::server {

namespace {
enum State : int { kQueued = 0, kTaken = 1, kAnswered = 2 };

InferResult error_result(int http_status, std::string message) {
  InferResult r;
  r.error = RequestError{http_status, std::move(message)};
  return r;
}

int64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}
}  // namespace

struct DynamicBatcher::Pending {
  InferRequest request;
  int64_t batch_size = 1;
  std::string shape_key;  // non-batch dims of every input: requests batch together only when equal
  Clock::time_point enqueued;
  std::optional<Clock::time_point> deadline;
  std::atomic<int> state{kQueued};
  std::promise<InferResult> promise;
};

#ifdef INGOT_WITH_CUDA
namespace {
Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal,
                std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device or page-locked host buffer, grown on demand (growth frees the old one, which
/// synchronizes the device: create() reserves the max batch up front where the shapes allow).
struct CudaBuffer {
  bool host = false;
  void* data = nullptr;
  size_t capacity = 0;
  explicit CudaBuffer(bool on_host) : host(on_host) {}
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  ~CudaBuffer() { release(); }
  void release() {
    if (data) host ? cudaFreeHost(data) : cudaFree(data);
    data = nullptr;
    capacity = 0;
  }
  Status reserve(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    if (capacity >= bytes) return Status::Ok();
    release();
    Status st = host ? cuda_status(cudaMallocHost(&data, bytes), "cudaMallocHost of a staging buffer")
                     : cuda_status(cudaMalloc(&data, bytes), "cudaMalloc of an input/output buffer");
    if (st.ok())
      capacity = bytes;
    else
      data = nullptr;
    return st;
  }
  char* bytes() const { return static_cast<char*>(data); }
};
}  // namespace
#endif

// A cuda instance: its stream, device buffers for the batch's inputs and outputs (the engine
// reads and writes them in place, so their addresses stay put and the context's views and plans
// survive from batch to batch), and page-locked host buffers for the copies. A request's rows
// are copied to the device straight from a pinned shared-memory region, or else staged through
// the pinned buffer (pageable copies run at a seventh of the speed and synchronize the host).
struct DynamicBatcher::DeviceIo {
#ifdef INGOT_WITH_CUDA
  cudaStream_t stream = nullptr;
  std::vector<std::unique_ptr<CudaBuffer>> inputs, staging;        // per model input
  std::vector<std::unique_ptr<CudaBuffer>> outputs, host_outputs;  // per model output
  std::vector<bool> bind_output;  // the output's size follows from the batch: bound to outputs[o]
  /// Recorded on the stream before the inputs' copies, before the engine, before the outputs'
  /// copies and after them: the batch's device time split into input, infer and output.
  cudaEvent_t marks[4] = {nullptr, nullptr, nullptr, nullptr};
  ~DeviceIo() {
    if (stream) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : marks) {
      if (e) cudaEventDestroy(e);
    }
    if (stream) cudaStreamDestroy(stream);
  }
  /// Nanoseconds between marks a and b (0 when the events are missing).
  int64_t between(int a, int b) const {
    float ms = 0;
    if (!marks[a] || !marks[b] || cudaEventElapsedTime(&ms, marks[a], marks[b]) != cudaSuccess) return 0;
    return static_cast<int64_t>(ms * 1e6);
  }
  /// Buffers for the signature, the fixed-size ones reserved for max_batch rows now.
  Status init(const ModelSignature& sig, int64_t max_rows) {
    Status st = cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (cudaEvent_t& e : marks)
      if (st.ok()) st = cuda_status(cudaEventCreate(&e), "cudaEventCreate");
    // Bytes of max_rows rows, or 0 when a dim other than the batch dim is open.
    auto max_bytes = [&](const TensorSpec& t) -> size_t {
      int64_t n = element_count(t.dims);
      return n < 0 ? 0 : static_cast<size_t>(n) * element_size(t.dtype) * static_cast<size_t>(max_rows);
    };
    for (const TensorSpec& t : sig.inputs) {
      inputs.push_back(std::make_unique<CudaBuffer>(false));
      staging.push_back(std::make_unique<CudaBuffer>(true));
      if (size_t b = max_bytes(t); b && st.ok()) {
        st = inputs.back()->reserve(b);
        if (st.ok()) st = staging.back()->reserve(b);
      }
    }
    for (const TensorSpec& t : sig.outputs) {
      outputs.push_back(std::make_unique<CudaBuffer>(false));
      host_outputs.push_back(std::make_unique<CudaBuffer>(true));
      size_t b = max_bytes(t);
      bind_output.push_back(b > 0);
      if (b && st.ok()) {
        st = outputs.back()->reserve(b);
        if (st.ok()) st = host_outputs.back()->reserve(b);
      }
    }
    return st;
  }
#endif
};

Result<std::unique_ptr<DynamicBatcher>> DynamicBatcher::create(std::shared_ptr<Engine> engine, ModelSignature signature,
                                                               BatchingOptions options, ModelStats* stats) {
  bool cuda = engine->backend() == "cuda";
#ifndef INGOT_WITH_CUDA
  if (cuda) {
    return Status(StatusCode::kUnsupported, "model '" + signature.name +
                                                "' is a cuda engine and this ingot is built "
                                                "without CUDA");
  }
#endif
  if (!cuda && engine->backend() != "cpu") {
    return Status(StatusCode::kUnsupported,
                  "model '" + signature.name + "': cannot serve " + engine->backend() + " engines");
  }
  std::unique_ptr<DynamicBatcher> b(new DynamicBatcher(std::move(engine), std::move(signature), options, stats));
  b->cuda_ = cuda;
  for (int i = 0; i < b->options_.instances; ++i) {
    // Every instance runs on the device the engine was loaded on (one engine per process today).
    auto ctx = b->engine_->create_execution_context();
    if (!ctx.ok()) return ctx.status();
    // A graph per executed batch size: the prepared sizes' are captured by the warm-up below.
    if (cuda && b->options_.cuda_graphs) {
      Status st = ctx.value()->set_cuda_graph_mode(true);
      if (!st.ok()) return st;
    }
    b->contexts_.push_back(std::move(ctx.value()));
    b->device_io_.push_back(std::make_unique<DeviceIo>());
#ifdef INGOT_WITH_CUDA
    if (cuda) {
      int64_t rows = b->signature_.max_batch_size > 0 ? b->signature_.max_batch_size : 1;
      Status st = b->device_io_.back()->init(b->signature_, rows);
      if (!st.ok()) return st;
    }
#endif
  }
  // Prepared batch sizes (see BatchingOptions::prepared).
  const BatchingOptions& o = b->options_;
  if (b->signature_.max_batch_size > 0) {
    if (o.prepared == BatchingOptions::Prepared::kList) {
      b->prepared_ = o.prepared_sizes;
    } else if (o.prepared == BatchingOptions::Prepared::kAuto && cuda) {
      b->prepared_ = auto_prepared_sizes(b->signature_.max_batch_size, o.preferred_sizes);
    }
  }
  // Only sizes profile 0 accepts for every input's batch dim (a profile may start above 1).
  if (!b->prepared_.empty()) {
    int64_t lo = 1, hi = b->signature_.max_batch_size;
    for (const TensorSpec& in : b->signature_.inputs) {
      std::vector<int64_t> mn, mx;
      if (b->engine_->profile_dimensions(0, in.name, &mn, nullptr, &mx).ok() && !mn.empty() && !mx.empty()) {
        lo = std::max(lo, mn[0]);
        hi = std::min(hi, mx[0]);
      }
    }
    b->prepared_.erase(
        std::remove_if(b->prepared_.begin(), b->prepared_.end(), [&](int64_t p) { return p < lo || p > hi; }),
        b->prepared_.end());
  }
  Status warmed = b->warm_up();
  if (!warmed.ok()) return warmed;
  if (cuda) {
    if (!b->options_.cuda_graphs) {
      b->cuda_graphs_ = "off (the config's optimization.cuda.graphs)";
    } else if (std::string why = b->contexts_.front()->cuda_graph_status(); !why.empty()) {
      b->cuda_graphs_ = "off: " + why;
    } else if (b->prepared_.empty()) {
      b->cuda_graphs_ = "on (no prepared sizes: a batch size's graph is captured at its second batch)";
    } else {
      b->cuda_graphs_ = "on (" + std::to_string(b->contexts_.front()->cuda_graphs_held()) + " graphs per instance)";
    }
  }
  for (size_t i = 0; i < b->contexts_.size(); ++i) b->workers_.emplace_back(&DynamicBatcher::worker, b.get(), i);
  return b;
}

std::vector<int64_t> auto_prepared_sizes(int64_t max_batch_size, const std::vector<int64_t>& preferred) {
  std::vector<int64_t> sizes;
  for (int64_t p = 1; p < max_batch_size; p *= 2) {
    sizes.push_back(p);
    if (p >= 2 && p + p / 2 < max_batch_size) sizes.push_back(p + p / 2);
  }
  sizes.push_back(max_batch_size);
  for (int64_t p : preferred)
    if (p >= 1 && p <= max_batch_size) sizes.push_back(p);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

int64_t DynamicBatcher::padded_rows(int64_t rows) const {
  auto it = std::lower_bound(prepared_.begin(), prepared_.end(), rows);
  return it == prepared_.end() ? rows : *it;
}

Status DynamicBatcher::warm_up() {
  if (prepared_.empty()) return Status::Ok();
  // Inputs whose non-batch dims are open have no shape to prepare, and string rows cannot be
  // padded: prepare nothing (batches then run at their own size).
  for (const TensorSpec& in : signature_.inputs) {
    if (element_size(in.dtype) == 0) {
      prepared_.clear();
      return Status::Ok();
    }
    for (int64_t d : in.dims) {
      if (d < 0) {
        prepared_.clear();
        return Status::Ok();
      }
    }
  }
  const Clock::time_point start = Clock::now();
  // In graph mode a context runs a new size's first batch plainly (tactics settle their per-shape
  // plans) and captures the second: two warm-up batches per size, so that a request finds the graph.
  const int passes = cuda_ && options_.cuda_graphs ? 2 : 1;
  for (size_t i = 0; i < contexts_.size(); ++i) {
    std::vector<std::string> buffers(signature_.inputs.size());
    for (int64_t rows : prepared_) {
      for (int pass = 0; pass < passes; ++pass) {
        auto p = std::make_shared<Pending>();
        p->batch_size = rows;
        for (const TensorSpec& spec : signature_.inputs) {
          InferInput in;
          in.name = spec.name;
          in.dtype = spec.dtype;
          in.shape.push_back(rows);
          in.shape.insert(in.shape.end(), spec.dims.begin(), spec.dims.end());
          in.data.assign(static_cast<size_t>(element_count(in.shape)) * element_size(spec.dtype), '\0');
          p->request.inputs.push_back(std::move(in));
        }
        p->enqueued = Clock::now();
        std::future<InferResult> done = p->promise.get_future();
        execute(*contexts_[i], cuda_ ? device_io_[i].get() : nullptr, buffers, {p}, /*warm_up=*/true);
        InferResult r = done.get();
        if (r.error) {
          return Status(StatusCode::kInternal, "model '" + signature_.name + "': warm-up batch of " +
                                                   std::to_string(rows) + " on instance " + std::to_string(i) +
                                                   " failed: " + r.error->message);
        }
      }
    }
  }
  warm_up_ms_ = static_cast<double>(ns_between(start, Clock::now())) / 1e6;
  return Status::Ok();
}

DynamicBatcher::DynamicBatcher(std::shared_ptr<Engine> engine, ModelSignature signature, BatchingOptions options,
                               ModelStats* stats)
    : engine_(std::move(engine)), signature_(std::move(signature)), options_(std::move(options)), stats_(stats) {
  if (!options_.dynamic || options_.max_batch_size <= 0) {
    batch_limit_ = 1;  // each request runs alone
  } else if (!options_.preferred_sizes.empty()) {
    batch_limit_ = *std::max_element(options_.preferred_sizes.begin(), options_.preferred_sizes.end());
  } else {
    batch_limit_ = options_.max_batch_size;
  }
}

DynamicBatcher::~DynamicBatcher() { stop(); }

void DynamicBatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

int64_t DynamicBatcher::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

InferResult DynamicBatcher::infer(InferRequest request, int64_t batch_size) {
  auto p = std::make_shared<Pending>();
  p->batch_size = batch_size;
  // Inputs in signature order, so the key and the gather agree whatever order the client used.
  std::vector<InferInput> ordered;
  for (const TensorSpec& s : signature_.inputs) {
    for (InferInput& in : request.inputs) {
      if (in.name == s.name) ordered.push_back(std::move(in));
    }
  }
  request.inputs = std::move(ordered);
  for (const InferInput& in : request.inputs) {
    std::vector<int64_t> rest(in.shape.begin() + (signature_.max_batch_size > 0 ? 1 : 0), in.shape.end());
    p->shape_key += dims_string(rest);
  }
  int64_t timeout_us = request.timeout_us > 0 ? request.timeout_us : options_.default_timeout_us;
  p->request = std::move(request);
  p->enqueued = Clock::now();
  if (timeout_us > 0) p->deadline = p->enqueued + std::chrono::microseconds(timeout_us);
  std::future<InferResult> done = p->promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return error_result(503, "model '" + signature_.name + "' is unloading");
    if (options_.max_queue_size > 0 && queued_ >= options_.max_queue_size) {
      return error_result(503, "model '" + signature_.name + "': queue full (max_queue_size " +
                                   std::to_string(options_.max_queue_size) + "), try again later");
    }
    queue_.push_back(p);
    ++queued_;
  }
  stats_->pending_changed(1);
  cv_.notify_one();
  if (p->deadline && done.wait_until(*p->deadline) == std::future_status::timeout) {
    int expected = kQueued;
    if (p->state.compare_exchange_strong(expected, kAnswered)) {  // still queued: never runs now
      {
        std::lock_guard<std::mutex> lock(mu_);
        --queued_;
      }
      stats_->pending_changed(-1);
      return error_result(504, "request timed out in the queue of model '" + signature_.name + "' after " +
                                   std::to_string(timeout_us) + " us");
    }
  }
  return done.get();  // taken by a worker (or expired by one): its answer comes
}

void DynamicBatcher::expire_locked(Clock::time_point now) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Pending& p = **it;
    if (p.state.load() != kQueued) {  // answered by its caller's timeout
      it = queue_.erase(it);
      continue;
    }
    if (p.deadline && *p.deadline <= now) {
      int expected = kQueued;
      if (p.state.compare_exchange_strong(expected, kAnswered)) {
        --queued_;
        stats_->pending_changed(-1);
        p.promise.set_value(error_result(504, "request timed out in the queue of model '" + signature_.name + "'"));
      }
      it = queue_.erase(it);
      continue;
    }
    ++it;
  }
}

DynamicBatcher::Batch DynamicBatcher::next_batch(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    Clock::time_point now = Clock::now();
    expire_locked(now);
    if (queue_.empty()) {
      if (stopping_) return {};
      cv_.wait(lock);
      continue;
    }
    // Copies: the head may be released while the batch is taken (its caller timed out).
    const std::string key = queue_.front()->shape_key;
    const Clock::time_point head_enqueued = queue_.front()->enqueued;
    // Rows available now for a batch with the head's shape, up to the limit.
    int64_t rows = 0;
    bool full = false;
    for (const auto& p : queue_) {
      if (p->shape_key != key) continue;
      if (rows + p->batch_size > batch_limit_) {
        full = true;
        break;
      }
      rows += p->batch_size;
    }
    full = full || rows >= batch_limit_;
    Clock::time_point ready_at = head_enqueued + std::chrono::microseconds(options_.max_queue_delay_us);
    if (full || now >= ready_at || stopping_) {
      // Past the delay take up to max_batch_size rows; at the preferred size, exactly that.
      int64_t limit = full ? batch_limit_ : std::max<int64_t>(batch_limit_, options_.max_batch_size);
      if (!options_.dynamic || options_.max_batch_size <= 0) limit = 1;
      Batch batch;
      int64_t taken = 0;
      for (auto it = queue_.begin(); it != queue_.end();) {
        Pending& p = **it;
        if (p.shape_key != key) {
          ++it;
          continue;
        }
        // In arrival order; the head always goes (validation kept it within max_batch_size).
        if (taken > 0 && taken + p.batch_size > limit) break;
        int expected = kQueued;
        if (p.state.compare_exchange_strong(expected, kTaken)) {
          taken += p.batch_size;
          --queued_;
          stats_->pending_changed(-1);
          batch.push_back(*it);
        }
        it = queue_.erase(it);
      }
      if (!batch.empty()) return batch;
      continue;
    }
    Clock::time_point wake = ready_at;
    for (const auto& p : queue_) {
      if (p->deadline && *p->deadline < wake) wake = *p->deadline;
    }
    cv_.wait_until(lock, wake);
  }
}

void DynamicBatcher::worker(size_t instance) {
  std::vector<std::string> buffers(signature_.inputs.size());
  ExecutionContext& ctx = *contexts_[instance];
  DeviceIo* dev = cuda_ ? device_io_[instance].get() : nullptr;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Batch batch = next_batch(lock);
    if (batch.empty()) return;
    lock.unlock();
    cv_.notify_one();  // another worker may form the next batch meanwhile
    execute(ctx, dev, buffers, batch);
    lock.lock();
  }
}

void DynamicBatcher::execute(ExecutionContext& ctx, DeviceIo* dev, std::vector<std::string>& buffers,
                             const Batch& batch, bool warm_up) {
  Clock::time_point start = Clock::now();
  bool batching = signature_.max_batch_size > 0;
  int64_t rows = 0;
  for (const auto& p : batch) rows += p->batch_size;
  // The rows the engine runs: padded with zeros up to the next prepared size.
  const int64_t run_rows = batching ? padded_rows(rows) : rows;
  auto fail_all = [&](int http, const std::string& message) {
    for (const auto& p : batch) {
      InferResult r = error_result(http, message);
      r.queue_ns = ns_between(p->enqueued, start);
      p->state.store(kAnswered);
      p->promise.set_value(std::move(r));
    }
  };
  // Gather: concatenate each input along the batch dim (rows are contiguous, so appending the
  // requests' packed data in order is the concatenation).
#ifdef INGOT_WITH_CUDA
  if (dev) cudaEventRecord(dev->marks[0], dev->stream);
#endif
  for (size_t i = 0; i < signature_.inputs.size(); ++i) {
    const std::string& name = signature_.inputs[i].name;
    std::vector<int64_t> shape = batch.front()->request.inputs[i].shape;
    if (batching) shape[0] = run_rows;
    size_t total = 0;
    for (const auto& p : batch) total += p->request.inputs[i].byte_size();
    // Padding rows: the same row size as the requests' (their non-batch dims agree).
    const size_t pad = run_rows > rows ? total / static_cast<size_t>(rows) * static_cast<size_t>(run_rows - rows) : 0;
    Status st = ctx.set_input_shape(name, shape);
    void* address = nullptr;
#ifdef INGOT_WITH_CUDA
    if (dev) {
      // Each request's rows go to their place in the device buffer: by DMA from a pinned region,
      // or through the pinned staging buffer (free: the previous batch synchronized the stream).
      CudaBuffer& staging = *dev->staging[i];
      if (st.ok()) st = dev->inputs[i]->reserve(total + pad);
      size_t offset = 0;
      for (size_t r = 0; r < batch.size() && st.ok(); ++r) {
        const InferInput& in = batch[r]->request.inputs[i];
        const size_t n = in.byte_size();
        const char* from = in.bytes();
        if (in.external && in.external->device) {
          if (n) {
            st = cuda_status(
                cudaMemcpyAsync(dev->inputs[i]->bytes() + offset, from, n, cudaMemcpyDeviceToDevice, dev->stream),
                "copying an input from CUDA shared memory");
          }
          offset += n;
          continue;
        }
        if (!in.external || !in.external->pinned) {
          st = staging.reserve(total);
          if (!st.ok()) break;
          std::memcpy(staging.bytes() + offset, from, n);
          from = staging.bytes() + offset;
        }
        if (n) {
          st = cuda_status(
              cudaMemcpyAsync(dev->inputs[i]->bytes() + offset, from, n, cudaMemcpyHostToDevice, dev->stream),
              "copying an input to the device");
        }
        offset += n;
      }
      if (st.ok() && pad) {
        st = cuda_status(cudaMemsetAsync(dev->inputs[i]->bytes() + total, 0, pad, dev->stream),
                         "zeroing the padding rows");
      }
      address = dev->inputs[i]->data;
    }
#endif
    if (!dev) {
      bool on_device = false;  // a CUDA shared-memory input served by a cpu instance
      for (const auto& p : batch) {
        const InferInput& in = p->request.inputs[i];
        on_device = on_device || (in.external && in.external->device);
      }
      if (batch.size() == 1 && pad == 0 && !on_device) {
        address = const_cast<char*>(batch.front()->request.inputs[i].bytes());
      } else {
        std::string& buf = buffers[i];
        buf.clear();
        buf.reserve(total + pad);
        for (const auto& p : batch) {
          const InferInput& in = p->request.inputs[i];
          if (!(in.external && in.external->device)) {
            buf.append(in.bytes(), in.byte_size());
            continue;
          }
#ifdef INGOT_WITH_CUDA  // device bytes exist only in a CUDA build (attach_inputs of a CUDA region)
          const size_t at = buf.size();
          buf.resize(at + in.byte_size());
          if (st.ok() && in.byte_size())
            st = cuda_status(cudaMemcpy(&buf[at], in.bytes(), in.byte_size(), cudaMemcpyDeviceToHost),
                             "reading an input from CUDA shared memory");
#endif
        }
        buf.append(pad, '\0');
        address = buf.data();
      }
    }
    if (st.ok()) st = ctx.set_tensor_address(name, address);
    if (!st.ok())
      return fail_all(st.code() == StatusCode::kOutOfMemory ? 503 : 400,
                      "model '" + signature_.name + "': " + st.message());
  }
  void* stream = nullptr;
#ifdef INGOT_WITH_CUDA
  if (dev) {
    stream = dev->stream;
    // Outputs whose size the batch settles are written straight into this instance's buffers.
    Status st;
    for (size_t o = 0; o < signature_.outputs.size() && st.ok(); ++o) {
      if (!dev->bind_output[o]) continue;
      const TensorSpec& out = signature_.outputs[o];
      size_t bytes = static_cast<size_t>(element_count(out.dims)) * element_size(out.dtype) *
                     static_cast<size_t>(batching ? run_rows : 1);
      st = dev->outputs[o]->reserve(bytes);
      if (st.ok()) st = ctx.set_tensor_address(out.name, dev->outputs[o]->data);
    }
    if (!st.ok())
      return fail_all(st.code() == StatusCode::kOutOfMemory ? 503 : 500,
                      "model '" + signature_.name + "': " + st.message());
    cudaEventRecord(dev->marks[1], dev->stream);
  }
#endif
  Clock::time_point inputs_done = Clock::now();
  Status st = ctx.enqueue(stream);
  Clock::time_point infer_done = Clock::now();
#ifdef INGOT_WITH_CUDA
  // Outputs come back to pinned host memory before the split.
  if (dev && st.ok()) {
    cudaEventRecord(dev->marks[2], dev->stream);
    for (size_t o = 0; o < signature_.outputs.size() && st.ok(); ++o) {
      const TensorSpec& out = signature_.outputs[o];
      auto shape = ctx.tensor_shape(out.name);
      const void* data = ctx.tensor_address(out.name);
      int64_t count = shape.ok() ? element_count(*shape) : -1;
      if (!data || count < 0) {
        st = Status(StatusCode::kInternal, "output '" + out.name + "' unavailable after enqueue");
        break;
      }
      size_t bytes = static_cast<size_t>(count) * element_size(out.dtype);
      st = dev->host_outputs[o]->reserve(bytes);
      if (st.ok() && bytes) {
        st = cuda_status(cudaMemcpyAsync(dev->host_outputs[o]->data, data, bytes, cudaMemcpyDeviceToHost, dev->stream),
                         "copying an output to the host");
      }
    }
    if (st.ok()) st = cuda_status(cudaEventRecord(dev->marks[3], dev->stream), "cudaEventRecord");
    if (st.ok()) st = cuda_status(cudaStreamSynchronize(dev->stream), "running the batch");
  }
#endif
  // Host engines: input = gather, infer = enqueue (it runs the engine). cuda engines: the stream's
  // time per phase between its marks (gather and copies in, engine, copies out).
  int64_t input_ns = ns_between(start, inputs_done), compute_ns = ns_between(inputs_done, infer_done), output_ns = 0;
#ifdef INGOT_WITH_CUDA
  if (dev && st.ok()) {
    input_ns = dev->between(0, 1);
    compute_ns = dev->between(1, 2);
    output_ns = dev->between(2, 3);
  }
#endif
  if (!st.ok())
    return fail_all(500, "model '" + signature_.name + "' failed on a batch of " + std::to_string(run_rows) +
                             (run_rows > rows ? " (" + std::to_string(rows) + " padded)" : std::string()) + ": " +
                             st.to_string());
  Clock::time_point split_start = Clock::now();
  // Split: each request takes its rows of every output it asked for.
  std::vector<InferResult> results(batch.size());
  for (size_t o = 0; o < signature_.outputs.size(); ++o) {
    const TensorSpec& out = signature_.outputs[o];
    auto shape = ctx.tensor_shape(out.name);
    const char* data = static_cast<const char*>(ctx.tensor_address(out.name));
#ifdef INGOT_WITH_CUDA
    if (dev) data = dev->host_outputs[o]->bytes();
#endif
    if (!shape.ok() || !data)
      return fail_all(500, "model '" + signature_.name + "': output '" + out.name + "' unavailable");
    int64_t count = element_count(*shape);
    size_t esize = element_size(out.dtype);
    if (count < 0 || esize == 0)
      return fail_all(500,
                      "model '" + signature_.name + "': output '" + out.name + "' has an unservable type or shape");
    if (batching && (shape->empty() || (*shape)[0] != run_rows)) {
      return fail_all(500, "model '" + signature_.name + "': output '" + out.name + "' has shape " +
                               dims_string(*shape) + ", not batch " + std::to_string(run_rows) + " first");
    }
    // The padding rows come last and go to nobody.
    size_t row_bytes = batching ? static_cast<size_t>(count) * esize / static_cast<size_t>(run_rows) : count * esize;
    size_t offset = 0;
    for (size_t r = 0; r < batch.size(); ++r) {
      const InferRequest& req = batch[r]->request;
      size_t bytes = row_bytes * (batching ? batch[r]->batch_size : 1);
      bool wanted = req.outputs.empty();
      for (const RequestedOutput& o : req.outputs) wanted = wanted || o.name == out.name;
      if (wanted) {
        OwnedOutput o{out.name, out.dtype, *shape, std::string(data + offset, bytes)};
        if (batching) o.shape[0] = batch[r]->batch_size;
        results[r].outputs.push_back(std::move(o));
      }
      offset += bytes;
    }
  }
  output_ns += ns_between(split_start, Clock::now());
  if (!warm_up) stats_->batch_executed(run_rows, rows, input_ns, compute_ns, output_ns);
  for (size_t r = 0; r < batch.size(); ++r) {
    results[r].queue_ns = ns_between(batch[r]->enqueued, start);
    results[r].input_ns = input_ns;
    results[r].compute_ns = compute_ns;
    results[r].output_ns = output_ns;
    results[r].executed_batch_size = run_rows;
    batch[r]->state.store(kAnswered);
    batch[r]->promise.set_value(std::move(results[r]));
  }
}

}  // namespace ingot::server
