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

bool conv_is_gemm(const ir::Node& n) {
  if (n.domain() != "ingot" || (n.op_type() != "FusedConv" && n.op_type() != "QuantConv")) return false;
  const ir::Attributes& at = n.attrs();
  if (at.get_int("channels_last", 0) != 1 || at.get_int("transposed", 0) != 0 || at.get_int("group", 1) != 1)
    return false;
  const std::string pad = at.get_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;
  for (int64_t v : at.get_ints("pads", {}))
    if (v != 0) return false;
  for (int64_t v : at.get_ints("strides", {}))
    if (v != 1) return false;
  for (int64_t v : at.get_ints("kernel_shape", {}))
    if (v != 1) return false;
  const ir::Value* x = n.input(0);
  const ir::Value* w = n.input(1);
  if (!x || !w || !w->shape().rank_known() || w->shape().rank() < 3 || !x->shape().rank_known() ||
      x->shape().rank() != w->shape().rank())
    return false;
  for (size_t i = 1; i + 1 < w->shape().rank(); ++i)
    if (!w->shape()[i].is_known() || w->shape()[i].value() != 1) return false;
  return true;
}

Result<ConvGemmSizes> conv_gemm_sizes(const ir::Node& node, const Shape64& x, const Shape64& w) {
  if (x.size() < 2 || w.size() != x.size())
    return invalid_argument(node.describe(), ": X ", shape_to_string(x), " and W ", shape_to_string(w),
                            " are not a 1x1 convolution");
  for (size_t i = 1; i + 1 < w.size(); ++i)
    if (w[i] != 1) return invalid_argument(node.describe(), ": W ", shape_to_string(w), " is not 1x1");
  ConvGemmSizes s;
  s.m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) s.m *= x[i];
  s.k = x.back();
  s.n = w[0];
  if (w.back() != s.k) return invalid_argument(node.describe(), ": X has ", s.k, " channels, W ", w.back());
  return s;
}

}  // namespace ingot::backend::cuda
