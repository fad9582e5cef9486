// Copyright ingot authors. Apache-2.0.
//
// INT8 calibration of a CUDA build runs its batches through an fp32 CUDA engine (the observed
// tensors as outputs) and gives the scales the CPU reference interpreter gives on the same
// batches: min-max to float rounding (cuDNN sums in another order), entropy within one histogram
// bin; batches outside the build's profile calibrate too. The expected scales are computed as in
// tests/unit/calibration_backend_test.cc (calibration_models.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "ingot/builder.h"
#include "quant/calibration.h"
#include "unit/calibration_models.h"

namespace ingot {
namespace {

using calibration_test::conv_net_onnx;
using calibration_test::FixedBatches;
using calibration_test::interpreter_scales;
using calibration_test::kConvNetObserved;
using calibration_test::random_input;
using quant::CalibrationAlgorithm;

class CudaCalibration : public gpu_test::CudaTest {};

class Lines : public Logger {
 public:
  void log(Severity s, const char* m) noexcept override {
    if (s <= Severity::kInfo) lines.emplace_back(m);
  }
  std::vector<std::string> lines;
};

TEST_F(CudaCalibration, ConvNetScalesEqualTheCpuInterpreter) {
  // Built for batch 16; calibrated on batches of 4, 6 and 4.
  std::vector<std::vector<HostTensor>> batches;
  unsigned seed = 101;
  for (int64_t n : {4, 6, 4}) batches.push_back({random_input("x", {n, 3, 10, 10}, seed++)});
  const std::string model = conv_net_onnx();
  for (CalibrationAlgorithm algo : {CalibrationAlgorithm::kMinMax, CalibrationAlgorithm::kEntropy}) {
    const std::string name = quant::algorithm_name(algo);
    auto want = interpreter_scales(model, batches, kConvNetObserved, algo);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    FixedBatches cal(batches, name);
    BuilderConfig cfg;
    cfg.backend = BackendKind::kCuda;
    cfg.int8 = true;
    cfg.calibrator = &cal;
    OptimizationProfile p;
    p.set_dimensions("x", {16, 3, 10, 10}, {16, 3, 10, 10}, {16, 3, 10, 10});
    cfg.profiles.push_back(p);
    Lines log;
    BuildSummary summary;
    auto r = Builder(log).build_serialized_from_bytes(model.data(), model.size(), cfg, &summary);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(summary.calibration_ran_on, "cuda engine") << ::testing::PrintToString(log.lines);
    EXPECT_EQ(summary.calibration_batches, 3);
    EXPECT_EQ(summary.int8_layers, 4);
    auto got = quant::read_cache(cal.written);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), want->size()) << name;
    for (const auto& [tensor, e] : *want) {
      auto it = got->find(tensor);
      ASSERT_NE(it, got->end()) << name << ": no scale for " << tensor;
      // fp32 (no TF32) convolutions in another summation order: relative 1e-4 of the largest
      // value; the histogram thresholds may move by one bin.
      const double slack = 1e-4 * e.scale + (algo == CalibrationAlgorithm::kMinMax ? 0.0 : e.bin);
      EXPECT_NEAR(it->second, e.scale, slack) << name << ": " << tensor;
    }
  }
}

}  // namespace
}  // namespace ingot
