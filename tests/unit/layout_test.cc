// Copyright ingot authors. Apache-2.0.
//
// Channels-last convolution regions (BuilderConfig::conv_layout = "nhwc") on the CPU backend,
// whose reference FusedConv reads NHWC/KRSC: outputs equal the channels-first engine's within
// fp32 rounding, transposes remain only where a region meets a channels-first op, and weights
// are stored once (the KRSC copy replaces the KCRS one). The layout pass itself on small graphs:
// MaxPool / AveragePool between convolutions join the region as ingot::Pool{channels_last=1}
// (before / after IR text, and the same outputs as the unoptimized graph), and the pools it
// refuses stay channels-first. An int8 CNN's ingot::QuantConv chain (with a residual) becomes one
// channels-last region where the backend has a channels-last QuantConv, and stays as it is where
// it has none.
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
#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/builder.h"
#include "builder/layout.h"
#include "builder/split_fusions.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "engine_run_util.h"
#include "quiet_logger.h"
#include "graph_check_util.h"
#include "named_tactic.h"

namespace ingot {
namespace {

/// How many of g's nodes are `op` (any domain).
int count_nodes(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}


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
    if (name == "mobilenetv3_block" || name == "efficientnet_block") {
      // Each of the two squeeze-excite blocks is one step in both layouts (fuse_squeeze_excite, after the
      // layout pass), and gives the numbers of the unfused chain.
      auto se_steps = [](const testing_util::EngineRun& r) {
        int k = 0;
        for (const LayerDesc& l : r.layers) k += l.op == "ingot::SqueezeExcite";
        return k;
      };
      EXPECT_EQ(se_steps(*a), 2) << name;
      EXPECT_EQ(se_steps(*b), 2) << name;
      BuilderConfig unfused = nhwc;
      unfused.disabled_passes = {"fuse_squeeze_excite"};
      auto u = build_run(bytes, unfused, feeds);
      ASSERT_TRUE(u.ok()) << name << ": " << u.status().to_string();
      EXPECT_EQ(se_steps(*u), 0) << name;
      for (size_t o = 0; o < u->outputs.size(); ++o)
        for (int64_t i = 0; i < u->outputs[o].numel(); ++i)
          ASSERT_NEAR(b->outputs[o].get_f64(i), u->outputs[o].get_f64(i), 1e-5 * std::max(1.0, std::fabs(u->outputs[o].get_f64(i))))
              << name << " output " << o << " element " << i;
    }
    if (name == "densenet_block") {
      // Each Concat of feature maps is read by its BatchNorm + Relu alone: it moves into that Pointwise
      // (fuse_concat_pointwise), no Concat step is left, and the numbers are the unfused engine's.
      auto concat_steps = [](const testing_util::EngineRun& r) {
        int k = 0;
        for (const LayerDesc& l : r.layers) k += l.op == "Concat";
        return k;
      };
      EXPECT_EQ(concat_steps(*b), 0) << name;
      BuilderConfig unfused = nhwc;
      unfused.disabled_passes = {"fuse_concat_pointwise"};
      auto u = build_run(bytes, unfused, feeds);
      ASSERT_TRUE(u.ok()) << name << ": " << u.status().to_string();
      EXPECT_GE(concat_steps(*u), 2) << name;
      EXPECT_EQ(b->layers.size() + static_cast<size_t>(concat_steps(*u)), u->layers.size()) << name;
      for (size_t o = 0; o < u->outputs.size(); ++o)
        for (int64_t i = 0; i < u->outputs[o].numel(); ++i)
          ASSERT_NEAR(b->outputs[o].get_f64(i), u->outputs[o].get_f64(i), 1e-5 * std::max(1.0, std::fabs(u->outputs[o].get_f64(i))))
              << name << " output " << o << " element " << i;
    }
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
  EXPECT_EQ(count_nodes(*g, "Transpose"), 2) << "the input's and the output's only:\n" << node_lines(*g);
  EXPECT_EQ(rep.reformats, 2);
  expect_same_outputs(before, *g);
}

// MaxViT's MBConv after a window un-partition: a channels-first value made by no convolution (here
// the input), a BatchNorm (Mul, Add by per-channel constants) before the first conv, the value itself
// as the last conv's residual. The BatchNorm moves into the region on the value's NHWC view, the one
// the residual reads: one transpose in, one out (before: a second one after the BatchNorm, 22 in
// MaxViT-T).
TEST(LayoutPass, ElementwiseOpsBeforeTheRegionMoveIntoIt) {
  const std::string before = with_weights(kHead, {{"w1", {4, 4, 3, 3}}, {"w2", {4, 4, 3, 3}}, {"w3", {4, 4, 3, 3}},
                                                  {"scale", {4, 1, 1}}, {"shift", {4, 1, 1}}}, R"(
  %m = Mul(%x, %scale) @bn_scale
  %n = Add(%m, %shift) @bn_shift
  %a = Conv {pads=[1, 1, 1, 1]}(%n, %w1) @c1
  %c = Conv {pads=[1, 1, 1, 1]}(%a, %w2) @c2
  %r = Add(%c, %x) @residual
  %y = Conv {pads=[1, 1, 1, 1]}(%r, %w3) @c3
  output %y
)");
  builder::LayoutReport rep;
  auto g = channels_last(before, &rep);
  ASSERT_TRUE(g);
  for (const auto& n : g->nodes()) {
    if (n->op_type() == "Mul" || n->op_type() == "Add")
      EXPECT_EQ(n->output(0)->shape().dims()[3], ir::Dim(4)) << "not channels-last:\n" << node_lines(*g);
  }
  EXPECT_EQ(count_nodes(*g, "Transpose"), 2) << "the input's and the output's only:\n" << node_lines(*g);
  EXPECT_EQ(rep.reformats, 2);
  expect_same_outputs(before, *g);
  // Two readers that are not convolutions' (the Add's result is an output too): nothing moves.
  const std::string kept = with_weights(kHead, {{"w1", {4, 4, 3, 3}}, {"scale", {4, 1, 1}}}, R"(
  %m = Mul(%x, %scale) @bn_scale
  %a = Conv {pads=[1, 1, 1, 1]}(%m, %w1) @c1
  output %a
  output %m
)");
  auto k = channels_last(kept, &rep);
  ASSERT_TRUE(k);
  for (const auto& n : k->nodes())
    if (n->op_type() == "Mul") EXPECT_EQ(n->output(0)->shape().dims()[1], ir::Dim(4)) << node_lines(*k);
  expect_same_outputs(kept, *k);
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
  EXPECT_EQ(count_nodes(*g, "Transpose"), 2) << "the input's and the output's only:\n" << node_lines(*g);
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
  EXPECT_EQ(count_nodes(*g, "Transpose"), 1) << "the input's only:\n" << node_lines(*g);
  EXPECT_EQ(count_nodes(*g, "Reshape"), 2) << "the lift's and the region's end:\n" << node_lines(*g);
  expect_same_outputs(before, *g);
}

// ---- quantized convolutions (ingot::QuantConv)

// "init %name: i8[dims] = [...]": random int8 values, never zero.
std::string int8_weight(const std::string& name, const Shape64& shape, std::mt19937& rng) {
  std::string dims, values;
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? "," : "") + std::to_string(shape[i]);
    n *= shape[i];
  }
  for (int64_t i = 0; i < n; ++i)
    values += (i ? ", " : "") + std::to_string((rng() & 1 ? 1 : -1) * static_cast<int>(1 + rng() % 127));
  return "  init %" + name + ": i8[" + dims + "] = [" + values + "]\n";
}

