// Copyright ingot authors. Apache-2.0.
//
// Linear quantization kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv. Integer products accumulate in
// int64 (exact), scales are applied in double after rounding each factor the way the ONNX
// reference does (in the scale's own type).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_quant_linear_kernels(KernelRegistry& r);

namespace {

/// Rounds v to the precision of float type t (identity for f64 and non-float types).
double round_to(DataType t, double v) {
  switch (t) {
    case DataType::kFloat32: return static_cast<float>(v);
    case DataType::kFloat16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DataType::kBFloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(static_cast<float>(v)));
    default: return v;
  }
}

/// numpy's result type for a binary float operation between a and b.
DataType promote(DataType a, DataType b) {
  if (a == b && is_float(a)) return a;
  if (a == DataType::kFloat64 || b == DataType::kFloat64 || !is_float(a) || !is_float(b)) return DataType::kFloat64;
  return DataType::kFloat32;
}

/// Maps each flat element of x (shape `xs`) to the element of a quantization parameter
/// (scale / zero point of shape `ps`): per-tensor, per-axis or blocked.
class ParamIndex {
 public:
  Status init(KernelContext& k, const Shape64& xs, const Shape64& ps, int64_t axis, int64_t block) {
    int64_t pn = shape_numel(ps);
    if (pn == 1) { mode_ = 0; return Status::Ok(); }
    int64_t rank = static_cast<int64_t>(xs.size());
    if (axis < -rank || axis >= rank) return k.error("axis ", axis, " out of range for rank ", rank);
    if (axis < 0) axis += rank;
    dim_ = xs[axis];
    inner_ = 1;
    for (int64_t d = axis + 1; d < rank; ++d) inner_ *= xs[d];
    if (block > 0) {
      if (static_cast<int64_t>(ps.size()) != rank) return k.error("blocked quantization needs a scale of rank ", rank);
      for (int64_t d = 0; d < rank; ++d) {
        if (d == axis) continue;
        if (ps[d] != xs[d]) return k.error("scale shape ", shape_to_string(ps), " does not match input ", shape_to_string(xs));
      }
      pdim_ = ps[axis];
      if (pdim_ != (dim_ + block - 1) / block)
        return k.error("block_size ", block, " does not fit axis length ", dim_, " with ", pdim_, " blocks");
      block_ = block;
      mode_ = 2;
      return Status::Ok();
    }
    if (ps.size() != 1 || ps[0] != dim_)
      return k.error("scale shape ", shape_to_string(ps), " is neither a scalar nor a vector of length ", dim_,
                     " (axis ", axis, ")");
    mode_ = 1;
    return Status::Ok();
  }
  int64_t operator()(int64_t i) const {
    if (mode_ == 0) return 0;
    int64_t a = (i / inner_) % dim_;
    if (mode_ == 1) return a;
    int64_t outer = i / (inner_ * dim_);
    return (outer * pdim_ + a / block_) * inner_ + i % inner_;
  }

 private:
  int mode_ = 0;
  int64_t dim_ = 1, inner_ = 1, pdim_ = 1, block_ = 1;
};

/// Values of t broadcast (numpy rules) to `shape`, as doubles.
Result<std::vector<double>> broadcast_values(KernelContext& k, const Tensor& t, const Shape64& shape) {
  const Shape64& ts = t.shape();
  if (ts.size() > shape.size()) return k.error("cannot broadcast ", shape_to_string(ts), " to ", shape_to_string(shape));
  for (size_t d = 0; d < ts.size(); ++d) {
    int64_t td = ts[ts.size() - 1 - d], sd = shape[shape.size() - 1 - d];
    if (td != 1 && td != sd) return k.error("cannot broadcast ", shape_to_string(ts), " to ", shape_to_string(shape));
  }
  BroadcastIndexer bi(shape, ts);
  int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = t.get_f64(bi(i));
  return v;
}

