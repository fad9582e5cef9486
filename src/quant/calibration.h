// Copyright ingot authors. Apache-2.0.
//
// INT8 post-training calibration: what range of each activation tensor an 8-bit symmetric
// quantization should cover. The builder feeds every float tensor the fp32 model computes on
// the calibration batches into a TensorCalibration (max |x| and a histogram of |x|), then asks
// one of three calibrators for the threshold T; the tensor's scale is T / 127 (zero point 0).
//
//  - entropy (TensorRT's EntropyCalibration2, GTC 2017 "8-bit Inference with TensorRT"): over a
//    2048-bin histogram of |x|, for each candidate i in 128..2048 the reference distribution P is
//    the first i bins with everything beyond folded into bin i-1; the candidate Q is the same i
//    bins without that fold, merged into 128 levels and expanded back (each level's mass spread
//    evenly over its non-zero bins), smoothed as MXNet and onnxruntime smooth it (1e-4 on empty
//    bins); the i with the least KL(P || Q) (the largest such i) gives T = (i + 0.5) * bin width.
//    The first bin is counted as the second (NVIDIA's pytorch-quantization does the same): it
//    holds a ReLU output's exact zeros, which otherwise pull the threshold far down;
//  - min-max: T = max |x| (no clipping);
//  - percentile: T = the given percentile of |x| (e.g. 99.99), from the histogram.
//
// The histogram's range grows with the data without a second pass: it starts just above the first
// batch's max |x| (times 1 + 2^-20); when a batch reaches past it, the range doubles (as often as
// needed) and neighbouring bins merge pairwise, which is exact.
//
// Scales travel in a calibration cache in TensorRT's text form: a header line naming the
// algorithm, then `tensor_name: xxxxxxxx` per tensor, the scale's IEEE-754 float32 bits in hex.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace ingot::quant {

constexpr int kHistogramBins = 2048;
constexpr int kQuantLevels = 128;  // int8's non-negative levels, 0..127

enum class CalibrationAlgorithm { kEntropy, kMinMax, kPercentile };

/// "entropy" / "minmax" / "percentile" (what --calibrator takes and the cache header names).
const char* algorithm_name(CalibrationAlgorithm a);
Result<CalibrationAlgorithm> parse_algorithm(const std::string& name);

/// The running statistics of one tensor's |x| over the calibration batches.
class TensorCalibration {
 public:
  /// Folds `n` values in (NaN and inf are skipped: they have no range to cover).
  void observe(const float* x, int64_t n);
  double amax() const { return amax_; }
  int64_t count() const { return count_; }
  /// kHistogramBins counts over [0, range()); empty before the first non-zero value.
  const std::vector<double>& histogram() const { return hist_; }
  double range() const { return range_; }

 private:
  double amax_ = 0;
  double range_ = 0;
  int64_t count_ = 0;
  std::vector<double> hist_;
};

/// The entropy calibrator's choice over `hist` (any number of bins >= kQuantLevels; counts): the
/// number of bins i to keep (kQuantLevels..hist.size()); the threshold is (i + 0.5) * bin width.
int entropy_bins(const std::vector<double>& hist);

/// The threshold T for a tensor (0 when it never held a non-zero value).
double threshold(const TensorCalibration& t, CalibrationAlgorithm a, double percentile = 99.99);

/// One tensor's values in one batch, for observe_all.
struct Observation {
  TensorCalibration* into = nullptr;
  const float* values = nullptr;
  int64_t count = 0;
};

/// Folds every observation in (TensorCalibration::observe), tensors spread over up to `threads`
/// threads (0: one per hardware thread; small batches run on the caller's). Each
/// TensorCalibration may appear once: one thread folds it, so the result is the same for any
/// thread count. Fold a tensor's batches in one order across calls for a reproducible range.
void observe_all(const std::vector<Observation>& work, int threads = 0);

/// threshold() of each tensor, computed over up to `threads` threads (0: one per hardware
/// thread); the same numbers for any thread count.
std::vector<double> thresholds(const std::vector<const TensorCalibration*>& tensors, CalibrationAlgorithm a,
                               double percentile = 99.99, int threads = 0);

/// TensorRT's cache text: header line, then one `name: hex-float32` line per tensor (sorted).
/// FP8 scales (threshold / 448) get a header ending in -FP8E4M3, so no int8 build reads them.
std::string write_cache(CalibrationAlgorithm a, const std::map<std::string, float>& scales, bool fp8 = false);
/// Parses cache text; errors name the line. *header receives the first line.
Result<std::map<std::string, float>> read_cache(const std::string& text, std::string* header = nullptr);

}  // namespace ingot::quant
