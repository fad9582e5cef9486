// Copyright ingot authors. Apache-2.0.
//
// Channels-last convolution regions (BuilderConfig::conv_layout = "nhwc") on the CPU backend,
// whose reference FusedConv reads NHWC/KRSC: outputs equal the channels-first engine's within
// fp32 rounding, transposes remain only where a region meets a channels-first op, and weights
// are stored once (the KRSC copy replaces the KCRS one). The layout pass itself on small graphs:
// MaxPool / AveragePool between convolutions join the region as ingot::Pool{channels_last=1}
// (before / after IR text, and the same outputs as the unoptimized graph), and the pools it
// refuses stay channels-first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "backend/cpu/executor.h"
#include "backend/tactic.h"
#include "builder/layout.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "engine_run_util.h"
#include "quiet_logger.h"
#include "graph_check_util.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

using test::Quiet;
using testing_util::expect_same_outputs;
using testing_util::node_lines;
using testing_util::with_weights;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<testing_util::EngineRun> build_run(const std::string& bytes, const BuilderConfig& cfg,
                                          std::map<std::string, Tensor>& feeds) {
  return testing_util::build_and_run(bytes, cfg, feeds);
}

TEST(LayoutModels, ChannelsLastRegionsMatchChannelsFirstEngines) {
  const char* dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (!dir) GTEST_SKIP() << "INGOT_OPTIMIZER_MODELS not set (ctest sets it to the generated models)";
  int with_convs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    fs::path data = entry.path() / "test_data_set_0";
    if (!fs::exists(data / "input_0.pb")) continue;
    std::string bytes = slurp(entry.path() / "model.onnx");
    ::onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    std::map<std::string, Tensor> feeds;
    ::onnx::TensorProto tp;
    ASSERT_TRUE(tp.ParseFromString(slurp(data / "input_0.pb")));
    auto t = onnx::tensor_from_proto(tp, onnx::TensorSource());
    ASSERT_TRUE(t.ok());
    if (m.graph().input_size() != 1) continue;  // single-input conv models
    feeds[m.graph().input(0).name()] = *t;
    BuilderConfig nchw, nhwc;
    nchw.conv_layout = "nchw";
    nhwc.conv_layout = "nhwc";
    auto a = build_run(bytes, nchw, feeds);
    auto b = build_run(bytes, nhwc, feeds);
    ASSERT_TRUE(a.ok()) << entry.path() << ": " << a.status().to_string();
    ASSERT_TRUE(b.ok()) << entry.path() << ": " << b.status().to_string();
    if (b->summary.channels_last_convs == 0) continue;
    ++with_convs;
    // Conv weights once (the KRSC copy replaces the KCRS one); only small constants are added
    // (the axes of reductions that replace global pooling: 64 bytes each, aligned).
    EXPECT_GE(b->summary.weight_bytes, a->summary.weight_bytes) << entry.path();
    EXPECT_LE(b->summary.weight_bytes, a->summary.weight_bytes + 1024) << entry.path() << ": weights stored twice";
    int transposes = 0;
    for (const LayerDesc& l : b->layers) transposes += l.op == "Transpose";
    EXPECT_EQ(transposes, b->summary.layout_reformats) << entry.path();
    EXPECT_LT(transposes, b->summary.channels_last_convs) << entry.path() << ": pairs of transposes left between convs";
    ASSERT_EQ(a->outputs.size(), b->outputs.size());
    for (size_t o = 0; o < a->outputs.size(); ++o) {
      double max_err = 0, max_ref = 0;
      for (int64_t i = 0; i < a->outputs[o].numel(); ++i) {
        max_err = std::max(max_err, std::fabs(a->outputs[o].get_f64(i) - b->outputs[o].get_f64(i)));
        max_ref = std::max(max_ref, std::fabs(a->outputs[o].get_f64(i)));
      }
      EXPECT_LT(max_err, 1e-5 * std::max(1.0, max_ref)) << entry.path() << " output " << o;
    }
    // Squeeze-excitation (GlobalAveragePool or ReduceMean, the gate's Mul), DenseNet's Concats and
    // standalone BatchNorms (now Pointwise scale-shift-Relu), SiLU: all inside the region.
    const std::string name = entry.path().filename().string();
    if (name == "mobilenetv3_block" || name == "efficientnet_block" || name == "densenet_block") {
      EXPECT_EQ(b->summary.layout_reformats, 2) << name << ": only the input's and the output's reformats";
      // The same in an fp16 engine, where precision lowering wraps the standalone BatchNorm's
      // Pointwise in Casts of its reduced scale and shift (DenseNet-121 kept 124 Transposes and 62
      // Casts around its pre-activation BatchNorms, census of 2026-12-02): one Cast at each end.
      BuilderConfig half = nhwc;
      half.fp16 = true;
      auto h = build_run(bytes, half, feeds);
      ASSERT_TRUE(h.ok()) << entry.path() << ": " << h.status().to_string();
      EXPECT_EQ(h->summary.layout_reformats, 2) << name << " fp16: only the input's and the output's reformats";
      EXPECT_EQ(h->summary.precision_casts, 2) << name << " fp16: only the input's and the output's Casts";
    }
    if (entry.path().filename() == "resnet_bn") {
      // input -> NHWC: the one place the region meets channels-first ops as a Transpose (the
      // stem's MaxPool runs channels-last inside it). The global pool's [N, 1, 1, C] back to NCHW
      // for Flatten moves only unit axes: a Reshape after the post-layout cleanup, no step.
      EXPECT_EQ(b->summary.layout_reformats, 1);
      EXPECT_EQ(b->summary.channels_last_convs, 8);
    }
  }
  EXPECT_GE(with_convs, 4) << "resnet_bn, mobilenetv3_block, efficientnet_block and densenet_block have convolutions";
}