/// For a per-row parameter of matrix A ([.., M, K]): an M-vector means one value per row.
Shape64 row_param_shape(const Tensor& p, const Shape64& a_shape) {
  if (p.rank() == 1 && p.numel() > 1 && a_shape.size() >= 2 && p.dim(0) == a_shape[a_shape.size() - 2])
    return {p.dim(0), 1};
  return p.shape();
}

/// x - zero point (broadcast), exact in doubles; a missing zero point is 0.
Result<std::vector<double>> centered(KernelContext& k, const Tensor& x, const Tensor* zp, bool per_row) {
  std::vector<double> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = x.get_f64(i);
  if (!zp) return v;
  Tensor z = *zp;
  if (per_row) {
    INGOT_ASSIGN_OR_RETURN(z, zp->reshaped(row_param_shape(*zp, x.shape())));
  }
  INGOT_ASSIGN_OR_RETURN(std::vector<double> zv, broadcast_values(k, z, x.shape()));
  for (size_t i = 0; i < v.size(); ++i) v[i] -= zv[i];
  return v;
}

/// Batched numpy matmul of A (shape sa) and B (shape sb) with doubles holding exact
/// integers; calls emit(out_index, sum, a_batch_offset, b_batch_offset, m, n).
template <class Emit>
Result<Shape64> matmul_loop(KernelContext& k, const std::vector<double>& a, Shape64 sa, const std::vector<double>& b,
                            Shape64 sb, Emit emit) {
  if (sa.empty() || sb.empty()) return k.error("matmul operands must not be scalars");
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  int64_t M = sa[sa.size() - 2], K = sa.back(), K2 = sb[sb.size() - 2], N = sb.back();
  if (K != K2) return k.error("inner dimensions differ: ", shape_to_string(sa), " x ", shape_to_string(sb));
  Shape64 ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  size_t br = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), br - ba.size(), 1);
  bb.insert(bb.begin(), br - bb.size(), 1);
  Shape64 batch(br);
  for (size_t d = 0; d < br; ++d) {
    if (ba[d] != bb[d] && ba[d] != 1 && bb[d] != 1)
      return k.error("batch dims do not broadcast: ", shape_to_string(sa), " x ", shape_to_string(sb));
    batch[d] = std::max(ba[d], bb[d]);
  }
  int64_t nb = shape_numel(batch);
  Shape64 sta = shape_strides(ba), stb = shape_strides(bb);
  for (int64_t bi = 0; bi < nb; ++bi) {
    Shape64 idx = unravel_index(bi, batch);
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < br; ++d) {
      if (ba[d] != 1) oa += idx[d] * sta[d];
      if (bb[d] != 1) ob += idx[d] * stb[d];
    }
    oa *= M * K;
    ob *= K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t kk = 0; kk < K; ++kk) s += a[oa + m * K + kk] * b[ob + kk * N + n];
        emit((bi * M + m) * N + n, s, oa, ob, m, n);
      }
  }
  Shape64 out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  return out;
}

/// Output tensor `i` with the given dtype and shape (reusing the pre-allocated one).
Result<Tensor*> ensure_output(KernelContext& k, size_t i, DataType dt, const Shape64& shape) {
  Tensor& y = k.output(i);
  if (y.defined() && y.dtype() == dt && y.shape() == shape) return &y;
  return k.allocate_output(i, dt, shape);
}

Shape64 matmul_out_shape(Shape64 sa, Shape64 sb) {
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  Shape64 ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  size_t br = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), br - ba.size(), 1);
  bb.insert(bb.begin(), br - bb.size(), 1);
  Shape64 out(br);
  for (size_t d = 0; d < br; ++d) out[d] = std::max(ba[d], bb[d]);
  if (!a1) out.push_back(sa[sa.size() - 2]);
  if (!b1) out.push_back(sb.back());
  return out;
}

// ---- convolution over centered integer data

struct ConvGeom {
  int64_t N, C, M, G;
  Shape64 in, kernel, out, stride, dil, pad_begin;
};

