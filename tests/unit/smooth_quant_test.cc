// Copyright ingot authors. Apache-2.0.
//
// SmoothQuant (src/quant/smooth_quant): the rewrite keeps the float model's outputs (it only moves
// a per-channel factor from the activation into the weights), the layers reading one activation
// share one smoothing (Q/K/V), other readers keep the original tensor, the factors are
// SmoothQuant's formula, and the point of it: on an activation with an outlier channel, int8 with
// smoothing is closer to the float result than int8 without (both min-max calibrated here, the
// float graphs run on the CPU reference).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "quant/insert_qdq.h"
#include "quant/smooth_quant.h"

namespace ingot {
namespace {

constexpr int64_t kRows = 32, kK = 16, kN = 8;

Tensor random_tensor(Shape64 shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::zeros(DataType::kFloat32, shape).value();
  std::normal_distribution<float> nd(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] = nd(rng) + 0.01f;
  return t;
}

// x [32, 16] -> MatMul q (W [16, 8]), Gemm k (transB: W [8, 16]), Relu r (another reader of x).
struct Model {
  std::unique_ptr<ir::Graph> g;
  Tensor wq, wk;
};

Model make_model(uint32_t seed) {
  std::mt19937 rng(seed);
  Model m;
  m.wq = random_tensor({kK, kN}, rng, 0.2f);
  m.wk = random_tensor({kN, kK}, rng, 0.2f);
  m.g = std::make_unique<ir::Graph>("smooth");
  ir::Graph& g = *m.g;
  g.set_opset_import("", 17);
  ir::Value* x = g.add_input("x", DataType::kFloat32, ir::Shape({kRows, kK}));
  ir::Value* wq = g.add_initializer("wq", m.wq);
  ir::Value* wk = g.add_initializer("wk", m.wk);
  ir::Value* q = g.add_value("q", DataType::kFloat32, ir::Shape({kRows, kN}));
  ir::Value* k = g.add_value("k", DataType::kFloat32, ir::Shape({kRows, kN}));
  ir::Value* r = g.add_value("r", DataType::kFloat32, ir::Shape({kRows, kK}));
  g.add_node("MatMul", {x, wq}, {q}, {}, "q");
  ir::Attributes ta;
  ta.set_int("transB", 1);
  g.add_node("Gemm", {x, wk}, {k}, std::move(ta), "k");
  g.add_node("Relu", {x}, {r}, {}, "r");
  g.add_output(q);
  g.add_output(k);
  g.add_output(r);
  return m;
}

// Activations with channel 5 about 40 times the others (a transformer's outlier channel).
Tensor outlier_input(uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor x = random_tensor({kRows, kK}, rng);
  for (int64_t i = 0; i < kRows; ++i) x.mutable_data<float>()[i * kK + 5] *= 40.f;
  return x;
}

std::map<std::string, std::vector<float>> channel_amax_of(const Tensor& x) {
  std::vector<float> a;
  quant::observe_channel_amax(&a, x.data<float>(), x.numel(), kK);
  return {{"x", a}};
}

std::vector<Tensor> run(const ir::Graph& g, const Tensor& x) {
  cpu::Executor ex;
  auto out = ex.run(g, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<Tensor>{};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) d = std::max(d, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return d;
}

double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double e = got.get_f64(i) - want.get_f64(i);
    num += e * e;
    den += want.get_f64(i) * want.get_f64(i);
  }
  return std::sqrt(num / den);
}

TEST(SmoothQuant, KeepsTheFloatOutputsAndSharesOneSmoothingPerActivation) {
  Model m = make_model(1);
  const Tensor x = outlier_input(2);
  const std::vector<Tensor> want = run(*m.g, x);
  std::map<std::string, float> scales;
  auto rep = quant::smooth_quant(*m.g, channel_amax_of(x), 0.5, &scales, quant::QuantType::kInt8);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->activations, 1);
  EXPECT_EQ(rep->layers, 2);
  // q and k read one smoothed tensor; the Relu still reads x.
  const ir::Node* q = nullptr;
  const ir::Node* k = nullptr;
  const ir::Node* r = nullptr;
  for (const auto& n : m.g->nodes()) {
    if (n->name() == "q") q = n.get();
    if (n->name() == "k") k = n.get();
    if (n->name() == "r") r = n.get();
  }
  ASSERT_TRUE(q && k && r);
  EXPECT_EQ(q->input(0), k->input(0));
  EXPECT_EQ(q->input(0)->name(), "x_smoothed");
  EXPECT_EQ(r->input(0)->name(), "x");
  ASSERT_EQ(scales.count("x_smoothed"), 1u);
  // The float model is unchanged up to rounding.
  const std::vector<Tensor> got = run(*m.g, x);
  ASSERT_EQ(got.size(), 3u);
  for (size_t o = 0; o < 3; ++o) EXPECT_LT(max_abs_diff(got[o], want[o]), 1e-4) << "output " << o;

