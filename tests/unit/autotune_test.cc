// Copyright ingot authors. Apache-2.0.
//
// The autotuner's choices and its timing cache, on the CPU: a fake device-like backend whose
// tactics report fixed times lets us check that the fastest is kept, that a warm cache decides
// without measuring, that the optimization level bounds the search, that failing candidates are
// skipped, and that the cache file round-trips and survives damage.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <unistd.h>

#include "backend/device.h"
#include "builder/autotune.h"
#include "builder/layout.h"
#include "builder/timed_fusions.h"
#include "ir/op_registry.h"
#include "ir/text.h"

namespace ingot {
namespace {

// Host memory that claims to be a device, so the tuner allocates and "times" on it.
class FakeDevice : public backend::Device {
 public:
  bool is_host() const override { return false; }
  Result<void*> allocate(size_t bytes) override {
    ++allocations;
    return std::calloc(1, bytes);
  }
  void release(void* p) override { std::free(p); }
  Status copy_to_device(void* d, const void* s, size_t n, void*) override {
    std::memcpy(d, s, n);
    return Status::Ok();
  }
  Status copy_to_host(void* d, const void* s, size_t n, void*) override {
    std::memcpy(d, s, n);
    return Status::Ok();
  }
  Status copy_on_device(void* d, const void* s, size_t n, void*) override {
    std::memmove(d, s, n);
    return Status::Ok();
  }
  Status fill(void* d, int b, size_t n, void*) override {
    std::memset(d, b, n);
    return Status::Ok();
  }
  Status synchronize(void*) override { return Status::Ok(); }
  std::string arch() const override { return "fake_1"; }
  std::map<std::string, std::string> library_versions() const override { return {{"fake", "1"}}; }
  int allocations = 0;
};

class FakeTactic : public backend::Tactic {
 public:
  FakeTactic(std::string name, double ms, bool capturable = true)
      : name_(std::move(name)), ms_(ms), capturable_(capturable) {}
  std::string name() const override { return name_; }
  bool capturable() const override { return capturable_; }
  bool supports(const ir::Node&, const std::vector<ir::TensorType>&) const override { return true; }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 64; }
  Status enqueue(backend::StepIO& io) const override {
    // Touch every input and output so bad buffers would show under ASan.
    for (const Tensor* t : io.inputs)
      if (t) EXPECT_EQ(t->raw() != nullptr, true);
    for (Tensor& t : *io.outputs) std::memset(t.mutable_raw(), 0, t.nbytes());
    return Status::Ok();
  }
  double ms() const { return ms_; }

 private:
  std::string name_;
  double ms_;
  bool capturable_;
};

class FakeBackend : public backend::Backend {
 public:
  std::string name() const override { return "fake"; }
  backend::Device& device() const override { return device_; }
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node&,
                                                           const std::vector<ir::TensorType>&) const override {
    return {};
  }
  Result<std::unique_ptr<backend::Tactic>> create_tactic(const std::string& n, const std::vector<uint8_t>&) const override {
    return unsupported(n);
  }
  Result<double> time_enqueue(const backend::Tactic& t, std::vector<backend::StepIO>& ios, int warmup, int runs,
                              backend::TimingMode mode) const override {
    modes_seen.push_back(mode);
    // A single run (runs == 1) is the autotuner's first look at a candidate; full measurements
    // are counted apart.
    ++(runs == 1 ? single_runs : timings);
    sets_seen = ios.size();
    for (int i = 0; i < warmup + runs; ++i) INGOT_RETURN_IF_ERROR(t.enqueue(ios[static_cast<size_t>(i) % ios.size()]));
    double ms = static_cast<const FakeTactic&>(t).ms();
    if (ms < 0) return internal_error("launch failed");
    return ms;
  }
  mutable FakeDevice device_;
  mutable int timings = 0;
  mutable int single_runs = 0;
  mutable size_t sets_seen = 0;
  mutable std::vector<backend::TimingMode> modes_seen;
};

std::unique_ptr<ir::Graph> matmul_graph() {
  auto g = ir::parse_text(R"(graph g {
  opset "" 17
  input %a: f32[64,32]
  input %b: f32[32,16]
  %y: f32[64,16] = MatMul(%a, %b) @mm
  output %y
}
)");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(ir::infer_graph(**g).ok());
  return std::move(g).value();
}

