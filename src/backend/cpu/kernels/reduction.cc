// Copyright ingot authors. Apache-2.0.
//
// Reductions (Reduce*, ArgMax/ArgMin), the softmax family and CumSum/CumProd. Floats
// accumulate in double; integers in int64 where exactness matters. Normalizations are in
// reduction_norm.cc, the losses in reduction_loss.cc.
#include <cmath>
#include <limits>

#include "backend/cpu/kernels/all_kernels.h"
#include "backend/cpu/kernel_util.h"
#include "ir/shape.h"

namespace ingot::cpu {

void register_reduction_norm_kernels(KernelRegistry& r);  // reduction_norm.cc
void register_reduction_loss_kernels(KernelRegistry& r);  // reduction_loss.cc

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// All elements as doubles, with a fast path for f32/f64.
std::vector<double> load(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kFloat32) {
    const float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (t.dtype() == DataType::kFloat64) {
    const double* p = t.data<double>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get_f64(static_cast<int64_t>(i));
  }
  return v;
}

void store(Tensor& t, const std::vector<double>& v) {
  if (t.dtype() == DataType::kFloat32) {
    float* p = t.mutable_data<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else if (t.dtype() == DataType::kFloat64) {
    double* p = t.mutable_data<double>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  }
}


enum class RK { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Smallest / largest value of an integer or bool dtype (for empty Max/Min).
int64_t int_lowest(DataType t) {
  if (t == DataType::kBool || !is_signed_integer(t)) return 0;
  return -(int64_t{1} << (data_type_bits(t) - 1));
}
int64_t int_highest(DataType t) {
  if (t == DataType::kBool) return 1;
  const int bits = data_type_bits(t);
  if (is_signed_integer(t)) return bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  return bits >= 64 ? -1 /* wraps to UINT64_MAX */ : (int64_t{1} << bits) - 1;
}

Status reduce_kernel(KernelContext& k, RK kind) {
  const Tensor& x = *k.input(0);
  const auto op = k.node().op_type();
  const bool axes_from_input = k.opset() >= (op == "ReduceSum" ? 13 : 18);
  const bool keepdims = k.attrs().get_int("keepdims", 1) != 0;
  const bool noop = k.attrs().get_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (k.has_input(1)) axes = tensor_to_i64(*k.input(1));
  } else {
    axes = k.attrs().get_ints("axes");
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> red(x.rank(), axes.empty());
  if (axes.empty() && noop && axes_from_input) {
    // Identity, but the element-wise part of the reduction still applies (ReduceSumSquare of
    // one element is its square, as the reference computes it).
    red.assign(x.rank(), false);
  }
  for (int64_t a : axes) {
    auto n = ir::normalize_axis(a, rank);
    if (!n.ok()) return k.error("axis ", a, " out of range for rank ", rank);
    red[static_cast<size_t>(*n)] = true;
  }
  Shape64 out_shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!red[d]) out_shape.push_back(x.dim(d));
    else if (keepdims) out_shape.push_back(1);
  }
  Tensor& y = k.output(0);
  if (!y.defined() || y.shape() != out_shape) {
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(0, x.dtype(), out_shape));
    (void)t;
  }
  Tensor& out = k.output(0);
  // Output strides over the kept dims, expressed per input dim.
  Shape64 map_strides(x.rank(), 0);
  {
    int64_t s = 1;
    for (size_t d = x.rank(); d-- > 0;) {
      if (red[d]) continue;
      map_strides[d] = s;
      s *= x.dim(d);
    }
  }
  const int64_t on = out.numel();
  int64_t count = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    if (red[d]) count *= x.dim(d);

