// Copyright ingot authors. Apache-2.0.
//
// fold_batchnorm, fuse_conv_gemm and fuse_pointwise: before/expected IR text for each pattern
// and refusal, and numerical equivalence of the rewritten graph against the unoptimized one on
// the CPU reference executor (random non-zero inputs, rtol 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "backend/cpu/executor.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "ir_test_util.h"

namespace ingot::passes {
std::unique_ptr<Pass> make_fold_batchnorm();
std::unique_ptr<Pass> make_fuse_conv_gemm();
std::unique_ptr<Pass> make_fuse_pointwise();
std::unique_ptr<Pass> make_fuse_qkv_projection();
std::unique_ptr<Pass> make_fuse_gated_mlp();
std::unique_ptr<Pass> make_pack_rotary_qkv();
std::unique_ptr<Pass> make_narrow_attention_mask();
std::unique_ptr<Pass> make_attention_strided_views();
std::unique_ptr<Pass> make_remove_dead_nodes();
std::unique_ptr<Pass> make_simplify_algebra();

namespace {

std::unique_ptr<ir::Graph> parse(const std::string& text) { return testing_util::parse_ir(text); }

// The text form without initializers nothing reads any more (the IR cannot drop them; the
// dead-node pass's business).
std::string live_text(const ir::Graph& g) {
  std::istringstream in(ir::to_text(g, 64));
  std::string line, out;
  while (std::getline(in, line)) {
    size_t p = line.find("init %");
    if (p != std::string::npos && p == line.find_first_not_of(' ')) {
      std::string name = line.substr(p + 6, line.find_first_of(": ", p + 6) - (p + 6));
      const ir::Value* v = g.find_value(name);
      if (v && v->uses().empty()) continue;
    }
    out += line + "\n";
  }
  return out;
}

std::unique_ptr<ir::Graph> run_passes(const std::string& text, std::vector<std::unique_ptr<Pass>> passes,
                                      PassContext* ctx, bool expect_change = true) {
  auto g = parse(text);
  if (!g) return nullptr;
  bool changed = false;
  for (auto& p : passes) {
    auto r = p->run(*g, *ctx);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    changed |= r.ok() && *r;
  }
  EXPECT_EQ(changed, expect_change);
  Status v = ir::verify_graph(*g);
  EXPECT_TRUE(v.ok()) << v.to_string();
  Status inf = ir::infer_graph(*g);
  EXPECT_TRUE(inf.ok()) << inf.to_string();
  return g;
}

/// The last node of `g` with op type `op` (any domain), or nullptr.
const ir::Node* last_of(const ir::Graph& g, const char* op) {
  const ir::Node* found = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type() == op) found = n.get();
  return found;
}

std::vector<std::unique_ptr<Pass>> one(std::unique_ptr<Pass> p) {
  std::vector<std::unique_ptr<Pass>> v;
  v.push_back(std::move(p));
  return v;
}

void expect_same_graph(const ir::Graph& got, const std::string& expected) {
  auto e = parse(expected);
  ASSERT_TRUE(e);
  EXPECT_EQ(live_text(got), live_text(*e));
}

// Runs both graphs on the same random non-zero inputs and compares every output.
void expect_equivalent(const std::string& before_text, const ir::Graph& after, uint32_t seed = 7) {
  auto before = parse(before_text);
  ASSERT_TRUE(before);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  std::map<std::string, Tensor> inputs;
  for (const ir::Value* in : before->inputs()) {
    if (in->initializer()) continue;
    ASSERT_TRUE(in->shape().is_concrete()) << in->name();
    Tensor t = Tensor::zeros(in->dtype(), in->shape().concrete()).value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
    inputs[in->name()] = t;
  }
  cpu::Executor ex;
  auto want = ex.run(*before, inputs);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = ex.run(after, inputs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(want->size(), got->size());
  for (size_t o = 0; o < want->size(); ++o) {
    ASSERT_EQ((*want)[o].shape(), (*got)[o].shape());
    for (int64_t i = 0; i < (*want)[o].numel(); ++i) {
      double w = (*want)[o].get_f64(i), g = (*got)[o].get_f64(i);
      ASSERT_NEAR(g, w, 1e-4 * std::abs(w) + 1e-5) << "output " << o << " element " << i;
    }
  }
}

// Deterministic non-zero weights in text form.
std::string init_text(const std::string& name, const std::vector<int64_t>& shape, uint32_t seed, bool positive = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  int64_t n = 1;
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    n *= shape[i];
    dims += (i ? "," : "") + std::to_string(shape[i]);
  }
  std::ostringstream os;
  os.precision(9);
  os << "  init %" << name << ": f32[" << dims << "] = [";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << (positive || (rng() & 1) ? 1 : -1) * mag(rng);
  os << "]\n";
  return os.str();
}

bool has_note(const PassContext& ctx, const std::string& text) {
  for (const auto& n : ctx.notes())
    if (n.find(text) != std::string::npos) return true;
  return false;
}

// ---------------------------------------------------------------------------------------
// fold_batchnorm

// k = scale/sqrt(var+eps) = [1/2, 2/2] = [0.5, 1]; W' = W·k = [1, 3];
// B' = beta - mean·k = [0.5 - 0.5, -1 - 0] = [0, -1].
constexpr const char* kConvBn = R"(graph g {
  opset "" 17
  input %x: f32[1,1,2,2]
  init %w: f32[2,1,1,1] = [2, 3]
  init %scale: f32[2] = [1, 2]
  init %beta: f32[2] = [0.5, -1]
  init %mean: f32[2] = [1, 0]
  init %var: f32[2] = [3, 3]
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization {epsilon=1.0}(%c, %scale, %beta, %mean, %var) @bn
  output %y
})";

TEST(PassesFusion, FoldBatchNormIntoConvByHand) {
  PassContext ctx;
  auto g = run_passes(kConvBn, one(make_fold_batchnorm()), &ctx);
  ASSERT_TRUE(g);
  expect_same_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[1,1,2,2]
    init %w_folded: f32[2,1,1,1] = [1, 3]
    init %conv_bias_folded: f32[2] = [0, -1]
    %y = Conv(%x, %w_folded, %conv_bias_folded) @conv
    output %y
  })");
  EXPECT_EQ(g->nodes()[0]->origins(), (std::vector<std::string>{"conv", "bn"}));
  expect_equivalent(kConvBn, *g);
}

// A BatchNormalization with no layer before it (DenseNet's pre-activation BN after a Concat)
// becomes Mul + Add by per-channel constants of X's rank - 1 (broadcast along axis 1), rank 3 too.
TEST(PassesFusion, StandaloneBatchNormBecomesScaleAndShift) {
  for (const char* shape : {"[2,3,4,5]", "[2,3,7]"}) {
    const std::string t = std::string(R"(graph g {
  opset "" 17
  input %a: f32)") + shape + R"(
  input %b: f32)" + shape + R"(
)" + init_text("scale", {6}, 1) + init_text("beta", {6}, 2) + init_text("mean", {6}, 3) +
                          init_text("var", {6}, 4, true) + R"(  %cat = Concat {axis=1}(%a, %b) @cat
  %y = BatchNormalization {epsilon=0.001}(%cat, %scale, %beta, %mean, %var) @bn
  %r = Relu(%y) @relu
  output %r
})";
    PassContext ctx;
    auto g = run_passes(t, one(make_fold_batchnorm()), &ctx);
    ASSERT_TRUE(g);
    int bns = 0, muls = 0, adds = 0;
    for (const auto& n : g->nodes()) {
      bns += n->op_type() == "BatchNormalization";
      muls += n->op_type() == "Mul";
      adds += n->op_type() == "Add";
    }
    EXPECT_EQ(bns, 0);
    EXPECT_EQ(muls, 1);
    EXPECT_EQ(adds, 1);
    EXPECT_TRUE(has_note(ctx, "per-channel scale and shift"));
    expect_equivalent(t, *g);
  }
}

TEST(PassesFusion, FoldBatchNormRefusals) {
  // Statistics that are graph inputs.
  {
    PassContext ctx;
    std::string t = R"(graph g {
      opset "" 17
      input %x: f32[1,1,2,2]
      input %mean: f32[2]
      init %w: f32[2,1,1,1] = [2, 3]
      init %scale: f32[2] = [1, 2]
      init %beta: f32[2] = [0.5, -1]
      init %var: f32[2] = [3, 3]
      %c = Conv(%x, %w) @conv
      %y = BatchNormalization(%c, %scale, %beta, %mean, %var) @bn
      output %y
    })";
    auto g = run_passes(t, one(make_fold_batchnorm()), &ctx, false);
    expect_same_graph(*g, t);
    EXPECT_TRUE(has_note(ctx, "statistics are not constant")) << ctx.notes().size();
  }
  // The conv output is read by a second node.
  {
    PassContext ctx;
    std::string t = std::string(kConvBn).replace(std::string(kConvBn).find("  output %y"), 11,
                                                  "  %z = Relu(%c) @r\n  output %y\n  output %z");
    auto g = run_passes(t, one(make_fold_batchnorm()), &ctx);
    // Not folded, but a per-channel scale and shift: k = [0.5, 1], c = beta - mean·k = [0, -1].
    expect_same_graph(*g, R"(graph g {
  opset "" 17
  input %x: f32[1,1,2,2]
  init %w: f32[2,1,1,1] = [2, 3]
  init %bn_scale: f32[2,1,1] = [0.5, 1]
  init %bn_shift: f32[2,1,1] = [0, -1]
  %c = Conv(%x, %w) @conv
  %z = Relu(%c) @r
  %bn_scaled = Mul(%c, %bn_scale) @bn/scale
  %y = Add(%bn_scaled, %bn_shift) @bn/shift
  output %y
  output %z
})");
    EXPECT_TRUE(has_note(ctx, "other readers"));
    EXPECT_TRUE(has_note(ctx, "per-channel scale and shift"));
    expect_equivalent(t, *g);
  }
  // Statistics of another length than the channels: left as it is.
  {
    PassContext ctx;
    std::string t = R"(graph g {
      opset "" 17
      input %x: f32[1,3,2,2]
      init %s: f32[2] = [1, 2]
      %y = BatchNormalization(%x, %s, %s, %s, %s) @bn
      output %y
    })";
    auto g = parse(t);
    auto r = make_fold_batchnorm()->run(*g, ctx);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(*r);
  }
  // Training mode.
  {
    PassContext ctx;
    std::string t = std::string(kConvBn);
    t.replace(t.find("epsilon=1.0"), 11, "epsilon=1.0, training_mode=1");
    auto g = parse(t);
    auto r = make_fold_batchnorm()->run(*g, ctx);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(*r);
    EXPECT_TRUE(has_note(ctx, "training mode"));
  }
}

