// Copyright ingot authors. Apache-2.0.
//
// The pooling tactic family of the cuda backend (host side): MaxPool and AveragePool over 1 to
// 3 spatial dims (pads, strides, dilations, auto_pad, ceil_mode, count_include_pad) and
// GlobalMaxPool / GlobalAveragePool, for f32/f16/bf16 channels-first tensors; ingot::Pool, the
// same windowed pools channels-last over 2 spatial dims (cuda.pool.*_nhwc; with channels_last = 0
// it is the channels-first MaxPool / AveragePool and runs as one).
//
// Refused (the host fallback runs them): MaxPool's optional Indices output, integer MaxPool,
// more than 3 spatial dims (channels-last: other than 2), LpPool. ceil_mode needs no code here:
// it only changes the output shape, which the runtime has already propagated into io.outputs;
// auto_pad's pads are derived from that output shape the same way the reference does.
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pool/pool_kernels.h"

namespace ingot::backend::cuda {
namespace {

enum class Kind { kMaxPool, kAveragePool, kGlobalMaxPool, kGlobalAveragePool, kMaxPoolNhwc, kAveragePoolNhwc };

constexpr Kind kOnnxKinds[] = {Kind::kMaxPool, Kind::kAveragePool, Kind::kGlobalMaxPool, Kind::kGlobalAveragePool};
constexpr Kind kAllKinds[] = {Kind::kMaxPool,           Kind::kAveragePool, Kind::kGlobalMaxPool,
                              Kind::kGlobalAveragePool, Kind::kMaxPoolNhwc, Kind::kAveragePoolNhwc};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kMaxPool: return "maxpool";
    case Kind::kAveragePool: return "averagepool";
    case Kind::kGlobalMaxPool: return "globalmaxpool";
    case Kind::kGlobalAveragePool: return "globalaveragepool";
    case Kind::kMaxPoolNhwc: return "maxpool_nhwc";
    case Kind::kAveragePoolNhwc: return "averagepool_nhwc";
  }
  return "?";
}

// The ONNX op of an ONNX kind.
const char* op_name(Kind k) {
  switch (k) {
    case Kind::kMaxPool: return "MaxPool";
    case Kind::kAveragePool: return "AveragePool";
    case Kind::kGlobalMaxPool: return "GlobalMaxPool";
    case Kind::kGlobalAveragePool: return "GlobalAveragePool";
    default: return "?";
  }
}

