// Copyright ingot authors. Apache-2.0.
//
// The build -> serialize -> load -> run path on the CPU backend: memory plan soundness and
// tightness, dynamic shapes inside profiles, data-dependent shapes, several contexts on several
// threads, and the errors a user meets (profile violations, bad bindings, corrupted engines).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "backend/cpu/executor.h"
#include "builder/builder.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

using test::Quiet;

std::string models_dir() {
  const char* d = std::getenv("INGOT_TEST_MODELS");
  return d ? d : "";
}

Tensor random_tensor(DataType dt, const Shape64& shape, uint32_t seed) {
  Tensor t = Tensor::zeros(dt, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dt == DataType::kInt64 ? (rng() % 2) : u(rng));
  return t;
}

// Runs `engine` on `feeds` through a context; returns the outputs in engine order.
std::vector<Tensor> run_engine(ExecutionContext& ctx, const Engine& engine, std::map<std::string, Tensor>& feeds) {
  for (auto& [name, t] : feeds) {
    EXPECT_TRUE(ctx.set_input_shape(name, t.shape()).ok());
    EXPECT_TRUE(ctx.set_tensor_address(name, t.mutable_raw()).ok());
  }
  Status s = ctx.enqueue(nullptr);
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::vector<Tensor> outs;
  for (const IoTensorDesc& d : engine.io_tensors()) {
    if (d.is_input) continue;
    auto shape = ctx.tensor_shape(d.name);
    Tensor t = Tensor::zeros(d.dtype, *shape).value();
    std::memcpy(t.mutable_raw(), ctx.tensor_address(d.name), t.nbytes());
    outs.push_back(t);
  }
  return outs;
}

std::vector<Tensor> run_interpreter(const std::string& path, const std::map<std::string, Tensor>& feeds) {
  auto m = onnx::import_model_file(path);
  EXPECT_TRUE(m.ok());
  cpu::Executor exec;
  auto r = exec.run(*m->graph, feeds);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<Tensor>{};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(Runtime, MemoryPlanIsSoundAndWithinTenPercentOfTheLowerBound) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::vector<std::string> dirs = {models_dir()};
  if (const char* o = std::getenv("INGOT_OPTIMIZER_MODELS")) dirs.push_back(o);
  int checked = 0;
  for (const std::string& root : dirs)
    for (const auto& e : fs::directory_iterator(root)) {
      std::string path = (e.path() / "model.onnx").string();
      if (!fs::exists(path)) continue;
      auto m = onnx::import_model_file(path);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      builder::BuildOptions opt;
      builder::Profile p;  // one profile covering every input with open dims
      for (const ir::Value* in : m->graph->inputs())
        if (!in->shape().is_concrete()) {
          Shape64 lo, hi;
          for (const ir::Dim& d : in->shape().dims()) {
            lo.push_back(d.is_known() ? d.value() : 1);
            hi.push_back(d.is_known() ? d.value() : 8);
          }
          p.inputs.push_back({in->name(), lo, hi, hi});
        }
      if (!p.inputs.empty()) opt.profiles.push_back(p);
      std::shared_ptr<ir::Graph> g(std::move(m->graph));
      auto plan = builder::build_plan(g, m->storage, opt);
      ASSERT_TRUE(plan.ok()) << path << ": " << plan.status().to_string();
      // No two arena tensors whose lifetimes overlap may overlap in memory, except an input
      // and the output its step overwrites in place.
      const auto& vals = plan->values;
      for (size_t a = 0; a < vals.size(); ++a)
        for (size_t b = a + 1; b < vals.size(); ++b) {
          const auto &x = vals[a], &y = vals[b];
          if (x.storage != builder::Storage::kArena || y.storage != builder::Storage::kArena) continue;
          if (!x.max_bytes || !y.max_bytes) continue;
          bool live_together = x.first_step <= y.last_step && y.first_step <= x.last_step;
          bool mem_overlap = x.offset < y.offset + y.max_bytes && y.offset < x.offset + x.max_bytes;
          bool in_place = (y.first_step == x.last_step && y.value->producer() &&
                           builder::op_allows_in_place(*y.value->producer()) && y.value->producer()->inputs()[0] == x.value) ||
                          (x.first_step == y.last_step && x.value->producer() &&
                           builder::op_allows_in_place(*x.value->producer()) && x.value->producer()->inputs()[0] == y.value);
          EXPECT_FALSE(live_together && mem_overlap && !in_place)
              << path << ": '" << x.value->name() << "' and '" << y.value->name() << "' share memory while both live";
        }
      double ratio = plan->memory.lower_bound_bytes
                         ? double(plan->memory.arena_bytes) / double(plan->memory.lower_bound_bytes) : 1.0;
      std::printf("%-28s arena %10llu  lower bound %10llu  ratio %.3f  weights %llu\n", e.path().filename().c_str(),
                  (unsigned long long)plan->memory.arena_bytes, (unsigned long long)plan->memory.lower_bound_bytes,
                  ratio, (unsigned long long)plan->memory.weight_bytes);
      EXPECT_LE(ratio, 1.10) << path;
      ++checked;
    }
  EXPECT_GE(checked, 3);
}

