// Copyright ingot authors. Apache-2.0.
//
// The quantized linear layer: ingot::QuantGemm's reference kernel on numbers worked by hand,
// fuse_quant_gemm on the Q/DQ forms exporters write (before / after IR text, then the same
// outputs as the float DequantizeLinear graph on the CPU reference), what it refuses, and the
// builder's split-back where a backend has no quantized GEMM.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/split_fusions.h"
#include "graph_check_util.h"
#include "named_tactic.h"
#include "ir/verify.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace ingot {
namespace {

using testing_util::expect_same_outputs;
using testing_util::replace_once;
using testing_util::node_lines;
using testing_util::parse_ir;

// X [2, 3] int8 x W [2, 3] (N = 2, K = 3) by hand:
//   row 0: [1, -2, 3] . [4, 5, -6] = 4 - 10 - 18 = -24;  . [-1, 0, 2] = -1 + 0 + 6 = 5
//   row 1: [-7, 8, 9] . [4, 5, -6] = -28 + 40 - 54 = -42; . [-1, 0, 2] = 7 + 0 + 18 = 25
// x_scale 0.5, w_scale [0.25, 2], bias [1, -3]:
//   y = [-24 * 0.125 + 1, 5 * 1 - 3; -42 * 0.125 + 1, 25 - 3] = [-2, 2; -4.25, 22]; Relu -> [0, 2; 0, 22].
const char* const kHandGraph = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %x: i8[2,3]
  init %w: i8[2,3] = [4, 5, -6, -1, 0, 2]
  init %sx: f32[] = [0.5]
  init %sw: f32[2] = [0.25, 2]
  init %b: f32[2] = [1, -3]
  %y: f32[2,2] = ingot::QuantGemm {activation="ACT"}(%x, %w, %sx, %sw, %b) @qg
  output %y
}
)";

std::vector<double> run_hand(const std::string& act) {
  std::string text = kHandGraph;
  text.replace(text.find("ACT"), 3, act);
  auto g = parse_ir(text);
  EXPECT_TRUE(g);
  if (!g) return {};
  Tensor x = Tensor::from_vector<int8_t>(DataType::kInt8, {2, 3}, {1, -2, 3, -7, 8, 9});
  cpu::Executor ex;
  auto out = ex.run(*g, {{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return (*out)[0].to_f64_vector();
}

TEST(QuantGemmKernel, Int8ProductsScalesBiasAndActivationByHand) {
  EXPECT_EQ(run_hand(""), (std::vector<double>{-2, 2, -4.25, 22}));
  EXPECT_EQ(run_hand("Relu"), (std::vector<double>{0, 2, 0, 22}));
}

TEST(QuantGemmKernel, Fp8OperandsAndAFloat16Output) {
  // E4M3 holds these exactly: 1.5 * 0.5 + -2 * 3 = -5.25; * x_scale 2 * w_scale 0.5 = -5.25.
  auto g = parse_ir(R"(graph g {
  opset "" 19
  opset "ingot" 1
  input %x: f8e4m3fn[1,2]
  init %w: f8e4m3fn[1,2] = [0.5, 3]
  init %sx: f32[] = [2]
  init %sw: f32[] = [0.5]
  %y: f16[1,1] = ingot::QuantGemm {output_dtype=10}(%x, %w, %sx, %sw) @qg
  output %y
}
)");
  ASSERT_TRUE(g);
  Tensor x = Tensor::zeros(DataType::kFloat8E4M3FN, {1, 2}).value();
  x.set_f64(0, 1.5);
  x.set_f64(1, -2);
  cpu::Executor ex;
  auto out = ex.run(*g, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].dtype(), DataType::kFloat16);
  EXPECT_EQ((*out)[0].get_f64(0), -5.25);
}

TEST(QuantGemmKernel, InferenceRefusesMismatchedOperands) {
  auto g = parse_ir(R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %x: i8[2,3]
  input %w: u8[2,3]
  init %sx: f32[] = [0.5]
  init %sw: f32[] = [0.5]
  %y: f32[2,2] = ingot::QuantGemm(%x, %w, %sx, %sw) @qg
  output %y
}
)", /*infer=*/false);
  ASSERT_TRUE(g);
  Status st = ir::infer_graph(*g);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("W must have X's type"), std::string::npos) << st.to_string();
}

