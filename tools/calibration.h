// Copyright ingot authors. Apache-2.0.
//
// The CLI's INT8 calibrator: batches from a folder of .npy files, the algorithm and the cache
// file from flags (--int8 --calibration-data DIR --calibrator A --percentile P
// --calibration-cache FILE). A model with one input reads every DIR/*.npy (sorted) as one batch
// of it; a model with several reads DIR/<batch>/<input name>.npy per batch folder (sorted).
// The cache file, when it exists, is read instead (no batch runs); a calibration writes it.
#pragma once

#include <string>
#include <vector>

#include "ingot/builder.h"

namespace ingot::tools {

class NpyCalibrator : public Calibrator {
 public:
  std::string dir, algorithm_name, cache_path;  ///< algorithm "" = the default (entropy; minmax for fp8)
  bool fp8 = false;
  double percentile_value = 99.99;

  Result<std::vector<HostTensor>> next_batch(const std::vector<TensorInfo>& inputs) override;
  int num_batches() const override;
  std::string algorithm() const override {
    return !algorithm_name.empty() ? algorithm_name : fp8 ? "minmax" : "entropy";
  }
  double percentile() const override { return percentile_value; }
  std::string read_cache() override;
  void write_cache(const std::string& text) override;

 private:
  std::vector<std::string> entries() const;  // sorted batch files (one input) or folders
  size_t next_ = 0;
};

/// The process's calibrator the build flags configure (one build per CLI process).
NpyCalibrator& cli_calibrator();

}  // namespace ingot::tools
