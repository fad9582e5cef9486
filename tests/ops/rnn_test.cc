// Copyright ingot authors. Apache-2.0.
//
// rnn family: symbolic-shape inference, error cases, and small RNN/GRU/LSTM kernels (hidden
// and input size 1) whose expected values are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/executor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "../test_util.h"

namespace ingot {
namespace {

using test::f32;

using ir::Dim;
using ir::Shape;


void set_strings(ir::Attributes* a, const std::string& name, std::vector<std::string> v) {
  ir::Attribute at;
  at.type = ir::AttrType::kStrings;
  at.strings = std::move(v);
  a->set(name, std::move(at));
}

// An input with an empty name is an omitted optional input.
std::vector<Tensor> run_op(int64_t opset, const std::string& op,
                           const std::vector<std::pair<std::string, Tensor>>& ins, ir::Attributes attrs,
                           size_t num_outputs) {
  ir::Graph g;
  g.set_opset_import("", opset);
  std::vector<ir::Value*> in_vals;
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, t] : ins) {
    if (name.empty()) {
      in_vals.push_back(nullptr);
      continue;
    }
    in_vals.push_back(g.add_input(name, t.dtype(), Shape::from_concrete(t.shape())));
    feeds[name] = t;
  }
  std::vector<ir::Value*> outs;
  for (size_t i = 0; i < num_outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i)));
  g.add_node(op, in_vals, outs, std::move(attrs));
  for (auto* o : outs) g.add_output(o);
  Status s = ir::infer_graph(g);
  EXPECT_TRUE(s.ok()) << s.message();
  cpu::Executor ex;
  auto r = ex.run(g, feeds);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

void expect_values(const Tensor& t, const Shape64& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.shape(), shape);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_f64(static_cast<int64_t>(i)), want[i], 1e-5) << i;
}

TEST(RnnInference, LstmBidirectionalKeepsSymbolicDims) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("S"), Dim::symbol("N"), Dim(4)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(2), Dim(12), Dim(4)});
  auto* r = g.add_input("r", DataType::kFloat32, Shape{Dim(2), Dim(12), Dim(3)});
  auto* y = g.add_value("y");
  auto* yh = g.add_value("yh");
  auto* yc = g.add_value("yc");
  ir::Attributes a;
  a.set_string("direction", "bidirectional");
  ir::Node* n = g.add_node("LSTM", {x, w, r}, {y, yh, yc}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[S,2,N,3]");
  EXPECT_EQ(yh->shape().to_string(), "[2,N,3]");
  EXPECT_EQ(yc->shape().to_string(), "[2,N,3]");
}

TEST(RnnInference, GruLayout1AndOmittedY) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim::symbol("S"), Dim(4)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape::unknown_rank());
  auto* r = g.add_input("r", DataType::kFloat32, Shape::unknown_rank());
  auto* yh = g.add_value("yh");
  ir::Attributes a;
  a.set_int("layout", 1);
  a.set_int("hidden_size", 5);
  ir::Node* n = g.add_node("GRU", {x, w, r}, {nullptr, yh}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(yh->shape().to_string(), "[N,1,5]");
}

TEST(RnnInference, BadDirectionAndDirectionCountAreErrors) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(2), Dim(1), Dim(4)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(1), Dim(3), Dim(4)});
  auto* r = g.add_input("r", DataType::kFloat32, Shape{Dim(1), Dim(3), Dim(3)});
  ir::Attributes a;
  a.set_string("direction", "sideways");
  ir::Node* n1 = g.add_node("RNN", {x, w, r}, {g.add_value("y1")}, a, "bad_dir");
  Status s1 = ir::infer_node(*n1);
  EXPECT_FALSE(s1.ok());
  EXPECT_NE(s1.message().find("bad_dir"), std::string::npos);
  ir::Attributes b;
  b.set_string("direction", "bidirectional");  // W has 1 direction
  ir::Node* n2 = g.add_node("RNN", {x, w, r}, {g.add_value("y2")}, b, "bad_count");
  EXPECT_FALSE(ir::infer_node(*n2).ok());
}