// Q/DQ around a MatMul + bias Add, as onnxruntime's quantize_static (QInt8, per channel) writes it.
const char* const kQdqMatMul = R"(graph g {
  opset "" 19
  input %x: f32[2,4,8]
  init %sx: f32[] = [0.02]
  init %zx: i8[] = [0]
  init %wq: i8[8,3] = [12, -7, 99, 1, 0, -127, 45, 3, -60, 8, 77, -5, -33, 21, 6, 90, -1, 14, -88, 52, 7, 2, -19, 127]
  init %sw: f32[3] = [0.01, 0.003, 0.02]
  init %zw: i8[3] = [0, 0, 0]
  init %b: f32[3] = [0.5, -0.25, 1]
  %xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q
  %xd: f32[2,4,8] = DequantizeLinear(%xq, %sx, %zx) @dqx
  %wd: f32[8,3] = DequantizeLinear {axis=1}(%wq, %sw, %zw) @dqw
  %mm: f32[2,4,3] = MatMul(%xd, %wd) @fc
  %y: f32[2,4,3] = Add(%mm, %b) @fc_bias
  output %y
}
)";

std::unique_ptr<ir::Graph> fuse(const std::string& text, bool expect_change = true) {
  auto g = parse_ir(text);
  EXPECT_TRUE(g);
  if (!g) return nullptr;
  passes::PassContext ctx;
  auto r = passes::make_fuse_quant_gemm()->run(*g, ctx);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.ok() && *r, expect_change);
  auto dead = passes::make_remove_dead_nodes()->run(*g, ctx);
  EXPECT_TRUE(dead.ok());
  EXPECT_TRUE(ir::verify_graph(*g).ok());
  Status inf = ir::infer_graph(*g);
  EXPECT_TRUE(inf.ok()) << inf.to_string();
  return g;
}

TEST(FuseQuantGemm, MatMulWithBiasBetweenQdqPairsBecomesOneQuantGemm) {
  auto g = fuse(kQdqMatMul);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%y: f32[2,4,3] = ingot::QuantGemm {output_dtype=1}(%xq, %wq.nk, %sx.f32, %sw.f32, %b) @fc\n");
  // The weight is stored [N, K]: row n is column n of the [K, N] original.
  const Tensor* w = g->find_value("wq.nk")->initializer();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (Shape64{3, 8}));
  EXPECT_EQ(w->get_f64(0 * 8 + 1), 1);     // wq[1][0]
  EXPECT_EQ(w->get_f64(2 * 8 + 7), 127);   // wq[7][2]
  expect_same_outputs(kQdqMatMul, *g, 1e-5);
}

TEST(FuseQuantGemm, Fp8GemmWithTransposedWeightAndC) {
  const std::string text = R"(graph g {
  opset "" 19
  input %x: f32[5,16]
  init %sx: f32[] = [0.01]
  init %sw: f32[] = [0.004]
  init %c: f32[4] = [0.1, 0.2, -0.3, 0.4]
  init %z8: f8e4m3fn[] = [0]
  %xq: f8e4m3fn[5,16] = QuantizeLinear(%x, %sx, %z8) @q
  %xd: f32[5,16] = DequantizeLinear(%xq, %sx, %z8) @dqx
  %wd: f32[4,16] = DequantizeLinear(%wq, %sw) @dqw
  %y: f32[5,4] = Gemm {transB=1}(%xd, %wd, %c) @fc
  output %y
}
)";
  // An fp8 weight: small integers and halves, all exact in E4M3.
  std::string w = "  init %wq: f8e4m3fn[4,16] = [";
  for (int i = 0; i < 64; ++i) w += (i ? ", " : "") + std::to_string(((i * 7) % 13 - 6) * 0.5);
  w += "]\n";
  std::string full = text;
  full.insert(full.find("  %xq"), w);
  auto g = fuse(full);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: f8e4m3fn[5,16] = QuantizeLinear(%x, %sx, %z8) @q\n"
            "%y: f32[5,4] = ingot::QuantGemm {output_dtype=1}(%xq, %wq.nk, %sx.f32, %sw.f32, %c) @fc\n");
  // fp8 keeps its one weight scale (cuBLASLt's fp8 scale pointers are per tensor).
  EXPECT_EQ(g->find_value("sw.f32")->initializer()->numel(), 1);
  expect_same_outputs(full, *g, 1e-5);
}