// The engine (no optimization) must reproduce the interpreter bit for bit on a poisoned
// arena, at two batch sizes inside one profile, from two contexts on two threads at once.
/// mlp_symbolic_batch built with batch 1..16 (opt 4).
Result<std::shared_ptr<Engine>> dynamic_batch_mlp(const std::string& path, Logger& logger) {
  BuilderConfig cfg;
  cfg.optimization_level = 0;
  OptimizationProfile p;
  p.set_dimensions("x", {1, 8}, {4, 8}, {16, 8});
  cfg.profiles.push_back(p);
  auto bytes = Builder(logger).build_serialized(path, cfg);
  if (!bytes.ok()) return bytes.status();
  return Runtime(logger).deserialize(bytes->data(), bytes->size());
}

TEST(Runtime, DynamicBatchTwoContextsTwoThreadsMatchTheInterpreter) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::string path = models_dir() + "/mlp_symbolic_batch/model.onnx";
  Quiet quiet;
  auto engine = dynamic_batch_mlp(path, quiet);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto worker = [&](int64_t batch, uint32_t seed, bool* ok) {
    auto ctx = (*engine)->create_execution_context();
    ASSERT_TRUE(ctx.ok());
    for (int rep = 0; rep < 20; ++rep) {
      std::map<std::string, Tensor> feeds{{"x", random_tensor(DataType::kFloat32, {batch + rep % 3, 8}, seed + rep)}};
      auto want = run_interpreter(path, feeds);
      auto got = run_engine(**ctx, **engine, feeds);
      if (got.size() != 1 || !same_bits(got[0], want[0])) *ok = false;
    }
  };
  bool ok1 = true, ok2 = true;
  std::thread t1(worker, 2, 100, &ok1), t2(worker, 5, 200, &ok2);
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1);
  EXPECT_TRUE(ok2);
}

// After an enqueue at one batch, a new input shape and infer_shapes give the output's new shape
// (not the last enqueue's: a caller sizes its output buffer from it, as TensorRT users do).
TEST(Runtime, OutputShapeFollowsANewInputShapeAfterEnqueue) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::string path = models_dir() + "/mlp_symbolic_batch/model.onnx";
  Quiet quiet;
  auto engine = dynamic_batch_mlp(path, quiet);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok());
  std::map<std::string, Tensor> feeds{{"x", random_tensor(DataType::kFloat32, {6, 8}, 7)}};
  auto got = run_engine(**ctx, **engine, feeds);
  ASSERT_EQ(got.size(), 1u);
  const std::string out = (*engine)->io_tensors()[1].name;
  ASSERT_EQ((*ctx)->tensor_shape(out)->at(0), 6);
  ASSERT_TRUE((*ctx)->set_input_shape("x", {2, 8}).ok());
  ASSERT_TRUE((*ctx)->infer_shapes().ok());
  EXPECT_EQ((*ctx)->tensor_shape(out)->at(0), 2);
}