TEST(PassesFusion, FoldPerChannelMulAddIntoConv) {
  // y = (Conv(x, W, b)·s) + t: W' = W·s = [2·2, 3·-1] = [4, -3]; b' = b·s + t = [1·2+0.5, 2·-1+1] = [2.5, -1].
  std::string t = R"(graph g {
    opset "" 17
    input %x: f32[1,1,2,2]
    init %w: f32[2,1,1,1] = [2, 3]
    init %b: f32[2] = [1, 2]
    init %s: f32[1,2,1,1] = [2, -1]
    init %t: f32[2,1,1] = [0.5, 1]
    %c = Conv(%x, %w, %b) @conv
    %m = Mul(%s, %c) @mul
    %y = Add(%m, %t) @add
    output %y
  })";
  PassContext ctx;
  auto g = run_passes(t, one(make_fold_batchnorm()), &ctx);
  expect_same_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[1,1,2,2]
    init %w_folded_1: f32[2,1,1,1] = [4, -3]
    init %b_folded_1: f32[2] = [2.5, -1]
    %y = Conv(%x, %w_folded_1, %b_folded_1) @conv
    output %y
  })");
  EXPECT_EQ(g->nodes()[0]->origins(), (std::vector<std::string>{"conv", "mul", "add"}));
  expect_equivalent(t, *g);
}

std::string bn_inits(int64_t c, uint32_t seed) {
  return init_text("scale", {c}, seed) + init_text("beta", {c}, seed + 1) + init_text("mean", {c}, seed + 2) +
         init_text("var", {c}, seed + 3, true);
}

TEST(PassesFusion, FoldBatchNormIntoGemmAndConvTransposeMatchesReference) {
  for (int trans_b = 0; trans_b < 2; ++trans_b) {
    std::string t = "graph g {\n  opset \"\" 17\n  input %a: f32[3,4]\n" +
                    init_text("w", trans_b ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5}, 1) +
                    init_text("c", {5}, 2) + bn_inits(5, 3) +
                    "  %m = Gemm {beta=0.5, transB=" + std::to_string(trans_b) + "}(%a, %w, %c) @gemm\n"
                    "  %y = BatchNormalization(%m, %scale, %beta, %mean, %var) @bn\n  output %y\n}\n";
    PassContext ctx;
    auto g = run_passes(t, one(make_fold_batchnorm()), &ctx);
    ASSERT_EQ(g->nodes().size(), 1u);
    EXPECT_EQ(g->nodes()[0]->op_type(), "Gemm");
    expect_equivalent(t, *g);
  }
  std::string t = "graph g {\n  opset \"\" 17\n  input %x: f32[1,4,3,3]\n" + init_text("w", {4, 3, 2, 2}, 5) +
                  bn_inits(6, 9) +
                  "  %c = ConvTranspose {group=2, strides=[2, 2]}(%x, %w) @deconv\n"
                  "  %y = BatchNormalization(%c, %scale, %beta, %mean, %var) @bn\n  output %y\n}\n";
  PassContext ctx;
  auto g = run_passes(t, one(make_fold_batchnorm()), &ctx);
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0]->op_type(), "ConvTranspose");
  expect_equivalent(t, *g);
}

// ---------------------------------------------------------------------------------------
// fuse_conv_gemm

std::string conv_prefix() {
  return "graph g {\n  opset \"\" 17\n  input %x: f32[2,3,5,5]\n" + init_text("w", {4, 3, 3, 3}, 11) +
         init_text("bias", {1, 4, 1, 1}, 12);
}

TEST(PassesFusion, ConvBiasReluBecomesFusedConv) {
  std::string t = conv_prefix() +
                  "  %c = Conv {pads=[1, 1, 1, 1]}(%x, %w) @conv\n  %b = Add(%c, %bias) @add\n"
                  "  %y = Relu(%b) @relu\n  output %y\n}\n";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx);
  // The bias Add's [1,4,1,1] constant becomes the [4] bias input with the same values.
  expect_same_graph(*g, conv_prefix() + "  opset \"ingot\" 1\n" + init_text("conv_bias", {4}, 12) + R"(
    %y = ingot::FusedConv {activation="Relu", pads=[1, 1, 1, 1]}(%x, %w, %conv_bias) @conv
    output %y
  })");
  EXPECT_EQ(g->nodes()[0]->origins(), (std::vector<std::string>{"conv", "add", "relu"}));
  expect_equivalent(t, *g);
}

// Llama's gated MLP: silu(x·Wg) * (x·Wu). The SiLU stays out of the gate GEMM and fuses with the
// product's Mul into one pointwise kernel; a SiLU that gates nothing still fuses into its GEMM.
TEST(PassesFusion, GatedMlpActivationFusesWithTheProductNotTheGemm) {
  const std::string head = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[2,3,8]\n" +
                           init_text("wg", {8, 6}, 31) + init_text("wu", {8, 6}, 32);
  // SiLU written out, and as recognize_gelu_silu leaves it (ingot::Silu).
  for (const std::string silu : {"  %s = Sigmoid(%g) @sig\n  %a = Mul(%g, %s) @silu\n", "  %a = ingot::Silu(%g) @silu\n"}) {
    const std::string t = head + "  %g = MatMul(%x, %wg) @gate\n" + silu +
                          "  %u = MatMul(%x, %wu) @up\n  %y = Mul(%a, %u) @gated\n  output %y\n}\n";
    std::vector<std::unique_ptr<Pass>> passes;
    passes.push_back(make_fuse_conv_gemm());
    passes.push_back(make_fuse_pointwise());
    PassContext ctx;
    auto g = run_passes(t, std::move(passes), &ctx);
    ASSERT_TRUE(g);
    std::string ops;
    for (const auto& n : g->nodes()) ops += n->op_type() + " ";
    EXPECT_EQ(ops, "MatMul MatMul Pointwise ") << ir::to_text(*g);
    EXPECT_TRUE(has_note(ctx, "gates a product"));
    expect_equivalent(t, *g);
  }
  // The same SiLU read by a Mul with a constant (a scale, not a gate): fused into the GEMM.
  const std::string scaled = head + "  init %k: f32[] = [0.5]\n" +
                             "  %g = MatMul(%x, %wg) @gate\n  %s = Sigmoid(%g) @sig\n  %a = Mul(%g, %s) @silu\n"
                             "  %y = Mul(%a, %k) @scaled\n  output %y\n}\n";
  PassContext ctx2;
  auto g2 = run_passes(scaled, one(make_fuse_conv_gemm()), &ctx2);
  ASSERT_TRUE(g2);
  EXPECT_EQ(g2->nodes()[0]->op_type(), "FusedGemm");
  EXPECT_EQ(g2->nodes()[0]->attrs().get_string("activation", ""), "Silu");
}

// fuse_gated_mlp: Llama's MLP (bias-free) becomes MatMul(x, [Wg | Wu]) and ingot::SwiGLU, in either
// operand order of the product; with biases (FusedGemm after fuse_conv_gemm) a FusedGemm with
// [bg | bu]; the CPU reference computes the same outputs.
TEST(PassesFusion, GatedMlpGateAndUpBecomeOneGemmAndSwiGlu) {
  const std::string head = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[2,3,8]\n" +
                           init_text("wg", {8, 6}, 41) + init_text("wu", {8, 6}, 42) + init_text("bg", {6}, 43) +
                           init_text("bu", {6}, 44);
  for (const char* product : {"Mul(%a, %u)", "Mul(%u, %a)"}) {
    const std::string t = head + "  %g = MatMul(%x, %wg) @gate\n  %a = ingot::Silu(%g) @silu\n"
                                 "  %u = MatMul(%x, %wu) @up\n  %y = " + product + " @gated\n  output %y\n}\n";
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_gated_mlp()), &ctx);
    ASSERT_TRUE(g);
    std::string ops;
    for (const auto& n : g->nodes()) ops += n->op_type() + " ";
    EXPECT_EQ(ops, "MatMul SwiGLU ") << ir::to_text(*g);
    EXPECT_EQ(g->nodes()[0]->input(1)->initializer()->shape(), (Shape64{8, 12}));
    EXPECT_EQ(g->outputs()[0]->name(), "y");
    expect_equivalent(t, *g);
  }
  const std::string biased = head + "  %g = ingot::FusedGemm {kind=\"matmul\"}(%x, %wg, %bg) @gate\n"
                                    "  %a = ingot::Silu(%g) @silu\n  %u = MatMul(%x, %wu) @up\n"
                                    "  %y = Mul(%a, %u) @gated\n  output %y\n}\n";
  PassContext ctx;
  auto g = run_passes(biased, one(make_fuse_gated_mlp()), &ctx);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 2u) << ir::to_text(*g);
  EXPECT_EQ(g->nodes()[0]->op_type(), "FusedGemm");
  const Tensor& bias = *g->nodes()[0]->input(2)->initializer();
  ASSERT_EQ(bias.shape(), (Shape64{12}));
  for (int64_t c = 6; c < 12; ++c) EXPECT_EQ(bias.get_f64(c), 0.0);  // the up projection had none
  expect_equivalent(biased, *g);
}

TEST(PassesFusion, GatedMlpRefusals) {
  const std::string head = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[2,3,8]\n"
                           "  input %x2: f32[2,3,8]\n  input %wx: f32[8,6]\n" +
                           init_text("wg", {8, 6}, 41) + init_text("wu", {8, 6}, 42);
  const std::string tail = "  %a = ingot::Silu(%g) @silu\n  %y = Mul(%a, %u) @gated\n";
  struct Case {
    const char* what;
    std::string body, note;
  } cases[] = {
      {"different inputs", "  %g = MatMul(%x, %wg) @gate\n  %u = MatMul(%x2, %wu) @up\n" + tail + "  output %y\n",
       "read different inputs"},
      {"an epilogue on up", "  %g = MatMul(%x, %wg) @gate\n  %u = ingot::FusedGemm {activation=\"Relu\", "
                            "kind=\"matmul\"}(%x, %wu) @up\n" + tail + "  output %y\n",
       ""},
      {"gate read elsewhere", "  %g = MatMul(%x, %wg) @gate\n  %u = MatMul(%x, %wu) @up\n" + tail +
                                  "  output %y\n  output %g\n",
       "read elsewhere"},
      {"weight not constant", "  %g = MatMul(%x, %wx) @gate\n  %u = MatMul(%x, %wu) @up\n" + tail + "  output %y\n",
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string t = head + c.body + "}\n";
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_gated_mlp()), &ctx, /*expect_change=*/false);
    ASSERT_TRUE(g);
    EXPECT_EQ(last_of(*g, "SwiGLU"), nullptr) << ir::to_text(*g);
    if (!c.note.empty()) EXPECT_TRUE(has_note(ctx, c.note)) << c.note;
  }
}

