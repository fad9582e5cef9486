// Copyright ingot authors. Apache-2.0.
#include "backend/cuda/core/device_info.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/env_switch.h"

namespace ingot::backend::cuda {

DeviceInfo current_device_info() {
  constexpr int kMaxDevices = 64;
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<DeviceInfo, kMaxDevices> info;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    cudaGetLastError();  // not a launch failure: keep it away from the next launch check
    return {};
  }
  std::call_once(once[static_cast<size_t>(dev)], [dev] {
    int major = 0, minor = 0, sms = 0, clock = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      return;  // stays all zero
    }
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, dev) != cudaSuccess) {
      cudaGetLastError();
      clock = 0;
    }
    info[static_cast<size_t>(dev)] = DeviceInfo{major * 10 + minor, sms, clock};
  });
  return info[static_cast<size_t>(dev)];
}

bool pdl_enabled() {
  static const bool env_off = env_is("INGOT_PDL", "0");
  return !env_off && current_device_info().cc >= 90;
}

}  // namespace ingot::backend::cuda