Result<ConvGeom> conv_geometry(KernelContext& k, const Shape64& xs, const Shape64& ws) {
  if (xs.size() < 3) return k.error("input must have rank >= 3, got ", shape_to_string(xs));
  if (ws.size() != xs.size()) return k.error("weight rank differs from input rank");
  size_t sp = xs.size() - 2;
  ConvGeom g;
  g.N = xs[0];
  g.C = xs[1];
  g.M = ws[0];
  g.G = k.attrs().get_int("group", 1);
  if (g.G <= 0 || g.C != ws[1] * g.G || g.M % g.G != 0)
    return k.error("channels ", g.C, " / weight ", shape_to_string(ws), " do not match group ", g.G);
  g.in.assign(xs.begin() + 2, xs.end());
  g.kernel.assign(ws.begin() + 2, ws.end());
  std::vector<int64_t> ks = k.attrs().get_ints("kernel_shape");
  if (!ks.empty() && ks != g.kernel) return k.error("kernel_shape does not match the weight shape");
  g.stride = k.attrs().get_ints("strides", Shape64(sp, 1));
  g.dil = k.attrs().get_ints("dilations", Shape64(sp, 1));
  std::vector<int64_t> pads = k.attrs().get_ints("pads", Shape64(2 * sp, 0));
  if (g.stride.size() != sp || g.dil.size() != sp || pads.size() != 2 * sp)
    return k.error("strides/dilations/pads do not match ", sp, " spatial dims");
  std::string ap = k.attrs().get_string("auto_pad", "NOTSET");
  g.pad_begin.assign(sp, 0);
  g.out.assign(sp, 0);
  for (size_t d = 0; d < sp; ++d) {
    if (g.stride[d] <= 0 || g.dil[d] <= 0) return k.error("strides and dilations must be positive");
    int64_t ek = (g.kernel[d] - 1) * g.dil[d] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g.out[d] = (g.in[d] + g.stride[d] - 1) / g.stride[d];
      int64_t total = std::max<int64_t>(0, (g.out[d] - 1) * g.stride[d] + ek - g.in[d]);
      g.pad_begin[d] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (ap == "VALID") {
      g.out[d] = g.in[d] >= ek ? (g.in[d] - ek) / g.stride[d] + 1 : 0;
    } else {
      g.pad_begin[d] = pads[d];
      int64_t padded = g.in[d] + pads[d] + pads[d + sp];
      if (padded < ek) return k.error("kernel larger than padded input");
      g.out[d] = (padded - ek) / g.stride[d] + 1;
    }
  }
  return g;
}

Shape64 conv_out_shape(const ConvGeom& g) {
  Shape64 s = {g.N, g.M};
  s.insert(s.end(), g.out.begin(), g.out.end());
  return s;
}

/// Plain direct convolution; calls emit(out_index, sum, m).
template <class Emit>
void conv_loop(const ConvGeom& g, const std::vector<double>& x, const std::vector<double>& w, Emit emit) {
  size_t sp = g.in.size();
  int64_t in_sz = shape_numel(g.in), out_sz = shape_numel(g.out), k_sz = shape_numel(g.kernel);
  int64_t cg = g.C / g.G, mg = g.M / g.G;
  Shape64 in_st = shape_strides(g.in);
  // Kernel offsets per kernel element (per dim) to avoid unravelling in the inner loop.
  std::vector<Shape64> kidx(static_cast<size_t>(k_sz));
  for (int64_t q = 0; q < k_sz; ++q) kidx[q] = unravel_index(q, g.kernel);
  Shape64 opos(sp);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t m = 0; m < g.M; ++m) {
      int64_t grp = m / mg;
      for (int64_t o = 0; o < out_sz; ++o) {
        Shape64 oi = unravel_index(o, g.out);
        double s = 0;
        for (int64_t q = 0; q < k_sz; ++q) {
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < sp && inside; ++d) {
            int64_t p = oi[d] * g.stride[d] - g.pad_begin[d] + kidx[q][d] * g.dil[d];
            if (p < 0 || p >= g.in[d]) inside = false;
            else off += p * in_st[d];
          }
          if (!inside) continue;
          for (int64_t c = 0; c < cg; ++c) {
            double xv = x[((n * g.C) + grp * cg + c) * in_sz + off];
            double wv = w[(m * cg + c) * k_sz + q];
            s += xv * wv;
          }
        }
        emit((n * g.M + m) * out_sz + o, s, m);
      }
    }
}

