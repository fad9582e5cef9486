// Copyright ingot authors. Apache-2.0.
//
// Pooling: MaxPool (+ Indices), AveragePool, LpPool, their Global forms, MaxUnpool, and
// ingot::Pool (MaxPool / AveragePool, channels-last when channels_last = 1: the same kernel on a
// channels-first copy). Computed in double (exact for every integer type MaxPool allows).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/shape.h"

namespace ingot::cpu {

namespace nn_internal {
const double* as_f64(const Tensor& t, std::vector<double>& tmp);
void store(Tensor& t, const double* v);
}  // namespace nn_internal

namespace {

enum class PoolKind { kMax, kAvg, kLp };

// Pools channels-first `x` into `y` (allocated) with the node's window attributes; MaxPool's
// Indices go to output 1 when `indices` is set.
Status pool_kernel(KernelContext& k, PoolKind kind, const Tensor& x, Tensor& y, bool indices) {
  if (x.rank() < 3 || y.rank() != x.rank()) return k.error("input must have rank >= 3");
  size_t nsp = x.rank() - 2;
  Shape64 in(x.shape().begin() + 2, x.shape().end()), out(y.shape().begin() + 2, y.shape().end());
  Shape64 kernel = k.attrs().get_ints("kernel_shape");
  Shape64 strides = k.attrs().get_ints("strides", Shape64(nsp, 1));
  Shape64 dil = k.attrs().get_ints("dilations", Shape64(nsp, 1));
  Shape64 pads = k.attrs().get_ints("pads", Shape64(2 * nsp, 0));
  if (kernel.size() != nsp || strides.size() != nsp || dil.size() != nsp || pads.size() != 2 * nsp)
    return k.error("window attributes do not match the spatial rank ", nsp);
  std::string ap = k.attrs().get_string("auto_pad", "NOTSET");
  Shape64 pb(nsp, 0), pe(nsp, 0);
  for (size_t d = 0; d < nsp; ++d) {
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t dk = (kernel[d] - 1) * dil[d] + 1;
      int64_t total = std::max<int64_t>(0, (out[d] - 1) * strides[d] + dk - in[d]);
      pb[d] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
    } else if (ap != "VALID") {
      pb[d] = pads[d];
      pe[d] = pads[d + nsp];
    }
  }
  bool count_pad = k.attrs().get_int("count_include_pad", 0) != 0;
  double p = static_cast<double>(k.attrs().get_int("p", 2));
  bool want_idx = indices && kind == PoolKind::kMax && k.has_output(1);
  bool col_major = k.attrs().get_int("storage_order", 0) != 0;
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t in_sz = shape_numel(in), out_sz = shape_numel(out);
  Shape64 in_st = shape_strides(in);
  Shape64 cm_st(nsp, 1);  // column-major spatial strides for storage_order=1
  for (size_t d = 1; d < nsp; ++d) cm_st[d] = cm_st[d - 1] * in[d - 1];
  std::vector<double> tx;
  const double* px = nn_internal::as_f64(x, tx);
  std::vector<double> res(static_cast<size_t>(planes * out_sz));
  std::vector<int64_t> idx_out(want_idx ? res.size() : 0);
  // Per output position: per-dim list of valid input coords and count of in-padding taps.
  std::vector<std::vector<int64_t>> valid(nsp);
  std::vector<int64_t> oidx(nsp, 0), tap(nsp, 0);
  for (int64_t o = 0; o < out_sz; ++o) {
    int64_t pad_count = 1, valid_count = 1;
    for (size_t d = 0; d < nsp; ++d) {
      valid[d].clear();
      int64_t start = oidx[d] * strides[d] - pb[d];
      int64_t pc = 0;
      for (int64_t t = 0; t < kernel[d]; ++t) {
        int64_t c = start + t * dil[d];
        if (c >= 0 && c < in[d]) valid[d].push_back(c);
        if (c >= -pb[d] && c < in[d] + pe[d]) ++pc;
      }
      pad_count *= pc;
      valid_count *= static_cast<int64_t>(valid[d].size());
    }
    for (int64_t pl = 0; pl < planes; ++pl) {
      const double* xp = px + pl * in_sz;
      // Max over a window wholly in the padding: -inf, or the type's lowest value for int8/uint8
      // (as onnxruntime's MaxPool starts from lowest(); -inf has no integer value).
      double acc = kind != PoolKind::kMax                ? 0.0
                   : y.dtype() == DataType::kInt8  ? -128.0
                   : y.dtype() == DataType::kUInt8 ? 0.0
                                                   : -std::numeric_limits<double>::infinity();
      int64_t best = -1;
      if (valid_count > 0) {
        std::fill(tap.begin(), tap.end(), 0);
        for (int64_t t = 0; t < valid_count; ++t) {
          int64_t off = 0;
          for (size_t d = 0; d < nsp; ++d) off += valid[d][tap[d]] * in_st[d];
          double v = xp[off];
          if (kind == PoolKind::kMax) {
            if (v > acc || best < 0) {
              acc = v;
              best = off;
              if (want_idx && col_major) {
                best = 0;
                for (size_t d = 0; d < nsp; ++d) best += valid[d][tap[d]] * cm_st[d];
              }
            }
          } else if (kind == PoolKind::kAvg) {
            acc += v;
          } else {
            acc += std::pow(std::fabs(v), p);
          }
          for (size_t d = nsp; d-- > 0;) {
            if (++tap[d] < static_cast<int64_t>(valid[d].size())) break;
            tap[d] = 0;
          }
        }
      }
      if (kind == PoolKind::kAvg) {
        int64_t div = count_pad ? pad_count : valid_count;
        acc = div > 0 ? acc / static_cast<double>(div) : 0.0;
      } else if (kind == PoolKind::kLp) {
        acc = std::pow(acc, 1.0 / p);
      }
      res[pl * out_sz + o] = acc;
      if (want_idx) idx_out[pl * out_sz + o] = best < 0 ? -1 : pl * in_sz + best;
    }
    for (size_t d = nsp; d-- > 0;) {
      if (++oidx[d] < out[d]) break;
      oidx[d] = 0;
    }
  }
  if (y.numel() != static_cast<int64_t>(res.size())) return k.error("output size mismatch");
  nn_internal::store(y, res.data());
  if (want_idx) {
    Tensor& yi = k.output(1);
    if (yi.numel() != static_cast<int64_t>(idx_out.size())) return k.error("indices size mismatch");
    std::copy(idx_out.begin(), idx_out.end(), yi.mutable_data<int64_t>());
  }
  return Status::Ok();
}

Status ingot_pool_kernel(KernelContext& k) {
  const std::string mode = k.attrs().get_string("mode", "");
  if (mode != "max" && mode != "average") return k.error("mode must be 'max' or 'average', got '", mode, "'");
  const PoolKind kind = mode == "max" ? PoolKind::kMax : PoolKind::kAvg;
  if (k.attrs().get_int("channels_last", 0) == 0) return pool_kernel(k, kind, *k.input(0), k.output(0), false);
  const size_t n = k.input(0)->rank();
  if (n < 3 || k.output(0).rank() != n) return k.error("input must have rank >= 3");
  INGOT_ASSIGN_OR_RETURN(Tensor x, permute_dims(*k.input(0), ir::channels_first_perm(n)));
  Shape64 y_shape;
  for (size_t d : ir::channels_first_perm(n)) y_shape.push_back(k.output(0).dim(d));
  INGOT_ASSIGN_OR_RETURN(Tensor y, Tensor::zeros(k.output(0).dtype(), y_shape));
  INGOT_RETURN_IF_ERROR(pool_kernel(k, kind, x, y, false));
  INGOT_ASSIGN_OR_RETURN(k.output(0), permute_dims(y, ir::channels_last_perm(n)));
  return Status::Ok();
}

Status global_pool_kernel(KernelContext& k, PoolKind kind) {
  const Tensor& x = *k.input(0);
  Tensor& y = k.output(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2");
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t sz = planes == 0 ? 0 : x.numel() / planes;
  double p = static_cast<double>(k.attrs().get_int("p", 2));
  std::vector<double> tx;
  const double* px = nn_internal::as_f64(x, tx);
  std::vector<double> res(static_cast<size_t>(planes));
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double* xp = px + pl * sz;
    double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < sz; ++i) {
      if (kind == PoolKind::kMax)
        acc = (xp[i] > acc || std::isnan(xp[i])) ? xp[i] : acc;
      else if (kind == PoolKind::kAvg)
        acc += xp[i];
      else
        acc += std::pow(std::fabs(xp[i]), p);
    }
    if (kind == PoolKind::kAvg) acc /= static_cast<double>(sz);
    if (kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p);
    res[pl] = acc;
  }
  if (y.numel() != planes) return k.error("output size mismatch");
  nn_internal::store(y, res.data());
  return Status::Ok();
}

