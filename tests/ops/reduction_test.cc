// Copyright ingot authors. Apache-2.0.
//
// Reduction / normalization family: symbolic-shape inference, error cases and a few kernel
// behaviours the ONNX node suite covers thinly. Expected values are computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/executor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "../test_util.h"

namespace ingot {
namespace {

using test::f32;
using test::i64;

using ir::Dim;
using ir::Shape;


TEST(ReductionInference, ReduceSumKeepsSymbolicDims) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* axes = g.add_initializer("axes", i64({1}, {-2}));
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_int("keepdims", 0);
  ir::Node* n = g.add_node("ReduceSum", {x, axes}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
  EXPECT_EQ(y->shape().to_string(), "[N,4]");
}

TEST(ReductionInference, UnknownAxesWithKeepdimsGiveKnownRank) {
  ir::Graph g;
  g.set_opset_import("", 18);
  auto* x = g.add_input("x", DataType::kFloat16, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* axes = g.add_input("axes", DataType::kInt64, Shape{Dim(1)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("ReduceMean", {x, axes}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->dtype(), DataType::kFloat16);
  EXPECT_EQ(y->shape().to_string(), "[?,?,?]");
}

TEST(ReductionInference, ArgMaxRejectsBadAxisAndGivesInt64) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("B"), Dim(5)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_int("axis", 2);
  ir::Node* bad = g.add_node("ArgMax", {x}, {y}, a, "bad");
  EXPECT_FALSE(ir::infer_node(*bad).ok());

  auto* y2 = g.add_value("y2");
  ir::Attributes b;
  b.set_int("axis", -1);
  b.set_int("keepdims", 0);
  ir::Node* good = g.add_node("ArgMax", {x}, {y2}, b, "good");
  ASSERT_TRUE(ir::infer_node(*good).ok());
  EXPECT_EQ(y2->dtype(), DataType::kInt64);
  EXPECT_EQ(y2->shape().to_string(), "[B]");
}

TEST(ReductionInference, LayerNormStatsFollowAxisAndStashType) {
  ir::Graph g;
  g.set_opset_import("", 17);
  auto* x = g.add_input("x", DataType::kFloat16, Shape{Dim::symbol("N"), Dim(7), Dim(5)});
  auto* s = g.add_input("s", DataType::kFloat16, Shape{Dim(7), Dim(5)});
  auto* y = g.add_value("y");
  auto* m = g.add_value("m");
  auto* is = g.add_value("is");
  ir::Attributes a;
  a.set_int("axis", 1);
  ir::Node* n = g.add_node("LayerNormalization", {x, s}, {y, m, is}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,7,5]");
  EXPECT_EQ(m->shape().to_string(), "[N,1,1]");
  EXPECT_EQ(m->dtype(), DataType::kFloat32);  // stash_type defaults to float
  EXPECT_EQ(is->dtype(), DataType::kFloat32);
}

TEST(ReductionInference, LossOutputShapes) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(2)});
  auto* t = g.add_input("t", DataType::kInt64, Shape{Dim::symbol("N"), Dim(2)});
  auto* l = g.add_value("l");
  auto* lp = g.add_value("lp");
  ir::Attributes a;
  a.set_string("reduction", "none");
  ir::Node* n = g.add_node("SoftmaxCrossEntropyLoss", {x, t}, {l, lp}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(l->shape().to_string(), "[N,2]");
  EXPECT_EQ(lp->shape().to_string(), "[N,3,2]");
}

// Runs a single-node graph with the given inputs (all graph inputs).
std::vector<Tensor> run_one(int64_t opset, const std::string& op, const std::vector<std::pair<std::string, Tensor>>& ins,
                            ir::Attributes attrs, size_t num_outputs = 1) {
  ir::Graph g;
  g.set_opset_import("", opset);
  std::vector<ir::Value*> in_vals;
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, t] : ins) {
    in_vals.push_back(g.add_input(name, t.dtype(), Shape::from_concrete(t.shape())));
    feeds[name] = t;
  }
  std::vector<ir::Value*> outs;
  for (size_t i = 0; i < num_outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i)));
  g.add_node(op, in_vals, outs, attrs);
  for (auto* o : outs) g.add_output(o);
  EXPECT_TRUE(ir::infer_graph(g).ok());
  cpu::Executor ex;
  auto r = ex.run(g, feeds);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

TEST(ReductionKernels, EmptySetReductionsGiveIdentity) {
  Tensor x = Tensor::zeros(DataType::kFloat32, {2, 0, 3}).value();
  Tensor axes = i64({1}, {1});
  auto mx = run_one(18, "ReduceMax", {{"x", x}, {"axes", axes}}, {});
  ASSERT_EQ(mx.size(), 1u);
  EXPECT_EQ(mx[0].shape(), (Shape64{2, 1, 3}));
  EXPECT_TRUE(std::isinf(mx[0].get_f64(0)) && mx[0].get_f64(0) < 0);
  auto pr = run_one(18, "ReduceProd", {{"x", x}, {"axes", axes}}, {});
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_EQ(pr[0].get_f64(5), 1.0);
  auto lse = run_one(18, "ReduceLogSumExp", {{"x", x}, {"axes", axes}}, {});
  ASSERT_EQ(lse.size(), 1u);
  EXPECT_TRUE(std::isinf(lse[0].get_f64(0)) && lse[0].get_f64(0) < 0);
}

