// Copyright ingot authors. Apache-2.0.
//
// What the tensor op family's two files (tensor.cc, tensor_index.cc) share, and what kernels that
// must agree with its shape inference reuse instead of restating ONNX's rules: the CPU Split and
// Slice kernels (backend/cpu/kernels/tensor.cc) and the CUDA Slice tactic (data_movement_params.h).
// Defined in tensor.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/op_registry.h"

namespace ingot::ir {

/// The elements of input `i` when its value is known at inference time (an integer constant).
std::optional<std::vector<int64_t>> tensor_known_ints(const InferenceContext& c, size_t i);
/// An int64 tensor of `v` (a scalar when `scalar` and v has one element), for folded values.
Tensor tensor_i64_value(const std::vector<int64_t>& v, bool scalar);
/// When input `i` is the output of a Shape node whose input has a known rank: the dims it holds
/// (possibly symbolic), so that Gather/Slice of a shape fold while other dims are symbolic.
std::optional<std::vector<Dim>> tensor_shape_source(const InferenceContext& c, size_t i);
/// An axes operand given as input `input` (newer opsets) or attribute `attr`; *present says which.
std::optional<std::vector<int64_t>> tensor_axes_arg(const InferenceContext& c, size_t input, const char* attr,
                                                    bool* present);
/// Split's output sizes along an axis of `dim` elements (from `split`, or `num_outputs` parts, which
/// may be uneven from opset 18).
Result<std::vector<int64_t>> tensor_split_sizes(int64_t dim, int64_t opset, bool has_split,
                                                const std::vector<int64_t>& split, int64_t num_outputs,
                                                bool uneven);
/// ONNX's clamping of one Slice axis: start, end and the count of taken elements.
void tensor_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t* s, int64_t* e,
                        int64_t* count);
/// Slice's starts, ends, axes and steps from its attributes (opset < 10) or inputs; *known false
/// when an input's value is not known yet.
Status tensor_slice_params(const InferenceContext* c, int64_t opset, const Attributes& attrs,
                           const std::vector<const Tensor*>& in, int64_t rank, std::vector<int64_t>* starts,
                           std::vector<int64_t>* ends, std::vector<int64_t>* axes, std::vector<int64_t>* steps,
                           bool* known);
/// tensor_index.cc's ops (register_tensor_ops calls it).
void register_tensor_index_ops(OpRegistry& r);

}  // namespace ingot::ir
