// Copyright ingot authors. Apache-2.0.
//
// What the convolution kernels that run their whole epilogue themselves (depthwise, small-channel,
// ...) read from a Conv / ingot::FusedConv node the same way: the 2-D window (symmetric pads,
// strides, dilations), the activation as the elementwise family's op, the residual's order and
// shape; and how their tactics keep those numbers in the engine (ParamWriter / ParamReader).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "ir/graph.h"

namespace ingot::backend::cuda {

/// `n`'s activation (none: kIdentity) with its numbers; false when unknown. `attr` and `params_attr` name
/// another activation of the same vocabulary (ingot::SqueezeExcite's gate_activation).
inline bool conv_activation_of(const ir::Node& n, UnaryOp* op, UnaryParams* p, const char* attr = "activation",
                               const char* params_attr = "activation_params") {
  const std::string a = n.attrs().get_string(attr, "");
  const std::vector<float> v = n.attrs().get_floats(params_attr);
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

/// A 2-D convolution's window: symmetric pads, strides and dilations.
struct ConvWindow {
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
};

/// `at`'s 2-D window; false for auto_pad, asymmetric pads or values outside [0 | 1, 2^20].
inline bool conv_window_of(const ir::Attributes& at, ConvWindow* w) {
  if (at.get_string("auto_pad", "NOTSET") != "NOTSET") return false;
  const std::vector<int64_t> pads = at.get_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t> strides = at.get_ints("strides", {1, 1});
  const std::vector<int64_t> dil = at.get_ints("dilations", {1, 1});
  if (pads.size() != 4 || strides.size() != 2 || dil.size() != 2 || pads[0] != pads[2] || pads[1] != pads[3])
    return false;
  auto in = [](int64_t v, int64_t lo) { return v >= lo && v <= (int64_t{1} << 20); };
  if (!in(pads[0], 0) || !in(pads[1], 0) || !in(strides[0], 1) || !in(strides[1], 1) || !in(dil[0], 1) || !in(dil[1], 1))
    return false;
  *w = ConvWindow{static_cast<int>(pads[0]),   static_cast<int>(pads[1]), static_cast<int>(strides[0]),
                  static_cast<int>(strides[1]), static_cast<int>(dil[0]),  static_cast<int>(dil[1])};
  return true;
}

/// FusedConv `n`'s activation and whether its residual comes after it (act(conv + b) + r, with an
/// activation and a residual and residual_before_activation = 0); false for an unknown activation.
inline bool conv_epilogue_of(const ir::Node& n, UnaryOp* op, UnaryParams* p, bool* residual_after_activation) {
  if (!conv_activation_of(n, op, p)) return false;
  *residual_after_activation =
      *op != UnaryOp::kIdentity && n.input(3) && n.attrs().get_int("residual_before_activation", 1) == 0;
  return true;
}

/// Whether residual shape `r` provably equals output shape `y` (both 4-D).
inline bool residual_matches(const ir::Shape& r, const ir::Shape& y) {
  if (!r.rank_known() || !y.rank_known() || r.rank() != 4 || y.rank() != 4) return false;
  for (size_t i = 0; i < 4; ++i)
    if (!r[i].provably_equal(y[i])) return false;
  return true;
}

/// What is wrong with a conv node's operand types for these kernels, or "" when nothing: X a float
/// type, Y and every other present input of X's type, the bias (input 2) `[channels]`, the
/// residual (input 3) provably of Y's shape.
inline std::string conv_operands_problem(const ir::Node& n, const std::vector<ir::TensorType>& in, int64_t channels) {
  FloatType t;
  if (in.empty() || !n.output(0) || !to_float_type(in[0].dtype, &t) || n.output(0)->dtype() != in[0].dtype)
    return "dtype";
  for (size_t i = 1; i < in.size(); ++i)
    if (n.input(i) && in[i].dtype != in[0].dtype) return "mixed dtypes";
  if (n.input(2) && in.size() > 2) {
    const ir::Shape& b = in[2].shape;
    if (!b.rank_known() || b.rank() != 1 || !b[0].is_known() || b[0].value() != channels)
      return "bias " + b.to_string();
  }
  if (n.input(3) && in.size() > 3 && !residual_matches(in[3].shape, n.output(0)->shape()))
    return "residual " + in[3].shape.to_string() + " vs " + n.output(0)->shape().to_string();
  return "";
}

/// A 2-D float conv step's tensors: X, W, Y, the bias and the residual (null when absent), and X's
/// float type.
struct ConvTensors {
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* b = nullptr;
  const Tensor* r = nullptr;
  Tensor* y = nullptr;
  FloatType t = FloatType::kF32;
};

/// `io`'s ConvTensors; an internal error naming the node and `tactic` when X, W or Y is missing,
/// not 4-D, or of another type than X.
inline Status conv_tensors(const StepIO& io, const char* tactic, ConvTensors* c) {
  const ir::Node& node = *io.node;
  if (io.inputs.size() < 2 || !io.inputs[0] || !io.inputs[1] || !io.outputs || io.outputs->empty())
    return internal_error(node.describe(), ": ", tactic, " needs X, W and an output");
  c->x = io.inputs[0];
  c->w = io.inputs[1];
  c->b = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
  c->r = io.inputs.size() > 3 ? io.inputs[3] : nullptr;
  c->y = &(*io.outputs)[0];
  if (!to_float_type(c->x->dtype(), &c->t) || c->x->rank() != 4 || c->y->rank() != 4 || c->y->dtype() != c->x->dtype())
    return internal_error(node.describe(), ": ", tactic, " got ", shape_to_string(c->x->shape()), " -> ",
                          shape_to_string(c->y->shape()));
  return Status::Ok();
}

/// A tactic's params as the engine keeps them: a version byte, then fixed-size fields in the order
/// they are put, native byte order (an engine is bound to its machine).
class ParamWriter {
 public:
  explicit ParamWriter(uint8_t version) : out_{version} {}
  ParamWriter& i32(int64_t v) { return put(static_cast<int32_t>(v)); }
  ParamWriter& i64(int64_t v) { return put(v); }
  ParamWriter& f32(float v) { return put(v); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  template <class T>
  ParamWriter& put(T v) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), b, b + sizeof v);
    return *this;
  }
  std::vector<uint8_t> out_;
};

