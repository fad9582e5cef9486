// Copyright ingot authors. Apache-2.0.
//
// Per model-version statistics: the KServe/Triton statistics extension (GET .../stats) and
// Prometheus metrics with Triton's names (nv_inference_*), labelled model and version, kept
// by one object so the two can never disagree.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace ingot::server {

/// The metric families, one registry for the server.
class Metrics {
 private:
  std::shared_ptr<prometheus::Registry> registry_;  // first: the families below live in it

 public:
  Metrics();
  /// Prometheus text exposition format of every metric.
  std::string serialize() const;

  prometheus::Family<prometheus::Counter>& success;
  prometheus::Family<prometheus::Counter>& failure;
  prometheus::Family<prometheus::Counter>& inference_count;
  prometheus::Family<prometheus::Counter>& exec_count;
  prometheus::Family<prometheus::Counter>& request_duration_us;
  prometheus::Family<prometheus::Counter>& queue_duration_us;
  prometheus::Family<prometheus::Counter>& compute_input_duration_us;
  prometheus::Family<prometheus::Counter>& compute_infer_duration_us;
  prometheus::Family<prometheus::Counter>& compute_output_duration_us;
  prometheus::Family<prometheus::Gauge>& pending;
};

/// Counters of one model version. Thread-safe.
class ModelStats {
 public:
  ModelStats(Metrics* metrics, const std::string& model, const std::string& version);
  ~ModelStats();
  ModelStats(const ModelStats&) = delete;
  ModelStats& operator=(const ModelStats&) = delete;

  /// A request answered successfully; durations in nanoseconds (input: gather + copy to the
  /// device, infer: the engine, output: copy back + split, of the batch it ran in).
  void request_succeeded(int64_t total_ns, int64_t queue_ns, int64_t input_ns, int64_t compute_ns, int64_t output_ns);
  void request_failed(int64_t total_ns);
  /// One execution of a batch of `batch_size` rows (padding rows included: batch_stats counts
  /// what ran) holding `inferences` requested rows: its input, infer and output times.
  void batch_executed(int64_t batch_size, int64_t inferences, int64_t input_ns, int64_t compute_ns,
                      int64_t output_ns);
  void pending_changed(int delta);

  /// This version's entry of the statistics extension's "model_stats" array (JSON text).
  std::string to_json(const std::string& model, const std::string& version) const;

 private:
  Metrics* metrics_;
  prometheus::Labels labels_;
  prometheus::Counter *success_, *failure_, *inference_count_, *exec_count_, *request_us_, *queue_us_, *input_us_,
      *compute_us_, *output_us_;
  prometheus::Gauge* pending_;

  mutable std::mutex mu_;
  int64_t success_count_ = 0, success_ns_ = 0, fail_count_ = 0, fail_ns_ = 0;
  int64_t queue_count_ = 0, queue_ns_ = 0, compute_count_ = 0, input_ns_ = 0, compute_ns_ = 0, output_ns_ = 0;
  int64_t inference_count_total_ = 0, execution_count_ = 0, last_inference_ms_ = 0;
  struct BatchStat {
    int64_t count = 0, input_ns = 0, infer_ns = 0, output_ns = 0;
  };
  std::map<int64_t, BatchStat> batch_stats_;  // by batch size
};

}  // namespace ingot::server