Status max_unpool_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& ind = *k.input(1);
  Tensor& y = k.output(0);
  if (!y.defined()) return k.error("output shape unknown");
  if (ind.numel() != x.numel()) return k.error("indices must have the shape of X");
  if (x.rank() < 3 || y.rank() != x.rank() || y.dim(0) != x.dim(0) || y.dim(1) != x.dim(1))
    return k.error("output shape ", shape_to_string(y.shape()), " does not fit X ", shape_to_string(x.shape()));
  size_t nsp = x.rank() - 2;
  Shape64 kernel = k.attrs().get_ints("kernel_shape");
  Shape64 strides = k.attrs().get_ints("strides", Shape64(nsp, 1));
  Shape64 pads = k.attrs().get_ints("pads", Shape64(2 * nsp, 0));
  if (kernel.size() != nsp || strides.size() != nsp || pads.size() != 2 * nsp)
    return k.error("window attributes do not match the spatial rank ", nsp);
  // Indices address the default (inferred) output shape; a larger output_shape pads at the end.
  Shape64 inferred{x.dim(0), x.dim(1)};
  for (size_t d = 0; d < nsp; ++d)
    inferred.push_back((x.dim(d + 2) - 1) * strides[d] + kernel[d] - pads[d] - pads[d + nsp]);
  int64_t inf_n = shape_numel(inferred);
  std::vector<double> buf(static_cast<size_t>(inf_n), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t j = ind.get_i64(i);
    if (j < 0 || j >= inf_n) return k.error("index ", j, " out of range for ", inf_n, " elements");
    buf[j] = x.get_f64(i);
  }
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  Shape64 yst = shape_strides(y.shape());
  for (int64_t i = 0; i < inf_n; ++i) {
    if (buf[i] == 0.0) continue;
    Shape64 idx = unravel_index(i, inferred);
    bool ok = true;
    for (size_t d = 0; d < idx.size(); ++d) ok = ok && idx[d] < y.dim(d);
    if (ok) out[ravel_index(idx, yst)] = buf[i];
  }
  nn_internal::store(y, out.data());
  return Status::Ok();
}

}  // namespace

void register_nn_pool_kernels(KernelRegistry& r) {
  r.add("MaxPool", [](KernelContext& k) { return pool_kernel(k, PoolKind::kMax, *k.input(0), k.output(0), true); });
  r.add("AveragePool",
        [](KernelContext& k) { return pool_kernel(k, PoolKind::kAvg, *k.input(0), k.output(0), false); });
  r.add("LpPool", [](KernelContext& k) { return pool_kernel(k, PoolKind::kLp, *k.input(0), k.output(0), false); });
  r.add("GlobalMaxPool", [](KernelContext& k) { return global_pool_kernel(k, PoolKind::kMax); });
  r.add("GlobalAveragePool", [](KernelContext& k) { return global_pool_kernel(k, PoolKind::kAvg); });
  r.add("GlobalLpPool", [](KernelContext& k) { return global_pool_kernel(k, PoolKind::kLp); });
  r.add("MaxUnpool", max_unpool_kernel);
  r.add("Pool", ingot_pool_kernel, "ingot");
}

}  // namespace ingot::cpu
