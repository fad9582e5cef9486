// Copyright ingot authors. Apache-2.0.
//
// INT8/FP8 calibration on the build's backend (issue 20): the builder observes only the tensors
// insert_qdq reads scales for, runs the batches through an fp32 engine of the build's backend
// (here the CPU one) with those tensors as outputs, and falls back to the reference interpreter
// when no such engine can run them. Expected scales come from the interpreter path written out in
// calibration_models.h (run_all, then the histogram code): min-max equal to float rounding,
// entropy and percentile within one histogram bin. Batches whose shapes lie outside the build's
// profile (another batch size, per-batch sequence lengths) still calibrate; a rebuild with the
// cache runs no batch; the histogram work does not depend on the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "calibration_models.h"
#include "ingot/builder.h"
#include "onnx/importer.h"
#include "quant/calibration.h"
#include "quant/insert_qdq.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

using calibration_test::attention_onnx;
using calibration_test::conv_net_onnx;
using calibration_test::Expected;
using calibration_test::FixedBatches;
using calibration_test::interpreter_scales;
using calibration_test::kAttentionObserved;
using calibration_test::kConvNetObserved;
using calibration_test::random_input;
using quant::CalibrationAlgorithm;

// Keeps the info lines of a build.
class Lines : public Logger {
 public:
  void log(Severity s, const char* m) noexcept override {
    if (s <= Severity::kInfo) lines.emplace_back(m);
  }
  bool has(const std::string& part) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
  }
  std::vector<std::string> lines;
};

struct Built {
  std::map<std::string, float> scales;  // from the cache the build wrote
  BuildSummary summary;
  Lines log;
};

Result<Built> calibrate_build(const std::string& model, std::vector<std::vector<HostTensor>> batches,
                              const std::string& algo, BuilderConfig cfg) {
  FixedBatches cal(std::move(batches), algo);
  if (!cfg.fp8) cfg.int8 = true;
  cfg.calibrator = &cal;
  Built b;
  INGOT_RETURN_IF_ERROR(
      Builder(b.log).build_serialized_from_bytes(model.data(), model.size(), cfg, &b.summary).status());
  INGOT_ASSIGN_OR_RETURN(b.scales, quant::read_cache(cal.written));
  return b;
}

// Min-max: the same max |x| up to the rounding of the values (a fused, BN-folded engine computes
// them in another order); entropy and percentile: within one bin of the histogram.
void expect_scales(const std::map<std::string, float>& got, const std::map<std::string, Expected>& want,
                   CalibrationAlgorithm algo, const std::string& what, double rel = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, e] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": no scale for " << name;
    const double slack = rel * e.scale + (algo == CalibrationAlgorithm::kMinMax ? 0.0 : e.bin);
    EXPECT_NEAR(it->second, e.scale, slack) << what << ": " << name;
  }
}

std::vector<std::vector<HostTensor>> conv_batches(const std::vector<int64_t>& sizes, unsigned seed = 1) {
  std::vector<std::vector<HostTensor>> b;
  for (int64_t n : sizes) b.push_back({random_input("x", {n, 3, 10, 10}, seed++)});
  return b;
}

TEST(CalibrationBackend, ObservesOnlyTheInputsOfQuantizableLayers) {
  for (const auto& [bytes, want] :
       {std::make_pair(conv_net_onnx(), kConvNetObserved), std::make_pair(attention_onnx(), kAttentionObserved)}) {
    auto m = onnx::import_model_bytes(bytes.data(), bytes.size());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(quant::calibrated_tensors(*m->graph), want);
  }
}

TEST(CalibrationBackend, ConvNetScalesEqualTheInterpreterPath) {
  const auto batches = conv_batches({4, 4, 4});
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {4, 3, 10, 10}, {4, 3, 10, 10}, {4, 3, 10, 10});
  cfg.profiles.push_back(p);
  for (CalibrationAlgorithm algo :
       {CalibrationAlgorithm::kMinMax, CalibrationAlgorithm::kEntropy, CalibrationAlgorithm::kPercentile}) {
    const std::string name = quant::algorithm_name(algo);
    auto want = interpreter_scales(conv_net_onnx(), batches, kConvNetObserved, algo);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto got = calibrate_build(conv_net_onnx(), batches, name, cfg);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->summary.calibration_ran_on, "cpu engine") << name;
    EXPECT_EQ(got->summary.calibration_batches, 3);
    EXPECT_EQ(got->summary.calibration_tensors, 4);
    EXPECT_EQ(got->summary.int8_layers, 4) << name;
    EXPECT_GT(got->summary.calibration_seconds, 0.0);
    ASSERT_FALSE(got->summary.phase_seconds.empty());
    EXPECT_EQ(got->summary.phase_seconds.front().first, "calibrate");
    EXPECT_TRUE(got->log.has("on the cpu engine in")) << name;
    expect_scales(got->scales, *want, algo, "conv net " + name);
  }
}