/// Per-output-channel values of a QLinearConv/ConvInteger weight parameter (scalar or M-vector).
Result<std::vector<double>> per_channel(KernelContext& k, const Tensor& p, int64_t M, const char* what) {
  std::vector<double> v(static_cast<size_t>(M));
  if (p.numel() == 1) {
    std::fill(v.begin(), v.end(), p.get_f64(0));
  } else if (p.numel() == M) {
    for (int64_t i = 0; i < M; ++i) v[i] = p.get_f64(i);
  } else {
    return k.error(what, " has ", p.numel(), " elements, expected 1 or ", M);
  }
  return v;
}

Status quantize_linear(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& s = *k.input(1);
  const Tensor* zp = k.input(2);
  Tensor& y = k.output(0);
  if (!y.defined()) return k.error("output was not allocated");
  int64_t axis = k.attrs().get_int("axis", 1);
  int64_t block = k.attrs().get_int("block_size", 0);
  bool saturate = k.attrs().get_int("saturate", 1) != 0;
  if (block < 0) return k.error("block_size must be positive");
  if (k.opset() < 21 && s.rank() > 1) return k.error("scale must be a scalar or a vector");
  ParamIndex pi;
  INGOT_RETURN_IF_ERROR(pi.init(k, x.shape(), s.shape(), axis, block));
  if (zp && zp->shape() != s.shape() && zp->numel() != s.numel())
    return k.error("zero point shape ", shape_to_string(zp->shape()), " differs from scale shape ",
                   shape_to_string(s.shape()));
  int64_t prec = k.attrs().get_int("precision", 0);
  DataType p = prec ? static_cast<DataType>(prec) : promote(x.dtype(), s.dtype());
  if (prec && !is_float(p)) return k.error("invalid precision ", prec);
  bool int_out = is_integer(y.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t j = pi(i);
    double q = round_to(p, round_to(p, x.get_f64(i)) / round_to(p, s.get_f64(j)));
    double z = zp ? zp->get_f64(j) : 0.0;
    if (int_out) {
      if (std::isnan(q)) { store_quantized(y, i, z, saturate); continue; }
      q = std::nearbyint(q) + z;
    } else if (z != 0) {
      q += z;
    }
    store_quantized(y, i, q, saturate);
  }
  return Status::Ok();
}

Status dequantize_linear(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& s = *k.input(1);
  const Tensor* zp = k.input(2);
  Tensor& y = k.output(0);
  if (!y.defined()) return k.error("output was not allocated");
  int64_t axis = k.attrs().get_int("axis", 1);
  int64_t block = k.attrs().get_int("block_size", 0);
  if (block < 0) return k.error("block_size must be positive");
  if (k.opset() < 21 && s.rank() > 1) return k.error("scale must be a scalar or a vector");
  ParamIndex pi;
  INGOT_RETURN_IF_ERROR(pi.init(k, x.shape(), s.shape(), axis, block));
  bool float_x = is_float(x.dtype());
  if (zp && !float_x && zp->dtype() != x.dtype())
    return k.error("zero point type ", data_type_name(zp->dtype()), " differs from input type ",
                   data_type_name(x.dtype()));
  if (zp && zp->numel() != s.numel()) return k.error("zero point and scale shapes differ");
  // The reference computes (x - zp) in float32 and multiplies by the scale in float32
  // unless the output is double.
  bool wide = y.dtype() == DataType::kFloat64 || s.dtype() == DataType::kFloat64;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t j = pi(i);
    double dx = x.get_f64(i);
    if (zp && !float_x) dx -= zp->get_f64(j);
    double v = dx * s.get_f64(j);
    if (!wide) v = static_cast<float>(v);
    y.set_f64(i, v);
  }
  return Status::Ok();
}