// fuse_squeeze_excite (the builder runs it after its layout pass): EfficientNet's block (ReduceMean, a
// 1x1 FusedConv with SiLU, one with Sigmoid, the Mul) channels-first and channels-last, either Mul
// operand order; MobileNetV3's (ReLU, then a standalone HardSigmoid after a plain Conv); a
// GlobalAveragePool. The CPU reference gives the unfused chain's numbers.
std::string se_graph(bool channels_last, const std::string& pool, const std::string& tail) {
  const std::string x = channels_last ? "[2,3,5,4]" : "[2,4,3,5]";
  const Shape64 w1 = channels_last ? Shape64{2, 1, 1, 4} : Shape64{2, 4, 1, 1};
  const Shape64 w2 = channels_last ? Shape64{4, 1, 1, 2} : Shape64{4, 2, 1, 1};
  return "graph g {\n  opset \"\" 18\n  opset \"ingot\" 1\n  input %x: f32" + x + "\n" + init_text("w1", w1, 61) +
         init_text("b1", {2}, 62) + init_text("w2", w2, 63) + init_text("b2", {4}, 64) +
         (channels_last ? "  init %axes: i64[2] = [1, 2]\n" : "  init %axes: i64[2] = [2, 3]\n") + pool + tail + "}\n";
}

TEST(PassesFusion, SqueezeExciteBlockBecomesOneNode) {
  struct Case {
    const char* what;
    bool cl;
    std::string pool, tail;
  };
  const std::string cf = "channels_last=0", cl = "channels_last=1";
  const std::string mean = "  %p = ReduceMean {keepdims=1}(%x, %axes) @pool\n";
  auto fcs = [](const std::string& layout, const std::string& act2) {
    return "  %h = ingot::FusedConv {activation=\"Silu\", " + layout + "}(%p, %w1, %b1) @fc1\n"
           "  %g = ingot::FusedConv {" + act2 + layout + "}(%h, %w2, %b2) @fc2\n";
  };
  const Case cases[] = {
      {"channels-first", false, mean, fcs(cf, "activation=\"Sigmoid\", ") + "  %y = Mul(%x, %g) @scale\n  output %y\n"},
      {"channels-last, gate first", true, mean,
       fcs(cl, "activation=\"Sigmoid\", ") + "  %y = Mul(%g, %x) @scale\n  output %y\n"},
      {"standalone HardSigmoid", true, mean,
       "  %h = ingot::FusedConv {activation=\"Relu\", channels_last=1}(%p, %w1, %b1) @fc1\n"
       "  %c = ingot::FusedConv {channels_last=1}(%h, %w2, %b2) @fc2\n"
       "  %g = HardSigmoid {alpha=0.1666667, beta=0.5}(%c) @hsig\n  %y = Mul(%x, %g) @scale\n  output %y\n"},
      {"GlobalAveragePool, plain Convs", false, "  %p = GlobalAveragePool(%x) @pool\n",
       "  %h = Conv(%p, %w1) @fc1\n  %c = Conv(%h, %w2, %b2) @fc2\n  %g = Sigmoid(%c) @sig\n"
       "  %y = Mul(%x, %g) @scale\n  output %y\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string t = se_graph(c.cl, c.pool, c.tail);
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_squeeze_excite({})), &ctx);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->nodes().size(), 1u) << ir::to_text(*g);
    const ir::Node& se = *g->nodes()[0];
    EXPECT_EQ(se.op_type(), "SqueezeExcite");
    EXPECT_EQ(se.attrs().get_int("channels_last", -1), c.cl ? 1 : 0);
    EXPECT_EQ(se.input(0)->name(), "x");
    EXPECT_EQ(g->outputs()[0]->name(), "y");
    expect_equivalent(t, *g);
  }
}

TEST(PassesFusion, SqueezeExciteRefusals) {
  const std::string mean = "  %p = ReduceMean {keepdims=1}(%x, %axes) @pool\n";
  const std::string fc1 = "  %h = ingot::FusedConv {activation=\"Silu\"}(%p, %w1, %b1) @fc1\n";
  const std::string fc2 = "  %g = ingot::FusedConv {activation=\"Sigmoid\"}(%h, %w2, %b2) @fc2\n";
  const std::string mul = "  %y = Mul(%x, %g) @scale\n";
  struct Case {
    const char* what;
    bool cl;
    std::string pool, tail, note;
  } cases[] = {
      {"pool read elsewhere", false, mean, fc1 + fc2 + mul + "  output %y\n  output %p\n", "read elsewhere"},
      {"gate read elsewhere", false, mean, fc1 + fc2 + mul + "  %z = Add(%g, %g)\n  output %y\n  output %z\n",
       "read elsewhere"},
      {"pool over one axis", false, "  init %ax1: i64[1] = [3]\n  %p = ReduceMean {keepdims=1}(%x, %ax1) @pool\n",
       "", ""},
      {"two gate activations", false, mean,
       fc1 + "  %c = ingot::FusedConv {activation=\"Relu\"}(%h, %w2, %b2) @fc2\n  %g = Sigmoid(%c)\n" + mul +
           "  output %y\n",
       "an activation before the gate's"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string t = se_graph(c.cl, c.pool, c.tail);
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_squeeze_excite({})), &ctx, /*expect_change=*/false);
    ASSERT_TRUE(g);
    EXPECT_EQ(last_of(*g, "SqueezeExcite"), nullptr) << ir::to_text(*g);
    if (!c.note.empty()) EXPECT_TRUE(has_note(ctx, c.note)) << c.note;
  }
  // A backend without a tactic for the node: the block stays as it was, and the note says why.
  const std::string t = se_graph(false, mean, fc1 + fc2 + mul + "  output %y\n");
  PassContext ctx;
  auto none = [](const ir::Node&, const std::vector<const ir::Node*>& parts, std::string*) -> Result<bool> {
    EXPECT_EQ(parts.size(), 4u);  // the pooling, both convolutions and the Mul
    return false;
  };
  auto g = run_passes(t, one(make_fuse_squeeze_excite(none)), &ctx, false);
  ASSERT_TRUE(g);
  EXPECT_EQ(last_of(*g, "SqueezeExcite"), nullptr);
  EXPECT_EQ(g->nodes().size(), 4u) << ir::to_text(*g);
  EXPECT_TRUE(has_note(ctx, "no tactic for the fused block"));
}

// fuse_concat_pointwise: DenseNet's Concat of feature maps, then its BatchNorm + Relu as one
// Pointwise (fuse_pointwise forms it first): one node whose body starts with the Concat, reading
// the pieces, equal to the two steps on the CPU reference. `axis` and the layout vary.
std::string concat_bn_relu_graph(const std::string& pieces_decl, const std::string& cat_args, int axis,
                                 const std::string& param_shape, const std::string& out_tail = "  output %y\n") {
  return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n" + pieces_decl + "  input %s: f32" + param_shape +
         "\n  input %t: f32" + param_shape + "\n  %c = Concat {axis=" + std::to_string(axis) + "}(" + cat_args +
         ") @cat\n  %m = Mul(%c, %s) @bn_scale\n  %a = Add(%m, %t) @bn_shift\n  %y = Relu(%a) @relu\n" + out_tail + "}\n";
}

TEST(PassesFusion, ConcatMovesIntoThePointwiseReadingIt) {
  struct Case {
    const char* what;
    std::string decl, args;
    int axis;
    std::string param;
    size_t pieces;
  } cases[] = {
      {"channels-last, three pieces", "  input %x0: f32[2,3,3,8]\n  input %x1: f32[2,3,3,4]\n  input %x2: f32[2,3,3,4]\n",
       "%x0, %x1, %x2", 3, "[16]", 3},
      {"channels-first, negative axis", "  input %x0: f32[2,5,3,3]\n  input %x1: f32[2,3,3,3]\n", "%x0, %x1", -3,
       "[8,1,1]", 2},
      {"a piece twice", "  input %x0: f32[1,2,2,4]\n", "%x0, %x0", 3, "[8]", 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string t = concat_bn_relu_graph(c.decl, c.args, c.axis, c.param);
    PassContext ctx;
    std::vector<std::unique_ptr<Pass>> passes;
    passes.push_back(make_fuse_pointwise());
    passes.push_back(make_fuse_concat_pointwise({}));
    auto g = run_passes(t, std::move(passes), &ctx);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->nodes().size(), 1u) << ir::to_text(*g);
    const ir::Node& n = *g->nodes()[0];
    EXPECT_EQ(n.op_type(), "Pointwise");
    ASSERT_EQ(n.inputs().size(), c.pieces + 2);
    const ir::Graph* body = n.attrs().get_graph("body");
    ASSERT_NE(body, nullptr);
    EXPECT_EQ(body->nodes()[0]->op_type(), "Concat");
    EXPECT_EQ(g->outputs()[0]->name(), "y");
    EXPECT_TRUE(has_note(ctx, "fused 1 Concat"));
    expect_equivalent(t, *g);
  }
}

