// Copyright ingot authors. Apache-2.0.
//
// The strided-view form of ingot::Attention (made by passes/attention_strided_views.cc): Q, K
// and V are read, and Y is written, in place inside other tensors (the "roots": a packed QKV
// projection's output, the tensor a head merge would copy Y into), so the Transpose / Gather /
// Slice / Split / Reshape nodes that exporters put around attention cost nothing.
//
//   view_dims = [B, Hq, Hkv, Sq, Skv, D]
//   q_view, k_view, v_view, y_view = [offset, stride_b, stride_h, stride_s]   (elements)
//   y_shape = the output root's shape
//
// Element (b, h, s, d) of Q lives at root_q[offset + b*stride_b + h*stride_h + s*stride_s + d]
// (d is always contiguous); K and V likewise with Hkv heads and Skv positions; Y with Hq heads
// and Sq positions inside the output tensor of shape y_shape, which the view covers exactly.
// Every consumer (shape inference, the CPU reference, the CUDA tactics) reads the form through
// this one parser, so the rules live in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace ingot::ir {

struct AttentionViews {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_size = 0;
  /// [q, k, v, y][offset, stride_b, stride_h, stride_s]
  int64_t view[4][4] = {};
  std::vector<int64_t> y_shape;

  /// The largest element index + 1 that view `which` (0 q, 1 k, 2 v, 3 y) touches.
  int64_t extent(int which) const {
    const int64_t heads = which == 0 || which == 3 ? q_heads : kv_heads;
    const int64_t len = which == 0 || which == 3 ? q_len : kv_len;
    const int64_t* v = view[which];
    return v[0] + (batch - 1) * v[1] + (heads - 1) * v[2] + (len - 1) * v[3] + head_size;
  }
  int64_t y_numel() const {
    int64_t n = 1;
    for (int64_t d : y_shape) n *= d;
    return n;
  }
};

inline bool attention_has_views(const Attributes& a) { return a.has("view_dims"); }

/// Parses and checks the attributes (positive dims, Hq a multiple of Hkv, non-negative offsets
/// and strides, a y_shape with B*Hq*Sq*D elements). Empty string when valid, else why not.
inline std::string parse_attention_views(const Attributes& a, AttentionViews* out) {
  const std::vector<int64_t> dims = a.get_ints("view_dims");
  if (dims.size() != 6) return "view_dims must hold 6 values [B, Hq, Hkv, Sq, Skv, D]";
  for (int64_t d : dims)
    if (d <= 0) return "view_dims must be positive";
  out->batch = dims[0];
  out->q_heads = dims[1];
  out->kv_heads = dims[2];
  out->q_len = dims[3];
  out->kv_len = dims[4];
  out->head_size = dims[5];
  if (out->q_heads % out->kv_heads != 0) return "q heads must be a multiple of kv heads";
  const char* names[4] = {"q_view", "k_view", "v_view", "y_view"};
  for (int i = 0; i < 4; ++i) {
    const std::vector<int64_t> v = a.get_ints(names[i]);
    if (v.size() != 4) return std::string(names[i]) + " must hold 4 values [offset, stride_b, stride_h, stride_s]";
    for (int j = 0; j < 4; ++j) {
      if (v[j] < 0) return std::string(names[i]) + " must not be negative";
      out->view[i][j] = v[j];
    }
  }
  out->y_shape = a.get_ints("y_shape");
  if (out->y_shape.empty()) return "y_shape is required with view_dims";
  for (int64_t d : out->y_shape)
    if (d <= 0) return "y_shape must be positive";
  if (out->y_numel() != out->batch * out->q_heads * out->q_len * out->head_size)
    return "y_shape does not hold B*Hq*Sq*D elements";
  if (out->extent(3) > out->y_numel()) return "y_view reaches past y_shape";
  return "";
}

}  // namespace ingot::ir