Status dynamic_quantize_linear(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t n = x.numel();
  float maxx = 0, minx = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = static_cast<float>(x.get_f64(i));
    maxx = std::max(maxx, v);
    minx = std::min(minx, v);
  }
  float scale = (maxx == minx ? 1.0f : (maxx - minx)) / 255.0f;
  float izp = 0.0f - minx / scale;
  float zp = std::nearbyint(std::min(255.0f, std::max(0.0f, izp)));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, DataType::kUInt8, x.shape()));
  for (int64_t i = 0; i < n; ++i) {
    float q = static_cast<float>(x.get_f64(i)) / scale;
    float v = std::nearbyint(q) + zp;
    if (std::isnan(v)) v = 0;
    y->set_i64(i, static_cast<int64_t>(std::min(255.0f, std::max(0.0f, v))));
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * ys, ensure_output(k, 1, DataType::kFloat32, {}));
  ys->set_f64(0, scale);
  INGOT_ASSIGN_OR_RETURN(Tensor * yz, ensure_output(k, 2, DataType::kUInt8, {}));
  yz->set_i64(0, static_cast<int64_t>(zp));
  return Status::Ok();
}

Status matmul_integer(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  INGOT_ASSIGN_OR_RETURN(std::vector<double> av, centered(k, a, k.input(2), true));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> bv, centered(k, b, k.input(3), false));
  if (a.rank() == 0 || b.rank() == 0) return k.error("operands must not be scalars");
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, DataType::kInt32, matmul_out_shape(a.shape(), b.shape())));
  int32_t* yd = y->mutable_data<int32_t>();
  auto st = matmul_loop(k, av, a.shape(), bv, b.shape(), [&](int64_t o, double s, int64_t, int64_t, int64_t, int64_t) {
    yd[o] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(s)));
  });
  return st.status();
}

Status qlinear_matmul(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(3);
  const Tensor& as = *k.input(1);
  const Tensor& bs = *k.input(4);
  const Tensor& ys = *k.input(6);
  const Tensor& yz = *k.input(7);
  if (a.rank() == 0 || b.rank() == 0) return k.error("operands must not be scalars");
  INGOT_ASSIGN_OR_RETURN(std::vector<double> av, centered(k, a, k.input(2), true));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> bv, centered(k, b, k.input(5), false));
  INGOT_ASSIGN_OR_RETURN(Tensor as_r, as.reshaped(row_param_shape(as, a.shape())));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> asv, broadcast_values(k, as_r, a.shape()));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> bsv, broadcast_values(k, bs, b.shape()));
  Shape64 os = matmul_out_shape(a.shape(), b.shape());
  INGOT_ASSIGN_OR_RETURN(std::vector<double> ysv, broadcast_values(k, ys, os));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> yzv, broadcast_values(k, yz, os));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, yz.dtype(), os));
  DataType sdt = as.dtype();
  int64_t K = a.shape().back();
  auto st = matmul_loop(k, av, a.shape(), bv, b.shape(), [&](int64_t o, double s, int64_t oa, int64_t ob, int64_t m, int64_t n) {
    double mult = round_to(sdt, round_to(sdt, asv[oa + m * K] * bsv[ob + n]) / ysv[o]);
    double v = s * mult + yzv[o];
    store_quantized(*y, o, v, true);
  });
  return st.status();
}

Status conv_integer(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  INGOT_ASSIGN_OR_RETURN(ConvGeom g, conv_geometry(k, x.shape(), w.shape()));
  std::vector<double> xv = x.to_f64_vector(), wv = w.to_f64_vector();
  if (const Tensor* xz = k.input(2)) {
    if (xz->numel() != 1) return k.error("x_zero_point must be a scalar");
    double z = xz->get_f64(0);
    for (double& v : xv) v -= z;
  }
  if (const Tensor* wz = k.input(3)) {
    INGOT_ASSIGN_OR_RETURN(std::vector<double> z, per_channel(k, *wz, g.M, "w_zero_point"));
    int64_t per = g.M ? w.numel() / g.M : 0;
    for (int64_t i = 0; i < w.numel(); ++i) wv[i] -= z[i / per];
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, DataType::kInt32, conv_out_shape(g)));
  int32_t* yd = y->mutable_data<int32_t>();
  conv_loop(g, xv, wv, [&](int64_t o, double s, int64_t) {
    yd[o] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(s)));
  });
  return Status::Ok();
}

