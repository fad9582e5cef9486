// Copyright ingot authors. Apache-2.0.
//
// Autotuning: for each step the builder times the backend's candidate tactics at the profile's
// opt shapes and keeps the fastest (Backend::time_enqueue: CUDA events, warm-up, median, the
// inputs rotated over several copies so small cases are not served from L2). Timings go into a
// TimingCache keyed by what decides them: backend, GPU arch and library versions, the op with
// its attributes, and the input/output types and shapes. The cache is a text file shared across
// builds and models; a build with a warm cache times nothing it has seen.
//
// How wide the search is follows BuilderConfig::optimization_level: 0-1 keep the backend's first
// guess, 2 times the first 2 candidates, 3 (default) the first 4, 4 the first 8, 5 all of them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/tactic.h"
#include "core/status.h"

namespace ingot::builder {

class TimingCache {
 public:
  /// Reads `path`. A missing file is an empty cache; a file in another format or version is
  /// ignored with a warning in *warning (the build goes on and rewrites it).
  Status load(const std::string& path, std::string* warning);
  /// Writes the cache atomically (temporary file + rename).
  Status save(const std::string& path) const;
  /// tactic name -> median ms, or nullptr when the key was never timed.
  const std::map<std::string, double>* find(const std::string& key) const;
  void put(const std::string& key, const std::string& tactic, double ms) { entries_[key][tactic] = ms; }
  size_t size() const { return entries_.size(); }

 private:
  std::map<std::string, std::map<std::string, double>> entries_;
};

/// The cache key of a step: `identity` (backend, arch, library versions), op, attributes,
/// input and output dtypes with their opt-profile shapes.
std::string timing_key(const std::string& identity, const ir::Node& node, const std::vector<DataType>& in_types,
                       const std::vector<Shape64>& in_shapes, const std::vector<DataType>& out_types,
                       const std::vector<Shape64>& out_shapes);

struct TuneOptions {
  int optimization_level = 3;
  uint64_t workspace_limit = 1ull << 30;
  bool tf32 = false;
  bool time_single = false;  ///< time a lone candidate too (the layout choice compares times)
  /// What a timing counts (backend::TimingMode); part of the timing-cache key, through the
  /// builder's identity string, so the two kinds of timings never mix.
  backend::TimingMode timing = backend::TimingMode::kStream;
};

struct TuneStats {
  int timed = 0;       ///< tactics measured on the device
  int cache_hits = 0;  ///< steps decided by the timing cache alone
  int failed = 0;      ///< candidates that failed to run while timed (skipped)
  int cut_short = 0;   ///< candidates one run showed to be far slower than the best so far (of `timed`)
};

/// Elements of the random pattern that fill_timing_input repeats.
constexpr int64_t kTimingPatternElements = 1 << 16;

/// Fills a float tensor with the timing inputs' data: values in [-1, -0.01] U [0.01, 1] (never
/// zero), the first kTimingPatternElements drawn from a fixed-seed generator, the rest repeating
/// them byte for byte.
void fill_timing_input(Tensor& t);

/// How many of the backend's candidates a level considers.
int candidates_for_level(int level);

/// A tactic's family for the autotuner's width: its name without a trailing number
/// ("cuda.cudnn.graph.conv.3" -> "cuda.cudnn.graph.conv", "cuda.cublaslt.0" -> "cuda.cublaslt").
std::string tactic_family(const std::string& name);

/// Indices of the candidates choose_tactic times at `width` (candidates_for_level): the first
/// `width`, then (width >= 2) the first capturable candidate of each family not among them, in
/// order. A family's variants come first in the backend's list and used to crowd later families
/// out: three depthwise strip variants kept cuDNN's channels-last convs from being timed, and
/// ConvNeXt's layout went channels-first (session 15).
std::vector<size_t> considered_candidates(const std::vector<std::unique_ptr<backend::Tactic>>& cands, size_t width);

/// Chooses among `cands` (already filtered by supports()): returns the index of the fastest at
/// the opt shapes, timing what the cache does not know. One candidate, or a backend that does not
/// time, returns 0 without measuring. `device` holds the timing buffers.
Result<size_t> choose_tactic(const backend::Backend& be, const ir::Node& node,
                             std::vector<std::unique_ptr<backend::Tactic>>& cands, const std::string& key,
                             const std::vector<Shape64>& in_shapes, const std::vector<Shape64>& out_shapes,
                             const TuneOptions& options, TimingCache& cache, TuneStats& stats);

}  // namespace ingot::builder