TEST(Layout, AutoKeepsFp32ConvsChannelsFirstAndBadModesAreErrors) {
  const char* dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (!dir) GTEST_SKIP() << "INGOT_OPTIMIZER_MODELS not set (ctest sets it to the generated models)";
  std::string bytes = slurp(fs::path(dir) / "resnet_bn" / "model.onnx");
  Quiet q;
  BuilderConfig cfg;  // auto, fp32: nothing to gain from NHWC
  BuildSummary s;
  ASSERT_TRUE(Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s).ok());
  EXPECT_EQ(s.channels_last_convs, 0);
  cfg.fp16 = true;  // auto + fp16 on the cpu backend: its reference FusedConv reads NHWC too
  ASSERT_TRUE(Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s).ok());
  EXPECT_EQ(s.channels_last_convs, 8);
  cfg.conv_layout = "nwhc";
  auto bad = Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'nwhc'"), std::string::npos) << bad.status().message();
}

std::unique_ptr<ir::Graph> parsed(const std::string& text) { return testing_util::parse_ir(text); }

// Runs the layout pass ("nhwc") on the CPU backend; the graph after it, and its report.
std::unique_ptr<ir::Graph> channels_last(const std::string& text, builder::LayoutReport* rep) {
  auto g = parsed(text);
  if (!g) return nullptr;
  auto cpu = backend::find_backend("cpu");
  EXPECT_TRUE(cpu.ok());
  if (!cpu.ok()) return nullptr;
  Status st = builder::choose_conv_layout(*g, **cpu, "nhwc", rep);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? std::move(g) : nullptr;
}

const char* const kHead = "graph g {\n  opset \"\" 17\n  input %x: f32[1,4,11,11]\n";
const std::vector<std::pair<std::string, Shape64>> kTwoConvWeights = {{"w1", {4, 4, 3, 3}}, {"w2", {4, 4, 3, 3}}};

// ConvNeXt's block: conv, the model's own permute to channels-last around LayerNorm and its
// Linear layers, a permute back, the layer scale and the residual Add, conv. The model's permute
// pair cancels against ours and both die (they ran as two dead steps per block), and the layer
// scale and residual move into the region past the model's permute back (ConvNeXt-T kept 81
// Transposes in an fp16 engine on the CPU backend, 44 on the H200, census of 2026-12-02).
TEST(LayoutPass, ModelPermutesAroundLayerNormJoinTheRegion) {
  const std::string before = with_weights(kHead, {{"w1", {4, 4, 3, 3}}, {"w2", {4, 4, 3, 3}}, {"g", {4}},
                                                  {"b", {4}}, {"scale", {4, 1, 1}}}, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %t = Transpose {perm=[0, 2, 3, 1]}(%a) @permute
  %n = LayerNormalization {axis=-1}(%t, %g, %b) @ln
  %u = Transpose {perm=[0, 3, 1, 2]}(%n) @permute_back
  %s = Mul(%u, %scale) @layer_scale
  %r = Add(%s, %a) @residual
  %y = Conv {pads=[1, 1, 1, 1]}(%r, %w2) @c2
  output %y
)");
  builder::LayoutReport rep;
  auto g = channels_last(before, &rep);
  ASSERT_TRUE(g);
  int transposes = 0;
  for (const auto& n : g->nodes()) transposes += n->op_type() == "Transpose";
  EXPECT_EQ(transposes, 2) << "the input's and the output's only:\n" << node_lines(*g);
  EXPECT_EQ(rep.reformats, 2);
  expect_same_outputs(before, *g);
}

