// Copyright ingot authors. Apache-2.0.
//
// Elementwise family: symbolic-shape inference, error cases and integer/edge behaviours the
// ONNX node suite covers thinly (legacy broadcast, wrapping, exact uint64, truncating Div,
// Mod sign rules, half-to-even Round, 0-sized broadcast). Expected values are by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

Tensor i32(Shape64 shape, std::vector<int32_t> v) { return Tensor::from_vector(DataType::kInt32, shape, v); }
Tensor u64(Shape64 shape, std::vector<uint64_t> v) { return Tensor::from_vector(DataType::kUInt64, shape, v); }
Tensor i8(Shape64 shape, std::vector<int8_t> v) { return Tensor::from_vector(DataType::kInt8, shape, v); }

/// Runs one node of `op` on the given inputs (graph inputs typed like the tensors).
Result<std::vector<Tensor>> run(const std::string& op, int64_t opset, const std::vector<Tensor>& inputs,
                                ir::Attributes attrs = {}) {
  ir::Graph g;
  g.set_opset_import("", opset);
  std::vector<ir::Value*> ins;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(g.add_input("x" + std::to_string(i), inputs[i].dtype(), Shape::from_concrete(inputs[i].shape())));
    ptrs.push_back(&inputs[i]);
  }
  ir::Node* n = g.add_node(op, ins, {g.add_value("y")}, std::move(attrs), "n");
  return cpu::run_node(*n, ptrs);
}

TEST(ElementwiseInference, AddBroadcastsSymbolicDims) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* a = g.add_input("a", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(1)});
  auto* b = g.add_input("b", DataType::kFloat32, Shape{Dim(4)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Add", {a, b}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
  EXPECT_EQ(y->shape().to_string(), "[N,3,4]");
}

TEST(ElementwiseInference, ComparisonGivesBoolAndMixedTypesAreRejected) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* a = g.add_input("a", DataType::kInt64, Shape{Dim::symbol("B"), Dim(2)});
  auto* b = g.add_input("b", DataType::kInt64, Shape{Dim(1)});
  auto* c = g.add_input("c", DataType::kFloat32, Shape{Dim(1)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Less", {a, b}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->dtype(), DataType::kBool);
  EXPECT_EQ(y->shape().to_string(), "[B,2]");
  ir::Node* bad = g.add_node("Mul", {a, c}, {g.add_value("y2")}, {}, "bad");
  EXPECT_FALSE(ir::infer_node(*bad).ok());
}

TEST(ElementwiseInference, IncompatibleShapesAndBadAttributesFail) {
  ir::Graph g;
  g.set_opset_import("", 20);
  auto* a = g.add_input("a", DataType::kFloat32, Shape{Dim(2), Dim(3)});
  auto* b = g.add_input("b", DataType::kFloat32, Shape{Dim(4)});
  EXPECT_FALSE(ir::infer_node(*g.add_node("Sub", {a, b}, {g.add_value("y")})).ok());
  ir::Attributes at;
  at.set_string("approximate", "erf");
  EXPECT_FALSE(ir::infer_node(*g.add_node("Gelu", {a}, {g.add_value("y2")}, at)).ok());
  // PRelu's slope must broadcast to X without growing it.
  auto* s = g.add_input("s", DataType::kFloat32, Shape{Dim(4), Dim(2), Dim(3)});
  EXPECT_FALSE(ir::infer_node(*g.add_node("PRelu", {a, s}, {g.add_value("y3")})).ok());
}

TEST(ElementwiseInference, WhereTakesBranchTypeAndThreeWayBroadcast) {
  ir::Graph g;
  g.set_opset_import("", 16);
  auto* c = g.add_input("c", DataType::kBool, Shape{Dim::symbol("N"), Dim(1)});
  auto* x = g.add_input("x", DataType::kInt32, Shape{Dim(5)});
  auto* z = g.add_input("z", DataType::kInt32, Shape{});
  auto* y = g.add_value("y");
  ASSERT_TRUE(ir::infer_node(*g.add_node("Where", {c, x, z}, {y})).ok());
  EXPECT_EQ(y->dtype(), DataType::kInt32);
  EXPECT_EQ(y->shape().to_string(), "[N,5]");
}

TEST(ElementwiseKernel, LegacyBroadcastAlignsAtAxis) {
  // opset 6, broadcast=1, axis=0: B[2] aligns with A's first dim of [2,3].
  ir::Attributes at;
  at.set_int("broadcast", 1);
  at.set_int("axis", 0);
  auto r = run("Add", 6, {f32({2, 3}, {0, 0, 0, 1, 1, 1}), f32({2}, {10, 20})}, at);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].shape(), (Shape64{2, 3}));
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{10, 10, 10, 21, 21, 21}));
}

TEST(ElementwiseKernel, IntegerDivTruncatesAndWraps) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  auto r = run("Div", 14, {i32({4}, {-7, 7, -7, mn}), i32({4}, {2, -2, -2, -1})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].to_i64_vector(), (std::vector<int64_t>{-3, -3, 3, mn}));
  EXPECT_FALSE(run("Div", 14, {i32({1}, {1}), i32({1}, {0})}).ok());
}

