// Copyright ingot authors. Apache-2.0.
//
// The dynamic batcher of one model version: a bounded queue of requests and one worker thread
// per instance (an ExecutionContext). A worker forms a batch from queued requests whose
// non-batch dims agree, once it reaches the largest preferred size (or max_batch_size) or once
// the oldest request has waited max_queue_delay; it concatenates their inputs along the batch
// dim, runs the engine once and splits the outputs back in order. A batch runs padded with rows
// of zeros up to the next prepared batch size, and each instance ran one batch of each prepared
// size at load (issue 19: tactics that build per-shape plans, like cuDNN's, did so on requests,
// for every new executed batch size).
//
// Guarantees: every accepted request gets exactly one answer; a full queue answers 503 at
// once; a request past its deadline is answered with an error and never executed afterwards
// (the waiting caller and the workers race for it with one atomic claim); a failing batch
// fails only its own requests; stop() drains the queue before the workers exit.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ingot/engine.h"
#include "ingot/status.h"
#include "server/infer_request.h"
#include "server/metrics.h"
#include "server/model_config.h"

namespace ingot::server {

using Clock = std::chrono::steady_clock;

/// One output tensor of one request, owning its bytes.
struct OwnedOutput {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  std::string data;
};

/// The answer to one request.
struct InferResult {
  std::optional<RequestError> error;
  std::vector<OwnedOutput> outputs;  ///< the requested outputs (all when none was named), model order
  int64_t queue_ns = 0;
  /// The batch's execution split as Triton's statistics split it: gathering the inputs and
  /// copying them to the device, running the engine, copying the outputs back and splitting them.
  int64_t input_ns = 0;
  int64_t compute_ns = 0;  ///< compute_infer
  int64_t output_ns = 0;
  int64_t executed_batch_size = 0;  ///< size of the batch this request ran in
};

/// The batch sizes `ingot.prepared_batch_sizes: auto` prepares for a cuda engine: the powers of two
/// below max_batch_size and the midpoints between them (1, 2, 3, 4, 6, 8, 12, 16, 24, ...), so a
/// batch runs padded by less than a third (at powers of two alone, three 16-image requests ran as 64
/// rows, a quarter of the work on padding: ResNet-50 behind 8 concurrent such requests reached 0.70x
/// `ingot run` on the H200, 2026-12-05), then max_batch_size and the preferred sizes; ascending, unique.
std::vector<int64_t> auto_prepared_sizes(int64_t max_batch_size, const std::vector<int64_t>& preferred);

class DynamicBatcher {
 public:
  /// Creates `options.instances` execution contexts and starts their workers. CPU engines run on
  /// host buffers; cuda engines (when ingot is built with CUDA) get a stream and device input
  /// buffers per instance, with inputs copied in and outputs copied out around each batch.
  static Result<std::unique_ptr<DynamicBatcher>> create(std::shared_ptr<Engine> engine, ModelSignature signature,
                                                        BatchingOptions options, ModelStats* stats);
  ~DynamicBatcher();

  /// Queues a validated request of `batch_size` rows and blocks until it is answered (result,
  /// execution error, 503 when the queue is full or the batcher stopped, 504 past its deadline).
  InferResult infer(InferRequest request, int64_t batch_size);

  /// Stops accepting, runs everything queued, joins the workers. Idempotent.
  void stop();

  /// Requests queued and not yet taken by a worker.
  int64_t queued() const;

  /// The batch sizes prepared at load and padded to (ascending; empty: none, batches run at their
  /// own size).
  const std::vector<int64_t>& prepared_sizes() const { return prepared_; }
  /// The rows a batch of `rows` runs with: the smallest prepared size >= rows, else rows.
  int64_t padded_rows(int64_t rows) const;
  /// Wall time the load-time warm-up took (every instance, every prepared size).
  double warm_up_ms() const { return warm_up_ms_; }
  /// cuda engines: whether batches replay CUDA graphs, for the load log: "on (N graphs per
  /// instance)", "off (the config's optimization.cuda.graphs)", or "off: " and the runtime's
  /// reason (a step that cannot be captured); "" for cpu engines.
  const std::string& cuda_graphs() const { return cuda_graphs_; }

 private:
  struct Pending;
  using Batch = std::vector<std::shared_ptr<Pending>>;

  DynamicBatcher(std::shared_ptr<Engine> engine, ModelSignature signature, BatchingOptions options, ModelStats* stats);
  struct DeviceIo;  // a cuda instance's stream and device buffers
  void worker(size_t instance);
  // Takes the next batch under the lock; empty when stopping with nothing left.
  Batch next_batch(std::unique_lock<std::mutex>& lock);
  // Runs `batch` (padded to a prepared size) and answers its requests; warm_up: a load-time batch
  // of zeros, kept out of the statistics.
  void execute(ExecutionContext& ctx, DeviceIo* dev, std::vector<std::string>& buffers, const Batch& batch,
               bool warm_up = false);
  // One batch of zeros at each prepared size on every instance, before any worker starts.
  Status warm_up();
  void expire_locked(Clock::time_point now);

  std::shared_ptr<Engine> engine_;
  ModelSignature signature_;
  BatchingOptions options_;
  ModelStats* stats_;
  int64_t batch_limit_;  // rows a batch is formed at without waiting
  std::vector<int64_t> prepared_;
  double warm_up_ms_ = 0;
  std::string cuda_graphs_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> queue_;
  int64_t queued_ = 0;  // entries of queue_ still unclaimed
  bool stopping_ = false;
  bool cuda_ = false;
  std::vector<std::unique_ptr<ExecutionContext>> contexts_;
  std::vector<std::unique_ptr<DeviceIo>> device_io_;  // one per instance (cuda engines)
  std::vector<std::thread> workers_;
};

}  // namespace ingot::server