  // SmoothQuant's factor for the outlier channel, by hand: s = sqrt(a_5) / sqrt(max |W_5|) over
  // both weights' input channel 5 (row 5 of wq, column 5 of wk).
  const std::vector<float> a = channel_amax_of(x).at("x");
  double w5 = 0;
  for (int64_t n = 0; n < kN; ++n)
    w5 = std::max({w5, std::fabs(m.wq.get_f64(5 * kN + n)), std::fabs(m.wk.get_f64(n * kK + 5))});
  const double s5 = std::sqrt(a[5]) / std::sqrt(w5);
  const ir::Node* mul = q->input(0)->producer();
  ASSERT_TRUE(mul && mul->op_type() == "Mul" && mul->input(1)->initializer());
  EXPECT_NEAR(mul->input(1)->initializer()->get_f64(5), 1.0 / s5, 1e-6 / s5);
  // The smoothed tensor's min-max scale: max_j a_j / s_j over 127.
  double smax = 0;
  for (int64_t j = 0; j < kK; ++j) smax = std::max(smax, a[j] * mul->input(1)->initializer()->get_f64(j));
  EXPECT_NEAR(scales.at("x_smoothed"), smax / 127, 1e-6 * smax);
}

TEST(SmoothQuant, Int8WithSmoothingIsCloserToFloatOnAnOutlierChannel) {
  const Tensor x = outlier_input(4);
  Model plain = make_model(3);
  const std::vector<Tensor> want = run(*plain.g, x);
  // Without: the min-max scale of x, set by the outlier channel.
  const std::vector<float> a = channel_amax_of(x).at("x");
  const float amax = *std::max_element(a.begin(), a.end());
  ASSERT_TRUE(quant::insert_qdq(*plain.g, {{"x", amax / 127}}).ok());
  const std::vector<Tensor> got_plain = run(*plain.g, x);
  // With: smoothed first, the smoothed tensor's scale from the rewrite.
  Model smooth = make_model(3);
  std::map<std::string, float> scales = {{"x", amax / 127}};
  ASSERT_TRUE(quant::smooth_quant(*smooth.g, channel_amax_of(x), 0.5, &scales, quant::QuantType::kInt8).ok());
  ASSERT_TRUE(quant::insert_qdq(*smooth.g, scales).ok());
  const std::vector<Tensor> got_smooth = run(*smooth.g, x);
  for (size_t o = 0; o < 2; ++o) {
    const double e_plain = rel_l2(got_plain[o], want[o]), e_smooth = rel_l2(got_smooth[o], want[o]);
    EXPECT_LT(e_smooth, 0.5 * e_plain) << "output " << o << ": " << e_smooth << " vs " << e_plain;
  }
}

TEST(SmoothQuant, SkipsKeptLayersMismatchedStatsAndRefusesABadAlpha) {
  Model m = make_model(5);
  const Tensor x = outlier_input(6);
  std::map<std::string, float> scales;
  auto bad = quant::smooth_quant(*m.g, channel_amax_of(x), 1.5, &scales, quant::QuantType::kInt8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("alpha"), std::string::npos);
  // Statistics over another channel count: nothing to do.
  std::map<std::string, std::vector<float>> wrong = {{"x", std::vector<float>(kK + 1, 1.0f)}};
  auto none = quant::smooth_quant(*m.g, wrong, 0.5, &scales, quant::QuantType::kInt8);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->activations, 0);
  // A layer kept in float is left reading x; the other is smoothed alone.
  auto one = quant::smooth_quant(*m.g, channel_amax_of(x), 0.5, &scales, quant::QuantType::kInt8, {{"k", "-"}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->layers, 1);
  for (const auto& n : m.g->nodes())
    if (n->name() == "k") EXPECT_EQ(n->input(0)->name(), "x");
}

}  // namespace
}  // namespace ingot
