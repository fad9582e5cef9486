// Copyright ingot authors. Apache-2.0.
//
// Normalization kernels: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN.
// Statistics are computed in double; outputs are rounded to their dtype at the end.
#include <cmath>

#include "backend/cpu/kernels/all_kernels.h"
#include "backend/cpu/kernel_util.h"
#include "ir/shape.h"

namespace ingot::cpu {

namespace {

std::vector<double> load(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kFloat32) {
    const float* p = t.data<float>();
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
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  }
}

// Per-channel parameter vector of length c (a [C] tensor, or a scalar broadcast).
Result<std::vector<double>> channel_param(const KernelContext& k, const Tensor& t, int64_t c, const char* what) {
  if (t.numel() == c) return load(t);
  if (t.numel() == 1) return std::vector<double>(static_cast<size_t>(c), t.get_f64(0));
  return k.error(what, " must have ", c, " elements, got shape ", shape_to_string(t.shape()));
}

// Mean and (biased) variance of each of `groups` contiguous blocks of `len` values.
void block_stats(const std::vector<double>& x, int64_t groups, int64_t len, std::vector<double>& mean,
                 std::vector<double>& var) {
  mean.assign(static_cast<size_t>(groups), 0.0);
  var.assign(static_cast<size_t>(groups), 0.0);
  if (len == 0) return;
  for (int64_t g = 0; g < groups; ++g) {
    const double* p = x.data() + g * len;
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += p[i];
    const double m = s / static_cast<double>(len);
    double v = 0;
    for (int64_t i = 0; i < len; ++i) v += (p[i] - m) * (p[i] - m);
    mean[static_cast<size_t>(g)] = m;
    var[static_cast<size_t>(g)] = v / static_cast<double>(len);
  }
}

Status batchnorm(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2, got ", shape_to_string(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  if (k.opset() < 9 && k.attrs().get_int("spatial", 1) == 0 && k.input(1)->numel() != c)
    return k.unsupported_case("spatial=0 with per-element statistics");
  INGOT_ASSIGN_OR_RETURN(auto scale, channel_param(k, *k.input(1), c, "scale"));
  INGOT_ASSIGN_OR_RETURN(auto bias, channel_param(k, *k.input(2), c, "B"));
  INGOT_ASSIGN_OR_RETURN(auto mean, channel_param(k, *k.input(3), c, "input_mean"));
  INGOT_ASSIGN_OR_RETURN(auto var, channel_param(k, *k.input(4), c, "input_var"));
  const double eps = k.attrs().get_float("epsilon", 1e-5f);
  const double momentum = k.attrs().get_float("momentum", 0.9f);
  const bool training = k.opset() >= 14 ? k.attrs().get_int("training_mode", 0) != 0 : false;
  const std::vector<double> xv = load(x);
  std::vector<double> use_mean = mean, use_var = var;
  if (training) {
    const double cnt = static_cast<double>(n * inner);
    for (int64_t ch = 0; ch < c; ++ch) {
      double s = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) s += xv[static_cast<size_t>((b * c + ch) * inner + i)];
      const double m = cnt > 0 ? s / cnt : 0;
      double v = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          const double d = xv[static_cast<size_t>((b * c + ch) * inner + i)] - m;
          v += d * d;
        }
      use_mean[static_cast<size_t>(ch)] = m;
      use_var[static_cast<size_t>(ch)] = cnt > 0 ? v / cnt : 0;
    }
  }
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t cs = static_cast<size_t>(ch);
      const double inv = 1.0 / std::sqrt(use_var[cs] + eps);
      for (int64_t i = 0; i < inner; ++i) {
        const size_t idx = static_cast<size_t>((b * c + ch) * inner + i);
        y[idx] = scale[cs] * (xv[idx] - use_mean[cs]) * inv + bias[cs];
      }
    }
  store(k.output(0), y);
  // Extra outputs: running mean/var (opset >= 14, training), or the older
  // mean/var/saved_mean/saved_var outputs, which we fill with the statistics used.
  for (size_t o = 1; o < k.num_outputs(); ++o) {
    if (!k.has_output(o)) continue;
    const bool is_mean = o % 2 == 1;
    std::vector<double> v(static_cast<size_t>(c));
    for (size_t ch = 0; ch < v.size(); ++ch) {
      const double given = is_mean ? mean[ch] : var[ch];
      const double batch = is_mean ? use_mean[ch] : use_var[ch];
      v[ch] = training && o <= 2 ? given * momentum + batch * (1 - momentum) : batch;
    }
    Tensor& out = k.output(o);
    if (!out.defined()) {
      const Tensor& src = *k.input(is_mean ? 3 : 4);
      INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(o, src.dtype(), Shape64{c}));
      (void)t;
    }
    if (k.output(o).numel() != c) return k.error("output ", o, " must have ", c, " elements");
    store(k.output(o), v);
  }
  return Status::Ok();
}

