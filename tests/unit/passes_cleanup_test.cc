// Copyright ingot authors. Apache-2.0.
//
// The cleanup and folding passes: each states a graph before and the graph
// expected after (IR text), and checks on the CPU reference executor that
// before and after compute the same outputs on random non-zero inputs. Expected
// graphs and folded weights are worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "backend/cpu/executor.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "onnx/importer.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"
#include "ir_test_util.h"

namespace ingot::passes {
namespace {

// `infer` is off for graphs with ops the registry does not know yet (random
// ops).
std::unique_ptr<ir::Graph> parse(const std::string &text, bool infer = true) {
  return testing_util::parse_ir(text, infer);
}

// Text of `g` without initializers nobody reads: whether those are dropped
// depends on ir::Graph support (remove_dead_nodes' job), not on the pass under
// test.
std::string normalized_text(const ir::Graph &g) {
  std::set<std::string> unused;
  for (const ir::Value *v : g.initializers())
    if (v->uses().empty() && !is_graph_input(g, v) && !is_graph_output(g, v))
      unused.insert(v->name());
  std::istringstream in(ir::to_text(g));
  std::string line, out;
  while (std::getline(in, line)) {
    auto p = line.find("init %");
    if (p != std::string::npos) {
      std::string name = line.substr(p + 6, line.find(':', p) - p - 6);
      if (unused.count(name))
        continue;
    }
    out += line + "\n";
  }
  return out;
}

// Runs `pass` once on `before` (then re-sorts and verifies, as the PassManager
// does). With `then_remove_dead`, remove_dead_nodes runs after it: passes that
// rewire readers leave the old producers for it, and the expected graphs do not
// list them.
std::unique_ptr<ir::Graph> run_pass(Pass &pass, const std::string &before,
                                    PassContext &ctx, bool expect_change = true,
                                    bool then_remove_dead = false,
                                    bool infer = true) {
  auto g = parse(before, infer);
  if (!g)
    return nullptr;
  auto changed = pass.run(*g, ctx);
  EXPECT_TRUE(changed.ok()) << changed.status().to_string();
  if (changed.ok())
    EXPECT_EQ(*changed, expect_change);
  EXPECT_TRUE(g->topological_sort().ok());
  Status v = ir::verify_graph(*g);
  EXPECT_TRUE(v.ok()) << v.to_string();
  if (then_remove_dead)
    EXPECT_TRUE(make_remove_dead_nodes()->run(*g, ctx).ok());
  if (!infer)
    return g;
  Status s = ir::infer_graph(*g);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return g;
}

void expect_graph(const ir::Graph &got, const std::string &expected) {
  auto want = parse(expected);
  ASSERT_TRUE(want);
  EXPECT_EQ(normalized_text(got), normalized_text(*want));
}

Tensor random_nonzero(DataType dt, const Shape64 &shape, std::mt19937 &rng) {
  Tensor t = Tensor::zeros(dt, shape).value();
  std::uniform_real_distribution<double> mag(0.25, 2.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = mag(rng) * (rng() % 2 ? 1 : -1);
    if (is_float(dt))
      t.set_f64(i, v);
    else if (dt == DataType::kBool)
      t.set_i64(i, rng() % 2);
    else
      t.set_i64(i, static_cast<int64_t>(rng() % 7) + 1);
  }
  return t;
}

bool close(const Tensor &a, const Tensor &b, std::string *why) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    *why = "type " + a.to_string() + " vs " + b.to_string();
    return false;
  }
  if (a.dtype() == DataType::kString)
    return a.strings() == b.strings();
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get_f64(i), y = b.get_f64(i);
    if (std::isnan(x) && std::isnan(y))
      continue;
    if (x == y)
      continue;
    if (!(std::fabs(x - y) <= 1e-5 + 1e-4 * std::fabs(y))) {
      *why = "element " + std::to_string(i) + ": " + std::to_string(x) +
             " vs " + std::to_string(y);
      return false;
    }
  }
  return true;
}

// Runs `before` (parsed afresh) and `after` on the same random inputs; outputs
// must agree.
void expect_same_outputs(const std::string &before, const ir::Graph &after,
                         unsigned seed = 1) {
  auto g = parse(before);
  ASSERT_TRUE(g);
  std::mt19937 rng(seed);
  std::map<std::string, Tensor> feeds;
  for (const ir::Value *v : g->inputs()) {
    if (v->initializer())
      continue;
    Shape64 dims;
    for (const ir::Dim &d : v->shape().dims())
      dims.push_back(d.is_known() ? d.value() : 2);
    feeds[v->name()] = random_nonzero(v->dtype(), dims, rng);
  }
  cpu::Executor e1, e2;
  auto want = e1.run(*g, feeds);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = e2.run(after, feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    EXPECT_EQ(after.outputs()[i]->name(), g->outputs()[i]->name());
    std::string why;
    EXPECT_TRUE(close((*got)[i], (*want)[i], &why))
        << "output " << i << ": " << why;
  }
}

bool has_note(const PassContext &ctx, const std::string &part) {
  for (const auto &n : ctx.notes())
    if (n.find(part) != std::string::npos)
      return true;
  return false;
}

// ---- remove_noops
// ----------------------------------------------------------------------------

TEST(PassesCleanup, RemoveNoopsDropsPassThroughNodes) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[batch,2,3]
    init %shape: i64[3] = [0, 2, 3]
    init %pads: i64[6] = [0, 0, 0, 0, 0, 0]
    init %st: i64[2] = [0, -3]
    init %en: i64[2] = [9223372036854775807, 3]
    init %ax: i64[2] = [0, 2]
    init %tm: bool[] = [0]
    %a = Identity(%x)
    %b, %m = Dropout(%a, _, %tm)
    %c = Cast {to=1}(%b)
    %d = Reshape(%c, %shape)
    %e = Transpose {perm=[0, 1, 2]}(%d)
    %f = Pad(%e, %pads)
    %h = Slice(%f, %st, %en, %ax)
    %y = Relu(%h)
    %z = Identity(%y)
    output %z
  })";
  PassContext ctx;
  auto pass = make_remove_noops();
  auto g = run_pass(*pass, before, ctx);
  ASSERT_TRUE(g);
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[batch,2,3]
    %z = Relu(%x)
    output %z
  })");
  expect_same_outputs(before, *g);
}