TEST(PassesFusion, ConcatPointwiseRefusals) {
  const std::string two = "  input %x0: f32[2,3,3,8]\n  input %x1: f32[2,3,3,8]\n";
  struct Case {
    const char* what;
    std::string text, note;
  } cases[] = {
      {"the Concat is also an output", concat_bn_relu_graph(two, "%x0, %x1", 3, "[16]", "  output %y\n  output %c\n"), ""},
      {"the Pointwise broadcasts the Concat",
       concat_bn_relu_graph("  input %x0: f32[1,3,3,8]\n  input %x1: f32[1,3,3,8]\n", "%x0, %x1", 3, "[2,1,1,16]"),
       "not of the Concat's shape"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    PassContext ctx;
    auto g = parse(c.text);
    ASSERT_TRUE(g);
    ASSERT_TRUE(make_fuse_pointwise()->run(*g, ctx).ok());
    auto r = make_fuse_concat_pointwise({})->run(*g, ctx);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE(*r);
    EXPECT_NE(last_of(*g, "Concat"), nullptr) << ir::to_text(*g);
    if (!c.note.empty()) EXPECT_TRUE(has_note(ctx, c.note)) << c.note;
  }
  {
    // A Concat whose only reader is already a fused Concat + Pointwise: one Concat per kernel.
    const std::string t = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %a: f32[1,2,2,4]\n"
                          "  input %b: f32[1,2,2,4]\n  input %d: f32[1,2,2,8]\n  input %s: f32[16]\n"
                          "  %ab = Concat {axis=3}(%a, %b)\n  %c = Concat {axis=3}(%ab, %d)\n  %m = Mul(%c, %s)\n"
                          "  %y = Relu(%m)\n  output %y\n}\n";
    PassContext ctx;
    auto g = parse(t);
    ASSERT_TRUE(g);
    ASSERT_TRUE(make_fuse_pointwise()->run(*g, ctx).ok());
    auto r = make_fuse_concat_pointwise({})->run(*g, ctx);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(*r);
    EXPECT_EQ(g->nodes().size(), 2u) << ir::to_text(*g);
    // Run again: %ab's reader is now the fused node, which keeps its one Concat.
    auto again = make_fuse_concat_pointwise({})->run(*g, ctx);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_FALSE(*again);
    EXPECT_EQ(g->nodes().size(), 2u) << ir::to_text(*g);
    EXPECT_TRUE(has_note(ctx, "already starts with a Concat"));
    ASSERT_TRUE(ir::verify_graph(*g).ok());
    ASSERT_TRUE(ir::infer_graph(*g).ok());
    expect_equivalent(t, *g);
  }
  // A backend that does not run the fused node: both steps stay, and the note says why.
  PassContext ctx;
  auto g = parse(concat_bn_relu_graph(two, "%x0, %x1", 3, "[16]"));
  ASSERT_TRUE(g);
  ASSERT_TRUE(make_fuse_pointwise()->run(*g, ctx).ok());
  auto none = [](const ir::Node& fused, const std::vector<const ir::Node*>& parts, std::string*) -> Result<bool> {
    EXPECT_EQ(fused.inputs().size(), 4u);  // the two pieces, the scale and the shift
    EXPECT_EQ(parts.size(), 2u);           // the Concat and the Pointwise
    return false;
  };
  auto r = make_fuse_concat_pointwise(none)->run(*g, ctx);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(g->nodes().size(), 2u) << ir::to_text(*g);
  EXPECT_TRUE(has_note(ctx, "no tactic for the fused node"));
}

// pack_rotary_qkv: a grouped-query rotary attention (Hq 4, Hkv 2, D 4, B 2, S 3) whose Q, K and
// V are three projections, Q and K rotated: one GEMM [16, 32], one rotation of the first 6 heads of
// each packed row, the attention reading Q and K inside the rotation's output and V inside the
// GEMM's. `q_proj` replaces Q's projection (a biased FusedGemm in one case); `k_sin` is K's sin.
// `rope_d` is the rotations' head size (the views' is 4).
std::string rotary_gqa_graph(const std::string& q_proj, const std::string& k_sin = "%sin", int rope_d = 4) {
  std::string t = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[2,3,16]\n";
  t += init_text("wq", {16, 16}, 71) + init_text("wk", {16, 8}, 72) + init_text("wv", {16, 8}, 73) +
       init_text("bq", {16}, 74) + init_text("cos", {1, 3, 1, rope_d}, 75) + init_text("sin", {1, 3, 1, rope_d}, 76) +
       init_text("sin2", {1, 3, 1, rope_d}, 77);
  const std::string d = std::to_string(rope_d);
  t += "  init %sq: i64[4] = [2, 3, " + std::to_string(16 / rope_d) + ", " + d + "]\n  init %sk: i64[4] = [2, 3, " +
       std::to_string(8 / rope_d) + ", " + d + "]\n";
  t += q_proj + "  %qr = Reshape(%q, %sq) @qr\n  %qo = ingot::RotaryEmbedding(%qr, %cos, %sin) @rq\n";
  t += "  %k = MatMul(%x, %wk) @k\n  %kr = Reshape(%k, %sk) @kr\n  %ko = ingot::RotaryEmbedding(%kr, %cos, " + k_sin +
       ") @rk\n";
  t += "  %v = MatMul(%x, %wv) @v\n";
  t += "  %y = ingot::Attention {is_causal=1, scale=0.5, view_dims=[2, 4, 2, 3, 3, 4], q_view=[0, 48, 4, 16], "
       "k_view=[0, 24, 4, 8], v_view=[0, 24, 4, 8], y_view=[0, 48, 4, 16], y_shape=[2, 3, 16]}(%qo, %ko, %v) @att\n";
  return t + "  output %y\n}\n";
}

TEST(PassesFusion, RotaryGqaProjectionsBecomeOneGemmAndOneRotation) {
  for (const std::string q : {std::string("  %q = MatMul(%x, %wq) @q\n"),
                              std::string("  %q = ingot::FusedGemm {kind=\"matmul\"}(%x, %wq, %bq) @q\n")}) {
    SCOPED_TRACE(q);
    const std::string t = rotary_gqa_graph(q);
    PassContext ctx;
    auto g = run_passes(t, one(make_pack_rotary_qkv()), &ctx);
    ASSERT_TRUE(g);
    std::string ops;
    for (const auto& n : g->nodes()) ops += n->op_type() + " ";
    EXPECT_EQ(ops, std::string(q.find("FusedGemm") != std::string::npos ? "FusedGemm" : "MatMul") +
                       " RotaryEmbedding Attention ")
        << ir::to_text(*g);
    const ir::Node* rot = last_of(*g, "RotaryEmbedding");
    ASSERT_NE(rot, nullptr);
    EXPECT_EQ(rot->attrs().get_int("heads", 0), 6);
    EXPECT_EQ(rot->output(0)->shape(), (ir::Shape{2, 3, 6, 4}));
    const ir::Node* att = last_of(*g, "Attention");
    EXPECT_EQ(att->attrs().get_ints("k_view"), (std::vector<int64_t>{16, 72, 4, 24}));
    EXPECT_EQ(att->attrs().get_ints("v_view"), (std::vector<int64_t>{24, 96, 4, 32}));
    expect_equivalent(t, *g);
  }
  // Q and K rotated by different tables: left alone, and said why.
  PassContext ctx;
  auto g = run_passes(rotary_gqa_graph("  %q = MatMul(%x, %wq) @q\n", "%sin2"), one(make_pack_rotary_qkv()), &ctx,
                      /*expect_change=*/false);
  ASSERT_TRUE(g);
  EXPECT_TRUE(has_note(ctx, "different cos/sin"));
  // Q and K rotated as heads of 2 (pairs the packed rotation over the views' heads of 4 would not
  // make): left alone.
  const std::string halves = rotary_gqa_graph("  %q = MatMul(%x, %wq) @q\n", "%sin", /*rope_d=*/2);
  PassContext ctx2;
  auto g2 = run_passes(halves, one(make_pack_rotary_qkv()), &ctx2, /*expect_change=*/false);
  ASSERT_TRUE(g2);
  EXPECT_TRUE(has_note(ctx2, "rotation is not over [B, S, H, D]"));
}

TEST(PassesFusion, ConvTransposeBiasActivationResidualBecomesTransposedFusedConv) {
  // ConvTranspose (group 2, stride 2, output_padding) + per-channel bias + LeakyRelu + residual.
  std::string head = "graph g {\n  opset \"\" 17\n  input %x: f32[1,4,3,3]\n  input %r: f32[1,6,8,8]\n" +
                     init_text("w", {4, 3, 3, 3}, 21) + init_text("bias", {1, 6, 1, 1}, 22);
  std::string t = head +
                  "  %c = ConvTranspose {group=2, output_padding=[1, 1], strides=[2, 2]}(%x, %w) @deconv\n"
                  "  %b = Add(%c, %bias) @add\n  %a = LeakyRelu {alpha=0.1}(%b) @act\n"
                  "  %y = Add(%a, %r) @res\n  output %y\n}\n";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx);
  ASSERT_EQ(g->nodes().size(), 1u) << live_text(*g);
  const ir::Node& n = *g->nodes()[0];
  EXPECT_EQ(n.op_type(), "FusedConv");
  EXPECT_EQ(n.attrs().get_int("transposed", 0), 1);
  EXPECT_EQ(n.attrs().get_string("activation", ""), "LeakyRelu");
  EXPECT_EQ(n.attrs().get_ints("output_padding"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(n.origins(), (std::vector<std::string>{"deconv", "add", "act", "res"}));
  EXPECT_EQ(g->outputs()[0]->shape().to_string(), "[1,6,8,8]");
  expect_equivalent(t, *g);
}

TEST(PassesFusion, EveryActivationFusesAndMatchesReference) {
  struct Case {
    std::string act_lines, activation;
  };
  std::vector<Case> cases = {
      {"  %y = Clip(%b, %lo, %hi) @act\n", "Clip"},
      {"  %y = LeakyRelu {alpha=0.2}(%b) @act\n", "LeakyRelu"},
      {"  %y = Sigmoid(%b) @act\n", "Sigmoid"},
      {"  %y = Tanh(%b) @act\n", "Tanh"},
      {"  %y = HardSwish(%b) @act\n", "HardSwish"},
      {"  %y = HardSigmoid {alpha=0.3, beta=0.4}(%b) @act\n", "HardSigmoid"},
      {"  %y = Gelu(%b) @act\n", "Gelu"},
      {"  %y = Gelu {approximate=\"tanh\"}(%b) @act\n", "GeluTanh"},
      {"  %s = Sigmoid(%b) @sig\n  %y = Mul(%b, %s) @act\n", "Silu"},
  };
  for (const Case& k : cases) {
    std::string t = conv_prefix() + "  opset \"\" 20\n  init %lo: f32[] = [0]\n  init %hi: f32[] = [0.5]\n" +
                    "  %c = Conv {strides=[2, 2]}(%x, %w) @conv\n  %b = Add(%bias, %c) @add\n" + k.act_lines +
                    "  output %y\n}\n";
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->nodes().size(), 1u) << k.activation;
    EXPECT_EQ(g->nodes()[0]->attrs().get_string("activation", ""), k.activation);
    expect_equivalent(t, *g);
  }
}

TEST(PassesFusion, ResidualAddFusesBeforeOrAfterActivation) {
  for (bool before : {true, false}) {
    std::string t = conv_prefix() + "  input %r: f32[2,4,5,5]\n" +
                    "  %c = Conv {pads=[1, 1, 1, 1]}(%x, %w) @conv\n  %b = Add(%c, %bias) @add\n" +
                    (before ? "  %s = Add(%r, %b) @res\n  %y = Relu(%s) @relu\n"
                            : "  %s = Relu(%b) @relu\n  %y = Add(%s, %r) @res\n") +
                    "  output %y\n}\n";
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx);
    ASSERT_EQ(g->nodes().size(), 1u);
    const ir::Node& n = *g->nodes()[0];
    EXPECT_EQ(n.inputs().size(), 4u);
    EXPECT_EQ(n.input(3)->name(), "r");
    EXPECT_EQ(n.attrs().get_int("residual_before_activation", -1), before ? 1 : 0);
    expect_equivalent(t, *g);
  }
}

