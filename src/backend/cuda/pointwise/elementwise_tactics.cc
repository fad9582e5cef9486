// Copyright ingot authors. Apache-2.0.
//
// The elementwise tactic family of the cuda backend (host side): one Tactic per kind of kernel
// (unary/Cast, binary, Where, Softmax, LayerNormalization, Transpose). A tactic holds no
// per-node state: enqueue reads everything from io.node and the current shapes, so the engine
// rebuilds it from its name alone and serialize() is empty. enqueue allocates nothing: shapes
// go to the kernels in fixed-size descriptors.
//
// Broadcast and transpose index maps are simplified on the host before launch: size-1 output
// dims are dropped and neighbouring dims that every operand walks contiguously are merged, so
// [N,C,H,W] + [1,C,1,1] runs as the 3-D map [N, C, H*W] and same-shape operands take the
// vectorized 1-D path.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "ir/shape.h"

namespace ingot::backend::cuda {
namespace {

enum class Kind { kUnary, kBinary, kWhere, kCast, kSoftmax, kLayerNorm, kTranspose };

constexpr Kind kAllKinds[] = {Kind::kUnary,   Kind::kBinary,    Kind::kWhere,    Kind::kCast,
                              Kind::kSoftmax, Kind::kLayerNorm, Kind::kTranspose};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUnary: return "unary";
    case Kind::kBinary: return "binary";
    case Kind::kWhere: return "where";
    case Kind::kCast: return "cast";
    case Kind::kSoftmax: return "softmax";
    case Kind::kLayerNorm: return "layernorm";
    case Kind::kTranspose: return "transpose";
  }
  return "?";
}

bool is_onnx(const ir::Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }
bool is_ingot(const ir::Node& n) { return n.domain() == "ingot"; }
bool op_is(const ir::Node& n, const char* op) { return n.op_type() == op; }

int64_t node_opset(const ir::Node& n) { return n.owner() ? n.owner()->opset(n.domain()) : 0; }


bool is_kernel_float(DataType t) {
  FloatType f;
  return to_float_type(t, &f);
}

bool to_cast_type(DataType t, CastType* out) {
  switch (t) {
    case DataType::kBool: *out = CastType::kBool; return true;
    case DataType::kInt8: *out = CastType::kI8; return true;
    case DataType::kUInt8: *out = CastType::kU8; return true;
    case DataType::kInt16: *out = CastType::kI16; return true;
    case DataType::kUInt16: *out = CastType::kU16; return true;
    case DataType::kInt32: *out = CastType::kI32; return true;
    case DataType::kUInt32: *out = CastType::kU32; return true;
    case DataType::kInt64: *out = CastType::kI64; return true;
    case DataType::kUInt64: *out = CastType::kU64; return true;
    case DataType::kFloat16: *out = CastType::kF16; return true;
    case DataType::kBFloat16: *out = CastType::kBF16; return true;
    case DataType::kFloat32: *out = CastType::kF32; return true;
    case DataType::kFloat64: *out = CastType::kF64; return true;
    default: return false;
  }
}

/// A Cast launch_cast takes: from integer/bool to any numeric type, or from a float to bool.
bool is_general_cast(DataType in, DataType out) {
  CastType a, b;
  if (!to_cast_type(in, &a) || !to_cast_type(out, &b)) return false;
  const bool float_in = a == CastType::kF16 || a == CastType::kBF16 || a == CastType::kF32 || a == CastType::kF64;
  return !float_in || b == CastType::kBool;
}

