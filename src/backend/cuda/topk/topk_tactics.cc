// Copyright ingot authors. Apache-2.0.
//
// The topk tactic family of the cuda backend (host side): ONNX TopK (opset 1 with the k
// attribute, 10+ with the K input, computed or not), any axis, largest or smallest, sorted = 1
// or 0 (0 is served sorted, which the spec allows), for float32/float16/bfloat16/int32/int64
// data; Values and int64 Indices in the reference's order (ties to the lower index).
//
// K is taken from the Values output's shape, which the runtime has propagated from K (an
// initializer, or a host-computed shape value); a K the runtime could only learn from device
// data makes the outputs data-dependent, and the builder then keeps the host fallback, which
// allocates them. Refused (the fallback runs them): other dtypes, an Indices output that is
// not int64, axes longer than 2^31 - 1 elements.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/topk/topk_kernels.h"

namespace ingot::backend::cuda {
namespace {

constexpr char kTacticName[] = "cuda.topk";

static_assert(sizeof(TopKParams) == 16, "TopKParams must have no padding");

int64_t opset_of(const ir::Node& n) { return n.owner() ? n.owner()->opset(n.domain()) : 0; }

}  // namespace

bool topk_type(DataType t, TopKType* out) {
  switch (t) {
    case DataType::kFloat32: *out = TopKType::kF32; return true;
    case DataType::kFloat16: *out = TopKType::kF16; return true;
    case DataType::kBFloat16: *out = TopKType::kBF16; return true;
    case DataType::kInt32: *out = TopKType::kI32; return true;
    case DataType::kInt64: *out = TopKType::kI64; return true;
    default: return false;
  }
}

Status topk_params_for(const ir::Node& node, const std::vector<ir::TensorType>& in, TopKParams* p) {
  *p = TopKParams();
  if (node.op_type() != "TopK" || !(node.domain().empty() || node.domain() == "ai.onnx"))
    return unsupported(node.describe(), ": not an ONNX TopK");
  const int64_t opset = opset_of(node);
  if (opset < 1) return unsupported(node.describe(), ": unknown opset");
  if (in.empty() || in[0].dtype == DataType::kUndefined) return unsupported(node.describe(), ": input X has no type");
  TopKType t;
  if (!topk_type(in[0].dtype, &t))
    return unsupported(node.describe(), ": input X is ", data_type_name(in[0].dtype),
                       "; the cuda topk kernels take f32, f16, bf16, i32 or i64");
  if (!node.output(0) || node.output(0)->dtype() != in[0].dtype)
    return unsupported(node.describe(), ": output Values must exist and have X's type");
  if (node.output(1) && node.output(1)->dtype() != DataType::kInt64)
    return unsupported(node.describe(), ": output Indices must be int64");
  if (!in[0].shape.rank_known() || in[0].shape.rank() < 1)
    return unsupported(node.describe(), ": input X needs a known rank of at least 1");
  const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
  const int64_t axis = node.attrs().get_int("axis", -1);
  if (axis < -rank || axis >= rank)
    return unsupported(node.describe(), ": axis ", axis, " is out of range for rank ", rank);
  const ir::Dim& n = in[0].shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
  if (n.is_known() && n.value() > 0x7fffffffll)
    return unsupported(node.describe(), ": the axis has ", n.value(),
                       " elements; the cuda topk kernels take at most 2^31 - 1");
  int64_t k = -1;
  if (opset < 10) {
    k = node.attrs().get_int("k", -1);
    if (k < 0) return unsupported(node.describe(), ": attribute k must be given and non-negative");
  } else {
    const ir::Value* kv = node.input(1);
    if (!kv) return unsupported(node.describe(), ": input K is required");
    if (const Tensor* kt = kv->initializer()) {
      if (kt->numel() != 1)
        return unsupported(node.describe(), ": input K must have one element, it has ", kt->numel());
      k = kt->get_i64(0);
      if (k < 0) return unsupported(node.describe(), ": K must be non-negative, got ", k);
    }
  }
  if (k >= 0 && n.is_known() && k > n.value())
    return unsupported(node.describe(), ": K = ", k, " exceeds the axis length ", n.value());
  p->axis = static_cast<int32_t>(axis);
  p->largest = node.attrs().get_int("largest", 1) != 0;
  return Status::Ok();
}

Status topk_desc_for(const TopKParams& p, const Shape64& x, const Shape64& y, TopKDesc* d) {
  *d = TopKDesc();
  const int64_t rank = static_cast<int64_t>(x.size());
  if (p.axis < -rank || p.axis >= rank)
    return invalid_argument("TopK: axis ", p.axis, " is out of range for rank ", rank);
  const int64_t axis = p.axis < 0 ? p.axis + rank : p.axis;
  if (y.size() != x.size()) return invalid_argument("TopK: Values has rank ", y.size(), ", X has rank ", rank);
  d->outer = 1;
  d->inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis && y[i] != x[i])
      return invalid_argument("TopK: Values ", shape_to_string(y), " must equal X ", shape_to_string(x),
                              " except along axis ", axis);
    if (i < axis) d->outer *= x[i];
    if (i > axis) d->inner *= x[i];
  }
  d->n = x[axis];
  d->k = y[axis];
  if (d->k < 0 || d->k > d->n) return invalid_argument("TopK: K = ", d->k, " out of range for axis size ", d->n);
  if (d->n > 0x7fffffffll) return invalid_argument("TopK: the axis has ", d->n, " elements, more than 2^31 - 1");
  d->largest = p.largest != 0;
  return Status::Ok();
}

