// Copyright ingot authors. Apache-2.0.
//
// recognize_layernorm / recognize_gelu_silu / recognize_attention: each pattern
// is stated as a before graph and the expected graph (IR text, compared after
// both are typed and printed), refusals leave the graph untouched and say why,
// and the rewritten graph computes the same numbers as the original on the CPU
// reference executor (random non-zero inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/executor.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "onnx/importer.h"
#include "passes/pass.h"
#include "ir_test_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_recognize_layernorm();
std::unique_ptr<Pass> make_recognize_gelu_silu();
std::unique_ptr<Pass> make_recognize_attention();
std::unique_ptr<Pass> make_recognize_softmax();
std::unique_ptr<Pass> make_lower_einsum();
std::unique_ptr<Pass> make_lift_conv1d();
std::unique_ptr<Pass> make_lower_patchify_conv();

namespace {

std::unique_ptr<ir::Graph> typed(const std::string &text) {
  return testing_util::parse_ir(text);
}

/// Node op types in order, "domain::" prefixed outside ai.onnx.
std::string ops_of(const ir::Graph &g) {
  std::string s;
  for (const auto &n : g.nodes())
    s += (n->domain().empty() ? "" : n->domain() + "::") + n->op_type() + " ";
  return s;
}

struct Outcome {
  bool changed = false;
  std::unique_ptr<ir::Graph> graph;
  PassContext ctx;
};

Outcome run_pass(Pass &pass, const std::string &text) {
  Outcome o;
  o.graph = typed(text);
  if (!o.graph)
    return o;
  auto r = pass.run(*o.graph, o.ctx);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  o.changed = r.ok() && *r;
  Status s =
      ir::infer_graph(*o.graph); // the rewritten graph must still type-check
  EXPECT_TRUE(s.ok()) << s.to_string() << "\n" << ir::to_text(*o.graph);
  return o;
}

/// Runs the pass and compares the result with `expected` (parsed, typed and
/// printed).
void expect_rewrite(Pass &pass, const std::string &before,
                    const std::string &expected) {
  Outcome o = run_pass(pass, before);
  ASSERT_TRUE(o.graph);
  EXPECT_TRUE(o.changed);
  auto want = typed(expected);
  ASSERT_TRUE(want);
  EXPECT_EQ(ir::to_text(*o.graph), ir::to_text(*want));
}

void expect_refused(Pass &pass, const std::string &before,
                    const std::string &why) {
  Outcome o = run_pass(pass, before);
  ASSERT_TRUE(o.graph);
  EXPECT_FALSE(o.changed);
  EXPECT_EQ(ir::to_text(*o.graph), ir::to_text(*typed(before)));
  if (!why.empty()) {
    std::string all;
    for (const auto &n : o.ctx.notes())
      all += n + "\n";
    EXPECT_NE(all.find(why), std::string::npos) << all;
  }
}

/// Random non-zero inputs for every graph input (floats in ±[0.1, 2], bools at
/// random).
std::map<std::string, Tensor> random_inputs(const ir::Graph &g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.1, 2.0);
  std::map<std::string, Tensor> in;
  for (const ir::Value *v : g.inputs()) {
    Shape64 shape;
    for (const ir::Dim &d : v->shape().dims())
      shape.push_back(d.is_known() ? d.value() : 3);  // a symbolic dim (a dynamic batch): 3
    Tensor t = Tensor::zeros(v->dtype(), shape).value();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (v->dtype() == DataType::kBool) {
        t.set_f64(i, (rng() % 4) != 0 || i % 5 == 0
                         ? 1.0
                         : 0.0); // no fully masked row
      } else {
        t.set_f64(i, (rng() % 2 ? 1.0 : -1.0) * mag(rng));
      }
    }
    in.emplace(v->name(), std::move(t));
  }
  return in;
}

/// The pass changes the graph into one computing the same outputs (max abs diff
/// <= tol).
void expect_same_numbers(Pass &pass, const std::string &text,
                         const std::string &want_ops, double tol = 1e-5) {
  auto before = typed(text);
  ASSERT_TRUE(before);
  Outcome o = run_pass(pass, text);
  ASSERT_TRUE(o.changed) << ir::to_text(*o.graph);
  EXPECT_EQ(ops_of(*o.graph), want_ops) << ir::to_text(*o.graph);
  auto inputs = random_inputs(*before, 7);
  cpu::Executor e1, e2;
  auto r1 = e1.run(*before, inputs);
  auto r2 = e2.run(*o.graph, inputs);
  ASSERT_TRUE(r1.ok()) << r1.status().to_string();
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  ASSERT_EQ(r1->size(), r2->size());
  for (size_t k = 0; k < r1->size(); ++k) {
    const Tensor &a = (*r1)[k];
    const Tensor &b = (*r2)[k];
    ASSERT_EQ(a.shape(), b.shape());
    double worst = 0, norm = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      worst = std::max(worst, std::fabs(a.get_f64(i) - b.get_f64(i)));
      norm = std::max(norm, std::fabs(a.get_f64(i)));
    }
    EXPECT_LE(worst, tol) << "output " << k;
    EXPECT_GT(norm, 1e-3) << "output " << k
                          << " is all zeros: the test proves nothing";
  }
}

// ---------------------------------------------------------------- LayerNorm /
// RMSNorm

constexpr const char *kLayerNorm17 = R"(graph g {
  opset "" 17
  input %x: f32[2,3,8]
  init %eps: f32[] = [1e-05]
  init %two: f32[] = [2]
  init %gamma: f32[8] = [1, 2, 0.5, -1, 1.5, 0.25, 3, -2]
  init %beta: f32[8] = [0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4]
  %m = ReduceMean {axes=[-1]}(%x)
  %d = Sub(%x, %m)
  %p = Pow(%d, %two)
  %v = ReduceMean {axes=[-1]}(%p)
  %ve = Add(%v, %eps)
  %s = Sqrt(%ve) @ln
  %n = Div(%d, %s)
  %y = Mul(%gamma, %n)
  %z = Add(%y, %beta)
  %out = Relu(%z)
  output %out
})";

TEST(PassesPattern, LayerNormDecomposedBecomesLayerNormalization) {
  auto pass = make_recognize_layernorm();
  expect_rewrite(*pass, kLayerNorm17, R"(graph g {
    opset "" 17
    input %x: f32[2,3,8]
    init %eps: f32[] = [1e-05]
    init %two: f32[] = [2]
    init %gamma: f32[8] = [1, 2, 0.5, -1, 1.5, 0.25, 3, -2]
    init %beta: f32[8] = [0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4]
    %z = LayerNormalization {axis=-1, epsilon=1e-05}(%x, %gamma, %beta) @ln/LayerNormalization
    %out = Relu(%z)
    output %out
  })");
  expect_same_numbers(*pass, kLayerNorm17, "LayerNormalization Relu ");
}