std::vector<std::unique_ptr<backend::Tactic>> fakes(std::vector<double> times) {
  std::vector<std::unique_ptr<backend::Tactic>> v;
  for (size_t i = 0; i < times.size(); ++i)
    v.push_back(std::make_unique<FakeTactic>("fake.algo" + std::to_string(i), times[i]));
  return v;
}

// One MatMul [64,32] x [32,16] tuned on a fake backend; `key` is its timing-cache key.
class Autotune : public ::testing::Test {
 protected:
  std::unique_ptr<ir::Graph> g = matmul_graph();
  const ir::Node& mm = *g->nodes()[0];
  FakeBackend be;
  builder::TimingCache cache;
  builder::TuneStats stats;
  builder::TuneOptions opt;
  std::vector<Shape64> in = {{64, 32}, {32, 16}}, out = {{64, 16}};
  std::string key = builder::timing_key("fake fake_1", mm, {DataType::kFloat32, DataType::kFloat32}, in,
                                        {DataType::kFloat32}, out);
};

TEST_F(Autotune, KeepsTheFastestAndAWarmCacheDecidesWithoutTiming) {
  auto cands = fakes({0.30, 0.10, 0.20});
  auto best = builder::choose_tactic(be, mm, cands, key, in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(stats.timed, 3);
  EXPECT_EQ(be.timings, 3);
  EXPECT_GT(be.sets_seen, 1u) << "small inputs are rotated over several copies";
  ASSERT_NE(cache.find(key), nullptr);
  EXPECT_EQ(cache.find(key)->size(), 3u);

  // Same key again: the cache decides, nothing is timed.
  auto again = fakes({0.30, 0.10, 0.20});
  best = builder::choose_tactic(be, mm, again, key, in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(be.timings, 3);
  EXPECT_EQ(stats.cache_hits, 1);

  // Another shape is another key: timed.
  std::vector<Shape64> in2 = {{128, 32}, {32, 16}}, out2 = {{128, 16}};
  std::string key2 = builder::timing_key("fake fake_1", mm, {DataType::kFloat32, DataType::kFloat32}, in2,
                                         {DataType::kFloat32}, out2);
  EXPECT_NE(key, key2);
  auto third = fakes({0.30, 0.40, 0.05});
  best = builder::choose_tactic(be, mm, third, key2, in2, out2, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 2u);
  EXPECT_EQ(be.timings, 6);
}

// TuneOptions::timing reaches every measurement: stream timing by default, device timing when asked.
TEST_F(Autotune, TimingModeReachesTheBackend) {
  auto cands = fakes({0.30, 0.10, 0.20});
  ASSERT_TRUE(builder::choose_tactic(be, mm, cands, key, in, out, opt, cache, stats).ok());
  ASSERT_FALSE(be.modes_seen.empty());
  for (backend::TimingMode m : be.modes_seen) EXPECT_EQ(m, backend::TimingMode::kStream);
  be.modes_seen.clear();
  builder::TimingCache fresh;
  opt.timing = backend::TimingMode::kDevice;
  auto again = fakes({0.30, 0.10, 0.20});
  auto best = builder::choose_tactic(be, mm, again, key, in, out, opt, fresh, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  ASSERT_EQ(be.modes_seen.size(), 5u);  // the first timed in full; the others one look, then in full
  for (backend::TimingMode m : be.modes_seen) EXPECT_EQ(m, backend::TimingMode::kDevice);
}

// After the first full measurement, each candidate runs once first; one more than 4x slower than
// the best so far keeps that single time (cached like any other) and is not measured in full.
TEST_F(Autotune, FarSlowerCandidatesAreCutShortAfterOneRun) {
  auto cands = fakes({0.10, 5.0, 0.35, 0.05});  // 5.0 > 4 x 0.10: cut; 0.35 < 0.40: measured
  auto best = builder::choose_tactic(be, mm, cands, key, in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  EXPECT_EQ(*best, 3u);
  EXPECT_EQ(stats.timed, 4);
  EXPECT_EQ(stats.cut_short, 1);
  EXPECT_EQ(be.timings, 3) << "full measurements: the first, 0.35 and 0.05";
  EXPECT_EQ(be.single_runs, 3) << "every candidate after the first runs once first";
  ASSERT_NE(cache.find(key), nullptr);
  EXPECT_EQ(cache.find(key)->size(), 4u);
  EXPECT_DOUBLE_EQ(cache.find(key)->at("fake.algo1"), 5.0);
}

TEST_F(Autotune, LevelBoundsTheSearchAndFailingCandidatesAreSkipped) {
  opt.optimization_level = 2;  // the first two candidates only
  auto cands = fakes({0.30, 0.20, 0.01});
  auto best = builder::choose_tactic(be, mm, cands, "k1", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(be.timings, 2);
  opt.optimization_level = 1;  // first guess, nothing timed
  best = builder::choose_tactic(be, mm, cands, "k2", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 0u);
  EXPECT_EQ(be.timings, 2);
  opt.optimization_level = 5;
  auto failing = fakes({-1, 0.5, -1});  // negative: the launch fails
  best = builder::choose_tactic(be, mm, failing, "k3", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(stats.failed, 2);
}

// Beyond the width, the first candidate of each family not yet among the timed ones is timed too:
// a family's variants (first in the backend's list) cannot crowd a later family out.
TEST_F(Autotune, EachFamilysFirstCandidateIsTimedBeyondTheWidth) {
  EXPECT_EQ(builder::tactic_family("cuda.cudnn.graph.conv.12"), "cuda.cudnn.graph.conv");
  EXPECT_EQ(builder::tactic_family("cuda.conv.depthwise.strip"), "cuda.conv.depthwise.strip");
  EXPECT_EQ(builder::tactic_family("fake.algo3"), "fake.algo");
  std::vector<std::unique_ptr<backend::Tactic>> cands;
  const char* names[] = {"a.v.0", "a.v.1", "a.v.2", "a.v.3", "a.v.4", "b.w", "c.x.0", "c.x.1"};
  const double times[] = {0.5, 0.4, 0.6, 0.7, 0.01, 0.3, 0.2, 0.05};
  for (size_t i = 0; i < 8; ++i) cands.push_back(std::make_unique<FakeTactic>(names[i], times[i]));
  cands.push_back(std::make_unique<FakeTactic>("d.host", 0.001, false));  // never an extra
  EXPECT_EQ(builder::considered_candidates(cands, 4), (std::vector<size_t>{0, 1, 2, 3, 5, 6}));
  EXPECT_EQ(builder::considered_candidates(cands, 1), (std::vector<size_t>{0}));  // level 1: no timing
  opt.optimization_level = 3;                                                     // width 4
  auto best = builder::choose_tactic(be, mm, cands, "fam", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(be.timings, 6);  // a.v.0-3, b.w, c.x.0; not a.v.4, c.x.1 or the host one
  EXPECT_EQ(cands[*best]->name(), "c.x.0");
}

// A host-synchronizing candidate (the CUDA host fallback) is timed only when nothing else runs.
TEST_F(Autotune, HostSynchronizingCandidatesAreTimedOnlyAsALastResort) {
  std::vector<std::unique_ptr<backend::Tactic>> cands;
  cands.push_back(std::make_unique<FakeTactic>("fake.a", 0.3));
  cands.push_back(std::make_unique<FakeTactic>("fake.b", 0.2));
  cands.push_back(std::make_unique<FakeTactic>("fake.host", 0.01, false));
  auto best = builder::choose_tactic(be, mm, cands, "k", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(be.timings, 2) << "the host-synchronizing candidate was timed";
  best = builder::choose_tactic(be, mm, cands, "k", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
  EXPECT_EQ(stats.cache_hits, 1) << "a warm cache must decide without the untimed fallback";
  EXPECT_EQ(be.timings, 2);
  // Every real candidate fails: the fallback is timed and kept.
  std::vector<std::unique_ptr<backend::Tactic>> failing;
  failing.push_back(std::make_unique<FakeTactic>("fake.c", -1));
  failing.push_back(std::make_unique<FakeTactic>("fake.host", 5.0, false));
  best = builder::choose_tactic(be, mm, failing, "k2", in, out, opt, cache, stats);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, 1u);
}

// A backend whose convolutions take the given times per layout, and whose transposes take
// `transpose_ms`: the layout choice must follow the measured totals.
class LayoutBackend : public FakeBackend {
 public:
  double nchw_ms = 1, nhwc_ms = 1, transpose_ms = 0.1;
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>&) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v;
    if (n.op_type() == "Transpose") v.push_back(std::make_unique<FakeTactic>("fake.transpose", transpose_ms));
    if (n.op_type() == "Conv" || n.op_type() == "FusedConv") {
      bool cl = n.attrs().get_int("channels_last", 0) != 0;
      v.push_back(std::make_unique<FakeTactic>(cl ? "fake.conv.nhwc" : "fake.conv.nchw", cl ? nhwc_ms : nchw_ms));
    }
    return v;
  }
};

// Two chained fp16 convolutions; the weights are graph inputs here and become initializers in
// the test (the text form does not carry weight data).
std::unique_ptr<ir::Graph> two_conv_graph() {
  auto g = ir::parse_text(R"(graph g {
  opset "" 17
  input %x: f16[1,8,6,6]
  input %w1: f16[8,8,3,3]
  input %w2: f16[8,8,3,3]
  %a: f16[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %y: f16[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%a, %w2) @c2
  output %y
}
)");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

int channels_last_convs(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->attrs().get_int("channels_last", 0) != 0;
  return n;
}

TEST_F(Autotune, ConvLayoutFollowsTheMeasuredTotals) {
  for (auto [nhwc_ms, want] : {std::pair<double, int>{0.5, 2}, std::pair<double, int>{0.95, 0}}) {
    auto g = two_conv_graph();
    // Weights as initializers (the layout pass permutes them).
    for (const char* w : {"w1", "w2"}) {
      ir::Value* v = g->find_value(w);
      Tensor t = Tensor::zeros(DataType::kFloat16, {8, 8, 3, 3}).value();
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 0.01 * (i % 7));
      g->set_initializer(v, t);
    }
    LayoutBackend be;
    be.nchw_ms = 1.0;
    be.nhwc_ms = nhwc_ms;
    be.transpose_ms = 0.1;
    builder::TimingCache cache;
    builder::TuneOptions opt;
    builder::TuneStats stats;
    builder::LayoutTiming timing{&cache, &opt, "fake", &stats};
    builder::LayoutReport rep;
    Status st = builder::choose_conv_layout(*g, be, "auto", &rep, &timing);
    ASSERT_TRUE(st.ok()) << st.to_string();
    // Two convs each way; channels-last adds a transpose in and one out (0.2 ms).
    EXPECT_DOUBLE_EQ(rep.nchw_ms, 2.0);
    EXPECT_NEAR(rep.nhwc_ms, 2 * nhwc_ms + 0.2, 1e-9);
    EXPECT_EQ(channels_last_convs(*g), want) << "NHWC convs at " << nhwc_ms << " ms";
    EXPECT_EQ(rep.channels_last_convs, want);
  }
}

// A squeeze-excite block becomes one node only where that node measured no slower than the four steps
// it replaces (fake times: each step 1 ms); without timing (a host backend, or none given) wherever the
// backend has a device tactic for it; never where it has none.
class SqueezeExciteBackend : public FakeBackend {
 public:
  double se_ms = 1, step_ms = 1;
  bool has_se = true;
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>&) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v;
    if (n.op_type() == "SqueezeExcite") {
      if (has_se) v.push_back(std::make_unique<FakeTactic>("fake.se", se_ms));
    } else {
      v.push_back(std::make_unique<FakeTactic>("fake." + n.op_type(), step_ms));
    }
    return v;
  }
};

std::unique_ptr<ir::Graph> squeeze_excite_graph() {
  auto g = ir::parse_text(R"(graph g {
  opset "" 18
  opset "ingot" 1
  input %x: f16[2,4,3,5]
  init %axes: i64[2] = [2, 3]
  init %w1: f16[2,4,1,1] = [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8]
  init %b1: f16[2] = [0.1, -0.1]
  init %w2: f16[4,2,1,1] = [0.2, 0.3, -0.4, 0.5, 0.6, -0.7, 0.8, 0.9]
  init %b2: f16[4] = [0.0, 0.1, 0.2, 0.3]
  %p = ReduceMean {keepdims=1}(%x, %axes) @pool
  %h = ingot::FusedConv {activation="Silu"}(%p, %w1, %b1) @fc1
  %g = ingot::FusedConv {activation="Sigmoid"}(%h, %w2, %b2) @fc2
  %y = Mul(%x, %g) @scale
  output %y
}
)");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(ir::infer_graph(**g).ok());
  return std::move(g).value();
}

int squeeze_excite_nodes(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == "SqueezeExcite";
  return n;
}

TEST_F(Autotune, SqueezeExciteFusesOnlyWhereItMeasuresNoSlower) {
  for (auto [se_ms, want] : {std::pair<double, int>{2.5, 1}, std::pair<double, int>{4.5, 0}}) {
    SCOPED_TRACE(se_ms);
    auto g = squeeze_excite_graph();
    SqueezeExciteBackend sb;
    sb.se_ms = se_ms;
    builder::TimingCache c;
    builder::TuneStats st;
    builder::LayoutTiming timing{&c, &opt, "fake", &st};
    passes::PassContext ctx;
    builder::TimedFusionReport rep;
    Status s = builder::fuse_squeeze_excite_where_faster(*g, sb, &timing, ctx, &rep);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(squeeze_excite_nodes(*g), want);
    EXPECT_EQ(g->nodes().size(), want ? 1u : 4u);
    EXPECT_EQ(rep.fused, want);
    EXPECT_EQ(rep.kept_slower, 1 - want);
    EXPECT_DOUBLE_EQ(rep.fused_ms, se_ms);
    EXPECT_DOUBLE_EQ(rep.unfused_ms, 4.0);  // pool, two convs, the Mul
    std::string notes;
    for (const std::string& n : ctx.notes()) notes += n + "\n";
    EXPECT_NE(notes.find(want ? "1 block(s) fused, 0 kept" : "0 block(s) fused, 1 kept"), std::string::npos) << notes;
    if (!want) EXPECT_NE(notes.find("measured 4.5000 ms, its 4 steps 4.0000 ms"), std::string::npos) << notes;
  }
  // Not timed: the fused node wherever the backend runs it; a backend without the tactic keeps the block.
  for (bool has : {true, false}) {
    auto g = squeeze_excite_graph();
    SqueezeExciteBackend sb;
    sb.has_se = has;
    sb.se_ms = 100;  // would lose if timed
    passes::PassContext ctx;
    ASSERT_TRUE(builder::fuse_squeeze_excite_where_faster(*g, sb, nullptr, ctx, nullptr).ok());
    EXPECT_EQ(squeeze_excite_nodes(*g), has ? 1 : 0);
  }
}

// fuse_conv_pool through the builder's check: a stem's conv and max pool become one node where the fused
// node's tactic measured no slower than the two steps (1 ms each here), or wherever a device tactic exists
// when the build is not timed; never without one.
class ConvPoolBackend : public FakeBackend {
 public:
  double fused_ms = 1;
  bool has_fused = true;
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>&) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v;
    if (n.op_type() != "FusedConvPool") v.push_back(std::make_unique<FakeTactic>("fake." + n.op_type(), 1.0));
    else if (has_fused) v.push_back(std::make_unique<FakeTactic>("fake.conv_pool", fused_ms));
    return v;
  }
};

std::unique_ptr<ir::Graph> conv_pool_graph() {
  auto g = ir::parse_text(R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %x: f16[1,9,9,2]
  input %w: f16[4,3,3,2]
  %c = ingot::FusedConv {activation="Relu", channels_last=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1]}(%x, %w) @conv
  %y = ingot::Pool {channels_last=1, kernel_shape=[3, 3], mode="max", pads=[1, 1, 1, 1], strides=[2, 2]}(%c) @pool
  output %y
}
)");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(ir::infer_graph(**g).ok());
  return std::move(g).value();
}

