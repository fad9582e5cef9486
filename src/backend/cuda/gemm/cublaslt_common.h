// Copyright ingot authors. Apache-2.0.
//
// What the cuBLASLt tactics share (cublaslt_tactics.cc for float GEMMs, quant_gemm_tactics.cc for
// ingot::QuantGemm): one handle per device, the status check, pointer alignments.
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

}  // namespace ingot::backend::cuda