TEST(PassesPattern, LayerNormOldOpsetReciprocalFormBecomesIngotOp) {
  // opset 13: ReduceMean takes axes as an attribute; Mul(d, d) and Reciprocal +
  // Mul; two trailing axes; no beta; the output is a graph output (its name
  // must survive).
  const std::string text = R"(graph g {
    opset "" 13
    input %x: f32[2,3,4]
    init %eps: f32[1] = [0.001]
    init %gamma: f32[3,4] = [1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6]
    %m = ReduceMean {axes=[1, 2]}(%x)
    %d = Sub(%x, %m)
    %p = Mul(%d, %d)
    %v = ReduceMean {axes=[-2, -1]}(%p)
    %ve = Add(%eps, %v)
    %s = Sqrt(%ve)
    %r = Reciprocal(%s)
    %n = Mul(%r, %d)
    %y = Mul(%n, %gamma)
    output %y
  })";
  auto pass = make_recognize_layernorm();
  Outcome o = run_pass(*pass, text);
  ASSERT_TRUE(o.changed);
  ASSERT_EQ(o.graph->nodes().size(), 1u);
  const ir::Node &ln = *o.graph->nodes()[0];
  EXPECT_EQ(ln.domain(), kIngotDomain);
  EXPECT_EQ(ln.attrs().get_int("axis", 0), -2);
  EXPECT_FLOAT_EQ(ln.attrs().get_float("epsilon", 0), 0.001f);
  EXPECT_EQ(ln.origins().size(), 9u); // every absorbed node is recorded
  EXPECT_EQ(o.graph->outputs()[0]->name(), "y");
  expect_same_numbers(*pass, text, "ingot::LayerNormalization ");
}

TEST(PassesPattern, LayerNormOpset18AxesInputWithoutGammaGetsUnitScale) {
  const std::string text = R"(graph g {
    opset "" 18
    input %x: f32[4,6]
    init %ax: i64[1] = [1]
    init %eps: f32[] = [1e-05]
    init %two: f32[] = [2]
    %m = ReduceMean(%x, %ax)
    %d = Sub(%x, %m)
    %p = Pow(%d, %two)
    %v = ReduceMean(%p, %ax)
    %ve = Add(%v, %eps)
    %s = Sqrt(%ve)
    %n = Div(%d, %s)
    output %n
  })";
  auto pass = make_recognize_layernorm();
  expect_same_numbers(*pass, text, "LayerNormalization ");
}

TEST(PassesPattern, LayerNormRefusesNonLastAxis) {
  auto pass = make_recognize_layernorm();
  expect_refused(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,3,8]
    init %eps: f32[] = [1e-05]
    init %two: f32[] = [2]
    %m = ReduceMean {axes=[1]}(%x)
    %d = Sub(%x, %m)
    %p = Pow(%d, %two)
    %v = ReduceMean {axes=[1]}(%p)
    %ve = Add(%v, %eps)
    %s = Sqrt(%ve) @ln
    %n = Div(%d, %s)
    output %n
  })",
                 "not over the trailing axes");
}

TEST(PassesPattern, LayerNormRefusesVarianceReadElsewhere) {
  auto pass = make_recognize_layernorm();
  expect_refused(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,8]
    init %eps: f32[] = [1e-05]
    init %two: f32[] = [2]
    %m = ReduceMean {axes=[-1]}(%x)
    %d = Sub(%x, %m)
    %p = Pow(%d, %two)
    %v = ReduceMean {axes=[-1]}(%p)
    %ve = Add(%v, %eps)
    %s = Sqrt(%ve)
    %n = Div(%d, %s)
    output %n
    output %v
  })",
                 "read outside the pattern");
}

TEST(PassesPattern, LayerNormRefusesGammaBroadcastingOverBatch) {
  // gamma [2,1,8] varies along the batch axis: LayerNormalization's scale
  // cannot.
  auto pass = make_recognize_layernorm();
  Outcome o = run_pass(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,3,8]
    init %eps: f32[] = [1e-05]
    init %two: f32[] = [2]
    init %gamma: f32[2,1,1] = [2, 3]
    %m = ReduceMean {axes=[-1]}(%x)
    %d = Sub(%x, %m)
    %p = Pow(%d, %two)
    %v = ReduceMean {axes=[-1]}(%p)
    %ve = Add(%v, %eps)
    %s = Sqrt(%ve)
    %n = Div(%d, %s)
    %y = Mul(%n, %gamma)
    output %y
  })");
  // The norm itself is still fused; the gamma multiply stays outside.
  EXPECT_EQ(ops_of(*o.graph), "LayerNormalization Mul ");
}

constexpr const char *kRms = R"(graph g {
  opset "" 18
  input %x: f32[3,5,16]
  init %ax: i64[1] = [-1]
  init %eps: f32[] = [1e-06]
  init %one: f32[] = [1]
  init %w: f32[16] = <16 values>
  %p = Mul(%x, %x)
  %v = ReduceMean(%p, %ax)
  %ve = Add(%v, %eps)
  %s = Sqrt(%ve)
  %r = Div(%one, %s)
  %n = Mul(%x, %r)
  %y = Mul(%n, %w)
  output %y
})";

std::string rms_text(int opset) {
  std::string t = kRms;
  std::string w = "[";
  for (int i = 0; i < 16; ++i)
    w += (i ? ", " : "") + std::to_string(0.25 * (i - 7));
  t.replace(t.find("<16 values>"), 11, w + "]");
  t.replace(t.find("18"), 2, std::to_string(opset));
  return t;
}

TEST(PassesPattern, RmsNormBecomesIngotOpBeforeOpset23AndOnnxOpAfter) {
  auto pass = make_recognize_layernorm();
  expect_same_numbers(*pass, rms_text(18), "ingot::RMSNormalization ");
  expect_same_numbers(*pass, rms_text(23), "RMSNormalization ");
}

TEST(PassesPattern, RmsNormPowDivForm) {
  auto pass = make_recognize_layernorm();
  expect_rewrite(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,8]
    init %eps: f32[] = [1e-06]
    init %two: f32[] = [2]
    %p = Pow(%x, %two)
    %v = ReduceMean {axes=[-1]}(%p)
    %ve = Add(%v, %eps)
    %s = Sqrt(%ve) @rms
    %n = Div(%x, %s)
    output %n
  })",
                 R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %x: f32[2,8]
    init %eps: f32[] = [1e-06]
    init %two: f32[] = [2]
    init %n.scale: f32[1] = [1]
    %n = ingot::RMSNormalization {axis=-1, epsilon=9.99999997e-07}(%x, %n.scale) @rms/RMSNormalization
    output %n
  })");
}