// ResNet's stem: conv -> Relu -> MaxPool 3x3/2 pad 1 -> conv. The pool joins the region, so only
// the input's and the output's reformats remain.
TEST(LayoutPass, MaxPoolBetweenConvsRunsChannelsLast) {
  const std::string before = with_weights(kHead, kTwoConvWeights, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %r = Relu(%a) @relu
  %p = MaxPool {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}(%r) @pool
  %y = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  output %y
)");
  builder::LayoutReport rep;
  auto g = channels_last(before, &rep);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g), R"(%x/nhwc: f32[1,11,11,4] = Transpose {perm=[0, 2, 3, 1]}(%x) @x/nhwc
%a/nhwc: f32[1,11,11,4] = ingot::FusedConv {channels_last=1, pads=[1, 1, 1, 1]}(%x/nhwc, %w1/krsc) @c1
%r/nhwc: f32[1,11,11,4] = Relu(%a/nhwc) @relu
%p/nhwc_1: f32[1,6,6,4] = ingot::Pool {channels_last=1, kernel_shape=[3, 3], mode="max", pads=[1, 1, 1, 1], strides=[2, 2]}(%r/nhwc) @pool
%y/nhwc: f32[1,6,6,4] = ingot::FusedConv {channels_last=1, pads=[1, 1, 1, 1]}(%p/nhwc_1, %w2/krsc) @c2
%y: f32[1,4,6,6] = Transpose {perm=[0, 3, 1, 2]}(%y/nhwc) @y/nhwc/nchw
)");
  EXPECT_EQ(rep.channels_last_convs, 2);
  EXPECT_EQ(rep.reformats, 2);
  expect_same_outputs(before, *g);
}

// AveragePool with ceil_mode and count_include_pad (both ways) on an odd size.
TEST(LayoutPass, AveragePoolBetweenConvsRunsChannelsLast) {
  for (int count_pad : {0, 1}) {
    const std::string attrs = "ceil_mode=1, count_include_pad=" + std::to_string(count_pad);
    const std::string before = with_weights(kHead, kTwoConvWeights, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %p = AveragePool {)" + attrs + R"(, kernel_shape=[3, 3], strides=[2, 2]}(%a) @pool
  %y = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  output %y
)");
    builder::LayoutReport rep;
    auto g = channels_last(before, &rep);
    ASSERT_TRUE(g);
    EXPECT_EQ(node_lines(*g), R"(%x/nhwc: f32[1,11,11,4] = Transpose {perm=[0, 2, 3, 1]}(%x) @x/nhwc
%a/nhwc: f32[1,11,11,4] = ingot::FusedConv {channels_last=1, pads=[1, 1, 1, 1]}(%x/nhwc, %w1/krsc) @c1
%p/nhwc_1: f32[1,5,5,4] = ingot::Pool {ceil_mode=1, channels_last=1, count_include_pad=)" +
                                  std::to_string(count_pad) + R"(, kernel_shape=[3, 3], mode="average", strides=[2, 2]}(%a/nhwc) @pool
%y/nhwc: f32[1,5,5,4] = ingot::FusedConv {channels_last=1, pads=[1, 1, 1, 1]}(%p/nhwc_1, %w2/krsc) @c2
%y: f32[1,4,5,5] = Transpose {perm=[0, 3, 1, 2]}(%y/nhwc) @y/nhwc/nchw
)");
    EXPECT_EQ(rep.reformats, 2);
    expect_same_outputs(before, *g);
  }
}

// Refused, staying channels-first between the region's transposes: MaxPool's Indices output,
// storage_order = 1, and a pool whose NCHW input another node reads too.
// ShuffleNet's unit: Split the channels in two, a conv on one half, Concat, then the channel
// shuffle (a Gather of channels after simplify_algebra), conv. Split and Gather move into the
// region: only the input's and the output's reformats remain (ShuffleNetV2 kept 50 Transposes
// on the H200, census of 2026-12-02).
TEST(LayoutPass, SplitAndChannelGatherRunChannelsLast) {
  const std::string before = with_weights(kHead, {{"w1", {4, 4, 3, 3}}, {"wb", {2, 2, 3, 3}}, {"w2", {4, 4, 3, 3}}}, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %h0, %h1 = Split {axis=1, num_outputs=2}(%a) @split
  %b = Conv {pads=[1, 1, 1, 1]}(%h1, %wb) @branch
  %c = Concat {axis=1}(%h0, %b) @cat
  %s = Gather {axis=1}(%c, %shuffle) @shuffle
  %y = Conv {pads=[1, 1, 1, 1]}(%s, %w2) @c2
  output %y
)");
  std::string text = before;
  text.replace(text.find("  %a = Conv"), 0, "  init %shuffle: i64[4] = [0, 2, 1, 3]\n");
  builder::LayoutReport rep;
  auto g = channels_last(text, &rep);
  ASSERT_TRUE(g);
  int transposes = 0;
  for (const auto& n : g->nodes()) transposes += n->op_type() == "Transpose";
  EXPECT_EQ(transposes, 2) << "the input's and the output's only:\n" << node_lines(*g);
  EXPECT_EQ(rep.channels_last_convs, 3);
  expect_same_outputs(text, *g);
}