Status instancenorm(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 3) return k.error("input must have rank >= 3, got ", shape_to_string(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  INGOT_ASSIGN_OR_RETURN(auto scale, channel_param(k, *k.input(1), c, "scale"));
  INGOT_ASSIGN_OR_RETURN(auto bias, channel_param(k, *k.input(2), c, "B"));
  const double eps = k.attrs().get_float("epsilon", 1e-5f);
  std::vector<double> xv = load(x), mean, var;
  block_stats(xv, n * c, inner, mean, var);
  for (int64_t g = 0; g < n * c; ++g) {
    const size_t ch = static_cast<size_t>(g % c);
    const double inv = 1.0 / std::sqrt(var[static_cast<size_t>(g)] + eps);
    for (int64_t i = 0; i < inner; ++i) {
      double& v = xv[static_cast<size_t>(g * inner + i)];
      v = scale[ch] * (v - mean[static_cast<size_t>(g)]) * inv + bias[ch];
    }
  }
  store(k.output(0), xv);
  return Status::Ok();
}

Status groupnorm(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2, got ", shape_to_string(x.shape()));
  const int64_t groups = k.attrs().get_int("num_groups", 0);
  const int64_t n = x.dim(0), c = x.dim(1);
  if (groups <= 0 || c % groups != 0) return k.error("channels ", c, " not divisible by num_groups ", groups);
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  const int64_t cpg = c / groups;
  // Opset 21: scale/bias per channel; opset 18: per group.
  auto param = [&](const Tensor& t, const char* what) -> Result<std::vector<double>> {
    if (t.numel() == c) return load(t);
    if (t.numel() == groups) {
      std::vector<double> g = load(t), v(static_cast<size_t>(c));
      for (int64_t ch = 0; ch < c; ++ch) v[static_cast<size_t>(ch)] = g[static_cast<size_t>(ch / cpg)];
      return v;
    }
    return k.error(what, " must have ", c, " (or num_groups) elements, got shape ", shape_to_string(t.shape()));
  };
  INGOT_ASSIGN_OR_RETURN(auto scale, param(*k.input(1), "scale"));
  INGOT_ASSIGN_OR_RETURN(auto bias, param(*k.input(2), "bias"));
  const double eps = k.attrs().get_float("epsilon", 1e-5f);
  std::vector<double> xv = load(x), mean, var;
  const int64_t len = cpg * inner;
  block_stats(xv, n * groups, len, mean, var);
  for (int64_t g = 0; g < n * groups; ++g) {
    const double inv = 1.0 / std::sqrt(var[static_cast<size_t>(g)] + eps);
    for (int64_t i = 0; i < len; ++i) {
      const size_t ch = static_cast<size_t>((g % groups) * cpg + i / inner);
      double& v = xv[static_cast<size_t>(g * len + i)];
      v = scale[ch] * (v - mean[static_cast<size_t>(g)]) * inv + bias[ch];
    }
  }
  store(k.output(0), xv);
  return Status::Ok();
}

// Loads `t` broadcast (unidirectionally) to `shape`.
Result<std::vector<double>> broadcast_to(const KernelContext& k, const Tensor& t, const Shape64& shape,
                                         const char* what) {
  auto b = ir::broadcast_shapes(shape, t.shape());
  if (!b.ok() || *b != shape)
    return k.error(what, " of shape ", shape_to_string(t.shape()), " does not broadcast to ", shape_to_string(shape));
  const std::vector<double> v = load(t);
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)));
  BroadcastIndexer bi(shape, t.shape());
  for (size_t i = 0; i < out.size(); ++i) out[i] = v[static_cast<size_t>(bi(static_cast<int64_t>(i)))];
  return out;
}

Status layernorm(KernelContext& k, bool rms) {
  const Tensor& x = *k.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t a = k.attrs().get_int("axis", -1);
  auto ax = ir::normalize_axis(a, rank);
  if (!ax.ok()) return k.error("axis ", a, " out of range for rank ", rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < *ax ? outer : inner) *= x.dim(static_cast<size_t>(d));
  const double eps = k.attrs().get_float("epsilon", 1e-5f);
  INGOT_ASSIGN_OR_RETURN(auto scale, broadcast_to(k, *k.input(1), x.shape(), "scale"));
  std::vector<double> bias;
  if (!rms && k.has_input(2)) {
    INGOT_ASSIGN_OR_RETURN(bias, broadcast_to(k, *k.input(2), x.shape(), "B"));
  }
  std::vector<double> xv = load(x);
  std::vector<double> mean(static_cast<size_t>(outer), 0.0), inv(static_cast<size_t>(outer), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    double* p = xv.data() + o * inner;
    double m = 0, v = 0;
    if (rms) {
      for (int64_t i = 0; i < inner; ++i) v += p[i] * p[i];
      v = inner > 0 ? v / static_cast<double>(inner) : 0;
    } else {
      for (int64_t i = 0; i < inner; ++i) m += p[i];
      m = inner > 0 ? m / static_cast<double>(inner) : 0;
      for (int64_t i = 0; i < inner; ++i) v += (p[i] - m) * (p[i] - m);
      v = inner > 0 ? v / static_cast<double>(inner) : 0;
    }
    const double is = 1.0 / std::sqrt(v + eps);
    mean[static_cast<size_t>(o)] = m;
    inv[static_cast<size_t>(o)] = is;
    for (int64_t i = 0; i < inner; ++i) {
      const size_t idx = static_cast<size_t>(o * inner + i);
      double y = (p[i] - m) * is * scale[idx];
      if (!bias.empty()) y += bias[idx];
      p[i] = y;
    }
  }
  store(k.output(0), xv);
  if (!rms) {
    if (k.has_output(1)) store(k.output(1), mean);
    if (k.has_output(2)) store(k.output(2), inv);
  }
  return Status::Ok();
}


