// Copyright ingot authors. Apache-2.0.
#include "quant/smooth_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace ingot::quant {

void observe_channel_amax(std::vector<float>* amax, const float* x, int64_t n, int64_t channels) {
  if (channels <= 0 || n % channels != 0) return;
  if (amax->size() != static_cast<size_t>(channels)) amax->assign(static_cast<size_t>(channels), 0.0f);
  float* a = amax->data();
  for (int64_t i = 0; i < n; i += channels)
    for (int64_t c = 0; c < channels; ++c) a[c] = std::max(a[c], std::fabs(x[i + c]));
}

namespace {

// A layer this rewrite takes: MatMul or Gemm (transA 0) reading a float activation as input 0 and
// a constant float 2-D weight as input 1. Returns whether its weight is [N, K] (Gemm transB 1).
bool smoothable(const ir::Node& n, bool* k_last) {
  if (!n.domain().empty() || n.inputs().size() < 2 || !n.input(0) || !n.input(1)) return false;
  const bool gemm = n.op_type() == "Gemm";
  if (!gemm && n.op_type() != "MatMul") return false;
  if (gemm && n.attrs().get_int("transA", 0) != 0) return false;
  const ir::Value* x = n.input(0);
  const Tensor* w = n.input(1)->initializer();
  if (x->initializer() || x->dtype() != DataType::kFloat32 || !w || w->dtype() != DataType::kFloat32 ||
      w->rank() != 2)
    return false;
  *k_last = gemm && n.attrs().get_int("transB", 0) != 0;
  return true;
}

}  // namespace

Result<SmoothReport> smooth_quant(ir::Graph& g, const std::map<std::string, std::vector<float>>& channel_amax,
                                  double alpha, std::map<std::string, float>* scales, QuantType type,
                                  const std::map<std::string, std::string>& keep_float) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) return invalid_argument("SmoothQuant alpha must be in [0, 1], got ", alpha);
  SmoothReport rep;
  // The layers per activation, in node order.
  std::vector<ir::Value*> order;
  std::unordered_map<ir::Value*, std::vector<std::pair<ir::Node*, bool>>> readers;
  for (const auto& n : g.nodes()) {
    bool k_last = false;
    if (!smoothable(*n, &k_last) || keep_float.count(layer_name(*n))) continue;
    ir::Value* x = n->input(0);
    auto it = channel_amax.find(x->name());
    if (it == channel_amax.end()) continue;
    const Tensor& w = *n->input(1)->initializer();
    const int64_t k = k_last ? w.dim(1) : w.dim(0);
    if (static_cast<int64_t>(it->second.size()) != k) continue;  // observed over another last dim
    if (!readers.count(x)) order.push_back(x);
    readers[x].emplace_back(n.get(), k_last);
  }
  const double qmax = quant_max(type);
  for (ir::Value* x : order) {
    const std::vector<float>& a = channel_amax.at(x->name());
    const size_t k = a.size();
    // max |W| per input channel over every layer reading x.
    std::vector<double> wmax(k, 0.0);
    for (const auto& [n, k_last] : readers[x]) {
      const Tensor& w = *n->input(1)->initializer();
      const int64_t rows = w.dim(0), cols = w.dim(1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const size_t j = static_cast<size_t>(k_last ? c : r);
          wmax[j] = std::max(wmax[j], std::fabs(w.get_f64(r * cols + c)));
        }
    }
    std::vector<double> s(k, 1.0);
    double before = 0, after = 0, amax_before = 0, amax_after = 0, median_before = 0;
    for (size_t j = 0; j < k; ++j) {
      if (a[j] > 0 && wmax[j] > 0)
        s[j] = std::clamp(std::pow(static_cast<double>(a[j]), alpha) / std::pow(wmax[j], 1.0 - alpha), 1e-5, 1e5);
      amax_before = std::max(amax_before, static_cast<double>(a[j]));
      amax_after = std::max(amax_after, a[j] / s[j]);
    }
    if (!(amax_after > 0)) continue;
    {  // the ratio of the largest channel to the median one, before and after (for the report)
      std::vector<double> sorted_b(a.begin(), a.end()), sorted_a(k);
      for (size_t j = 0; j < k; ++j) sorted_a[j] = a[j] / s[j];
      std::nth_element(sorted_b.begin(), sorted_b.begin() + k / 2, sorted_b.end());
      std::nth_element(sorted_a.begin(), sorted_a.begin() + k / 2, sorted_a.end());
      median_before = sorted_b[k / 2];
      before = median_before > 0 ? amax_before / median_before : 0;
      after = sorted_a[k / 2] > 0 ? amax_after / sorted_a[k / 2] : 0;
    }
    // x' = x * (1/s), read by the layers in place of x.
    Tensor inv = Tensor::zeros(DataType::kFloat32, {static_cast<int64_t>(k)}).value();
    for (size_t j = 0; j < k; ++j) inv.set_f64(static_cast<int64_t>(j), 1.0 / s[j]);
    const std::string base = x->name().empty() ? "smoothed" : x->name();
    ir::Value* iv = g.add_initializer(fresh_name(g, base + "_smooth_inv_scale"), std::move(inv));
    ir::Value* xs = g.add_value(fresh_name(g, base + "_smoothed"), DataType::kFloat32, x->shape());
    g.add_node("Mul", {x, iv}, {xs}, {}, base + "/smooth");
    std::string names;
    for (const auto& [n, k_last] : readers[x]) {
      const Tensor& w = *n->input(1)->initializer();
      Tensor ws = Tensor::zeros(DataType::kFloat32, w.shape()).value();
      const int64_t rows = w.dim(0), cols = w.dim(1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          ws.set_f64(r * cols + c, w.get_f64(r * cols + c) * s[static_cast<size_t>(k_last ? c : r)]);
      ir::Value* wv = g.add_initializer(fresh_name(g, n->input(1)->name() + "_smoothed"), std::move(ws));
      wv->set_shape(n->input(1)->shape());
      n->set_input(0, xs);
      n->set_input(1, wv);
      names += (names.empty() ? "" : ", ") + layer_name(*n);
      ++rep.layers;
    }
    (*scales)[xs->name()] = static_cast<float>(amax_after / qmax);
    char line[160];
    std::snprintf(line, sizeof line, ": largest / median channel max %.1f -> %.1f", before, after);
    rep.lines.push_back(base + " -> " + names + line);
    ++rep.activations;
  }
  INGOT_RETURN_IF_ERROR(g.topological_sort());
  return rep;
}

}  // namespace ingot::quant