// ---------------------------------------------------------------- GELU / SiLU
// / HardSwish

std::string gelu_erf(int opset, const std::string &tail,
                     const std::string &scale_node) {
  return "graph g {\n  opset \"\" " + std::to_string(opset) + R"(
  input %x: f32[2,3,7]
  init %sqrt2: f32[] = [1.41421354]
  init %rsqrt2: f32[] = [0.707106769]
  init %one: f32[] = [1]
  init %half: f32[] = [0.5]
)" + scale_node +
         R"(
  %e = Erf(%u) @gelu
  %a = Add(%one, %e)
)" + tail +
         R"(
  output %y
})";
}

TEST(PassesPattern, GeluErfFormsBecomeGelu) {
  auto pass = make_recognize_gelu_silu();
  const std::string div = "  %u = Div(%x, %sqrt2)";
  const std::string mul = "  %u = Mul(%rsqrt2, %x)";
  const std::string tails[] = {
      "  %xa = Mul(%x, %a)\n  %y = Mul(%xa, %half)", // (x·a)·0.5
      "  %hx = Mul(%half, %x)\n  %y = Mul(%a, %hx)", // (0.5·x)·a
      "  %ah = Mul(%a, %half)\n  %y = Mul(%ah, %x)", // x·(a·0.5)
  };
  for (const std::string &t : tails) {
    SCOPED_TRACE(t);
    expect_same_numbers(*pass, gelu_erf(20, t, div), "Gelu ");
    expect_same_numbers(*pass, gelu_erf(17, t, mul), "ingot::Gelu ");
  }
  expect_rewrite(*pass, gelu_erf(20, tails[0], div), R"(graph g {
    opset "" 20
    input %x: f32[2,3,7]
    init %sqrt2: f32[] = [1.41421354]
    init %rsqrt2: f32[] = [0.707106769]
    init %one: f32[] = [1]
    init %half: f32[] = [0.5]
    %y = Gelu {approximate="none"}(%x) @gelu/Gelu
    output %y
  })");
}

TEST(PassesPattern, GeluRefusesAWrongCoefficient) {
  auto pass = make_recognize_gelu_silu();
  std::string t = gelu_erf(20, "  %xa = Mul(%x, %a)\n  %y = Mul(%xa, %half)",
                           "  %u = Div(%x, %sqrt2)");
  t.replace(t.find("1.41421354"), 10, "1.5");
  expect_refused(*pass, t, "");
}

TEST(PassesPattern, GeluTanhFormBecomesApproximateGelu) {
  const std::string text = R"(graph g {
    opset "" 18
    input %x: f32[4,9]
    init %three: f32[] = [3]
    init %c: f32[] = [0.0447149985]
    init %k: f32[] = [0.797884583]
    init %one: f32[] = [1]
    init %half: f32[] = [0.5]
    %x3 = Pow(%x, %three)
    %cx3 = Mul(%c, %x3)
    %in = Add(%x, %cx3)
    %s = Mul(%in, %k)
    %t = Tanh(%s)
    %a = Add(%t, %one)
    %xa = Mul(%x, %a)
    %y = Mul(%xa, %half)
    output %y
  })";
  auto pass = make_recognize_gelu_silu();
  expect_same_numbers(*pass, text, "ingot::Gelu ");
  Outcome o = run_pass(*pass, text);
  EXPECT_EQ(o.graph->nodes()[0]->attrs().get_string("approximate", ""), "tanh");
  // x³ as Mul(Mul(x, x), x) works too.
  std::string muls = text;
  muls.replace(muls.find("%x3 = Pow(%x, %three)"), 21,
               "%xx = Mul(%x, %x)\n    %x3 = Mul(%xx, %x)");
  expect_same_numbers(*pass, muls, "ingot::Gelu ");
}

TEST(PassesPattern, SiluAndHardSwish) {
  auto pass = make_recognize_gelu_silu();
  expect_rewrite(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,5]
    %s = Sigmoid(%x) @act
    %y = Mul(%s, %x)
    output %y
  })",
                 R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %x: f32[2,5]
    %y = ingot::Silu(%x) @act/Silu
    output %y
  })");
  const std::string hs = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4,4]
    %s = HardSigmoid {alpha=0.166666672, beta=0.5}(%x)
    %y = Mul(%x, %s)
    output %y
  })";
  expect_same_numbers(*pass, hs, "HardSwish ");
  // HardSigmoid's default alpha (0.2) is not HardSwish.
  expect_refused(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,5]
    %s = HardSigmoid(%x) @hs
    %y = Mul(%x, %s)
    output %y
  })",
                 "not HardSwish");
}

TEST(PassesPattern, SiluRefusesSigmoidReadElsewhere) {
  auto pass = make_recognize_gelu_silu();
  expect_refused(*pass, R"(graph g {
    opset "" 17
    input %x: f32[2,5]
    %s = Sigmoid(%x)
    %y = Mul(%s, %x)
    output %y
    output %s
  })",
                 "");
}

// ---------------------------------------------------------------- Attention

// ---------------------------------------------------------------- Softmax

std::string softmax_text(int opset, const std::string &axes_attr,
                         const std::string &extra = "") {
  return "graph g {\n  opset \"\" " + std::to_string(opset) + R"(
  input %x: f32[2,3,6]
  %m = ReduceMax {)" + axes_attr + R"(}(%x)
  %d = Sub(%x, %m)
  %e = Exp(%d)
  %s = ReduceSum {)" + axes_attr + R"(}(%e)
  %y = Div(%e, %s) @sm
)" + extra + "  output %y\n}";
}

TEST(PassesPattern, SoftmaxStabilizedAndPlainBecomeSoftmax) {
  auto pass = make_recognize_softmax();
  expect_rewrite(*pass, softmax_text(11, "axes=[-1]"), R"(graph g {
    opset "" 11
    input %x: f32[2,3,6]
    %y = Softmax {axis=2}(%x) @sm
    output %y
  })");
  expect_same_numbers(*pass, softmax_text(11, "axes=[2]"), "Softmax ");
  // Opset 13+: any single axis; ReduceSum axes from an input, ReduceMax (< 18) from the attribute.
  const std::string mid = R"(graph g {
    opset "" 13
    input %x: f32[2,3,6]
    init %ax: i64[1] = [1]
    %m = ReduceMax {axes=[1]}(%x)
    %d = Sub(%x, %m)
    %e = Exp(%d)
    %s = ReduceSum(%e, %ax)
    %y = Div(%e, %s)
    output %y
  })";
  expect_same_numbers(*pass, mid, "Softmax ");
  // Unstabilized: Exp(x) / ReduceSum(Exp(x)).
  expect_same_numbers(*pass, R"(graph g {
    opset "" 18
    input %x: f32[2,3,6]
    init %ax: i64[1] = [-1]
    %e = Exp(%x)
    %s = ReduceSum(%e, %ax)
    %y = Div(%e, %s)
    output %y
  })", "Softmax ");
}