// Strides of the kept-dims output per input dim (0 for reduced dims) and the output size.
Shape64 reduce_strides(const Shape64& shape, const std::vector<bool>& red, int64_t* out_numel) {
  Shape64 m(shape.size(), 0);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (red[d]) continue;
    m[d] = s;
    s *= shape[d];
  }
  *out_numel = s;
  return m;
}

Status mvn(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> red(x.rank(), false);
  for (int64_t a : k.attrs().get_ints("axes", {0, 2, 3})) {
    auto n = ir::normalize_axis(a, rank);
    if (!n.ok()) return k.error("axis ", a, " out of range for rank ", rank);
    red[static_cast<size_t>(*n)] = true;
  }
  int64_t on = 0;
  const Shape64 ms = reduce_strides(x.shape(), red, &on);
  const int64_t cnt = on > 0 ? x.numel() / on : 0;
  std::vector<double> xv = load(x);
  std::vector<double> s(static_cast<size_t>(on), 0.0), s2(static_cast<size_t>(on), 0.0);
  for_each_mapped(x.shape(), ms, [&](int64_t i, int64_t o) {
    const double v = xv[static_cast<size_t>(i)];
    s[static_cast<size_t>(o)] += v;
    s2[static_cast<size_t>(o)] += v * v;
  });
  for (size_t o = 0; o < s.size(); ++o) {
    const double m = s[o] / static_cast<double>(cnt);
    const double var = s2[o] / static_cast<double>(cnt) - m * m;
    s[o] = m;
    s2[o] = std::sqrt(var) + 1e-9;
  }
  for_each_mapped(x.shape(), ms, [&](int64_t i, int64_t o) {
    double& v = xv[static_cast<size_t>(i)];
    v = (v - s[static_cast<size_t>(o)]) / s2[static_cast<size_t>(o)];
  });
  store(k.output(0), xv);
  return Status::Ok();
}

Status lpnorm(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t a = k.attrs().get_int("axis", -1);
  const int64_t p = k.attrs().get_int("p", 2);
  if (p != 1 && p != 2) return k.error("p must be 1 or 2, got ", p);
  auto ax = ir::normalize_axis(a, rank);
  if (!ax.ok()) return k.error("axis ", a, " out of range for rank ", rank);
  std::vector<bool> red(x.rank(), false);
  red[static_cast<size_t>(*ax)] = true;
  int64_t on = 0;
  const Shape64 ms = reduce_strides(x.shape(), red, &on);
  std::vector<double> xv = load(x), norm(static_cast<size_t>(on), 0.0);
  for_each_mapped(x.shape(), ms, [&](int64_t i, int64_t o) {
    const double v = xv[static_cast<size_t>(i)];
    norm[static_cast<size_t>(o)] += p == 1 ? std::fabs(v) : v * v;
  });
  if (p == 2)
    for (double& v : norm) v = std::sqrt(v);
  for_each_mapped(x.shape(), ms, [&](int64_t i, int64_t o) {
    const double nv = norm[static_cast<size_t>(o)];
    double& v = xv[static_cast<size_t>(i)];
    v = nv == 0 ? 0.0 : v / nv;
  });
  store(k.output(0), xv);
  return Status::Ok();
}

Status lrn(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2, got ", shape_to_string(x.shape()));
  const int64_t size = k.attrs().get_int("size", 0);
  if (size <= 0) return k.error("size must be positive, got ", size);
  const double alpha = k.attrs().get_float("alpha", 1e-4f);
  const double beta = k.attrs().get_float("beta", 0.75f);
  const double bias = k.attrs().get_float("bias", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor / ceil of (size-1)/2
  const std::vector<double> xv = load(x);
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t j = std::max<int64_t>(0, ch - lo); j <= std::min<int64_t>(c - 1, ch + hi); ++j) {
          const double v = xv[static_cast<size_t>((b * c + j) * inner + i)];
          sq += v * v;
        }
        const size_t idx = static_cast<size_t>((b * c + ch) * inner + i);
        y[idx] = xv[idx] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  store(k.output(0), y);
  return Status::Ok();
}

}  // namespace

void register_reduction_norm_kernels(KernelRegistry& r) {
  r.add("BatchNormalization", batchnorm);
  r.add("InstanceNormalization", instancenorm);
  r.add("GroupNormalization", groupnorm);
  r.add("LayerNormalization", [](KernelContext& k) { return layernorm(k, false); });
  r.add("RMSNormalization", [](KernelContext& k) { return layernorm(k, true); });
  r.add("MeanVarianceNormalization", mvn);
  r.add("LpNormalization", lpnorm);
  r.add("LRN", lrn);
}

}  // namespace ingot::cpu
