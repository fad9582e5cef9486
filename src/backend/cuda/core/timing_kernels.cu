// Copyright ingot authors. Apache-2.0.
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/timing_kernels.h"

namespace ingot::backend::cuda {
namespace {

__global__ void spin_wait_kernel(int64_t cycles) {
  INGOT_KERNEL_ENTRY();
  const int64_t start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

cudaError_t launch_spin_wait(int64_t cycles, cudaStream_t stream) {
  launch_kernel(spin_wait_kernel, 1, 1, 0, stream, cycles);
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
