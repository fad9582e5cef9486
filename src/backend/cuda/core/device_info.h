// Copyright ingot authors. Apache-2.0.
//
// Facts about the current CUDA device that tactics and the autotuner's timing loop need on their
// hot paths (an enqueue, a timed run): asked once per device and kept for the process.
#pragma once

namespace ingot::backend::cuda {

struct DeviceInfo {
  int cc = 0;         ///< compute capability, major * 10 + minor; 0 without a usable device
  int sm_count = 0;   ///< multiprocessors; 0 without a usable device
  int clock_khz = 0;  ///< SM clock as the device reports it (its boost clock); 0 if unknown
};

/// The current device's facts (all zero when there is no usable device; no CUDA error is left
/// behind for the next launch check).
DeviceInfo current_device_info();

}  // namespace ingot::backend::cuda
