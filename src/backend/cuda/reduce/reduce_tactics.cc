// Copyright ingot authors. Apache-2.0.
//
// The reduction tactic family of the cuda backend (host side): ReduceSum/Mean/Max/Min/Prod/
// SumSquare/L1/L2/LogSum/LogSumExp over any axes (attribute or initializer input, keepdims,
// noop_with_empty_axes) and ArgMax/ArgMin (keepdims, select_last_index), for f32/f16/bf16
// inputs, accumulated in fp32.
//
// Also CumSum (below). Refused (the host fallback runs them): integer inputs, axes given by a computed tensor (they
// decide which elements meet, and reading them would need a host sync), ranks above kMaxDims.
// keepdims needs no code: the output is contiguous either way and its shape is the runtime's.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/reduce/reduce_kernels.h"
#include "core/dtype.h"

namespace ingot::backend::cuda {
namespace {

struct OpEntry {
  const char* op;
  const char* tactic;
  bool arg;
  bool is_max;
  ReduceOp reduce;
};

constexpr OpEntry kOps[] = {
    {"ReduceSum", "reducesum", false, false, ReduceOp::kSum},
    {"ReduceMean", "reducemean", false, false, ReduceOp::kMean},
    {"ReduceMax", "reducemax", false, false, ReduceOp::kMax},
    {"ReduceMin", "reducemin", false, false, ReduceOp::kMin},
    {"ReduceProd", "reduceprod", false, false, ReduceOp::kProd},
    {"ReduceSumSquare", "reducesumsquare", false, false, ReduceOp::kSumSquare},
    {"ReduceL1", "reducel1", false, false, ReduceOp::kL1},
    {"ReduceL2", "reducel2", false, false, ReduceOp::kL2},
    {"ReduceLogSum", "reducelogsum", false, false, ReduceOp::kLogSum},
    {"ReduceLogSumExp", "reducelogsumexp", false, false, ReduceOp::kLogSumExp},
    {"ArgMax", "argmax", true, true, ReduceOp::kMax},
    {"ArgMin", "argmin", true, false, ReduceOp::kMin},
};

const OpEntry* classify(const ir::Node& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return nullptr;
  for (const OpEntry& e : kOps)
    if (n.op_type() == e.op) return &e;
  return nullptr;
}


int64_t node_opset(const ir::Node& n) { return n.owner() ? n.owner()->opset(n.domain()) : 0; }

bool norm_axis(int64_t a, int64_t rank, int64_t* out) {
  if (a < -rank || a >= rank) return false;
  *out = a < 0 ? a + rank : a;
  return true;
}

/// Which dims of a rank-`rank` input a Reduce* node folds (the reference's rules: axes from the
/// attribute before opset 13 (ReduceSum) / 18 (the others), else from input 1, which must be an
/// initializer; no axes means all, or none with noop_with_empty_axes).
bool reduced_dims(const ir::Node& n, int64_t rank, bool (&red)[kMaxDims]) {
  if (rank > kMaxDims) return false;
  const bool from_input = node_opset(n) >= (n.op_type() == "ReduceSum" ? 13 : 18);
  int64_t axes[kMaxDims];
  size_t count = 0;
  if (from_input) {
    const ir::Value* v = n.inputs().size() > 1 ? n.input(1) : nullptr;
    if (v != nullptr) {
      const Tensor* t = v->initializer();
      if (t == nullptr || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32) ||
          t->numel() > kMaxDims)
        return false;
      for (int64_t i = 0; i < t->numel(); ++i) axes[i] = t->get_i64(i);
      count = static_cast<size_t>(t->numel());
    }
  } else if (const ir::Attribute* a = n.attrs().find("axes")) {
    if (a->ints.size() > static_cast<size_t>(kMaxDims)) return false;
    for (size_t i = 0; i < a->ints.size(); ++i) axes[i] = a->ints[i];
    count = a->ints.size();
  }
  const bool noop = from_input && n.attrs().get_int("noop_with_empty_axes", 0) != 0;
  for (int64_t d = 0; d < rank; ++d) red[d] = count == 0 && !noop;
  for (size_t i = 0; i < count; ++i) {
    int64_t a;
    if (!norm_axis(axes[i], rank, &a)) return false;
    red[a] = true;
  }
  return true;
}

/// The kept / reduced view of a contiguous input: unit dims dropped, same-kind neighbours merged.
ReduceDesc reduce_view(const Shape64& shape, const bool (&red)[kMaxDims]) {
  ReduceDesc d;
  int64_t strides[kMaxDims];
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  int last = -1;  // kind of the previous non-unit dim: 0 kept, 1 reduced
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t size = shape[i];
    if (red[i]) d.count *= size;
    else d.outputs *= size;
    if (size == 1) continue;
    const int kind = red[i] ? 1 : 0;
    int32_t& rank = kind ? d.red_rank : d.kept_rank;
    int64_t* dims = kind ? d.red_dims : d.kept_dims;
    int64_t* st = kind ? d.red_strides : d.kept_strides;
    if (last == kind && rank > 0) {
      dims[rank - 1] *= size;
      st[rank - 1] = strides[i];
    } else {
      dims[rank] = size;
      st[rank] = strides[i];
      ++rank;
    }
    last = kind;
  }
  return d;
}

