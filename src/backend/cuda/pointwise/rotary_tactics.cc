// Copyright ingot authors. Apache-2.0.
//
// The rotary tactic family of the cuda backend (host side): ingot::RotaryEmbedding, the op
// recognize_rotary makes of a Llama/Qwen2 rotate_half, as one kernel (rotary_kernels.cu), with
// X, cos, sin and Y of one type among f32/f16/bf16 and fp32 math. cos/sin are read through their
// broadcast strides, planned per run on the host without allocating, so enqueue can be captured.
//
// Refused (the host fallback runs them): interleaved = 1, X's last dim unknown or odd, mixed
// types, cos/sin that do not provably fit X (ir/ops/rotary.h), X of rank above kRotaryMaxRank.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pointwise/pointwise_codegen.h"
#include "backend/cuda/pointwise/rotary_kernels.h"
#include "ir/ops/rotary.h"

namespace ingot::backend::cuda {
namespace {

static_assert(kRotaryMaxRank == kPointwiseMaxRank, "the rotary map is planned by plan_pointwise_launch");

constexpr const char* kName = "cuda.rotary";

bool is_rotary(const ir::Node& n) { return n.op_type() == "RotaryEmbedding" && n.domain() == "ingot"; }

class RotaryTactic final : public Tactic {
 public:
  std::string name() const override { return kName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    if (!is_rotary(node) || node.attrs().get_int("interleaved", 0) != 0) return false;
    if (node.outputs().size() != 1 || node.output(0) == nullptr || in.size() != 3) return false;
    FloatType t;
    if (!to_float_type(in[0].dtype, &t) || node.output(0)->dtype() != in[0].dtype) return false;
    if (in[1].dtype != in[0].dtype || in[2].dtype != in[0].dtype) return false;
    const int64_t heads = node.attrs().get_int("heads", 0);
    if (heads > 0) {  // X a packed projection: the tables must fit Y, the node's output
      const ir::Shape& y = node.output(0)->shape();
      const ir::Dim& r = in[0].shape.rank_known() && in[0].shape.rank() >= 1 ? in[0].shape[in[0].shape.rank() - 1]
                                                                             : ir::Dim::unknown();
      const int64_t hs = node.attrs().get_int("head_size", 0);
      if (!r.is_known() || hs <= 0 || hs % 2 != 0 || r.value() < heads * hs) return false;
      if (!y.rank_known() || y.rank() < 2 || y.rank() > static_cast<size_t>(kRotaryMaxRank)) return false;
      return ir::rotary_param_fits(y, in[1].shape, /*provably=*/true) &&
             ir::rotary_param_fits(y, in[2].shape, /*provably=*/true);
    }
    const ir::Shape& x = in[0].shape;
    if (!x.rank_known() || x.rank() < 2 || x.rank() > static_cast<size_t>(kRotaryMaxRank)) return false;
    const ir::Dim& d = x[x.rank() - 1];
    if (!d.is_known() || d.value() <= 0 || d.value() % 2 != 0) return false;
    return ir::rotary_param_fits(x, in[1].shape, /*provably=*/true) &&
           ir::rotary_param_fits(x, in[2].shape, /*provably=*/true);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.size() != 3 || io.inputs[0] == nullptr || io.inputs[1] == nullptr || io.inputs[2] == nullptr)
      return internal_error("cuda.rotary: step without a node, X, cos, sin or a defined output");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    const Tensor& cos = *io.inputs[1];
    const Tensor& sin = *io.inputs[2];
    Tensor& y = (*io.outputs)[0];
    FloatType t;
    const int64_t heads = node.attrs().get_int("heads", 0);
    if (!to_float_type(x.dtype(), &t) || y.dtype() != x.dtype() || cos.dtype() != x.dtype() ||
        sin.dtype() != x.dtype() || (heads == 0 && y.shape() != x.shape()))
      return internal_error(node.describe(), ": types or shapes do not match the tactic ", name());
    const size_t rank = y.rank();
    const int64_t d = rank >= 2 ? y.dim(rank - 1) : 0;
    if (rank < 2 || d <= 0 || d % 2 != 0)
      return invalid_argument(node.describe(), ": Y ", shape_to_string(y.shape()),
                              " needs rank >= 2 and an even, non-zero last dim");
    const int64_t x_row = x.rank() >= 1 ? x.dim(x.rank() - 1) : 0;
    if (heads > 0 && (y.dim(rank - 2) != heads || x_row < heads * d ||
                      x.numel() / std::max<int64_t>(x_row, 1) * heads * d != y.numel()))
      return invalid_argument(node.describe(), ": X ", shape_to_string(x.shape()), " does not hold Y ",
                              shape_to_string(y.shape()), "'s ", heads, " heads at the start of each row");
    // The kernel reads cos/sin at i and i + D/2 of one row: their last dim must be D, not 1.
    for (const Tensor* p : {&cos, &sin})
      if (p->rank() < 1 || p->dim(p->rank() - 1) != d)
        return invalid_argument(node.describe(), ": cos/sin ", shape_to_string(p->shape()), " must have X's last dim ",
                                d);
    PointwiseArgs map;
    bool flat = false;
    const Shape64* params[2] = {&cos.shape(), &sin.shape()};
    if (!plan_pointwise_launch(y.shape(), params, 2, &map, &flat))
      return invalid_argument(node.describe(), ": cos ", shape_to_string(cos.shape()), " or sin ",
                              shape_to_string(sin.shape()), " does not broadcast to Y ", shape_to_string(y.shape()));
    RotaryDesc desc;
    desc.half = d / 2;
    desc.rows = y.numel() / d;
    desc.x_heads = heads;
    desc.x_row = heads > 0 ? x_row : 0;
    desc.rank = map.rank;
    for (int k = 0; k < map.rank; ++k) {
      desc.dims[k] = map.dims[k];
      desc.cos_strides[k] = map.strides[0][k];
      desc.sin_strides[k] = map.strides[1][k];
    }
    const cudaError_t err =
        launch_rotary(t, x.raw(), cos.raw(), sin.raw(), y.mutable_raw(), desc, static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }
};

}  // namespace

TacticFamily rotary_family() {
  TacticFamily f;
  f.name = "rotary";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    auto t = std::make_unique<RotaryTactic>();
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    return name == kName ? std::make_unique<RotaryTactic>() : nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