TEST(PassesFusion, ConvFusionRefusals) {
  // The residual operand broadcasts: not an epilogue (the note says why); bias+Relu still fuse.
  std::string t = conv_prefix() + "  input %r: f32[1,4,5,5]\n" +
                  "  %c = Conv {pads=[1, 1, 1, 1]}(%x, %w) @conv\n  %s = Add(%c, %r) @res\n"
                  "  output %s\n}\n";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx, false);
  expect_same_graph(*g, t);
  EXPECT_TRUE(has_note(ctx, "is not the output shape"));
  // The conv output is read twice: nothing fuses (the raw value is needed).
  std::string t2 = conv_prefix() + "  %c = Conv(%x, %w) @conv\n  %y = Relu(%c) @relu\n  %z = Tanh(%c) @tanh\n"
                                   "  output %y\n  output %z\n}\n";
  PassContext ctx2;
  auto g2 = run_passes(t2, one(make_fuse_conv_gemm()), &ctx2, false);
  expect_same_graph(*g2, t2);
  // Clip with a non-constant bound stays.
  std::string t3 = conv_prefix() + "  input %hi: f32[]\n  %c = Conv(%x, %w) @conv\n  %y = Clip(%c, _, %hi) @clip\n"
                                   "  output %y\n}\n";
  PassContext ctx3;
  auto g3 = run_passes(t3, one(make_fuse_conv_gemm()), &ctx3, false);
  expect_same_graph(*g3, t3);
}

TEST(PassesFusion, MatMulAndGemmEpiloguesBecomeFusedGemm) {
  std::string t = "graph g {\n  opset \"\" 20\n  input %a: f32[2,3,4]\n" + init_text("w", {4, 5}, 21) +
                  init_text("bias", {5}, 22) +
                  "  %m = MatMul(%a, %w) @mm\n  %b = Add(%m, %bias) @add\n  %y = Gelu(%b) @gelu\n  output %y\n}\n";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_conv_gemm()), &ctx);
  expect_same_graph(*g, "graph g {\n  opset \"\" 20\n  opset \"ingot\" 1\n  input %a: f32[2,3,4]\n" +
                            init_text("w", {4, 5}, 21) + init_text("mm_bias", {5}, 22) + R"(
    %y = ingot::FusedGemm {activation="Gelu", kind="matmul"}(%a, %w, %mm_bias) @mm
    output %y
  })");
  expect_equivalent(t, *g);

  std::string t2 = "graph g {\n  opset \"\" 17\n  input %a: f32[4,3]\n  input %r: f32[3,5]\n" +
                   init_text("w", {5, 4}, 23) + init_text("c", {5}, 24) + init_text("bias", {1, 5}, 25) +
                   "  %m = Gemm {alpha=0.5, beta=2.0, transA=1, transB=1}(%a, %w, %c) @gemm\n"
                   "  %b = Add(%m, %bias) @add\n  %s = Add(%b, %r) @res\n  %y = Tanh(%s) @tanh\n  output %y\n}\n";
  PassContext ctx2;
  auto g2 = run_passes(t2, one(make_fuse_conv_gemm()), &ctx2);
  ASSERT_EQ(g2->nodes().size(), 1u);
  EXPECT_EQ(g2->nodes()[0]->op_type(), "FusedGemm");
  EXPECT_EQ(g2->nodes()[0]->origins(), (std::vector<std::string>{"gemm", "add", "res", "tanh"}));
  expect_equivalent(t2, *g2);
}

// ---------------------------------------------------------------------------------------
// fuse_qkv_projection

// A 3-D attention (B 2, S 5, 2 heads of 4) whose Q/K/V are MatMul projections of one input.
std::string qkv_graph(const std::string& k_proj = "") {
  std::string t = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f32[2,5,8]\n  input %m: f32[2,1,1,5]\n";
  int seed = 40;
  for (const char* p : {"q", "k", "v"}) {
    t += init_text(std::string("w") + p, {8, 8}, seed++);
    t += init_text(std::string("b") + p, {8}, seed++);
  }
  t += "  %q = ingot::FusedGemm {kind=\"matmul\"}(%x, %wq, %bq) @q\n";
  t += k_proj.empty() ? "  %k = ingot::FusedGemm {kind=\"matmul\"}(%x, %wk, %bk) @k\n" : k_proj;
  t += "  %v = ingot::FusedGemm {kind=\"matmul\"}(%x, %wv, %bv) @v\n"
       "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2, scale=0.5}(%q, %k, %v, %m) @att\n"
       "  output %y\n}\n";
  return t;
}

TEST(PassesFusion, QkvProjectionsBecomeOneGemmAndPackedAttention) {
  const std::string t = qkv_graph();
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_qkv_projection()), &ctx);
  ASSERT_TRUE(g);
  // The weights side by side on N ([8, 24]), the biases likewise ([24]); one GEMM, one packed attention.
  ASSERT_EQ(g->nodes().size(), 2u);
  const ir::Node& gemm = *g->nodes()[0];
  const ir::Node& att = *g->nodes()[1];
  EXPECT_EQ(gemm.op_type(), "FusedGemm");
  EXPECT_EQ(gemm.origins(), (std::vector<std::string>{"q", "k", "v"}));
  ASSERT_TRUE(gemm.input(1)->initializer() && gemm.input(2)->initializer());
  EXPECT_EQ(gemm.input(1)->initializer()->shape(), (Shape64{8, 24}));
  EXPECT_EQ(gemm.input(2)->initializer()->shape(), (Shape64{24}));
  EXPECT_EQ(gemm.output(0)->shape().to_string(), "[2,5,24]");
  EXPECT_EQ(att.op_type(), "Attention");
  EXPECT_EQ(att.attrs().get_int("qkv_packed", 0), 1);
  EXPECT_EQ(att.input(0), gemm.output(0));
  EXPECT_EQ(att.input(1), nullptr);
  EXPECT_EQ(att.input(2), nullptr);
  EXPECT_EQ(att.input(3)->name(), "m");
  EXPECT_EQ(att.output(0)->name(), "y");
  // Column j of Wk is column 8 + j of the packed weight.
  const Tensor& w = *gemm.input(1)->initializer();
  auto orig = parse(t);
  const Tensor& wk = *orig->find_value("wk")->initializer();
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) ASSERT_EQ(w.get_f64(r * 24 + 8 + c), wk.get_f64(r * 8 + c));
  expect_equivalent(t, *g);
}

// Bias-free projections (T5's) stay plain MatMuls: they pack the same way, with a zero bias.
TEST(PassesFusion, BiasFreeMatMulProjectionsPackToo) {
  std::string t = qkv_graph("  %k = MatMul(%x, %wk) @k\n");
  for (const char* p : {"q", "v"}) {
    const std::string from = std::string("  %") + p + " = ingot::FusedGemm {kind=\"matmul\"}(%x, %w" + p + ", %b" + p + ")";
    t.replace(t.find(from), from.size(), std::string("  %") + p + " = MatMul(%x, %w" + p + ")");
  }
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_qkv_projection()), &ctx);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->nodes()[0]->op_type(), "MatMul");  // no bias, no epilogue: a plain product
  EXPECT_EQ(g->nodes()[0]->input(1)->initializer()->shape(), (Shape64{8, 24}));
  EXPECT_EQ(g->nodes()[1]->attrs().get_int("qkv_packed", 0), 1);
  expect_equivalent(t, *g);
  // A bias-free MatMul beside biased FusedGemms (Whisper's k_proj): packed, K's third of the
  // bias zero.
  const std::string mixed_text = qkv_graph("  %k = MatMul(%x, %wk) @k\n");
  PassContext ctx2;
  auto mixed = run_passes(mixed_text, one(make_fuse_qkv_projection()), &ctx2);
  ASSERT_TRUE(mixed);
  ASSERT_EQ(mixed->nodes().size(), 2u);
  const Tensor& bias = *mixed->nodes()[0]->input(2)->initializer();
  ASSERT_EQ(bias.shape(), (Shape64{24}));
  for (int64_t c = 8; c < 16; ++c) EXPECT_EQ(bias.get_f64(c), 0.0);
  EXPECT_NE(bias.get_f64(0), 0.0);
  expect_equivalent(mixed_text, *mixed);
}

// Quantized projections (fuse_quant_gemm's QuantGemm on one int8 input): packed too, the
// weights [N, K] stacked on N and the weight scales spread per output channel.
std::string quant_qkv_graph(const std::string& q_type, const std::vector<std::string>& w_scales) {
  std::string t = "graph g {\n  opset \"\" 19\n  opset \"ingot\" 1\n  input %x: f32[2,5,8]\n  input %m: f32[2,1,1,5]\n";
  t += "  init %sx: f32[] = [0.01]\n  init %zx: " + q_type + "[] = [0]\n";
  int seed = 60;
  for (int i = 0; i < 3; ++i) {
    const std::string p = std::string(1, "qkv"[i]);
    std::string w = "  init %w" + p + ": " + q_type + "[8,8] = [";
    for (int j = 0; j < 64; ++j)
      w += (j ? ", " : "") + std::to_string(q_type == "i8" ? (j * 37 + seed * 11) % 255 - 127 : ((j * 5 + seed) % 13 - 6) * 0.5);
    t += w + "]\n";
    t += "  init %s" + p + ": f32" + w_scales[i] + "\n";
    t += init_text(std::string("b") + p, {8}, seed++);
  }
  t += "  %xq: " + q_type + "[2,5,8] = QuantizeLinear(%x, %sx, %zx) @quant\n";
  for (const char* p : {"q", "k", "v"})
    t += std::string("  %") + p + " = ingot::QuantGemm {output_dtype=1}(%xq, %w" + p + ", %sx, %s" + p + ", %b" + p +
         ") @" + p + "\n";
  t += "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2, scale=0.5}(%q, %k, %v, %m) @att\n  output %y\n}\n";
  return t;
}

