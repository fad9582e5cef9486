// Copyright ingot authors. Apache-2.0.
//
// The data-movement tactic family of the cuda backend (host side): ops that move elements
// without arithmetic, for any dtype of 1, 2, 4 or 8 bytes (int64, bool, fp16, ...).
//  - Reshape, Flatten, Squeeze, Unsqueeze: one device-to-device copy, skipped when the planner
//    made the step in place (the output aliases the input). Identity stays with the
//    elementwise family, which copies the same way.
//  - Shape, Size: host-known values written by a tiny kernel from its arguments (capturable).
//  - Concat, Split: one row copy per input / output; the split sizes come from the output
//    shapes the runtime propagated, so the split input or attribute is never read.
//  - Slice, Expand, Tile, Pad: one strided (and padded) index-map kernel.
//  - Gather, GatherElements, GatherND (batch_dims 0), ScatterND (reduction none): indices read
//    on the device.
//  - ConstantOfShape, Range: fills; Range reads start and delta on the device.
//  - DepthToSpace, SpaceToDepth (DCR and CRD): the index map over a 6-D view, as a transpose.
// Output shapes always come from io.outputs. Parameters that decide where elements go and that
// no output shape reveals (Slice's starts/steps, Pad's pads, their axes) must be initializers:
// supports() refuses the node otherwise, and enqueue reads them from the node's host copy
// (no device read, no sync). Every tactic is stateless and rebuilt from its name alone.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "backend/cuda/data_movement/data_movement_params.h"

namespace ingot::backend::cuda {
namespace {

using namespace dm;  // NOLINT: the family's own helpers

enum class Kind {
  kCopy, kShape, kSize, kConcat, kSplit, kSlice, kGather, kGatherElements, kGatherND, kScatterND, kExpand, kTile, kPad,
  kConstantOfShape, kRange, kDepthToSpace, kSpaceToDepth,
};

constexpr Kind kAllKinds[] = {Kind::kCopy,   Kind::kShape,  Kind::kSize,           Kind::kConcat,    Kind::kSplit,
                              Kind::kSlice,  Kind::kGather, Kind::kGatherElements, Kind::kGatherND, Kind::kScatterND,
                              Kind::kExpand,
                              Kind::kTile,   Kind::kPad,    Kind::kConstantOfShape, Kind::kRange,
                              Kind::kDepthToSpace, Kind::kSpaceToDepth};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kCopy: return "copy";
    case Kind::kShape: return "shape";
    case Kind::kSize: return "size";
    case Kind::kConcat: return "concat";
    case Kind::kSplit: return "split";
    case Kind::kSlice: return "slice";
    case Kind::kGather: return "gather";
    case Kind::kGatherElements: return "gather_elements";
    case Kind::kGatherND: return "gather_nd";
    case Kind::kScatterND: return "scatter_nd";
    case Kind::kExpand: return "expand";
    case Kind::kTile: return "tile";
    case Kind::kPad: return "pad";
    case Kind::kConstantOfShape: return "constant_of_shape";
    case Kind::kRange: return "range";
    case Kind::kDepthToSpace: return "depth_to_space";
    case Kind::kSpaceToDepth: return "space_to_depth";
  }
  return "?";
}

bool classify(const ir::Node& n, Kind* kind) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  static const struct { const char* op; Kind kind; } kOps[] = {
      {"Reshape", Kind::kCopy},       {"Flatten", Kind::kCopy},
      {"Squeeze", Kind::kCopy},       {"Unsqueeze", Kind::kCopy},
      {"Shape", Kind::kShape},        {"Size", Kind::kSize},
      {"Concat", Kind::kConcat},      {"Split", Kind::kSplit},
      {"Slice", Kind::kSlice},        {"Gather", Kind::kGather},
      {"GatherElements", Kind::kGatherElements}, {"GatherND", Kind::kGatherND}, {"ScatterND", Kind::kScatterND},
      {"Expand", Kind::kExpand},      {"Tile", Kind::kTile},
      {"Pad", Kind::kPad},            {"ConstantOfShape", Kind::kConstantOfShape},
      {"Range", Kind::kRange},        {"DepthToSpace", Kind::kDepthToSpace},
      {"SpaceToDepth", Kind::kSpaceToDepth},
  };
  for (const auto& e : kOps) {
    if (n.op_type() == e.op) {
      *kind = e.kind;
      return true;
    }
  }
  return false;
}