TEST(ElementwiseKernel, ModFollowsDivisorSignUnlessFmod) {
  auto r = run("Mod", 13, {i64({4}, {-7, 7, -7, 6}), i64({4}, {3, -3, -3, 3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].to_i64_vector(), (std::vector<int64_t>{2, -2, -1, 0}));
  ir::Attributes at;
  at.set_int("fmod", 1);
  auto f = run("Mod", 13, {f32({2}, {-7.5f, 5.5f}), f32({2}, {2, -2})}, at);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[0].to_f64_vector(), (std::vector<double>{-1.5, 1.5}));
  auto p = run("Mod", 28, {f32({2}, {-7.5f, 5.5f}), f32({2}, {2, -2})});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].to_f64_vector(), (std::vector<double>{0.5, -0.5}));
}

TEST(ElementwiseKernel, Uint64IsExact) {
  const uint64_t big = (1ULL << 63) + 1;
  auto s = run("Add", 14, {u64({1}, {big}), u64({1}, {(1ULL << 63) - 1})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].data<uint64_t>()[0], 0u);  // 2^64 wraps to 0
  auto e = run("Equal", 13, {u64({1}, {(1ULL << 53) + 1}), u64({1}, {1ULL << 53})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[0].data<uint8_t>()[0], 0);  // equal as doubles, not as integers
  auto m = run("Max", 13, {u64({2}, {~0ULL, 3}), u64({1}, {5})});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)[0].data<uint64_t>()[0], ~0ULL);
  EXPECT_EQ((*m)[0].data<uint64_t>()[1], 5u);
}

TEST(ElementwiseKernel, PowKeepsBaseType) {
  auto a = run("Pow", 15, {i64({3}, {3, 2, -2}), i64({3}, {3, -1, 3})});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0].dtype(), DataType::kInt64);
  EXPECT_EQ((*a)[0].to_i64_vector(), (std::vector<int64_t>{27, 0, -8}));
  auto b = run("Pow", 15, {i32({2}, {2, 9}), f32({2}, {0.5f, 0.5f})});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].dtype(), DataType::kInt32);
  EXPECT_EQ((*b)[0].to_i64_vector(), (std::vector<int64_t>{1, 3}));  // sqrt(2) truncates to 1
}

TEST(ElementwiseKernel, RoundIsHalfToEven) {
  auto r = run("Round", 11, {f32({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{0, 2, 2, -0.0, -2, 3}));
}

TEST(ElementwiseKernel, ClipAttributesBeforeOpset11AndInputsAfter) {
  ir::Attributes at;
  at.set_float("min", -1.0f);
  at.set_float("max", 2.0f);
  auto r = run("Clip", 6, {f32({3}, {-5, 0.5f, 7})}, at);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{-1, 0.5, 2}));
  auto m = run("Clip", 13, {i8({3}, {-128, 5, 127}), i8({}, {-3}), i8({}, {4})});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)[0].to_i64_vector(), (std::vector<int64_t>{-3, 4, 4}));
}

TEST(ElementwiseKernel, ZeroSizedBroadcastAndVariadicSum) {
  auto z = run("Mul", 14, {f32({0, 3}, {}), f32({1, 3}, {1, 2, 3})});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ((*z)[0].shape(), (Shape64{0, 3}));
  auto s = run("Sum", 13, {f32({2, 1}, {1, 2}), f32({3}, {10, 20, 30}), f32({}, {100})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].shape(), (Shape64{2, 3}));
  EXPECT_EQ((*s)[0].to_f64_vector(), (std::vector<double>{111, 121, 131, 112, 122, 132}));
}

TEST(ElementwiseKernel, BitShiftSignedAndOutOfRange) {
  ir::Attributes right;
  right.set_string("direction", "RIGHT");
  auto r = run("BitShift", 28, {i8({3}, {-8, -8, 64}), i8({3}, {1, 8, 9})}, right);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].to_i64_vector(), (std::vector<int64_t>{-4, -1, 0}));
  ir::Attributes left;
  left.set_string("direction", "LEFT");
  auto l = run("BitShift", 28, {i8({2}, {64, 3}), i8({2}, {1, -1})}, left);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)[0].to_i64_vector(), (std::vector<int64_t>{-128, 0}));  // 128 wraps to -128
}

TEST(ElementwiseKernel, GeluTanhApproximation) {
  ir::Attributes at;
  at.set_string("approximate", "tanh");
  auto r = run("Gelu", 20, {f32({2}, {0.0f, 1.0f})}, at);
  ASSERT_TRUE(r.ok());
  // 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.841192
  EXPECT_NEAR((*r)[0].get_f64(0), 0.0, 1e-7);
  EXPECT_NEAR((*r)[0].get_f64(1), 0.841192, 1e-5);
}

}  // namespace
}  // namespace ingot