  const DataType dt = x.dtype();
  const bool exact_int = is_integer(dt) || dt == DataType::kBool;
  if (exact_int && kind != RK::kLogSum && kind != RK::kLogSumExp && kind != RK::kL2 && kind != RK::kMean) {
    const bool u64 = dt == DataType::kUInt64;
    auto less = [u64](int64_t a, int64_t b) {
      return u64 ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
    };
    int64_t init = 0;
    if (kind == RK::kProd) init = 1;
    if (kind == RK::kMax) init = int_lowest(dt);
    if (kind == RK::kMin) init = int_highest(dt);
    std::vector<int64_t> acc(static_cast<size_t>(on), init);
    for_each_mapped(x.shape(), map_strides, [&](int64_t i, int64_t o) {
      const int64_t v = x.get_i64(i);
      int64_t& a = acc[static_cast<size_t>(o)];
      // Wrapping arithmetic through uint64 (as the dtype would overflow anyway).
      auto wadd = [](int64_t p, int64_t q) { return static_cast<int64_t>(static_cast<uint64_t>(p) + static_cast<uint64_t>(q)); };
      auto wmul = [](int64_t p, int64_t q) { return static_cast<int64_t>(static_cast<uint64_t>(p) * static_cast<uint64_t>(q)); };
      switch (kind) {
        case RK::kSum: a = wadd(a, v); break;
        case RK::kProd: a = wmul(a, v); break;
        case RK::kSumSquare: a = wadd(a, wmul(v, v)); break;
        case RK::kL1: a = wadd(a, (!u64 && v < 0) ? -v : v); break;
        case RK::kMax: if (less(a, v)) a = v; break;
        case RK::kMin: if (less(v, a)) a = v; break;
        default: break;
      }
    });
    for (int64_t o = 0; o < on; ++o) out.set_i64(o, acc[static_cast<size_t>(o)]);
    return Status::Ok();
  }

  const std::vector<double> xv = load(x);
  double init = 0;
  if (kind == RK::kProd) init = 1;
  if (kind == RK::kMax || kind == RK::kLogSumExp) init = -kInf;
  if (kind == RK::kMin) init = kInf;
  std::vector<double> acc(static_cast<size_t>(on), init);
  std::vector<bool> nan(kind == RK::kMax || kind == RK::kMin ? static_cast<size_t>(on) : 0, false);
  for_each_mapped(x.shape(), map_strides, [&](int64_t i, int64_t o) {
    const double v = xv[static_cast<size_t>(i)];
    double& a = acc[static_cast<size_t>(o)];
    switch (kind) {
      case RK::kSum: case RK::kMean: case RK::kLogSum: a += v; break;
      case RK::kProd: a *= v; break;
      case RK::kSumSquare: case RK::kL2: a += v * v; break;
      case RK::kL1: a += std::fabs(v); break;
      case RK::kMax: case RK::kLogSumExp:
        if (std::isnan(v) && kind == RK::kMax) nan[static_cast<size_t>(o)] = true;
        if (v > a) a = v;
        break;
      case RK::kMin:
        if (std::isnan(v)) nan[static_cast<size_t>(o)] = true;
        if (v < a) a = v;
        break;
    }
  });
  if (kind == RK::kLogSumExp) {
    std::vector<double> sum(static_cast<size_t>(on), 0.0);
    for_each_mapped(x.shape(), map_strides, [&](int64_t i, int64_t o) {
      const double m = acc[static_cast<size_t>(o)];
      if (std::isfinite(m)) sum[static_cast<size_t>(o)] += std::exp(xv[static_cast<size_t>(i)] - m);
      else sum[static_cast<size_t>(o)] += std::exp(xv[static_cast<size_t>(i)]);
    });
    for (size_t o = 0; o < acc.size(); ++o)
      acc[o] = std::isfinite(acc[o]) ? acc[o] + std::log(sum[o]) : std::log(sum[o]);
  }
  for (size_t o = 0; o < acc.size(); ++o) {
    double& a = acc[o];
    switch (kind) {
      case RK::kMean: a = a / static_cast<double>(count); break;
      case RK::kL2: a = std::sqrt(a); break;
      case RK::kLogSum: a = std::log(a); break;
      case RK::kMax: case RK::kMin: if (nan[o]) a = std::nan(""); break;
      default: break;
    }
  }
  store(out, acc);
  return Status::Ok();
}