// GatherND / ScatterND: index tuples of k coordinates over x's first k dims, each addressing a
// slice of the remaining dims.
struct NdSlices {
  ScatterNdDesc desc;
  int64_t slice_size = 1, slices = 0;
};

Status nd_slices(const ir::Node& node, const Tensor& x, const Tensor& idx, NdSlices* nd) {
  const int64_t k = idx.dim(idx.rank() - 1);
  if (k < 1 || k > kMaxDims || k > static_cast<int64_t>(x.rank()))
    return invalid_argument(node.describe(), ": indices' last dim ", k, " must be in [1, ", x.rank(), "]");
  if (x.rank() > 16) return unsupported(node.describe(), ": rank ", x.rank());
  int64_t strides[16];
  contiguous_strides(x.shape(), strides);
  nd->desc.k = static_cast<int32_t>(k);
  for (int64_t i = 0; i < k; ++i) {
    nd->desc.dims[i] = x.dim(static_cast<size_t>(i));
    nd->desc.strides[i] = strides[i];
  }
  for (size_t i = static_cast<size_t>(k); i < x.rank(); ++i) nd->slice_size *= x.dim(i);
  nd->slices = idx.numel() / k;
  return Status::Ok();
}

class DataMovementTactic final : public Tactic {
 public:
  explicit DataMovementTactic(Kind kind) : kind_(kind) {}

