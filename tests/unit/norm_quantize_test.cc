// Copyright ingot authors. Apache-2.0.
//
// fuse_norm_quantize: a LayerNorm / RMSNorm and the QuantizeLinear reading it become one
// ingot::LayerNormQuantize (before / after IR text, then the same outputs bit for bit on the CPU
// reference), Y kept or dropped by its other readers, what it refuses; the builder's split-back
// where a backend has no tactic for the fused node; and int8 / fp8 engines of a small transformer
// block built with and without the pass (--disable-pass), whose outputs must be the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/device.h"
#include "builder/precision.h"
#include "builder/split_fusions.h"
#include "calibration_models.h"
#include "engine_run_util.h"
#include "graph_check_util.h"
#include "ir/verify.h"
#include "named_tactic.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace ingot {
namespace {

using testing_util::expect_same_outputs;
using testing_util::node_lines;
using testing_util::parse_ir;
using testing_util::replace_once;
using testing_util::with_weights;

const char* const kHead = "graph g {\n  opset \"\" 17\n  input %x: f32[2,4,8]\n";
const std::vector<std::pair<std::string, Shape64>> kNormWeights = {{"gamma", {8}}, {"beta", {8}}};

// A transformer block's norm: its quantized copy for the next GEMMs, itself for the residual.
const char* const kBody = R"(  init %s: f32[] = [0.02]
  init %z: i8[] = [0]
  %y: f32[2,4,8] = LayerNormalization {epsilon=0.001}(%x, %gamma, %beta) @ln
  %yq: i8[2,4,8] = QuantizeLinear(%y, %s, %z) @q
  %r: f32[2,4,8] = Add(%y, %x) @residual
  output %yq
  output %r
)";

struct Fused {
  std::unique_ptr<ir::Graph> g;
  std::vector<std::string> notes;
};

// `before` through fuse_norm_quantize (which must change it or not, as `expect_change` says) and
// remove_dead_nodes; then the graph must verify, infer, and compute what `before` does, bit for bit.
Fused fuse(const std::string& before, bool expect_change = true) {
  Fused f;
  f.g = parse_ir(before);
  EXPECT_TRUE(f.g);
  if (!f.g) return f;
  passes::PassContext ctx;
  auto r = passes::make_fuse_norm_quantize()->run(*f.g, ctx);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.ok() && *r, expect_change) << node_lines(*f.g);
  EXPECT_TRUE(passes::make_remove_dead_nodes()->run(*f.g, ctx).ok());
  EXPECT_TRUE(ir::verify_graph(*f.g).ok());
  Status inf = ir::infer_graph(*f.g);
  EXPECT_TRUE(inf.ok()) << inf.to_string();
  expect_same_outputs(before, *f.g, 0.0);
  f.notes = ctx.notes();
  return f;
}

bool has_note(const std::vector<std::string>& notes, const std::string& part) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

TEST(FuseNormQuantize, TheNormWritesItsQuantizedCopyAndKeepsYForTheResidual) {
  auto f = fuse(with_weights(kHead, kNormWeights, kBody));
  ASSERT_TRUE(f.g);
  EXPECT_EQ(node_lines(*f.g),
            "%y: f32[2,4,8], %yq: i8[2,4,8] = ingot::LayerNormQuantize {axis=-1, epsilon=0.00100000005, rms=0, "
            "saturate=1}"
            "(%x, %gamma, %beta, %s, %z) @ln\n"
            "%r: f32[2,4,8] = Add(%y, %x) @residual\n");
  EXPECT_TRUE(has_note(f.notes, "fuse_norm_quantize: 1 norm(s)"));
  // The graph outputs keep their names.
  ASSERT_EQ(f.g->outputs().size(), 2u);
  EXPECT_EQ(f.g->outputs()[0]->name(), "yq");
  EXPECT_EQ(f.g->outputs()[1]->name(), "r");
}

TEST(FuseNormQuantize, YIsDroppedWhereOnlyTheQuantizationReadsIt) {
  std::string body = kBody;
  replace_once(body, "  %r: f32[2,4,8] = Add(%y, %x) @residual\n", "");
  replace_once(body, "  output %r\n", "");
  auto f = fuse(with_weights(kHead, kNormWeights, body));
  ASSERT_TRUE(f.g);
  EXPECT_EQ(f.g->nodes().size(), 1u);
  EXPECT_NE(ir::to_text(*f.g).find("_, %yq: i8[2,4,8] = ingot::LayerNormQuantize {axis=-1, epsilon=0.00100000005, "
                                   "rms=0, saturate=1}(%x, %gamma, %beta, %s, %z) @ln\n"),
            std::string::npos)
      << ir::to_text(*f.g);
  // ... and kept where it is a graph output.
  replace_once(body, "  output %yq\n", "  output %yq\n  output %y\n");
  auto kept = fuse(with_weights(kHead, kNormWeights, body));
  ASSERT_TRUE(kept.g);
  EXPECT_EQ(node_lines(*kept.g).rfind("%y: f32[2,4,8], %yq: i8[2,4,8] = ingot::LayerNormQuantize", 0), 0u)
      << node_lines(*kept.g);
}