TEST(PassesPattern, LogSoftmaxStabilizedBecomesLogSoftmax) {
  auto pass = make_recognize_softmax();
  const std::string text = R"(graph g {
    opset "" 17
    input %x: f32[4,5]
    init %ax: i64[1] = [1]
    %m = ReduceMax {axes=[1]}(%x)
    %d = Sub(%x, %m)
    %e = Exp(%d)
    %s = ReduceSum(%e, %ax)
    %l = Log(%s)
    %y = Sub(%d, %l)
    output %y
  })";
  expect_rewrite(*pass, text, R"(graph g {
    opset "" 17
    input %x: f32[4,5]
    init %ax: i64[1] = [1]
    %y = LogSoftmax {axis=1}(%x)
    output %y
  })");
  expect_same_numbers(*pass, text, "LogSoftmax ");
}

TEST(PassesPattern, SoftmaxRefusals) {
  auto pass = make_recognize_softmax();
  expect_refused(*pass, softmax_text(12, "axes=[1, 2]"), "exactly one axis");
  // keepdims=0 over axis 0 still broadcasts ([3,6] against [2,3,6]) but is not softmax.
  expect_refused(*pass, softmax_text(12, "axes=[0], keepdims=0"), "keepdims=0");
  expect_refused(*pass, softmax_text(11, "axes=[1]"), "coerces to 2-D");
  expect_refused(*pass, softmax_text(12, "axes=[-1]", "  output %s\n"),
                 "read outside the pattern");
}

// ---------------------------------------------------------------- Attention

/// BERT-style self-attention on x [B=2, S=5, 16] with 2 heads of 8: head split
/// by Reshape → Transpose (K transposed straight to [B,H,D,S]), scores / √8,
/// additive mask [B,1,1,S], Softmax, · V, head merge.
std::string bert_attention(const std::string &mask_lines,
                           const std::string &softmax_in) {
  return R"(graph g {
  opset "" 17
  input %q: f32[2,5,16]
  input %k: f32[2,5,16]
  input %v: f32[2,5,16]
  input %mask: f32[2,1,1,5]
  init %split: i64[4] = [2, 5, 2, 8]
  init %merge: i64[3] = [2, 5, 16]
  init %sqrtd: f32[] = [2.82842708]
  %q4 = Reshape(%q, %split)
  %qh = Transpose {perm=[0, 2, 1, 3]}(%q4)
  %k4 = Reshape(%k, %split)
  %kt = Transpose {perm=[0, 2, 3, 1]}(%k4)
  %v4 = Reshape(%v, %split)
  %vh = Transpose {perm=[0, 2, 1, 3]}(%v4)
  %qk = MatMul(%qh, %kt)
  %sc = Div(%qk, %sqrtd)
)" + mask_lines +
         "\n  %p = Softmax {axis=-1}(" + softmax_in + R"() @attn
  %ctx = MatMul(%p, %vh)
  %ct = Transpose {perm=[0, 2, 1, 3]}(%ctx)
  %out = Reshape(%ct, %merge)
  output %out
})";
}

TEST(PassesPattern, AttentionWithAdditiveMaskAbsorbsHeadSplitAndMerge) {
  auto pass = make_recognize_attention();
  const std::string text = bert_attention("  %sm = Add(%mask, %sc)", "%sm");
  expect_rewrite(*pass, text, R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %q: f32[2,5,16]
    input %k: f32[2,5,16]
    input %v: f32[2,5,16]
    input %mask: f32[2,1,1,5]
    init %split: i64[4] = [2, 5, 2, 8]
    init %merge: i64[3] = [2, 5, 16]
    init %sqrtd: f32[] = [2.82842708]
    %out = ingot::Attention {is_causal=0, kv_num_heads=2, q_num_heads=2, scale=0.353553385}(%q, %k, %v, %mask) @attn/Attention
    output %out
  })");
  expect_same_numbers(*pass, text, "ingot::Attention ");
  // No mask at all.
  expect_same_numbers(*pass, bert_attention("", "%sc"), "ingot::Attention ");
  // K split like Q and V, then transposed to K^T by its own Transpose.
  std::string kt2 = bert_attention("", "%sc");
  const std::string kt_line = "%kt = Transpose {perm=[0, 2, 3, 1]}(%k4)";
  kt2.replace(kt2.find(kt_line), kt_line.size(),
              "%kh = Transpose {perm=[0, 2, 1, 3]}(%k4)\n  %kt = Transpose {perm=[0, 1, 3, 2]}(%kh)");
  expect_same_numbers(*pass, kt2, "ingot::Attention ");
}

// T5: unscaled scores plus the relative-position bias [1, H, S, S], then the padding mask: one
// Attention whose mask is the sum of the two.
TEST(PassesPattern, AttentionOfT5SumsPositionBiasAndPaddingMask) {
  auto pass = make_recognize_attention();
  std::string text = bert_attention("  %sb = Add(%qk, %pos)\n  %sm = Add(%sb, %mask)", "%sm");
  text.replace(text.find("  init %split"), 0, "  input %pos: f32[1,2,5,5]\n");
  text.replace(text.find("  %sc = Div(%qk, %sqrtd)\n"), std::string("  %sc = Div(%qk, %sqrtd)\n").size(), "");
  expect_same_numbers(*pass, text, "Add ingot::Attention ");
  Outcome o = run_pass(*pass, text);
  const ir::Node &att = *o.graph->nodes().back();
  EXPECT_FLOAT_EQ(att.attrs().get_float("scale", 0), 1.0f);
  ASSERT_EQ(att.inputs().size(), 4u);
  EXPECT_EQ(att.input(3)->shape(), ir::Shape({ir::Dim(2), ir::Dim(2), ir::Dim(5), ir::Dim(5)}));
}

