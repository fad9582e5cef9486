// Copyright ingot authors. Apache-2.0.
//
// Fusion follows the backend (builder/split_fusions.h): on a test backend that lacks some
// epilogues, a FusedConv / FusedGemm it would run only on its host fallback is split into the
// layer with the epilogue the backend has and plain elementwise ops after it (before / after IR
// text), the split graph computes what the fused one did (CPU reference, random non-zero data),
// and nodes the backend runs are left alone.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/precision.h"
#include "builder/split_fusions.h"
#include "graph_check_util.h"
#include "named_tactic.h"

namespace ingot {
namespace {

using testing_util::expect_same_outputs;
using testing_util::node_lines;
using testing_util::parse_ir;
using testing_util::with_weights;

using testing_util::NamedTactic;

// Every op runs on the "device" except fused layers whose activation is not in `acts`, or that
// add a residual when `residual` is false: those only on the host fallback.
class EpilogueBackend : public backend::Backend {
 public:
  std::set<std::string> acts = {""};
  std::set<std::string> fp16_acts;  ///< fused on the device only when the output is fp16
  std::set<std::string> nhwc_acts;  ///< fused on the device only channels-last (cuDNN's SiLU)
  bool residual = false;
  std::set<std::string> host_only;  ///< op types (QuantConv, ...) it runs only on the host fallback
  std::string name() const override { return "test"; }
  backend::Device& device() const override { return backend::host_device(); }
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>&) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v;
    bool fused = n.domain() == "ingot" && (n.op_type() == "FusedConv" || n.op_type() == "FusedGemm");
    const std::string act = n.attrs().get_string("activation", "");
    const bool fp16 = n.output(0)->dtype() == DataType::kFloat16;
    const bool nhwc = n.attrs().get_int("channels_last", 0) != 0;
    bool native = !fused || ((acts.count(act) || (fp16 && fp16_acts.count(act)) || (nhwc && nhwc_acts.count(act))) &&
                             (residual || !n.input(3)));
    if (native && !host_only.count(n.op_type())) v.push_back(std::make_unique<NamedTactic>("test.device", false));
    v.push_back(std::make_unique<NamedTactic>("test.host_fallback", true));
    return v;
  }
  Result<std::unique_ptr<backend::Tactic>> create_tactic(const std::string& n,
                                                         const std::vector<uint8_t>&) const override {
    return unsupported(n);
  }
};

const char* const kHead =
    "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[1,4,6,6]\n  input %r: f32[1,4,6,6]\n";
const std::vector<std::pair<std::string, Shape64>> kConvWeights = {{"w", {4, 4, 3, 3}}, {"b", {4}}};

// Splits `body` (one fused layer reading %x, %w, %b and maybe %r, writing %y) on `be`; checks the
// node lines against `want` and the outputs against the unsplit graph.
void expect_split(const EpilogueBackend& be, const std::string& body, const std::string& want, int splits = 1) {
  const std::string before = with_weights(kHead, kConvWeights, body + "  output %y\n");
  auto g = parse_ir(before);
  ASSERT_TRUE(g);
  builder::SplitReport rep;
  Status st = builder::split_host_fusions(*g, be, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.split, splits);
  EXPECT_EQ(node_lines(*g), want);
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->outputs()[0]->name(), "y");  // the graph output keeps its name
  expect_same_outputs(before, *g);
}

TEST(SplitFusions, ActivationTheBackendLacksRunsAfterTheLayer) {
  EpilogueBackend be;
  be.acts = {"", "Relu"};
  expect_split(be, R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="HardSwish", pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)",
               R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%y: f32[1,4,6,6] = HardSwish(%y/layer) @c1/HardSwish
)");
}

// A conv whose epilogue the backend fuses only channels-last stays fused while the layout pass may
// make it channels-last (channels_last = true: the question is asked of a stand-in NHWC node,
// removed again), and is split when it may not (false: what the builder asks after the layout
// pass, of what stayed channels-first).
TEST(SplitFusions, EpilogueFusedOnlyChannelsLastWaitsForTheLayoutPass) {
  EpilogueBackend be;
  be.nhwc_acts = {"Silu"};
  const std::string body =
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Silu", pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)";
  const std::string before = with_weights(kHead, kConvWeights, body + "  output %y\n");
  auto g = parse_ir(before);
  ASSERT_TRUE(g);
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep, DataType::kUndefined, true).ok());
  EXPECT_EQ(rep.split, 0);
  EXPECT_EQ(node_lines(*g), R"(%y: f32[1,4,6,6] = ingot::FusedConv {activation="Silu", pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)");
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  EXPECT_EQ(rep.split, 1);
  EXPECT_EQ(node_lines(*g), R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%c1/Silu/sigmoid: f32[1,4,6,6] = Sigmoid(%y/layer) @c1/Silu/sigmoid
%y: f32[1,4,6,6] = Mul(%y/layer, %c1/Silu/sigmoid) @c1/Silu
)");
  expect_same_outputs(before, *g);
}