// "init %name: f32[n] = [...]": random values in [lo, hi), never zero.
std::string f32_vector(const std::string& name, int64_t n, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::string values;
  for (int64_t i = 0; i < n; ++i) values += (i ? ", " : "") + std::to_string(u(rng));
  return "  init %" + name + ": f32[" + std::to_string(n) + "] = [" + values + "]\n";
}

// A small int8 ResNet as explicit quantization writes it: Q/DQ on every conv input, int8
// per-channel weights with their DequantizeLinear; conv1 -> Relu; conv2 -> Add(conv2's own
// dequantized input: the block's skip) -> Relu; a strided conv3 with a float output. Through the
// pass pipeline: three QuantConvs, the first two writing int8 for the next, conv2 reading the skip
// as conv1's int8 output with its scale (no DequantizeLinear step left).
std::string int8_resnet() {
  std::mt19937 rng(23);
  std::string text = "graph g {\n  opset \"\" 19\n  input %x: f32[2,4,6,6]\n";
  text += "  init %sx: f32[] = [0.01]\n  init %z: i8[] = [0]\n  init %zw: i8[4] = [0, 0, 0, 0]\n";
  text += "  init %s1: f32[] = [0.05]\n  init %s2: f32[] = [0.06]\n  init %zw3: i8[3] = [0, 0, 0]\n";
  text += int8_weight("w1q", {4, 4, 3, 3}, rng) + f32_vector("sw1", 4, 0.001, 0.004, rng) +
          f32_vector("b1", 4, 0.05, 0.3, rng);
  text += int8_weight("w2q", {4, 4, 3, 3}, rng) + f32_vector("sw2", 4, 0.001, 0.004, rng) +
          f32_vector("b2", 4, -0.3, -0.05, rng);
  text += int8_weight("w3q", {3, 4, 3, 3}, rng) + f32_vector("sw3", 3, 0.001, 0.004, rng);
  return text + R"(  %xq = QuantizeLinear(%x, %sx, %z) @q
  %xd = DequantizeLinear(%xq, %sx, %z) @dqx
  %w1d = DequantizeLinear {axis=0}(%w1q, %sw1, %zw) @dqw1
  %c1 = Conv {pads=[1, 1, 1, 1]}(%xd, %w1d, %b1) @conv1
  %r1 = Relu(%c1) @relu1
  %q1 = QuantizeLinear(%r1, %s1, %z) @q1
  %d1 = DequantizeLinear(%q1, %s1, %z) @dq1
  %w2d = DequantizeLinear {axis=0}(%w2q, %sw2, %zw) @dqw2
  %c2 = Conv {pads=[1, 1, 1, 1]}(%d1, %w2d, %b2) @conv2
  %a = Add(%c2, %d1) @add
  %r2 = Relu(%a) @relu2
  %q2 = QuantizeLinear(%r2, %s2, %z) @q2
  %d2 = DequantizeLinear(%q2, %s2, %z) @dq2
  %w3d = DequantizeLinear {axis=0}(%w3q, %sw3, %zw3) @dqw3
  %y = Conv {pads=[1, 1, 1, 1], strides=[2, 2]}(%d2, %w3d) @conv3
  output %y
}
)";
}