// New addresses for bound inputs and outputs between runs (a Python loop allocating its result
// tensors): each run reads the input it is given now and writes the output it is given now, and
// leaves the previous output buffer alone; the same as the interpreter bit for bit.
TEST(Runtime, NewBindingAddressesBetweenRunsReadAndWriteTheNewBuffers) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::string path = models_dir() + "/mlp_symbolic_batch/model.onnx";
  Quiet quiet;
  auto engine = dynamic_batch_mlp(path, quiet);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok());
  const std::string out = (*engine)->io_tensors()[1].name;
  Tensor x1 = random_tensor(DataType::kFloat32, {4, 8}, 31), x2 = random_tensor(DataType::kFloat32, {4, 8}, 32);
  const Tensor want1 = run_interpreter(path, {{"x", x1}})[0], want2 = run_interpreter(path, {{"x", x2}})[0];
  Tensor ya = Tensor::zeros(DataType::kFloat32, want1.shape()).value();
  Tensor yb = Tensor::zeros(DataType::kFloat32, want1.shape()).value();
  ASSERT_TRUE((*ctx)->set_input_shape("x", {4, 8}).ok());
  struct Case {
    Tensor* x;
    Tensor* y;
    const Tensor* want;
  };
  const std::vector<Case> cases = {{&x1, &ya, &want1}, {&x1, &yb, &want1}, {&x2, &yb, &want2},
                                   {&x2, &ya, &want2}, {&x1, &ya, &want1}, {&x1, &yb, &want1}};
  for (size_t k = 0; k < cases.size(); ++k) {
    Tensor* other = cases[k].y == &ya ? &yb : &ya;
    for (int64_t i = 0; i < ya.numel(); ++i) cases[k].y->set_f64(i, -7), other->set_f64(i, -9);
    ASSERT_TRUE((*ctx)->set_tensor_address("x", cases[k].x->mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address(out, cases[k].y->mutable_raw()).ok());
    Status st = (*ctx)->enqueue(nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(same_bits(*cases[k].y, *cases[k].want)) << "run " << k << ": not the interpreter's output";
    EXPECT_EQ(other->get_f64(0), -9) << "run " << k << ": the other output buffer was written";
    EXPECT_EQ(other->get_f64(other->numel() - 1), -9) << "run " << k;
  }
}

// A profiler hears of every step once per run, in order, under the engine's layer names, with
// times that fit in the run's wall time, each after the step's enqueue time; profiling changes no
// output.
TEST(Runtime, ProfilerReportsEveryStepInOrder) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::string path = models_dir() + "/cnn_small/model.onnx";
  Quiet quiet;
  auto bytes = Builder(quiet).build_serialized(path, BuilderConfig());
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto engine = Runtime(quiet).deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::map<std::string, Tensor> feeds;
  for (const IoTensorDesc& d : (*engine)->io_tensors()) {
    if (!d.is_input) continue;
    Shape64 shape = d.shape;
    for (int64_t& x : shape) x = x < 0 ? 2 : x;
    feeds[d.name] = random_tensor(d.dtype, shape, 7);
  }
  auto plain = (*engine)->create_execution_context();
  auto profiled = (*engine)->create_execution_context();
  ASSERT_TRUE(plain.ok() && profiled.ok());
  const auto want = run_engine(**plain, **engine, feeds);

  struct Recorder : Profiler {
    std::vector<int> steps, enqueued;
    std::vector<std::string> names;
    double total_ms = 0;
    bool enqueue_within_step = true;
    float last_enqueue_ms = -1;
    void report_layer_enqueue_time(int step, const char*, float ms) noexcept override {
      enqueued.push_back(step);
      last_enqueue_ms = ms;
    }
    void report_layer_time(int step, const char* name, float ms) noexcept override {
      steps.push_back(step);
      names.push_back(name);
      total_ms += ms;
      if (!(ms >= 0)) total_ms = -1e9;  // negative or NaN
      // Reported just before, for the same step: the enqueue alone, within the step's time.
      if (enqueued.size() != steps.size() || enqueued.back() != step || !(last_enqueue_ms >= 0) ||
          last_enqueue_ms > ms)
        enqueue_within_step = false;
    }
  } rec;
  (*profiled)->set_profiler(&rec);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> got;
  for (int run = 0; run < 2; ++run) got = run_engine(**profiled, **engine, feeds);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto& layers = (*engine)->layers();
  ASSERT_GT(layers.size(), 2u);
  ASSERT_EQ(rec.steps.size(), 2 * layers.size());
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    EXPECT_EQ(rec.steps[i], static_cast<int>(i % layers.size()));
    EXPECT_EQ(rec.names[i], layers[i % layers.size()].name);
  }
  EXPECT_GE(rec.total_ms, 0.0) << "a negative or NaN step time";
  EXPECT_TRUE(rec.enqueue_within_step) << "an enqueue time missing, late, or longer than its step";
  EXPECT_LE(rec.total_ms, wall_ms) << "steps timed longer than the runs took";
  // CPU engines have no device timing: host wall time, and the context says so.
  EXPECT_EQ((*profiled)->profile_timing().rfind("host:", 0), 0u) << (*profiled)->profile_timing();
  EXPECT_NE((*profiled)->profile_timing().find("CPU engine"), std::string::npos) << (*profiled)->profile_timing();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
}