TEST(PassesCleanup, RemoveNoopsKeepsWhatChangesValues) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[4,3]
    input %train: bool[]
    init %st: i64[1] = [1]
    init %en: i64[1] = [4]
    init %rev: i64[1] = [-1]
    init %big: i64[1] = [9223372036854775807]
    init %zero: i64[1] = [0]
    %a = Dropout(%x, _, %train)
    %b = Transpose(%a)
    %c = Slice(%b, %st, %en)
    %d = Cast {to=10}(%c)
    %e = Slice(%x, %zero, %big, %zero, %rev)
    output %d
    output %e
  })";
  PassContext ctx;
  auto pass = make_remove_noops();
  auto g = run_pass(*pass, before, ctx, /*expect_change=*/false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 5u);
}

TEST(PassesCleanup, RemoveNoopsKeepsAnInputToOutputIdentity) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2]
    %y = Identity(%x)
    output %y
  })";
  PassContext ctx;
  auto pass = make_remove_noops();
  auto g = run_pass(*pass, before, ctx, false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 1u);
  EXPECT_TRUE(has_note(ctx, "would lose its name")) << ctx.notes().size();
}

TEST(PassesCleanup, RemoveNoopsReplacesAUsedDropoutMask) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,2]
    %y, %m = Dropout(%x)
    %mf = Cast {to=1}(%m)
    %z = Mul(%y, %mf)
    output %z
  })";
  PassContext ctx;
  auto pass = make_remove_noops();
  auto g = run_pass(*pass, before, ctx);
  ASSERT_TRUE(g);
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2,2]
    init %m_const: bool[2,2] = [1, 1, 1, 1]
    %mf = Cast {to=1}(%m_const)
    %z = Mul(%x, %mf)
    output %z
  })");
  expect_same_outputs(before, *g);
}

// ---- fold_constants
// --------------------------------------------------------------------------

TEST(PassesCleanup, FoldConstantsEvaluatesConstantSubgraphs) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    init %a: f32[3] = [1, 2, 3]
    %k = Constant {value_floats=[0.5, 0.5, 2.0]}()
    %s = Mul(%a, %k)
    %sh = Shape(%x)
    %n = Neg(%sh)
    %y = Add(%x, %s)
    output %y
    output %n
  })";
  PassContext ctx;
  auto pass = make_fold_constants();
  auto g = run_pass(*pass, before, ctx);
  ASSERT_TRUE(g);
  // a*k = [0.5, 1, 6]; Shape(x) = [2, 3], negated [-2, -3].
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    init %s: f32[3] = [0.5, 1, 6]
    init %n: i64[2] = [-2, -3]
    %y = Add(%x, %s)
    output %y
    output %n
  })");
  expect_same_outputs(before, *g);
}

TEST(PassesCleanup, FoldConstantsRespectsTheSizeLimit) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[1000,300]
    init %one: f32[] = [1]
    init %shape: i64[2] = [1000, 300]
    %big = Expand(%one, %shape)
    %y = Add(%big, %x)
    output %y
  })";
  PassContext ctx;
  auto pass = make_fold_constants();
  auto g = run_pass(*pass, before, ctx, false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 2u);
  EXPECT_TRUE(has_note(ctx, "exceeds the fold limit"));
}

TEST(PassesCleanup, FoldConstantsLeavesRandomOps) {
  // Not inferred: the registry has no random ops yet; the pass must not even
  // try them.
  const std::string before = R"(graph g {
    opset "" 17
    init %c: f32[2] = [1, 2]
    %r = RandomUniformLike(%c)
    %b = Bernoulli(%c)
    %y = Add(%r, %b)
    output %y
  })";
  PassContext ctx;
  auto pass = make_fold_constants();
  auto g = run_pass(*pass, before, ctx, false, false, /*infer=*/false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 3u);
  EXPECT_FALSE(has_note(ctx, "Random")) << ctx.notes()[0];
}

TEST(PassesCleanup, FoldConstantsDoesNotFoldOverridableInitializers) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2]
    init %w: f32[2] = [1, 2] (input)
    %c = Neg(%w)
    %y = Add(%x, %c)
    output %y
  })";
  PassContext ctx;
  auto pass = make_fold_constants();
  auto g = run_pass(*pass, before, ctx, false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 2u);
}

// ---- eliminate_common_subexpressions
// --------------------------------------------------------

TEST(PassesCleanup, CseMergesRepeatedNodesAndInitializers) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    init %a: f32[3] = [1, 2, 3]
    init %b: f32[3] = [1, 2, 3]
    %p = Add(%x, %a)
    %q = Add(%x, %b)
    %r1 = LeakyRelu {alpha=0.1}(%p)
    %r2 = LeakyRelu {alpha=0.1}(%q)
    %r3 = LeakyRelu {alpha=0.2}(%q)
    %s = Mul(%r1, %r2)
    %y = Sub(%s, %r3)
    output %y
    output %r2
  })";
  PassContext ctx;
  auto pass = make_eliminate_common_subexpressions();
  auto g = run_pass(*pass, before, ctx);
  ASSERT_TRUE(g);
  // r2 is a graph output, so the kept LeakyRelu takes its name.
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    init %a: f32[3] = [1, 2, 3]
    %p = Add(%x, %a)
    %r2 = LeakyRelu {alpha=0.1}(%p)
    %r3 = LeakyRelu {alpha=0.2}(%p)
    %s = Mul(%r2, %r2)
    %y = Sub(%s, %r3)
    output %y
    output %r2
  })");
  expect_same_outputs(before, *g);
}

TEST(PassesCleanup, CseLeavesRandomOpsApart) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2]
    %r1 = RandomUniformLike(%x)
    %r2 = RandomUniformLike(%x)
    %y = Sub(%r1, %r2)
    output %y
  })";
  PassContext ctx;
  auto pass = make_eliminate_common_subexpressions();
  auto g = run_pass(*pass, before, ctx, false, false, /*infer=*/false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes().size(), 3u);
}

// ---- remove_dead_nodes
// -----------------------------------------------------------------------

TEST(PassesCleanup, RemoveDeadNodesDropsUnreachableWork) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2]
    input %unused: f32[2]
    init %w: f32[2] = [1, 2]
    init %dead_w: f32[2] = [3, 4]
    %a = Add(%x, %w)
    %d1 = Mul(%x, %dead_w)
    %d2 = Relu(%d1)
    %y = Relu(%a)
    output %y
  })";
  PassContext ctx;
  auto pass = make_remove_dead_nodes();
  auto g = run_pass(*pass, before, ctx);
  ASSERT_TRUE(g);
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2]
    input %unused: f32[2]
    init %w: f32[2] = [1, 2]
    %a = Add(%x, %w)
    %y = Relu(%a)
    output %y
  })");
  expect_same_outputs(before, *g);
  if (!graph_can_remove_initializers())
    GTEST_SKIP() << "ir::Graph cannot drop initializers yet (needs "
                    "Graph::remove_initializer); "
                    "unused initializers stay";
  EXPECT_EQ(ir::to_text(*g).find("dead_w"), std::string::npos);
}

