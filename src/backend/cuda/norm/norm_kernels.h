// Copyright ingot authors. Apache-2.0.
//
// Launchers for the normalization family's device code (norm_kernels.cu): GroupNormalization
// (and InstanceNormalization) as one row kernel (a block per row, statistics in fp32, two passes
// for the variance). LayerNormalization and RMSNormalization run the elementwise family's row
// kernels (launch_layernorm). Plain C++ so norm_tactics.cc
// compiles with the host compiler; launchers enqueue on `stream`, never synchronize, and return
// cudaGetLastError() after the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda {

/// `rows` contiguous rows of `row_len` elements of x and y (type t; scale/bias of the same type).
/// Row r is group r % groups of a sample; element i of it is channel (r % groups) *
/// channels_per_group + i / inner; y = scale * (x - mean) / sqrt(var + eps) + bias, with
/// scale/bias per channel, or per group when per_group.
struct RowNormDesc {
  int64_t rows = 0;
  int64_t row_len = 0;
  int64_t groups = 1;
  int64_t channels_per_group = 1;
  int64_t inner = 1;
  bool per_group = false;
  float epsilon = 1e-5f;
};

cudaError_t launch_row_norm(FloatType t, const void* x, const void* scale, const void* bias, void* y,
                            const RowNormDesc& desc, cudaStream_t stream);

}  // namespace ingot::backend::cuda
