// Copyright ingot authors. Apache-2.0.
//
// The normalization tactic family of the cuda backend (host side): RMSNormalization (ai.onnx
// opset 23 and ingot's pre-23 form) and GroupNormalization (scale/bias per group, opset 18, or
// per channel, opset 21) and InstanceNormalization (GroupNormalization with one channel per group
// and per-channel scale/bias: the same kernel), f32/f16/bf16 with fp32 statistics.
// LayerNormalization is served by the elementwise family.
//
// Refused (the host fallback runs them): stash_type other than fp32, an RMSNormalization scale
// that does not cover exactly the normalized dims (a scale broadcast inside them), parameters
// of another type than X.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/norm/norm_kernels.h"

namespace ingot::backend::cuda {
namespace {

enum class Kind { kRms, kGroup, kInstance };

const char* kind_name(Kind k) { return k == Kind::kRms ? "rmsnorm" : k == Kind::kGroup ? "groupnorm" : "instancenorm"; }

bool classify(const ir::Node& n, Kind* kind) {
  const bool onnx = n.domain().empty() || n.domain() == "ai.onnx";
  if (n.op_type() == "RMSNormalization" && (onnx || n.domain() == "ingot")) {
    *kind = Kind::kRms;
    return true;
  }
  if (n.op_type() == "GroupNormalization" && onnx) {
    *kind = Kind::kGroup;
    return true;
  }
  if (n.op_type() == "InstanceNormalization" && onnx) {
    *kind = Kind::kInstance;
    return true;
  }
  return false;
}


bool has_input(const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && in[i].dtype != DataType::kUndefined;
}

/// The scale covers exactly X's dims from `axis` on: its dims, leading 1s dropped, equal X's
/// trailing dims, and X's normalized dims it does not reach are 1.
bool rms_scale_fits(const ir::Shape& x, int64_t axis, const ir::Shape& p) {
  if (!p.rank_known()) return false;
  const int64_t region = static_cast<int64_t>(x.rank()) - axis;
  int64_t pr = static_cast<int64_t>(p.rank());
  int64_t lead = 0;  // leading unit dims of the scale
  while (lead < pr && p[static_cast<size_t>(lead)].is_known() && p[static_cast<size_t>(lead)].value() == 1) ++lead;
  const int64_t used = pr - lead;
  if (used > region) return false;
  for (int64_t i = 1; i <= used; ++i)
    if (x[x.rank() - static_cast<size_t>(i)] != p[static_cast<size_t>(pr - i)]) return false;
  for (int64_t i = used + 1; i <= region; ++i) {
    const ir::Dim& d = x[x.rank() - static_cast<size_t>(i)];
    if (!d.is_known() || d.value() != 1) return false;
  }
  return true;
}

class NormTactic final : public Tactic {
 public:
  explicit NormTactic(Kind kind) : kind_(kind) {}