TEST(FuseNormQuantize, QuantizeLinearsOfOneScaleShareYqAndAnotherScaleReadsY) {
  std::string body = kBody;
  replace_once(body, "  %r: f32[2,4,8]", R"(  init %s2: f32[] = [0.03]
  %yq2: i8[2,4,8] = QuantizeLinear(%y, %s, %z) @q2
  %yq3: i8[2,4,8] = QuantizeLinear(%y, %s2, %z) @q3
  %sum: i8[2,4,8] = Max(%yq2, %yq3) @max
  %r: f32[2,4,8])");
  replace_once(body, "  output %r\n", "  output %r\n  output %sum\n");
  auto f = fuse(with_weights(kHead, kNormWeights, body));
  ASSERT_TRUE(f.g);
  EXPECT_EQ(node_lines(*f.g),
            "%y: f32[2,4,8], %yq: i8[2,4,8] = ingot::LayerNormQuantize {axis=-1, epsilon=0.00100000005, rms=0, "
            "saturate=1}"
            "(%x, %gamma, %beta, %s, %z) @ln\n"
            "%yq3: i8[2,4,8] = QuantizeLinear(%y, %s2, %z) @q3\n"
            "%sum: i8[2,4,8] = Max(%yq, %yq3) @max\n"
            "%r: f32[2,4,8] = Add(%y, %x) @residual\n");
}

TEST(FuseNormQuantize, RmsNormAndIngotsLayerNormAndFp8) {
  struct Variant {
    const char* what;
    const char* opsets;
    std::vector<std::pair<std::string, std::string>> edits;
    const char* fused;  // the fused node's attributes and inputs
  };
  const std::vector<Variant> variants = {
      {"RMSNormalization",
       "opset \"\" 23",
       {{"LayerNormalization {epsilon=0.001}(%x, %gamma, %beta)", "RMSNormalization(%x, %gamma)"}},
       "{axis=-1, epsilon=9.99999975e-06, rms=1, saturate=1}(%x, %gamma, _, %s, %z) @ln"},
      {"ingot::LayerNormalization, fp8 without saturation",
       "opset \"\" 19\n  opset \"ingot\" 1",
       {{"LayerNormalization {epsilon=0.001}", "ingot::LayerNormalization {epsilon=0.001}"},
        {"init %z: i8[] = [0]", "init %z: f8e4m3fn[] = [0]"},
        {"%yq: i8[2,4,8] = QuantizeLinear(%y, %s, %z)",
         "%yq: f8e4m3fn[2,4,8] = QuantizeLinear {saturate=0}(%y, %s, %z)"}},
       "{axis=-1, epsilon=0.00100000005, rms=0, saturate=0}(%x, %gamma, %beta, %s, %z) @ln"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.what);
    std::string head = kHead, body = kBody;
    replace_once(head, "opset \"\" 17", v.opsets);
    for (const auto& [from, to] : v.edits) replace_once(body, from, to);
    auto f = fuse(with_weights(head, kNormWeights, body));
    ASSERT_TRUE(f.g);
    EXPECT_NE(node_lines(*f.g).find(v.fused), std::string::npos) << node_lines(*f.g);
  }
}

TEST(FuseNormQuantize, RefusesWhatTheFusedNodeCannotState) {
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::string>> edits;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"a per-channel scale",
       {{"init %s: f32[] = [0.02]", "init %s: f32[8] = [0.02, 0.03, 0.02, 0.01, 0.02, 0.04, 0.02, 0.05]"},
        {"init %z: i8[] = [0]", "init %z: i8[8] = [0, 0, 0, 0, 0, 0, 0, 0]"},
        {"QuantizeLinear(%y, %s, %z)", "QuantizeLinear {axis=2}(%y, %s, %z)"}},
       "scale per channel"},
      {"a non-zero zero point", {{"init %z: i8[] = [0]", "init %z: i8[] = [3]"}}, "zero point that is not 0"},
      {"uint8", {{"init %z: i8[] = [0]", "init %z: u8[] = [0]"}, {"%yq: i8[", "%yq: u8["}}, "quantizes to u8"},
      {"the Mean output used",
       {{"%y: f32[2,4,8] = LayerNormalization {epsilon=0.001}(%x, %gamma, %beta) @ln",
         "%y: f32[2,4,8], %mean: f32[2,4,1] = LayerNormalization {epsilon=0.001}(%x, %gamma, %beta) @ln"},
        {"  output %r\n", "  output %r\n  output %mean\n"}},
       "Mean output is used"},
      {"a scale computed at run time",
       {{"  init %s: f32[] = [0.02]\n", ""}, {"input %x: f32[2,4,8]\n", "input %x: f32[2,4,8]\n  input %s: f32[]\n"}},
       "scale that is not a float constant"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string text = with_weights(kHead, kNormWeights, kBody);
    for (const auto& [from, to] : c.edits) replace_once(text, from, to);
    auto f = fuse(text, /*expect_change=*/false);
    ASSERT_TRUE(f.g);
    EXPECT_EQ(node_lines(*f.g).find("LayerNormQuantize"), std::string::npos);
    EXPECT_TRUE(has_note(f.notes, std::string("refused norm + QuantizeLinear")) && has_note(f.notes, c.why))
        << (f.notes.empty() ? "no notes" : f.notes[0]);
  }
}