TEST(CalibrationBackend, AttentionScalesEqualTheInterpreterPathWithPerBatchSequenceLengths) {
  // The build's profile is S = 8; the batches have 5, 8 and 11 tokens and 2 or 3 sequences.
  std::vector<std::vector<HostTensor>> batches;
  unsigned seed = 11;
  for (auto [n, s] : {std::pair<int64_t, int64_t>{2, 5}, {3, 8}, {2, 11}})
    batches.push_back({random_input("x", {n, s, 16}, seed++)});
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {1, 8, 16}, {4, 8, 16}, {4, 8, 16});
  cfg.profiles.push_back(p);
  for (CalibrationAlgorithm algo : {CalibrationAlgorithm::kMinMax, CalibrationAlgorithm::kEntropy}) {
    const std::string name = quant::algorithm_name(algo);
    auto want = interpreter_scales(attention_onnx(), batches, kAttentionObserved, algo);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    auto got = calibrate_build(attention_onnx(), batches, name, cfg);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->summary.calibration_ran_on, "cpu engine") << name;
    EXPECT_EQ(got->summary.int8_layers, 5) << name;  // q, k, v, out_proj, fc
    expect_scales(got->scales, *want, algo, "attention " + name);
  }
}

TEST(CalibrationBackend, BatchesOutsideTheBuildProfileCalibrate) {
  // Built for batch 16 only; calibrated on batches of 3 and 5 (as ResNet-50 built for 256 is
  // calibrated on batches of 32).
  const auto batches = conv_batches({3, 5}, 21);
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {16, 3, 10, 10}, {16, 3, 10, 10}, {16, 3, 10, 10});
  cfg.profiles.push_back(p);
  auto want = interpreter_scales(conv_net_onnx(), batches, kConvNetObserved, CalibrationAlgorithm::kMinMax);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = calibrate_build(conv_net_onnx(), batches, "minmax", cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->summary.calibration_ran_on, "cpu engine");
  EXPECT_EQ(got->summary.calibration_batches, 2);
  expect_scales(got->scales, *want, CalibrationAlgorithm::kMinMax, "batch 3 and 5 for a batch-16 engine");
}