// RNN, Relu, W = 1, R = 0.5, no bias: h_t = relu(x_t + 0.5 h_{t-1}).
// X is [seq 3, batch 2, 1]: batch 0 = {1, 2, 3} (full length), batch 1 = {1, 4, 100} (length 2).
TEST(RnnKernels, ReluWithSequenceLensForwardAndReverse) {
  Tensor x = f32({3, 2, 1}, {1, 1, 2, 4, 3, 100});
  Tensor w = f32({1, 1, 1}, {1});
  Tensor r = f32({1, 1, 1}, {0.5f});
  Tensor lens = Tensor::from_vector(DataType::kInt32, {2}, std::vector<int32_t>{3, 2});
  ir::Attributes a;
  set_strings(&a, "activations", {"Relu"});
  // Forward: batch 0: 1, 2 + 0.5 = 2.5, 3 + 1.25 = 4.25. batch 1: 1, 4 + 0.5 = 4.5, then zero.
  auto out = run_op(14, "RNN", {{"x", x}, {"w", w}, {"r", r}, {"", Tensor()}, {"lens", lens}}, a, 2);
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[0], {3, 1, 2, 1}, {1, 1, 2.5, 4.5, 4.25, 0});
  expect_values(out[1], {1, 2, 1}, {4.25, 4.5});
  // Reverse: batch 0: t2: 3, t1: 2 + 1.5 = 3.5, t0: 1 + 1.75 = 2.75.
  // batch 1 starts at t1: 4, t0: 1 + 2 = 3; t2 stays zero.
  a.set_string("direction", "reverse");
  out = run_op(14, "RNN", {{"x", x}, {"w", w}, {"r", r}, {"", Tensor()}, {"lens", lens}}, a, 2);
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[0], {3, 1, 2, 1}, {2.75, 3, 3.5, 4, 3, 0});
  expect_values(out[1], {1, 2, 1}, {2.75, 3});
}

// Affine(alpha 2, beta 1) with clip 0.5: h = 2 * clip(x) + 1. x = 1 -> 2; x = -3 -> 0.
TEST(RnnKernels, AffineActivationWithClip) {
  Tensor x = f32({2, 1, 1}, {1, -3});
  Tensor w = f32({1, 1, 1}, {1});
  Tensor r = f32({1, 1, 1}, {0});
  ir::Attributes a;
  set_strings(&a, "activations", {"Affine"});
  a.set_floats("activation_alpha", {2});
  a.set_floats("activation_beta", {1});
  a.set_float("clip", 0.5f);
  auto out = run_op(7, "RNN", {{"x", x}, {"w", w}, {"r", r}}, a, 1);
  ASSERT_EQ(out.size(), 1u);
  expect_values(out[0], {2, 1, 1, 1}, {2, 0});
}

// LSTM with input_forget, W rows [i, o, f, c] = [0, 0, 0, 1], R = 0, x = 2, C0 = 4,
// activations Sigmoid, Affine(1, 0) = identity, Affine(2, 0) = 2x (alphas consumed in order):
// i = o = sigmoid(0) = 0.5, f = 1 - i = 0.5, c~ = 2, C = 0.5 * 4 + 0.5 * 2 = 3, H = 0.5 * 6 = 3.
TEST(RnnKernels, LstmInputForgetAndAlphaOrder) {
  Tensor x = f32({1, 1, 1}, {2});
  Tensor w = f32({1, 4, 1}, {0, 0, 0, 1});
  Tensor r = f32({1, 4, 1}, {0, 0, 0, 0});
  Tensor c0 = f32({1, 1, 1}, {4});
  ir::Attributes a;
  a.set_int("input_forget", 1);
  set_strings(&a, "activations", {"Sigmoid", "Affine", "Affine"});
  a.set_floats("activation_alpha", {1, 2});
  a.set_floats("activation_beta", {0, 0});
  auto out = run_op(7, "LSTM",
                    {{"x", x}, {"w", w}, {"r", r}, {"", Tensor()}, {"", Tensor()}, {"", Tensor()}, {"c0", c0}},
                    a, 3);
  ASSERT_EQ(out.size(), 3u);
  expect_values(out[0], {1, 1, 1, 1}, {3});
  expect_values(out[1], {1, 1, 1}, {3});
  expect_values(out[2], {1, 1, 1}, {3});
}

