// Copyright ingot authors. Apache-2.0.
//
// "cuda.conv.pixel": a 1x1 Conv or ingot::FusedConv (channels-first or channels-last) on a
// one-pixel input, X [N, C, 1, 1] or [N, 1, 1, C]: a GEMV of N rows with the bias, residual and
// any FusedConv activation in the same kernel (pixel_conv_kernels.cu). The squeeze-excite FCs of
// EfficientNet, MobileNetV3 and RegNetY; the builder times it beside cuDNN's. Either layout has
// the same bytes (X [N, C], W [K, C], Y [N, K]), so the tactic keeps neither.
//
// Refused: grouped or transposed convs, kernels other than 1x1, inputs of more than one pixel or
// open spatial dims, pads or auto_pad, open C/K dims, mixed types.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/conv/pixel_conv_kernels.h"
#include "backend/cuda/core/cuda_tactics.h"

namespace ingot::backend::cuda {

TacticFamily pixel_conv_family();

namespace {

constexpr const char* kName = "cuda.conv.pixel";

// The layer's numbers but N (1 here, X's at enqueue).
using Spec = PixelConvDesc;

// Whether `d` is known and 1.
bool is_one(const ir::Dim& d) { return d.is_known() && d.value() == 1; }

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, Spec* out) {
  auto refuse = [&](const std::string& why) { return unsupported(n.describe(), ": ", kName, ": ", why); };
  const bool fused = n.domain() == "ingot" && n.op_type() == "FusedConv";
  if (!fused && !(n.domain().empty() && n.op_type() == "Conv")) return refuse("not a Conv or FusedConv");
  const ir::Attributes& at = n.attrs();
  if (fused && at.get_int("transposed", 0) != 0) return refuse("transposed");
  if (at.get_int("group", 1) != 1) return refuse("grouped");
  ConvWindow win;
  if (!conv_window_of(at, &win)) return refuse("auto_pad, asymmetric pads, strides or dilations");
  // With no padding a 1x1 kernel reads one pixel at any stride or dilation; pads would add zeros
  // around it (more output pixels).
  if (win.pad_h != 0 || win.pad_w != 0) return refuse("padded");
  const std::vector<int64_t> kernel_shape = at.get_ints("kernel_shape");
  if (!kernel_shape.empty() && kernel_shape != std::vector<int64_t>{1, 1}) return refuse("kernel_shape is not 1x1");
  Spec s;
  if (fused) {
    if (!conv_epilogue_of(n, &s.act, &s.act_params, &s.residual_after_activation)) return refuse("activation");
  } else if (n.inputs().size() > 3) {
    return refuse("Conv with more than 3 inputs");
  }
  if (in.size() < 2 || !n.input(0) || !n.input(1) || !n.output(0)) return refuse("needs X and W");
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;
  const ir::Shape& y = n.output(0)->shape();
  if (!x.rank_known() || !w.rank_known() || !y.rank_known() || x.rank() != 4 || w.rank() != 4 || y.rank() != 4)
    return refuse("not 2-D");
  // Channels-last: [N, 1, 1, C] and W [K, 1, 1, C]; channels-first: [N, C, 1, 1] and W [K, C, 1, 1].
  const bool channels_last = fused && at.get_int("channels_last", 0) != 0;
  const size_t ca = channels_last ? 3 : 1, ha = channels_last ? 1 : 2, wa = channels_last ? 2 : 3;
  if (!is_one(x[ha]) || !is_one(x[wa])) return refuse("X " + x.to_string() + " is not one pixel");
  if (!is_one(w[ha]) || !is_one(w[wa])) return refuse("W " + w.to_string() + " is not a 1x1 kernel");
  if (!is_one(y[ha]) || !is_one(y[wa])) return refuse("Y " + y.to_string() + " is not one pixel");
  if (!x[ca].is_known() || !w[0].is_known() || !w[ca].is_known()) return refuse("open channel dims");
  if (w[ca].value() != x[ca].value()) return refuse("W " + w.to_string() + " does not match X " + x.to_string());
  s.c = x[ca].value();
  s.k = w[0].value();
  s.n = 1;
  if (!pixel_conv_supported(s)) return refuse("C or K outside the kernel's limits");
  const std::string bad = conv_operands_problem(n, in, s.k);
  if (!bad.empty()) return refuse(bad);
  if (out) *out = s;
  return Status::Ok();
}

class PixelConvTactic final : public Tactic {
 public:
  explicit PixelConvTactic(const Spec& s) : s_(s) {}
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
    const Tensor* b = c.b;
    const Tensor* r = c.r;
    PixelConvDesc d = s_;
    d.n = x.dim(0);
    // Sizes, not dims: the layout is the node's, and either has the same bytes.
    if (x.numel() != d.n * d.c || y.dim(0) != d.n || y.numel() != d.n * d.k || c.w->numel() != d.k * d.c ||
        (b && b->numel() != d.k) || (r && r->shape() != y.shape()))
      return internal_error(node.describe(), ": ", kName, " shapes do not match the plan: x ",
                            shape_to_string(x.shape()), ", w ", shape_to_string(c.w->shape()), ", y ",
                            shape_to_string(y.shape()));
    if (!pixel_conv_supported(d))
      return unsupported(node.describe(), ": ", kName, ": x ", shape_to_string(x.shape()),
                         " is past the kernel's 32-bit index range");
    const cudaError_t e = launch_pixel_conv(c.t, x.raw(), c.w->raw(), b ? b->raw() : nullptr, r ? r->raw() : nullptr,
                                            y.mutable_raw(), d, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess)
      return internal_error(node.describe(), ": ", kName, " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, act, residual order (int32), c, k (int64), act params}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    w.i32(static_cast<int32_t>(s_.act)).i32(s_.residual_after_activation);
    w.i64(s_.c).i64(s_.k);
    put_act_params(w, s_.act_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p) {
    ParamReader r(p, kParamsVersion);
    Spec s;
    const int32_t act = r.i32();
    s.residual_after_activation = r.i32() != 0;
    s.c = r.i64();
    s.k = r.i64();
    s.act_params = get_act_params(r);
    if (!r.done() || !act_from_int(act, &s.act)) return nullptr;
    s.n = 1;
    if (!pixel_conv_supported(s)) return nullptr;
    return std::make_unique<PixelConvTactic>(s);
  }

 private:
  static constexpr uint8_t kParamsVersion = 1;

  static bool same(const Spec& a, const Spec& b) {
    return a.c == b.c && a.k == b.k && a.act == b.act && a.residual_after_activation == b.residual_after_activation &&
           a.act_params.alpha == b.act_params.alpha && a.act_params.beta == b.act_params.beta &&
           a.act_params.lo == b.act_params.lo && a.act_params.hi == b.act_params.hi;
  }

  Spec s_;
};

}  // namespace

TacticFamily pixel_conv_family() {
  TacticFamily f;
  f.name = "conv.pixel";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Spec s;
    if (check(node, inputs, &s).ok()) out.push_back(std::make_unique<PixelConvTactic>(s));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kName) return nullptr;
    return PixelConvTactic::deserialize(params);
  };
  return f;
}

}  // namespace ingot::backend::cuda