TEST(CalibrationBackend, Fp8ScalesAreThresholdsOver448) {
  const auto batches = conv_batches({2, 3}, 31);
  BuilderConfig cfg;
  cfg.fp8 = true;
  OptimizationProfile p;
  p.set_dimensions("x", {1, 3, 10, 10}, {2, 3, 10, 10}, {4, 3, 10, 10});
  cfg.profiles.push_back(p);
  auto want = interpreter_scales(conv_net_onnx(), batches, kConvNetObserved, CalibrationAlgorithm::kMinMax, 448.0);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = calibrate_build(conv_net_onnx(), batches, "minmax", cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_scales(got->scales, *want, CalibrationAlgorithm::kMinMax, "fp8");
}

TEST(CalibrationBackend, RebuildWithTheCacheRunsNoBatch) {
  const auto batches = conv_batches({4, 4}, 41);
  BuilderConfig cfg;
  cfg.int8 = true;
  OptimizationProfile p;
  p.set_dimensions("x", {1, 3, 10, 10}, {4, 3, 10, 10}, {4, 3, 10, 10});
  cfg.profiles.push_back(p);
  FixedBatches first(batches, "entropy");
  cfg.calibrator = &first;
  test::Quiet quiet;
  const std::string model = conv_net_onnx();
  BuildSummary s1;
  ASSERT_TRUE(Builder(quiet).build_serialized_from_bytes(model.data(), model.size(), cfg, &s1).ok());
  ASSERT_FALSE(first.written.empty());
  FixedBatches again(batches, "entropy", first.written);
  cfg.calibrator = &again;
  BuildSummary s2;
  auto r = Builder(quiet).build_serialized_from_bytes(model.data(), model.size(), cfg, &s2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(again.handed_out, 0);
  EXPECT_TRUE(s2.calibration_from_cache);
  EXPECT_EQ(s2.calibration_tensors, 4);
  EXPECT_EQ(s2.int8_layers, 4);
  EXPECT_EQ(s2.calibration_seconds, 0.0);
  EXPECT_TRUE(again.written.empty());  // nothing recalibrated, nothing rewritten
}

TEST(CalibrationBackend, AccuracySearchRunsOnTheEngineOutputs) {
  const auto batches = conv_batches({4, 4}, 51);
  BuilderConfig cfg;
  cfg.int8_min_cosine = 0.5;  // every layer stays quantized; the search still measures each
  OptimizationProfile p;
  p.set_dimensions("x", {4, 3, 10, 10}, {4, 3, 10, 10}, {4, 3, 10, 10});
  cfg.profiles.push_back(p);
  auto got = calibrate_build(conv_net_onnx(), batches, "minmax", cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->summary.calibration_ran_on, "cpu engine");
  EXPECT_EQ(got->summary.int8_sensitivity.size(), 4u);
  EXPECT_GT(got->summary.int8_cosine, 0.5);
  EXPECT_LE(got->summary.int8_cosine, 1.0);
  EXPECT_EQ(got->summary.int8_layers, 4);
}

TEST(CalibrationBackend, FallsBackToTheInterpreterWhenNoProfileCoversTheBatches) {
  // x has no shape in the model: a batch of rank 2 and one of rank 3 both run on the interpreter,
  // but one optimization profile cannot hold both ranks.
  const std::string model = calibration_test::any_rank_mlp_onnx();
  std::vector<std::vector<HostTensor>> batches = {{random_input("x", {4, 8}, 61)}, {random_input("x", {2, 3, 8}, 62)}};
  auto want = interpreter_scales(model, batches, {"x", "hr"}, CalibrationAlgorithm::kMinMax);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {4, 8}, {4, 8}, {4, 8});
  cfg.profiles.push_back(p);
  auto got = calibrate_build(model, batches, "minmax", cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->summary.calibration_ran_on, "reference interpreter");
  EXPECT_TRUE(got->log.has("the reference interpreter runs them instead")) << ::testing::PrintToString(got->log.lines);
  EXPECT_TRUE(got->log.has("changes rank")) << ::testing::PrintToString(got->log.lines);
  expect_scales(got->scales, *want, CalibrationAlgorithm::kMinMax, "interpreter fallback", 0.0);
}

TEST(CalibrationBackend, ABatchOfTheWrongShapeIsNamed) {
  std::vector<std::vector<HostTensor>> batches = {{random_input("x", {2, 4, 10, 10}, 71)}};
  auto got = calibrate_build(conv_net_onnx(), batches, "minmax", BuilderConfig());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("calibration batch 1: input 'x' dim 1 is fixed to 3, got 4"), std::string::npos)
      << got.status().to_string();
}

TEST(CalibrationBackend, HistogramsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  // Eight tensors of different sizes, three batches each (the second reaches past the first
  // range, so the ranges grow).
  std::vector<std::vector<std::vector<float>>> data(3);
  for (size_t b = 0; b < data.size(); ++b)
    for (int t = 0; t < 8; ++t) {
      std::vector<float> v(static_cast<size_t>(20000 + 30000 * t));
      for (float& x : v) x = nd(rng) * (b == 1 ? 3.0f : 1.0f);
      data[b].push_back(std::move(v));
    }
  auto run = [&](int threads) {
    std::vector<quant::TensorCalibration> cals(8);
    for (const auto& batch : data) {
      std::vector<quant::Observation> work;
      for (size_t t = 0; t < batch.size(); ++t)
        work.push_back({&cals[t], batch[t].data(), static_cast<int64_t>(batch[t].size())});
      quant::observe_all(work, threads);
    }
    return cals;
  };
  const auto one = run(1);
  for (int threads : {2, 3, 8, 0}) {
    const auto many = run(threads);
    std::vector<const quant::TensorCalibration*> a, b;
    for (size_t t = 0; t < one.size(); ++t) {
      EXPECT_EQ(many[t].histogram(), one[t].histogram()) << threads << " threads, tensor " << t;
      EXPECT_EQ(many[t].range(), one[t].range());
      EXPECT_EQ(many[t].amax(), one[t].amax());
      EXPECT_EQ(many[t].count(), one[t].count());
      a.push_back(&one[t]);
      b.push_back(&many[t]);
    }
    if (threads == 3)  // the entropy search is the slow part: once
      EXPECT_EQ(quant::thresholds(a, CalibrationAlgorithm::kEntropy, 99.99, 1),
                quant::thresholds(b, CalibrationAlgorithm::kEntropy, 99.99, threads));
  }
  // The same as folding each tensor alone, in order.
  for (size_t t = 0; t < 8; ++t) {
    quant::TensorCalibration alone;
    for (const auto& batch : data) alone.observe(batch[t].data(), static_cast<int64_t>(batch[t].size()));
    EXPECT_EQ(alone.histogram(), one[t].histogram());
  }
}

}  // namespace
}  // namespace ingot
