// Copyright ingot authors. Apache-2.0.
//
// The one CUDA error check: turns a cudaError_t into a Status naming the call and where; and
// whether a device is there at all.
#pragma once

#include <cuda_runtime_api.h>

#include "core/status.h"

#define INGOT_CUDA_CHECK(expr)                                                                  \
  do {                                                                                          \
    cudaError_t ingot_cuda_err_ = (expr);                                                       \
    if (ingot_cuda_err_ != cudaSuccess)                                                         \
      return ::ingot::make_status(::ingot::StatusCode::kInternal, #expr, " failed: ",           \
                                  cudaGetErrorString(ingot_cuda_err_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

namespace ingot::backend::cuda {

/// Whether a CUDA device is visible (tactic families size their candidate lists by asking the
/// libraries about the device; without one they offer their first guess).
inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace ingot::backend::cuda
