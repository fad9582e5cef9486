// Copyright ingot authors. Apache-2.0.
//
// Row copies staged through shared memory (staged_rows_kernels.cu), for rows too narrow or too
// oddly sized to move in whole 16-byte words: a block takes a chunk of whole rows, which is one
// contiguous run on each side of the copy, reads it with 16-byte loads and rearranges it in shared
// memory. Used by launch_gather and launch_join_rows (data_movement_kernels.cu), which keep their
// general kernels for what these refuse. Each launcher returns false, launching nothing, when the
// shape or the buffers' alignment does not fit it; true after enqueueing one kernel (the caller
// reads cudaGetLastError()).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/data_movement/data_movement_kernels.h"

namespace ingot::backend::cuda {

/// Most output columns (count * inner) launch_gather_columns takes: its column table lives in
/// shared memory, 4 bytes a column.
constexpr int64_t kMaxGatherColumns = 4096;

/// Gather on the [outer, axis_len, inner] view of x where rows of `inner` elements are narrower
/// than 64 bytes (a last-axis Gather has inner 1: ShuffleNet's channel shuffle of an NHWC tensor),
/// as y[r, q] = x[r, col[q]] on the [outer, axis_len * inner] -> [outer, count * inner] views,
/// col[q] = idx[q / inner] * inner + q % inner built once per block in shared memory (negative
/// indices wrapped, out-of-range ones write zeros). Refuses fewer than 16 rows, more than
/// kMaxGatherColumns output columns, or a chunk whose offsets do not fit 32 bits.
bool launch_gather_columns(int32_t element_bytes, const void* x, const void* indices, bool indices_int64, void* y,
                           int64_t outer, int64_t axis_len, int64_t inner, int64_t count, cudaStream_t stream);

/// Most parts launch_join_staged takes (Concat and Split of two to four channel groups; the
/// general join handles DenseNet's dozens).
constexpr int32_t kMaxStagedParts = 4;

/// Concat (`concat`) or Split of `count` parts that tile the joined row in order (part j's `at`
/// is the sum of the earlier parts' `cols`, and they sum to `pitch`), all counted in units of
/// `unit_bytes` (1, 2, 4 or 8: a size dividing every part's row), on `rows` rows. Refuses more
/// than kMaxStagedParts parts, parts that do not tile the row, a buffer not 16-byte aligned, and
/// rows too wide to stage.
bool launch_join_staged(int32_t unit_bytes, bool concat, void* joined, int64_t pitch, int64_t rows,
                        const RowSegment* parts, int32_t count, cudaStream_t stream);

}  // namespace ingot::backend::cuda