// ---- simplify_algebra
// ------------------------------------------------------------------------

TEST(PassesCleanup, SimplifyAlgebraMergesTransposesAndReshapes) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %s1: i64[2] = [6, 4]
    init %s2: i64[3] = [4, -1, 2]
    %t1 = Transpose {perm=[1, 2, 0]}(%x)
    %t2 = Transpose {perm=[2, 0, 1]}(%t1)
    %t3 = Transpose {perm=[1, 0, 2]}(%t2)
    %r1 = Reshape(%t3, %s1)
    %y = Reshape(%r1, %s2)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  // t2∘t1 is the identity (perm c[j] = p1[p2[j]] = [0,1,2]), so t3 reads x
  // directly.
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %s2: i64[3] = [4, -1, 2]
    %t3 = Transpose {perm=[1, 0, 2]}(%x)
    %y = Reshape(%t3, %s2)
    output %y
  })");
  expect_same_outputs(before, *g);
}

// A Transpose that moves only unit axes is a Reshape ([1,5,8] -> [5,1,8]); one that reorders
// two non-unit axes stays, as does one with a symbolic dim.
TEST(PassesCleanup, SimplifyAlgebraTurnsUnitTransposesIntoReshapes) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[1,5,8]
    %t = Transpose {perm=[1, 0, 2]}(%x)
    %u = Transpose {perm=[2, 1, 0]}(%t)
    output %u
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  const std::vector<std::string> ops = testing_util::op_list(*g);
  // The first became a Reshape; the second (5 and 8 swap) stays a Transpose.
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Transpose"}));
  expect_same_outputs(before, *g);
  const std::string open = R"(graph g {
    opset "" 17
    input %x: f32[N,5,8]
    %t = Transpose {perm=[1, 0, 2]}(%x)
    output %t
  })";
  PassContext ctx2;
  ASSERT_TRUE(run_pass(*pass, open, ctx2, false, true));
}

// Swin's roll (two Gathers after the Concat-of-Slices rule) then its window partition (Reshape,
// Transpose keeping channels last, Reshape): every node moves whole rows of C, so the chain is
// one Gather of rows by a constant table between two Reshapes.
TEST(PassesCleanup, SimplifyAlgebraFoldsRowMovingChainsIntoOneGather) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,4,4,8]
    init %r1: i64[4] = [1, 2, 3, 0]
    init %r2: i64[4] = [3, 0, 1, 2]
    init %s6: i64[6] = [2, 2, 2, 2, 2, 8]
    init %s3: i64[3] = [8, 4, 8]
    %a = Gather {axis=1}(%x, %r1)
    %b = Gather {axis=2}(%a, %r2)
    %v = Reshape(%b, %s6)
    %t = Transpose {perm=[0, 1, 3, 2, 4, 5]}(%v)
    %w = Reshape(%t, %s3)
    %y = Relu(%w)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  EXPECT_EQ(testing_util::op_list(*g), (std::vector<std::string>{"Reshape", "Gather", "Reshape", "Relu"}));
  expect_same_outputs(before, *g);
  // No Gather in the chain (an attention head split): left for the attention passes.
  const std::string heads = R"(graph g {
    opset "" 17
    input %x: f32[2,4,16]
    init %s4: i64[4] = [2, 4, 2, 8]
    %v = Reshape(%x, %s4)
    %t = Transpose {perm=[0, 2, 1, 3]}(%v)
    %y = Relu(%t)
    output %y
  })";
  PassContext ctx2;
  auto g2 = run_pass(*pass, heads, ctx2, /*expect_change=*/false, true);
  ASSERT_TRUE(g2);
  EXPECT_EQ(testing_util::op_list(*g2), (std::vector<std::string>{"Reshape", "Transpose", "Relu"}));
}

// ShuffleNet's channel shuffle: view [N, 2, C/2, H, W], transpose(1, 2), view [N, C, H, W] is
// a permutation of the channels: one Gather. A chain that moves elements across two axes stays.
TEST(PassesCleanup, SimplifyAlgebraTurnsAChannelShuffleIntoAGather) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,6,3,4]
    init %s5: i64[5] = [2, 2, 3, 3, 4]
    init %s4: i64[4] = [2, 6, 3, 4]
    %v = Reshape(%x, %s5)
    %t = Transpose {perm=[0, 2, 1, 3, 4]}(%v)
    %y = Reshape(%t, %s4)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  EXPECT_EQ(testing_util::op_list(*g), (std::vector<std::string>{"Gather"}));
  expect_same_outputs(before, *g);
  const std::string across = R"(graph g {
    opset "" 17
    input %x: f32[2,6,3,4]
    init %s5: i64[5] = [2, 2, 3, 3, 4]
    init %s4: i64[4] = [2, 6, 3, 4]
    %v = Reshape(%x, %s5)
    %t = Transpose {perm=[0, 3, 2, 1, 4]}(%v)
    %y = Reshape(%t, %s4)
    output %y
  })";
  PassContext ctx2;
  auto g2 = run_pass(*pass, across, ctx2, /*expect_change=*/false, true);
  ASSERT_TRUE(g2);
  for (const std::string& op : testing_util::op_list(*g2)) EXPECT_NE(op, "Gather");
  expect_same_outputs(across, *g2);
}

// "[v0, v1, ...]" for an initializer of n values, none zero.
std::string weight_values(int64_t n) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(0.125 * static_cast<double>((i * 7) % 13 - 6) + 0.0625);
  return s + "]";
}

