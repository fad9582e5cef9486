// Copyright ingot authors. Apache-2.0.
//
// What the GEMM tactics share (cublaslt_tactics.cc for float GEMMs, quant_gemm_tactics.cc for
// ingot::QuantGemm and the CUTLASS int8 kernels): one cuBLASLt handle per device, the status check,
// pointer alignments, and which convolutions are one GEMM.
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "core/status.h"
#include "ir/graph.h"

/// Returns from the enclosing function with a Status naming `node` when a cuBLASLt call fails
/// (kUnsupported for CUBLAS_STATUS_NOT_SUPPORTED, kInternal otherwise).
#define INGOT_CUBLAS_CHECK(expr, node)                                                                       \
  do {                                                                                                       \
    cublasStatus_t ingot_cublas_st_ = (expr);                                                                \
    if (ingot_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                           \
      return ::ingot::make_status(ingot_cublas_st_ == CUBLAS_STATUS_NOT_SUPPORTED ? StatusCode::kUnsupported \
                                                                                  : StatusCode::kInternal,   \
                                  (node).describe(), ": ", #expr, " failed: ",                              \
                                  cublasLtGetStatusString(ingot_cublas_st_));                                \
  } while (0)

namespace ingot::backend::cuda {

/// The current device's cuBLASLt handle, created on first use and kept for the process (errors
/// name `node`).
Result<cublasLtHandle_t> cublaslt_handle(const ir::Node& node);

/// Largest power of two (at most 256) dividing the address and, for batches, the stride.
uint32_t alignment_of(const void* p, int64_t batch_stride_bytes = 0);

/// Whether `n` (ingot::FusedConv or ingot::QuantConv) is a channels-last convolution that is one
/// GEMM over its pixels: one group, not transposed, stride 1, no padding, and a kernel of one tap in
/// every spatial dim (W [K, 1, ..., 1, C], known from its value's shape; X of W's rank). Dilation
/// does not matter with one tap.
bool conv_is_gemm(const ir::Node& n);

/// Such a convolution's GEMM on runtime shapes: X [N, spatial..., C] is A [M = N·spatial, C],
/// W [K, 1, ..., 1, C] is B [K, C] (row-major, so the TN form), Y [M, K].
struct ConvGemmSizes {
  int64_t m = 0, n = 0, k = 0;
};
Result<ConvGemmSizes> conv_gemm_sizes(const ir::Node& node, const Shape64& x, const Shape64& w);

}  // namespace ingot::backend::cuda