int conv_pool_nodes(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == "FusedConvPool";
  return n;
}

TEST_F(Autotune, ConvPoolFusesOnlyWhereItMeasuresNoSlower) {
  for (auto [fused_ms, want] : {std::pair<double, int>{1.5, 1}, std::pair<double, int>{2.5, 0}}) {
    SCOPED_TRACE(fused_ms);
    auto g = conv_pool_graph();
    ConvPoolBackend cb;
    cb.fused_ms = fused_ms;
    builder::TimingCache c;
    builder::TuneStats st;
    builder::LayoutTiming timing{&c, &opt, "fake", &st};
    passes::PassContext ctx;
    builder::TimedFusionReport rep;
    Status s = builder::fuse_conv_pool_where_faster(*g, cb, &timing, ctx, &rep);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(conv_pool_nodes(*g), want);
    EXPECT_EQ(g->nodes().size(), want ? 1u : 2u);
    EXPECT_EQ(rep.fused, want);
    EXPECT_EQ(rep.kept_slower, 1 - want);
    EXPECT_DOUBLE_EQ(rep.fused_ms, fused_ms);
    EXPECT_DOUBLE_EQ(rep.unfused_ms, 2.0);
    std::string notes;
    for (const std::string& n : ctx.notes()) notes += n + "\n";
    EXPECT_NE(notes.find(want ? "1 conv+pool(s) fused, 0 kept" : "0 conv+pool(s) fused, 1 kept"), std::string::npos)
        << notes;
    if (!want) EXPECT_NE(notes.find("measured 2.5000 ms, its 2 steps 2.0000 ms"), std::string::npos) << notes;
  }
  for (bool has : {true, false}) {
    auto g = conv_pool_graph();
    ConvPoolBackend cb;
    cb.has_fused = has;
    cb.fused_ms = 100;  // would lose if timed
    passes::PassContext ctx;
    ASSERT_TRUE(builder::fuse_conv_pool_where_faster(*g, cb, nullptr, ctx, nullptr).ok());
    EXPECT_EQ(conv_pool_nodes(*g), has ? 1 : 0);
  }
}

