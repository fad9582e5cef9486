// Copyright ingot authors. Apache-2.0.
//
// Launchers for the data-movement family's device code (data_movement_kernels.cu). Every
// kernel moves whole elements of 1, 2, 4 or 8 bytes, so one instantiation serves every dtype of
// that width (int64, bool, fp16, ...). Plain C++ so data_movement_tactics.cc compiles with the
// host compiler; every launcher enqueues on `stream`, never synchronizes, and returns
// cudaGetLastError() after its launch (cudaErrorInvalidValue for an unsupported element size).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // kMaxDims

namespace ingot::backend::cuda {

/// How an input coordinate outside [0, in_dim) is treated by launch_index_map.
enum class EdgeMode : int32_t {
  kNone = 0,      // never happens (Slice, Expand)
  kWrap,          // modulo in_dim (Tile, Pad mode=wrap)
  kConstant,      // the pad value (Pad mode=constant)
  kReflect,       // mirrored without repeating the edge (Pad mode=reflect)
  kEdge,          // clamped (Pad mode=edge)
};

/// y[i] = x[sum_d c_d * in_strides[d]] where c_d = start[d] + i_d * step[d] for output
/// coordinate i_d (then mapped by `mode` when outside [0, in_dims[d])). Outermost dim first.
struct IndexMapDesc {
  int32_t rank = 0;
  EdgeMode mode = EdgeMode::kNone;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t start[kMaxDims] = {};
  int64_t step[kMaxDims] = {};
};

/// The generic strided / padded copy behind Slice, Expand, Tile and Pad. `pad_value` is a
/// device pointer to one element (kConstant; nullptr means zero). `device_start_step`, when not
/// null, is a device array of 2 * kMaxDims int64 (starts, then steps) that replaces desc.start
/// and desc.step: written by launch_slice_starts / launch_pad_starts earlier on the stream.
cudaError_t launch_index_map(int32_t element_bytes, const void* x, void* y, int64_t n, const IndexMapDesc& desc,
                             const void* pad_value, const int64_t* device_start_step, cudaStream_t stream);

/// Slice with starts/axes/steps computed on the device: writes the start and step of every dim
/// of a rank-`rank` input with dims `in_dims` into `start_step` (2 * kMaxDims int64), clamped as
/// ONNX says. `count` entries; `axes` and `steps` may be null (0..count-1, all 1); every index
/// tensor is int64 when `int64_indices`, else int32. Entries naming no valid axis are ignored.
cudaError_t launch_slice_starts(const void* starts, const void* axes, const void* steps, bool int64_indices,
                                int32_t count, int32_t rank, const int64_t* in_dims, int64_t* start_step,
                                cudaStream_t stream);

/// Pad with pads computed on the device: start[d] = -pads_begin[d] (int64 pads of 2 * count
/// entries for `count` axes, `axes` int32/int64 or null for 0..rank-1), step 1.
cudaError_t launch_pad_starts(const int64_t* pads, const void* axes, bool int64_axes, int32_t count, int32_t rank,
                              int64_t* start_step, cudaStream_t stream);

/// One part of a Concat or Split on the [outer, cols] view of the joined tensor: `cols` elements
/// per row at column `at` of the joined tensor, in its own tensor `data` ([outer, cols], packed).
/// Parts per launch_join_rows call.
constexpr int32_t kMaxRowSegments = 64;

struct RowSegment {
  const void* data = nullptr;  ///< the part (Concat: an input; Split: an output, written)
  int64_t at = 0;
  int64_t cols = 0;
};

/// Concat (`concat`: the parts into `joined`) or Split (`joined` into the parts) of up to
/// kMaxRowSegments parts in one launch (more: one call per kMaxRowSegments, the caller's loop): a
/// thread per word of the joined rows finds its part, in the widest word (up to 16 bytes) that
/// divides every part's row, `joined_cols` and every address (DenseNet's Concats of up to 49
/// inputs were one launch each, at 4-26% of bandwidth). Up to four parts that tile the row in
/// words narrower than 16 bytes are staged through shared memory instead (launch_join_staged).
cudaError_t launch_join_rows(int32_t element_bytes, bool concat, void* joined, int64_t joined_cols, int64_t outer,
                             const RowSegment* parts, int32_t count, cudaStream_t stream);

/// Gather on the [outer, axis_len, inner] view of x: y[o, k, i] = x[o, idx[k], i] for the
/// `count` indices (int32 or int64; negative ones count from the end). An index out of
/// [-axis_len, axis_len) writes zeros (the host tactic would report an error instead). Rows of
/// 64 bytes or more are copied whole; narrower ones (inner 1: a last-axis Gather) go through a
/// column table in shared memory (launch_gather_columns) where the shape fits it.
cudaError_t launch_gather(int32_t element_bytes, const void* x, const void* indices, bool indices_int64, void* y,
                          int64_t outer, int64_t axis_len, int64_t inner, int64_t count, cudaStream_t stream);

/// GatherElements: y has `out_dims` (the indices' shape); y[i] = x[i with its `axis` coordinate
/// replaced by idx[i]]. x_strides are x's element strides; axis_len = x's dim at `axis`.
struct GatherElementsDesc {
  int32_t rank = 0;
  int32_t axis = 0;
  int64_t axis_len = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t x_strides[kMaxDims] = {};
};
cudaError_t launch_gather_elements(int32_t element_bytes, const void* x, const void* indices, bool indices_int64,
                                   void* y, int64_t n, const GatherElementsDesc& desc, cudaStream_t stream);

/// ScatterND's update step (the launcher does not copy data into y first): `slices` index
/// tuples of `k` int64 each address slices of `slice_size` elements of y; dims/strides are y's
/// first k dims and their element strides. Out-of-range tuples are skipped.
struct ScatterNdDesc {
  int32_t k = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};
cudaError_t launch_scatter_nd(int32_t element_bytes, const void* updates, const int64_t* indices, void* y,
                              int64_t slices, int64_t slice_size, const ScatterNdDesc& desc, cudaStream_t stream);

/// GatherND with batch_dims 0, the inverse of the above: y's slice s (of slice_size elements) is
/// x's slice at index tuple s (k int64 each, negative ones count from the end; desc is x's first
/// k dims and strides). A tuple out of range writes zeros (the host reference reports an error).
cudaError_t launch_gather_nd(int32_t element_bytes, const void* x, const int64_t* indices, void* y, int64_t slices,
                             int64_t slice_size, const ScatterNdDesc& desc, cudaStream_t stream);

/// `rows` rows of `row_elems` 2-byte elements from x (row pitch x_pitch elements) into y (pitch
/// y_pitch): each thread stores 16 aligned bytes of y and gathers them from x whatever x's and
/// y's alignments (the padded cuBLASLt GEMM's odd-N copy: GPT-2's [4096, 50257] fp16 logits
/// into rows 2 bytes apart from 16-byte alignment, which cudaMemcpy2DAsync moved slowly).
cudaError_t launch_copy_rows_u16(const void* x, int64_t x_pitch, void* y, int64_t y_pitch, int64_t row_elems,
                                 int64_t rows, cudaStream_t stream);

/// y[i] = the element whose bytes are the low `element_bytes` bytes of `bits`, i < n.
cudaError_t launch_fill(int32_t element_bytes, void* y, int64_t n, uint64_t bits, cudaStream_t stream);

/// Host-known int64 values (Shape, Size) written by a kernel argument, so the step stays
/// capturable in a CUDA graph (no copy from pageable host memory).
constexpr int kMaxSmallValues = 16;
struct SmallValues {
  int32_t count = 0;
  int64_t v[kMaxSmallValues] = {};
};
cudaError_t launch_write_values(int64_t* y, const SmallValues& values, cudaStream_t stream);

enum class RangeType : int32_t { kF32 = 0, kF64, kI16, kI32, kI64 };
/// Range: y[i] = start + i * delta for i < n, start and delta read on the device (scalars of
/// type t; floats computed in double as the reference does).
cudaError_t launch_range(RangeType t, const void* start, const void* delta, void* y, int64_t n, cudaStream_t stream);

}  // namespace ingot::backend::cuda