/// The unary op a node maps to (Gelu's approximate attribute picks the variant).
bool unary_op(const ir::Node& n, UnaryOp* op) {
  const std::string& t = n.op_type();
  if (is_ingot(n)) {
    if (t == "Silu") { *op = UnaryOp::kSilu; return true; }
    if (t != "Gelu") return false;
  } else if (!is_onnx(n)) {
    return false;
  }
  if (t == "Gelu") {
    const ir::Attribute* a = n.attrs().find("approximate");
    if (a == nullptr || a->s == "none") { *op = UnaryOp::kGelu; return true; }
    if (a->s == "tanh") { *op = UnaryOp::kGeluTanh; return true; }
    return false;
  }
  static const struct { const char* name; UnaryOp op; } kOps[] = {
      {"Identity", UnaryOp::kIdentity}, {"Relu", UnaryOp::kRelu},
      {"Sigmoid", UnaryOp::kSigmoid},   {"Tanh", UnaryOp::kTanh},
      {"Exp", UnaryOp::kExp},           {"Log", UnaryOp::kLog},
      {"Sqrt", UnaryOp::kSqrt},         {"Abs", UnaryOp::kAbs},
      {"Neg", UnaryOp::kNeg},           {"Reciprocal", UnaryOp::kReciprocal},
      {"Erf", UnaryOp::kErf},           {"LeakyRelu", UnaryOp::kLeakyRelu},
      {"HardSigmoid", UnaryOp::kHardSigmoid}, {"HardSwish", UnaryOp::kHardSwish},
      {"Softplus", UnaryOp::kSoftplus}, {"Clip", UnaryOp::kClip},
  };
  for (const auto& e : kOps) {
    if (t == e.name) { *op = e.op; return true; }
  }
  return false;
}

bool binary_op(const ir::Node& n, BinaryOp* op) {
  if (!is_onnx(n)) return false;
  static const struct { const char* name; BinaryOp op; } kOps[] = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin},
  };
  for (const auto& e : kOps) {
    if (n.op_type() == e.name) { *op = e.op; return true; }
  }
  return false;
}

/// int32/int64 Add, Sub, Mul, Max, Min (launch_binary_int); integer Div and Pow stay on the host.
bool integer_binary(const ir::Node& n, DataType t) {
  BinaryOp op;
  return (t == DataType::kInt32 || t == DataType::kInt64) && binary_op(n, &op) && op != BinaryOp::kDiv &&
         op != BinaryOp::kPow;
}

/// Which kind of kernel serves a node, by op alone (supports() then checks the rest).
bool classify(const ir::Node& n, Kind* kind) {
  UnaryOp u;
  BinaryOp b;
  if (unary_op(n, &u)) { *kind = Kind::kUnary; return true; }
  if (binary_op(n, &b)) { *kind = Kind::kBinary; return true; }
  if (is_onnx(n) && op_is(n, "Where")) { *kind = Kind::kWhere; return true; }
  if (is_onnx(n) && op_is(n, "Cast")) { *kind = Kind::kCast; return true; }
  if (is_onnx(n) && op_is(n, "Softmax")) { *kind = Kind::kSoftmax; return true; }
  if ((is_onnx(n) || is_ingot(n)) && op_is(n, "LayerNormalization")) { *kind = Kind::kLayerNorm; return true; }
  if (is_onnx(n) && op_is(n, "Transpose")) { *kind = Kind::kTranspose; return true; }
  return false;
}

bool has_input(const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && in[i].dtype != DataType::kUndefined;
}

bool known_rank_at_most(const ir::Shape& s, size_t max_rank) { return s.rank_known() && s.rank() <= max_rank; }

/// A shape that certainly holds one element.
bool is_scalar_shape(const ir::Shape& s) {
  if (!s.rank_known()) return false;
  for (const ir::Dim& d : s.dims())
    if (!d.is_known() || d.value() != 1) return false;
  return true;
}

/// Only output 0 is produced (LayerNormalization's Mean/InvStdDev must be omitted).
bool only_first_output(const ir::Node& n) {
  for (size_t o = 1; o < n.outputs().size(); ++o)
    if (n.output(o) != nullptr) return false;
  return n.output(0) != nullptr;
}