// DeepLabV3's ASPP at a small map: a 3x3 conv with dilation 6 on 5x5 reads only its centre tap
// (-> a 1x1 conv, no pads); a 5x5 with dilation 4 on 6x7 keeps its middle 3 taps; a conv dilated
// along H only (strided along W) is cropped along H alone; one whose every tap lands inside is left
// alone. The outputs stay those of the graph before.
TEST(PassesCleanup, SimplifyAlgebraCropsConvTapsThatReadOnlyPadding) {
  auto conv_graph = [](const std::string& x, const std::string& w, int64_t wn, const std::string& attrs) {
    return "graph g {\n opset \"\" 17\n input %x: f32[" + x + "]\n init %w: f32[" + w + "] = " + weight_values(wn) +
           "\n init %b: f32[3] = [0.5, -0.25, 1]\n %y = Conv {" + attrs + "}(%x, %w, %b)\n output %y\n}";
  };
  struct Case {
    std::string x, w;
    int64_t wn;
    std::string attrs;
    Shape64 kernel;
    std::vector<int64_t> pads, dil;
  };
  const Case cases[] = {
      {"1,2,5,5", "3,2,3,3", 54, "dilations=[6, 6], kernel_shape=[3, 3], pads=[6, 6, 6, 6]", {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {"2,2,6,7", "3,2,5,5", 150, "dilations=[4, 4], pads=[8, 8, 8, 8]", {3, 3}, {4, 4, 4, 4}, {4, 4}},
      {"1,2,5,9", "3,2,3,3", 54, "dilations=[6, 1], pads=[6, 1, 6, 1], strides=[1, 2]", {1, 3}, {0, 1, 0, 1}, {1, 1}},
  };
  for (const Case& c : cases) {
    const std::string before = conv_graph(c.x, c.w, c.wn, c.attrs);
    SCOPED_TRACE(before);
    PassContext ctx;
    auto pass = make_simplify_algebra();
    auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->nodes().size(), 1u);
    const ir::Node& n = *g->nodes()[0];
    const Tensor& w = *n.input(1)->initializer();
    EXPECT_EQ(Shape64(w.shape().begin() + 2, w.shape().end()), c.kernel);
    EXPECT_EQ(n.attrs().get_ints("pads"), c.pads);
    EXPECT_EQ(n.attrs().get_ints("dilations"), c.dil);
    expect_same_outputs(before, *g);
  }
  PassContext ctx;
  auto pass = make_simplify_algebra();
  const std::string live = conv_graph("1,2,5,5", "3,2,3,3", 54, "dilations=[3, 3], pads=[3, 3, 3, 3]");
  auto g = run_pass(*pass, live, ctx, /*expect_change=*/false);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes()[0]->input(1)->initializer()->dim(2), 3);
}

// torch.roll over two axes (Swin's shifted windows) as Slice/Slice/Concat per axis, and patch
// merging's strided Slices: each Concat of Slices of one tensor becomes one Gather.
TEST(PassesCleanup, SimplifyAlgebraTurnsConcatsOfSlicesIntoGathers) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,7,6,3]
    init %s3: i64[1] = [3]
    init %big: i64[1] = [9223372036854775807]
    init %zero: i64[1] = [0]
    init %ax1: i64[1] = [1]
    init %ax2: i64[1] = [2]
    init %two: i64[1] = [2]
    init %one: i64[1] = [1]
    %a = Slice(%x, %s3, %big, %ax1)
    %b = Slice(%x, %zero, %s3, %ax1)
    %r1 = Concat {axis=1}(%a, %b)
    %c = Slice(%r1, %s3, %big, %ax2)
    %d = Slice(%r1, %zero, %s3, %ax2)
    %r2 = Concat {axis=-2}(%c, %d)
    %e = Slice(%r2, %zero, %big, %ax2, %two)
    %f = Slice(%r2, %one, %big, %ax2, %two)
    %m = Concat {axis=2}(%e, %f)
    output %m
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  EXPECT_EQ(testing_util::op_list(*g), (std::vector<std::string>{"Gather", "Gather", "Gather"}));
  expect_same_outputs(before, *g);
  // Slices of two tensors, a Slice read elsewhere, bounds known only at run time: left alone.
  for (const std::string& body : {std::string("%a = Slice(%x, %s3, %big, %ax1)\n %b = Slice(%y, %zero, %s3, %ax1)\n"
                                              " %r = Concat {axis=1}(%a, %b)\n output %r\n"),
                                  std::string("%a = Slice(%x, %s3, %big, %ax1)\n %b = Slice(%x, %zero, %s3, %ax1)\n"
                                              " %r = Concat {axis=1}(%a, %b)\n output %r\n output %b\n"),
                                  std::string("%a = Slice(%x, %st, %big, %ax1)\n %b = Slice(%x, %zero, %st, %ax1)\n"
                                              " %r = Concat {axis=1}(%a, %b)\n output %r\n")}) {
    const std::string text = "graph g {\n opset \"\" 17\n input %x: f32[2,7,7,3]\n input %y: f32[2,7,7,3]\n input %st: i64[1]\n"
                             " init %s3: i64[1] = [3]\n init %big: i64[1] = [9223372036854775807]\n"
                             " init %zero: i64[1] = [0]\n init %ax1: i64[1] = [1]\n init %ax2: i64[1] = [2]\n " +
                             body + "}\n";
    PassContext ctx2;
    EXPECT_TRUE(run_pass(*pass, text, ctx2, /*expect_change=*/false)) << text;
  }
}

// MatMul(x, Transpose(W)) with W constant (a tied LM head) -> Gemm {transB=1} on W as stored,
// with Reshapes to and from 2-D; W's Transpose goes.
TEST(PassesCleanup, SimplifyAlgebraReadsTransposedConstantsWithTransB) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %w: f32[5,4] = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 1.0, -1.1, 1.2, 1.3, 1.4, 1.5, -1.6, 1.7, 1.8, 1.9, 2.0]
    %wt = Transpose {perm=[1, 0]}(%w)
    %y = MatMul(%x, %wt)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  const std::vector<std::string> ops = testing_util::op_list(*g);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Gemm", "Reshape"}));
  EXPECT_EQ(g->nodes()[1]->attrs().get_int("transB", 0), 1);
  EXPECT_EQ(g->nodes()[1]->input(1)->name(), "w");
  expect_same_outputs(before, *g);
}

// A weight's Transpose folds whatever its size when the Transpose alone reads the weight (the
// result replaces it; nothing grows); with a second reader it stays (it would double the weight).
TEST(PassesCleanup, FoldConstantsTransposesLargeWeightsItAloneReads) {
  for (bool shared : {false, true}) {
    std::string t = R"(graph g {
    opset "" 17
    input %x: f32[2,3]
    init %w: f32[2,3] = [1, 2, 3, 4, 5, 6]
    %wt = Transpose {perm=[1, 0]}(%w)
    %y = MatMul(%x, %wt)
    output %y
)";
    if (shared) t += "    %z = Relu(%w)\n    output %z\n";
    t += "  }";
    PassOptions small;
    small.fold_size_limit_bytes = 8;  // below the 24-byte weight
    PassContext ctx(small);
    auto pass = make_fold_constants();
    auto g = run_pass(*pass, t, ctx, !shared, /*then_remove_dead=*/true);
    ASSERT_TRUE(g);
    int transposes = 0;
    for (const auto &n : g->nodes())
      transposes += n->op_type() == "Transpose";
    EXPECT_EQ(transposes, shared ? 1 : 0);
  }
}

