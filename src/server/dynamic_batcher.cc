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

// A cuda instance: its stream and device input buffers (grown on demand, reused across batches).
struct DynamicBatcher::DeviceIo {
#ifdef INGOT_WITH_CUDA
  cudaStream_t stream = nullptr;
  std::vector<void*> inputs;
  std::vector<size_t> capacity;
  std::vector<std::string> host_outputs;
  /// Recorded on the stream before the inputs' copies, before the engine, before the outputs'
  /// copies and after them: the batch's device time split into input, infer and output.
  cudaEvent_t marks[4] = {nullptr, nullptr, nullptr, nullptr};
  ~DeviceIo() {
    for (void* p : inputs) {
      if (p) cudaFree(p);
    }
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
  static Status check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return Status::Ok();
    return Status(e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal,
                  std::string(what) + ": " + cudaGetErrorString(e));
  }
  Status reserve(size_t i, size_t bytes) {
    if (inputs.size() <= i) inputs.resize(i + 1, nullptr), capacity.resize(i + 1, 0);
    if (capacity[i] >= bytes) return Status::Ok();
    if (inputs[i]) cudaFree(inputs[i]);
    inputs[i] = nullptr;
    capacity[i] = 0;
    Status st = check(cudaMalloc(&inputs[i], bytes), "cudaMalloc of an input buffer");
    if (st.ok()) capacity[i] = bytes;
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
    b->contexts_.push_back(std::move(ctx.value()));
    b->device_io_.push_back(std::make_unique<DeviceIo>());
#ifdef INGOT_WITH_CUDA
    if (cuda) {
      Status st = DeviceIo::check(cudaStreamCreateWithFlags(&b->device_io_.back()->stream, cudaStreamNonBlocking),
                                  "cudaStreamCreate");
      for (cudaEvent_t& e : b->device_io_.back()->marks)
        if (st.ok()) st = DeviceIo::check(cudaEventCreate(&e), "cudaEventCreate");
      if (!st.ok()) return st;
    }
#endif
  }
  for (size_t i = 0; i < b->contexts_.size(); ++i) b->workers_.emplace_back(&DynamicBatcher::worker, b.get(), i);
  return b;
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
                             const Batch& batch) {
  Clock::time_point start = Clock::now();
  bool batching = signature_.max_batch_size > 0;
  int64_t rows = 0;
  for (const auto& p : batch) rows += p->batch_size;
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
    std::string& buf = buffers[i];
    buf.clear();
    if (batch.size() > 1) {
      for (const auto& p : batch) buf += p->request.inputs[i].data;
    }
    if (batching) shape[0] = rows;
    const std::string& src = batch.size() == 1 ? batch.front()->request.inputs[i].data : buf;
    Status st = ctx.set_input_shape(name, shape);
    void* address = const_cast<char*>(src.data());
#ifdef INGOT_WITH_CUDA
    if (dev && st.ok()) {
      st = dev->reserve(i, std::max<size_t>(src.size(), 1));
      if (st.ok()) {
        st = DeviceIo::check(
            cudaMemcpyAsync(dev->inputs[i], src.data(), src.size(), cudaMemcpyHostToDevice, dev->stream),
            "copying an input to the device");
      }
      address = dev->inputs[i];
    }
#endif
    if (st.ok()) st = ctx.set_tensor_address(name, address);
    if (!st.ok())
      return fail_all(st.code() == StatusCode::kOutOfMemory ? 503 : 400,
                      "model '" + signature_.name + "': " + st.message());
  }
  void* stream = nullptr;
#ifdef INGOT_WITH_CUDA
  if (dev) {
    stream = dev->stream;
    cudaEventRecord(dev->marks[1], dev->stream);
  }
#endif
  Clock::time_point inputs_done = Clock::now();
  Status st = ctx.enqueue(stream);
  Clock::time_point infer_done = Clock::now();
