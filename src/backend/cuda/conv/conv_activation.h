// Copyright ingot authors. Apache-2.0.
//
// FusedConv's activation attribute as the elementwise family's op: the convolution kernels that
// run the whole epilogue themselves (depthwise, small-channel) share this one reading.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "ir/graph.h"

namespace ingot::backend::cuda {

/// `n`'s activation (none: kIdentity) with its numbers; false when unknown.
inline bool conv_activation_of(const ir::Node& n, UnaryOp* op, UnaryParams* p) {
  const std::string a = n.attrs().get_string("activation", "");
  const std::vector<float> v = n.attrs().get_floats("activation_params");
  *p = UnaryParams{};
  if (a.empty()) *op = UnaryOp::kIdentity;
  else if (a == "Relu") *op = UnaryOp::kRelu;
  else if (a == "Sigmoid") *op = UnaryOp::kSigmoid;
  else if (a == "Tanh") *op = UnaryOp::kTanh;
  else if (a == "HardSwish") *op = UnaryOp::kHardSwish;
  else if (a == "Silu") *op = UnaryOp::kSilu;
  else if (a == "Gelu") *op = UnaryOp::kGelu;
  else if (a == "GeluTanh") *op = UnaryOp::kGeluTanh;
  else if (a == "LeakyRelu" && v.size() >= 1) *op = UnaryOp::kLeakyRelu, p->alpha = v[0];
  else if (a == "HardSigmoid" && v.size() >= 2) *op = UnaryOp::kHardSigmoid, p->alpha = v[0], p->beta = v[1];
  else if (a == "Clip" && v.size() >= 2) *op = UnaryOp::kClip, p->lo = v[0], p->hi = v[1];
  else return false;
  return true;
}

}  // namespace ingot::backend::cuda