// Elementwise ops between the convolutions (a split-out HardSwish, a squeeze-excite gate) move
// into the region, so the estimate charges no reformats around them: with a Relu and a HardSwish
// between the two convs, channels-last still costs one transpose in and one out.
TEST_F(Autotune, ConvLayoutEstimateCountsNoReformatsAroundMovableOps) {
  auto g = ir::parse_text(R"(graph g {
  opset "" 17
  input %x: f16[1,8,6,6]
  input %w1: f16[8,8,3,3]
  input %w2: f16[8,8,3,3]
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %r = Relu(%a) @relu
  %h = HardSwish(%r) @hs
  %y = Conv {pads=[1, 1, 1, 1]}(%h, %w2) @c2
  output %y
}
)");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(ir::infer_graph(**g).ok());
  for (const char* w : {"w1", "w2"}) {
    Tensor t = Tensor::zeros(DataType::kFloat16, {8, 8, 3, 3}).value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, 0.01 * (i % 7));
    (*g)->set_initializer((*g)->find_value(w), t);
  }
  LayoutBackend be;
  be.nchw_ms = 1.0;
  be.nhwc_ms = 0.85;  // 1.7 + 0.2 of reformats < 2.0; with two more around the Relu it would not be
  be.transpose_ms = 0.1;
  builder::TimingCache cache;
  builder::TuneOptions opt;
  builder::TuneStats stats;
  builder::LayoutTiming timing{&cache, &opt, "fake", &stats};
  builder::LayoutReport rep;
  Status st = builder::choose_conv_layout(**g, be, "auto", &rep, &timing);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_NEAR(rep.nhwc_ms, 1.7 + 0.2, 1e-9);
  EXPECT_EQ(rep.channels_last_convs, 2);
  EXPECT_EQ(rep.reformats, 2);  // the region spans the Relu and the HardSwish
}