// PyTorch's addmm between Reshapes (GPT-2's Conv1D) -> MatMul + Add on the 3-D tensor, so the
// bias and what follows can fuse into one FusedGemm.
TEST(PassesCleanup, SimplifyAlgebraReadsAddmmBetweenReshapesAsMatMul) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %rows: i64[2] = [6, 4]
    init %back: i64[3] = [2, 3, 2]
    init %w: f32[4,2] = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8]
    init %c: f32[2] = [0.5, -1.5]
    %x2 = Reshape(%x, %rows)
    %y2 = Gemm(%x2, %w, %c)
    %y = Reshape(%y2, %back)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  const std::vector<std::string> ops = testing_util::op_list(*g);
  EXPECT_EQ(ops, (std::vector<std::string>{"MatMul", "Add"}));
  EXPECT_EQ(g->nodes()[0]->input(0)->name(), "x");
  expect_same_outputs(before, *g);
}

// The dynamo exporter's K^T (x [B,S,H,D] -> [B,H,S,D] -> [B*H,S,D] -> [B*H,D,S] -> [B,H,D,S])
// followed by the attention rewrite's transpose back: one Transpose of x. With B = 1 the unit
// batch axis must ride along; a chain that splits one of its input's axes is left alone.
/// How many nodes of `op` the graph holds.
int count_ops(const ir::Graph &g, const char *op) {
  int n = 0;
  for (const auto &node : g.nodes())
    n += node->op_type() == op;
  return n;
}

TEST(PassesCleanup, SimplifyAlgebraFoldsTransposeReshapeChains) {
  // simplify_algebra then dead-node removal; the Transposes/Reshapes left.
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto simplify = [&](const std::string &text, bool expect_change) {
    return run_pass(*pass, text, ctx, expect_change, /*then_remove_dead=*/true);
  };
  const auto count = count_ops;
  for (int b : {2, 1}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const std::string B = std::to_string(b);
    const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[)" + B + R"(,5,3,4]
    init %s1: i64[3] = [-1, 5, 4]
    init %s2: i64[4] = [)" + B + R"(, 3, 4, 5]
    %t1 = Transpose {perm=[0, 2, 1, 3]}(%x)
    %r1 = Reshape(%t1, %s1)
    %t2 = Transpose {perm=[0, 2, 1]}(%r1)
    %r2 = Reshape(%t2, %s2)
    %t3 = Transpose {perm=[0, 1, 3, 2]}(%r2)
    %y = Relu(%t3)
    output %y
  })";
    auto g = simplify(before, true);
    ASSERT_TRUE(g);
    EXPECT_EQ(count(*g, "Transpose"), 1) << ir::to_text(*g);
    EXPECT_EQ(count(*g, "Reshape"), 0) << ir::to_text(*g);
    for (const auto &n : g->nodes())
      if (n->op_type() == "Transpose") {
        EXPECT_EQ(n->input(0)->name(), "x");
        EXPECT_EQ(n->attrs().get_ints("perm"), (std::vector<int64_t>{0, 2, 1, 3}));
      }
    expect_same_outputs(before, *g);
  }
  // An open batch: the first Reshape's leading dim is unknown ([batch,3,5,4] -> [?,5,4]) and
  // takes the axes its neighbours leave; the last one names `batch` again.
  auto open = simplify(R"(graph g {
    opset "" 17
    input %x: f32[batch,5,3,4]
    init %i0: i64[1] = [0]
    init %i1: i64[1] = [1]
    init %s1: i64[3] = [-1, 5, 4]
    init %s2: i64[3] = [3, 4, 5]
    %t1 = Transpose {perm=[0, 2, 1, 3]}(%x)
    %r1 = Reshape(%t1, %s1)
    %t2 = Transpose {perm=[0, 2, 1]}(%r1)
    %shape = Shape(%x)
    %b = Slice(%shape, %i0, %i1)
    %s2b = Concat {axis=0}(%b, %s2)
    %r2 = Reshape(%t2, %s2b)
    %t3 = Transpose {perm=[0, 1, 3, 2]}(%r2)
    %y = Relu(%t3)
    output %y
  })", true);
  ASSERT_TRUE(open);
  EXPECT_EQ(count(*open, "Transpose") + count(*open, "Reshape"), 1) << ir::to_text(*open);
  // A chain that ends where it started: [2,3,4] -> [2,4,3] -> [8,3] -> [3,8] -> [3,2,4] -> [2,3,4].
  const std::string identity = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %s1: i64[2] = [8, 3]
    init %s2: i64[3] = [3, 2, 4]
    %t1 = Transpose {perm=[0, 2, 1]}(%x)
    %r1 = Reshape(%t1, %s1)
    %t2 = Transpose {perm=[1, 0]}(%r1)
    %r2 = Reshape(%t2, %s2)
    %t3 = Transpose {perm=[1, 0, 2]}(%r2)
    %y = Relu(%t3)
    output %y
  })";
  auto same = simplify(identity, true);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->nodes().size(), 1u) << ir::to_text(*same);
  expect_same_outputs(identity, *same);
  // [2,12] -> [2,3,4] splits an input axis: not a permutation, kept.
  auto split = simplify(R"(graph g {
    opset "" 17
    input %x: f32[2,12]
    init %s: i64[3] = [2, 3, 4]
    %r = Reshape(%x, %s)
    %t = Transpose {perm=[0, 2, 1]}(%r)
    %y = Relu(%t)
    output %y
  })", false);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->nodes().size(), 3u) << ir::to_text(*split);
}