TEST(LayoutPass, PoolsItCannotMoveStayChannelsFirst) {
  const std::string indices = with_weights(kHead, kTwoConvWeights, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %p, %i = MaxPool {kernel_shape=[2, 2], strides=[2, 2]}(%a) @pool
  %y = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  output %y
  output %i
)");
  const std::string storage_order = with_weights(kHead, kTwoConvWeights, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %p = MaxPool {kernel_shape=[2, 2], storage_order=1, strides=[2, 2]}(%a) @pool
  %y = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  output %y
)");
  const std::string shared = with_weights(kHead, kTwoConvWeights, R"(
  %a = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @c1
  %p = MaxPool {kernel_shape=[2, 2], strides=[2, 2]}(%a) @pool
  %y = Conv {pads=[1, 1, 1, 1]}(%p, %w2) @c2
  %s = Shape(%a) @shape
  output %y
  output %s
)");
  for (const std::string* text : {&indices, &storage_order, &shared}) {
    builder::LayoutReport rep;
    auto g = channels_last(*text, &rep);
    ASSERT_TRUE(g);
    int pools = 0, maxpools = 0;
    for (const auto& n : g->nodes()) {
      pools += n->op_type() == "Pool";
      maxpools += n->op_type() == "MaxPool";
    }
    EXPECT_EQ(pools, 0) << node_lines(*g);
    EXPECT_EQ(maxpools, 1) << node_lines(*g);
    EXPECT_EQ(rep.channels_last_convs, 2);
    EXPECT_EQ(rep.reformats, 4) << node_lines(*g);  // in, to the pool, back, out
    expect_same_outputs(*text, *g);
  }
}

// Whisper's front end: Conv1d -> Gelu -> Conv1d (stride 2) -> Gelu -> the model's permute to
// [N, W, C]. lift_conv1d makes them 2-D convs of height 1, the layout pass a channels-last region,
// and the view chain at its end (back to NCHW, squeezed, permuted) one Reshape: the input's
// reformat is the only Transpose left (the encoder ran both convs channels-first at 32 TFLOP/s on
// the H200, 1.9 of 5 ms at batch 32, plus a 49 us Transpose).
TEST(LayoutPass, OneDConvsRunChannelsLastAndTheModelsPermuteIsAReshape) {
  const std::string before = with_weights("graph g {\n  opset \"\" 20\n  input %x: f32[2,5,16]\n",
                                          {{"w1", {6, 5, 3}}, {"b1", {6}}, {"w2", {6, 6, 3}}, {"b2", {6}}, {"pos", {8, 6}}}, R"(
  %a = Conv {pads=[1, 1]}(%x, %w1, %b1) @c1
  %g = Gelu(%a) @gelu1
  %c = Conv {pads=[1, 1], strides=[2]}(%g, %w2, %b2) @c2
  %h = Gelu(%c) @gelu2
  %t = Transpose {perm=[0, 2, 1]}(%h) @permute
  %y = Add(%t, %pos) @positions
  output %y
)");
  auto g = parsed(before);
  ASSERT_TRUE(g);
  passes::PassContext ctx;
  auto lifted = passes::make_lift_conv1d()->run(*g, ctx);
  ASSERT_TRUE(lifted.ok() && *lifted) << ir::to_text(*g);
  ASSERT_TRUE(passes::make_remove_dead_nodes()->run(*g, ctx).ok());
  ASSERT_TRUE(ir::infer_graph(*g).ok());
  auto cpu = backend::find_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  builder::LayoutReport rep;
  Status st = builder::choose_conv_layout(*g, **cpu, "nhwc", &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.channels_last_convs, 2);
  // As the builder does it (the folded chain's Reshape is appended after its reader, the Add).
  st = builder::simplify_region_edges(*g, ctx);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(ir::infer_graph(*g).ok());
  int transposes = 0, reshapes = 0;
  for (const auto& n : g->nodes()) {
    transposes += n->op_type() == "Transpose";
    reshapes += n->op_type() == "Reshape";
  }
  EXPECT_EQ(transposes, 1) << "the input's only:\n" << node_lines(*g);
  EXPECT_EQ(reshapes, 2) << "the lift's and the region's end:\n" << node_lines(*g);
  expect_same_outputs(before, *g);
}

}  // namespace
}  // namespace ingot