// Timing inputs: random, never zero, in [-1, 1], for every float type, across the whole tensor
// (the pattern repeats past kTimingPatternElements; a partial last repeat is filled too).
TEST(AutotuneTimingInputs, RandomNonZeroEverywhere) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat8E4M3FN}) {
    const int64_t n = 2 * builder::kTimingPatternElements + 1234;
    Tensor x = Tensor::zeros(t, {n}).value();
    builder::fill_timing_input(x);
    int64_t distinct_signs[2] = {0, 0};
    for (int64_t i = 0; i < n; ++i) {
      const double v = x.get_f64(i);
      ASSERT_TRUE(v != 0 && v >= -1 && v <= 1) << data_type_name(t) << " element " << i << " = " << v;
      ++distinct_signs[v > 0];
    }
    EXPECT_GT(distinct_signs[0], n / 3) << data_type_name(t);
    EXPECT_GT(distinct_signs[1], n / 3) << data_type_name(t);
    EXPECT_EQ(x.get_f64(n - 1), x.get_f64((n - 1) % builder::kTimingPatternElements));
  }
  Tensor small = Tensor::zeros(DataType::kFloat32, {8}).value();
  builder::fill_timing_input(small);
  std::set<double> seen;
  for (int64_t i = 0; i < 8; ++i) seen.insert(small.get_f64(i));
  EXPECT_EQ(seen.size(), 8u);
}

