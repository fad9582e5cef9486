// Copyright ingot authors. Apache-2.0.
//
// The depthwise convolution tactics ("cuda.conv.depthwise" and, for channels-last 3x3/5x5/7x7
// with equal strides 1 or 2 and no dilation, "cuda.conv.depthwise.tiled" and
// "cuda.conv.depthwise.strip"; depthwise_conv_kernels.cu): Conv or
// ingot::FusedConv with group == channels and one input channel per group (W [C, 1, kh, kw], or
// [C, kh, kw, 1] channels-last), 2-D, fp32/fp16/bf16, kernels up to 7x7, any stride, dilation and
// symmetric padding, an optional bias and residual, and every FusedConv activation in the same
// kernel, so a depthwise layer never needs the builder's split.
//
// Refused: a transposed conv, asymmetric pads or auto_pad, a channel multiplier (C_out != C_in),
// mixed types, weights larger than kDepthwiseMaxSmemBytes staged (channels-last), shapes with
// open channel or kernel dims.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/conv/depthwise_conv_kernels.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"

namespace ingot::backend::cuda {

TacticFamily depthwise_conv_family();

namespace {

constexpr const char* kName = "cuda.conv.depthwise";
// The strip variant (DepthwiseConvDesc::strip), offered beside it for the builder to time. One
// only: the autotuner times a node's first 4 candidates (optimization level 3) and cuDNN's
// channels-last convs after this family's must stay among them (session 15: three strip variants
// crowded them out, and ConvNeXt's layout pass then chose channels-first cuDNN, 44 Transposes).
constexpr const char* kStripName = "cuda.conv.depthwise.strip";
// The tiled variant (DepthwiseConvDesc::tiled): with it this family offers three, and cuDNN's first
// channels-last plan stays the fourth (CudnnStaysInsideTheAutotunersWidth).
constexpr const char* kTiledName = "cuda.conv.depthwise.tiled";
constexpr int kMaxKernel = 7;


// Everything the kernel needs but the dims of X: from the node's attributes and W's shape.
struct Spec {
  bool channels_last = false;
  int kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t group = 1;
  UnaryOp act = UnaryOp::kIdentity;
  UnaryParams act_params;
  bool residual_after_activation = false;
  int strip = 1;  // DepthwiseConvDesc::strip
  bool tiled = false;  // DepthwiseConvDesc::tiled
};

bool small_int(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

bool parse_spec(const ir::Node& n, Spec* s) {
  const bool fused = n.domain() == "ingot" && n.op_type() == "FusedConv";
  if (!fused && !(n.domain().empty() && n.op_type() == "Conv")) return false;
  const ir::Attributes& at = n.attrs();
  if (fused && at.get_int("transposed", 0) != 0) return false;
  s->channels_last = fused && at.get_int("channels_last", 0) != 0;
  ConvWindow w;
  if (!conv_window_of(at, &w)) return false;
  s->pad_h = w.pad_h;
  s->pad_w = w.pad_w;
  s->stride_h = w.stride_h;
  s->stride_w = w.stride_w;
  s->dil_h = w.dil_h;
  s->dil_w = w.dil_w;
  s->group = at.get_int("group", 1);
  if (fused) {
    if (!conv_epilogue_of(n, &s->act, &s->act_params, &s->residual_after_activation)) return false;
  } else if (n.inputs().size() > 3) {
    return false;
  }
  return true;
}

// X's channel dim and W's kernel dims in the node's layout.
size_t channel_axis(const Spec& s) { return s.channels_last ? 3 : 1; }

// The desc of a node of this spec but its dims.
DepthwiseConvDesc window_desc(const Spec& s) {
  DepthwiseConvDesc d;
  d.channels_last = s.channels_last;
  d.kh = s.kh;
  d.kw = s.kw;
  d.stride_h = s.stride_h;
  d.stride_w = s.stride_w;
  d.dil_h = s.dil_h;
  d.dil_w = s.dil_w;
  d.strip = s.strip;
  d.tiled = s.tiled;
  return d;
}

// Whether the strip / tiled kernel runs a node of this spec (its dims do not matter).
bool strip_supported(Spec s) {
  s.strip = kDepthwiseStrip;
  s.tiled = false;
  return depthwise_strip_supported(window_desc(s));
}
bool tiled_supported(Spec s) {
  s.strip = 1;
  s.tiled = true;
  return depthwise_tiled_supported(window_desc(s));
}

// Whether the spec's variant runs it.
bool variant_supported(const Spec& s) {
  if (s.tiled) return s.strip == 1 && tiled_supported(s);
  return s.strip == 1 || (s.strip == kDepthwiseStrip && strip_supported(s));
}

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, Spec* out) {
  Spec s;
  if (!parse_spec(n, &s)) return unsupported(n.describe(), ": not a depthwise convolution this kernel runs");
  if (in.size() < 2 || !n.input(0) || !n.input(1) || !n.output(0)) return unsupported(n.describe(), ": needs X and W");
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;
  if (!x.rank_known() || !w.rank_known() || x.rank() != 4 || w.rank() != 4)
    return unsupported(n.describe(), ": not 2-D");
  const ir::Dim& c = x[channel_axis(s)];
  if (!c.is_known() || c.value() != s.group || s.group < 1) return unsupported(n.describe(), ": group is not the channel count");
  // W: [C, 1, kh, kw] channels-first, [C, kh, kw, 1] channels-last.
  const ir::Dim& wc = w[0];
  const ir::Dim& wi = s.channels_last ? w[3] : w[1];
  const ir::Dim& kh = s.channels_last ? w[1] : w[2];
  const ir::Dim& kw = s.channels_last ? w[2] : w[3];
  if (!wc.is_known() || wc.value() != c.value() || !wi.is_known() || wi.value() != 1)
    return unsupported(n.describe(), ": W ", w.to_string(), " is not one filter per channel");
  if (!kh.is_known() || !kw.is_known() || !small_int(kh.value(), 1, kMaxKernel) || !small_int(kw.value(), 1, kMaxKernel))
    return unsupported(n.describe(), ": kernel ", w.to_string(), " larger than ", kMaxKernel, "x", kMaxKernel);
  s.kh = static_cast<int>(kh.value());
  s.kw = static_cast<int>(kw.value());
  const std::string bad = conv_operands_problem(n, in, c.value());
  if (!bad.empty()) return unsupported(n.describe(), ": ", bad);
  FloatType t;
  if (!to_float_type(in[0].dtype, &t)) return unsupported(n.describe(), ": dtype");
  DepthwiseConvDesc d;
  d.c = c.value();
  d.kh = s.kh;
  d.kw = s.kw;
  if (s.channels_last && depthwise_conv_smem_bytes(t, d) > kDepthwiseMaxSmemBytes)
    return unsupported(n.describe(), ": ", d.c, " channels of ", s.kh, "x", s.kw, " weights do not fit shared memory");
  if (out) *out = s;
  return Status::Ok();
}

// The tactic carries its node's Spec (parsed at build time, kept in the engine as its params), so
// an enqueue parses nothing and allocates nothing.
class DepthwiseConvTactic final : public Tactic {
 public:
  explicit DepthwiseConvTactic(const Spec& s) : s_(s) {}
  std::string name() const override { return s_.tiled ? kTiledName : s_.strip > 1 ? kStripName : kName; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    Spec s;
    if (!check(node, inputs, &s).ok()) return false;
    s.strip = s_.strip;
    s.tiled = s_.tiled;
    return same(s, s_) && variant_supported(s);
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    ConvTensors c;
    INGOT_RETURN_IF_ERROR(conv_tensors(io, kName, &c));
    const Tensor& x = *c.x;
    Tensor& y = *c.y;
    const FloatType t = c.t;
    const Spec& s = s_;
    DepthwiseConvDesc d;
    d.channels_last = s.channels_last;
    d.n = x.dim(0);
    d.c = x.dim(channel_axis(s));
    d.h = s.channels_last ? x.dim(1) : x.dim(2);
    d.w = s.channels_last ? x.dim(2) : x.dim(3);
    d.oh = s.channels_last ? y.dim(1) : y.dim(2);
    d.ow = s.channels_last ? y.dim(2) : y.dim(3);
    d.kh = s.kh;
    d.kw = s.kw;
    d.stride_h = s.stride_h;
    d.stride_w = s.stride_w;
    d.pad_h = s.pad_h;
    d.pad_w = s.pad_w;
    d.dil_h = s.dil_h;
    d.dil_w = s.dil_w;
    d.act = s.act;
    d.act_params = s.act_params;
    d.residual_after_activation = s.residual_after_activation;
    d.strip = s.strip;
    d.tiled = s.tiled;
    const int64_t want_oh = (d.h + 2 * d.pad_h - static_cast<int64_t>(d.dil_h) * (d.kh - 1) - 1) / d.stride_h + 1;
    const int64_t want_ow = (d.w + 2 * d.pad_w - static_cast<int64_t>(d.dil_w) * (d.kw - 1) - 1) / d.stride_w + 1;
    const Tensor* b = c.b;
    const Tensor* r = c.r;
    if (d.c != s.group || y.dim(0) != d.n || y.dim(channel_axis(s)) != d.c || d.oh != want_oh || d.ow != want_ow ||
        c.w->numel() != d.c * d.kh * d.kw || (b && b->numel() != d.c) || (r && r->shape() != y.shape()))
      return internal_error(node.describe(), ": ", kName, " shapes do not match the plan: x ", shape_to_string(x.shape()),
                            ", y ", shape_to_string(y.shape()));
    const cudaError_t e = launch_depthwise_conv(t, x.raw(), c.w->raw(), b ? b->raw() : nullptr,
                                                r ? r->raw() : nullptr, y.mutable_raw(), d,
                                                current_device_info().sm_count, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess) return internal_error(node.describe(), ": ", kName, " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, channels_last, kh, kw, strides, pads, dilations, act, residual order, strip, tiled
  // (int32), group (int64), act params}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    w.i32(s_.channels_last);
    put_window(w, s_);
    w.i32(s_.dil_h).i32(s_.dil_w);
    w.i32(static_cast<int32_t>(s_.act)).i32(s_.residual_after_activation).i32(s_.strip).i32(s_.tiled);
    w.i64(s_.group);
    put_act_params(w, s_.act_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p) {
    ParamReader r(p, kParamsVersion);
    Spec s;
    s.channels_last = r.i32() != 0;
    get_window(r, &s);
    s.dil_h = r.i32();
    s.dil_w = r.i32();
    const int32_t act = r.i32();
    s.residual_after_activation = r.i32() != 0;
    s.strip = r.i32();
    const int32_t tiled = r.i32();
    s.tiled = tiled == 1;
    s.group = r.i64();
    s.act_params = get_act_params(r);
    if (!r.done() || !act_from_int(act, &s.act)) return nullptr;
    if (!small_int(s.kh, 1, kMaxKernel) || !small_int(s.kw, 1, kMaxKernel) || s.stride_h < 1 || s.stride_w < 1 ||
        s.dil_h < 1 || s.dil_w < 1 || s.pad_h < 0 || s.pad_w < 0 || s.group < 1 || (tiled != 0 && tiled != 1) ||
        !variant_supported(s))
      return nullptr;
    return std::make_unique<DepthwiseConvTactic>(s);
  }

 private:
  static constexpr uint8_t kParamsVersion = 3;  // 2: the strip; 3: tiled

  static bool same(const Spec& a, const Spec& b) {
    return same_window_and_epilogue(a, b) && a.channels_last == b.channels_last && a.dil_h == b.dil_h &&
           a.dil_w == b.dil_w && a.group == b.group && a.strip == b.strip && a.tiled == b.tiled;
  }

  Spec s_;
};

}  // namespace

TacticFamily depthwise_conv_family() {
  TacticFamily f;
  f.name = "conv.depthwise";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Spec s;
    if (!check(node, inputs, &s).ok()) return out;
    out.push_back(std::make_unique<DepthwiseConvTactic>(s));
    if (tiled_supported(s)) {
      Spec t = s;
      t.tiled = true;
      out.push_back(std::make_unique<DepthwiseConvTactic>(t));
    }
    if (strip_supported(s)) {
      s.strip = kDepthwiseStrip;
      out.push_back(std::make_unique<DepthwiseConvTactic>(s));
    }
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kName && name != kStripName && name != kTiledName) return nullptr;
    std::unique_ptr<Tactic> t = DepthwiseConvTactic::deserialize(params);
    return t && t->name() == name ? std::move(t) : nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