struct PlanRun {
  builder::Plan plan;
  builder::BuildReport report;
};

// `text` built by the builder on the CPU backend (the pass pipeline, split-back, layout, ...).
Result<PlanRun> build_cpu_plan(const std::string& text, const std::string& layout) {
  auto g = parsed(text);
  if (!g) return internal_error("parse");
  builder::BuildOptions opt;
  opt.conv_layout = layout;
  PlanRun out;
  INGOT_ASSIGN_OR_RETURN(out.plan, builder::build_plan(std::shared_ptr<ir::Graph>(std::move(g)), {}, opt, &out.report));
  return out;
}

// The CPU backend runs QuantConv channels-last natively: the int8 engine under "nhwc" keeps its
// three QuantConvs, channels-last (int8 KRSC weights), with Transposes only at the region's edges
// (the int8 input's, the float output's): the int8 outputs between the convs, the skip among
// them, stay inside. Its outputs are the channels-first engine's, and both compute
// what the unfused Q/DQ graph does.
TEST(LayoutQuantConv, Int8ResNetRunsChannelsLastWithTransposesOnlyAtItsEdges) {
  const std::string text = int8_resnet();
  auto nchw = build_cpu_plan(text, "nchw");
  auto nhwc = build_cpu_plan(text, "nhwc");
  ASSERT_TRUE(nchw.ok()) << nchw.status().to_string();
  ASSERT_TRUE(nhwc.ok()) << nhwc.status().to_string();
  const ir::Graph& a = *nchw->plan.graph;
  const ir::Graph& b = *nhwc->plan.graph;
  EXPECT_EQ(count_nodes(a, "QuantConv"), 3) << node_lines(a);
  EXPECT_EQ(count_nodes(a, "Transpose"), 0) << node_lines(a);
  EXPECT_EQ(nchw->report.layout.channels_last_convs, 0);

  EXPECT_EQ(nhwc->report.layout.channels_last_convs, 3);
  EXPECT_EQ(nhwc->report.layout.reformats, 2);
  EXPECT_EQ(node_lines(b), R"(%xq: i8[2,4,6,6] = QuantizeLinear(%x, %sx, %z) @q
%xq/nhwc: i8[2,6,6,4] = Transpose {perm=[0, 2, 3, 1]}(%xq) @xq/nhwc
%q1/nhwc: i8[2,6,6,4] = ingot::QuantConv {activation="Relu", channels_last=1, dilations=[1, 1], group=1, output_dtype=3, pads=[1, 1, 1, 1], strides=[1, 1]}(%xq/nhwc, %w1q/krsc, %sx, %sw1, %b1, _, %s1) @conv1
%q2/nhwc: i8[2,6,6,4] = ingot::QuantConv {activation="Relu", channels_last=1, dilations=[1, 1], group=1, output_dtype=3, pads=[1, 1, 1, 1], strides=[1, 1]}(%q1/nhwc, %w2q/krsc, %s1, %sw2, %b2, %q1/nhwc, %s2, %s1) @conv2
%y/nhwc: f32[2,3,3,3] = ingot::QuantConv {channels_last=1, dilations=[1, 1], group=1, output_dtype=1, pads=[1, 1, 1, 1], strides=[2, 2]}(%q2/nhwc, %w3q/krsc, %s2, %sw3) @conv3
%y: f32[2,3,3,3] = Transpose {perm=[0, 3, 1, 2]}(%y/nhwc) @y/nhwc/nchw
)");
  for (const char* w : {"w1q/krsc", "w2q/krsc", "w3q/krsc"}) {  // int8 KRSC weights; the KCRS ones are gone
    const ir::Value* v = b.find_value(w);
    ASSERT_TRUE(v && v->initializer()) << w;
    EXPECT_EQ(v->initializer()->dtype(), DataType::kInt8) << w;
    EXPECT_EQ(v->initializer()->shape()[3], 4) << w;
  }
  const ir::Value* kcrs = b.find_value("w1q");
  EXPECT_TRUE(!kcrs || !kcrs->initializer()) << "the KCRS weight is stored too";

  expect_same_outputs(ir::to_text(a, 1u << 20), b, 1e-6);
  expect_same_outputs(text, a, 1e-5);
  expect_same_outputs(text, b, 1e-5);
}

