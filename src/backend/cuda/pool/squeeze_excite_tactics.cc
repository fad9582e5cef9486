// Copyright ingot authors. Apache-2.0.
//
// "cuda.squeeze_excite": ingot::SqueezeExcite (global average pool, FC1 + act, FC2 + gate act,
// x * gate) in three kernels (squeeze_excite_kernels.cu), fp32/fp16/bf16, channels-first or
// channels-last, biases optional, any FusedConv activation for either FC.
//
// Refused: open channel dims (C, Cr), weights or biases whose shapes do not match them, mixed
// types, unknown activations, C or Cr past the kernels' shared-memory limits. N, H and W may be
// open: they are read at enqueue.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/conv_attrs.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pool/squeeze_excite_kernels.h"

namespace ingot::backend::cuda {

TacticFamily squeeze_excite_family();

namespace {

constexpr const char* kName = "cuda.squeeze_excite";

/// The node's numbers but its activation dims (n and hw unset).
using Spec = SqueezeExciteDesc;

/// Whether `s` is a rank-4 shape with known dims, dim 0 `rows` and dims 1..3 multiplying to `cols`.
bool is_matrix(const ir::Shape& s, int64_t rows, int64_t cols) {
  if (!s.rank_known() || s.rank() != 4) return false;
  for (size_t i = 0; i < 4; ++i)
    if (!s[i].is_known()) return false;
  return s[0].value() == rows && s[1].value() * s[2].value() * s[3].value() == cols;
}

bool is_vector(const ir::Shape& s, int64_t len) {
  return s.rank_known() && s.rank() == 1 && s[0].is_known() && s[0].value() == len;
}

Status check(const ir::Node& n, const std::vector<ir::TensorType>& in, Spec* out) {
  auto refuse = [&](const std::string& why) { return unsupported(n.describe(), ": ", kName, ": ", why); };
  if (!(n.domain() == "ingot" && n.op_type() == "SqueezeExcite")) return refuse("not an ingot::SqueezeExcite");
  if (in.size() < 4 || !n.input(0) || !n.input(1) || !n.input(3) || !n.output(0))
    return refuse("needs X, W1, W2 and Y");
  const bool b1 = in.size() > 2 && n.input(2);
  const bool b2 = in.size() > 4 && n.input(4);
  FloatType t;
  if (!to_float_type(in[0].dtype, &t) || n.output(0)->dtype() != in[0].dtype) return refuse("dtype");
  for (size_t i = 1; i < in.size() && i < 5; ++i)
    if (n.input(i) && in[i].dtype != in[0].dtype) return refuse("mixed dtypes");
  Spec s;
  s.channels_last = n.attrs().get_int("channels_last", 0) != 0;
  if (!conv_activation_of(n, &s.act1, &s.act1_params)) return refuse("activation");
  if (!conv_activation_of(n, &s.act2, &s.act2_params, "gate_activation", "gate_activation_params"))
    return refuse("gate_activation");
  const ir::Shape& x = in[0].shape;
  if (!x.rank_known() || x.rank() != 4) return refuse("X " + x.to_string() + " is not 4-D");
  const ir::Dim& cd = x[s.channels_last ? 3 : 1];
  if (!cd.is_known()) return refuse("open channel dim in X " + x.to_string());
  s.c = cd.value();
  const ir::Shape& w1 = in[1].shape;
  if (!w1.rank_known() || w1.rank() != 4 || !w1[0].is_known()) return refuse("W1 " + w1.to_string());
  s.cr = w1[0].value();
  if (!is_matrix(w1, s.cr, s.c)) return refuse("W1 " + w1.to_string() + " does not match X " + x.to_string());
  if (!is_matrix(in[3].shape, s.c, s.cr))
    return refuse("W2 " + in[3].shape.to_string() + " does not match W1 " + w1.to_string());
  if (b1 && !is_vector(in[2].shape, s.cr)) return refuse("B1 " + in[2].shape.to_string());
  if (b2 && !is_vector(in[4].shape, s.c)) return refuse("B2 " + in[4].shape.to_string());
  // Dims the kernels' limits do not depend on: 1 here, the real ones at enqueue.
  s.n = s.hw = 1;
  if (!squeeze_excite_supported(s)) return refuse("C or Cr outside the kernels' limits");
  if (out) *out = s;
  return Status::Ok();
}

class SqueezeExciteTactic final : public Tactic {
 public:
  explicit SqueezeExciteTactic(const Spec& s) : s_(s) {}
  std::string name() const override { return kName; }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    Spec s;
    return check(node, inputs, &s).ok() && same(s, s_);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>& in) const override {
    if (in.empty() || in[0].size() != 4) return 0;
    SqueezeExciteDesc d = s_;
    d.n = in[0][0];
    d.hw = s_.channels_last ? in[0][1] * in[0][2] : in[0][2] * in[0][3];
    return squeeze_excite_workspace_bytes(d);
  }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    auto input = [&](size_t i) -> const Tensor* { return io.inputs.size() > i ? io.inputs[i] : nullptr; };
    const Tensor* x = input(0);
    const Tensor* w1 = input(1);
    const Tensor* b1 = input(2);
    const Tensor* w2 = input(3);
    const Tensor* b2 = input(4);
    if (!x || !w1 || !w2 || !io.outputs || io.outputs->empty())
      return internal_error(node.describe(), ": ", kName, " needs X, W1, W2 and an output");
    Tensor& y = (*io.outputs)[0];
    FloatType t;
    bool types_ok = to_float_type(x->dtype(), &t) && y.dtype() == x->dtype() && w1->dtype() == x->dtype() &&
                    w2->dtype() == x->dtype() && (!b1 || b1->dtype() == x->dtype()) &&
                    (!b2 || b2->dtype() == x->dtype());
    if (!types_ok || x->rank() != 4 || y.shape() != x->shape())
      return internal_error(node.describe(), ": ", kName, " got ", shape_to_string(x->shape()), " -> ",
                            shape_to_string(y.shape()));
    SqueezeExciteDesc d = s_;
    d.n = x->dim(0);
    d.hw = s_.channels_last ? x->dim(1) * x->dim(2) : x->dim(2) * x->dim(3);
    const int64_t c = x->dim(s_.channels_last ? 3 : 1);
    if (c != d.c || w1->numel() != d.cr * d.c || w2->numel() != d.c * d.cr || (b1 && b1->numel() != d.cr) ||
        (b2 && b2->numel() != d.c))
      return internal_error(node.describe(), ": ", kName, " shapes do not match the plan (C ", d.c, ", Cr ", d.cr,
                            "): x ", shape_to_string(x->shape()), ", w1 ", shape_to_string(w1->shape()), ", w2 ",
                            shape_to_string(w2->shape()));
    if (!squeeze_excite_supported(d))
      return unsupported(node.describe(), ": ", kName, ": x ", shape_to_string(x->shape()),
                         " is past the kernels' index range");
    if (d.n == 0 || d.hw == 0) return Status::Ok();
    const uint64_t ws = squeeze_excite_workspace_bytes(d);
    if (!io.workspace)
      return internal_error(node.describe(), ": ", kName, " needs ", ws, " bytes of workspace and got none");
    const cudaError_t e =
        launch_squeeze_excite(t, x->raw(), w1->raw(), b1 ? b1->raw() : nullptr, w2->raw(), b2 ? b2->raw() : nullptr,
                              y.mutable_raw(), d, io.workspace, ws, static_cast<cudaStream_t>(io.stream));
    if (e != cudaSuccess)
      return internal_error(node.describe(), ": ", kName, " launch failed: ", cudaGetErrorString(e));
    return Status::Ok();
  }

