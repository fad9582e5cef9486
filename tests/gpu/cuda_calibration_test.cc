// Copyright ingot authors. Apache-2.0.
//
// INT8 calibration of a CUDA build runs its batches through an fp32 CUDA engine (the observed
// tensors as outputs) and gives the scales the CPU reference interpreter gives on the same
// batches: min-max to float rounding (cuDNN sums in another order), entropy within one histogram
// bin; batches outside the build's profile calibrate too. The expected scales are computed as in
// tests/unit/calibration_backend_test.cc (calibration_models.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu_test_util.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
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

// Runs an engine on one host input (device copies on CUDA) and returns output "y".
std::vector<float> run_y(const std::vector<uint8_t>& bytes, const HostTensor& x, int64_t y_elems, bool cuda) {
  Lines quiet;
  auto engine = Runtime(quiet).deserialize(bytes.data(), bytes.size());
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto ctx = (*engine)->create_execution_context();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return {};
  std::vector<float> y(static_cast<size_t>(y_elems));
  EXPECT_TRUE((*ctx)->set_input_shape("x", x.shape).ok());
  if (!cuda) {
    EXPECT_TRUE((*ctx)->set_tensor_address("x", const_cast<uint8_t*>(x.data.data())).ok());
    EXPECT_TRUE((*ctx)->set_tensor_address("y", y.data()).ok());
    Status s = (*ctx)->enqueue();
    EXPECT_TRUE(s.ok()) << s.to_string();
    return y;
  }
  void *dx = nullptr, *dy = nullptr;
  EXPECT_EQ(cudaMalloc(&dx, x.data.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dy, y.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dx, x.data.data(), x.data.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE((*ctx)->set_tensor_address("x", dx).ok());
  EXPECT_TRUE((*ctx)->set_tensor_address("y", dy).ok());
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  Status s = (*ctx)->enqueue(stream);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy);
  return y;
}

// The int8 CNN path on CUDA (ingot::QuantConv split back into DequantizeLinear + FusedConv, the
// residual Add and the quantized Gemm) computes what the CPU backend's int8 engine computes with the
// same scales (the CPU engine's calibration cache read back): the same rounding points up to
// summation order, so the outputs agree to a fraction of one output quantization step. Both in fp32
// and under --fp16 with the default channels-last layout (8-bit convs go NHWC).
TEST_F(CudaCalibration, Int8ConvNetEngineMatchesTheCpuEngine) {
  std::vector<std::vector<HostTensor>> batches;
  unsigned seed = 301;
  for (int i = 0; i < 3; ++i) batches.push_back({random_input("x", {4, 3, 10, 10}, seed++)});
  const std::string model = conv_net_onnx();
  OptimizationProfile p;
  p.set_dimensions("x", {1, 3, 10, 10}, {8, 3, 10, 10}, {8, 3, 10, 10});
  FixedBatches cal(batches, "minmax");
  BuilderConfig cpu_cfg;
  cpu_cfg.int8 = true;
  cpu_cfg.calibrator = &cal;
  cpu_cfg.profiles.push_back(p);
  Lines log;
  auto cpu = Builder(log).build_serialized_from_bytes(model.data(), model.size(), cpu_cfg);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  ASSERT_FALSE(cal.written.empty());
  const HostTensor x = random_input("x", {8, 3, 10, 10}, 999);
  const std::vector<float> want = run_y(*cpu, x, 8 * 5, false);
  for (bool fp16 : {false, true}) {
    FixedBatches cached({}, "minmax", cal.written);
    BuilderConfig cfg;
    cfg.backend = BackendKind::kCuda;
    cfg.int8 = true;
    cfg.fp16 = fp16;
    cfg.calibrator = &cached;
    cfg.profiles.push_back(p);
    BuildSummary summary;
    auto bytes = Builder(log).build_serialized_from_bytes(model.data(), model.size(), cfg, &summary);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    EXPECT_EQ(summary.int8_layers, 4) << "fp16 " << fp16;
    EXPECT_EQ(cached.handed_out, 0) << "the cache was read back, nothing recalibrated";
    auto engine = Runtime(log).deserialize(bytes->data(), bytes->size());
    ASSERT_TRUE(engine.ok());
    for (const LayerDesc& l : (*engine)->layers()) EXPECT_NE(l.tactic, "cuda.host_fallback") << l.op << " " << l.name;
    const std::vector<float> got = run_y(*bytes, x, 8 * 5, true);
    ASSERT_EQ(got.size(), want.size());
    double num = 0, den = 0, ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
      ab += got[i] * want[i], aa += got[i] * got[i], bb += want[i] * want[i];
    }
    // fp32: the same int8 rounding points, float sums in another order; fp16: the activations
    // between the quantized layers are fp16 too (relative 1e-3 each).
    EXPECT_LT(std::sqrt(num / den), fp16 ? 2e-2 : 5e-3) << "fp16 " << fp16;
    EXPECT_GT(ab / std::sqrt(aa * bb), fp16 ? 0.999 : 0.9999) << "fp16 " << fp16;
  }
}

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