Status qlinear_conv(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(3);
  INGOT_ASSIGN_OR_RETURN(ConvGeom g, conv_geometry(k, x.shape(), w.shape()));
  std::vector<double> xv = x.to_f64_vector(), wv = w.to_f64_vector();
  const Tensor& xs = *k.input(1);
  const Tensor& xz = *k.input(2);
  const Tensor& ys = *k.input(6);
  const Tensor& yz = *k.input(7);
  if (xs.numel() != 1 || xz.numel() != 1 || ys.numel() != 1 || yz.numel() != 1)
    return k.error("x and y scales / zero points must be scalars");
  double xzv = xz.get_f64(0);
  for (double& v : xv) v -= xzv;
  INGOT_ASSIGN_OR_RETURN(std::vector<double> wz, per_channel(k, *k.input(5), g.M, "w_zero_point"));
  INGOT_ASSIGN_OR_RETURN(std::vector<double> wsc, per_channel(k, *k.input(4), g.M, "w_scale"));
  int64_t per = g.M ? w.numel() / g.M : 0;
  for (int64_t i = 0; i < w.numel(); ++i) wv[i] -= wz[i / per];
  std::vector<double> bias(static_cast<size_t>(g.M), 0.0);
  if (k.has_input(8)) {
    const Tensor& bt = *k.input(8);
    if (bt.numel() != g.M) return k.error("bias has ", bt.numel(), " elements, expected ", g.M);
    for (int64_t m = 0; m < g.M; ++m) bias[m] = bt.get_f64(m);
  }
  DataType sdt = xs.dtype();
  std::vector<double> mult(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m)
    mult[m] = round_to(sdt, round_to(sdt, xs.get_f64(0) * wsc[m]) / ys.get_f64(0));
  double yzv = yz.get_f64(0);
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, yz.dtype(), conv_out_shape(g)));
  conv_loop(g, xv, wv, [&](int64_t o, double s, int64_t m) {
    double acc = static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(s + bias[m]))));
    store_quantized(*y, o, acc * mult[m] + yzv, true);
  });
  return Status::Ok();
}