// PyTorch's exported scaled_dot_product_attention: the scale split over Q and K^T as two Muls
// by √scale, and Where(IsNaN(p), 0, p) after the Softmax (fully masked rows become zeros, as
// Attention's do).
TEST(PassesPattern, AttentionOfTheTorchSdpaExportWithItsNanGuard) {
  auto pass = make_recognize_attention();
  std::string text = bert_attention("  %sm = Add(%sc, %mask)", "%sm");
  auto swap = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
  };
  swap("  %qk = MatMul(%qh, %kt)\n  %sc = Div(%qk, %sqrtd)",
       "  %qs = Mul(%qh, %rs)\n  %ks = Mul(%kt, %rs)\n  %sc = MatMul(%qs, %ks)");
  swap("  init %sqrtd: f32[] = [2.82842708]", "  init %rs: f32[] = [0.594603539]\n  init %zero: f32[] = [0]");
  swap("  %ctx = MatMul(%p, %vh)", "  %nan = IsNaN(%p)\n  %pz = Where(%nan, %zero, %p)\n  %ctx = MatMul(%pz, %vh)");
  expect_same_numbers(*pass, text, "ingot::Attention ");
  // A guard that fills with something else than 0 is not Attention's semantics: left alone.
  std::string other = text;
  other.replace(other.find("[0]\n"), 4, "[1]\n");
  Outcome o = run_pass(*pass, other);
  ASSERT_TRUE(o.graph);
  EXPECT_FALSE(o.changed) << ir::to_text(*o.graph);
}

TEST(PassesPattern, AttentionKeeps4DFormWhenTheHeadMergeDoesNotMatch) {
  auto pass = make_recognize_attention();
  // The per-head context is itself an output: no merge to absorb.
  std::string t = bert_attention("  %sm = Add(%mask, %sc)", "%sm");
  t.replace(t.find("  output %out"), 0, "  output %ctx\n");
  t.replace(t.find("  %ct = Transpose"), 0, "");
  Outcome o = run_pass(*pass, t);
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(ops_of(*o.graph),
            "Reshape Transpose Reshape Reshape Transpose Transpose "
            "ingot::Attention Transpose Reshape ");
  // A merge with another perm is not the inverse of the split.
  std::string t2 = bert_attention("", "%sc");
  const std::string ct = "%ct = Transpose {perm=[0, 2, 1, 3]}", mg = "= [2, 5, 16]";
  t2.replace(t2.find(ct), ct.size(), "%ct = Transpose {perm=[0, 1, 2, 3]}");
  t2.replace(t2.find(mg), mg.size(), "= [2, 2, 40]");
  expect_same_numbers(*pass, t2,
                      "Reshape Transpose Reshape Reshape Transpose Transpose "
                      "ingot::Attention Transpose Reshape ");
}

TEST(PassesPattern,
     AttentionWhereMaskAndSeparateQKScalesAndExplicitKTranspose) {
  const std::string text = R"(graph g {
    opset "" 17
    input %q: f32[1,2,4,8]
    input %k: f32[1,2,6,8]
    input %v: f32[1,2,6,3]
    input %keep: bool[1,1,4,6]
    init %c: f32[] = [0.594603539]
    init %ninf: f32[] = [-inf]
    %qs = Mul(%q, %c)
    %kt = Transpose {perm=[0, 1, 3, 2]}(%k)
    %ks = Mul(%c, %kt)
    %qk = MatMul(%qs, %ks)
    %sm = Where(%keep, %qk, %ninf)
    %p = Softmax {axis=3}(%sm)
    %out = MatMul(%p, %v)
    output %out
  })";
  auto pass = make_recognize_attention();
  expect_same_numbers(*pass, text, "Transpose ingot::Attention ");
  Outcome o = run_pass(*pass, text);
  const ir::Node &att = *o.graph->nodes().back();
  EXPECT_NEAR(att.attrs().get_float("scale", 0), 0.594603539 * 0.594603539,
              1e-6);
  // Transpose(Transpose(k, [0,1,3,2]), [0,1,3,2]) composed back into the
  // identity perm.
  EXPECT_EQ(o.graph->nodes()[0]->attrs().get_ints("perm"),
            (std::vector<int64_t>{0, 1, 2, 3}));
}

/// Swin's shifted-window attention on q/k/v [B·P, H=2, N=4, D=8] with P = 2 windows per image:
/// scaled scores plus a relative-position bias [H, N, N], split to [B, P, H, N, N], plus the
/// window mask [1, P, 1, N, N] (0 / -100 as torchvision writes it), merged back, Softmax, · V.
std::string swin_window_attention(int64_t images) {
  const std::string bp = std::to_string(images * 2), b = std::to_string(images);
  return R"(graph g {
  opset "" 17
  input %q: f32[)" + bp + R"(,2,4,8]
  input %k: f32[)" + bp + R"(,2,4,8]
  input %v: f32[)" + bp + R"(,2,4,8]
  init %scale: f32[] = [0.353553385]
  init %bias: f32[2,4,4] = [0.1, -0.2, 0.3, 0.05, 0.4, -0.1, 0.2, 0.3, -0.3, 0.1, 0.0, 0.2, 0.25, -0.15, 0.35, -0.05, -0.1, 0.2, 0.15, -0.25, 0.3, 0.1, -0.2, 0.05, 0.2, -0.3, 0.1, 0.4, -0.05, 0.15, 0.25, -0.35]
  init %wmask: f32[1,2,1,4,4] = [0, 0, -100, -100, 0, 0, -100, -100, -100, -100, 0, 0, -100, -100, 0, 0, 0, -100, 0, -100, -100, 0, -100, 0, 0, -100, 0, -100, -100, 0, -100, 0]
  init %split: i64[5] = [)" + b + R"(, 2, 2, 4, 4]
  init %merge: i64[4] = [)" + bp + R"(, 2, 4, 4]
  %qs = Mul(%q, %scale)
  %kt = Transpose {perm=[0, 1, 3, 2]}(%k)
  %qk = MatMul(%qs, %kt)
  %sb = Add(%qk, %bias)
  %s5 = Reshape(%sb, %split)
  %sm5 = Add(%s5, %wmask)
  %sm = Reshape(%sm5, %merge)
  %p = Softmax {axis=-1}(%sm) @attn
  %out = MatMul(%p, %v)
  output %out
})";
}