TEST(PassesFusion, QuantizedQkvProjectionsPackWithPerChannelScales) {
  const std::string t = quant_qkv_graph(
      "i8", {"[8] = [0.001, 0.002, 0.003, 0.001, 0.002, 0.003, 0.001, 0.002]", "[] = [0.0015]", "[] = [0.0025]"});
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_qkv_projection()), &ctx);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 3u);  // the QuantizeLinear, one QuantGemm, the packed attention
  const ir::Node& gemm = *g->nodes()[1];
  EXPECT_EQ(gemm.op_type(), "QuantGemm");
  EXPECT_EQ(gemm.input(1)->initializer()->shape(), (Shape64{24, 8}));
  const Tensor& ws = *gemm.input(3)->initializer();
  ASSERT_EQ(ws.shape(), (Shape64{24}));
  EXPECT_FLOAT_EQ(ws.get_f64(1), 0.002f);
  EXPECT_FLOAT_EQ(ws.get_f64(8), 0.0015f);
  EXPECT_FLOAT_EQ(ws.get_f64(23), 0.0025f);
  EXPECT_EQ(g->nodes()[2]->attrs().get_int("qkv_packed", 0), 1);
  expect_equivalent(t, *g);
}

TEST(PassesFusion, QuantizedFp8QkvPackOnlyWithOneWeightScale) {
  PassContext ctx;
  auto g = run_passes(quant_qkv_graph("f8e4m3fn", {"[] = [0.01]", "[] = [0.02]", "[] = [0.01]"}),
                      one(make_fuse_qkv_projection()), &ctx, false);
  EXPECT_TRUE(has_note(ctx, "fp8 weights have different scales"));
  const std::string same = quant_qkv_graph("f8e4m3fn", {"[] = [0.01]", "[] = [0.01]", "[] = [0.01]"});
  PassContext ctx2;
  auto packed = run_passes(same, one(make_fuse_qkv_projection()), &ctx2);
  ASSERT_TRUE(packed);
  ASSERT_EQ(packed->nodes().size(), 3u);
  EXPECT_EQ(packed->nodes()[1]->input(3)->initializer()->numel(), 1);
  expect_equivalent(same, *packed);
}

TEST(PassesFusion, QkvProjectionRefusals) {
  // K projects another input.
  {
    std::string t = qkv_graph("  %k = ingot::FusedGemm {kind=\"matmul\"}(%m2, %wk, %bk) @k\n");
    t.replace(t.find("  input %m:"), 0, "  input %m2: f32[2,5,8]\n");
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_qkv_projection()), &ctx, false);
    EXPECT_TRUE(has_note(ctx, "read different inputs"));
  }
  // K with an activation epilogue.
  {
    PassContext ctx;
    auto g = run_passes(qkv_graph("  %k = ingot::FusedGemm {activation=\"Relu\", kind=\"matmul\"}(%x, %wk, %bk) @k\n"),
                        one(make_fuse_qkv_projection()), &ctx, false);
    EXPECT_TRUE(has_note(ctx, "activation or residual"));
  }
  // Q read by a second node.
  {
    std::string t = qkv_graph();
    t.replace(t.find("  output %y"), 0, "  %z = Relu(%q) @r\n  output %z\n");
    PassContext ctx;
    auto g = run_passes(t, one(make_fuse_qkv_projection()), &ctx, false);
    EXPECT_TRUE(has_note(ctx, "read elsewhere"));
  }
}

// ---------------------------------------------------------------------------------------
// narrow_attention_mask

// transformers' bidirectional mask: And(all-true [1,1,S,1], padding [B,1,1,S]) -> Where(., 0, min)
// gives a [B,1,S,S] bias; `base` replaces the all-true constant, `extra` adds nodes.
std::string mask_graph(const std::string& base = "[1, 1, 1, 1, 1]") {
  return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n"
         "  input %q: f32[2,5,8]\n  input %k: f32[2,5,8]\n  input %v: f32[2,5,8]\n"
         "  init %pad: bool[2,1,1,5] = [1, 1, 1, 0, 0, 1, 1, 1, 1, 0]\n"
         "  init %base: bool[1,1,5,1] = " + base + "\n"
         "  init %zero: f32[] = [0]\n  init %low: f32[] = [-3.4e38]\n"
         "  %both = And(%base, %pad) @and\n"
         "  %bias = Where(%both, %zero, %low) @where\n"
         "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2, scale=0.5}(%q, %k, %v, %bias) @att\n"
         "  output %y\n}\n";
}

TEST(PassesFusion, AttentionMaskIsComputedAtItsNarrowShape) {
  const std::string t = mask_graph();
  PassContext ctx;
  auto g = run_passes(t, one(make_narrow_attention_mask()), &ctx);
  ASSERT_TRUE(g);
  const ir::Node* att = last_of(*g, "Attention");
  ASSERT_NE(att, nullptr);
  const ir::Value* mask = att->input(3);
  EXPECT_EQ(mask->shape().to_string(), "[2,1,1,5]");
  ASSERT_NE(mask->producer(), nullptr);
  EXPECT_EQ(mask->producer()->op_type(), "Where");
  EXPECT_EQ(mask->producer()->input(0)->name(), "pad");
  expect_equivalent(t, *g);

  // An Expand of a float padding bias is dropped the same way.
  const std::string e = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n"
                        "  input %q: f32[2,5,8]\n  input %k: f32[2,5,8]\n  input %v: f32[2,5,8]\n"
                        "  init %pad: f32[2,1,1,5] = [0, 0, -1e4, 0, -1e4, 0, 0, 0, -1e4, -1e4]\n"
                        "  init %shape: i64[4] = [2, 1, 5, 5]\n"
                        "  %wide = Expand(%pad, %shape) @expand\n"
                        "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2}(%q, %k, %v, %wide) @att\n"
                        "  output %y\n}\n";
  PassContext ctx2;
  auto g2 = run_passes(e, one(make_narrow_attention_mask()), &ctx2);
  ASSERT_TRUE(g2);
  for (const auto& n : g2->nodes())
    if (n->op_type() == "Attention") EXPECT_EQ(n->input(3)->name(), "pad");
  expect_equivalent(e, *g2);
}

// Decoders exported at fixed shapes fold their causal mask to a constant: Where(tril, 0, min) or
// the float bias itself. Either becomes is_causal = 1 and no mask input.
std::string causal_graph(const std::string& mask_init, const std::string& bias) {
  return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n"
         "  input %q: f32[2,4,8]\n  input %k: f32[2,4,8]\n  input %v: f32[2,4,8]\n" + mask_init +
         "  init %zero: f32[] = [0]\n  init %low: f32[] = [-inf]\n" + bias +
         "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2, scale=0.5}(%q, %k, %v, %bias) @att\n"
         "  output %y\n}\n";
}

TEST(PassesFusion, CausalConstantMaskBecomesIsCausal) {
  const std::string tril = "[1,0,0,0, 1,1,0,0, 1,1,1,0, 1,1,1,1, 1,0,0,0, 1,1,0,0, 1,1,1,0, 1,1,1,1]";
  const std::string where = causal_graph("  init %tril: bool[2,1,4,4] = " + tril + "\n",
                                         "  %bias = Where(%tril, %zero, %low) @where\n");
  const std::string lo = "-3.4e38";
  const std::string bias_init = "  init %bias: f32[1,1,4,4] = [0," + lo + "," + lo + "," + lo + ", 0,0," + lo + "," +
                                lo + ", 0,0,0," + lo + ", 0,0,0,0]\n";
  for (const std::string& t : {where, causal_graph(bias_init, "")}) {
    PassContext ctx;
    auto g = run_passes(t, one(make_narrow_attention_mask()), &ctx);
    ASSERT_TRUE(g);
    const ir::Node* att = last_of(*g, "Attention");
    ASSERT_NE(att, nullptr);
    EXPECT_EQ(att->attrs().get_int("is_causal", 0), 1);
    EXPECT_EQ(att->inputs().size(), 3u);
    EXPECT_EQ(att->output(0)->name(), "y");
    EXPECT_TRUE(has_note(ctx, "causal triangle"));
    expect_equivalent(t, *g);
  }
  // Not the triangle (one kept key above the diagonal), or a finite penalty: the mask stays.
  std::string off = tril;
  off[3] = '1';
  for (const std::string& t :
       {causal_graph("  init %tril: bool[2,1,4,4] = " + off + "\n", "  %bias = Where(%tril, %zero, %low) @where\n"),
        causal_graph("  init %bias: f32[1,1,4,4] = [0,-100,-100,-100, 0,0,-100,-100, 0,0,0,-100, 0,0,0,0]\n", "")}) {
    PassContext ctx;
    auto g = run_passes(t, one(make_narrow_attention_mask()), &ctx, false);
    ASSERT_TRUE(g);
    EXPECT_FALSE(has_note(ctx, "causal triangle"));
  }
}

TEST(PassesFusion, AttentionMaskNarrowingRefusals) {
  // A causal-like base that is not all true: the And is real work.
  {
    PassContext ctx;
    auto g = run_passes(mask_graph("[1, 1, 0, 1, 1]"), one(make_narrow_attention_mask()), &ctx, false);
  }
  // Narrowing would shorten the last axis (Attention reads a short mask as hidden keys).
  {
    const std::string e = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n"
                          "  input %q: f32[2,5,8]\n  input %k: f32[2,5,8]\n  input %v: f32[2,5,8]\n"
                          "  init %col: f32[2,1,5,1] = [0, 0, -1e4, 0, -1e4, 0, 0, 0, -1e4, -1e4]\n"
                          "  init %shape: i64[4] = [2, 1, 5, 5]\n"
                          "  %wide = Expand(%col, %shape) @expand\n"
                          "  %y = ingot::Attention {kv_num_heads=2, q_num_heads=2}(%q, %k, %v, %wide) @att\n"
                          "  output %y\n}\n";
    PassContext ctx;
    auto g = run_passes(e, one(make_narrow_attention_mask()), &ctx, false);
  }
}

// ---------------------------------------------------------------------------------------
// fuse_pointwise

TEST(PassesFusion, PointwiseChainBecomesOneNode) {
  std::string t = R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    input %y: f32[3]
    input %z: f16[2,3]
    init %k: f32[] = [0.5]
    %a = Mul(%x, %y) @mul
    %b = Add(%a, %k) @add
    %c = Tanh(%b) @tanh
    %zc = Cast {to=1}(%z) @cast
    %d = Sub(%c, %zc) @sub
    %e = Relu(%x) @lone
    output %d
    output %e
  })";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_pointwise()), &ctx);
  ASSERT_EQ(g->nodes().size(), 2u);
  const ir::Node* pw = nullptr;
  for (const auto& n : g->nodes())
    if (n->op_type() == "Pointwise") pw = n.get();
  ASSERT_TRUE(pw);
  EXPECT_EQ(pw->domain(), "ingot");
  std::vector<std::string> ins;
  for (const ir::Value* v : pw->inputs()) ins.push_back(v->name());
  EXPECT_EQ(ins, (std::vector<std::string>{"x", "y", "k", "z"}));
  EXPECT_EQ(pw->output(0)->name(), "d");
  EXPECT_EQ(pw->origins(), (std::vector<std::string>{"mul", "add", "tanh", "cast", "sub"}));
  EXPECT_EQ(pw->attrs().get_graph("body")->nodes().size(), 5u);
  EXPECT_EQ(g->opset("ingot"), 1);
  expect_equivalent(t, *g);
}

