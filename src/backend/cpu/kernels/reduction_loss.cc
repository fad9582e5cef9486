// Copyright ingot authors. Apache-2.0.
//
// Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (which is a log-softmax
// over axis 1 followed by the same negative log likelihood).
#include <cmath>
#include <limits>
#include <optional>

#include "backend/cpu/kernels/all_kernels.h"
#include "backend/cpu/kernel_util.h"

namespace ingot::cpu {

namespace {

std::vector<double> load(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get_f64(static_cast<int64_t>(i));
  return v;
}

void store(Tensor& t, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
}

// `logp` holds log-probabilities laid out [N, C, D]. Writes the loss output 0.
Status nll(KernelContext& k, const std::vector<double>& logp, const Shape64& x_shape) {
  const Tensor& target = *k.input(1);
  if (x_shape.size() < 2) return k.error("input must have rank >= 2, got ", shape_to_string(x_shape));
  if (target.rank() + 1 != x_shape.size()) return k.error("target rank must be input rank - 1");
  const int64_t n = x_shape[0], c = x_shape[1];
  Shape64 expect_t{n};
  for (size_t d = 2; d < x_shape.size(); ++d) expect_t.push_back(x_shape[d]);
  if (target.shape() != expect_t)
    return k.error("target shape ", shape_to_string(target.shape()), " must be ", shape_to_string(expect_t));
  const int64_t d_len = n == 0 ? 0 : target.numel() / n;
  std::optional<int64_t> ignore;
  if (k.attrs().has("ignore_index")) ignore = k.attrs().get_int("ignore_index", 0);
  const std::string reduction = k.attrs().get_string("reduction", "mean");
  std::vector<double> weight;
  if (k.has_input(2)) {
    weight = load(*k.input(2));
    if (static_cast<int64_t>(weight.size()) != c) return k.error("weight must have ", c, " elements");
  }
  std::vector<double> loss(static_cast<size_t>(target.numel()), 0.0);
  double wsum = 0, lsum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t d = 0; d < d_len; ++d) {
      const size_t ti = static_cast<size_t>(b * d_len + d);
      const int64_t t = target.get_i64(static_cast<int64_t>(ti));
      if (ignore && t == *ignore) continue;
      if (t < 0 || t >= c) return k.error("target value ", t, " out of range [0, ", c, ")");
      const double w = weight.empty() ? 1.0 : weight[static_cast<size_t>(t)];
      loss[ti] = -logp[static_cast<size_t>((b * c + t) * d_len + d)] * w;
      wsum += w;
      lsum += loss[ti];
    }
  Tensor& out = k.output(0);
  if (reduction == "none") {
    store(out, loss);
  } else if (reduction == "sum") {
    out.set_f64(0, lsum);
  } else if (reduction == "mean") {
    out.set_f64(0, lsum / wsum);
  } else {
    return k.error("unknown reduction '", reduction, "'");
  }
  return Status::Ok();
}

Status nll_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  return nll(k, load(x), x.shape());
}

Status sce_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2) return k.error("scores must have rank >= 2, got ", shape_to_string(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n == 0 || c == 0 ? 0 : x.numel() / (n * c);
  std::vector<double> v = load(x);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((b * c + j) * inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c; ++j) m = std::max(m, v[at(j)]);
      if (!std::isfinite(m)) m = 0;
      double s = 0;
      for (int64_t j = 0; j < c; ++j) s += std::exp(v[at(j)] - m);
      const double ls = std::log(s);
      for (int64_t j = 0; j < c; ++j) v[at(j)] = v[at(j)] - m - ls;
    }
  INGOT_RETURN_IF_ERROR(nll(k, v, x.shape()));
  if (k.num_outputs() > 1 && k.has_output(1)) store(k.output(1), v);
  return Status::Ok();
}

}  // namespace

void register_reduction_loss_kernels(KernelRegistry& r) {
  r.add("NegativeLogLikelihoodLoss", nll_kernel);
  r.add("SoftmaxCrossEntropyLoss", sce_kernel);
}

}  // namespace ingot::cpu