Status arg_kernel(KernelContext& k, bool is_max) {
  const Tensor& x = *k.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t a = k.attrs().get_int("axis", 0);
  auto n = ir::normalize_axis(a, rank);
  if (!n.ok()) return k.error("axis ", a, " out of range for rank ", rank);
  const bool last = k.attrs().get_int("select_last_index", 0) != 0;
  const size_t ax = static_cast<size_t>(*n);
  const int64_t len = x.dim(ax);
  if (len == 0) return k.error("cannot take Arg", is_max ? "Max" : "Min", " over an empty axis");
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= x.dim(d);
  for (size_t d = ax + 1; d < x.rank(); ++d) inner *= x.dim(d);
  Tensor& y = k.output(0);
  const bool ints = is_integer(x.dtype());
  const bool u64 = x.dtype() == DataType::kUInt64;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        const int64_t ci = base + j * inner, bi = base + best * inner;
        bool better, equal;
        if (ints) {
          int64_t cv = x.get_i64(ci), bv = x.get_i64(bi);
          bool lt = u64 ? static_cast<uint64_t>(cv) < static_cast<uint64_t>(bv) : cv < bv;
          bool gt = u64 ? static_cast<uint64_t>(cv) > static_cast<uint64_t>(bv) : cv > bv;
          better = is_max ? gt : lt;
          equal = cv == bv;
        } else {
          double cv = x.get_f64(ci), bv = x.get_f64(bi);
          if (std::isnan(bv)) break;  // numpy: the first NaN wins
          better = std::isnan(cv) || (is_max ? cv > bv : cv < bv);
          equal = cv == bv;
        }
        if (better || (last && equal)) best = j;
      }
      y.set_i64(o * inner + in, best);
    }
  }
  return Status::Ok();
}

enum class SK { kSoftmax, kLogSoftmax, kHardmax };

Status softmax_kernel(KernelContext& k, SK kind) {
  const Tensor& x = *k.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  Tensor& y = k.output(0);
  int64_t outer = 1, len = 1, inner = 1;
  if (k.opset() >= 13) {
    const int64_t a = k.attrs().get_int("axis", -1);
    if (rank == 0) {
      if (a != 0 && a != -1) return k.error("axis ", a, " out of range for rank 0");
    } else {
      auto n = ir::normalize_axis(a, rank);
      if (!n.ok()) return k.error("axis ", a, " out of range for rank ", rank);
      for (int64_t d = 0; d < *n; ++d) outer *= x.dim(static_cast<size_t>(d));
      len = x.dim(static_cast<size_t>(*n));
      for (int64_t d = *n + 1; d < rank; ++d) inner *= x.dim(static_cast<size_t>(d));
    }
  } else {
    int64_t a = k.attrs().get_int("axis", 1);
    if (a < -rank || a > rank) return k.error("axis ", a, " out of range for rank ", rank);
    if (a < 0) a += rank;
    for (int64_t d = 0; d < a; ++d) outer *= x.dim(static_cast<size_t>(d));
    for (int64_t d = a; d < rank; ++d) len *= x.dim(static_cast<size_t>(d));
  }
  std::vector<double> v = load(x);
  std::vector<double> out(v.size(), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      auto at = [&](int64_t j) { return static_cast<size_t>(base + j * inner); };
      if (len == 0) continue;
      if (kind == SK::kHardmax) {
        int64_t best = 0;
        for (int64_t j = 1; j < len; ++j)
          if (v[at(j)] > v[at(best)]) best = j;
        out[at(best)] = 1.0;
        continue;
      }
      double m = -kInf;
      for (int64_t j = 0; j < len; ++j) m = std::max(m, v[at(j)]);
      if (!std::isfinite(m)) m = 0;  // all -inf (or inf/nan): let the arithmetic propagate
      double s = 0;
      for (int64_t j = 0; j < len; ++j) s += std::exp(v[at(j)] - m);
      const double ls = std::log(s);
      for (int64_t j = 0; j < len; ++j) {
        const double z = v[at(j)] - m;
        out[at(j)] = kind == SK::kSoftmax ? std::exp(z) / s : z - ls;
      }
    }
  }
  store(y, out);
  return Status::Ok();
}