TEST(Runtime, ProfileViolationsAndBadBindingsAreClearErrors) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  std::string path = models_dir() + "/mlp_symbolic_batch/model.onnx";
  Quiet quiet;
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {1, 8}, {4, 8}, {16, 8});
  cfg.profiles.push_back(p);
  auto bytes = Builder(quiet).build_serialized(path, cfg);
  ASSERT_TRUE(bytes.ok());
  auto engine = Runtime(quiet).deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok());
  Status big = (*ctx)->set_input_shape("x", {17, 8});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.code(), StatusCode::kOutOfRange);
  EXPECT_NE(big.message().find("'x' dim 0 = 17"), std::string::npos) << big.message();
  EXPECT_NE(big.message().find("1..16"), std::string::npos) << big.message();
  Status fixed = (*ctx)->set_input_shape("x", {2, 9});
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.message().find("fixed to 8"), std::string::npos) << fixed.message();
  EXPECT_FALSE((*ctx)->set_input_shape("x", {2}).ok());
  EXPECT_EQ((*ctx)->set_tensor_address("nope", nullptr).code(), StatusCode::kNotFound);
  EXPECT_FALSE((*ctx)->set_optimization_profile(3).ok());
  ASSERT_TRUE((*ctx)->set_input_shape("x", {2, 8}).ok());
  Status unbound = (*ctx)->enqueue(nullptr);
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.message().find("no address"), std::string::npos) << unbound.message();
  // A profile that contradicts the model is refused at build time.
  BuilderConfig bad;
  OptimizationProfile q;
  q.set_dimensions("x", {1, 7}, {1, 7}, {1, 7});
  bad.profiles.push_back(q);
  auto r = Builder(quiet).build_serialized(path, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fixed to 8"), std::string::npos) << r.status().message();
  // An input with open dims and no profile is refused, naming it.
  auto none = Builder(quiet).build_serialized(path, BuilderConfig());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("'x' has open dims"), std::string::npos) << none.status().message();
}

TEST(Runtime, CorruptedAndTruncatedEnginesAreRejected) {
  if (models_dir().empty()) GTEST_SKIP() << "INGOT_TEST_MODELS not set (ctest sets it to the generated models)";
  Quiet quiet;
  auto bytes = Builder(quiet).build_serialized(models_dir() + "/cnn_small/model.onnx", BuilderConfig());
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  Runtime rt(quiet);
  ASSERT_TRUE(rt.deserialize(bytes->data(), bytes->size()).ok());
  std::vector<uint8_t> flipped = *bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  auto f = rt.deserialize(flipped.data(), flipped.size());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("checksum"), std::string::npos) << f.status().message();
  for (size_t cut : {size_t(0), size_t(10), bytes->size() / 3, bytes->size() - 1})
    EXPECT_FALSE(rt.deserialize(bytes->data(), cut).ok()) << cut;
}

// NonZero's output size depends on the data: the engine allocates it per run, and
// tensor_shape reports it after enqueue.
TEST(Runtime, DataDependentOutputShape) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("nz");
  auto add_io = [](::onnx::ValueInfoProto* vi, const char* name, int dt, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dt);
    for (int64_t d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (d >= 0) dim->set_dim_value(d);
    }
  };
  add_io(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {2, 3});
  add_io(g->add_output(), "idx", ::onnx::TensorProto::INT64, {2, -1});
  auto* n = g->add_node();
  n->set_op_type("NonZero");
  n->add_input("x");
  n->add_output("idx");
  std::string bytes = m.SerializeAsString();
  Quiet quiet;
  auto eng_bytes = Builder(quiet).build_serialized_from_bytes(bytes.data(), bytes.size(), BuilderConfig());
  ASSERT_TRUE(eng_bytes.ok()) << eng_bytes.status().to_string();
  auto engine = Runtime(quiet).deserialize(eng_bytes->data(), eng_bytes->size());
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok());
  float x[6] = {0, 1, 0, 2, 3, 0};  // non-zeros at (0,1), (1,0), (1,1)
  ASSERT_TRUE((*ctx)->set_tensor_address("x", x).ok());
  ASSERT_TRUE((*ctx)->infer_shapes().ok());
  EXPECT_EQ((*ctx)->tensor_shape("idx").value(), (std::vector<int64_t>{2, -1}));
  ASSERT_TRUE((*ctx)->enqueue(nullptr).ok());
  EXPECT_EQ((*ctx)->tensor_shape("idx").value(), (std::vector<int64_t>{2, 3}));
  const int64_t* idx = static_cast<const int64_t*>((*ctx)->tensor_address("idx"));
  ASSERT_NE(idx, nullptr);
  std::vector<int64_t> got(idx, idx + 6);
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 1, 1, 0, 1}));

  // CUDA-graph mode is for CUDA engines: asking a CPU engine for it is a clear error, and the
  // context keeps working without it.
  Status gm = (*ctx)->set_cuda_graph_mode(true);
  EXPECT_EQ(gm.code(), StatusCode::kUnsupported);
  EXPECT_NE(gm.message().find("cpu backend"), std::string::npos) << gm.message();
  EXPECT_TRUE((*ctx)->set_cuda_graph_mode(false).ok());
  EXPECT_TRUE((*ctx)->enqueue(nullptr).ok());
  EXPECT_EQ((*ctx)->cuda_graph_status(), "");
}

}  // namespace
}  // namespace ingot