// The builder's split-back on a backend with no tactic for LayerNormQuantize (everything else
// runs on its "device"): the norm, ingot's twin, and a QuantizeLinear, with the outputs' names.
TEST(FuseNormQuantize, SplitBackWhereTheBackendHasNoFusedNorm) {
  testing_util::PredicateBackend be([](const ir::Node& n, const auto&) { return n.op_type() != "LayerNormQuantize"; });
  std::string no_y = kBody;
  replace_once(no_y, "  %r: f32[2,4,8] = Add(%y, %x) @residual\n", "");
  replace_once(no_y, "  output %r\n", "");
  for (const std::string& body : {std::string(kBody), no_y}) {
    const std::string before = with_weights(kHead, kNormWeights, body);
    auto f = fuse(before);
    ASSERT_TRUE(f.g);
    builder::SplitReport rep;
    Status st = builder::split_host_fusions(*f.g, be, &rep);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(rep.split, 1);
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("no fused norm and quantization"), std::string::npos) << rep.notes[0];
    const bool y = body == kBody;
    const std::string norm = y ? "%y" : "%ln/norm";
    EXPECT_EQ(node_lines(*f.g),
              norm +
                  ": f32[2,4,8] = ingot::LayerNormalization {axis=-1, epsilon=0.00100000005}(%x, %gamma, %beta) @ln\n" +
                  (y ? "%r: f32[2,4,8] = Add(%y, %x) @residual\n" : "") + "%yq: i8[2,4,8] = QuantizeLinear(" + norm +
                  ", %s, %z) @ln/quantize\n");
    EXPECT_EQ(f.g->outputs()[0]->name(), "yq");
    expect_same_outputs(before, *f.g, 0.0);
  }
  // A backend that runs it keeps it.
  testing_util::PredicateBackend all([](const ir::Node&, const auto&) { return true; });
  auto f = fuse(with_weights(kHead, kNormWeights, kBody));
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*f.g, all, &rep).ok());
  EXPECT_EQ(rep.split, 0);
}

// Precision lowering: a LayerNormQuantize without Y still computes in the reduced type, as the
// LayerNorm and QuantizeLinear it stands for did (X cast to fp16 before it); y_scale stays fp32.
TEST(FuseNormQuantize, WithoutYItStillComputesInTheReducedType) {
  std::string body = kBody;
  replace_once(body, "  %r: f32[2,4,8] = Add(%y, %x) @residual\n", "");
  replace_once(body, "  output %r\n", "");
  auto f = fuse(with_weights(kHead, kNormWeights, body));
  ASSERT_TRUE(f.g);
  auto cpu = backend::find_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  builder::PrecisionOptions o;
  o.reduced = DataType::kFloat16;
  builder::PrecisionReport rep;
  ASSERT_TRUE(builder::lower_precision(*f.g, **cpu, o, &rep).ok());
  const ir::Node* lnq = nullptr;
  for (const auto& n : f.g->nodes())
    if (n->op_type() == "LayerNormQuantize") lnq = n.get();
  ASSERT_NE(lnq, nullptr);
  EXPECT_EQ(lnq->input(0)->dtype(), DataType::kFloat16) << ir::to_text(*f.g);
  EXPECT_EQ(lnq->input(1)->dtype(), DataType::kFloat16);
  EXPECT_EQ(lnq->input(3)->dtype(), DataType::kFloat32);
  EXPECT_EQ(lnq->output(1)->dtype(), DataType::kInt8);
}