#ifdef INGOT_WITH_CUDA
  // Outputs come back to host memory before the split (context-held device buffers otherwise).
  if (dev && st.ok()) {
    cudaEventRecord(dev->marks[2], dev->stream);
    dev->host_outputs.resize(signature_.outputs.size());
    for (size_t o = 0; o < signature_.outputs.size() && st.ok(); ++o) {
      const TensorSpec& out = signature_.outputs[o];
      auto shape = ctx.tensor_shape(out.name);
      const void* data = ctx.tensor_address(out.name);
      int64_t count = shape.ok() ? element_count(*shape) : -1;
      if (!data || count < 0) {
        st = Status(StatusCode::kInternal, "output '" + out.name + "' unavailable after enqueue");
        break;
      }
      dev->host_outputs[o].resize(static_cast<size_t>(count) * element_size(out.dtype));
      st = DeviceIo::check(cudaMemcpyAsync(dev->host_outputs[o].data(), data, dev->host_outputs[o].size(),
                                           cudaMemcpyDeviceToHost, dev->stream),
                           "copying an output to the host");
    }
    if (st.ok()) st = DeviceIo::check(cudaEventRecord(dev->marks[3], dev->stream), "cudaEventRecord");
    if (st.ok()) st = DeviceIo::check(cudaStreamSynchronize(dev->stream), "running the batch");
  }
#endif
  // Host engines: input = gather, infer = enqueue (it runs the engine). cuda engines: the stream's
  // time per phase between its marks (gather and copies in, engine, copies out).
  int64_t input_ns = ns_between(start, inputs_done), compute_ns = ns_between(inputs_done, infer_done),
          output_ns = 0;
#ifdef INGOT_WITH_CUDA
  if (dev && st.ok()) {
    input_ns = dev->between(0, 1);
    compute_ns = dev->between(1, 2);
    output_ns = dev->between(2, 3);
  }
#endif
  if (!st.ok())
    return fail_all(
        500, "model '" + signature_.name + "' failed on a batch of " + std::to_string(rows) + ": " + st.to_string());
  Clock::time_point split_start = Clock::now();
  // Split: each request takes its rows of every output it asked for.
  std::vector<InferResult> results(batch.size());
  for (size_t o = 0; o < signature_.outputs.size(); ++o) {
    const TensorSpec& out = signature_.outputs[o];
    auto shape = ctx.tensor_shape(out.name);
    const char* data = static_cast<const char*>(ctx.tensor_address(out.name));
#ifdef INGOT_WITH_CUDA
    if (dev) data = dev->host_outputs[o].data();
#endif
    if (!shape.ok() || !data)
      return fail_all(500, "model '" + signature_.name + "': output '" + out.name + "' unavailable");
    int64_t count = element_count(*shape);
    size_t esize = element_size(out.dtype);
    if (count < 0 || esize == 0)
      return fail_all(500,
                      "model '" + signature_.name + "': output '" + out.name + "' has an unservable type or shape");
    if (batching && (shape->empty() || (*shape)[0] != rows)) {
      return fail_all(500, "model '" + signature_.name + "': output '" + out.name + "' has shape " +
                               dims_string(*shape) + ", not batch " + std::to_string(rows) + " first");
    }
    size_t row_bytes = batching ? static_cast<size_t>(count) * esize / static_cast<size_t>(rows) : count * esize;
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
  stats_->batch_executed(rows, input_ns, compute_ns, output_ns);
  for (size_t r = 0; r < batch.size(); ++r) {
    results[r].queue_ns = ns_between(batch[r]->enqueued, start);
    results[r].input_ns = input_ns;
    results[r].compute_ns = compute_ns;
    results[r].output_ns = output_ns;
    results[r].executed_batch_size = rows;
    batch[r]->state.store(kAnswered);
    batch[r]->promise.set_value(std::move(results[r]));
  }
}

}  // namespace ingot::server
