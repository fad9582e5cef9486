// Copyright ingot authors. Apache-2.0.
//
// Device out-of-memory and failing steps surface as error Statuses through the public API, and
// the engine and its contexts stay usable afterwards (issue 5). A small CUDA engine with a
// dynamic batch is built; then the test takes (almost) all device memory in blocks it keeps and
// shows that a new context and a run needing a new buffer fail with kOutOfMemory (no crash, no
// abort), that a run needing nothing new still works, and that after the blocks are freed the
// same context and engine give the CPU reference's outputs again. Also: shapes outside the
// profile and a missing binding fail cleanly and the next good run is right.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "gpu_test_util.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "mlp_model.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

using test::Quiet;

constexpr int64_t kIn = 64, kHidden = 128, kOut = 1024;
constexpr int64_t kMaxBatch = 512;  // the output alone is 2 MiB at the max batch

// probs = Softmax(Relu(x·W1 + b1)·W2 + b2), x: f32[N, 64], N in 1..512.
std::string mlp_model() { return gpu_test::mlp_onnx(-1, kIn, kHidden, kOut, 5); }

/// Device memory taken in ever smaller blocks until none fits, held until release().
class MemoryHog {
 public:
  ~MemoryHog() { release(); }
  /// Returns how many bytes it took.
  size_t exhaust() {
    size_t taken = 0;
    for (size_t block = size_t{1} << 30; block >= 256; block /= 4) {
      for (;;) {
        void* p = nullptr;
        if (cudaMalloc(&p, block) != cudaSuccess) break;
        blocks_.push_back(p);
        taken += block;
      }
    }
    cudaGetLastError();  // our own failed cudaMalloc: not an error the library should see
    return taken;
  }
  void release() {
    for (void* p : blocks_) cudaFree(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

class CudaOutOfMemory : public gpu_test::CudaTest {
 protected:
  void SetUp() override {
    gpu_test::CudaTest::SetUp();
    if (IsSkipped()) return;
    bytes_ = mlp_model();
    BuilderConfig cfg;
    cfg.backend = BackendKind::kCuda;
    OptimizationProfile prof;
    prof.set_dimensions("x", {1, kIn}, {8, kIn}, {kMaxBatch, kIn});
    cfg.profiles.push_back(prof);
    auto eng_bytes = Builder(quiet_).build_serialized_from_bytes(bytes_.data(), bytes_.size(), cfg);
    ASSERT_TRUE(eng_bytes.ok()) << eng_bytes.status().to_string();
    auto engine = Runtime(quiet_).deserialize(eng_bytes->data(), eng_bytes->size());
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    engine_ = *engine;
    auto model = onnx::import_model_bytes(bytes_.data(), bytes_.size());
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    model_ = std::move(model).value();
    x_ = Tensor::zeros(DataType::kFloat32, {kMaxBatch, kIn}).value();
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < x_.numel(); ++i) x_.set_f64(i, u(rng));
    ASSERT_EQ(cudaMalloc(&dx_, x_.nbytes()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx_, x_.raw(), x_.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
    if (dx_) cudaFree(dx_);
  }

  /// Runs `ctx` at batch n (x bound, probs left to the context) and compares with the CPU
  /// interpreter on the same rows.
  ::testing::AssertionResult runs_correctly(ExecutionContext& ctx, int64_t n) {
    Status st = ctx.set_input_shape("x", {n, kIn});
    if (!st.ok()) return ::testing::AssertionFailure() << "set_input_shape: " << st.to_string();
    st = ctx.set_tensor_address("x", dx_);
    if (!st.ok()) return ::testing::AssertionFailure() << "set_tensor_address: " << st.to_string();
    st = ctx.enqueue(stream_);
    if (!st.ok()) return ::testing::AssertionFailure() << "enqueue: " << st.to_string();
    if (cudaStreamSynchronize(stream_) != cudaSuccess) return ::testing::AssertionFailure() << "sync failed";
    const void* dy = ctx.tensor_address("probs");
    if (!dy) return ::testing::AssertionFailure() << "no probs";
    std::vector<float> got(static_cast<size_t>(n * kOut));
    if (cudaMemcpy(got.data(), dy, got.size() * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return ::testing::AssertionFailure() << "copy back failed";
    Tensor x = Tensor::from_vector(DataType::kFloat32, {n, kIn},
                                   std::vector<float>(x_.data<float>(), x_.data<float>() + n * kIn));
    cpu::Executor exec;
    auto want = exec.run(*model_.graph, {{"x", x}});
    if (!want.ok()) return ::testing::AssertionFailure() << "reference: " << want.status().to_string();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - (*want)[0].get_f64(static_cast<int64_t>(i))));
    if (!(worst < 1e-5)) return ::testing::AssertionFailure() << "batch " << n << ": max abs error " << worst;
    return ::testing::AssertionSuccess();
  }

  Quiet quiet_;
  std::string bytes_;
  std::shared_ptr<Engine> engine_;
  onnx::Model model_;
  Tensor x_;
  void* dx_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaOutOfMemory, ExhaustedDeviceMemoryIsAnErrorAndTheContextRecovers) {
  auto ctx = engine_->create_execution_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  ASSERT_TRUE(runs_correctly(**ctx, 4));

  MemoryHog hog;
  const size_t taken = hog.exhaust();
  std::printf("  holding %.1f GiB of device memory\n", taken / double(1ull << 30));
  ASSERT_GT(taken, 0u);

  // A new context needs its activation arena: a clear kOutOfMemory, no crash.
  auto ctx2 = engine_->create_execution_context();
  ASSERT_FALSE(ctx2.ok());
  EXPECT_EQ(ctx2.status().code(), StatusCode::kOutOfMemory) << ctx2.status().to_string();
  EXPECT_NE(ctx2.status().message().find("arena"), std::string::npos) << ctx2.status().to_string();

  // A larger batch needs a larger (context-owned) output buffer: the run fails cleanly.
  ASSERT_TRUE((*ctx)->set_input_shape("x", {kMaxBatch, kIn}).ok());
  Status st = (*ctx)->enqueue(stream_);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.to_string();

  // Back at the batch it already has buffers for, the context runs even now, and right: the
  // failed allocations above left no stale CUDA error for its launches to trip on.
  EXPECT_TRUE(runs_correctly(**ctx, 4));

  hog.release();
  // With the memory back, the same context takes the larger batch, and a new context works.
  EXPECT_TRUE(runs_correctly(**ctx, kMaxBatch));
  EXPECT_TRUE(runs_correctly(**ctx, 3));
  auto ctx3 = engine_->create_execution_context();
  ASSERT_TRUE(ctx3.ok()) << ctx3.status().to_string();
  EXPECT_TRUE(runs_correctly(**ctx3, 37));
}

TEST_F(CudaOutOfMemory, FailedStepsLeaveTheContextUsable) {
  auto ctx = engine_->create_execution_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  ASSERT_TRUE(runs_correctly(**ctx, 8));

  // A batch outside the profile: an error naming the input, the dim and the range.
  Status st = (*ctx)->set_input_shape("x", {kMaxBatch + 1, kIn});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("1..512"), std::string::npos) << st.message();
  // The rejected shape changed nothing: the next run is the previous one, and right.
  ASSERT_TRUE((*ctx)->enqueue(stream_).ok());
  EXPECT_TRUE(runs_correctly(**ctx, 8));

  // A run with the input unbound fails with a message naming it; binding it again recovers.
  ASSERT_TRUE((*ctx)->set_input_shape("x", {5, kIn}).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("x", nullptr).ok());
  st = (*ctx)->enqueue(stream_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  EXPECT_TRUE(runs_correctly(**ctx, 5));

  // A wrong rank is refused too, and the context keeps running.
  EXPECT_FALSE((*ctx)->set_input_shape("x", {5}).ok());
  EXPECT_TRUE(runs_correctly(**ctx, 11));
}

}  // namespace
}  // namespace ingot