  std::string name() const override { return std::string("cuda.norm.") + kind_name(kind_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    Kind k;
    if (!classify(node, &k) || k != kind_ || node.outputs().size() != 1 || node.output(0) == nullptr) return false;
    FloatType t;
    if (!has_input(in, 0) || !to_float_type(in[0].dtype, &t) || node.output(0)->dtype() != in[0].dtype) return false;
    if (node.attrs().get_int("stash_type", 1) != 1) return false;
    const ir::Shape& xs = in[0].shape;
    if (!xs.rank_known()) return false;
    const int64_t rank = static_cast<int64_t>(xs.rank());
    if (kind_ == Kind::kRms) {
      if (in.size() != 2 || !has_input(in, 1) || in[1].dtype != in[0].dtype || rank == 0) return false;
      int64_t axis = node.attrs().get_int("axis", -1);
      if (axis < -rank || axis >= rank) return false;
      if (axis < 0) axis += rank;
      return rms_scale_fits(xs, axis, in[1].shape);
    }
    if (in.size() != 3 || !has_input(in, 1) || !has_input(in, 2) || rank < (kind_ == Kind::kInstance ? 3 : 2))
      return false;
    return in[1].dtype == in[0].dtype && in[2].dtype == in[0].dtype &&
           (kind_ == Kind::kInstance || node.attrs().get_int("num_groups", 0) > 0);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.size() < 2 || io.inputs[0] == nullptr || io.inputs[1] == nullptr)
      return internal_error("cuda.norm: step without a node, X, scale or a defined output");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    const Tensor& scale = *io.inputs[1];
    Tensor& y = (*io.outputs)[0];
    FloatType t;
    if (!to_float_type(x.dtype(), &t) || y.dtype() != x.dtype() || y.shape() != x.shape() ||
        scale.dtype() != x.dtype())
      return internal_error(node.describe(), ": types or shapes do not match the tactic ", name());
    RowNormDesc d;
    d.epsilon = node.attrs().get_float("epsilon", 1e-5f);
    const void* bias = nullptr;
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (kind_ == Kind::kRms) {
      int64_t axis = node.attrs().get_int("axis", -1);
      if (rank == 0 || axis < -rank || axis >= rank)
        return invalid_argument(node.describe(), ": axis ", axis, " out of range for rank ", rank);
      if (axis < 0) axis += rank;
      d.rows = 1;
      d.row_len = 1;
      for (int64_t i = 0; i < rank; ++i) (i < axis ? d.rows : d.row_len) *= x.dim(static_cast<size_t>(i));
      if (scale.numel() != d.row_len)
        return invalid_argument(node.describe(), ": scale must hold the ", d.row_len,
                                " elements of the normalized dims, got ", shape_to_string(scale.shape()));
      // Contiguous rows: the LayerNorm row kernels' RMS mode (a warp per row in registers,
      // 16-byte loads, when the row fits and is aligned).
      const cudaError_t err = launch_layernorm(t, x.raw(), scale.raw(), nullptr, y.mutable_raw(), d.rows, d.row_len,
                                               d.epsilon, static_cast<cudaStream_t>(io.stream), /*rms=*/true);
      if (err != cudaSuccess)
        return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
      return Status::Ok();
    } else {
      const Tensor* b = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
      const int64_t n = rank >= 2 ? x.dim(0) : 0, c = rank >= 2 ? x.dim(1) : 0;
      const int64_t groups = kind_ == Kind::kInstance ? c : node.attrs().get_int("num_groups", 0);
      if (kind_ == Kind::kInstance && c == 0) return Status::Ok();  // no channels: nothing to write
      if (b == nullptr || b->dtype() != x.dtype() || groups <= 0 || c % groups != 0)
        return invalid_argument(node.describe(), ": channels ", c, " not divisible by num_groups ", groups,
                                " or bias missing");
      d.groups = groups;
      d.channels_per_group = c / groups;
      d.inner = (n == 0 || c == 0) ? 1 : x.numel() / (n * c);
      d.rows = n * groups;
      d.row_len = d.channels_per_group * d.inner;
      d.per_group = scale.numel() == groups && groups != c;
      const int64_t want = d.per_group ? groups : c;
      if (scale.numel() != want || b->numel() != want)
        return invalid_argument(node.describe(), ": scale and bias must have ", c, " (or num_groups) elements");
      bias = b->raw();
    }
    const cudaError_t err =
        launch_row_norm(t, x.raw(), scale.raw(), bias, y.mutable_raw(), d, static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  Kind kind_;
};

}  // namespace

TacticFamily norm_family() {
  TacticFamily f;
  f.name = "norm";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Kind k;
    if (!classify(node, &k)) return out;
    auto t = std::make_unique<NormTactic>(k);
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    for (Kind k : {Kind::kRms, Kind::kGroup, Kind::kInstance})
      if (name == std::string("cuda.norm.") + kind_name(k)) return std::make_unique<NormTactic>(k);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