// Precision lowering asks the same of the channels-last twin: a SiLU conv the backend fuses only
// channels-last computes in fp16 when the layout pass may make it channels-last, and stays fp32
// (between Casts) when convs stay channels-first.
TEST(SplitFusions, PrecisionLoweringCountsTheChannelsLastTwin) {
  EpilogueBackend be;
  be.nhwc_acts = {"Silu"};
  const std::string body =
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Silu", pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)";
  for (bool channels_last : {true, false}) {
    SCOPED_TRACE(channels_last ? "channels-last allowed" : "channels-first only");
    auto g = parse_ir(with_weights(kHead, kConvWeights, body + "  output %y\n"));
    ASSERT_TRUE(g);
    builder::PrecisionOptions o;
    o.reduced = DataType::kFloat16;
    o.channels_last_convs = channels_last;
    builder::PrecisionReport rep;
    Status st = builder::lower_precision(*g, be, o, &rep);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const ir::Node* conv = nullptr;
    for (const auto& n : g->nodes())
      if (n->op_type() == "FusedConv") conv = n.get();
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->output(0)->dtype(), channels_last ? DataType::kFloat16 : DataType::kFloat32);
    EXPECT_EQ(rep.lowered > 0, channels_last);
  }
}

TEST(SplitFusions, ResidualBeforeTheActivationStaysWhenTheBackendFusesIt) {
  EpilogueBackend be;
  be.residual = true;
  // y = silu(conv + b + r): the layer keeps + r, SiLU is x * sigmoid(x).
  expect_split(be, R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Silu", pads=[1, 1, 1, 1]}(%x, %w, %b, %r) @c1
)",
               R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b, %r) @c1
%c1/Silu/sigmoid: f32[1,4,6,6] = Sigmoid(%y/layer) @c1/Silu/sigmoid
%y: f32[1,4,6,6] = Mul(%y/layer, %c1/Silu/sigmoid) @c1/Silu
)");
}

TEST(SplitFusions, ResidualMovesOutInTheNodesOrder) {
  EpilogueBackend be;  // no activation, no residual: only conv + bias
  // Residual before the activation: Add, then the activation.
  expect_split(be, R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Sigmoid", pads=[1, 1, 1, 1]}(%x, %w, %b, %r) @c1
)",
               R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%c1/residual: f32[1,4,6,6] = Add(%y/layer, %r) @c1/residual
%y: f32[1,4,6,6] = Sigmoid(%c1/residual) @c1/Sigmoid
)");
  // residual_before_activation = 0: y = relu(conv + b) + r, the Add last.
  expect_split(
      be,
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Relu", pads=[1, 1, 1, 1], residual_before_activation=0}(%x, %w, %b, %r) @c1
)",
      R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%c1/Relu: f32[1,4,6,6] = Relu(%y/layer) @c1/Relu
%y: f32[1,4,6,6] = Add(%c1/Relu, %r) @c1/residual
)");
}

TEST(SplitFusions, ParameterisedActivationsKeepTheirNumbers) {
  EpilogueBackend be;
  // Relu6 (Clip 0..6) with opset-11+ bound inputs; LeakyRelu's and HardSigmoid's attributes.
  const std::string clip =
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Clip", activation_params=[0.0, 6.0], pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)";
  const std::string before = with_weights(kHead, kConvWeights, clip + "  output %y\n");
  auto g = parse_ir(before);
  ASSERT_TRUE(g);
  ASSERT_TRUE(builder::split_host_fusions(*g, be, nullptr).ok());
  const ir::Node* last = g->outputs()[0]->producer();
  ASSERT_EQ(last->op_type(), "Clip");
  ASSERT_EQ(last->inputs().size(), 3u);
  EXPECT_EQ(last->input(1)->initializer()->get_f64(0), 0.0);
  EXPECT_EQ(last->input(2)->initializer()->get_f64(0), 6.0);
  expect_same_outputs(before, *g);

  expect_split(
      be,
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="HardSigmoid", activation_params=[0.25, 0.375], pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)",
      R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%y: f32[1,4,6,6] = HardSigmoid {alpha=0.25, beta=0.375}(%y/layer) @c1/HardSigmoid
)");
  expect_split(
      be,
      R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="LeakyRelu", activation_params=[0.125], pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
)",
      R"(%y/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
%y: f32[1,4,6,6] = LeakyRelu {alpha=0.125}(%y/layer) @c1/LeakyRelu
)");
}

