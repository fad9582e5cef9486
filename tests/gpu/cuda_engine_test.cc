// Copyright ingot authors. Apache-2.0.
//
// A whole CUDA engine through the public API: every step on a CUDA tactic, outputs equal to the
// CPU reference, a steady-state enqueue that allocates no host memory and does not synchronize
// (it can be captured into a CUDA graph and replayed).
#include <cuda_runtime_api.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "backend/cpu/executor.h"
#include "gpu_test_util.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "mlp_model.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "quiet_logger.h"

// Counts host allocations made by this thread while counting is on.
namespace {
thread_local bool g_counting = false;
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_counting) {
    // The first few show where they come from (library and address), then counting goes on.
    if (g_allocations.fetch_add(1) < 6) {
      g_counting = false;
      void* frames[12];
      int depth = backtrace(frames, 12);
      std::fprintf(stderr, "allocation of %zu bytes from:\n", n);
      backtrace_symbols_fd(frames, depth, 2);
      g_counting = true;
    }
  }
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace ingot {
namespace {

using test::Quiet;

// probs = Softmax(Relu(x·W1 + b1)·W2 + b2), x: f32[16,64].
std::string mlp_model() { return gpu_test::mlp_onnx(16, 64, 128, 10, 3); }

class CudaEngine : public gpu_test::CudaTest {};

// The model built as a CUDA engine and loaded; nullptr (after a failed expectation) when either fails.
std::shared_ptr<Engine> cuda_engine(const std::string& onnx, BuilderConfig cfg = {}) {
  Quiet quiet;
  cfg.backend = BackendKind::kCuda;
  auto bytes = Builder(quiet).build_serialized_from_bytes(onnx.data(), onnx.size(), cfg);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  if (!bytes.ok()) return nullptr;
  auto engine = Runtime(quiet).deserialize(bytes->data(), bytes->size());
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST_F(CudaEngine, AllCudaTacticsMatchTheReferenceAllocateNothingAndCaptureIntoAGraph) {
  std::string bytes = mlp_model();
  std::shared_ptr<Engine> engine = cuda_engine(bytes);
  ASSERT_TRUE(engine);
  for (const LayerDesc& l : engine->layers()) {
    std::printf("  %-20s %-24s %s\n", l.op.c_str(), l.name.c_str(), l.tactic.c_str());
    EXPECT_NE(l.tactic, "cuda.host_fallback") << l.op;
  }
  auto ctx = engine->create_execution_context();
  ASSERT_TRUE(ctx.ok());

  Tensor x = Tensor::zeros(DataType::kFloat32, {16, 64}).value();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 16 * 10 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.raw(), x.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream copy/memset done before the tactics' streams run
  ASSERT_TRUE((*ctx)->set_tensor_address("x", dx).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("probs", dy).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // Warm-up: views, cuBLASLt plans for these shapes.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*ctx)->enqueue(stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  g_allocations = 0;
  g_counting = true;
  bool ok = true;
  for (int i = 0; i < 20; ++i) ok &= (*ctx)->enqueue(stream).ok();
  g_counting = false;
  EXPECT_TRUE(ok);
  EXPECT_EQ(g_allocations.load(), 0) << "host allocations in 20 steady-state enqueues";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  // Reference on the CPU interpreter.
  auto model = onnx::import_model_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(model.ok());
  cpu::Executor exec;
  auto want = exec.run(*model->graph, {{"x", x}});
  ASSERT_TRUE(want.ok());
  auto check = [&](const char* what) {
    std::vector<float> got(160);
    ASSERT_EQ(cudaMemcpy(got.data(), dy, 160 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    double max_err = 0;
    for (int i = 0; i < 160; ++i) max_err = std::max(max_err, std::abs(got[i] - (*want)[0].get_f64(i)));
    EXPECT_LT(max_err, 1e-5) << what;
  };
  check("plain enqueue");

  // The same enqueue captured into a CUDA graph: no synchronization or allocation may happen
  // inside, or capture fails.
  ASSERT_EQ(cudaMemset(dy, 0xFF, 160 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream copy/memset done before the tactics' streams run
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  Status st = (*ctx)->enqueue(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(st.ok()) << st.to_string();
  cudaGraphExec_t exec_graph;
  ASSERT_EQ(cudaGraphInstantiate(&exec_graph, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec_graph, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  check("graph replay");
  cudaGraphExecDestroy(exec_graph);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy);
}

// The context's own CUDA-graph mode: plain first run, captured second, replays after; replays
// read the current input data, allocate nothing on the host, and give bit-identical outputs.
TEST_F(CudaEngine, GraphModeReplaysBitIdenticalAndSaysWhyWhenItCannot) {
  std::shared_ptr<Engine> engine = cuda_engine(mlp_model());
  ASSERT_TRUE(engine);
  auto plain = engine->create_execution_context();
  auto graphed = engine->create_execution_context();
  ASSERT_TRUE(plain.ok() && graphed.ok());
  ASSERT_TRUE((*graphed)->set_cuda_graph_mode(true).ok());

  const size_t nx = 16 * 64, ny = 16 * 10;
  void *dx = nullptr, *dy_plain = nullptr, *dy_graph = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy_plain, ny * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy_graph, ny * 4), cudaSuccess);
  ASSERT_TRUE((*plain)->set_tensor_address("x", dx).ok());
  ASSERT_TRUE((*plain)->set_tensor_address("probs", dy_plain).ok());
  ASSERT_TRUE((*graphed)->set_tensor_address("x", dx).ok());
  ASSERT_TRUE((*graphed)->set_tensor_address("probs", dy_graph).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);

  // The legacy default stream (torch's current stream by default) cannot be captured: the
  // context captures on a stream of its own (second run) and launches the graph on the legacy
  // stream (third), bit-identical to a plain run on a created stream.
  {
    std::vector<float> x(nx);
    for (float& v : x) v = u(rng);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE((*plain)->enqueue(stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> a(ny), b(ny);
    ASSERT_EQ(cudaMemcpy(a.data(), dy_plain, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int run = 0; run < 3; ++run) {
      ASSERT_EQ(cudaMemset(dy_graph, 0xFF, ny * 4), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      Status st = (*graphed)->enqueue(nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ((*graphed)->cuda_graph_status(), "") << "legacy stream, run " << run;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(b.data(), dy_graph, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), ny * 4), 0) << "legacy stream, run " << run << ": output differs";
    }
    EXPECT_EQ((*graphed)->cuda_graphs_held(), 1) << "the legacy-stream graph was not kept";
  }
  for (int round = 0; round < 4; ++round) {
    std::vector<float> x(nx);
    for (float& v : x) v = u(rng);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream copy/memset done before the tactics' streams run
    ASSERT_EQ(cudaMemset(dy_graph, 0xFF, ny * 4), cudaSuccess);
    ASSERT_TRUE((*plain)->enqueue(stream).ok());
    g_allocations = 0;
    g_counting = round >= 2;  // replays (the graph captured on the legacy stream above, same key)
    Status st = (*graphed)->enqueue(stream);
    g_counting = false;
    ASSERT_TRUE(st.ok()) << st.to_string();
    if (round >= 2) EXPECT_EQ(g_allocations.load(), 0) << "host allocations in a graph replay";
    EXPECT_EQ((*graphed)->cuda_graph_status(), "") << "round " << round;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> a(ny), b(ny);
    ASSERT_EQ(cudaMemcpy(a.data(), dy_plain, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.data(), dy_graph, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), ny * 4), 0) << "round " << round << ": graph output differs";
    EXPECT_TRUE(std::isfinite(b[0]));
  }

  // A profiler replaces the context's graph with its own timing graph, and says so; it reports
  // every step's device time once per enqueue (a marker between steps), within the enqueue's
  // wall time, and the outputs stay bit-identical to the plain run's.
  struct StepTimes : Profiler {
    std::vector<int> steps;
    std::vector<float> ms;
    int enqueue_reports = 0;
    void report_layer_time(int step, const char*, float t) noexcept override {
      steps.push_back(step);
      ms.push_back(t);
    }
    void report_layer_enqueue_time(int, const char*, float) noexcept override { ++enqueue_reports; }
  } prof;
  (*graphed)->set_profiler(&prof);
  const size_t nsteps = engine->layers().size();
  std::vector<float> a(ny), b(ny);
  ASSERT_EQ(cudaMemcpy(a.data(), dy_plain, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int run = 0; run < 3; ++run) {
    ASSERT_EQ(cudaMemset(dy_graph, 0xFF, ny * 4), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const size_t before = prof.steps.size();
    const auto t0 = std::chrono::steady_clock::now();
    Status st = (*graphed)->enqueue(stream);  // synchronizes: the times are read after the replay
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ((*graphed)->profile_timing().rfind("device:", 0), 0u) << (*graphed)->profile_timing();
    EXPECT_NE((*graphed)->cuda_graph_status().find("profiler"), std::string::npos);
    ASSERT_EQ(prof.steps.size() - before, nsteps) << "run " << run;
    double sum = 0;
    for (size_t i = 0; i < nsteps; ++i) {
      EXPECT_EQ(prof.steps[before + i], static_cast<int>(i));
      EXPECT_TRUE(prof.ms[before + i] >= 0 && std::isfinite(prof.ms[before + i])) << prof.ms[before + i];
      sum += prof.ms[before + i];
    }
    EXPECT_GT(sum, 0.0);
    EXPECT_LE(sum, wall_ms) << "the steps' device times exceed the enqueue's wall time";
    ASSERT_EQ(cudaMemcpy(b.data(), dy_graph, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), ny * 4), 0) << "run " << run << ": profiled output differs";
  }
  EXPECT_EQ(prof.enqueue_reports, static_cast<int>(nsteps)) << "host enqueue times: once, at the capture";
  // The legacy default stream cannot be captured: host timing, and it says why.
  ASSERT_TRUE((*graphed)->enqueue(nullptr).ok());
  EXPECT_EQ((*graphed)->profile_timing().rfind("host:", 0), 0u) << (*graphed)->profile_timing();
  EXPECT_NE((*graphed)->profile_timing().find("default stream"), std::string::npos);
  (*graphed)->set_profiler(nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy_plain);
  cudaFree(dy_graph);
}

// A context keeps one graph per set of input shapes and bindings: a server alternating between
// its prepared batch sizes replays each size's graph from the first enqueue after a size change
// (no plain run, no new capture), with outputs bit-identical to a plain context's. An unbound
// output (the context's own buffer, reallocated per shape) keeps no graph.
TEST_F(CudaEngine, GraphModeKeepsAGraphPerBatchSize) {
  BuilderConfig cfg;
  OptimizationProfile prof;
  prof.set_dimensions("x", {1, 64}, {16, 64}, {32, 64});
  cfg.profiles.push_back(prof);
  std::shared_ptr<Engine> engine = cuda_engine(gpu_test::mlp_onnx(-1, 64, 128, 10, 7), cfg);
  ASSERT_TRUE(engine);
  auto plain = engine->create_execution_context();
  auto graphed = engine->create_execution_context();
  auto unbound = engine->create_execution_context();
  ASSERT_TRUE(plain.ok() && graphed.ok() && unbound.ok());
  ASSERT_TRUE((*graphed)->set_cuda_graph_mode(true).ok());
  ASSERT_TRUE((*unbound)->set_cuda_graph_mode(true).ok());
  const std::vector<ExecutionContext*> all = {plain->get(), graphed->get(), unbound->get()};

  const size_t max_rows = 32;
  void *dx = nullptr, *dy_plain = nullptr, *dy_graph = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, max_rows * 64 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy_plain, max_rows * 10 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy_graph, max_rows * 10 * 4), cudaSuccess);
  for (ExecutionContext* c : all) ASSERT_TRUE(c->set_tensor_address("x", dx).ok());
  ASSERT_TRUE((*plain)->set_tensor_address("probs", dy_plain).ok());
  ASSERT_TRUE((*graphed)->set_tensor_address("probs", dy_graph).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  // Each size twice (plain run, then capture), then every size again in a new order: replays.
  const std::vector<int64_t> rows_seq = {4, 4, 16, 16, 32, 32, 4, 32, 16, 4, 16, 32};
  for (size_t k = 0; k < rows_seq.size(); ++k) {
    const int64_t rows = rows_seq[k];
    std::vector<float> x(static_cast<size_t>(rows) * 64);
    for (float& v : x) v = u(rng);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy_graph, 0xFF, max_rows * 10 * 4), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (ExecutionContext* c : all) ASSERT_TRUE(c->set_input_shape("x", {rows, 64}).ok());
    ASSERT_TRUE((*plain)->enqueue(stream).ok());
    Status st = (*graphed)->enqueue(stream);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ((*graphed)->cuda_graph_status(), "") << "k " << k;
    // Captured at a size's second run; later visits find that graph (a new capture would add one).
    EXPECT_EQ((*graphed)->cuda_graphs_held(), static_cast<int>(std::min<size_t>(k + 1, 6) / 2)) << "k " << k;
    ASSERT_TRUE((*unbound)->enqueue(stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const size_t ny = static_cast<size_t>(rows) * 10;
    std::vector<float> a(ny), b(ny), c(ny), tail(max_rows * 10 - ny);
    ASSERT_EQ(cudaMemcpy(a.data(), dy_plain, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.data(), dy_graph, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), ny * 4), 0)
        << "rows " << rows << " (k " << k << "): graph output differs";
    if (!tail.empty()) {  // rows past the batch are not written (the poison stays)
      ASSERT_EQ(cudaMemcpy(tail.data(), static_cast<float*>(dy_graph) + ny, tail.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_TRUE(std::isnan(tail[0]) && std::isnan(tail.back())) << "rows " << rows;
    }
    const void* own = (*unbound)->tensor_address("probs");
    ASSERT_NE(own, nullptr);
    ASSERT_EQ(cudaMemcpy(c.data(), own, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), c.data(), ny * 4), 0) << "rows " << rows << ": unbound-output run differs";
    EXPECT_EQ((*unbound)->cuda_graphs_held(), 0) << "a graph over the context's own output buffer was kept";
  }
  // Graph mode off and on again drops the kept graphs.
  ASSERT_TRUE((*graphed)->set_cuda_graph_mode(false).ok());
  ASSERT_TRUE((*graphed)->set_cuda_graph_mode(true).ok());
  EXPECT_EQ((*graphed)->cuda_graphs_held(), 0);
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy_plain);
  cudaFree(dy_graph);
}

// A caller whose output buffers take turns (a Python loop: each call's result tensor is freed
// once the next call has allocated its own) gets a graph per buffer: the first visit of each runs
// plain, the second captures (the key is remembered across the other buffer's runs), then every
// call replays; outputs bit-identical to a plain context's.
TEST_F(CudaEngine, GraphModeCapturesAlternatingOutputBuffers) {
  std::shared_ptr<Engine> engine = cuda_engine(mlp_model());
  ASSERT_TRUE(engine);
  auto plain = engine->create_execution_context();
  auto graphed = engine->create_execution_context();
  ASSERT_TRUE(plain.ok() && graphed.ok());
  ASSERT_TRUE((*graphed)->set_cuda_graph_mode(true).ok());
  const size_t nx = 16 * 64, ny = 16 * 10;
  void *dx = nullptr, *dy_plain = nullptr, *dy[2] = {nullptr, nullptr};
  ASSERT_EQ(cudaMalloc(&dx, nx * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy_plain, ny * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy[0], ny * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy[1], ny * 4), cudaSuccess);
  ASSERT_TRUE((*plain)->set_tensor_address("x", dx).ok());
  ASSERT_TRUE((*plain)->set_tensor_address("probs", dy_plain).ok());
  ASSERT_TRUE((*graphed)->set_tensor_address("x", dx).ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int call = 0; call < 8; ++call) {
    std::vector<float> x(nx);
    for (float& v : x) v = u(rng);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), nx * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy[call % 2], 0xFF, ny * 4), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE((*graphed)->set_tensor_address("probs", dy[call % 2]).ok());
    ASSERT_TRUE((*plain)->enqueue(stream).ok());
    Status st = (*graphed)->enqueue(stream);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ((*graphed)->cuda_graph_status(), "") << "call " << call;
    // Calls 0, 1 plain; 2, 3 capture; then replays of the two graphs.
    EXPECT_EQ((*graphed)->cuda_graphs_held(), std::min(std::max(call - 1, 0), 2)) << "call " << call;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> a(ny), b(ny);
    ASSERT_EQ(cudaMemcpy(a.data(), dy_plain, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.data(), dy[call % 2], ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), ny * 4), 0) << "call " << call << ": graph output differs";
  }
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy_plain);
  cudaFree(dy[0]);
  cudaFree(dy[1]);
}

}  // namespace
}  // namespace ingot
