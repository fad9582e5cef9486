// Copyright ingot authors. Apache-2.0.
#include "quant/sensitivity.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include "backend/cpu/executor.h"
#include "quant/insert_qdq.h"

namespace ingot::quant {

double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, na = 0, nb = 0;
  const int64_t n = std::min(a.numel(), b.numel());
  for (int64_t i = 0; i < n; ++i) {
    const double x = a.get_f64(i), y = b.get_f64(i);
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (na == 0 && nb == 0) return 1.0;
  if (na == 0 || nb == 0) return 0.0;
  return dot / std::sqrt(na * nb);
}

double worst_sample_cosine(const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || a.shape() != b.shape() || a.dim(0) <= 1) return cosine(a, b);
  const int64_t rows = a.dim(0), per = rows ? a.numel() / rows : 0;
  double worst = 1.0;
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = r * per; i < (r + 1) * per; ++i) {
      const double x = a.get_f64(i), y = b.get_f64(i);
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    const double c = na == 0 && nb == 0 ? 1.0 : na == 0 || nb == 0 ? 0.0 : dot / std::sqrt(na * nb);
    worst = std::min(worst, c);
  }
  return worst;
}

namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

}  // namespace

Result<SensitivityResult> choose_float_layers(const std::function<Result<std::shared_ptr<ir::Graph>>()>& fresh_graph,
                                              const std::map<std::string, float>& scales,
                                              const std::vector<std::map<std::string, Tensor>>& batches,
                                              const std::vector<std::vector<Tensor>>& want, double min_cosine,
                                              const std::map<std::string, std::string>& forced_float,
                                              const std::vector<std::string>& forced_int8, QuantType type) {
  SensitivityResult res;
  std::atomic<int> evaluations{0};
  // The worst sample cosine over the batches with `keep` in float.
  auto evaluate = [&](const std::map<std::string, std::string>& keep) -> Result<double> {
    INGOT_ASSIGN_OR_RETURN(std::shared_ptr<ir::Graph> g, fresh_graph());
    INGOT_RETURN_IF_ERROR(insert_qdq(*g, scales, keep, type).status());
    ++evaluations;
    double worst = 1.0;
    for (size_t b = 0; b < batches.size(); ++b) {
      cpu::Executor ex;
      INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> got, ex.run(*g, batches[b]));
      for (size_t o = 0; o < got.size() && o < want[b].size(); ++o)
        worst = std::min(worst, worst_sample_cosine(got[o], want[b][o]));
    }
    return worst;
  };
  INGOT_ASSIGN_OR_RETURN(std::shared_ptr<ir::Graph> g0, fresh_graph());
  const std::vector<std::string> layers = quantizable_layers(*g0);
  auto forced = [&](const std::string& l) {
    return std::find(forced_int8.begin(), forced_int8.end(), l) != forced_int8.end();
  };
  // Each layer alone in int8 (every other one in float): independent trials, run on the
  // machine's cores (each on its own copy of the graph and its own executor; the result does not
  // depend on the thread count).
  std::vector<std::string> trial;
  for (const std::string& l : layers)
    if (!forced_float.count(l)) trial.push_back(l);
  std::vector<Result<double>> alone(trial.size(), Result<double>(0.0));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < trial.size(); i = next++) {
      std::map<std::string, std::string> keep;
      for (const std::string& other : layers)
        if (other != trial[i]) keep[other] = "-";
      alone[i] = evaluate(keep);
    }
  };
  const size_t threads = std::min<size_t>(trial.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < trial.size(); ++i) {
    INGOT_ASSIGN_OR_RETURN(double c, std::move(alone[i]));
    res.alone.emplace_back(trial[i], c);
  }
  std::stable_sort(res.alone.begin(), res.alone.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  // Every layer in int8 but the forced ones, then the most sensitive back to float until it holds:
  // keep the first k of `order` in float for the smallest k that holds. The next few k are
  // evaluated side by side, one per core (the later ones wasted when an earlier one holds), so the
  // answer is the one-at-a-time greedy's on any number of cores.
  std::vector<std::pair<std::string, double>> order;
  for (const auto& la : res.alone)
    if (!forced(la.first)) order.push_back(la);
  auto keep_first = [&](size_t k) {
    std::map<std::string, std::string> keep = forced_float;
    for (size_t i = 0; i < k; ++i) keep[order[i].first] = "-";
    return keep;
  };
  std::vector<double> cos_at(order.size() + 1, 0.0);  // cos_at[k]: with the first k in float
  INGOT_ASSIGN_OR_RETURN(cos_at[0], evaluate(keep_first(0)));
  size_t k = 0;
  while (cos_at[k] < min_cosine && k < order.size()) {
    const size_t width = std::min(order.size() - k, threads > 0 ? threads : size_t{1});
    std::vector<Result<double>> got(width, Result<double>(0.0));
    std::vector<std::thread> side;
    for (size_t j = 1; j < width; ++j) side.emplace_back([&, j] { got[j] = evaluate(keep_first(k + 1 + j)); });
    got[0] = evaluate(keep_first(k + 1));
    for (std::thread& t : side) t.join();
    size_t j = 0;
    for (; j < width; ++j) {
      INGOT_ASSIGN_OR_RETURN(cos_at[k + 1 + j], std::move(got[j]));
      if (cos_at[k + 1 + j] >= min_cosine) break;
    }
    k += j < width ? j + 1 : width;
  }
  res.keep_float = forced_float;
  for (size_t i = 0; i < k; ++i)
    res.keep_float[order[i].first] = std::string("kept in float for accuracy (alone in ") +
                                     (type == QuantType::kFp8E4M3 ? "fp8" : "int8") + ": output cosine " +
                                     fmt(order[i].second) + "; with it quantized the model gave " + fmt(cos_at[i]) +
                                     " < " + fmt(min_cosine) + ")";
  res.cosine = cos_at[k];
  res.evaluations = evaluations;
  return res;
}

}  // namespace ingot::quant