namespace {

class TopKTactic final : public Tactic {
 public:
  explicit TopKTactic(const TopKParams& p) : params_(p) {}

  std::string name() const override { return kTacticName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    TopKParams p;
    return topk_params_for(node, in, &p).ok();
  }

  uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& shapes) const override {
    if (shapes.empty() || shapes[0].empty()) return 0;
    // The largest K is the axis length: the workspace does not depend on K anyway.
    TopKDesc d;
    if (!topk_desc_for(params_, shapes[0], shapes[0], &d).ok()) return 0;
    TopKType t;
    const ir::Value* x = node.input(0);
    if (!x || !topk_type(x->dtype(), &t)) return 0;
    return topk_workspace_bytes(t, d);
  }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.empty() || io.inputs[0] == nullptr)
      return internal_error("cuda.topk: step without a node, input X or a defined output Values");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    Tensor& values = (*io.outputs)[0];
    Tensor* indices = io.outputs->size() > 1 && (*io.outputs)[1].defined() ? &(*io.outputs)[1] : nullptr;
    if (io.outputs->size() > 1 && node.output(1) && indices == nullptr)
      return internal_error(node.describe(), ": output Indices has no buffer");
    TopKType t;
    if (!topk_type(x.dtype(), &t) || values.dtype() != x.dtype())
      return internal_error(node.describe(), ": input X (", data_type_name(x.dtype()), ") / output Values (",
                            data_type_name(values.dtype()), ") do not match the tactic");
    if (indices && (indices->dtype() != DataType::kInt64 || indices->shape() != values.shape()))
      return internal_error(node.describe(), ": output Indices must be int64 with the shape of Values");
    TopKDesc d;
    Status st = topk_desc_for(params_, x.shape(), values.shape(), &d);
    if (!st.ok()) return Status(st.code(), node.describe() + ": " + st.message());
    if (d.n > kTopKBitonicMax && d.k > 0 && io.workspace == nullptr)
      return internal_error(node.describe(), ": ", kTacticName, " needs a workspace for rows of ", d.n, " elements");
    const cudaError_t err =
        launch_topk(t, x.raw(), values.mutable_raw(), indices ? indices->mutable_data<int64_t>() : nullptr, d,
                    io.workspace, static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", kTacticName, " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override {
    std::vector<uint8_t> out(sizeof(TopKParams));
    std::memcpy(out.data(), &params_, sizeof(TopKParams));
    return out;
  }

 private:
  TopKParams params_;
};

}  // namespace

TacticFamily topk_family() {
  TacticFamily f;
  f.name = "topk";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    TopKParams p;
    if (topk_params_for(node, inputs, &p).ok()) out.push_back(std::make_unique<TopKTactic>(p));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kTacticName || params.size() != sizeof(TopKParams)) return nullptr;
    TopKParams p;
    std::memcpy(&p, params.data(), sizeof(TopKParams));
    if (p.version != TopKParams().version) return nullptr;
    return std::make_unique<TopKTactic>(p);
  };
  return f;
}

}  // namespace ingot::backend::cuda