TEST(PassesFusion, PointwiseTakesIntegerCastsAndLeavesFloatToInt) {
  // RoBERTa's position ids: ne -> bool->i32 -> i32->i64 ... i64->i32 -> Mul -> i32->i64 -> Add (and an
  // int->float cast for good measure) fuse into one node; a float->int Cast (the reference's
  // saturation rules) stays a step of its own and splits the chain there.
  std::string t = R"(graph g {
    opset "" 17
    input %ids: i64[2,6]
    input %pad: i64[]
    input %f: f32[2,6]
    init %three: i32[] = [3]
    %ne = Not(%eq) @not
    %eq = Equal(%ids, %pad) @eq
    %m32 = Cast {to=6}(%ne) @to_i32
    %m64 = Cast {to=7}(%m32) @to_i64
    %n32 = Cast {to=6}(%m64) @back_to_i32
    %p = Mul(%n32, %three) @mul
    %p64 = Cast {to=7}(%p) @p_to_i64
    %pos = Add(%p64, %pad) @add
    %pf = Cast {to=1}(%pos) @to_f32
    %h = Mul(%pf, %f) @scale
    %fi = Cast {to=7}(%f) @float_to_int
    %q = Add(%fi, %pad) @add2
    output %pos
    output %h
    output %q
  })";
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_pointwise()), &ctx);
  // %pos is an output and read by to_f32, so it is materialised: two Pointwise nodes; the
  // float->int Cast stays, and add2 after it is left alone.
  std::map<std::string, std::vector<std::string>> pointwise;  // output name -> origins
  std::vector<std::string> others;
  for (const auto& n : g->nodes()) {
    if (n->op_type() == "Pointwise") pointwise[n->output(0)->name()] = n->origins();
    else others.push_back(n->name());
  }
  ASSERT_EQ(pointwise.size(), 2u);
  EXPECT_EQ(pointwise["pos"],
            (std::vector<std::string>{"eq", "not", "to_i32", "to_i64", "back_to_i32", "mul", "p_to_i64", "add"}));
  EXPECT_EQ(pointwise["h"], (std::vector<std::string>{"to_f32", "scale"}));
  std::sort(others.begin(), others.end());
  EXPECT_EQ(others, (std::vector<std::string>{"add2", "float_to_int"}));
  expect_equivalent(t, *g);
}

TEST(PassesFusion, PointwiseStopsAtSharedValuesAndLoneOps) {
  // %a is read three times (neg, sqrt, gt): it must be materialised, so Exp stays and the
  // tree rooted at Where takes gt, neg, sqrt and add.
  std::string t = R"(graph g {
    opset "" 17
    input %x: f32[4]
    %a = Exp(%x) @exp
    %b = Neg(%a) @neg
    %c = Sqrt(%a) @sqrt
    %d = Add(%b, %c) @add
    %w = Where(%cond, %x, %d) @where
    %cond = Greater(%x, %a) @gt
    output %w
  })";
  // (%cond is declared after its use on purpose: the parser sorts.)
  PassContext ctx;
  auto g = run_passes(t, one(make_fuse_pointwise()), &ctx);
  ASSERT_EQ(g->nodes().size(), 2u);
  EXPECT_EQ(g->nodes()[0]->op_type(), "Exp");
  EXPECT_EQ(g->nodes()[1]->op_type(), "Pointwise");
  EXPECT_EQ(g->nodes()[1]->origins(), (std::vector<std::string>{"neg", "sqrt", "add", "gt", "where"}));
  expect_equivalent(t, *g);

  std::string lone = "graph g {\n  opset \"\" 17\n  input %x: f32[4]\n  %y = Relu(%x)\n  output %y\n}\n";
  PassContext ctx2;
  auto g2 = run_passes(lone, one(make_fuse_pointwise()), &ctx2, false);
  expect_same_graph(*g2, lone);
}

// ---------------------------------------------------------------------------------------
// The three passes together on a ResNet basic block.

TEST(PassesFusion, ResNetBlockBecomesOneFusedConvPerConv) {
  std::string t = "graph g {\n  opset \"\" 17\n  input %x: f32[1,4,6,6]\n" + init_text("w1", {4, 4, 3, 3}, 31) +
                  init_text("w2", {4, 4, 3, 3}, 32) + init_text("s1", {4}, 33) + init_text("b1", {4}, 34) +
                  init_text("m1", {4}, 35) + init_text("v1", {4}, 36, true) + init_text("s2", {4}, 37) +
                  init_text("b2", {4}, 38) + init_text("m2", {4}, 39) + init_text("v2", {4}, 40, true) +
                  "  %c1 = Conv {pads=[1, 1, 1, 1]}(%x, %w1) @conv1\n"
                  "  %n1 = BatchNormalization(%c1, %s1, %b1, %m1, %v1) @bn1\n"
                  "  %r1 = Relu(%n1) @relu1\n"
                  "  %c2 = Conv {pads=[1, 1, 1, 1]}(%r1, %w2) @conv2\n"
                  "  %n2 = BatchNormalization(%c2, %s2, %b2, %m2, %v2) @bn2\n"
                  "  %a = Add(%n2, %x) @residual\n"
                  "  %y = Relu(%a) @relu2\n"
                  "  output %y\n}\n";
  std::vector<std::unique_ptr<Pass>> ps;
  ps.push_back(make_fold_batchnorm());
  ps.push_back(make_fuse_conv_gemm());
  ps.push_back(make_fuse_pointwise());
  PassContext ctx;
  auto g = run_passes(t, std::move(ps), &ctx);
  ASSERT_EQ(g->nodes().size(), 2u);
  for (const auto& n : g->nodes()) EXPECT_EQ(n->op_type(), "FusedConv");
  EXPECT_EQ(g->nodes()[0]->origins(), (std::vector<std::string>{"conv1", "bn1", "relu1"}));
  EXPECT_EQ(g->nodes()[1]->origins(), (std::vector<std::string>{"conv2", "bn2", "residual", "relu2"}));
  EXPECT_EQ(g->nodes()[1]->input(3)->name(), "x");
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  expect_equivalent(t, *g);
}


// ---- attention_strided_views ----

using testing_util::op_list;

std::vector<std::unique_ptr<Pass>> views_then_dead() {
  std::vector<std::unique_ptr<Pass>> v;
  v.push_back(make_attention_strided_views());
  v.push_back(make_remove_dead_nodes());
  return v;
}

// PyTorch's nn.MultiheadAttention as torchvision's ViT exports it (batch 2, 5 tokens, 2 heads of
// 4): seq-first input, packed in-projection, unflatten / unsqueeze / transpose / squeeze, three
// Gathers, per-tensor head moves, and the output permuted back and flattened for out_proj.
const char* kMhaSeqFirst = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %x: f32[2,5,8]
  init %sh1: i64[4] = [5, 2, 3, 8]
  init %ax0: i64[1] = [0]
  init %ax3: i64[1] = [3]
  init %i0: i64[] = [0]
  init %i1: i64[] = [1]
  init %i2: i64[] = [2]
  init %shh: i64[3] = [5, 4, 4]
  init %sh4: i64[4] = [2, 2, 5, 4]
  init %sho: i64[2] = [10, 8]
)";

std::string mha_graph() {
  std::string t = kMhaSeqFirst;
  t += init_text("w", {8, 24}, 51) + init_text("wo", {8, 8}, 52);
  t += R"(  %xt = Transpose {perm=[1, 0, 2]}(%x) @xt
  %p = MatMul(%xt, %w) @inproj
  %s1 = Reshape(%p, %sh1) @unflatten
  %s2 = Unsqueeze(%s1, %ax0) @unsqueeze
  %s3 = Transpose {perm=[3, 1, 2, 0, 4]}(%s2) @tr
  %s4 = Squeeze(%s3, %ax3) @squeeze
)";
  const char* idx[3] = {"i0", "i1", "i2"};
  const char* n[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    const std::string a = n[i];
    t += "  %" + a + "0 = Gather {axis=0}(%s4, %" + idx[i] + ") @sel_" + a + "\n";
    t += "  %" + a + "1 = Reshape(%" + a + "0, %shh) @view_" + a + "\n";
    t += "  %" + a + "2 = Transpose {perm=[1, 0, 2]}(%" + a + "1) @heads_" + a + "\n";
    t += "  %" + a + "3 = Reshape(%" + a + "2, %sh4) @bhsd_" + a + "\n";
  }
  t += R"(  %a = ingot::Attention {scale=0.5}(%q3, %k3, %v3) @att
  %o1 = Transpose {perm=[2, 0, 1, 3]}(%a) @merge
  %o2 = Reshape(%o1, %sho) @flat
  %y = MatMul(%o2, %wo) @outproj
  output %y
}
)";
  return t;
}

TEST(PassesFusion, MultiheadAttentionLayoutBecomesStridedViews) {
  const std::string t = mha_graph();
  PassContext ctx;
  auto g = run_passes(t, views_then_dead(), &ctx);
  ASSERT_TRUE(g);
  // The seq-first Transpose moved below the in-projection (a row-wise GEMM commutes with it) and
  // went into the views with the rest.
  EXPECT_EQ(op_list(*g), (std::vector<std::string>{"MatMul", "Attention", "MatMul"}));
  const ir::Node* att = g->nodes()[1].get();
  const ir::Value* p = g->nodes()[0]->output(0);
  EXPECT_EQ(g->nodes()[0]->input(0)->name(), "x");
  EXPECT_EQ(att->input(0), p);
  EXPECT_EQ(att->input(1), p);
  EXPECT_EQ(att->input(2), p);
  // The projection now [N=2, L=5, 3*E=24]: q(n, h, l, d) at n*120 + l*24 + h*4 + d; k and v 8 and
  // 16 further.
  EXPECT_EQ(att->attrs().get_ints("view_dims"), (std::vector<int64_t>{2, 2, 2, 5, 5, 4}));
  EXPECT_EQ(att->attrs().get_ints("q_view"), (std::vector<int64_t>{0, 120, 4, 24}));
  EXPECT_EQ(att->attrs().get_ints("k_view"), (std::vector<int64_t>{8, 120, 4, 24}));
  EXPECT_EQ(att->attrs().get_ints("v_view"), (std::vector<int64_t>{16, 120, 4, 24}));
  // Y (n, h, l, d) inside out_proj's [L*N, E] input: l*16 + n*8 + h*4 + d.
  EXPECT_EQ(att->attrs().get_ints("y_view"), (std::vector<int64_t>{0, 8, 4, 16}));
  EXPECT_EQ(att->attrs().get_ints("y_shape"), (std::vector<int64_t>{10, 8}));
  EXPECT_EQ(att->output(0)->name(), "o2");
  // The attention, the seq-first Transpose, the 4 shared split nodes, 3 x 4 per-tensor nodes, the
  // 2 merge nodes.
  EXPECT_EQ(att->origins().size(), 20u);
  expect_equivalent(t, *g);
}