/// Softmax's [outer, len, inner] view: opset >= 13 reduces one axis; older opsets coerce the
/// input to 2-D at `axis` and reduce everything after it.
bool softmax_view(int64_t opset, const ir::Attributes& attrs, const Shape64& shape, int64_t* outer, int64_t* len,
                  int64_t* inner) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  *outer = *len = *inner = 1;
  if (opset >= 13) {
    int64_t a = attrs.get_int("axis", -1);
    if (rank == 0) return a == 0 || a == -1;
    if (a < -rank || a >= rank) return false;
    if (a < 0) a += rank;
    for (int64_t d = 0; d < rank; ++d) (d < a ? *outer : d == a ? *len : *inner) *= shape[static_cast<size_t>(d)];
    return true;
  }
  int64_t a = attrs.get_int("axis", 1);
  if (a < -rank || a > rank) return false;
  if (a < 0) a += rank;
  for (int64_t d = 0; d < rank; ++d) (d < a ? *outer : *len) *= shape[static_cast<size_t>(d)];
  return true;
}

/// Transpose's permutation (default: reversed dims); false unless a permutation of rank dims.
bool transpose_perm(const ir::Node& n, size_t rank, int64_t (&perm)[kMaxDims]) {
  if (rank > static_cast<size_t>(kMaxDims)) return false;
  const ir::Attribute* a = n.attrs().find("perm");
  bool seen[kMaxDims] = {};
  for (size_t i = 0; i < rank; ++i) {
    int64_t p = static_cast<int64_t>(rank - 1 - i);
    if (a != nullptr) {
      if (a->ints.size() != rank) return false;
      p = a->ints[i];
    }
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) return false;
    seen[p] = true;
    perm[i] = p;
  }
  return true;
}

/// LayerNormalization's reduced region starts at `axis`; scale (and B) must cover exactly the
/// region X.shape[axis:] (leading 1s on either side are fine) so a row's i-th element pairs
/// with the i-th gamma element.
bool layernorm_param_fits(const ir::Shape& x, int64_t axis, const ir::Shape& p) {
  if (!p.rank_known()) return false;
  const int64_t region = static_cast<int64_t>(x.rank()) - axis;
  const int64_t pr = static_cast<int64_t>(p.rank());
  const int64_t common = region < pr ? region : pr;
  for (int64_t i = 1; i <= common; ++i)
    if (x[static_cast<size_t>(x.rank() - i)] != p[static_cast<size_t>(pr - i)]) return false;
  for (int64_t i = common + 1; i <= region; ++i) {  // region dims the parameter does not cover
    const ir::Dim& d = x[static_cast<size_t>(x.rank() - i)];
    if (!d.is_known() || d.value() != 1) return false;
  }
  for (int64_t i = common + 1; i <= pr; ++i) {  // extra leading parameter dims
    const ir::Dim& d = p[static_cast<size_t>(pr - i)];
    if (!d.is_known() || d.value() != 1) return false;
  }
  return true;
}

/// Index map for `nops` operands read at output index i: output dims plus each operand's element
/// strides (0 where it broadcasts), with size-1 dims dropped and contiguous neighbours merged.
/// `shapes[k]` are the operands' shapes (right-aligned against `out`); `strides` may give the
/// operands' strides per output dim instead (Transpose), in which case shapes is unused.
bool build_index_map(const Shape64& out, int nops, const Shape64* const* shapes, const int64_t (*strides)[kMaxDims],
                     BroadcastDesc* d) {
  const int r = static_cast<int>(out.size());
  if (r > kMaxDims || nops > 3) return false;
  int64_t st[3][kMaxDims] = {};
  for (int k = 0; k < nops; ++k) {
    if (strides != nullptr) {
      for (int i = 0; i < r; ++i) st[k][i] = strides[k][i];
      continue;
    }
    const Shape64& s = *shapes[k];
    const int rk = static_cast<int>(s.size());
    if (rk > r) return false;
    int64_t running = 1;
    for (int j = rk - 1; j >= 0; --j) {
      const int i = j + (r - rk);
      if (s[static_cast<size_t>(j)] != out[static_cast<size_t>(i)] && s[static_cast<size_t>(j)] != 1) return false;
      st[k][i] = s[static_cast<size_t>(j)] == 1 ? 0 : running;
      running *= s[static_cast<size_t>(j)];
    }
  }
  d->rank = 0;
  for (int i = 0; i < r; ++i) {
    const int64_t size = out[static_cast<size_t>(i)];
    if (size == 1) continue;
    if (d->rank > 0) {
      const int p = d->rank - 1;
      bool merge = true;
      for (int k = 0; k < nops; ++k) merge = merge && d->strides[k][p] == st[k][i] * size;
      if (merge) {
        d->dims[p] *= size;
        for (int k = 0; k < nops; ++k) d->strides[k][p] = st[k][i];
        continue;
      }
    }
    d->dims[d->rank] = size;
    for (int k = 0; k < nops; ++k) d->strides[k][d->rank] = st[k][i];
    ++d->rank;
  }
  return true;
}

