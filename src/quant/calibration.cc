// Copyright ingot authors. Apache-2.0.
#include "quant/calibration.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>
#include <thread>

namespace ingot::quant {

const char* algorithm_name(CalibrationAlgorithm a) {
  switch (a) {
    case CalibrationAlgorithm::kEntropy:
      return "entropy";
    case CalibrationAlgorithm::kMinMax:
      return "minmax";
    case CalibrationAlgorithm::kPercentile:
      return "percentile";
  }
  return "?";
}

Result<CalibrationAlgorithm> parse_algorithm(const std::string& name) {
  if (name == "entropy") return CalibrationAlgorithm::kEntropy;
  if (name == "minmax") return CalibrationAlgorithm::kMinMax;
  if (name == "percentile") return CalibrationAlgorithm::kPercentile;
  return invalid_argument("calibrator must be entropy, minmax or percentile, got '", name, "'");
}

void TensorCalibration::observe(const float* x, int64_t n) {
  double batch_max = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (std::isfinite(a) && a > batch_max) batch_max = a;
  }
  amax_ = std::max(amax_, batch_max);
  if (batch_max > 0) {
    if (hist_.empty()) {
      hist_.assign(kHistogramBins, 0.0);
      // Just above the first max, so that max falls inside the last bin rather than on the
      // range's edge (and stays in the right bin when the range doubles).
      range_ = batch_max * (1 + 1.0 / (1 << 20));
    }
    // Widen by doubling, merging bin pairs, until the batch fits (exact: no counts move across
    // a bin edge that existed before).
    while (batch_max >= range_) {
      for (int b = 0; b < kHistogramBins / 2; ++b) hist_[b] = hist_[2 * b] + hist_[2 * b + 1];
      std::fill(hist_.begin() + kHistogramBins / 2, hist_.end(), 0.0);
      range_ *= 2;
    }
  }
  const double per_bin = range_ > 0 ? kHistogramBins / range_ : 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a)) continue;
    ++count_;
    if (per_bin == 0) continue;  // all zeros so far: nothing to place
    const int b = std::min(kHistogramBins - 1, static_cast<int>(a * per_bin));
    hist_[static_cast<size_t>(b)] += 1;
  }
}

namespace {

// KL(P || Q) of two unnormalized distributions over the same bins. Q is smoothed first, as
// MXNet's and onnxruntime's entropy calibrators do: eps (1e-4) of probability on each of its empty
// bins, taken evenly from the others, so that a bin P holds and Q cannot (an outlier folded into
// the last kept bin) costs a large but finite amount instead of ruling the threshold out.
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  constexpr double kEps = 1e-4;
  double ps = 0, qs = 0;
  size_t q_zero = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    ps += p[j];
    qs += q[j];
    q_zero += q[j] <= 0 ? 1 : 0;
  }
  if (ps <= 0 || qs <= 0 || q_zero == q.size()) return INFINITY;
  const double take = kEps * static_cast<double>(q_zero) / static_cast<double>(q.size() - q_zero);
  double d = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    if (p[j] <= 0) continue;
    const double qj = q[j] > 0 ? q[j] / qs - take : kEps;
    if (qj <= 0) return INFINITY;
    d += (p[j] / ps) * std::log((p[j] / ps) / qj);
  }
  return d;
}

}  // namespace

int entropy_bins(const std::vector<double>& hist_in) {
  const int n = static_cast<int>(hist_in.size());
  if (n <= kQuantLevels) return n;
  // The first bin holds the exact zeros of a ReLU's output, often half the tensor; left as they
  // are they outweigh everything else and the search clips hard (a real-data CNN lost 14 points
  // of top-1, session 10). As NVIDIA's pytorch-quantization does, the first bin counts as much as
  // the second.
  std::vector<double> hist = hist_in;
  hist[0] = hist[1];
  double total = 0;
  for (double h : hist) total += h;
  int best = n;
  double best_d = INFINITY;
  std::vector<double> p, q;
  double head = 0;  // sum of hist[0 .. i-1]
  for (int b = 0; b < kQuantLevels - 1; ++b) head += hist[static_cast<size_t>(b)];
  for (int i = kQuantLevels; i <= n; ++i) {
    head += hist[static_cast<size_t>(i - 1)];
    // P, the reference: the first i bins, everything beyond folded into the last (clipped).
    p.assign(hist.begin(), hist.begin() + i);
    p[static_cast<size_t>(i - 1)] += total - head;
    // Q, the candidate: the same i bins without the outliers, merged into kQuantLevels groups
    // (the last takes the remainder) and each group's mass spread back evenly over its non-zero
    // bins, as 8-bit levels would represent them.
    q.assign(static_cast<size_t>(i), 0.0);
    const int per = i / kQuantLevels;
    for (int g = 0; g < kQuantLevels; ++g) {
      const int start = g * per;
      const int end = g == kQuantLevels - 1 ? i : start + per;
      double mass = 0;
      int nonzero = 0;
      for (int j = start; j < end; ++j) {
        mass += hist[static_cast<size_t>(j)];
        nonzero += hist[static_cast<size_t>(j)] > 0 ? 1 : 0;
      }
      if (nonzero == 0) continue;
      for (int j = start; j < end; ++j)
        if (hist[static_cast<size_t>(j)] > 0) q[static_cast<size_t>(j)] = mass / nonzero;
    }
    const double d = kl_divergence(p, q);
    if (d <= best_d) {  // the last (largest) i wins ties, as in pytorch-quantization
      best_d = d;
      best = i;
    }
  }
  return best;
}