  // {version, channels_last, act1, act2 (int32), c, cr (int64), act1 params, act2 params (alpha,
  // beta, lo, hi: float)}.
  std::vector<uint8_t> serialize() const override {
    ParamWriter w(kParamsVersion);
    w.i32(s_.channels_last).i32(static_cast<int32_t>(s_.act1)).i32(static_cast<int32_t>(s_.act2));
    w.i64(s_.c).i64(s_.cr);
    put_act_params(w, s_.act1_params);
    put_act_params(w, s_.act2_params);
    return w.take();
  }

  /// The tactic serialize() describes; nullptr for other bytes (an engine of another version).
  static std::unique_ptr<Tactic> deserialize(const std::vector<uint8_t>& p) {
    ParamReader r(p, kParamsVersion);
    Spec s;
    const int32_t cl = r.i32();
    const int32_t act1 = r.i32();
    const int32_t act2 = r.i32();
    s.c = r.i64();
    s.cr = r.i64();
    s.act1_params = get_act_params(r);
    s.act2_params = get_act_params(r);
    if (!r.done() || (cl != 0 && cl != 1) || !act_from_int(act1, &s.act1) || !act_from_int(act2, &s.act2))
      return nullptr;
    s.channels_last = cl != 0;
    s.n = s.hw = 1;
    if (!squeeze_excite_supported(s)) return nullptr;
    return std::make_unique<SqueezeExciteTactic>(s);
  }

 private:
  static constexpr uint8_t kParamsVersion = 1;

  static bool same_params(const UnaryParams& a, const UnaryParams& b) {
    return a.alpha == b.alpha && a.beta == b.beta && a.lo == b.lo && a.hi == b.hi;
  }
  static bool same(const Spec& a, const Spec& b) {
    return a.channels_last == b.channels_last && a.c == b.c && a.cr == b.cr && a.act1 == b.act1 && a.act2 == b.act2 &&
           same_params(a.act1_params, b.act1_params) && same_params(a.act2_params, b.act2_params);
  }

  Spec s_;
};

}  // namespace

TacticFamily squeeze_excite_family() {
  TacticFamily f;
  f.name = "squeeze_excite";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Spec s;
    if (check(node, inputs, &s).ok()) out.push_back(std::make_unique<SqueezeExciteTactic>(s));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kName) return nullptr;
    return SqueezeExciteTactic::deserialize(params);
  };
  return f;
}

}  // namespace ingot::backend::cuda