/// The map reads every operand contiguously in output order (the vectorized case).
bool is_flat(const BroadcastDesc& d, int nops) {
  if (d.rank == 0) return true;
  if (d.rank > 1) return false;
  for (int k = 0; k < nops; ++k)
    if (d.strides[k][0] != 1) return false;
  return true;
}

class ElementwiseTactic final : public Tactic {
 public:
  explicit ElementwiseTactic(Kind kind) : kind_(kind) {}

  std::string name() const override { return std::string("cuda.elementwise.") + kind_name(kind_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    Kind k;
    if (!classify(node, &k) || k != kind_) return false;
    if (!only_first_output(node) || node.output(0)->dtype() == DataType::kUndefined) return false;
    const DataType out = node.output(0)->dtype();
    switch (kind_) {
      case Kind::kUnary: return supports_unary(node, in, out);
      case Kind::kBinary: {
        if (in.size() != 2 || !has_input(in, 0) || !has_input(in, 1)) return false;
        if (in[1].dtype != in[0].dtype || out != in[0].dtype) return false;
        if (!is_kernel_float(in[0].dtype) && !integer_binary(node, in[0].dtype)) return false;
        return known_rank_at_most(in[0].shape, kMaxDims) && known_rank_at_most(in[1].shape, kMaxDims);
      }
      case Kind::kWhere: {
        if (in.size() != 3 || !has_input(in, 0) || !has_input(in, 1) || !has_input(in, 2)) return false;
        if (in[0].dtype != DataType::kBool || !is_kernel_float(in[1].dtype) || in[2].dtype != in[1].dtype ||
            out != in[1].dtype)
          return false;
        for (size_t i = 0; i < 3; ++i)
          if (!known_rank_at_most(in[i].shape, kMaxDims)) return false;
        return true;
      }
      case Kind::kCast:
        return in.size() == 1 && has_input(in, 0) &&
               ((is_kernel_float(in[0].dtype) && is_kernel_float(out)) || is_general_cast(in[0].dtype, out));
      case Kind::kSoftmax: {
        if (in.size() != 1 || !has_input(in, 0) || !is_kernel_float(in[0].dtype) || out != in[0].dtype) return false;
        if (!in[0].shape.rank_known()) return false;
        Shape64 ones(in[0].shape.rank(), 1);  // only the axis is checked here
        int64_t o, l, i;
        return softmax_view(node_opset(node), node.attrs(), ones, &o, &l, &i);
      }
      case Kind::kLayerNorm: return supports_layernorm(node, in, out);
      case Kind::kTranspose: {
        if (in.size() != 1 || !has_input(in, 0) || out != in[0].dtype) return false;
        const int bits = data_type_bits(in[0].dtype);
        if (in[0].dtype == DataType::kString || !(bits == 8 || bits == 16 || bits == 32 || bits == 64)) return false;
        if (!known_rank_at_most(in[0].shape, kMaxDims)) return false;
        int64_t perm[kMaxDims];
        return transpose_perm(node, in[0].shape.rank(), perm);
      }
    }
    return false;
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined())
      return internal_error("cuda.elementwise: step without a node or a defined output 0");
    const ir::Node& node = *io.node;
    if (io.inputs.empty() || io.inputs[0] == nullptr) return internal_error(node.describe(), ": input 0 missing");
    auto stream = static_cast<cudaStream_t>(io.stream);
    Tensor& y = (*io.outputs)[0];
    cudaError_t err = cudaSuccess;
    switch (kind_) {
      case Kind::kUnary: {
        INGOT_RETURN_IF_ERROR(enqueue_unary(node, io, y, stream, &err));
        break;
      }
      case Kind::kCast: {
        const Tensor& x = *io.inputs[0];
        FloatType ti, to;
        CastType ci, co;
        if (x.numel() != y.numel()) return internal_error(node.describe(), ": Cast sizes differ");
        if (to_float_type(x.dtype(), &ti) && to_float_type(y.dtype(), &to))
          err = launch_unary(UnaryOp::kIdentity, UnaryParams{}, ti, to, x.raw(), y.mutable_raw(), y.numel(), stream);
        else if (is_general_cast(x.dtype(), y.dtype()) && to_cast_type(x.dtype(), &ci) && to_cast_type(y.dtype(), &co))
          err = launch_cast(ci, co, x.raw(), y.mutable_raw(), y.numel(), stream);
        else
          return internal_error(node.describe(), ": Cast types do not match the tactic");
        break;
      }
      case Kind::kBinary: {
        BinaryOp op;
        FloatType t = FloatType::kF32;  // set by to_float_type unless the op is on integers
        const bool ints = integer_binary(node, y.dtype());
        if (io.inputs.size() < 2 || io.inputs[1] == nullptr || !binary_op(node, &op) ||
            (!ints && !to_float_type(y.dtype(), &t)))
          return internal_error(node.describe(), ": inputs or types do not match the tactic");
        const Tensor& a = *io.inputs[0];
        const Tensor& b = *io.inputs[1];
        const Shape64* shapes[2] = {&a.shape(), &b.shape()};
        BroadcastDesc d;
        if (a.dtype() != y.dtype() || b.dtype() != y.dtype() || !build_index_map(y.shape(), 2, shapes, nullptr, &d))
          return internal_error(node.describe(), ": shapes ", shape_to_string(a.shape()), " and ",
                                shape_to_string(b.shape()), " do not broadcast to ", shape_to_string(y.shape()),
                                " within ", kMaxDims, " dims");
        if (ints)
          err = launch_binary_int(op, y.dtype() == DataType::kInt64, a.raw(), b.raw(), y.mutable_raw(), y.numel(), d,
                                  stream);
        else
          err = is_flat(d, 2) ? launch_binary_same_shape(op, t, a.raw(), b.raw(), y.mutable_raw(), y.numel(), stream)
                              : launch_binary(op, t, a.raw(), b.raw(), y.mutable_raw(), y.numel(), d, stream);
        break;
      }
      case Kind::kWhere: {
        FloatType t;
        if (io.inputs.size() < 3 || io.inputs[1] == nullptr || io.inputs[2] == nullptr ||
            !to_float_type(y.dtype(), &t))
          return internal_error(node.describe(), ": inputs or types do not match the tactic");
        const Tensor& c = *io.inputs[0];
        const Tensor& a = *io.inputs[1];
        const Tensor& b = *io.inputs[2];
        const Shape64* shapes[3] = {&c.shape(), &a.shape(), &b.shape()};
        BroadcastDesc d;
        if (c.dtype() != DataType::kBool || a.dtype() != y.dtype() || b.dtype() != y.dtype() ||
            !build_index_map(y.shape(), 3, shapes, nullptr, &d))
          return internal_error(node.describe(), ": inputs do not broadcast to ", shape_to_string(y.shape()),
                                " within ", kMaxDims, " dims");
        err = launch_where(t, static_cast<const uint8_t*>(c.raw()), a.raw(), b.raw(), y.mutable_raw(), y.numel(), d,
                           stream);
        break;
      }
      case Kind::kSoftmax: {
        const Tensor& x = *io.inputs[0];
        FloatType t;
        int64_t outer, len, inner;
        if (!to_float_type(x.dtype(), &t) || x.dtype() != y.dtype() || x.numel() != y.numel() ||
            !softmax_view(node_opset(node), node.attrs(), x.shape(), &outer, &len, &inner))
          return internal_error(node.describe(), ": input ", shape_to_string(x.shape()), " does not match the tactic");
        err = launch_softmax(t, x.raw(), y.mutable_raw(), outer, len, inner, stream);
        break;
      }
      case Kind::kLayerNorm: {
        INGOT_RETURN_IF_ERROR(enqueue_layernorm(node, io, y, stream, &err));
        break;
      }
      case Kind::kTranspose: {
        const Tensor& x = *io.inputs[0];
        int64_t perm[kMaxDims];
        if (x.dtype() != y.dtype() || x.numel() != y.numel() || !transpose_perm(node, x.rank(), perm) ||
            y.rank() != x.rank())
          return internal_error(node.describe(), ": input ", shape_to_string(x.shape()), " does not match the tactic");
        // Output dim i walks input dim perm[i].
        int64_t in_strides[1][kMaxDims] = {};
        int64_t running = 1;
        int64_t row_major[kMaxDims] = {};
        for (size_t j = x.rank(); j-- > 0;) {
          row_major[j] = running;
          running *= x.dim(j);
        }
        for (size_t i = 0; i < x.rank(); ++i) in_strides[0][i] = row_major[perm[i]];
        BroadcastDesc d;
        if (!build_index_map(y.shape(), 1, nullptr, in_strides, &d))
          return internal_error(node.describe(), ": rank ", x.rank(), " above ", kMaxDims);
        err = launch_transpose(data_type_bits(x.dtype()) / 8, x.raw(), y.mutable_raw(), d.rank, d.dims, d.strides[0],
                               y.numel(), stream);
        break;
      }
    }
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  static bool supports_unary(const ir::Node& node, const std::vector<ir::TensorType>& in, DataType out) {
    UnaryOp op;
    if (!unary_op(node, &op) || in.empty() || !has_input(in, 0)) return false;
    const DataType t = in[0].dtype;
    if (out != t) return false;
    if (op == UnaryOp::kIdentity) {
      // Any fixed-width type: a device-to-device copy.
      return t != DataType::kString && t != DataType::kUndefined && !is_sub_byte(t) && data_type_bits(t) % 8 == 0;
    }
    if (!is_kernel_float(t)) return false;
    if (op != UnaryOp::kClip) return in.size() == 1;
    if (in.size() > 3) return false;
    if (node_opset(node) < 11) return in.size() == 1;
    for (size_t i = 1; i < in.size(); ++i) {
      if (!has_input(in, i)) continue;
      if (in[i].dtype != t || !is_scalar_shape(in[i].shape)) return false;
    }
    return true;
  }

  static bool supports_layernorm(const ir::Node& node, const std::vector<ir::TensorType>& in, DataType out) {
    if (in.size() < 2 || in.size() > 3 || !has_input(in, 0) || !has_input(in, 1)) return false;
    const DataType t = in[0].dtype;
    if (!is_kernel_float(t) || out != t || in[1].dtype != t) return false;
    if (has_input(in, 2) && in[2].dtype != t) return false;
    if (node.attrs().get_int("stash_type", 1) != 1) return false;  // we reduce in fp32 only
    const ir::Shape& xs = in[0].shape;
    if (!xs.rank_known() || xs.rank() == 0) return false;
    const int64_t rank = static_cast<int64_t>(xs.rank());
    int64_t axis = node.attrs().get_int("axis", -1);
    if (axis < -rank || axis >= rank) return false;
    if (axis < 0) axis += rank;
    if (!layernorm_param_fits(xs, axis, in[1].shape)) return false;
    return !has_input(in, 2) || layernorm_param_fits(xs, axis, in[2].shape);
  }

  Status enqueue_unary(const ir::Node& node, StepIO& io, Tensor& y, cudaStream_t stream, cudaError_t* err) const {
    const Tensor& x = *io.inputs[0];
    UnaryOp op;
    if (!unary_op(node, &op) || x.dtype() != y.dtype() || x.numel() != y.numel())
      return internal_error(node.describe(), ": types or sizes do not match the tactic");
    FloatType t;
    if (!to_float_type(x.dtype(), &t)) {
      if (op != UnaryOp::kIdentity) return internal_error(node.describe(), ": type ", data_type_name(x.dtype()));
      if (x.raw() != y.raw() && x.nbytes() > 0)
        *err = cudaMemcpyAsync(y.mutable_raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream);
      return Status::Ok();
    }
    UnaryParams p;
    switch (op) {
      case UnaryOp::kLeakyRelu: p.alpha = node.attrs().get_float("alpha", 0.01f); break;
      case UnaryOp::kHardSigmoid:
        p.alpha = node.attrs().get_float("alpha", 0.2f);
        p.beta = node.attrs().get_float("beta", 0.5f);
        break;
      case UnaryOp::kClip:
        p.lo = -INFINITY;
        p.hi = INFINITY;
        if (node_opset(node) < 11) {
          p.lo = node.attrs().get_float("min", -FLT_MAX);
          p.hi = node.attrs().get_float("max", FLT_MAX);
          break;
        }
        for (size_t i = 1; i < 3 && i < io.inputs.size(); ++i) {
          const Tensor* b = io.inputs[i];
          if (b == nullptr) continue;
          if (b->numel() != 1 || b->dtype() != x.dtype())
            return internal_error(node.describe(), ": ", i == 1 ? "min" : "max", " must be a scalar of the input type");
          (i == 1 ? p.lo_ptr : p.hi_ptr) = b->raw();
        }
        break;
      default: break;
    }
    *err = launch_unary(op, p, t, t, x.raw(), y.mutable_raw(), y.numel(), stream);
    return Status::Ok();
  }

  Status enqueue_layernorm(const ir::Node& node, StepIO& io, Tensor& y, cudaStream_t stream, cudaError_t* err) const {
    const Tensor& x = *io.inputs[0];
    const Tensor* gamma = io.inputs.size() > 1 ? io.inputs[1] : nullptr;
    const Tensor* beta = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
    FloatType t;
    const int64_t rank = static_cast<int64_t>(x.rank());
    int64_t axis = node.attrs().get_int("axis", -1);
    if (gamma == nullptr || !to_float_type(x.dtype(), &t) || x.dtype() != y.dtype() || x.numel() != y.numel() ||
        rank == 0 || axis < -rank || axis >= rank)
      return internal_error(node.describe(), ": inputs do not match the tactic");
    if (axis < 0) axis += rank;
    int64_t outer = 1, len = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : len) *= x.dim(static_cast<size_t>(d));
    if (gamma->numel() != len || gamma->dtype() != x.dtype() ||
        (beta != nullptr && (beta->numel() != len || beta->dtype() != x.dtype())))
      return internal_error(node.describe(), ": Scale/B must hold the ", len, " elements of the normalized dims");
    *err = launch_layernorm(t, x.raw(), gamma->raw(), beta ? beta->raw() : nullptr, y.mutable_raw(), outer, len,
                            node.attrs().get_float("epsilon", 1e-5f), stream);
    return Status::Ok();
  }

  Kind kind_;
};

}  // namespace

TacticFamily elementwise_family() {
  TacticFamily f;
  f.name = "elementwise";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    Kind k;
    if (!classify(node, &k)) return out;
    auto t = std::make_unique<ElementwiseTactic>(k);
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    for (Kind k : kAllKinds) {
      if (name == std::string("cuda.elementwise.") + kind_name(k)) return std::make_unique<ElementwiseTactic>(k);
    }
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