TEST(SplitFusions, GemmEpiloguesSplitToo) {
  EpilogueBackend be;
  const std::string before = with_weights(
      "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %a: f32[3,8]\n", {{"w", {8, 5}}, {"c", {5}}},
      R"(  %y: f32[3,5] = ingot::FusedGemm {activation="Gelu", kind="matmul"}(%a, %w, %c) @mm
  output %y
)");
  auto g = parse_ir(before);
  ASSERT_TRUE(g);
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  // Opset 17 has no ai.onnx Gelu: ingot's twin takes it.
  EXPECT_EQ(node_lines(*g), R"(%y/layer: f32[3,5] = ingot::FusedGemm {kind="matmul"}(%a, %w, %c) @mm
%y: f32[3,5] = ingot::Gelu {approximate="none"}(%y/layer) @mm/Gelu
)");
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("FusedGemm 'mm'"), std::string::npos) << rep.notes[0];
  EXPECT_NE(rep.notes[0].find("Gelu"), std::string::npos) << rep.notes[0];
  expect_same_outputs(before, *g);
}

// Before precision lowering the builder asks at the type it may lower to: a layer the backend fuses
// only in fp16 stays whole then (precision lowering makes it fp16), and is split when asked at fp32.
TEST(SplitFusions, AskedAtTheReducedTypeKeepsLayersFusedOnlyInIt) {
  EpilogueBackend be;
  be.fp16_acts = {"Silu"};
  const std::string text = with_weights(kHead, kConvWeights, R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Silu", pads=[1, 1, 1, 1]}(%x, %w, %b) @c1
  output %y
)");
  auto g = parse_ir(text);
  ASSERT_TRUE(g);
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep, DataType::kFloat16).ok());
  EXPECT_EQ(rep.split, 0);
  EXPECT_EQ(g->outputs()[0]->dtype(), DataType::kFloat32);  // the probe's type is put back
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  EXPECT_EQ(rep.split, 1);
  expect_same_outputs(text, *g);
}

TEST(SplitFusions, LayersTheBackendRunsAreLeftAlone) {
  EpilogueBackend be;
  be.acts = {"", "Relu"};
  be.residual = true;
  const std::string text = with_weights(kHead, kConvWeights, R"(  %y: f32[1,4,6,6] = ingot::FusedConv {activation="Relu", pads=[1, 1, 1, 1]}(%x, %w, %b, %r) @c1
  output %y
)");
  auto g = parse_ir(text);
  ASSERT_TRUE(g);
  const std::string before = node_lines(*g);
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  EXPECT_EQ(rep.split, 0);
  EXPECT_EQ(node_lines(*g), before);
}

// A quantized conv on a backend with no quantized convolution and no fused residual or Relu: it
// comes back as DequantizeLinear, the float conv with its bias, the residual Add, Relu and the
// QuantizeLinear it took, and computes what the native kernel did.
TEST(SplitFusions, QuantConvSplitsAllTheWayWhereTheBackendHasNoneOfItsForms) {
  EpilogueBackend be;
  be.host_only = {"QuantConv"};
  std::string w;
  for (int i = 0; i < 4 * 4 * 3 * 3; ++i) w += (i ? ", " : "") + std::to_string((i % 3 ? 1 : -1) * ((i * 37) % 127 + 1));
  const std::string text = R"(graph g {
  opset "" 19
  opset "ingot" 1
  input %x: f32[1,4,6,6]
  input %r: f32[1,4,6,6]
  init %sx: f32[] = [0.01]
  init %zx: i8[] = [0]
  init %wq: i8[4,4,3,3] = [)" + w + R"(]
  init %sw: f32[4] = [0.003, 0.001, 0.002, 0.004]
  init %b: f32[4] = [0.2, -0.1, 0.05, -0.3]
  init %sy: f32[] = [0.03]
  %xq: i8[1,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q
  %y: i8[1,4,6,6] = ingot::QuantConv {activation="Relu", pads=[1, 1, 1, 1], output_dtype=3}(%xq, %wq, %sx, %sw, %b, %r, %sy) @qc
  output %y
}
)";
  auto g = parse_ir(text);
  ASSERT_TRUE(g);
  builder::SplitReport rep;
  Status st = builder::split_host_fusions(*g, be, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.split, 1);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[1,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%qc/x_float: f32[1,4,6,6] = DequantizeLinear(%xq, %sx) @qc/dequantize\n"
            "%qc/conv/layer: f32[1,4,6,6] = ingot::FusedConv {pads=[1, 1, 1, 1]}(%qc/x_float, %qc/w_float, "
            "%qc/bias_float) @qc\n"
            "%qc/residual: f32[1,4,6,6] = Add(%qc/conv/layer, %r) @qc/residual\n"
            "%qc/conv: f32[1,4,6,6] = Relu(%qc/residual) @qc/Relu\n"
            "%y: i8[1,4,6,6] = QuantizeLinear(%qc/conv, %sy, %qc/y_zero_point) @qc/quantize\n");
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("no quantized convolution"), std::string::npos) << rep.notes[0];
  EXPECT_NE(rep.notes[0].find("elementwise steps"), std::string::npos) << rep.notes[0];
  // The same int8 numbers (the float conv's rounding could move a quotient at a tie by one step;
  // none does here).
  expect_same_outputs(text, *g, 1e-6);
}

}  // namespace
}  // namespace ingot