// The layout backend above, offering a channels-last pool tactic when `pool_tactic` is set.
class PoolLayoutBackend : public LayoutBackend {
 public:
  bool pool_tactic = false;
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>& t) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v = LayoutBackend::candidates(n, t);
    if (pool_tactic && n.domain() == "ingot" && n.op_type() == "Pool")
      v.push_back(std::make_unique<FakeTactic>("fake.pool.nhwc", 0.1));
    return v;
  }
};

// A MaxPool between channels-last convs joins the region only when the backend has a device
// tactic for ingot::Pool (the cuda backend's host fallback would synchronize); else it stays
// channels-first between two reformats, and the attempt leaves no node behind.
TEST_F(Autotune, PoolJoinsTheChannelsLastRegionOnlyWithADeviceTactic) {
  for (bool pool_tactic : {false, true}) {
    auto g = ir::parse_text(R"(graph g {
  opset "" 17
  input %x: f16[1,8,6,6]
  input %w1: f16[8,8,3,3]
  input %w2: f16[8,8,3,3]
  %a: f16[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %p: f16[1,8,3,3] = MaxPool {kernel_shape=[2, 2], strides=[2, 2]}(%a) @pool
  %y: f16[1,8,3,3] = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  output %y
}
)");
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    for (const char* w : {"w1", "w2"})
      (*g)->set_initializer((*g)->find_value(w), Tensor::zeros(DataType::kFloat16, {8, 8, 3, 3}).value());
    PoolLayoutBackend be;
    be.pool_tactic = pool_tactic;
    builder::LayoutReport rep;
    Status st = builder::choose_conv_layout(**g, be, "nhwc", &rep);
    ASSERT_TRUE(st.ok()) << st.to_string();
    int maxpools = 0, pools = 0;
    for (const auto& n : (*g)->nodes()) {
      maxpools += n->op_type() == "MaxPool";
      pools += n->op_type() == "Pool";
    }
    EXPECT_EQ(rep.channels_last_convs, 2);
    EXPECT_EQ(maxpools, pool_tactic ? 0 : 1);
    EXPECT_EQ(pools, pool_tactic ? 1 : 0);
    EXPECT_EQ(rep.reformats, pool_tactic ? 2 : 4);
  }
}

