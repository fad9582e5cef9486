// Copyright ingot authors. Apache-2.0.
//
// Statistics and Prometheus metrics (see metrics.h).
#include "server/metrics.h"

#include <prometheus/text_serializer.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace ingot::server {

namespace {
template <class T>
prometheus::Family<T>& family(prometheus::Registry& r, const char* name, const char* help) {
  if constexpr (std::is_same_v<T, prometheus::Counter>) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r);
  } else {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
  }
}
}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      success(family<prometheus::Counter>(*registry_, "nv_inference_request_success",
                                          "Number of successful inference requests, all batch sizes")),
      failure(family<prometheus::Counter>(*registry_, "nv_inference_request_failure",
                                          "Number of failed inference requests, all batch sizes")),
      inference_count(family<prometheus::Counter>(*registry_, "nv_inference_count",
                                                  "Number of inferences performed (a batch of n counts n)")),
      exec_count(family<prometheus::Counter>(*registry_, "nv_inference_exec_count",
                                             "Number of model executions performed (a batch counts 1)")),
      request_duration_us(family<prometheus::Counter>(*registry_, "nv_inference_request_duration_us",
                                                      "Cumulative inference request duration in microseconds")),
      queue_duration_us(family<prometheus::Counter>(*registry_, "nv_inference_queue_duration_us",
                                                    "Cumulative inference queuing duration in microseconds")),
      compute_input_duration_us(family<prometheus::Counter>(*registry_, "nv_inference_compute_input_duration_us",
                                                            "Cumulative compute input duration in microseconds")),
      compute_infer_duration_us(family<prometheus::Counter>(*registry_, "nv_inference_compute_infer_duration_us",
                                                            "Cumulative compute inference duration in microseconds")),
      compute_output_duration_us(family<prometheus::Counter>(*registry_, "nv_inference_compute_output_duration_us",
                                                             "Cumulative inference compute output duration in microseconds")),
      pending(family<prometheus::Gauge>(*registry_, "nv_inference_pending_request_count",
                                        "Instantaneous number of pending requests awaiting execution per-model")) {}

std::string Metrics::serialize() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

ModelStats::ModelStats(Metrics* metrics, const std::string& model, const std::string& version)
    : metrics_(metrics), labels_{{"model", model}, {"version", version}} {
  success_ = &metrics->success.Add(labels_);
  failure_ = &metrics->failure.Add(labels_);
  inference_count_ = &metrics->inference_count.Add(labels_);
  exec_count_ = &metrics->exec_count.Add(labels_);
  request_us_ = &metrics->request_duration_us.Add(labels_);
  queue_us_ = &metrics->queue_duration_us.Add(labels_);
  input_us_ = &metrics->compute_input_duration_us.Add(labels_);
  compute_us_ = &metrics->compute_infer_duration_us.Add(labels_);
  output_us_ = &metrics->compute_output_duration_us.Add(labels_);
  pending_ = &metrics->pending.Add(labels_);
}

// The series stay registered after unload (a reload continues them), as counters should.
ModelStats::~ModelStats() = default;

static int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void ModelStats::request_succeeded(int64_t total_ns, int64_t queue_ns, int64_t input_ns, int64_t compute_ns,
                                   int64_t output_ns) {
  success_->Increment();
  request_us_->Increment(total_ns / 1000.0);
  queue_us_->Increment(queue_ns / 1000.0);
  input_us_->Increment(input_ns / 1000.0);
  compute_us_->Increment(compute_ns / 1000.0);
  output_us_->Increment(output_ns / 1000.0);
  std::lock_guard<std::mutex> lock(mu_);
  ++success_count_;
  success_ns_ += total_ns;
  ++queue_count_;
  queue_ns_ += queue_ns;
  ++compute_count_;
  input_ns_ += input_ns;
  compute_ns_ += compute_ns;
  output_ns_ += output_ns;
  last_inference_ms_ = now_ms();
}

void ModelStats::request_failed(int64_t total_ns) {
  failure_->Increment();
  request_us_->Increment(total_ns / 1000.0);
  std::lock_guard<std::mutex> lock(mu_);
  ++fail_count_;
  fail_ns_ += total_ns;
}

void ModelStats::batch_executed(int64_t batch_size, int64_t inferences, int64_t input_ns, int64_t compute_ns,
                                int64_t output_ns) {
  inference_count_->Increment(static_cast<double>(inferences));
  exec_count_->Increment();
  std::lock_guard<std::mutex> lock(mu_);
  inference_count_total_ += inferences;
  ++execution_count_;
  BatchStat& b = batch_stats_[batch_size];
  ++b.count;
  b.input_ns += input_ns;
  b.infer_ns += compute_ns;
  b.output_ns += output_ns;
}

void ModelStats::pending_changed(int delta) { pending_->Increment(delta); }

std::string ModelStats::to_json(const std::string& model, const std::string& version) const {
  using json = nlohmann::json;
  auto stat = [](int64_t count, int64_t ns) { return json{{"count", count}, {"ns", ns}}; };
  std::lock_guard<std::mutex> lock(mu_);
  json batches = json::array();
  for (const auto& [size, b] : batch_stats_) {
    batches.push_back({{"batch_size", size},
                       {"compute_input", stat(b.count, b.input_ns)},
                       {"compute_infer", stat(b.count, b.infer_ns)},
                       {"compute_output", stat(b.count, b.output_ns)}});
  }
  json j = {{"name", model},
            {"version", version},
            {"last_inference", last_inference_ms_},
            {"inference_count", inference_count_total_},
            {"execution_count", execution_count_},
            {"inference_stats",
             {{"success", stat(success_count_, success_ns_)},
              {"fail", stat(fail_count_, fail_ns_)},
              {"queue", stat(queue_count_, queue_ns_)},
              {"compute_input", stat(compute_count_, input_ns_)},
              {"compute_infer", stat(compute_count_, compute_ns_)},
              {"compute_output", stat(compute_count_, output_ns_)}}},
            {"batch_stats", batches}};
  return j.dump();
}

}  // namespace ingot::server