// Whether a strided reduction of `in` can read 16-byte packs of neighbouring outputs: the last
// axis kept and known, a whole number of packs (reduce_pack_width decides at run time; this only
// keeps the packed variant away from nodes that could never use it).
bool may_pack(const ir::Node& node, const ir::TensorType& in) {
  if (!in.shape.rank_known() || in.shape.rank() > static_cast<size_t>(kMaxDims)) return false;
  const int64_t rank = static_cast<int64_t>(in.shape.rank());
  const int64_t bytes = data_type_bits(in.dtype) / 8;
  bool red[kMaxDims];
  if (rank < 2 || bytes <= 0 || 16 % bytes != 0 || !reduced_dims(node, rank, red) || red[rank - 1]) return false;
  const ir::Dim& last = in.shape[static_cast<size_t>(rank - 1)];
  return last.is_known() && last.value() % (16 / bytes) == 0;
}

// A reduction; `packed`: cuda.reduce.<op>.packed, whose strided reductions read 16-byte packs
// (launch_reduce's allow_pack; the autotuner keeps it where it wins: large inputs).
class ReduceTactic final : public Tactic {
 public:
  ReduceTactic(const OpEntry& e, bool packed) : e_(e), packed_(packed) {}

  std::string name() const override { return std::string("cuda.reduce.") + e_.tactic + (packed_ ? ".packed" : ""); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    if (classify(node) != &e_ || in.empty() || in[0].dtype == DataType::kUndefined) return false;
    if (packed_ && (e_.arg || e_.reduce == ReduceOp::kLogSumExp || !may_pack(node, in[0]))) return false;
    if (node.outputs().size() != 1 || node.output(0) == nullptr) return false;
    FloatType t;
    if (!to_float_type(in[0].dtype, &t)) return false;
    const ir::Shape& xs = in[0].shape;
    if (!xs.rank_known() || xs.rank() > static_cast<size_t>(kMaxDims)) return false;
    const int64_t rank = static_cast<int64_t>(xs.rank());
    if (e_.arg) {
      int64_t axis;
      if (node.output(0)->dtype() != DataType::kInt64 || !norm_axis(node.attrs().get_int("axis", 0), rank, &axis))
        return false;
      return !xs[static_cast<size_t>(axis)].is_known() || xs[static_cast<size_t>(axis)].value() >= 1;
    }
    bool red[kMaxDims];
    return node.output(0)->dtype() == in[0].dtype && reduced_dims(node, rank, red);
  }

  // Partials of a split strided reduction (global pooling of few channels-last outputs).
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override {
    return e_.arg ? 0 : kReduceWorkspaceBytes;
  }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.empty() || io.inputs[0] == nullptr)
      return internal_error("cuda.reduce: step without a node, input 0 or a defined output 0");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    Tensor& y = (*io.outputs)[0];
    auto stream = static_cast<cudaStream_t>(io.stream);
    FloatType t;
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (!to_float_type(x.dtype(), &t) || rank > kMaxDims)
      return internal_error(node.describe(), ": input ", data_type_name(x.dtype()), shape_to_string(x.shape()),
                            " does not match the tactic ", name());
    cudaError_t err;
    if (e_.arg) {
      int64_t axis;
      if (y.dtype() != DataType::kInt64 || !norm_axis(node.attrs().get_int("axis", 0), rank, &axis))
        return internal_error(node.describe(), ": axis out of range for rank ", rank);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < rank; ++d) {
        if (d < axis) outer *= x.dim(static_cast<size_t>(d));
        if (d > axis) inner *= x.dim(static_cast<size_t>(d));
      }
      const int64_t len = x.dim(static_cast<size_t>(axis));
      if (len == 0) return invalid_argument(node.describe(), ": cannot take ", e_.op, " over an empty axis");
      if (y.numel() != outer * inner)
        return internal_error(node.describe(), ": output ", shape_to_string(y.shape()), " does not fit the input");
      err = launch_arg_reduce(e_.is_max, node.attrs().get_int("select_last_index", 0) != 0, t, x.raw(),
                              y.mutable_data<int64_t>(), outer, len, inner, stream);
    } else {
      bool red[kMaxDims];
      if (y.dtype() != x.dtype() || !reduced_dims(node, rank, red))
        return internal_error(node.describe(), ": axes do not match the tactic ", name());
      const ReduceDesc d = reduce_view(x.shape(), red);
      if (y.numel() != d.outputs)
        return internal_error(node.describe(), ": output ", shape_to_string(y.shape()), " does not fit the input ",
                              shape_to_string(x.shape()));
      err = launch_reduce(e_.reduce, t, x.raw(), y.mutable_raw(), d, io.workspace,
                          io.workspace ? kReduceWorkspaceBytes : 0, stream, packed_);
    }
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  const OpEntry& e_;
  bool packed_;
};