double threshold(const TensorCalibration& t, CalibrationAlgorithm a, double percentile) {
  if (t.amax() <= 0 || t.histogram().empty()) return 0;
  const std::vector<double>& h = t.histogram();
  const double width = t.range() / kHistogramBins;
  switch (a) {
    case CalibrationAlgorithm::kMinMax:
      return t.amax();
    case CalibrationAlgorithm::kEntropy:
      return std::min(t.amax(), (entropy_bins(h) + 0.5) * width);
    case CalibrationAlgorithm::kPercentile: {
      double total = 0;
      for (double c : h) total += c;
      const double want = total * std::clamp(percentile, 0.0, 100.0) / 100.0;
      double seen = 0;
      for (int b = 0; b < kHistogramBins; ++b) {
        seen += h[static_cast<size_t>(b)];
        if (seen >= want) return std::min(t.amax(), (b + 1) * width);
      }
      return t.amax();
    }
  }
  return t.amax();
}

namespace {

// Runs job(order[k]) for every k on up to `threads` threads (0: hardware concurrency), each job
// on exactly one thread, taken in `order` (largest first balances the threads).
template <typename Job>
void run_jobs(const std::vector<size_t>& order, int threads, const Job& job) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), order.size()));
  if (threads <= 1) {
    for (size_t k : order) job(k);
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < order.size(); i = next++) job(order[i]);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// Below this many values in one call the threads cost more than they save.
constexpr int64_t kParallelObserveValues = 1 << 18;

}  // namespace

void observe_all(const std::vector<Observation>& work, int threads) {
  int64_t total = 0;
  for (const Observation& o : work) total += o.count;
  if (total < kParallelObserveValues) threads = 1;
  std::vector<size_t> order(work.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return work[a].count > work[b].count; });
  run_jobs(order, threads, [&](size_t k) { work[k].into->observe(work[k].values, work[k].count); });
}

std::vector<double> thresholds(const std::vector<const TensorCalibration*>& tensors, CalibrationAlgorithm a,
                               double percentile, int threads) {
  std::vector<double> out(tensors.size(), 0.0);
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Only the entropy search costs anything (about 2^22 operations per tensor).
  if (a != CalibrationAlgorithm::kEntropy) threads = 1;
  run_jobs(order, threads, [&](size_t k) { out[k] = threshold(*tensors[k], a, percentile); });
  return out;
}

std::string write_cache(CalibrationAlgorithm a, const std::map<std::string, float>& scales, bool fp8) {
  static const char* kHeaders[] = {"EntropyCalibration2", "MinMaxCalibration", "PercentileCalibration"};
  std::ostringstream os;
  os << "INGOT-1-" << kHeaders[static_cast<int>(a)] << (fp8 ? "-FP8E4M3" : "") << "\n";
  for (const auto& [name, scale] : scales) {
    uint32_t bits;
    std::memcpy(&bits, &scale, sizeof bits);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", bits);
    os << name << ": " << hex << "\n";
  }
  return os.str();
}

Result<std::map<std::string, float>> read_cache(const std::string& text, std::string* header) {
  std::map<std::string, float> scales;
  std::istringstream is(text);
  std::string line;
  int number = 0;
  while (std::getline(is, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1) {
      if (header) *header = line;
      if (line.find(':') != std::string::npos)
        return invalid_argument(
            "calibration cache line 1: expected a header line (e.g. TRT-8601-EntropyCalibration2), "
            "got '",
            line, "'");
      continue;
    }
    if (line.empty()) continue;
    const size_t colon = line.rfind(": ");
    const std::string hex = colon == std::string::npos ? "" : line.substr(colon + 2);
    if (colon == std::string::npos || colon == 0 || hex.size() != 8 ||
        hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return invalid_argument("calibration cache line ", number, ": expected 'tensor: xxxxxxxx' (8 hex digits), got '",
                              line, "'");
    const uint32_t bits = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    if (!std::isfinite(scale) || scale < 0)
      return invalid_argument("calibration cache line ", number, ": scale ", scale, " for '", line.substr(0, colon),
                              "' is not a finite non-negative number");
    scales[line.substr(0, colon)] = scale;
  }
  if (number == 0) return invalid_argument("calibration cache is empty (no header line)");
  return scales;
}

}  // namespace ingot::quant