// The full seq-first round trip (batch-first in and out, as ViT's encoder block): the Transpose
// after the out-projection moves above it (through the default pipeline's addmm and reshape
// rules) and into Y's view; no Transpose is left.
TEST(PassesFusion, SeqFirstRoundTripLeavesNoTranspose) {
  std::string t = mha_graph();
  t.replace(t.find("  output %y\n"), 12,
            "  %y3 = Reshape(%y, %back) @unflat\n  %z = Transpose {perm=[1, 0, 2]}(%y3) @batch_first\n  output %z\n");
  t.replace(t.find("  init %sho:"), 0, "  init %back: i64[3] = [5, 2, 8]\n");
  PassContext ctx;
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_simplify_algebra());
  passes.push_back(make_remove_dead_nodes());
  passes.push_back(make_attention_strided_views());
  passes.push_back(make_simplify_algebra());
  passes.push_back(make_remove_dead_nodes());
  auto g = parse(t);
  ASSERT_TRUE(g);
  for (auto& pass : passes) {  // as the PassManager runs them: the graph re-sorted after each
    auto r = pass->run(*g, ctx);
    ASSERT_TRUE(r.ok()) << pass->name() << ": " << r.status().to_string();
    ASSERT_TRUE(g->topological_sort().ok());
  }
  ASSERT_TRUE(ir::verify_graph(*g).ok());
  for (const std::string& op : op_list(*g)) EXPECT_NE(op, "Transpose") << live_text(*g);
  expect_equivalent(t, *g);
}

// timm's Attention (DeiT) and torchvision's Swin: qkv [B, N, 3*C] -> [B, N, 3, H, D] -> permute
// (2, 0, 3, 1, 4) -> unbind (Slice + Squeeze per part); the output merged by Transpose + Reshape.
// And GPT-2's Split of c_attn's output into Q, K, V, each head-split by Reshape + Transpose.
TEST(PassesFusion, UnbindAndSplitLayoutsBecomeStridedViews) {
  const std::string head = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %x: f32[2,5,8]
  init %sh5: i64[5] = [2, 5, 3, 2, 4]
  init %ax0: i64[1] = [0]
  init %ax2: i64[1] = [2]
  init %one: i64[1] = [1]
  init %sh4: i64[4] = [2, 5, 2, 4]
  init %sho: i64[3] = [2, 5, 8]
  init %s0: i64[1] = [0]
  init %s1: i64[1] = [1]
  init %s2: i64[1] = [2]
  init %s3: i64[1] = [3]
  init %sp: i64[3] = [8, 8, 8]
)" + init_text("w", {8, 24}, 61);
  const std::string tail = R"(  %a = ingot::Attention {scale=0.5}(%q, %k, %v) @att
  %o1 = Transpose {perm=[0, 2, 1, 3]}(%a) @merge
  %y = Reshape(%o1, %sho) @flat
  output %y
}
)";
  const std::string unbind = head + R"(  %p = MatMul(%x, %w) @qkv
  %r = Reshape(%p, %sh5) @r
  %t = Transpose {perm=[2, 0, 3, 1, 4]}(%r) @permute
  %q0 = Slice(%t, %s0, %s1, %ax0) @sq
  %q = Squeeze(%q0, %ax0) @uq
  %k0 = Slice(%t, %s1, %s2, %ax0) @sk
  %k = Squeeze(%k0, %ax0) @uk
  %v0 = Slice(%t, %s2, %s3, %ax0) @sv
  %v = Squeeze(%v0, %ax0) @uv
)" + tail;
  const std::string split = head + R"(  %p = MatMul(%x, %w) @qkv
  %qs, %ks, %vs = Split {axis=2}(%p, %sp) @split
  %q1 = Reshape(%qs, %sh4) @rq
  %q = Transpose {perm=[0, 2, 1, 3]}(%q1) @tq
  %k1 = Reshape(%ks, %sh4) @rk
  %k = Transpose {perm=[0, 2, 1, 3]}(%k1) @tk
  %v1 = Reshape(%vs, %sh4) @rv
  %v = Transpose {perm=[0, 2, 1, 3]}(%v1) @tv
)" + tail;
  for (const std::string& t : {unbind, split}) {
    PassContext ctx;
    auto g = run_passes(t, views_then_dead(), &ctx);
    ASSERT_TRUE(g);
    EXPECT_EQ(op_list(*g), (std::vector<std::string>{"MatMul", "Attention"}));
    const ir::Node* att = g->nodes()[1].get();
    // [B=2, N=5, 3*C=24]: q(b, h, n, d) at b*120 + n*24 + h*4 + d.
    EXPECT_EQ(att->attrs().get_ints("q_view"), (std::vector<int64_t>{0, 120, 4, 24}));
    EXPECT_EQ(att->attrs().get_ints("k_view"), (std::vector<int64_t>{8, 120, 4, 24}));
    EXPECT_EQ(att->attrs().get_ints("y_view"), (std::vector<int64_t>{0, 40, 4, 8}));
    EXPECT_EQ(att->output(0)->name(), "y");
    expect_equivalent(t, *g);
  }
}

// Llama's repeat_kv: K and V [B, Hkv, S, D] -> Unsqueeze -> Expand [B, Hkv, rep, S, D] -> Reshape
// [B, Hkv*rep, S, D]; the Expand copies go and the attention reads Hkv heads (GQA).
TEST(PassesFusion, RepeatedKvHeadsBecomeGqaViews) {
  const std::string t = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %q: f32[1,4,6,8]
  input %k0: f32[1,2,6,8]
  input %v0: f32[1,2,6,8]
  init %ax2: i64[1] = [2]
  init %ex: i64[5] = [1, 2, 2, 6, 8]
  init %sh: i64[4] = [1, 4, 6, 8]
  %k1 = Unsqueeze(%k0, %ax2) @uk
  %k2 = Expand(%k1, %ex) @ek
  %k = Reshape(%k2, %sh) @rk
  %v1 = Unsqueeze(%v0, %ax2) @uv
  %v2 = Expand(%v1, %ex) @ev
  %v = Reshape(%v2, %sh) @rv
  %y = ingot::Attention {scale=0.35, is_causal=1}(%q, %k, %v) @att
  output %y
}
)";
  PassContext ctx;
  auto g = run_passes(t, views_then_dead(), &ctx);
  ASSERT_TRUE(g);
  EXPECT_EQ(op_list(*g), (std::vector<std::string>{"Attention"}));
  const ir::Node* att = g->nodes()[0].get();
  EXPECT_EQ(att->attrs().get_ints("view_dims"), (std::vector<int64_t>{1, 4, 2, 6, 6, 8}));
  EXPECT_EQ(att->attrs().get_ints("k_view"), (std::vector<int64_t>{0, 0, 48, 8}));  // a unit batch dim has stride 0
  EXPECT_EQ(att->attrs().get_int("is_causal", 0), 1);
  expect_equivalent(t, *g);
}

// Left alone: an open batch dim (strides are fixed at build time), and an attention whose
// operands are plain [B, H, S, D] tensors with nothing to absorb.
TEST(PassesFusion, StridedViewsRefusals) {
  for (const char* batch : {"N", "2"}) {
    // With an open batch the head split stays (a symbolic dim); with batch 2 it is absorbed.
    const std::string t = std::string(R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %q0: f32[)") + batch + R"(,5,2,4]
  input %k: f32[)" + batch + R"(,2,5,4]
  input %v: f32[)" + batch + R"(,2,5,4]
  %q = Transpose {perm=[0, 2, 1, 3]}(%q0) @tq
  %y = ingot::Attention {scale=0.5}(%q, %k, %v) @att
  output %y
}
)";
    PassContext ctx;
    const bool open = std::string(batch) == "N";
    auto g = run_passes(t, one(make_attention_strided_views()), &ctx, !open);
    ASSERT_TRUE(g);
    EXPECT_EQ(op_list(*g).size(), open ? 2u : 1u);
    if (!open) expect_equivalent(t, *g);
  }
  // Plain [B, H, S, D] operands: nothing to absorb.
  const std::string plain = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %q: f32[2,2,5,4]
  input %k: f32[2,2,5,4]
  input %v: f32[2,2,5,4]
  %y = ingot::Attention {scale=0.5}(%q, %k, %v) @att
  output %y
}
)";
  PassContext ctx;
  auto g = run_passes(plain, one(make_attention_strided_views()), &ctx, false);
  ASSERT_TRUE(g);
}

// The view form's checks: a view past its input, and a y_shape of the wrong size, are errors.
TEST(PassesFusion, StridedViewAttributesAreChecked) {
  const std::string base = R"(graph g {
  opset "" 17
  opset "ingot" 1
  input %p: f32[10,24]
  %y = ingot::Attention {scale=0.5, view_dims=[2, 2, 2, 5, 5, 4], q_view=[0, 24, 4, 48], k_view=[8, 24, 4, 48], v_view=[V, 24, 4, 48], y_view=[0, 8, 4, 16], y_shape=[YS]}(%p, %p, %p) @att
  output %y
}
)";
  auto infer = [&](const std::string& voff, const std::string& ys) -> Status {
    std::string t = base;
    t.replace(t.find("V,"), 1, voff);
    t.replace(t.find("YS"), 2, ys);
    auto g = ir::parse_text(t);
    if (!g.ok()) return g.status();
    return ir::infer_graph(**g);
  };
  EXPECT_TRUE(infer("16", "10, 8").ok());
  EXPECT_NE(infer("17", "10, 8").to_string().find("reaches element 241"), std::string::npos);
  EXPECT_NE(infer("16", "10, 9").to_string().find("B*Hq*Sq*D"), std::string::npos);
}

}  // namespace
}  // namespace ingot::passes