// CumSum over an axis given by an initializer (a computed axis would need a host read); f32/f16/
// bf16 (fp32 accumulation) and int32/int64 (wrapping), exclusive and reverse. RoBERTa's position
// ids (CumSum of the int64 attention mask) left it on the host fallback.
bool scan_type(DataType t, ScanType* out) {
  switch (t) {
    case DataType::kFloat32: *out = ScanType::kF32; return true;
    case DataType::kFloat16: *out = ScanType::kF16; return true;
    case DataType::kBFloat16: *out = ScanType::kBF16; return true;
    case DataType::kInt32: *out = ScanType::kI32; return true;
    case DataType::kInt64: *out = ScanType::kI64; return true;
    default: return false;
  }
}

bool is_cumsum(const ir::Node& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "CumSum";
}

// The axis initializer's value, or false.
bool cumsum_axis(const ir::Node& node, int64_t rank, int64_t* axis) {
  const ir::Value* a = node.inputs().size() > 1 ? node.input(1) : nullptr;
  if (!a || !a->initializer() || a->initializer()->numel() != 1) return false;
  return norm_axis(a->initializer()->get_i64(0), rank, axis);
}

class CumSumTactic final : public Tactic {
 public:
  std::string name() const override { return "cuda.reduce.cumsum"; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    ScanType t;
    if (!is_cumsum(node) || in.size() != 2 || !scan_type(in[0].dtype, &t)) return false;
    if (node.outputs().size() != 1 || node.output(0) == nullptr || node.output(0)->dtype() != in[0].dtype) return false;
    if (!in[0].shape.rank_known() || in[0].shape.rank() == 0) return false;
    int64_t axis;
    return cumsum_axis(node, static_cast<int64_t>(in[0].shape.rank()), &axis);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.empty() || io.inputs[0] == nullptr)
      return internal_error("cuda.reduce.cumsum: step without a node, input 0 or a defined output 0");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    Tensor& y = (*io.outputs)[0];
    ScanType t;
    int64_t axis;
    const int64_t rank = static_cast<int64_t>(x.rank());
    if (!scan_type(x.dtype(), &t) || y.dtype() != x.dtype() || y.numel() != x.numel() || rank == 0 ||
        !cumsum_axis(node, rank, &axis))
      return internal_error(node.describe(), ": input ", data_type_name(x.dtype()), shape_to_string(x.shape()),
                            " does not match the tactic ", name());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) outer *= x.dim(static_cast<size_t>(d));
      if (d > axis) inner *= x.dim(static_cast<size_t>(d));
    }
    cudaError_t err = launch_cumsum(t, x.raw(), y.mutable_raw(), outer, x.dim(static_cast<size_t>(axis)), inner,
                                    node.attrs().get_int("exclusive", 0) != 0, node.attrs().get_int("reverse", 0) != 0,
                                    static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }
};

}  // namespace

TacticFamily reduce_family() {
  TacticFamily f;
  f.name = "reduce";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    if (is_cumsum(node)) {
      auto c = std::make_unique<CumSumTactic>();
      if (c->supports(node, inputs)) out.push_back(std::move(c));
      return out;
    }
    const OpEntry* e = classify(node);
    if (e == nullptr) return out;
    for (bool packed : {false, true}) {
      auto t = std::make_unique<ReduceTactic>(*e, packed);
      if (t->supports(node, inputs)) out.push_back(std::move(t));
    }
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    if (name == "cuda.reduce.cumsum") return std::make_unique<CumSumTactic>();
    for (const OpEntry& e : kOps)
      for (bool packed : {false, true})
        if (name == ReduceTactic(e, packed).name()) return std::make_unique<ReduceTactic>(e, packed);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
