// Copyright ingot authors. Apache-2.0.
//
// The grouped convolution tactics ("cuda.conv.grouped": 8 output channels per thread, offered for
// group widths over 4; "cuda.conv.grouped.m4": 4; grouped_conv_kernels.cu): channels-last
// ingot::FusedConv with group >= 2 and 2-64 channels in and out of each group (W [C, kh, kw, C /
// group], as in RegNet and ResNeXt), 2-D, fp32/fp16/bf16, kernels up to 7x7, any stride, symmetric
// padding, an optional bias and residual, and every FusedConv activation in the same kernel. The
// builder times both beside cuDNN's (this family comes before cuDNN's and offers at most two).
//
// Refused, with the reason: channels-first nodes (a plain Conv, or FusedConv channels_last = 0: the
// layout pass makes convs channels-last where a channels-last tactic is faster), a transposed conv,
// auto_pad or asymmetric pads, dilation other than 1, depthwise layers (one channel per group:
// cuda.conv.depthwise's) and group 1, group widths past 64, unequal input and output group widths
// (C_out != C_in), kernels over 7x7, open channel or kernel dims, mixed types.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/conv/grouped_conv_kernels.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"

namespace ingot::backend::cuda {

TacticFamily grouped_conv_family();

namespace {

constexpr const char* kName = "cuda.conv.grouped";           // 8 output channels per thread
constexpr const char* kNarrowName = "cuda.conv.grouped.m4";  // 4

// The layer's numbers but its activation dims (those of the descriptor with n, h, w, oh, ow unset).
using Spec = GroupedConvDesc;

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, Spec* out) {
  auto refuse = [&](const std::string& why) { return unsupported(n.describe(), ": ", kName, ": ", why); };
  const bool fused = n.domain() == "ingot" && n.op_type() == "FusedConv";
  if (!fused && !(n.domain().empty() && n.op_type() == "Conv")) return refuse("not a Conv or FusedConv");
  const ir::Attributes& at = n.attrs();
  if (!fused || at.get_int("channels_last", 0) == 0) return refuse("channels-first (the kernel reads NHWC and KRSC)");
  if (at.get_int("transposed", 0) != 0) return refuse("transposed");
  ConvWindow win;
  if (!conv_window_of(at, &win)) return refuse("auto_pad, asymmetric pads, or strides or dilations out of range");
  if (win.dil_h != 1 || win.dil_w != 1) return refuse("dilation other than 1");
  Spec s;
  s.pad_h = win.pad_h;
  s.pad_w = win.pad_w;
  s.stride_h = win.stride_h;
  s.stride_w = win.stride_w;
  s.group = at.get_int("group", 1);
  if (s.group < 2) return refuse("group " + std::to_string(s.group) + " (not grouped)");
  if (!conv_epilogue_of(n, &s.act, &s.act_params, &s.residual_after_activation)) return refuse("activation");
  if (in.size() < 2 || !n.input(0) || !n.input(1) || !n.output(0)) return refuse("needs X and W");
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;  // [C_out, kh, kw, C_in / group]
  if (!x.rank_known() || !w.rank_known() || x.rank() != 4 || w.rank() != 4) return refuse("not 2-D");
  if (!x[3].is_known() || !w[0].is_known() || !w[1].is_known() || !w[2].is_known() || !w[3].is_known())
    return refuse("open channel or kernel dims");
  s.c = x[3].value();
  if (s.c % s.group != 0 || w[3].value() * s.group != s.c)
    return refuse("W " + w.to_string() + " does not match X " + x.to_string() + " in " + std::to_string(s.group) +
                  " groups");
  const int64_t g = s.c / s.group;
  if (g == 1) return refuse("depthwise (one channel per group: cuda.conv.depthwise's)");
  if (w[0].value() != s.c)
    return refuse("unequal group widths in and out (W " + w.to_string() + " over " + std::to_string(s.c) +
                  " input channels)");
  if (g > kGroupedConvMaxWidth)
    return refuse("group width " + std::to_string(g) + " over " + std::to_string(kGroupedConvMaxWidth));
  if (w[1].value() > kGroupedConvMaxKernel || w[2].value() > kGroupedConvMaxKernel)
    return refuse("kernel " + w.to_string() + " larger than 7x7");
  s.kh = static_cast<int>(w[1].value());
  s.kw = static_cast<int>(w[2].value());
  // Dims the kernel's limits do not depend on: 1 here, the real ones at enqueue.
  s.n = s.h = s.w = s.oh = s.ow = 1;
  if (!grouped_conv_supported(s)) return refuse("outside the kernel's limits");
  const std::string bad = conv_operands_problem(n, in, s.c);
  if (!bad.empty()) return refuse(bad);
  if (out) *out = s;
  return Status::Ok();
}

// The tactic carries its node's Spec (parsed at build time, kept in the engine as its params), so
// an enqueue parses nothing and allocates nothing.
class GroupedConvTactic final : public Tactic {
 public:
  explicit GroupedConvTactic(const Spec& s) : s_(s) {}
  std::string name() const override { return s_.outputs_per_thread == kGroupedConvNarrowOutputs ? kNarrowName : kName; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    Spec s;
    if (!check(node, inputs, &s).ok()) return false;
    s.outputs_per_thread = s_.outputs_per_thread;
    return same(s, s_);
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    ConvTensors c;
    INGOT_RETURN_IF_ERROR(conv_tensors(io, kName, &c));
    const Tensor& x = *c.x;
    Tensor& y = *c.y;
    Spec d = s_;
    d.n = x.dim(0);
    d.h = x.dim(1);
    d.w = x.dim(2);
    d.oh = y.dim(1);
    d.ow = y.dim(2);
    const int64_t want_oh = (d.h + 2 * d.pad_h - d.kh) / d.stride_h + 1;
    const int64_t want_ow = (d.w + 2 * d.pad_w - d.kw) / d.stride_w + 1;
    const Tensor* b = c.b;
    const Tensor* r = c.r;
    if (x.dim(3) != d.c || y.dim(0) != d.n || y.dim(3) != d.c || d.oh != want_oh || d.ow != want_ow ||
        c.w->numel() != d.c * d.kh * d.kw * (d.c / d.group) || (b && b->numel() != d.c) ||
        (r && r->shape() != y.shape()))
      return internal_error(node.describe(), ": ", name(), " shapes do not match the plan: x ",
                            shape_to_string(x.shape()), ", y ", shape_to_string(y.shape()));
    if (!grouped_conv_supported(d))
      return unsupported(node.describe(), ": ", name(), ": x ", shape_to_string(x.shape()),
                         " is past the kernel's 32-bit index range");
    const cudaError_t e =
        launch_grouped_conv(c.t, x.raw(), c.w->raw(), b ? b->raw() : nullptr, r ? r->raw() : nullptr, y.mutable_raw(),
                            d, current_device_info().sm_count, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, kh, kw, strides, pads, act, residual order, M (int32), c, group (int64), act params}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    put_window(w, s_);
    w.i32(static_cast<int32_t>(s_.act)).i32(s_.residual_after_activation);
    w.i32(s_.outputs_per_thread).i64(s_.c).i64(s_.group);
    put_act_params(w, s_.act_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p) {
    ParamReader r(p, kParamsVersion);
    Spec s;
    get_window(r, &s);
    const int32_t act = r.i32();
    s.residual_after_activation = r.i32() != 0;
    s.outputs_per_thread = r.i32();
    s.c = r.i64();
    s.group = r.i64();
    s.act_params = get_act_params(r);
    if (!r.done() || !act_from_int(act, &s.act)) return nullptr;
    s.n = s.h = s.w = s.oh = s.ow = 1;
    if (!grouped_conv_supported(s)) return nullptr;
    return std::make_unique<GroupedConvTactic>(s);
  }

 private:
  static constexpr uint8_t kParamsVersion = 1;

  static bool same(const Spec& a, const Spec& b) {
    return same_window_and_epilogue(a, b) && a.c == b.c && a.group == b.group &&
           a.outputs_per_thread == b.outputs_per_thread;
  }

  Spec s_;
};

}  // namespace

TacticFamily grouped_conv_family() {
  TacticFamily f;
  f.name = "conv.grouped";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Spec s;
    if (!check(node, inputs, &s).ok()) return out;
    // 8 channels per thread reads each input value once for 8 multiply-adds, but at widths of 4 or
    // less it would compute padding half the time or more: only 4 there.
    if (s.c / s.group > kGroupedConvNarrowOutputs) {
      s.outputs_per_thread = kGroupedConvWideOutputs;
      out.push_back(std::make_unique<GroupedConvTactic>(s));
    }
    s.outputs_per_thread = kGroupedConvNarrowOutputs;
    out.push_back(std::make_unique<GroupedConvTactic>(s));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kName && name != kNarrowName) return nullptr;
    std::unique_ptr<Tactic> t = GroupedConvTactic::deserialize(params);
    return t && t->name() == name ? std::move(t) : nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