TEST(FuseQuantGemm, APerTensorInt8WeightScaleIsWrittenOncePerChannel) {
  // onnxruntime's quantize_static default (per_channel=False): one weight scale. The QuantGemm gets
  // it as [N] equal values (the form the CUTLASS int8 GEMM takes), with the same outputs; the fp8
  // test above keeps its one number (cuBLASLt's fp8 scales are per tensor).
  std::string text = kQdqMatMul;
  replace_once(text, "init %sw: f32[3] = [0.01, 0.003, 0.02]", "init %sw: f32[] = [0.01]");
  replace_once(text, "init %zw: i8[3] = [0, 0, 0]", "init %zw: i8[] = [0]");
  replace_once(text, "DequantizeLinear {axis=1}(%wq, %sw, %zw)", "DequantizeLinear(%wq, %sw, %zw)");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%y: f32[2,4,3] = ingot::QuantGemm {output_dtype=1}(%xq, %wq.nk, %sx.f32, %sw.f32, %b) @fc\n");
  const Tensor* sw = g->find_value("sw.f32")->initializer();
  ASSERT_NE(sw, nullptr);
  ASSERT_EQ(sw->shape(), (Shape64{3}));
  for (int64_t n = 0; n < 3; ++n) EXPECT_FLOAT_EQ(static_cast<float>(sw->get_f64(n)), 0.01f);
  expect_same_outputs(text, *g, 1e-5);
}

TEST(FuseQuantGemm, RefusesAZeroPointAndFoldsTheWeightItLeaves) {
  // uint8 activations with zero point 128 (onnxruntime's default QUInt8): refused; the int8
  // weight's DequantizeLinear is folded to a float constant, so nothing dequantizes a weight at
  // run time.
  std::string text = kQdqMatMul;
  text.replace(text.find("init %zx: i8[] = [0]"), 20, "init %zx: u8[] = [128]");
  for (const char* from : {"%xq: i8[2,4,8]"}) text.replace(text.find(from), std::string(from).size(), "%xq: u8[2,4,8]");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  const std::string lines = node_lines(*g);
  EXPECT_EQ(lines.find("QuantGemm"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("@dqw"), std::string::npos) << lines;
  EXPECT_NE(lines.find("= MatMul(%xd, %wd) @fc"), std::string::npos) << lines;
  ASSERT_NE(g->find_value("wd"), nullptr);
  EXPECT_NE(g->find_value("wd")->initializer(), nullptr);
  expect_same_outputs(text, *g, 1e-6);
}

TEST(FuseQuantGemm, FoldConstantsKeepsAnInt8WeightForIt) {
  auto g = parse_ir(kQdqMatMul);
  ASSERT_TRUE(g);
  passes::PassContext ctx;
  ASSERT_TRUE(passes::make_fold_constants()->run(*g, ctx).ok());
  EXPECT_NE(node_lines(*g).find("DequantizeLinear {axis=1}(%wq, %sw, %zw) @dqw"), std::string::npos)
      << node_lines(*g);
}

// A backend with no QuantGemm tactic (everything else runs on its "device").

testing_util::PredicateBackend no_quant_gemm_backend() {
  return testing_util::PredicateBackend([](const ir::Node& n, const auto&) { return n.op_type() != "QuantGemm"; });
}

TEST(FuseQuantGemm, SplitBackWhereTheBackendHasNoQuantizedGemm) {
  auto g = fuse(kQdqMatMul);
  ASSERT_TRUE(g);
  testing_util::PredicateBackend be = no_quant_gemm_backend();
  builder::SplitReport rep;
  Status st = builder::split_host_fusions(*g, be, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.split, 1);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%fc/x_float: f32[2,4,8] = DequantizeLinear(%xq, %sx.f32) @fc/dequantize\n"
            "%fc/matmul: f32[2,4,3] = MatMul(%fc/x_float, %fc/w_float) @fc/matmul\n"
            "%y: f32[2,4,3] = Add(%fc/matmul, %fc/bias_float) @fc/bias\n");
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("no quantized GEMM"), std::string::npos) << rep.notes[0];
  expect_same_outputs(kQdqMatMul, *g, 1e-5);
}

