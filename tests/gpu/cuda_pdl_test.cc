// Copyright ingot authors. Apache-2.0.
//
// Programmatic dependent launch (backend/cuda/core/launch.cuh): ingot's kernels may be scheduled
// before the previous kernel in the stream has finished, and wait at their first statement. These
// tests chain dependent kernels -- read-after-write (each reads what the last wrote) and
// write-after-read (a short kernel overwrites the buffer a long kernel is still reading) -- in a
// stream and in a CUDA graph, and compare with the same float operations on the host, exactly.
// A kernel that did not wait would read stale values or clobber its predecessor's input.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <random>
#include <vector>

#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::BinaryOp;
using backend::cuda::FloatType;
using backend::cuda::UnaryOp;
using backend::cuda::UnaryParams;

class PdlTest : public CudaTest {};

TEST_F(PdlTest, OnWhereTheDeviceHasIt) {
  const int cc = backend::cuda::current_device_info().cc;
  const char* env = std::getenv("INGOT_PDL");
  const bool off = env != nullptr && std::string(env) == "0";
  EXPECT_EQ(backend::cuda::pdl_enabled(), cc >= 90 && !off) << "compute capability " << cc;
}

std::vector<float> random_nonzero(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.25f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = (rng() & 1) ? d(rng) : -d(rng);
  return v;
}

// a <- -(a + 1), 100 times, through b: each kernel reads the buffer the one before it wrote, and
// writes the buffer the one before it read.
void ping_pong(cudaStream_t s, float* a, float* b, const float* ones, int64_t n, int rounds) {
  UnaryParams neg{};
  for (int r = 0; r < rounds; ++r) {
    ASSERT_EQ(backend::cuda::launch_binary_same_shape(BinaryOp::kAdd, FloatType::kF32, a, ones, b, n, s), cudaSuccess);
    ASSERT_EQ(backend::cuda::launch_unary(UnaryOp::kNeg, neg, FloatType::kF32, FloatType::kF32, b, a, n, s),
              cudaSuccess);
  }
}

void expect_ping_pong(const std::vector<float>& start, const std::vector<float>& got, int rounds, const char* how) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    float want = start[i];
    for (int r = 0; r < rounds; ++r) want = -(want + 1.0f);
    if (got[i] != want && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << how << ": first wrong element " << first << " of " << start.size();
}

TEST_F(PdlTest, DependentKernelsSeeEachOthersWritesInAStreamAndInAGraph) {
  for (int64_t n : {int64_t{1000}, int64_t{1} << 22}) {
    const int rounds = 100;
    std::vector<float> start = random_nonzero(static_cast<size_t>(n), 7), ones(static_cast<size_t>(n), 1.0f);
    DeviceBuffer a(n * 4), b(n * 4), o(n * 4);
    ASSERT_TRUE(a.valid() && b.valid() && o.valid());
    ASSERT_EQ(cudaMemcpy(o.get(), ones.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    auto* pa = static_cast<float*>(a.get());
    auto* pb = static_cast<float*>(b.get());
    std::vector<float> got(static_cast<size_t>(n));

    // In a stream.
    ASSERT_EQ(cudaMemcpy(pa, start.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ping_pong(s, pa, pb, static_cast<const float*>(o.get()), n, rounds);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), pa, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_ping_pong(start, got, rounds, n > 1000 ? "stream, 4M" : "stream, 1000");

    // In a graph, replayed three times.
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ping_pong(s, pa, pb, static_cast<const float*>(o.get()), n, rounds);
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pa, start.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (int k = 0; k < 3; ++k) ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), pa, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_ping_pong(start, got, 3 * rounds, n > 1000 ? "graph, 4M" : "graph, 1000");
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }
}

// Write after read: a long kernel reads big (64M floats) into out; the next, a short kernel, writes
// big's last elements, which the long kernel's grid-stride loop reads last. Without the wait the short
// kernel could run while the long one still reads.
TEST_F(PdlTest, AShortKernelDoesNotOverwriteWhatTheLongOneBeforeItStillReads) {
  const int64_t n = int64_t{1} << 26, head = 4096;
  std::vector<float> start = random_nonzero(static_cast<size_t>(n), 11);
  DeviceBuffer big(n * 4), out(n * 4), twos(head * 4);
  ASSERT_TRUE(big.valid() && out.valid() && twos.valid());
  std::vector<float> h2(head, 2.0f);
  ASSERT_EQ(cudaMemcpy(twos.get(), h2.data(), head * 4, cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  auto* pbig = static_cast<float*>(big.get());
  auto* pout = static_cast<float*>(out.get());
  UnaryParams none{};
  for (int rep = 0; rep < 5; ++rep) {
    ASSERT_EQ(cudaMemcpy(pbig, start.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    // out = |big| over 64M elements; then big[n - head, n) = twos + twos (4.0).
    ASSERT_EQ(backend::cuda::launch_unary(UnaryOp::kAbs, none, FloatType::kF32, FloatType::kF32, pbig, pout, n, s),
              cudaSuccess);
    ASSERT_EQ(backend::cuda::launch_binary_same_shape(BinaryOp::kAdd, FloatType::kF32, twos.get(), twos.get(),
                                                      pbig + (n - head), head, s),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> got(static_cast<size_t>(head));
    ASSERT_EQ(cudaMemcpy(got.data(), pout + (n - head), head * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0;
    for (int64_t i = 0; i < head; ++i)
      bad += got[static_cast<size_t>(i)] != std::fabs(start[static_cast<size_t>(n - head + i)]);
    EXPECT_EQ(bad, 0u) << "repetition " << rep << ": the first kernel read values the second one wrote";
    ASSERT_EQ(cudaMemcpy(got.data(), pbig + (n - head), head * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float v : got) ASSERT_EQ(v, 4.0f);
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace ingot::gpu_test
