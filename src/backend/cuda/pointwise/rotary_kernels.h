// Copyright ingot authors. Apache-2.0.
//
// Launcher for ingot::RotaryEmbedding's device code (rotary_kernels.cu): Y = X * cos +
// rotate_half(X) * sin on the last axis in one pass, one thread per pair (i, i + D/2) of a row,
// so X is read once and neither half is materialized. Plain C++ so rotary_tactics.cc compiles
// with the host compiler; the launcher enqueues on `stream`, never synchronizes, and returns
// cudaGetLastError() after the launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda {

/// Collapsed dims a launch describes; rotary_tactics.cc checks it equals kPointwiseMaxRank, whose
/// planner (plan_pointwise_launch) fills the map.
constexpr int kRotaryMaxRank = 8;

/// One launch, computed on the host and passed by value. Y (and X unless x_heads) is contiguous, `rows` rows of
/// 2 * half elements. X's element e reads cos at sum_k index_k(e) * cos_strides[k] over the
/// collapsed dims `dims` (outermost first; stride 0 where cos broadcasts), likewise sin; both
/// have X's last dim, so their stride along it is 1.
struct RotaryDesc {
  int64_t rows = 0;
  int64_t half = 0;
  /// 0: X is contiguous like Y. Else X is a packed projection whose rows of x_row elements begin
  /// with x_heads of Y's rows (2 * half each): Y's row r reads X at
  /// (r / x_heads) * x_row + (r % x_heads) * 2 * half (ingot::RotaryEmbedding's heads form).
  int64_t x_heads = 0;
  int64_t x_row = 0;
  int32_t rank = 0;
  int64_t dims[kRotaryMaxRank] = {};
  int64_t cos_strides[kRotaryMaxRank] = {};
  int64_t sin_strides[kRotaryMaxRank] = {};
};

/// Y[.., i] = X[.., i] cos[.., i] - X[.., i + h] sin[.., i] and Y[.., i + h] = X[.., i + h]
/// cos[.., i + h] + X[.., i] sin[.., i + h] for i < h = half; x, cos, sin, y of type t, math in
/// fp32. y may alias x when X is contiguous (each thread reads its pair before writing it).
cudaError_t launch_rotary(FloatType t, const void* x, const void* cos, const void* sin, void* y, const RotaryDesc& desc,
                          cudaStream_t stream);

}  // namespace ingot::backend::cuda