TEST(PassesPattern, AttentionOfSwinShiftedWindowsReadsTheWindowMaskPeriodically) {
  auto pass = make_recognize_attention();
  // Two images: batch entry b·2 + w reads window w's mask (mask_batch_period = 2); the bias and
  // the window mask are summed into one initializer.
  expect_same_numbers(*pass, swin_window_attention(2), "Transpose ingot::Attention ");
  Outcome o = run_pass(*pass, swin_window_attention(2));
  const ir::Node &att = *o.graph->nodes().back();
  EXPECT_EQ(att.attrs().get_int("mask_batch_period", 0), 2);
  EXPECT_NEAR(att.attrs().get_float("scale", 0), 0.353553385, 1e-7);
  ASSERT_EQ(att.inputs().size(), 4u);
  EXPECT_EQ(att.input(3)->shape(), ir::Shape({ir::Dim(2), ir::Dim(2), ir::Dim(4), ir::Dim(4)}));
  // One image: the batch is the windows, the mask needs no period.
  expect_same_numbers(*pass, swin_window_attention(1), "Transpose ingot::Attention ");
  // A bias that is no constant: the sum is computed by new nodes (Reshape of the window mask, Add).
  std::string bias_in = swin_window_attention(2);
  const std::string bias_line = bias_in.substr(bias_in.find("  init %bias"), bias_in.find("  init %wmask") -
                                                                                 bias_in.find("  init %bias"));
  bias_in.replace(bias_in.find(bias_line), bias_line.size(), "  input %bias: f32[2,4,4]\n");
  expect_same_numbers(*pass, bias_in, "Reshape Add Transpose ingot::Attention ");
  Outcome one = run_pass(*pass, swin_window_attention(1));
  EXPECT_FALSE(one.graph->nodes().back()->attrs().has("mask_batch_period"));
  // A window mask that differs per image is not periodic: left alone.
  std::string per_image = swin_window_attention(2);
  const std::string wm = "init %wmask: f32[1,2,1,4,4] = [";
  per_image.replace(per_image.find(wm), wm.size(), "init %wmask: f32[2,1,1,4,4] = [");
  Outcome o2 = run_pass(*pass, per_image);
  EXPECT_FALSE(o2.changed) << ir::to_text(*o2.graph);
}

// ---------------------------------------------------------------- Einsum

std::string einsum_graph(const std::string& equation, const std::string& a, const std::string& b) {
  return "graph g {\n  opset \"\" 17\n  input %a: f32" + a + "\n  input %b: f32" + b +
         "\n  %y = Einsum {equation=\"" + equation + "\"}(%a, %b) @e\n  output %y\n}\n";
}

TEST(PassesPattern, EinsumBatchedMatrixProductsBecomeMatMul) {
  auto pass = make_lower_einsum();
  // MaxViT's attention: q·kᵀ over [B, G, H, N, D], then probs·v.
  expect_same_numbers(*pass, einsum_graph("bghid,bghjd->bghij", "[1,2,2,5,4]", "[1,2,2,6,4]"), "Transpose MatMul ");
  expect_same_numbers(*pass, einsum_graph("bghij,bghjd->bghid", "[1,2,2,5,6]", "[1,2,2,6,4]"), "MatMul ");
  // Spaces, a 2-D right operand broadcast over the batch, a transposed left operand.
  expect_same_numbers(*pass, einsum_graph("b i j, j k -> b i k", "[3,4,5]", "[5,2]"), "MatMul ");
  expect_same_numbers(*pass, einsum_graph("bji,bjk->bik", "[2,5,3]", "[2,5,4]"), "Transpose MatMul ");
  expect_same_numbers(*pass, einsum_graph("ij,kj->ik", "[3,5]", "[4,5]"), "Transpose MatMul ");
  // Not a batched matrix product: left alone.
  for (const auto& [eq, a, b] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"bij,bjk->bki", "[2,3,4]", "[2,4,5]"},    // output axes swapped
           {"bij,cjk->bik", "[2,3,4]", "[2,4,5]"},    // different batch letters
           {"bij,bjk->bijk", "[2,3,4]", "[2,4,5]"},   // no contraction
           {"bij,bij->bi", "[2,3,4]", "[2,3,4]"},     // a row-wise dot product
           {"bij,bjk", "[2,3,4]", "[2,4,5]"}}) {      // implicit output
    Outcome o = run_pass(*pass, einsum_graph(eq, a, b));
    EXPECT_FALSE(o.changed) << eq << "\n" << ir::to_text(*o.graph);
  }
}

// ---------------------------------------------------------------- Conv1d

std::string conv1d_graph(const std::string& body) {
  return R"(graph g {
  opset "" 20
  input %x: f32[2,3,9]
  init %w: f32[4,3,3] = [0.5, -0.3, 0.2, 0.1, 0.7, -0.6, 0.4, -0.2, 0.9, -0.8, 0.3, 0.6, 0.2, -0.5, 0.1, 0.8, -0.4, 0.3, 0.6, 0.1, -0.9, 0.2, 0.5, -0.7, 0.3, 0.4, -0.1, -0.6, 0.8, 0.2, 0.1, -0.3, 0.7, 0.5, -0.2, 0.4]
  init %w2: f32[4,2,2] = [0.3, -0.5, 0.8, 0.1, -0.2, 0.6, 0.4, -0.9, 0.7, 0.2, -0.3, 0.5, 0.1, -0.4, 0.9, 0.6]
  init %b: f32[4] = [0.1, -0.2, 0.3, -0.4]
  init %half: f32[] = [0.5]
  init %pc: f32[4,1] = [1.5, -0.5, 2.0, 0.25]
)" + body + "}\n";
}