TEST(ReductionKernels, LogSumExpIsStableForLargeValues) {
  ir::Attributes a;
  a.set_int("keepdims", 0);
  auto r = run_one(18, "ReduceLogSumExp", {{"x", f32({2}, {1000.0f, 1000.0f})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NEAR(r[0].get_f64(0), 1000.0 + std::log(2.0), 1e-3);
}

TEST(ReductionKernels, ReduceSumInt64IsExact) {
  // 2^53 + 1 is not representable as a double.
  const int64_t big = (int64_t{1} << 53);
  ir::Attributes a;
  a.set_int("keepdims", 0);
  auto r = run_one(13, "ReduceSum", {{"x", i64({2}, {big, 1})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].get_i64(0), big + 1);
}

TEST(ReductionKernels, CumSumExclusiveReverse) {
  ir::Attributes a;
  a.set_int("exclusive", 1);
  a.set_int("reverse", 1);
  auto r = run_one(14, "CumSum", {{"x", f32({3}, {1, 2, 3})}, {"axis", i64({}, {0})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].to_f64_vector(), (std::vector<double>{5, 3, 0}));
}

TEST(ReductionKernels, SoftmaxBeforeOpset13CoercesTo2D) {
  // axis=0 on [2,2]: one softmax over all four values.
  ir::Attributes a;
  a.set_int("axis", 0);
  auto r = run_one(11, "Softmax", {{"x", f32({2, 2}, {0, 0, 0, 0})}}, a);
  ASSERT_EQ(r.size(), 1u);
  for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(static_cast<float>(r[0].get_f64(i)), 0.25f);
}

TEST(ReductionKernels, ArgMinSelectLastIndex) {
  ir::Attributes a;
  a.set_int("select_last_index", 1);
  a.set_int("keepdims", 0);
  auto r = run_one(13, "ArgMin", {{"x", f32({4}, {2, 1, 3, 1})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].get_i64(0), 3);
}

TEST(ReductionKernels, BatchNormTrainingModeUpdatesRunningStats) {
  // x = {1, 3} over N=2, C=1: batch mean 2, biased var 1. epsilon 0.
  ir::Attributes a;
  a.set_int("training_mode", 1);
  a.set_float("epsilon", 0.0f);
  a.set_float("momentum", 0.9f);
  auto r = run_one(15, "BatchNormalization",
                   {{"x", f32({2, 1, 1}, {1, 3})}, {"s", f32({1}, {1})}, {"b", f32({1}, {0})},
                    {"m", f32({1}, {0})}, {"v", f32({1}, {0})}},
                   a, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_FLOAT_EQ(static_cast<float>(r[0].get_f64(0)), -1.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(r[0].get_f64(1)), 1.0f);
  EXPECT_NEAR(r[1].get_f64(0), 0.2, 1e-6);  // 0 * 0.9 + 2 * 0.1
  EXPECT_NEAR(r[2].get_f64(0), 0.1, 1e-6);  // 0 * 0.9 + 1 * 0.1
}

TEST(ReductionKernels, GroupNormOpset18ScalesPerGroup) {
  // Groups {0,2} and {4,6} both normalize to {-1,1}; scale {1,2}, bias {0,10} per group.
  ir::Attributes a;
  a.set_int("num_groups", 2);
  a.set_float("epsilon", 0.0f);
  auto r = run_one(18, "GroupNormalization",
                   {{"x", f32({1, 4, 1}, {0, 2, 4, 6})}, {"s", f32({2}, {1, 2})}, {"b", f32({2}, {0, 10})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].to_f64_vector(), (std::vector<double>{-1, 1, 8, 12}));
}

TEST(ReductionKernels, NllLossMeanSkipsIgnoredTargets) {
  // x = log-probs [N=2, C=2]; targets {1, 0} with ignore_index 0 → only row 0 counts: -(-0.5).
  ir::Attributes a;
  a.set_int("ignore_index", 0);
  auto r = run_one(13, "NegativeLogLikelihoodLoss",
                   {{"x", f32({2, 2}, {-1.0f, -0.5f, -2.0f, -3.0f})}, {"t", i64({2}, {1, 0})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FLOAT_EQ(static_cast<float>(r[0].get_f64(0)), 0.5f);
}

TEST(ReductionKernels, NllLossRejectsOutOfRangeTarget) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(1), Dim(2)});
  auto* t = g.add_input("t", DataType::kInt64, Shape{Dim(1)});
  auto* l = g.add_value("l");
  g.add_node("NegativeLogLikelihoodLoss", {x, t}, {l});
  g.add_output(l);
  ASSERT_TRUE(ir::infer_graph(g).ok());
  cpu::Executor ex;
  auto r = ex.run(g, {{"x", f32({1, 2}, {-1, -1})}, {"t", i64({1}, {5})}});
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace ingot