Status cumulative_kernel(KernelContext& k, bool product) {
  const Tensor& x = *k.input(0);
  const Tensor& at = *k.input(1);
  if (at.numel() != 1) return k.error("axis must hold one value, got ", at.numel());
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t a = at.get_i64(0);
  auto n = ir::normalize_axis(a, rank);
  if (!n.ok()) return k.error("axis ", a, " out of range for rank ", rank);
  const bool exclusive = k.attrs().get_int("exclusive", 0) != 0;
  const bool reverse = k.attrs().get_int("reverse", 0) != 0;
  const size_t ax = static_cast<size_t>(*n);
  const int64_t len = x.dim(ax);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= x.dim(d);
  for (size_t d = ax + 1; d < x.rank(); ++d) inner *= x.dim(d);
  Tensor& y = k.output(0);
  const bool ints = is_integer(x.dtype());
  std::vector<double> v = ints ? std::vector<double>() : load(x);
  std::vector<double> out(ints ? 0 : v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      double acc = product ? 1.0 : 0.0;
      uint64_t iacc = product ? 1 : 0;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t j = reverse ? len - 1 - s : s;
        const int64_t idx = base + j * inner;
        if (ints) {
          const uint64_t xv = static_cast<uint64_t>(x.get_i64(idx));
          if (exclusive) y.set_i64(idx, static_cast<int64_t>(iacc));
          iacc = product ? iacc * xv : iacc + xv;
          if (!exclusive) y.set_i64(idx, static_cast<int64_t>(iacc));
        } else {
          const double xv = v[static_cast<size_t>(idx)];
          if (exclusive) out[static_cast<size_t>(idx)] = acc;
          acc = product ? acc * xv : acc + xv;
          if (!exclusive) out[static_cast<size_t>(idx)] = acc;
        }
      }
    }
  }
  if (!ints) store(y, out);
  return Status::Ok();
}

}  // namespace

void register_reduction_kernels(KernelRegistry& r) {
  const std::pair<const char*, RK> reduces[] = {
      {"ReduceSum", RK::kSum},       {"ReduceMean", RK::kMean},          {"ReduceMax", RK::kMax},
      {"ReduceMin", RK::kMin},       {"ReduceProd", RK::kProd},          {"ReduceL1", RK::kL1},
      {"ReduceL2", RK::kL2},         {"ReduceLogSum", RK::kLogSum},      {"ReduceLogSumExp", RK::kLogSumExp},
      {"ReduceSumSquare", RK::kSumSquare}};
  for (const auto& [name, kind] : reduces) {
    RK kd = kind;
    r.add(name, [kd](KernelContext& k) { return reduce_kernel(k, kd); });
  }
  r.add("ArgMax", [](KernelContext& k) { return arg_kernel(k, true); });
  r.add("ArgMin", [](KernelContext& k) { return arg_kernel(k, false); });
  r.add("Softmax", [](KernelContext& k) { return softmax_kernel(k, SK::kSoftmax); });
  r.add("LogSoftmax", [](KernelContext& k) { return softmax_kernel(k, SK::kLogSoftmax); });
  r.add("Hardmax", [](KernelContext& k) { return softmax_kernel(k, SK::kHardmax); });
  r.add("CumSum", [](KernelContext& k) { return cumulative_kernel(k, false); });
  r.add("CumProd", [](KernelContext& k) { return cumulative_kernel(k, true); });
  register_reduction_norm_kernels(r);
  register_reduction_loss_kernels(r);
}

}  // namespace ingot::cpu