TEST_F(Autotune, TimingCacheFileRoundTripsAndSurvivesDamage) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ingot_tc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "cache.txt").string();
  builder::TimingCache a;
  a.put("key\twith\ttabs\nand newline \\ backslash", "cuda.x.1", 0.125);
  a.put("key\twith\ttabs\nand newline \\ backslash", "cuda.x.2", 0.5);
  a.put("other", "cuda.y", 3);
  ASSERT_TRUE(a.save(path).ok());
  builder::TimingCache b;
  std::string warning;
  ASSERT_TRUE(b.load(path, &warning).ok());
  EXPECT_EQ(warning, "");
  ASSERT_NE(b.find("key\twith\ttabs\nand newline \\ backslash"), nullptr);
  EXPECT_DOUBLE_EQ(b.find("key\twith\ttabs\nand newline \\ backslash")->at("cuda.x.1"), 0.125);
  EXPECT_DOUBLE_EQ(b.find("other")->at("cuda.y"), 3);

  // A damaged line is skipped with a warning; the rest loads.
  { std::ofstream f(path, std::ios::app); f << "half a line\nk\tt\tnot-a-number\n"; }
  builder::TimingCache c;
  ASSERT_TRUE(c.load(path, &warning).ok());
  EXPECT_NE(warning.find("2 malformed"), std::string::npos) << warning;
  EXPECT_EQ(c.size(), 2u);
  // Another format: ignored with a warning, never an error.
  { std::ofstream f(path, std::ios::trunc); f << "{\"json\": true}\n"; }
  builder::TimingCache d;
  warning.clear();
  ASSERT_TRUE(d.load(path, &warning).ok());
  EXPECT_NE(warning.find("not an ingot timing cache"), std::string::npos);
  EXPECT_EQ(d.size(), 0u);
  // A missing file is an empty cache.
  builder::TimingCache e;
  warning.clear();
  ASSERT_TRUE(e.load((dir / "missing.txt").string(), &warning).ok());
  EXPECT_EQ(warning, "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot
