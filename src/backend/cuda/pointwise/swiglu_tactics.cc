// Copyright ingot authors. Apache-2.0.
//
// The SwiGLU tactic of the cuda backend (host side): ingot::SwiGLU, the gated MLP activation
// fuse_gated_mlp puts after a packed gate/up GEMM, as one elementwise kernel over the packed rows
// (launch_silu_mul_packed, the LLM decoder's own), X and Y of one type among f32/f16/bf16 and
// fp32 math. Contiguous tensors only, as every engine tensor is.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/llm/llm_kernels.h"
#include "backend/cuda/pointwise/pointwise_codegen.h"

namespace ingot::backend::cuda {
namespace {

constexpr const char* kName = "cuda.swiglu";

bool is_swiglu(const ir::Node& n) { return n.op_type() == "SwiGLU" && n.domain() == "ingot"; }

class SwiGluTactic final : public Tactic {
 public:
  std::string name() const override { return kName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    if (!is_swiglu(node) || in.size() != 1 || node.outputs().size() != 1 || node.output(0) == nullptr) return false;
    FloatType t;
    if (!to_float_type(in[0].dtype, &t) || node.output(0)->dtype() != in[0].dtype) return false;
    const ir::Shape& x = in[0].shape;
    if (!x.rank_known() || x.rank() < 1) return false;
    const ir::Dim& d = x[x.rank() - 1];
    return !d.is_known() || (d.value() > 0 && d.value() % 2 == 0);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.size() != 1 || io.inputs[0] == nullptr)
      return internal_error("cuda.swiglu: step without a node, X or a defined output");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    Tensor& y = (*io.outputs)[0];
    FloatType t;
    if (!to_float_type(x.dtype(), &t) || y.dtype() != x.dtype())
      return internal_error(node.describe(), ": types do not match the tactic ", name());
    const size_t rank = x.rank();
    const int64_t d = rank >= 1 ? x.dim(rank - 1) : 0;
    if (rank < 1 || d <= 0 || d % 2 != 0 || y.numel() * 2 != x.numel())
      return invalid_argument(node.describe(), ": X ", shape_to_string(x.shape()), " needs an even, non-zero last dim, Y ",
                              shape_to_string(y.shape()), " half its elements");
    const cudaError_t err = launch_silu_mul_packed(t, x.raw(), y.mutable_raw(), x.numel() / d, d / 2,
                                                   static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }
};

}  // namespace

TacticFamily swiglu_family() {
  TacticFamily f;
  f.name = "swiglu";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    auto t = std::make_unique<SwiGluTactic>();
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    return name == kName ? std::make_unique<SwiGluTactic>() : nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