bool classify(const ir::Node& n, Kind* kind) {
  if (n.domain() == "ingot") {
    if (n.op_type() != "Pool") return false;
    const std::string mode = n.attrs().get_string("mode", "");
    const bool nhwc = n.attrs().get_int("channels_last", 0) != 0;
    if (mode == "max") *kind = nhwc ? Kind::kMaxPoolNhwc : Kind::kMaxPool;
    else if (mode == "average") *kind = nhwc ? Kind::kAveragePoolNhwc : Kind::kAveragePool;
    else return false;
    return true;
  }
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  for (Kind k : kOnnxKinds) {
    if (n.op_type() == op_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}


bool is_global(Kind k) { return k == Kind::kGlobalMaxPool || k == Kind::kGlobalAveragePool; }
bool is_nhwc(Kind k) { return k == Kind::kMaxPoolNhwc || k == Kind::kAveragePoolNhwc; }
PoolOp pool_op(Kind k) {
  return k == Kind::kMaxPool || k == Kind::kGlobalMaxPool || k == Kind::kMaxPoolNhwc ? PoolOp::kMax : PoolOp::kAvg;
}

/// An ints attribute of exactly `n` values all >= `min`, or absent (then `fallback` fills it).
bool window_attr(const ir::Node& n, const char* name, size_t count, int64_t fallback, int64_t min, int64_t* out) {
  const ir::Attribute* a = n.attrs().find(name);
  if (a == nullptr) {
    for (size_t i = 0; i < count; ++i) out[i] = fallback;
    return true;
  }
  if (a->ints.size() != count) return false;
  for (size_t i = 0; i < count; ++i) {
    if (a->ints[i] < min) return false;
    out[i] = a->ints[i];
  }
  return true;
}

class PoolTactic final : public Tactic {
 public:
  explicit PoolTactic(Kind kind) : kind_(kind) {}

  std::string name() const override { return std::string("cuda.pool.") + kind_name(kind_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    Kind k;
    if (!classify(node, &k) || k != kind_) return false;
    if (in.size() != 1 || in[0].dtype == DataType::kUndefined || node.outputs().empty() || !node.output(0))
      return false;
    for (size_t o = 1; o < node.outputs().size(); ++o)
      if (node.output(o)) return false;  // MaxPool's Indices
    FloatType t;
    if (!(to_float_type(in[0].dtype, &t) || int8_max(in[0].dtype)) || node.output(0)->dtype() != in[0].dtype)
      return false;
    if (!in[0].shape.rank_known()) return false;
    const size_t rank = in[0].shape.rank();
    if (is_global(kind_)) return rank >= 2;
    if (is_nhwc(kind_) && rank != 4) return false;
    if (rank < 3 || rank - 2 > static_cast<size_t>(kMaxPoolSpatialDims)) return false;
    PoolDesc d;
    return window(node, rank - 2, &d);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.empty() || io.inputs[0] == nullptr)
      return internal_error("cuda.pool: step without a node, input 0 or a defined output 0");
    const ir::Node& node = *io.node;
    const Tensor& x = *io.inputs[0];
    Tensor& y = (*io.outputs)[0];
    const bool nhwc = is_nhwc(kind_);
    const size_t c_axis = nhwc ? 3 : 1;  // spatial dims follow N (NHWC) or N, C
    FloatType t = FloatType::kF32;
    const bool i8 = int8_max(x.dtype());
    if (!(i8 || to_float_type(x.dtype(), &t)) || y.dtype() != x.dtype() || x.rank() < 2 || y.rank() != x.rank() ||
        (nhwc && x.rank() != 4) || y.dim(0) != x.dim(0) || y.dim(c_axis) != x.dim(c_axis))
      return internal_error(node.describe(), ": input ", shape_to_string(x.shape()), " / output ",
                            shape_to_string(y.shape()), " do not match the tactic");
    auto stream = static_cast<cudaStream_t>(io.stream);
    const int64_t planes = nhwc ? x.dim(0) : x.dim(0) * x.dim(1);
    cudaError_t err;
    if (is_global(kind_)) {
      if (y.numel() != planes) return internal_error(node.describe(), ": output must hold N*C elements");
      const int64_t size = planes == 0 ? 0 : x.numel() / planes;
      err = launch_global_pool(pool_op(kind_), t, x.raw(), y.mutable_raw(), planes, size, stream);
    } else {
      const size_t nsp = x.rank() - 2, first = nhwc ? 1 : 2;
      PoolDesc d;
      if (nsp < 1 || nsp > static_cast<size_t>(kMaxPoolSpatialDims) || !window(node, nsp, &d))
        return internal_error(node.describe(), ": window attributes do not match spatial rank ", nsp);
      d.planes = planes;
      const std::string auto_pad = node.attrs().get_string("auto_pad", "NOTSET");
      for (size_t i = 0; i < nsp; ++i) {
        d.in[i] = x.dim(i + first);
        d.out[i] = y.dim(i + first);
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
          const int64_t span = (d.kernel[i] - 1) * d.dilation[i] + 1;
          int64_t total = (d.out[i] - 1) * d.stride[i] + span - d.in[i];
          if (total < 0) total = 0;
          d.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
          d.pad_end[i] = total - d.pad_begin[i];
        } else if (auto_pad == "VALID") {
          d.pad_begin[i] = d.pad_end[i] = 0;
        }
      }
      if (i8)
        err = nhwc ? launch_max_pool_nhwc_i8(x.raw(), y.mutable_raw(), d, x.dim(3), stream)
                   : launch_max_pool_i8(x.raw(), y.mutable_raw(), d, stream);
      else
        err = nhwc ? launch_pool_nhwc(pool_op(kind_), t, x.raw(), y.mutable_raw(), d, x.dim(3), stream)
                   : launch_pool(pool_op(kind_), t, x.raw(), y.mutable_raw(), d, stream);
    }
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  /// An int8 tensor this tactic pools: windowed max pooling only (fuse_quant_gemm moves a max pool
  /// between quantized layers onto the 8-bit numbers).
  bool int8_max(DataType t) const {
    return t == DataType::kInt8 && pool_op(kind_) == PoolOp::kMax && !is_global(kind_);
  }

  /// The window attributes (pads as given; auto_pad is resolved in enqueue from the shapes).
  bool window(const ir::Node& node, size_t nsp, PoolDesc* d) const {
    d->spatial_rank = static_cast<int32_t>(nsp);
    int64_t pads[2 * kMaxPoolSpatialDims];
    if (!window_attr(node, "kernel_shape", nsp, 0, 1, d->kernel)) return false;
    if (node.attrs().find("kernel_shape") == nullptr) return false;
    if (!window_attr(node, "strides", nsp, 1, 1, d->stride)) return false;
    if (!window_attr(node, "dilations", nsp, 1, 1, d->dilation)) return false;
    if (!window_attr(node, "pads", 2 * nsp, 0, 0, pads)) return false;
    for (size_t i = 0; i < nsp; ++i) {
      d->pad_begin[i] = pads[i];
      d->pad_end[i] = pads[i + nsp];
    }
    const std::string auto_pad = node.attrs().get_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
      return false;
    d->count_include_pad = node.attrs().get_int("count_include_pad", 0) != 0;
    return true;
  }

  Kind kind_;
};

}  // namespace

TacticFamily pool_family() {
  TacticFamily f;
  f.name = "pool";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Kind k;
    if (!classify(node, &k)) return out;
    auto t = std::make_unique<PoolTactic>(k);
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    for (Kind k : kAllKinds)
      if (name == std::string("cuda.pool.") + kind_name(k)) return std::make_unique<PoolTactic>(k);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