// MaxViT's grid departition: [B, P*P, G, C] swapped to [B, G, P*P, C], viewed as
// [B, gh, gw, P, P, C], permuted to [B, C, gh, P, gw, P], viewed as [B, C, H, W]: two copies,
// over factors of the input's dims (P*P -> P, P; G -> gh, gw), so one Reshape / Transpose /
// Reshape. A dynamic batch too (-1 in the new Reshapes). What stays: a chain with one Transpose
// (already one copy), factors that do not line up (a window departition [.., 8, 7] read back as
// [.., 7, 8]: not an axis permutation), and a link read by another node as well.
TEST(PassesCleanup, SimplifyAlgebraFoldsChainsThatSplitAxesIntoOneTranspose) {
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto simplify = [&](const std::string &text, bool expect_change) {
    return run_pass(*pass, text, ctx, expect_change, /*then_remove_dead=*/true);
  };
  const auto count = count_ops;
  for (const std::string batch : {"2", "batch"}) {
    SCOPED_TRACE("batch " + batch);
    const std::string lead = batch == "2" ? "2" : "-1";
    const std::string grid = R"(graph g {
    opset "" 17
    input %x: f32[)" + batch + R"(,4,6,8]
    init %s6: i64[6] = [)" + lead + R"(, 2, 3, 2, 2, 8]
    init %s4: i64[4] = [)" + lead + R"(, 8, 4, 6]
    %sw = Transpose {perm=[0, 2, 1, 3]}(%x)
    %v = Reshape(%sw, %s6)
    %p = Transpose {perm=[0, 5, 1, 3, 2, 4]}(%v)
    %y0 = Reshape(%p, %s4)
    %y = Relu(%y0)
    output %y
  })";
    auto g = simplify(grid, true);
    ASSERT_TRUE(g);
    EXPECT_EQ(count(*g, "Transpose"), 1) << ir::to_text(*g);
    expect_same_outputs(grid, *g);
  }
  // One Transpose in the chain (a head split): left for the attention passes.
  auto heads = simplify(R"(graph g {
    opset "" 17
    input %x: f32[2,4,16]
    init %s4: i64[4] = [2, 4, 2, 8]
    init %s3: i64[3] = [2, 2, 32]
    %v = Reshape(%x, %s4)
    %t = Transpose {perm=[0, 2, 1, 3]}(%v)
    %w = Reshape(%t, %s3)
    %y = Relu(%w)
    output %y
  })", false);
  ASSERT_TRUE(heads);
  EXPECT_EQ(count(*heads, "Transpose"), 1);
  // Window departition to [B, C, 56, 56] ([B, C, 8, 7, 8, 7]), then the grid partition's
  // [B, C, 7, 8, 7, 8]: 8·7 read as 7·8 is no factor of an atom; both copies stay.
  auto mixed = simplify(R"(graph g {
    opset "" 17
    input %x: f32[1,4,49,2]
    init %s6: i64[6] = [1, 2, 2, 7, 7, 2]
    init %s6b: i64[6] = [1, 2, 7, 2, 7, 2]
    %v = Reshape(%x, %s6)
    %p = Transpose {perm=[0, 5, 1, 3, 2, 4]}(%v)
    %w = Reshape(%p, %s6b)
    %q = Transpose {perm=[0, 2, 4, 3, 5, 1]}(%w)
    %y = Relu(%q)
    output %y
  })", false);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(count(*mixed, "Transpose"), 2);
  // The swapped tensor is also a graph output: folding would copy it twice.
  auto shared = simplify(R"(graph g {
    opset "" 17
    input %x: f32[2,4,6,8]
    init %s6: i64[6] = [2, 2, 3, 2, 2, 8]
    init %s4: i64[4] = [2, 8, 4, 6]
    %sw = Transpose {perm=[0, 2, 1, 3]}(%x)
    %v = Reshape(%sw, %s6)
    %p = Transpose {perm=[0, 5, 1, 3, 2, 4]}(%v)
    %y0 = Reshape(%p, %s4)
    %y = Relu(%y0)
    %z = Sigmoid(%sw)
    output %y
    output %z
  })", false);
  ASSERT_TRUE(shared);
  EXPECT_EQ(count(*shared, "Transpose"), 2);
}

TEST(PassesCleanup, SimplifyAlgebraMergesAddSubConstantChains) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,2]
    init %a: f32[2] = [1, 2]
    init %b: f32[2] = [0.5, 0.5]
    init %c: f32[2] = [4, 8]
    %t = Add(%a, %x)
    %u = Sub(%t, %b)
    %y = Sub(%c, %u) @last
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  // y = c - ((a + x) - b) = (c - a + b) - x = [3.5, 6.5] - x
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[2,2]
    init %last_const: f32[2] = [3.5, 6.5]
    %y = Sub(%last_const, %x) @last
    output %y
  })");
  expect_same_outputs(before, *g);
}

// BERT's token-type embedding: a [2, 3] table gathered by a constant [1, 4] index row expanded
// over the batch. The Gather moves inside the Expand (a 4-row gather of constants, which
// fold_constants folds), and the Add broadcasts the rows itself, so no [b, 4, 3] tensor is
// gathered or expanded.
TEST(PassesCleanup, SimplifyAlgebraGathersConstantRowsBeforeExpanding) {
  const std::string before = R"(graph g {
    opset "" 17
    input %ids: i64[b,4]
    input %x: f32[b,4,3]
    init %w: f32[2,3] = [0.5, -1, 2, 3, -0.25, 4]
    init %c: i64[1,4] = [0, 1, 1, 0]
    %s = Shape(%ids)
    %e = Expand(%c, %s)
    %t = Gather(%w, %e) @tt
    %y = Add(%x, %t) @add
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  const ir::Node *add = nullptr;
  for (const auto &n : g->nodes()) {
    EXPECT_NE(n->op_type(), "Expand") << "the Add broadcasts the rows itself";
    if (n->op_type() == "Add")
      add = n.get();
  }
  ASSERT_NE(add, nullptr);
  const ir::Node *rows = add->input(1)->producer();
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->op_type(), "Gather");
  EXPECT_EQ(rows->input(1)->name(), "c");
  EXPECT_EQ(add->input(1)->shape().to_string(), "[1,4,3]");
  expect_same_outputs(before, *g);

  // Without the Add (the gathered rows are an output) the Expand stays, after the rows.
  const std::string as_output = R"(graph g {
    opset "" 17
    input %ids: i64[b,4]
    init %w: f32[2,3] = [0.5, -1, 2, 3, -0.25, 4]
    init %c: i64[1,4] = [0, 1, 1, 0]
    %s = Shape(%ids)
    %e = Expand(%c, %s)
    %t = Gather(%w, %e) @tt
    output %t
  })";
  PassContext ctx2;
  auto g2 = run_pass(*pass, as_output, ctx2, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g2);
  ASSERT_EQ(g2->outputs()[0]->name(), "t");
  EXPECT_EQ(g2->outputs()[0]->producer()->op_type(), "Expand");
  EXPECT_EQ(g2->outputs()[0]->shape().to_string(), "[b,4,3]");
  expect_same_outputs(as_output, *g2);

  // A fixed batch: the Expand was folded into a constant [2, 4] index tensor, equal along axis
  // 0. One row of it is gathered, and the Add broadcasts it.
  const std::string folded = R"(graph g {
    opset "" 17
    input %x: f32[2,4,3]
    init %w: f32[2,3] = [0.5, -1, 2, 3, -0.25, 4]
    init %c: i64[2,4] = [0, 1, 1, 0, 0, 1, 1, 0]
    %t = Gather(%w, %c) @tt
    %y = Add(%x, %t) @add
    output %y
  })";
  PassContext ctx3;
  auto g3 = run_pass(*pass, folded, ctx3, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g3);
  const ir::Node *add3 = g3->outputs()[0]->producer();
  ASSERT_NE(add3, nullptr);
  EXPECT_EQ(add3->input(1)->shape().to_string(), "[1,4,3]");
  ASSERT_NE(add3->input(1)->producer(), nullptr);
  EXPECT_EQ(add3->input(1)->producer()->input(1)->shape().to_string(), "[1,4]");
  expect_same_outputs(folded, *g3);
}