TEST(PassesPattern, Conv1dRunsAsAHeightOneConv2d) {
  auto pass = make_lift_conv1d();
  // Pads, stride, dilation; the Reshape back sinks below Gelu, a scalar Mul and a per-channel Add,
  // and the second conv reads the lifted tensor (grouped, stride 2).
  expect_same_numbers(*pass, conv1d_graph(R"(
  %a = Conv {pads=[1, 2], dilations=[2]}(%x, %w, %b)
  %g = Gelu(%a)
  %m = Mul(%g, %half)
  %p = Add(%m, %pc)
  %c = Conv {group=2, strides=[2], kernel_shape=[2]}(%p, %w2)
  output %c
)"), "Reshape Conv Gelu Mul Add Conv Reshape ");
  // A value read by the graph and by a second op stays rank 3 for them.
  expect_same_numbers(*pass, conv1d_graph(R"(
  %a = Conv {auto_pad="VALID"}(%x, %w)
  %r = Relu(%a)
  %s = Sigmoid(%a)
  output %r
  output %s
)"), "Reshape Conv Reshape Relu Sigmoid ");
  // Weights that are not constants, 2-D convs and SAME padding: left alone.
  for (const char* body : {"  input %wx: f32[4,3,3]\n  %a = Conv(%x, %wx)\n  output %a\n",
                           "  %a = Conv {auto_pad=\"SAME_UPPER\"}(%x, %w)\n  output %a\n"}) {
    Outcome o = run_pass(*pass, conv1d_graph(body));
    EXPECT_FALSE(o.changed) << body;
  }
}

// ---------------------------------------------------------------- Patch convolutions

std::string patch_graph(const std::string& x_shape, const std::string& body) {
  return R"(graph g {
  opset "" 20
  input %x: f32)" + x_shape + R"(
  init %w: f32[4,3,2,2] = [-0.35, -0.70, 0.30, -0.86, 0.07, -0.27, -0.88, 0.01, -0.93, -0.13, -0.86, -0.82, -0.15, 0.65, -0.75, -0.55, 0.25, 0.90, 0.15, -0.21, 0.95, -0.91, 0.72, -0.42, -0.71, -0.76, -0.38, 0.63, -0.64, 0.16, 0.28, -0.26, 0.10, -0.87, -0.88, -0.59, 0.36, -0.14, -0.37, 0.17, -0.09, -0.40, 0.59, 0.40, -0.51, 0.15, 0.05, 0.75]
  init %w1: f32[4,3,1,1] = [0.46, -0.42, 0.96, -0.76, -0.16, 0.51, -0.70, -0.02, -0.92, 0.34, 0.53, 0.15]
  init %w8: f32[4,8,2,2] = [-0.32, -0.63, 0.27, -0.77, 0.06, -0.24, -0.80, 0.01, -0.83, -0.12, -0.77, -0.74, -0.14, 0.59, -0.68, -0.50, 0.23, 0.81, 0.14, -0.19, 0.86, -0.82, 0.65, -0.38, -0.64, -0.69, -0.34, 0.57, -0.57, 0.15, 0.25, -0.23, 0.09, -0.79, -0.79, -0.53, 0.32, -0.13, -0.33, 0.15, -0.08, -0.36, 0.53, 0.36, -0.46, 0.13, 0.05, 0.68, 0.41, -0.38, 0.86, -0.69, -0.15, 0.46, -0.63, -0.02, -0.83, 0.30, 0.48, 0.13, 0.68, -0.34, 0.35, 0.17, 0.14, -0.08, 0.61, 0.80, -0.05, 0.30, -0.79, 0.36, 0.26, 0.89, 0.58, -0.39, -0.21, 0.30, -0.86, -0.07, -0.60, -0.69, -0.79, 0.48, -0.67, -0.45, -0.20, 0.67, -0.75, -0.09, 0.09, 0.69, 0.57, 0.66, -0.40, -0.15, -0.25, 0.69, 0.82, -0.63, -0.58, -0.48, -0.48, -0.03, 0.16, -0.43, -0.89, -0.15, -0.24, 0.12, 0.82, 0.34, 0.03, 0.21, 0.32, -0.80, 0.72, 0.50, 0.67, 0.54, -0.19, -0.18, -0.71, 0.24, -0.79, -0.78, -0.52, -0.61]
  init %b: f32[4] = [0.1, -0.2, 0.3, -0.4]
)" + body + "}\n";
}

TEST(PassesPattern, PatchConvolutionRunsAsATransposeAndAGemm) {
  auto pass = make_lower_patchify_conv();
  // 2x2 patches of a 4x6 image, with a bias and without; a symbolic batch (the Reshapes keep dim 0).
  expect_same_numbers(*pass, patch_graph("[2,3,4,6]", "  %y = Conv {strides=[2, 2]}(%x, %w, %b)\n  output %y\n"),
                      "Reshape Transpose Reshape MatMul Add Transpose ");
  expect_same_numbers(*pass,
                      patch_graph("[2,3,4,6]", "  %y = Conv {strides=[2, 2], kernel_shape=[2, 2], auto_pad=\"VALID\"}(%x, %w)\n  output %y\n"),
                      "Reshape Transpose Reshape MatMul Transpose ");
  expect_same_numbers(*pass, patch_graph("[batch,3,4,6]", "  %y = Conv {strides=[2, 2]}(%x, %w, %b)\n  output %y\n"),
                      "Reshape Transpose Reshape MatMul Add Transpose ");
  // Overlapping or gapped windows, padding, dilation, groups, a 1x1 kernel, an image that is not
  // whole patches, weights that are not constants, channels in whole 8-element vectors (ConvNeXt's
  // downsampling: a channels-last conv is already this GEMM): left alone.
  for (const auto& [x, body] : std::vector<std::pair<std::string, std::string>>{
           {"[2,3,4,6]", "  %y = Conv {strides=[1, 1]}(%x, %w)\n  output %y\n"},
           {"[2,3,4,6]", "  %y = Conv {strides=[2, 3]}(%x, %w)\n  output %y\n"},
           {"[2,3,4,6]", "  %y = Conv {strides=[2, 2], pads=[1, 1, 1, 1]}(%x, %w)\n  output %y\n"},
           {"[2,3,8,8]", "  %y = Conv {strides=[2, 2], dilations=[2, 2]}(%x, %w)\n  output %y\n"},
           {"[2,3,4,6]", "  %y = Conv(%x, %w1)\n  output %y\n"},
           {"[2,3,5,6]", "  %y = Conv {strides=[2, 2]}(%x, %w)\n  output %y\n"},
           {"[2,3,4,6]", "  input %wx: f32[4,3,2,2]\n  %y = Conv {strides=[2, 2]}(%x, %wx)\n  output %y\n"},
           {"[2,6,4,6]", "  %y = Conv {strides=[2, 2], group=2}(%x, %w)\n  output %y\n"},
           {"[2,8,4,6]", "  %y = Conv {strides=[2, 2]}(%x, %w8, %b)\n  output %y\n"}}) {
    Outcome o = run_pass(*pass, patch_graph(x, body));
    EXPECT_FALSE(o.changed) << x << "\n" << body;
  }
}

// MaxViT: attention over windows G on 5-D tensors [B, G, H, N, D] (its einsums as MatMuls):
// one 4-D Attention on [B·G, H, N, D] views, its output reshaped back.
std::string maxvit_attention(const std::string& bias_shape, const std::string& batch = "2") {
  return R"(graph g {
  opset "" 17
  input %q: f32[)" + batch + R"(,3,2,4,8]
  input %k: f32[)" + batch + R"(,3,2,4,8]
  input %v: f32[)" + batch + R"(,3,2,4,8]
  input %bias: f32)" + bias_shape + R"(
  init %scale: f32[] = [0.353553385]
  %ks = Mul(%k, %scale)
  %kt = Transpose {perm=[0, 1, 2, 4, 3]}(%ks)
  %qk = MatMul(%q, %kt)
  %sb = Add(%qk, %bias)
  %p = Softmax {axis=-1}(%sb) @attn
  %out = MatMul(%p, %v)
  output %out
})";
}