TEST(FuseQuantGemm, ATransformersResidualAddJoinsTheLayer) {
  std::string text = kQdqMatMul;
  text.replace(text.find("  input %x: f32[2,4,8]\n"), 23, "  input %x: f32[2,4,8]\n  input %r: f32[2,4,3]\n");
  text.replace(text.find("  output %y\n"), 12, "  %z: f32[2,4,3] = Add(%r, %y) @skip\n  output %z\n");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%z: f32[2,4,3] = ingot::QuantGemm {output_dtype=1}(%xq, %wq.nk, %sx.f32, %sw.f32, %b, %r) @fc\n");
  expect_same_outputs(text, *g, 1e-5);
  // Split back where the backend has no quantized GEMM: the residual Add comes back too.
  testing_util::PredicateBackend be = no_quant_gemm_backend();
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  EXPECT_NE(node_lines(*g).find("%z: f32[2,4,3] = Add(%fc/bias, %r) @fc/residual"), std::string::npos)
      << node_lines(*g);
  expect_same_outputs(text, *g, 1e-5);
}

// FFN1 -> Gelu -> the next layer's QuantizeLinear: one QuantGemm that writes int8 (the float
// result is never stored), the next layer reading it.
TEST(FuseQuantGemm, TheNextLayersQuantizeLinearAndTheActivationBetweenJoinTheLayer) {
  std::string text = kQdqMatMul;
  const std::string tail = R"(  %g: f32[2,4,3] = Gelu(%y) @gelu
  init %sy: f32[] = [0.05]
  init %zy: i8[] = [0]
  %gq: i8[2,4,3] = QuantizeLinear(%g, %sy, %zy) @q2
  %gd: f32[2,4,3] = DequantizeLinear(%gq, %sy, %zy) @dq2
  output %gd
)";
  text.replace(text.find("  output %y\n"), 12, tail);
  text.replace(text.find("opset \"\" 19"), 11, "opset \"\" 20");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,8] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%gq: i8[2,4,3] = ingot::QuantGemm {activation=\"Gelu\", output_dtype=3}"
            "(%xq, %wq.nk, %sx.f32, %sw.f32, %b, _, %sy.f32) @fc\n"
            "%gd: f32[2,4,3] = DequantizeLinear(%gq, %sy, %zy) @dq2\n");
  // The same int8 numbers as the unfused graph's (its Gelu output is f32 here, so the quotient is
  // the same float32 division).
  expect_same_outputs(text, *g, 1e-6);
  testing_util::PredicateBackend be = no_quant_gemm_backend();
  builder::SplitReport rep;
  ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
  EXPECT_NE(node_lines(*g).find("QuantizeLinear(%fc/Gelu, %sy.f32, %fc/y_zero_point) @fc/quantize"),
            std::string::npos)
      << node_lines(*g);
  expect_same_outputs(text, *g, 1e-6);
}

}  // namespace
}  // namespace ingot