// An Expand operand stays where dropping it would change the op's output shape, or where the
// indices are not a constant (a gather of data rows per input index; the table has a row for
// every index the test's random inputs hold, 1..7).
TEST(PassesCleanup, SimplifyAlgebraKeepsExpandsThatWiden) {
  const std::string before = R"(graph g {
    opset "" 17
    input %y: f32[1,3]
    input %z: f32[1,3]
    input %ids: i64[1,4]
    init %w: f32[8,3] = [0.5, -1, 2, 3, -0.25, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    init %s: i64[2] = [5, 3]
    init %s2: i64[2] = [2, 4]
    %e = Expand(%y, %s)
    %sum = Add(%e, %z) @widen
    %ei = Expand(%ids, %s2)
    %rows = Gather(%w, %ei) @per_input
    init %k: i64[2,2] = [0, 1, 1, 0]
    %rows2 = Gather(%w, %k) @no_repeat
    output %sum
    output %rows
    output %rows2
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, false);
  ASSERT_TRUE(g);
  expect_same_outputs(before, *g);
}

// GatherND with constant indices that list the data's elements in order (BERT's dynamo export
// of mask[:, None, None, :]) is a Reshape; indices out of order, repeated or partial are not.
TEST(PassesCleanup, SimplifyAlgebraTurnsAnIdentityGatherNDIntoAReshape) {
  const std::string before = R"(graph g {
    opset "" 17
    input %m: f32[2,3]
    init %i: i64[2,1,3,2] = [0, 0, 0, 1, 0, 2, 1, 0, 1, -2, 1, 2]
    %y = GatherND(%m, %i) @nd
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->outputs()[0]->producer()->op_type(), "Reshape");
  EXPECT_EQ(g->outputs()[0]->shape().to_string(), "[2,1,3]");
  expect_same_outputs(before, *g);

  for (const std::string idx : {"[0, 0, 0, 2, 0, 1, 1, 0, 1, 1, 1, 2]",    // out of order
                                "[0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 1]"}) {  // a repeat
    const std::string other = R"(graph g {
      opset "" 17
      input %m: f32[2,3]
      init %i: i64[2,1,3,2] = )" + idx + R"(
      %y = GatherND(%m, %i) @nd
      output %y
    })";
    PassContext c2;
    auto g2 = run_pass(*pass, other, c2, false);
    ASSERT_TRUE(g2) << idx;
  }
  const std::string rows = R"(graph g {
    opset "" 17
    input %m: f32[2,3]
    init %i: i64[2,1] = [0, 1]
    %y = GatherND(%m, %i) @rows
    output %y
  })";
  PassContext c3;
  ASSERT_TRUE(run_pass(*pass, rows, c3, false));  // whole rows: a copy, but not full-rank tuples
}

TEST(PassesCleanup, SimplifyAlgebraFoldsPerChannelScalesIntoConv) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[1,1,2,2]
    init %w: f32[2,1,1,1] = [1, 2]
    init %bias: f32[2] = [0.5, -1]
    init %s: f32[2,1,1] = [3, 0.5]
    %c = Conv(%x, %w, %bias)
    %y = Mul(%s, %c)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  // w*s = [3, 1], bias*s = [1.5, -0.5]; the Conv takes the output name y.
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[1,1,2,2]
    init %w_scaled: f32[2,1,1,1] = [3, 1]
    init %bias_scaled: f32[2] = [1.5, -0.5]
    %y = Conv(%x, %w_scaled, %bias_scaled)
    output %y
  })");
  expect_same_outputs(before, *g);
}

TEST(PassesCleanup, SimplifyAlgebraFoldsColumnDivisorsIntoMatMulAndGemm) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[3,2]
    init %w: f32[2,2] = [1, 2, 3, 4]
    init %d: f32[2] = [2, 4]
    init %gw: f32[2,2] = [1, 2, 3, 4]
    init %gc: f32[2] = [1, 1]
    %m = MatMul(%x, %w)
    %y = Div(%m, %d)
    %g = Gemm {transB=1, alpha=2.0}(%x, %gw, %gc)
    %z = Mul(%g, %d)
    output %y
    output %z
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  // MatMul: columns of w divided by [2, 4] → [0.5, 0.5, 1.5, 1].
  // Gemm transB: rows of gw scaled by [2, 4] → [2, 4, 12, 16]; C scaled → [2,
  // 4].
  expect_graph(*g, R"(graph g {
    opset "" 17
    input %x: f32[3,2]
    init %w_scaled: f32[2,2] = [0.5, 0.5, 1.5, 1]
    init %gw_scaled: f32[2,2] = [2, 4, 12, 16]
    init %gc_scaled: f32[2] = [2, 4]
    %y = MatMul(%x, %w_scaled)
    %z = Gemm {alpha=2.0, transB=1}(%x, %gw_scaled, %gc_scaled)
    output %y
    output %z
  })");
  expect_same_outputs(before, *g);
}

// Whisper's q: the scale after the biased projection moves through the bias Add, then folds
// into the weights; the cleanup group runs simplify_algebra to a fixed point.
TEST(PassesCleanup, SimplifyAlgebraFoldsAScaleBehindTheBiasAdd) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[3,2]
    init %w: f32[2,2] = [1, 2, 3, 4]
    init %b: f32[2] = [1, -2]
    init %s: f32[] = [0.5]
    %m = MatMul(%x, %w)
    %a = Add(%b, %m)
    %y = Mul(%a, %s)
    output %y
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, true, /*then_remove_dead=*/true);
  ASSERT_TRUE(g);
  auto again = pass->run(*g, ctx);  // the Mul now follows the MatMul: it folds
  ASSERT_TRUE(again.ok() && *again);
  ASSERT_TRUE(make_remove_dead_nodes()->run(*g, ctx).ok());
  std::string ops;
  for (const auto& n : g->nodes()) ops += n->op_type() + " ";
  EXPECT_EQ(ops, "MatMul Add ");
  expect_same_outputs(before, *g);
  // The projection read elsewhere too: nothing moves.
  std::string shared = before;
  shared.replace(shared.find("    output %y"), 0, "    output %m\n");
  auto g2 = run_pass(*pass, shared, ctx, false);
  ASSERT_TRUE(g2);
}