TEST(PassesPattern, AttentionOverWindowsOf5DTensors) {
  auto pass = make_recognize_attention();
  expect_same_numbers(*pass, maxvit_attention("[1,2,4,4]"), "Reshape Reshape Reshape ingot::Attention Reshape ");
  expect_same_numbers(*pass, maxvit_attention("[2,4,4]"), "Reshape Reshape Reshape ingot::Attention Reshape ");
  Outcome o = run_pass(*pass, maxvit_attention("[1,2,4,4]"));
  const ir::Node *att = nullptr;
  for (const auto &n : o.graph->nodes())
    if (n->op_type() == "Attention") att = n.get();
  ASSERT_NE(att, nullptr);
  EXPECT_NEAR(att->attrs().get_float("scale", 0), 0.353553385, 1e-7);  // K's scale, peeled
  EXPECT_EQ(att->input(0)->shape(), ir::Shape({ir::Dim(6), ir::Dim(2), ir::Dim(4), ir::Dim(8)}));
  // A bias per window cannot be one mask over the merged batch: refused.
  expect_refused(*pass, maxvit_attention("[3,2,4,4]"), "differs per batch or window");
  // A dynamic batch (an export with a symbolic batch, inspected or built without a fixed profile):
  // the Reshapes say -1 for B·G and B. They said B·G = -1·3 = -3 before, an invalid model.
  expect_same_numbers(*pass, maxvit_attention("[1,2,4,4]", "batch"), "Reshape Reshape Reshape ingot::Attention Reshape ");
  Outcome open = run_pass(*pass, maxvit_attention("[1,2,4,4]", "batch"));
  for (const auto &n : open.graph->nodes())
    if (n->op_type() == "Reshape") {
      const ir::Value *s = n->input(1);
      ASSERT_TRUE(s && s->initializer()) << n->name();
      EXPECT_EQ(s->initializer()->get_i64(0), -1) << n->name();
    }
}

TEST(PassesPattern, AttentionRefusesMultiplicativeMask) {
  auto pass = make_recognize_attention();
  expect_refused(*pass, bert_attention("  %sm = Mul(%sc, %mask)", "%sm"),
                 "not additive");
}

TEST(PassesPattern, AttentionRefusesWhereWithFiniteFill) {
  auto pass = make_recognize_attention();
  std::string t = bert_attention(
      "  %keep = Cast {to=9}(%mask)\n  %sm = Where(%keep, %sc, %big)", "%sm");
  t.replace(t.find("  %q4"), 0, "  init %big: f32[] = [-10000]\n");
  expect_refused(*pass, t, "finite value");
}

TEST(PassesPattern, AttentionRefusesProbabilitiesReadElsewhere) {
  auto pass = make_recognize_attention();
  std::string t = bert_attention("", "%sc");
  t.replace(t.find("  output %out"), 0, "  output %p\n");
  // %p has two readers (MatMul and the graph output): not the pattern.
  Outcome o = run_pass(*pass, t);
  EXPECT_FALSE(o.changed);
}

TEST(PassesPattern, AttentionRefusesSoftmaxOverAnotherAxis) {
  auto pass = make_recognize_attention();
  std::string t = bert_attention("", "%sc");
  t.replace(t.find("axis=-1"), 7, "axis=2");
  expect_refused(*pass, t, "last axis");
}

// ---------------------------------------------------------------- whole models

/// The models of tests/models/make_optimizer_models.py, when
/// INGOT_OPTIMIZER_MODELS names the folder it wrote: the three passes find
/// every LayerNorm/GELU/attention/HardSwish and the rewritten graph still
/// matches onnxruntime's outputs.
TEST(PassesPattern, OptimizerModelsKeepOnnxruntimeOutputs) {
  const char *dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (dir == nullptr)
    GTEST_SKIP() << "set INGOT_OPTIMIZER_MODELS to the output of "
                    "make_optimizer_models.py";
  struct Want {
    const char *name;
    const char *ops[4];
    int counts[4];
  };
  const Want wants[] = {
      {"bert_encoder_2l",
       {"LayerNormalization", "ingot::Gelu", "ingot::Attention", "Softmax"},
       {4, 2, 2, 0}},
      {"bert_encoder_2l_opset20",
       {"LayerNormalization", "Gelu", "ingot::Attention", "Erf"},
       {4, 2, 2, 0}},
      {"mobilenetv3_block",
       {"HardSwish", "HardSigmoid", "Mul", "Sigmoid"},
       {5, 2, 2, 0}},
      {"resnet_bn", {"Conv", "Relu", "Add", "Softmax"}, {8, 7, 3, 0}},
  };
  for (const Want &want : wants) {
    SCOPED_TRACE(want.name);
    const std::string base = std::string(dir) + "/" + want.name;
    auto model = onnx::import_model_file(base + "/model.onnx");
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    ir::Graph &g = *model->graph;
    PassContext ctx;
    for (auto make : {make_recognize_layernorm, make_recognize_gelu_silu,
                      make_recognize_attention}) {
      auto r = make()->run(g, ctx);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
    }
    ASSERT_TRUE(ir::infer_graph(g).ok());
    EXPECT_TRUE(ctx.notes().empty()) << ctx.notes()[0];
    for (int i = 0; i < 4; ++i) {
      int n = 0;
      for (const auto &node : g.nodes())
        n += ((node->domain().empty() ? "" : node->domain() + "::") +
              node->op_type()) == want.ops[i];
      EXPECT_EQ(n, want.counts[i]) << want.ops[i];
    }
    std::map<std::string, Tensor> inputs;
    for (size_t j = 0; j < g.inputs().size(); ++j) {
      auto t = onnx::load_tensor_proto_file(base + "/test_data_set_0/input_" +
                                            std::to_string(j) + ".pb");
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      inputs.emplace(g.inputs()[j]->name(), std::move(t).value());
    }
    cpu::Executor exec;
    auto outs = exec.run(g, inputs);
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    for (size_t j = 0; j < outs->size(); ++j) {
      auto ref = onnx::load_tensor_proto_file(
          base + "/test_data_set_0/output_" + std::to_string(j) + ".pb");
      ASSERT_TRUE(ref.ok());
      ASSERT_EQ(ref->numel(), (*outs)[j].numel());
      double worst = 0;
      for (int64_t i = 0; i < ref->numel(); ++i)
        worst =
            std::max(worst, std::fabs(ref->get_f64(i) - (*outs)[j].get_f64(i)));
      EXPECT_LE(worst, 1e-4) << "output " << j;
      std::printf("[          ] %s output %zu: max |ingot optimized - "
                  "onnxruntime| = %.3g\n",
                  want.name, j, worst);
    }
  }
}

} // namespace
} // namespace ingot::passes