  std::string name() const override { return std::string("cuda.data_movement.") + kind_name(kind_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    Kind k;
    if (!classify(node, &k) || k != kind_ || node.outputs().empty()) return false;
    for (const ir::Value* o : node.outputs())
      if (o == nullptr || o->dtype() == DataType::kUndefined) return false;
    const DataType out = node.output(0)->dtype();
    if (kind_ == Kind::kShape || kind_ == Kind::kSize) {
      if (!has_input(in, 0) || out != DataType::kInt64 || node.outputs().size() != 1) return false;
      return kind_ == Kind::kSize || known_rank_at_most(in[0].shape, kMaxSmallValues);
    }
    if (kind_ == Kind::kConstantOfShape) {
      const Tensor* v = node.attrs().get_tensor("value");
      if (v == nullptr) return out == DataType::kFloat32;
      return v->numel() == 1 && element_bytes(v->dtype()) != 0 && v->dtype() == out;
    }
    if (kind_ == Kind::kRange) {
      RangeType t;
      if (in.size() != 3 || !range_type(out, &t)) return false;
      for (size_t i = 0; i < 3; ++i)
        if (!has_input(in, i) || in[i].dtype != out) return false;
      return true;
    }
    if (!has_input(in, 0) || element_bytes(in[0].dtype) == 0) return false;
    for (const ir::Value* o : node.outputs())
      if (o->dtype() != in[0].dtype) return false;
    const ir::Shape& xs = in[0].shape;
    switch (kind_) {
      case Kind::kCopy: return node.outputs().size() == 1;
      case Kind::kConcat:
        for (size_t i = 0; i < in.size(); ++i)
          if (!has_input(in, i) || in[i].dtype != in[0].dtype) return false;
        return node.outputs().size() == 1 && node.attrs().find("axis") != nullptr;
      case Kind::kSplit: return xs.rank_known() && xs.rank() > 0;
      case Kind::kSlice: {
        if (!known_rank_at_most(xs, kMaxDims) || node.outputs().size() != 1) return false;
        SliceParams p;
        return slice_params(node, static_cast<int64_t>(xs.rank()), &p) || slice_device_params_ok(node, in);
      }
      case Kind::kGather:
        return in.size() == 2 && has_input(in, 1) && is_index_type(in[1].dtype) && xs.rank_known() && xs.rank() > 0;
      case Kind::kGatherElements:
        return in.size() == 2 && has_input(in, 1) && is_index_type(in[1].dtype) && known_rank_at_most(xs, kMaxDims) &&
               xs.rank() > 0 && in[1].shape.rank_known() && in[1].shape.rank() == xs.rank();
      case Kind::kGatherND:
        return in.size() == 2 && has_input(in, 1) && in[1].dtype == DataType::kInt64 && xs.rank_known() &&
               xs.rank() > 0 && in[1].shape.rank_known() && in[1].shape.rank() > 0 &&
               node.attrs().get_int("batch_dims", 0) == 0;
      case Kind::kScatterND: {
        const ir::Attribute* r = node.attrs().find("reduction");
        if (r != nullptr && r->s != "none") return false;
        return in.size() == 3 && has_input(in, 1) && has_input(in, 2) && in[1].dtype == DataType::kInt64 &&
               in[2].dtype == in[0].dtype && xs.rank_known() && in[1].shape.rank_known() && in[1].shape.rank() > 0;
      }
      case Kind::kExpand: {
        const ir::Shape& ys = node.output(0)->shape();
        return known_rank_at_most(xs, kMaxDims) && known_rank_at_most(ys, kMaxDims) && ys.rank() >= xs.rank();
      }
      case Kind::kTile: return known_rank_at_most(xs, kMaxDims);
      case Kind::kDepthToSpace:
      case Kind::kSpaceToDepth: {
        const ir::Attribute* m = node.attrs().find("mode");
        return xs.rank_known() && xs.rank() == 4 && node.attrs().get_int("blocksize", 0) > 0 &&
               (m == nullptr || m->s == "DCR" || m->s == "CRD");
      }
      case Kind::kPad: {
        if (!known_rank_at_most(xs, kMaxDims) || node.outputs().size() != 1) return false;
        if (has_input(in, 2) && in[2].dtype != in[0].dtype) return false;
        PadParams p;
        return pad_params(node, static_cast<int64_t>(xs.rank()), &p) ||
               pad_device_params_ok(node, in, static_cast<int64_t>(xs.rank()));
      }
      default: return false;
    }
  }

  /// Slice and Pad whose parameters are computed tensors keep the starts/steps a kernel
  /// derives from them in the workspace; everything else needs none.
  uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& shapes) const override {
    return needs_device_starts(node, shapes.empty() ? 0 : static_cast<int64_t>(shapes[0].size()))
               ? kStartStepBytes
               : 0;
  }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty())
      return internal_error("cuda.data_movement: step without a node or outputs");
    const ir::Node& node = *io.node;
    for (const Tensor& t : *io.outputs)
      if (!t.defined()) return internal_error(node.describe(), ": ", name(), " needs every output planned");
    if (kind_ != Kind::kConstantOfShape && (io.inputs.empty() || io.inputs[0] == nullptr))
      return internal_error(node.describe(), ": input 0 missing");
    auto stream = static_cast<cudaStream_t>(io.stream);
    cudaError_t err = cudaSuccess;
    INGOT_RETURN_IF_ERROR(run(node, io, stream, &err));
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  static constexpr uint64_t kStartStepBytes = 2 * kMaxDims * sizeof(int64_t);

  bool needs_device_starts(const ir::Node& node, int64_t rank) const {
    if (kind_ == Kind::kSlice) {
      SliceParams p;
      return !slice_params(node, rank, &p);
    }
    if (kind_ == Kind::kPad) {
      PadParams p;
      return !pad_params(node, rank, &p);
    }
    return false;
  }

  static bool range_type(DataType t, RangeType* out) {
    switch (t) {
      case DataType::kFloat32: *out = RangeType::kF32; return true;
      case DataType::kFloat64: *out = RangeType::kF64; return true;
      case DataType::kInt16: *out = RangeType::kI16; return true;
      case DataType::kInt32: *out = RangeType::kI32; return true;
      case DataType::kInt64: *out = RangeType::kI64; return true;
      default: return false;
    }
  }

  Status mismatch(const ir::Node& node, const Tensor& x, const Tensor& y) const {
    return internal_error(node.describe(), ": input ", data_type_name(x.dtype()), shape_to_string(x.shape()),
                          " and output ", data_type_name(y.dtype()), shape_to_string(y.shape()),
                          " do not match the tactic ", name());
  }

  Status run(const ir::Node& node, StepIO& io, cudaStream_t stream, cudaError_t* err) const {
    Tensor& y = (*io.outputs)[0];
    switch (kind_) {
      case Kind::kConstantOfShape: {
        const Tensor* v = node.attrs().get_tensor("value");
        uint64_t bits = 0;
        int32_t eb = 4;
        if (v != nullptr) {
          eb = element_bytes(v->dtype());
          if (eb == 0 || v->numel() != 1 || v->dtype() != y.dtype()) return internal_error(node.describe(), ": value");
          std::memcpy(&bits, v->raw(), static_cast<size_t>(eb));
        } else if (y.dtype() != DataType::kFloat32) {
          return internal_error(node.describe(), ": output must be float32 without a value");
        }
        *err = launch_fill(eb, y.mutable_raw(), y.numel(), bits, stream);
        return Status::Ok();
      }
      case Kind::kRange: {
        RangeType t;
        if (io.inputs.size() < 3 || !io.inputs[1] || !io.inputs[2] || !range_type(y.dtype(), &t) || y.rank() != 1 ||
            io.inputs[0]->dtype() != y.dtype() || io.inputs[2]->dtype() != y.dtype() ||
            io.inputs[0]->numel() != 1 || io.inputs[2]->numel() != 1)
          return internal_error(node.describe(), ": start, limit and delta must be scalars of the output type");
        *err = launch_range(t, io.inputs[0]->raw(), io.inputs[2]->raw(), y.mutable_raw(), y.numel(), stream);
        return Status::Ok();
      }
      case Kind::kShape: {
        const Tensor& x = *io.inputs[0];
        const int64_t rank = static_cast<int64_t>(x.rank());
        int64_t start = node.attrs().get_int("start", 0);
        if (start < 0) start += rank;
        start = start < 0 ? 0 : (start > rank ? rank : start);
        SmallValues v;
        if (y.dtype() != DataType::kInt64 || y.numel() > kMaxSmallValues || start + y.numel() > rank)
          return mismatch(node, x, y);
        v.count = static_cast<int32_t>(y.numel());
        for (int32_t i = 0; i < v.count; ++i) v.v[i] = x.dim(static_cast<size_t>(start + i));
        *err = launch_write_values(y.mutable_data<int64_t>(), v, stream);
        return Status::Ok();
      }
      case Kind::kSize: {
        const Tensor& x = *io.inputs[0];
        if (y.dtype() != DataType::kInt64 || y.numel() != 1) return mismatch(node, x, y);
        SmallValues v;
        v.count = 1;
        v.v[0] = x.numel();
        *err = launch_write_values(y.mutable_data<int64_t>(), v, stream);
        return Status::Ok();
      }
      default: break;
    }
    const Tensor& x = *io.inputs[0];
    const int32_t eb = element_bytes(x.dtype());
    if (eb == 0) return mismatch(node, x, y);
    for (const Tensor& o : *io.outputs)
      if (o.dtype() != x.dtype()) return mismatch(node, x, o);
    switch (kind_) {
      case Kind::kCopy:
        if (y.numel() != x.numel()) return mismatch(node, x, y);
        if (!io.in_place && y.raw() != x.raw() && x.nbytes() > 0)
          *err = cudaMemcpyAsync(y.mutable_raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream);
        return Status::Ok();
      case Kind::kConcat: return concat(node, io, y, eb, stream, err);
      case Kind::kSplit: return split(node, x, io, eb, stream, err);
      case Kind::kSlice: {
        const int64_t rank = static_cast<int64_t>(x.rank());
        if (rank > kMaxDims || y.rank() != x.rank()) return mismatch(node, x, y);
        IndexMapDesc d = identity_map(x, y);
        SliceParams p;
        if (!slice_params(node, rank, &p)) return slice_on_device(node, io, x, y, d, eb, stream, err);
        for (size_t i = 0; i < p.count; ++i) {
          const auto a = static_cast<size_t>(p.axes[i]);
          int64_t s, e, count;
          ir::tensor_slice_range(x.dim(a), p.starts[i], p.ends[i], p.steps[i], &s, &e, &count);
          if (count != y.dim(a)) return mismatch(node, x, y);
          d.start[a] = s;
          d.step[a] = p.steps[i];
        }
        *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, nullptr, nullptr, stream);
        return Status::Ok();
      }
      case Kind::kExpand: {
        if (y.rank() > static_cast<size_t>(kMaxDims) || x.rank() > y.rank()) return mismatch(node, x, y);
        IndexMapDesc d;
        d.rank = static_cast<int32_t>(y.rank());
        int64_t xst[kMaxDims] = {};
        contiguous_strides(x.shape(), xst);
        const size_t off = y.rank() - x.rank();
        for (size_t i = 0; i < y.rank(); ++i) {
          d.out_dims[i] = d.in_dims[i] = y.dim(i);
          d.step[i] = 1;
          if (i < off) continue;
          const int64_t xd = x.dim(i - off);
          if (xd != y.dim(i) && xd != 1) return mismatch(node, x, y);
          d.in_strides[i] = xd == 1 ? 0 : xst[i - off];
        }
        *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, nullptr, nullptr, stream);
        return Status::Ok();
      }
      case Kind::kTile: {
        if (x.rank() > static_cast<size_t>(kMaxDims) || y.rank() != x.rank()) return mismatch(node, x, y);
        for (size_t i = 0; i < x.rank(); ++i)
          if (x.dim(i) == 0 ? y.dim(i) != 0 : y.dim(i) % x.dim(i) != 0) return mismatch(node, x, y);
        IndexMapDesc d = identity_map(x, y);
        d.mode = EdgeMode::kWrap;
        *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, nullptr, nullptr, stream);
        return Status::Ok();
      }
      case Kind::kPad: {
        const int64_t rank = static_cast<int64_t>(x.rank());
        if (rank > kMaxDims || y.rank() != x.rank()) return mismatch(node, x, y);
        PadParams p;
        const bool on_host = pad_params(node, rank, &p);
        if (!on_host && !pad_mode(node, &p.mode)) return mismatch(node, x, y);
        IndexMapDesc d = identity_map(x, y);
        d.mode = p.mode;
        for (size_t i = 0; i < x.rank(); ++i) {
          if (on_host && y.dim(i) != x.dim(i) + p.begin[i] + p.end[i]) return mismatch(node, x, y);
          if (x.dim(i) == 0 && y.numel() > 0 && p.mode != EdgeMode::kConstant)
            return invalid_argument(node.describe(), ": cannot pad the empty axis ", i, " in a non-constant mode");
          d.start[i] = -p.begin[i];
        }
        const Tensor* value = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
        if (value != nullptr && (value->numel() == 0 || p.mode != EdgeMode::kConstant)) value = nullptr;
        if (value != nullptr && value->dtype() != x.dtype())
          return invalid_argument(node.describe(), ": constant_value must have the input's type");
        const int64_t* starts = nullptr;
        if (!on_host) {
          INGOT_RETURN_IF_ERROR(pad_starts_on_device(node, io, rank, stream, err));
          if (*err != cudaSuccess) return Status::Ok();
          starts = static_cast<const int64_t*>(io.workspace);
        }
        *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, value ? value->raw() : nullptr, starts,
                                stream);
        return Status::Ok();
      }
      case Kind::kDepthToSpace:
      case Kind::kSpaceToDepth: {
        IndexMapDesc d;
        const ir::Attribute* m = node.attrs().find("mode");
        if (!depth_space_map(x.shape(), y.shape(), node.attrs().get_int("blocksize", 0), kind_ == Kind::kDepthToSpace,
                             m != nullptr && m->s == "CRD", &d))
          return mismatch(node, x, y);
        *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, nullptr, nullptr, stream);
        return Status::Ok();
      }
      case Kind::kGather: {
        const Tensor* idx = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
        int64_t axis;
        if (!idx || !is_index_type(idx->dtype()) || !norm_axis(node.attrs().get_int("axis", 0),
                                                              static_cast<int64_t>(x.rank()), &axis))
          return mismatch(node, x, y);
        int64_t outer = 1, inner = 1;
        for (size_t d = 0; d < x.rank(); ++d) {
          if (static_cast<int64_t>(d) < axis) outer *= x.dim(d);
          if (static_cast<int64_t>(d) > axis) inner *= x.dim(d);
        }
        const int64_t len = x.dim(static_cast<size_t>(axis));
        if (y.numel() != outer * idx->numel() * inner) return mismatch(node, x, y);
        *err = launch_gather(eb, x.raw(), idx->raw(), idx->dtype() == DataType::kInt64, y.mutable_raw(), outer, len,
                             inner, idx->numel(), stream);
        return Status::Ok();
      }
      case Kind::kGatherElements: {
        const Tensor* idx = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
        int64_t axis;
        const int64_t rank = static_cast<int64_t>(x.rank());
        if (!idx || !is_index_type(idx->dtype()) || rank > kMaxDims || idx->shape() != y.shape() ||
            y.rank() != x.rank() || !norm_axis(node.attrs().get_int("axis", 0), rank, &axis))
          return mismatch(node, x, y);
        GatherElementsDesc d;
        d.rank = static_cast<int32_t>(rank);
        d.axis = static_cast<int32_t>(axis);
        d.axis_len = x.dim(static_cast<size_t>(axis));
        contiguous_strides(x.shape(), d.x_strides);
        for (size_t i = 0; i < y.rank(); ++i) d.out_dims[i] = y.dim(i);
        *err = launch_gather_elements(eb, x.raw(), idx->raw(), idx->dtype() == DataType::kInt64, y.mutable_raw(),
                                      y.numel(), d, stream);
        return Status::Ok();
      }
      case Kind::kGatherND: {
        const Tensor* idx = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
        if (!idx || idx->dtype() != DataType::kInt64 || idx->rank() == 0) return mismatch(node, x, y);
        NdSlices nd;
        INGOT_RETURN_IF_ERROR(nd_slices(node, x, *idx, &nd));
        if (y.numel() != nd.slices * nd.slice_size) return mismatch(node, x, y);
        *err = launch_gather_nd(eb, x.raw(), idx->data<int64_t>(), y.mutable_raw(), nd.slices, nd.slice_size, nd.desc,
                                stream);
        return Status::Ok();
      }
      case Kind::kScatterND: {
        const Tensor* idx = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
        const Tensor* upd = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
        if (!idx || !upd || idx->dtype() != DataType::kInt64 || upd->dtype() != x.dtype() || idx->rank() == 0 ||
            y.shape() != x.shape())
          return mismatch(node, x, y);
        NdSlices nd;
        INGOT_RETURN_IF_ERROR(nd_slices(node, x, *idx, &nd));
        if (upd->numel() != nd.slices * nd.slice_size)
          return invalid_argument(node.describe(), ": updates hold ", upd->numel(), " elements, expected ",
                                  nd.slices * nd.slice_size);
        if (y.raw() != x.raw() && x.nbytes() > 0) {
          *err = cudaMemcpyAsync(y.mutable_raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream);
          if (*err != cudaSuccess) return Status::Ok();
        }
        *err = launch_scatter_nd(eb, upd->raw(), idx->data<int64_t>(), y.mutable_raw(), nd.slices, nd.slice_size,
                                 nd.desc, stream);
        return Status::Ok();
      }
      default: return internal_error(node.describe(), ": unhandled kind ", kind_name(kind_));
    }
  }

  /// Slice whose starts/axes/steps are computed: a one-thread kernel clamps them into the
  /// workspace, which the index map then reads (the counts are the output's dims).
  Status slice_on_device(const ir::Node& node, StepIO& io, const Tensor& x, Tensor& y, const IndexMapDesc& d,
                         int32_t eb, cudaStream_t stream, cudaError_t* err) const {
    const Tensor* starts = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
    const Tensor* axes = io.inputs.size() > 3 ? io.inputs[3] : nullptr;
    const Tensor* steps = io.inputs.size() > 4 ? io.inputs[4] : nullptr;
    if (starts == nullptr || !is_index_type(starts->dtype()) || starts->numel() > kMaxDims)
      return invalid_argument(node.describe(), ": starts must hold at most ", kMaxDims, " int32/int64 values");
    for (const Tensor* t : {axes, steps}) {
      if (t != nullptr && (t->dtype() != starts->dtype() || t->numel() != starts->numel()))
        return invalid_argument(node.describe(), ": axes and steps must match starts in type and length");
    }
    if (io.workspace == nullptr) return internal_error(node.describe(), ": no workspace for the slice starts");
    auto* start_step = static_cast<int64_t*>(io.workspace);
    *err = launch_slice_starts(starts->raw(), axes ? axes->raw() : nullptr, steps ? steps->raw() : nullptr,
                               starts->dtype() == DataType::kInt64, static_cast<int32_t>(starts->numel()),
                               static_cast<int32_t>(x.rank()), x.shape().data(), start_step, stream);
    if (*err != cudaSuccess) return Status::Ok();
    *err = launch_index_map(eb, x.raw(), y.mutable_raw(), y.numel(), d, nullptr, start_step, stream);
    return Status::Ok();
  }

  /// Pad whose pads are computed: a one-thread kernel writes -pads_begin per dim to the workspace.
  Status pad_starts_on_device(const ir::Node& node, StepIO& io, int64_t rank, cudaStream_t stream,
                              cudaError_t* err) const {
    const Tensor* pads = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
    const Tensor* axes = (node_opset(node) >= 18 && io.inputs.size() > 3) ? io.inputs[3] : nullptr;
    const int64_t count = axes ? axes->numel() : rank;
    if (pads == nullptr || pads->dtype() != DataType::kInt64 || pads->numel() != 2 * count || count > kMaxDims ||
        (axes != nullptr && !is_index_type(axes->dtype())))
      return invalid_argument(node.describe(), ": pads must hold 2 int64 values per padded axis");
    if (io.workspace == nullptr) return internal_error(node.describe(), ": no workspace for the pad starts");
    *err = launch_pad_starts(pads->data<int64_t>(), axes ? axes->raw() : nullptr,
                             axes != nullptr && axes->dtype() == DataType::kInt64, static_cast<int32_t>(count),
                             static_cast<int32_t>(rank), static_cast<int64_t*>(io.workspace), stream);
    return Status::Ok();
  }

  /// out dims = y's, in dims/strides = x's, start 0, step 1.
  static IndexMapDesc identity_map(const Tensor& x, const Tensor& y) {
    IndexMapDesc d;
    d.rank = static_cast<int32_t>(y.rank());
    contiguous_strides(x.shape(), d.in_strides);
    for (size_t i = 0; i < y.rank(); ++i) {
      d.out_dims[i] = y.dim(i);
      d.in_dims[i] = x.dim(i);
      d.step[i] = 1;
    }
    return d;
  }

  /// [outer, axis dim, inner] of `shape` at `axis`.
  static void axis_view(const Shape64& shape, int64_t axis, int64_t* outer, int64_t* inner) {
    *outer = *inner = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) < axis) *outer *= shape[d];
      if (static_cast<int64_t>(d) > axis) *inner *= shape[d];
    }
  }

  Status concat(const ir::Node& node, StepIO& io, Tensor& y, int32_t eb, cudaStream_t stream, cudaError_t* err) const {
    int64_t axis;
    if (!norm_axis(node.attrs().get_int("axis", 0), static_cast<int64_t>(y.rank()), &axis))
      return invalid_argument(node.describe(), ": axis out of range for rank ", y.rank());
    int64_t outer, inner;
    axis_view(y.shape(), axis, &outer, &inner);
    const int64_t y_len = y.dim(static_cast<size_t>(axis));
    int64_t at = 0;
    for (const Tensor* x : io.inputs) {
      if (x == nullptr || x->rank() != y.rank() || x->dtype() != y.dtype()) return mismatch(node, *io.inputs[0], y);
      const int64_t len = x->dim(static_cast<size_t>(axis));
      if (at + len > y_len) return mismatch(node, *x, y);
      at += len;
    }
    if (at != y_len) return mismatch(node, *io.inputs[0], y);
    *err = join(eb, true, y.mutable_raw(), y_len, outer, inner, io.inputs.size(), stream, [&](size_t i) {
      return std::make_pair(const_cast<void*>(io.inputs[i]->raw()), io.inputs[i]->dim(static_cast<size_t>(axis)));
    });
    return Status::Ok();
  }

  Status split(const ir::Node& node, const Tensor& x, StepIO& io, int32_t eb, cudaStream_t stream,
               cudaError_t* err) const {
    int64_t axis;
    if (!norm_axis(node.attrs().get_int("axis", 0), static_cast<int64_t>(x.rank()), &axis))
      return invalid_argument(node.describe(), ": axis out of range for rank ", x.rank());
    int64_t outer, inner;
    axis_view(x.shape(), axis, &outer, &inner);
    const int64_t x_len = x.dim(static_cast<size_t>(axis));
    int64_t at = 0;
    for (Tensor& y : *io.outputs) {
      if (y.rank() != x.rank()) return mismatch(node, x, y);
      const int64_t len = y.dim(static_cast<size_t>(axis));
      if (at + len > x_len) return mismatch(node, x, y);
      at += len;
    }
    *err = join(eb, false, const_cast<void*>(x.raw()), x_len, outer, inner, io.outputs->size(), stream, [&](size_t i) {
      Tensor& y = (*io.outputs)[i];
      return std::make_pair(y.mutable_raw(), y.dim(static_cast<size_t>(axis)));
    });
    return Status::Ok();
  }

  // Concat (`concat`) or Split of `count` parts along an axis of `joined_len` on the [outer, len,
  // inner] view, part(i) giving part i's data and its length along the axis: launch_join_rows in
  // launches of up to kMaxRowSegments parts from a stack buffer (enqueue allocates nothing).
  template <class Part>
  static cudaError_t join(int32_t eb, bool concat, void* joined, int64_t joined_len, int64_t outer, int64_t inner,
                          size_t count, cudaStream_t stream, Part&& part) {
    RowSegment parts[kMaxRowSegments];
    int32_t m = 0;
    int64_t at = 0;
    for (size_t i = 0; i < count; ++i) {
      const auto [data, len] = part(i);
      parts[m++] = RowSegment{data, at * inner, len * inner};
      at += len;
      if (m == kMaxRowSegments || i + 1 == count) {
        const cudaError_t e = launch_join_rows(eb, concat, joined, joined_len * inner, outer, parts, m, stream);
        if (e != cudaSuccess) return e;
        m = 0;
      }
    }
    return cudaSuccess;
  }
  Kind kind_;
};

}  // namespace

TacticFamily data_movement_family() {
  TacticFamily f;
  f.name = "data_movement";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Kind k;
    if (!classify(node, &k)) return out;
    auto t = std::make_unique<DataMovementTactic>(k);
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    for (Kind k : kAllKinds)
      if (name == std::string("cuda.data_movement.") + kind_name(k)) return std::make_unique<DataMovementTactic>(k);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
