// Copyright ingot authors. Apache-2.0.
//
// The linear-quantization tactic family of the cuda backend (host side): QuantizeLinear from
// f32/f16/bf16 to int8/uint8/float8e4m3fn and DequantizeLinear from those to the scale's float
// type, per tensor (one-element scale) or per axis (a vector along `axis`), with or without a
// zero point. Rounding follows the reference: the quotient is rounded to the common float type
// (f32 when x and the scale differ), then half to even (integers: then saturated; float8: to the
// nearest even fp8, out-of-range values to +-448 with `saturate` = 1, the default, else NaN).
// A float8 zero point is added to the quotient in fp32 when nonzero (exported models carry
// zeros), and ignored by DequantizeLinear, as the reference does.
//
// Refused (the host fallback runs them): blocked quantization (block_size), the precision
// attribute, 16-bit/4-bit types and the other float8 formats, int32 DequantizeLinear input.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/quant/quant_kernels.h"

namespace ingot::backend::cuda {
namespace {

bool is_onnx(const ir::Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

bool is_quant_type(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kFloat8E4M3FN;
}

QuantType quant_type(DataType t) {
  return t == DataType::kInt8 ? QuantType::kInt8 : t == DataType::kUInt8 ? QuantType::kUInt8 : QuantType::kFloat8E4M3FN;
}

bool has_input(const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && in[i].dtype != DataType::kUndefined;
}

/// The channel view of x for a scale of `scale_numel` elements: per tensor, or along `axis`.
bool channel_view(const Shape64& x, int64_t scale_numel, int64_t axis, int64_t scale_rank, QuantDesc* d) {
  d->axis_len = d->inner = 1;
  if (scale_numel == 1) return true;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (scale_rank != 1 || axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  if (x[static_cast<size_t>(axis)] != scale_numel) return false;
  d->axis_len = scale_numel;
  for (int64_t i = axis + 1; i < rank; ++i) d->inner *= x[static_cast<size_t>(i)];
  return true;
}

class QuantTactic final : public Tactic {
 public:
  explicit QuantTactic(bool quantize) : quantize_(quantize) {}

  std::string name() const override { return quantize_ ? "cuda.quant.quantize" : "cuda.quant.dequantize"; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    if (!is_onnx(node) || node.op_type() != (quantize_ ? "QuantizeLinear" : "DequantizeLinear")) return false;
    if (node.outputs().size() != 1 || node.output(0) == nullptr) return false;
    if (node.attrs().get_int("block_size", 0) != 0 || node.attrs().find("precision") != nullptr) return false;
    if (!has_input(in, 0) || !has_input(in, 1) || in.size() > 3) return false;
    const DataType out = node.output(0)->dtype();
    FloatType f;
    if (!to_float_type(in[1].dtype, &f) || !in[1].shape.rank_known() || in[1].shape.rank() > 1) return false;
    if (quantize_) {
      if (!to_float_type(in[0].dtype, &f) || !is_quant_type(out)) return false;
      return !has_input(in, 2) || in[2].dtype == out;
    }
    if (!is_quant_type(in[0].dtype) || out != in[1].dtype) return false;
    return !has_input(in, 2) || in[2].dtype == in[0].dtype;
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.size() < 2 || io.inputs[0] == nullptr || io.inputs[1] == nullptr)
      return internal_error("cuda.quant: step without a node, x, scale or a defined output");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    const Tensor& scale = *io.inputs[1];
    const Tensor* zp = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
    Tensor& y = (*io.outputs)[0];
    QuantDesc d;
    d.n = x.numel();
    if (y.numel() != x.numel() ||
        !channel_view(x.shape(), scale.numel(), node.attrs().get_int("axis", 1),
                      static_cast<int64_t>(scale.rank()), &d))
      return invalid_argument(node.describe(), ": scale ", shape_to_string(scale.shape()),
                              " is neither one element nor a vector along axis ", node.attrs().get_int("axis", 1),
                              " of x ", shape_to_string(x.shape()));
    if (zp != nullptr && zp->numel() != scale.numel())
      return invalid_argument(node.describe(), ": zero point and scale sizes differ");
    FloatType st, xt, yt;
    cudaError_t err;
    auto stream = static_cast<cudaStream_t>(io.stream);
    if (quantize_) {
      if (!to_float_type(x.dtype(), &xt) || !to_float_type(scale.dtype(), &st) || !is_quant_type(y.dtype()) ||
          (zp != nullptr && zp->dtype() != y.dtype()))
        return internal_error(node.describe(), ": types do not match the tactic ", name());
      d.type = quant_type(y.dtype());
      d.saturate = node.attrs().get_int("saturate", 1) != 0;
      const FloatType quotient = x.dtype() == scale.dtype() ? xt : FloatType::kF32;
      err = launch_quantize(xt, st, quotient, x.raw(), scale.raw(), zp ? zp->raw() : nullptr, y.mutable_raw(), d,
                            stream);
    } else {
      if (!is_quant_type(x.dtype()) || !to_float_type(scale.dtype(), &st) || !to_float_type(y.dtype(), &yt) ||
          (zp != nullptr && zp->dtype() != x.dtype()))
        return internal_error(node.describe(), ": types do not match the tactic ", name());
      d.type = quant_type(x.dtype());
      if (d.type == QuantType::kFloat8E4M3FN) zp = nullptr;  // a float x has no zero point to subtract
      err = launch_dequantize(st, yt, x.raw(), scale.raw(), zp ? zp->raw() : nullptr, y.mutable_raw(), d, stream);
    }
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  bool quantize_;
};

}  // namespace

TacticFamily quant_family() {
  TacticFamily f;
  f.name = "quant";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    for (bool q : {true, false}) {
      auto t = std::make_unique<QuantTactic>(q);
      if (t->supports(node, inputs)) out.push_back(std::move(t));
    }
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    if (name == "cuda.quant.quantize") return std::make_unique<QuantTactic>(true);
    if (name == "cuda.quant.dequantize") return std::make_unique<QuantTactic>(false);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
