// Copyright ingot authors. Apache-2.0.
//
// Two tactics of one kernel (stem_pool_conv_kernels.cu), for its compiled forms (RGB input, stride-2
// conv with symmetric pads, a bias or none, any FusedConv activation, fp16 or bf16):
//   "cuda.conv.stem_pool": channels-last ingot::FusedConvPool, the conv followed by a 3x3 stride-2
//     max pool with symmetric pads (ceil_mode either way: the output's dims say which);
//     fuse_conv_pool forms the node only where this takes it and, timed, beats the two steps.
//   "cuda.conv.stem_mma": channels-last ingot::FusedConv without a residual (the mobile CNNs' 3x3
//     stems), timed beside the small-channel kernel and cuDNN.
//
// Refused: channels-first, other channels / kernels / strides / pools, dilations, groups, a residual,
// fp32.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/conv/stem_pool_conv_kernels.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/env_switch.h"

namespace ingot::backend::cuda {

TacticFamily stem_pool_conv_family();

namespace {

constexpr const char* kPoolName = "cuda.conv.stem_pool";
constexpr const char* kConvName = "cuda.conv.stem_mma";

// The pool's 2-D window from the node's pool_* attributes: false unless 2-D, symmetric pads,
// unit dilations.
bool pool_window_of(const ir::Attributes& at, StemPoolDesc* d) {
  const std::vector<int64_t> k = at.get_ints("pool_kernel_shape", {});
  const std::vector<int64_t> s = at.get_ints("pool_strides", {1, 1});
  const std::vector<int64_t> p = at.get_ints("pool_pads", {0, 0, 0, 0});
  const std::vector<int64_t> dil = at.get_ints("pool_dilations", {1, 1});
  if (k.size() != 2 || s.size() != 2 || p.size() != 4 || dil.size() != 2 || p[0] != p[2] || p[1] != p[3] ||
      dil[0] != 1 || dil[1] != 1)
    return false;
  for (int64_t v : {k[0], k[1], s[0], s[1], p[0], p[1]})
    if (v < 0 || v > 64) return false;
  d->pool_kh = static_cast<int>(k[0]);
  d->pool_kw = static_cast<int>(k[1]);
  d->pool_stride_h = static_cast<int>(s[0]);
  d->pool_stride_w = static_cast<int>(s[1]);
  d->pool_pad_h = static_cast<int>(p[0]);
  d->pool_pad_w = static_cast<int>(p[1]);
  return true;
}

// Whether `n` is a FusedConvPool (else a FusedConv) this family looks at.
bool is_pool_node(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "FusedConvPool"; }

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, StemPoolDesc* out) {
  const bool pool = is_pool_node(n);
  const char* tactic = pool ? kPoolName : kConvName;
  auto refuse = [&](const std::string& why) { return unsupported(n.describe(), ": ", tactic, ": ", why); };
  if (!pool && !(n.domain() == "ingot" && n.op_type() == "FusedConv")) return refuse("not a FusedConv(Pool)");
  if (!pool && (n.attrs().get_int("transposed", 0) != 0 || (in.size() > 3 && n.input(3)))) return refuse("transposed or a residual");
  const ir::Attributes& at = n.attrs();
  if (at.get_int("channels_last", 0) == 0) return refuse("channels-first");
  if (at.get_int("group", 1) != 1) return refuse("grouped");
  ConvWindow win;
  if (!conv_window_of(at, &win) || win.dil_h != 1 || win.dil_w != 1) return refuse("auto_pad, asymmetric pads or dilations");
  StemPoolDesc d;
  d.pad_h = win.pad_h;
  d.pad_w = win.pad_w;
  d.stride_h = win.stride_h;
  d.stride_w = win.stride_w;
  if (pool && !pool_window_of(at, &d)) return refuse("the pool's window");
  if (!pool) d.pool_kh = d.pool_kw = d.pool_stride_h = d.pool_stride_w = 1;  // a 1x1 window: the conv as it is
  if (!conv_activation_of(n, &d.act, &d.act_params)) return refuse("activation");
  if (in.size() < 2 || !n.input(0) || !n.input(1) || !n.output(0) || (in.size() > 3 && n.input(3)))
    return refuse("needs X, W and at most B");
  if (in[0].dtype != DataType::kFloat16 && in[0].dtype != DataType::kBFloat16) return refuse("not fp16 / bf16");
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;  // [K, kh, kw, C]
  if (!x.rank_known() || !w.rank_known() || x.rank() != 4 || w.rank() != 4) return refuse("not 2-D");
  for (size_t i = 0; i < 4; ++i)
    if (!w[i].is_known()) return refuse("open W dims");
  if (!x[3].is_known() || w[3].value() != x[3].value()) return refuse("W " + w.to_string() + " vs X " + x.to_string());
  d.c = x[3].value();
  d.k = w[0].value();
  d.kh = static_cast<int>(std::min<int64_t>(w[1].value(), 1 << 20));
  d.kw = static_cast<int>(std::min<int64_t>(w[2].value(), 1 << 20));
  if (!stem_pool_supported(d)) return refuse("not a compiled form (stem_pool_conv_kernels.h)");
  const std::string bad = conv_operands_problem(n, in, d.k);
  if (!bad.empty()) return refuse(bad);
  if (out) *out = d;
  return Status::Ok();
}

// Whether the family offers candidates: unless INGOT_STEM_MMA=0 (its GPU tests, CudaStemPoolConvTest.*,
// passed on an H100 on 2026-12-08; the switch measures the cuDNN conv + pool against it on the same
// binaries). Without it fuse_conv_pool, which asks for a tactic, forms no FusedConvPool. Read at each
// call; engines that chose it load without it (create() knows the names).
bool offered() { return !env_is("INGOT_STEM_MMA", "0"); }

bool same(const StemPoolDesc& a, const StemPoolDesc& b) {
  return same_window_and_epilogue(a, b) && a.c == b.c && a.k == b.k && a.pool_kh == b.pool_kh &&
         a.pool_kw == b.pool_kw && a.pool_stride_h == b.pool_stride_h && a.pool_stride_w == b.pool_stride_w &&
         a.pool_pad_h == b.pool_pad_h && a.pool_pad_w == b.pool_pad_w;
}

// A pooled size's rule: floor, or ceil where the last window starts inside the padded input.
bool pooled_dim_ok(int64_t in, int k, int s, int p, int64_t out) {
  const int64_t span = in + 2 * p - k;
  if (span < 0) return false;
  const int64_t floor_out = span / s + 1;
  int64_t ceil_out = (span + s - 1) / s + 1;
  if ((ceil_out - 1) * s >= in + p) --ceil_out;
  return out == floor_out || out == ceil_out;
}

class StemPoolConvTactic final : public Tactic {
 public:
  StemPoolConvTactic(const StemPoolDesc& d, bool pool) : d_(d), pool_(pool) {}
  std::string name() const override { return pool_ ? kPoolName : kConvName; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    StemPoolDesc d;
    return is_pool_node(node) == pool_ && check(node, inputs, &d).ok() && same(d, d_);
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    const std::string tactic = name();
    ConvTensors c;
    INGOT_RETURN_IF_ERROR(conv_tensors(io, tactic.c_str(), &c));
    const Tensor& x = *c.x;
    Tensor& y = *c.y;
    StemPoolDesc d = d_;
    d.n = x.dim(0);
    d.h = x.dim(1);
    d.w = x.dim(2);
    d.oh = (d.h + 2 * d.pad_h - d.kh) / d.stride_h + 1;
    d.ow = (d.w + 2 * d.pad_w - d.kw) / d.stride_w + 1;
    d.ph = y.dim(1);
    d.pw = y.dim(2);  // a 1x1 pool of stride 1 keeps the conv's dims
    const Tensor* b = c.b;
    if (x.dim(3) != d.c || y.dim(0) != d.n || y.dim(3) != d.k || d.h + 2 * d.pad_h < d.kh ||
        d.w + 2 * d.pad_w < d.kw || !pooled_dim_ok(d.oh, d.pool_kh, d.pool_stride_h, d.pool_pad_h, d.ph) ||
        !pooled_dim_ok(d.ow, d.pool_kw, d.pool_stride_w, d.pool_pad_w, d.pw) ||
        c.w->numel() != d.k * d.kh * d.kw * d.c || (b && b->numel() != d.k) || c.r)
      return internal_error(node.describe(), ": ", tactic, " shapes do not match the plan: x ", shape_to_string(x.shape()),
                            ", y ", shape_to_string(y.shape()));
    if (!stem_pool_supported(d))
      return unsupported(node.describe(), ": ", tactic, ": x ", shape_to_string(x.shape()),
                         " is past the kernel's index range or grid");
    const cudaError_t e =
        launch_stem_pool_conv(c.t, x.raw(), c.w->raw(), b ? b->raw() : nullptr, y.mutable_raw(), d,
                              current_device_info().sm_count, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess) return internal_error(node.describe(), ": ", tactic, " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, kh, kw, strides, pads, pool kh, kw, strides, pads, act (int32), c, k (int64), act params}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    put_window(w, d_);
    w.i32(d_.pool_kh).i32(d_.pool_kw).i32(d_.pool_stride_h).i32(d_.pool_stride_w).i32(d_.pool_pad_h).i32(d_.pool_pad_w);
    w.i32(static_cast<int32_t>(d_.act));
    w.i64(d_.c).i64(d_.k);
    put_act_params(w, d_.act_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p, bool pool) {
    ParamReader r(p, kParamsVersion);
    StemPoolDesc d;
    get_window(r, &d);
    d.pool_kh = r.i32();
    d.pool_kw = r.i32();
    d.pool_stride_h = r.i32();
    d.pool_stride_w = r.i32();
    d.pool_pad_h = r.i32();
    d.pool_pad_w = r.i32();
    const int32_t act = r.i32();
    d.c = r.i64();
    d.k = r.i64();
    d.act_params = get_act_params(r);
    if (!r.done() || !act_from_int(act, &d.act) || !stem_pool_supported(d) || (d.pool_kh > 1) != pool) return nullptr;
    return std::make_unique<StemPoolConvTactic>(d, pool);
  }

 private:
  static constexpr uint8_t kParamsVersion = 1;
  StemPoolDesc d_;
  bool pool_;
};

}  // namespace

TacticFamily stem_pool_conv_family() {
  TacticFamily f;
  f.name = "conv.stem_pool";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    StemPoolDesc d;
    if (offered() && check(node, inputs, &d).ok()) out.push_back(std::make_unique<StemPoolConvTactic>(d, is_pool_node(node)));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kPoolName && name != kConvName) return nullptr;
    return StemPoolConvTactic::deserialize(params, name == kPoolName);
  };
  return f;
}

}  // namespace ingot::backend::cuda