// x [2, 4, 16] -> LayerNorm = ln1 -> FFN (MatMul + bias, Relu, MatMul) + ln1 -> LayerNorm = ln2 ->
// MatMul = y: under --int8 / --fp8 both norms feed a quantized GEMM, ln1 the residual too.
std::string transformer_block_onnx() {
  calibration_test::OnnxWriter m;
  m.input("x", {"2", "4", "16"});
  m.output("y", {"2", "4", "8"});
  m.weight("g1", {16}, 0.3f, 1.0f);
  m.weight("b1", {16}, 0.2f);
  m.weight("w1", {16, 32}, 0.3f);
  m.weight("c1", {32}, 0.1f);
  m.weight("w2", {32, 16}, 0.25f);
  m.weight("g2", {16}, 0.4f, 1.0f);
  m.weight("b2", {16}, 0.1f);
  m.weight("w3", {16, 8}, 0.35f);
  m.node("LayerNormalization", {"x", "g1", "b1"}, "ln1", "ln1");
  m.node("MatMul", {"ln1", "w1"}, "h1", "ffn1");
  m.node("Add", {"h1", "c1"}, "h1b", "ffn1_bias");
  m.node("Relu", {"h1b"}, "h1r", "relu");
  m.node("MatMul", {"h1r", "w2"}, "h2", "ffn2");
  m.node("Add", {"h2", "ln1"}, "res", "residual");
  m.node("LayerNormalization", {"res", "g2", "b2"}, "ln2", "ln2");
  m.node("MatMul", {"ln2", "w3"}, "y", "head");
  return m.bytes();
}

TEST(FuseNormQuantize, Int8AndFp8EnginesEqualTheUnfusedBuild) {
  const std::string model = transformer_block_onnx();
  std::vector<std::vector<HostTensor>> batches;
  for (unsigned seed = 1; seed <= 3; ++seed) batches.push_back({calibration_test::random_input("x", {2, 4, 16}, seed)});
  HostTensor in = calibration_test::random_input("x", {2, 4, 16}, 9);
  Tensor x = Tensor::zeros(DataType::kFloat32, {2, 4, 16}).value();
  std::copy(in.data.begin(), in.data.end(), static_cast<uint8_t*>(x.mutable_raw()));
  struct Route {
    const char* what;
    bool fp8, fp16;
  };
  for (const Route& r : {Route{"int8", false, false}, Route{"int8 + fp16", false, true}, Route{"fp8", true, false},
                         Route{"fp8 + fp16", true, true}}) {
    SCOPED_TRACE(r.what);
    std::map<std::string, testing_util::EngineRun> runs;
    for (bool fused : {true, false}) {
      calibration_test::FixedBatches cal(batches, "minmax");
      BuilderConfig cfg;
      cfg.int8 = !r.fp8;
      cfg.fp8 = r.fp8;
      cfg.fp16 = r.fp16;
      cfg.calibrator = &cal;
      if (!fused) cfg.disabled_passes = {"fuse_norm_quantize"};
      auto run = testing_util::build_and_run(model, cfg, {{"x", x}});
      ASSERT_TRUE(run.ok()) << run.status().to_string();
      runs[fused ? "fused" : "unfused"] = std::move(run).value();
    }
    auto count = [](const testing_util::EngineRun& e, const std::string& op) {
      return std::count_if(e.layers.begin(), e.layers.end(), [&](const LayerDesc& l) { return l.op == op; });
    };
    const testing_util::EngineRun& fused = runs["fused"];
    const testing_util::EngineRun& unfused = runs["unfused"];
    // Both norms quantize their own output; the QuantizeLinear steps after them are gone.
    EXPECT_EQ(count(fused, "ingot::LayerNormQuantize"), 2);
    EXPECT_EQ(count(unfused, "ingot::LayerNormQuantize"), 0);
    EXPECT_EQ(count(unfused, "QuantizeLinear") - count(fused, "QuantizeLinear"), 2);
    EXPECT_TRUE(has_note(fused.summary.notes, "fuse_norm_quantize: 2 norm(s)"));
    // ln1 keeps Y for the residual: its type is the norm's; ln2 writes only the 8-bit copy.
    int norms = 0;
    for (const LayerDesc& l : fused.layers) {
      if (l.name == "ln1") EXPECT_EQ(l.precision, r.fp16 ? "f16" : "f32");
      if (l.name == "ln2") EXPECT_EQ(l.precision, data_type_name(r.fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8));
      norms += l.name == "ln1" || l.name == "ln2";
    }
    EXPECT_EQ(norms, 2);
    ASSERT_EQ(fused.outputs.size(), 1u);
    ASSERT_EQ(unfused.outputs.size(), 1u);
    const Tensor& a = fused.outputs[0];
    const Tensor& b = unfused.outputs[0];
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "the fused engine's output differs";
  }
}

}  // namespace
}  // namespace ingot
