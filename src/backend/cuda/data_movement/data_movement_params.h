// Copyright ingot authors. Apache-2.0.
//
// Host-side helpers of the data-movement family (data_movement_tactics.cc): element widths,
// axis normalization, and the parameters of Slice and Pad, read from attributes or integer
// initializers (the host path) or checked for the device path, where a kernel reads computed
// starts / pads on the stream. Nothing here allocates, so enqueue may call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "backend/tactic.h"
#include "ir/ops/tensor_shared.h"  // ir::tensor_slice_range

namespace ingot::backend::cuda::dm {

int64_t node_opset(const ir::Node& n);
bool has_input(const std::vector<ir::TensorType>& in, size_t i);
/// Bytes per element when the kernels can move it (1, 2, 4 or 8), else 0.
int32_t element_bytes(DataType t);
bool known_rank_at_most(const ir::Shape& s, size_t max_rank);
bool is_index_type(DataType t);
bool norm_axis(int64_t a, int64_t rank, int64_t* out);
/// The host values of input `i` when it is an integer initializer of at most `max` elements.
bool initializer_ints(const ir::Node& n, size_t i, int64_t* out, size_t max, size_t* count);
bool input_present(const ir::Node& n, size_t i);
/// Row-major element strides of `shape`.
void contiguous_strides(const Shape64& shape, int64_t* strides);

/// Slice's per-axis parameters (axes normalized, up to kMaxDims entries), from the
/// attributes (opset < 10) or the initializer inputs.
struct SliceParams {
  size_t count = 0;
  int64_t starts[kMaxDims], ends[kMaxDims], axes[kMaxDims], steps[kMaxDims];
};
bool slice_params(const ir::Node& n, int64_t rank, SliceParams* p);
/// Whether Slice's starts/ends/axes/steps inputs (some computed) fit the device path: one
/// index type, 1-D with a known length of at most kMaxDims.
bool slice_device_params_ok(const ir::Node& n, const std::vector<ir::TensorType>& in);

/// Pad's begin/end per dim (rank <= kMaxDims) and mode.
struct PadParams {
  EdgeMode mode = EdgeMode::kConstant;
  int64_t begin[kMaxDims] = {}, end[kMaxDims] = {};
};
bool pad_mode(const ir::Node& n, EdgeMode* mode);
bool pad_params(const ir::Node& n, int64_t rank, PadParams* p);
/// Whether Pad's pads (computed, int64) and axes fit the device path (opset >= 11).
bool pad_device_params_ok(const ir::Node& n, const std::vector<ir::TensorType>& in, int64_t rank);

/// DepthToSpace (to_space) or SpaceToDepth of a 4-D x into y as a 6-D index map: y viewed as
/// [N, C', H, b, W, b] (DepthToSpace) or [N, b, b, C, H', W'] (SpaceToDepth DCR) /
/// [N, C, b, b, H', W'] (CRD), each dim walking x with the stride the reference uses. False when
/// the shapes do not fit the block size.
bool depth_space_map(const Shape64& x, const Shape64& y, int64_t block, bool to_space, bool crd, IndexMapDesc* d);

}  // namespace ingot::backend::cuda::dm