// GRU, W rows [z, r, h] = [0, 0, 1], R rows = [0, 0, 1], Rbh = 2, x = 1, h0 = 1:
// z = r = 0.5. linear_before_reset: h~ = tanh(1 + 0.5 * (1 + 2)) = tanh(2.5);
// default: h~ = tanh(1 + 1 * (0.5 * 1) + 2) = tanh(3.5). H = 0.5 h~ + 0.5 * 1.
TEST(RnnKernels, GruLinearBeforeReset) {
  Tensor x = f32({1, 1, 1}, {1});
  Tensor w = f32({1, 3, 1}, {0, 0, 1});
  Tensor r = f32({1, 3, 1}, {0, 0, 1});
  Tensor b = f32({1, 6}, {0, 0, 0, 0, 0, 2});
  Tensor h0 = f32({1, 1, 1}, {1});
  std::vector<std::pair<std::string, Tensor>> ins = {
      {"x", x}, {"w", w}, {"r", r}, {"b", b}, {"", Tensor()}, {"h0", h0}};
  ir::Attributes a;
  a.set_int("linear_before_reset", 1);
  auto out = run_op(7, "GRU", ins, a, 2);
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[1], {1, 1, 1}, {0.5 * std::tanh(2.5) + 0.5});
  out = run_op(7, "GRU", ins, {}, 2);
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[1], {1, 1, 1}, {0.5 * std::tanh(3.5) + 0.5});
}

// layout 1, bidirectional RNN (identity via Affine default alpha 1, beta 0), W = 1, R = 1:
// X [batch 1, seq 2, 1] = {1, 2}. forward: 1, 3. reverse: t1: 2, t0: 1 + 2 = 3.
// Y [batch, seq, dirs, hidden] = {1, 3, 3, 2}; Y_h [batch, dirs, hidden] = {3, 3}.
TEST(RnnKernels, BidirectionalLayout1) {
  Tensor x = f32({1, 2, 1}, {1, 2});
  Tensor w = f32({2, 1, 1}, {1, 1});
  Tensor r = f32({2, 1, 1}, {1, 1});
  ir::Attributes a;
  a.set_int("layout", 1);
  a.set_string("direction", "bidirectional");
  set_strings(&a, "activations", {"Affine", "Affine"});
  auto out = run_op(14, "RNN", {{"x", x}, {"w", w}, {"r", r}}, a, 2);
  ASSERT_EQ(out.size(), 2u);
  expect_values(out[0], {1, 2, 2, 1}, {1, 3, 3, 2});
  expect_values(out[1], {1, 2, 1}, {3, 3});
}

TEST(RnnKernels, SequenceLensOutOfRangeIsAnError) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(2), Dim(1), Dim(1)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(1), Dim(1), Dim(1)});
  auto* r = g.add_input("r", DataType::kFloat32, Shape{Dim(1), Dim(1), Dim(1)});
  auto* l = g.add_input("l", DataType::kInt32, Shape{Dim(1)});
  auto* y = g.add_value("y");
  g.add_node("RNN", {x, w, r, nullptr, l}, {y}, {});
  g.add_output(y);
  ASSERT_TRUE(ir::infer_graph(g).ok());
  cpu::Executor ex;
  std::map<std::string, Tensor> feeds = {{"x", f32({2, 1, 1}, {1, 2})},
                                         {"w", f32({1, 1, 1}, {1})},
                                         {"r", f32({1, 1, 1}, {1})},
                                         {"l", Tensor::from_vector(DataType::kInt32, {1}, std::vector<int32_t>{5})}};
  EXPECT_FALSE(ex.run(g, feeds).ok());
}

}  // namespace
}  // namespace ingot