/// ingot::QuantGemm: Y = act(x_scale * w_scale[n] * X.W^T + B[n] + R) [quantized by y_scale], X [..., K], W [N, K]. int8
/// products accumulate in int64 (exact), fp8 ones in double; the epilogue runs in double and Y
/// is rounded once to its type.
Status quant_gemm(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  const Tensor& xs = *k.input(2);
  const Tensor& ws = *k.input(3);
  const Tensor* b = k.input(4);
  const Tensor* r = k.input(5);
  const Tensor* ysc = k.input(6);
  const DataType q = x.dtype();
  if ((q != DataType::kInt8 && q != DataType::kFloat8E4M3FN) || w.dtype() != q)
    return k.error("X and W must both be int8 or both float8e4m3fn");
  if (w.rank() != 2 || x.rank() < 1 || x.shape().back() != w.dim(1))
    return k.error("X ", shape_to_string(x.shape()), " and W ", shape_to_string(w.shape()), " do not match ([..., K], [N, K])");
  const int64_t n_out = w.dim(0), kk = w.dim(1), m_rows = kk ? x.numel() / kk : 0;
  if (xs.numel() != 1 || (ws.numel() != 1 && ws.numel() != n_out))
    return k.error("x_scale must have one value, w_scale one or ", n_out);
  if (k.input(6) && k.input(6)->numel() != 1) return k.error("y_scale must have one value");
  if (b && b->numel() != n_out) return k.error("B has ", b->numel(), " values, N is ", n_out);
  const auto out_t = static_cast<DataType>(k.attrs().get_int("output_dtype", 1));
  Shape64 ys = x.shape();
  ys.back() = n_out;
  if (r && r->shape() != ys)
    return k.error("R has shape ", shape_to_string(r->shape()), ", Y ", shape_to_string(ys));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, ensure_output(k, 0, out_t, ys));
  const std::string act = k.attrs().get_string("activation", "");
  const std::vector<float> params = k.attrs().get_floats("activation_params");
  const bool int8 = q == DataType::kInt8;
  // Decoded operands, so the loop below does no per-element conversions.
  std::vector<double> xf, wf;
  std::vector<int16_t> xi, wi;  // int16: the compiler turns the product sum into pmaddwd / vpdpwssd
  if (int8) {
    xi.resize(static_cast<size_t>(x.numel()));
    wi.resize(static_cast<size_t>(w.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) xi[i] = static_cast<int16_t>(x.get_i64(i));
    for (int64_t i = 0; i < w.numel(); ++i) wi[i] = static_cast<int16_t>(w.get_i64(i));
  } else {
    xf.resize(static_cast<size_t>(x.numel()));
    wf.resize(static_cast<size_t>(w.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) xf[i] = x.get_f64(i);
    for (int64_t i = 0; i < w.numel(); ++i) wf[i] = w.get_f64(i);
  }
  const double sx = xs.get_f64(0);
  for (int64_t m = 0; m < m_rows; ++m) {
    for (int64_t n = 0; n < n_out; ++n) {
      double acc;
      if (int8) {
        // Exact: |x*w| <= 2^14, so a chunk of 2^16 products stays inside int32; chunks add in int64.
        const int16_t* xr = xi.data() + m * kk;
        const int16_t* wr = wi.data() + n * kk;
        int64_t a = 0;
        for (int64_t i0 = 0; i0 < kk; i0 += 65536) {
          const int64_t i1 = std::min<int64_t>(kk, i0 + 65536);
          int32_t a32 = 0;
          for (int64_t i = i0; i < i1; ++i) a32 += static_cast<int32_t>(xr[i]) * static_cast<int32_t>(wr[i]);
          a += a32;
        }
        acc = static_cast<double>(a);
      } else {
        // Four partial sums in double (products of e4m3 values are exact in double): a reference
        // that does not depend on summation order beyond double rounding, four times faster.
        const double* xr = xf.data() + m * kk;
        const double* wr = wf.data() + n * kk;
        double p[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= kk; i += 4)
          for (int j = 0; j < 4; ++j) p[j] += xr[i + j] * wr[i + j];
        for (; i < kk; ++i) p[0] += xr[i] * wr[i];
        acc = (p[0] + p[1]) + (p[2] + p[3]);
      }
      double v = acc * sx * ws.get_f64(ws.numel() == 1 ? 0 : n);
      if (b) v += b->get_f64(n);
      if (r) v += r->get_f64(m * n_out + n);
      v = apply_activation(act, params, v);
      if (ysc) {  // QuantizeLinear's: the float32 quotient, then rounded and saturated
        store_quantized(*y, m * n_out + n,
                        static_cast<float>(static_cast<float>(v) / static_cast<float>(ysc->get_f64(0))), true);
      } else {
        y->set_f64(m * n_out + n, v);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void register_quant_linear_kernels(KernelRegistry& r) {
  r.add("QuantGemm", quant_gemm, "ingot");
  r.add("QuantizeLinear", quantize_linear);
  r.add("DequantizeLinear", dequantize_linear);
  r.add("DynamicQuantizeLinear", dynamic_quantize_linear);
  r.add("MatMulInteger", matmul_integer);
  r.add("QLinearMatMul", qlinear_matmul);
  r.add("ConvInteger", conv_integer);
  r.add("QLinearConv", qlinear_conv);
}

}  // namespace ingot::cpu
