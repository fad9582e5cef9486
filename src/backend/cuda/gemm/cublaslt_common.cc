// Copyright ingot authors. Apache-2.0.
#include "backend/cuda/gemm/cublaslt_common.h"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>

#include "backend/cuda/core/cuda_check.h"

namespace ingot::backend::cuda {

Result<cublasLtHandle_t> cublaslt_handle(const ir::Node& node) {
  constexpr int kMaxDevices = 64;
  static std::array<std::atomic<cublasLtHandle_t>, kMaxDevices> handles{};
  static std::mutex mu;
  int dev = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) return unsupported("CUDA device ordinal ", dev, " is beyond ", kMaxDevices);
  cublasLtHandle_t h = handles[dev].load(std::memory_order_acquire);
  if (h) return h;
  std::lock_guard<std::mutex> lock(mu);
  h = handles[dev].load(std::memory_order_acquire);
  if (!h) {
    INGOT_CUBLAS_CHECK(cublasLtCreate(&h), node);
    handles[dev].store(h, std::memory_order_release);
  }
  return h;
}

uint32_t alignment_of(const void* p, int64_t batch_stride_bytes) {
  uint64_t v = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch_stride_bytes > 0) v |= static_cast<uint64_t>(batch_stride_bytes);
  return static_cast<uint32_t>(v & (~v + 1));
}

}  // namespace ingot::backend::cuda