TEST(PassesCleanup, SimplifyAlgebraRefusesScalesThatMixChannelsOrShareOutputs) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[3,2]
    init %w: f32[2,2] = [1, 2, 3, 4]
    init %rows: f32[3,1] = [1, 2, 3]
    init %cols: f32[2] = [2, 3]
    %m = MatMul(%x, %w)
    %y = Mul(%m, %rows)
    %m2 = MatMul(%x, %w)
    %z = Mul(%m2, %cols)
    %q = Relu(%m2)
    output %y
    output %z
    output %q
  })";
  PassContext ctx;
  auto pass = make_simplify_algebra();
  auto g = run_pass(*pass, before, ctx, false);
  ASSERT_TRUE(g);
  EXPECT_TRUE(has_note(ctx, "not per output channel"));
  EXPECT_TRUE(has_note(ctx, "other readers"));
}

// ---- the default pipeline
// --------------------------------------------------------------------

TEST(PassesCleanup, DefaultPipelineCleansAnExporterStyleGraph) {
  const std::string before = R"(graph g {
    opset "" 17
    input %x: f32[2,3,4]
    init %w: f32[12,5] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60]
    init %zero: i64[] = [0]
    init %minus1: i64[1] = [-1]
    init %half: f32[] = [0.5]
    %i = Identity(%x)
    %sh = Shape(%i)
    %b = Gather {axis=0}(%sh, %zero)
    %b1 = Unsqueeze(%b, %zero)
    %sh2 = Shape(%i)
    %b2 = Gather {axis=0}(%sh2, %zero)
    %b3 = Unsqueeze(%b2, %zero)
    %target = Concat {axis=0}(%b1, %minus1)
    %unused = Concat {axis=0}(%b3, %minus1)
    %r = Reshape(%i, %target)
    %m = MatMul(%r, %w)
    %s = Mul(%m, %half)
    %y = Relu(%s)
    output %y
  })";
  auto g = parse(before);
  ASSERT_TRUE(g);
  PassContext ctx;
  PipelineOptions opts;
  opts.verify = true;
  Status s = default_pipeline().run(*g, opts, ctx);
  ASSERT_TRUE(s.ok()) << s.to_string();
  // The shape subgraph folds to [2, -1], the scale goes into the weights, and the
  // MatMul + Relu that remain become one fused GEMM with a Relu epilogue.
  const std::vector<std::string> ops = testing_util::op_list(*g);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "FusedGemm"}))
      << ir::to_text(*g);
  expect_same_outputs(before, *g);
  // Cleanup runs first (and again at the end, to drop weights the folds replaced).
  std::vector<std::string> names = default_pipeline().pass_names();
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 5),
            (std::vector<std::string>{
                "remove_noops", "fold_constants", "simplify_algebra",
                "eliminate_common_subexpressions", "remove_dead_nodes"}));
}

// The ONNX node suite through the default pipeline: every case the reference
// executor runs must give the same outputs after optimization. Needs the
// generated suite (CI: the conformance.generate fixture) in
// INGOT_NODE_TESTS_DIR.
TEST(PassesCleanup, DefaultPipelineKeepsNodeSuiteOutputs) {
  const char *dir = std::getenv("INGOT_NODE_TESTS_DIR");
  if (!dir || !*dir)
    GTEST_SKIP() << "set INGOT_NODE_TESTS_DIR to the generated ONNX node suite "
                    "(e.g. <build>/onnx-node-tests/node)";
  namespace fs = std::filesystem;
  std::vector<fs::path> cases;
  for (const auto &e : fs::directory_iterator(dir))
    if (fs::exists(e.path() / "model.onnx") &&
        fs::exists(e.path() / "test_data_set_0"))
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  ASSERT_FALSE(cases.empty()) << "no cases in " << dir;
  // ~100 cases by default; INGOT_NODE_TESTS_SAMPLE=N checks about N (0 = all).
  size_t sample = 100;
  if (const char *n = std::getenv("INGOT_NODE_TESTS_SAMPLE"))
    sample = std::strtoul(n, nullptr, 10);
  size_t stride = sample == 0 ? 1 : std::max<size_t>(1, cases.size() / sample);
  int checked = 0, skipped = 0, changed = 0;
  for (size_t c = 0; c < cases.size(); c += stride) {
    const fs::path &p = cases[c];
    auto ref = onnx::import_model_file((p / "model.onnx").string());
    auto opt = onnx::import_model_file((p / "model.onnx").string());
    if (!ref.ok() || !opt.ok()) {
      ++skipped;
      continue;
    }
    const ir::Graph &g = *ref->graph;
    std::map<std::string, Tensor> feeds;
    bool ok = true;
    for (size_t i = 0;; ++i) {
      fs::path f =
          p / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(f))
        break;
      auto t = onnx::load_tensor_proto_file(f.string());
      if (!t.ok() || i >= g.inputs().size()) {
        ok = false;
        break;
      }
      feeds[g.inputs()[i]->name()] = *t;
    }
    if (!ok) {
      ++skipped;
      continue;
    }
    cpu::Executor e1;
    auto want = e1.run(g, feeds);
    if (!want.ok()) {
      ++skipped;
      continue;
    }
    size_t nodes_before = opt->graph->nodes().size();
    PassContext ctx;
    PipelineOptions opts;
    opts.verify = true;
    Status s = default_pipeline().run(*opt->graph, opts, ctx);
    ASSERT_TRUE(s.ok()) << p.filename() << ": " << s.to_string();
    changed += opt->graph->nodes().size() != nodes_before;
    cpu::Executor e2;
    auto got = e2.run(*opt->graph, feeds);
    ASSERT_TRUE(got.ok()) << p.filename() << ": " << got.status().to_string();
    ASSERT_EQ(got->size(), want->size()) << p.filename();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ(opt->graph->outputs()[i]->name(), g.outputs()[i]->name())
          << p.filename();
      std::string why;
      EXPECT_TRUE(close((*got)[i], (*want)[i], &why))
          << p.filename() << " output " << i << ": " << why;
    }
    ++checked;
  }
  std::printf("[node suite] %d cases checked, %d skipped (not runnable on the "
              "reference), %d changed by the pipeline\n",
              checked, skipped, changed);
  EXPECT_GT(checked, static_cast<int>(std::min<size_t>(
                         cases.size(), sample == 0 ? cases.size() : sample)) /
                         2);
}

} // namespace
} // namespace ingot::passes