/// Reads ParamWriter's bytes back in the same order. A wrong version byte, a read past the end or
/// bytes left over make done() false (an engine of another version: the tactic is not created).
class ParamReader {
 public:
  ParamReader(const std::vector<uint8_t>& p, uint8_t version) : p_(p), ok_(!p.empty() && p[0] == version) {}
  int32_t i32() { return get<int32_t>(); }
  int64_t i64() { return get<int64_t>(); }
  float f32() { return get<float>(); }
  bool done() const { return ok_ && pos_ == p_.size(); }

 private:
  template <class T>
  T get() {
    T v{};
    if (ok_ && pos_ + sizeof v <= p_.size()) {
      std::memcpy(&v, p_.data() + pos_, sizeof v);
      pos_ += sizeof v;
    } else {
      ok_ = false;
    }
    return v;
  }
  const std::vector<uint8_t>& p_;
  size_t pos_ = 1;
  bool ok_;
};

/// The activation's numbers, as these tactics keep them: alpha, beta, lo, hi.
inline void put_act_params(ParamWriter& w, const UnaryParams& p) { w.f32(p.alpha).f32(p.beta).f32(p.lo).f32(p.hi); }
inline UnaryParams get_act_params(ParamReader& r) {
  UnaryParams p;
  p.alpha = r.f32();
  p.beta = r.f32();
  p.lo = r.f32();
  p.hi = r.f32();
  return p;
}

/// A kept activation back as the op: false for a value no activation of these kernels has.
inline bool act_from_int(int32_t v, UnaryOp* op) {
  if (v < 0 || v > static_cast<int32_t>(UnaryOp::kSilu)) return false;
  *op = static_cast<UnaryOp>(v);
  return true;
}

/// The window as these tactics keep it: kh, kw, strides, pads (int32 each).
template <class D>
void put_window(ParamWriter& w, const D& d) {
  w.i32(d.kh).i32(d.kw).i32(d.stride_h).i32(d.stride_w);
  w.i32(d.pad_h).i32(d.pad_w);
}
template <class D>
void get_window(ParamReader& r, D* d) {
  d->kh = r.i32();
  d->kw = r.i32();
  d->stride_h = r.i32();
  d->stride_w = r.i32();
  d->pad_h = r.i32();
  d->pad_w = r.i32();
}

/// Whether two of these kernels' descriptors have the same window (kernel, strides, pads) and
/// epilogue (activation with its numbers, residual order); each tactic compares its own fields too.
template <class D>
bool same_window_and_epilogue(const D& a, const D& b) {
  return a.kh == b.kh && a.kw == b.kw && a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.pad_h == b.pad_h &&
         a.pad_w == b.pad_w && a.act == b.act && a.residual_after_activation == b.residual_after_activation &&
         a.act_params.alpha == b.act_params.alpha && a.act_params.beta == b.act_params.beta &&
         a.act_params.lo == b.act_params.lo && a.act_params.hi == b.act_params.hi;
}

}  // namespace ingot::backend::cuda