// A backend with device tactics for every node (never run: the layout pass only asks), and with
// a channels-last QuantConv, a channels-first one, or both.
testing_util::PredicateBackend quant_conv_layout_backend(bool channels_first, bool channels_last) {
  return testing_util::PredicateBackend([=](const ir::Node& n, const auto&) {
    const bool cl = n.attrs().get_int("channels_last", 0) != 0;
    return n.op_type() != "QuantConv" || (cl ? channels_last : channels_first);
  });
}

// The int8 ResNet after the pass pipeline (three channels-first QuantConvs).
std::unique_ptr<ir::Graph> fused_int8_resnet() {
  auto g = parsed(int8_resnet());
  if (!g) return nullptr;
  passes::PassContext ctx;
  Status st = passes::default_pipeline().run(*g, {}, ctx);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? std::move(g) : nullptr;
}

// Without a channels-last QuantConv, the layout pass leaves the int8 convs as they are: no
// channels-last QuantConv, no Transpose (not even a dead one), in either mode.
TEST(LayoutQuantConv, ABackendWithoutAChannelsLastQuantConvKeepsThemChannelsFirst) {
  testing_util::PredicateBackend be = quant_conv_layout_backend(/*channels_first=*/true, /*channels_last=*/false);
  for (const char* mode : {"nhwc", "auto"}) {
    auto g = fused_int8_resnet();
    ASSERT_TRUE(g);
    const std::string before = node_lines(*g);
    ASSERT_EQ(count_nodes(*g, "QuantConv"), 3) << before;
    builder::LayoutReport rep;
    Status st = builder::choose_conv_layout(*g, be, mode, &rep);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(rep.channels_last_convs, 0) << mode;
    EXPECT_EQ(rep.reformats, 0) << mode;
    EXPECT_EQ(node_lines(*g), before) << mode;
  }
}

// A backend whose only QuantConv is channels-last (cuDNN's int8 convolution reads NHWC): the
// split-back before the layout pass keeps the QuantConvs for it when convs may go channels-last
// (it asks about their channels-last twins), and "auto" then makes them channels-last; with
// convs kept channels-first they are split into DequantizeLinear and a float conv.
TEST(LayoutQuantConv, AChannelsLastOnlyQuantConvIsKeptForTheLayoutPass) {
  testing_util::PredicateBackend be = quant_conv_layout_backend(/*channels_first=*/false, /*channels_last=*/true);
  auto g = fused_int8_resnet();
  ASSERT_TRUE(g);
  builder::SplitReport split;
  Status st = builder::split_host_fusions(*g, be, &split, DataType::kUndefined, /*channels_last=*/true);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(split.split, 0) << node_lines(*g);
  builder::LayoutReport rep;
  st = builder::choose_conv_layout(*g, be, "auto", &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.channels_last_convs, 3) << node_lines(*g);
  EXPECT_EQ(rep.reformats, 2) << node_lines(*g);

  auto kept_first = fused_int8_resnet();
  ASSERT_TRUE(kept_first);
  st = builder::split_host_fusions(*kept_first, be, &split, DataType::kUndefined, /*channels_last=*/false);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(count_nodes(*kept_first, "QuantConv"), 0) << node_lines(*kept_first);
}

}  // namespace
}  // namespace ingot
