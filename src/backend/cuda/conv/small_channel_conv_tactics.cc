// Copyright ingot authors. Apache-2.0.
//
// "cuda.conv.small_c": channels-last ingot::FusedConv with 1-4 input channels, group 1, a kernel up
// to 8x8 (any stride, dilation and symmetric padding), K a multiple of 8, fp32/fp16/bf16, an
// optional bias and residual and any FusedConv activation, in one kernel
// (small_channel_conv_kernels.cu). The stems of CNNs; the builder times it beside cuDNN's.
//
// Refused: channels-first (the layout pass makes stems channels-last in fp16/bf16), grouped or
// transposed convs, asymmetric pads or auto_pad, open C/K/kernel dims, mixed types.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/conv/small_channel_conv_kernels.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"

namespace ingot::backend::cuda {

TacticFamily small_channel_conv_family();

namespace {

constexpr const char* kName = "cuda.conv.small_c";

// The layer's numbers but its activation dims (those of the descriptor with n, h, w, oh, ow unset).
using Spec = SmallConvDesc;

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, Spec* out) {
  auto refuse = [&](const std::string& why) { return unsupported(n.describe(), ": ", kName, ": ", why); };
  if (!(n.domain() == "ingot" && n.op_type() == "FusedConv")) return refuse("not a FusedConv");
  const ir::Attributes& at = n.attrs();
  if (at.get_int("channels_last", 0) == 0) return refuse("channels-first");
  if (at.get_int("transposed", 0) != 0 || at.get_int("group", 1) != 1) return refuse("transposed or grouped");
  ConvWindow win;
  if (!conv_window_of(at, &win)) return refuse("auto_pad, asymmetric pads, strides or dilations");
  Spec s;
  s.pad_h = win.pad_h;
  s.pad_w = win.pad_w;
  s.stride_h = win.stride_h;
  s.stride_w = win.stride_w;
  s.dil_h = win.dil_h;
  s.dil_w = win.dil_w;
  if (!conv_epilogue_of(n, &s.act, &s.act_params, &s.residual_after_activation)) return refuse("activation");
  if (in.size() < 2 || !n.input(0) || !n.input(1) || !n.output(0)) return refuse("needs X and W");
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;  // [K, kh, kw, C]
  if (!x.rank_known() || !w.rank_known() || x.rank() != 4 || w.rank() != 4) return refuse("not 2-D");
  if (!x[3].is_known() || !w[0].is_known() || !w[1].is_known() || !w[2].is_known() || !w[3].is_known())
    return refuse("open channel or kernel dims");
  if (w[3].value() != x[3].value()) return refuse("W " + w.to_string() + " does not match X " + x.to_string());
  s.c = x[3].value();
  s.k = w[0].value();
  s.kh = static_cast<int>(std::min<int64_t>(w[1].value(), 1 << 20));
  s.kw = static_cast<int>(std::min<int64_t>(w[2].value(), 1 << 20));
  // Dims the kernel's limits do not depend on: 1 here, the real ones at enqueue.
  s.n = s.h = s.w = s.oh = s.ow = 1;
  if (!small_conv_supported(s)) return refuse("C, K or kernel outside the kernel's limits");
  const std::string bad = conv_operands_problem(n, in, s.k);
  if (!bad.empty()) return refuse(bad);
  if (out) *out = s;
  return Status::Ok();
}

class SmallChannelConvTactic final : public Tactic {
 public:
  explicit SmallChannelConvTactic(const Spec& s) : s_(s) {}
  std::string name() const override { return kName; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    Spec s;
    return check(node, inputs, &s).ok() && same(s, s_);
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    ConvTensors c;
    INGOT_RETURN_IF_ERROR(conv_tensors(io, kName, &c));
    const Tensor& x = *c.x;
    Tensor& y = *c.y;
    const FloatType t = c.t;
    SmallConvDesc d = s_;
    d.n = x.dim(0);
    d.h = x.dim(1);
    d.w = x.dim(2);
    d.oh = y.dim(1);
    d.ow = y.dim(2);
    const int64_t want_oh = (d.h + 2 * d.pad_h - static_cast<int64_t>(d.dil_h) * (d.kh - 1) - 1) / d.stride_h + 1;
    const int64_t want_ow = (d.w + 2 * d.pad_w - static_cast<int64_t>(d.dil_w) * (d.kw - 1) - 1) / d.stride_w + 1;
    const Tensor* b = c.b;
    const Tensor* r = c.r;
    if (x.dim(3) != d.c || y.dim(0) != d.n || y.dim(3) != d.k || d.oh != want_oh || d.ow != want_ow ||
        c.w->numel() != d.k * d.kh * d.kw * d.c || (b && b->numel() != d.k) || (r && r->shape() != y.shape()))
      return internal_error(node.describe(), ": ", kName, " shapes do not match the plan: x ", shape_to_string(x.shape()),
                            ", y ", shape_to_string(y.shape()));
    if (!small_conv_supported(d))
      return unsupported(node.describe(), ": ", kName, ": x ", shape_to_string(x.shape()),
                         " is past the kernel's 32-bit index range");
    const cudaError_t e = launch_small_channel_conv(t, x.raw(), c.w->raw(), b ? b->raw() : nullptr,
                                                    r ? r->raw() : nullptr, y.mutable_raw(), d,
                                                    current_device_info().sm_count, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess) return internal_error(node.describe(), ": ", kName, " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, kh, kw, strides, pads, dilations, act, residual order (int32), c, k (int64), act params}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    put_window(w, s_);
    w.i32(s_.dil_h).i32(s_.dil_w);
    w.i32(static_cast<int32_t>(s_.act)).i32(s_.residual_after_activation);
    w.i64(s_.c).i64(s_.k);
    put_act_params(w, s_.act_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p) {
    ParamReader r(p, kParamsVersion);
    Spec s;
    get_window(r, &s);
    s.dil_h = r.i32();
    s.dil_w = r.i32();
    const int32_t act = r.i32();
    s.residual_after_activation = r.i32() != 0;
    s.c = r.i64();
    s.k = r.i64();
    s.act_params = get_act_params(r);
    if (!r.done() || !act_from_int(act, &s.act)) return nullptr;
    s.n = s.h = s.w = s.oh = s.ow = 1;
    if (!small_conv_supported(s)) return nullptr;
    return std::make_unique<SmallChannelConvTactic>(s);
  }

 private:
  static constexpr uint8_t kParamsVersion = 1;

  static bool same(const Spec& a, const Spec& b) {
    return same_window_and_epilogue(a, b) && a.c == b.c && a.k == b.k && a.dil_h == b.dil_h && a.dil_w == b.dil_w;
  }

  Spec s_;
};

}  // namespace

TacticFamily small_channel_conv_family() {
  TacticFamily f;
  f.name = "conv.small_c";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Spec s;
    if (check(node, inputs, &s).ok()) out.push_back(std::make_unique<SmallChannelConvTactic>(s));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kName) return nullptr;
    return SmallChannelConvTactic::deserialize(params);
  };
  return f;
}

}  // namespace ingot::backend::cuda
