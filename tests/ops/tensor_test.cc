// Copyright ingot authors. Apache-2.0.
//
// Tensor (shape and data-movement) family: symbolic-shape inference, value propagation
// through shape subgraphs, error cases and kernel corner cases the ONNX node suite covers
// thinly. Expected values are computed by hand.
#include <gtest/gtest.h>

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


// Runs a one-node graph on `inputs` (named x0, x1, ...); returns the outputs.
Result<std::vector<Tensor>> run_one(const std::string& op, int64_t opset, std::vector<Tensor> inputs,
                                    size_t n_out, ir::Attributes attrs = {}) {
  ir::Graph g;
  g.set_opset_import("", opset);
  std::vector<ir::Value*> ins, outs;
  std::map<std::string, Tensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    ins.push_back(g.add_input(name, inputs[i].dtype(), Shape::from_concrete(inputs[i].shape())));
    feed[name] = inputs[i];
  }
  for (size_t i = 0; i < n_out; ++i) outs.push_back(g.add_value("y" + std::to_string(i)));
  g.add_node(op, ins, outs, attrs, "n");
  for (auto* o : outs) g.add_output(o);
  Status s = ir::infer_graph(g);
  if (!s.ok()) return s;
  cpu::Executor ex;
  return ex.run(g, feed);
}

TEST(TensorInference, ReshapeZeroCopiesSymbolAndMinusOneCancelsIt) {
  ir::Graph g;
  g.set_opset_import("", 14);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* s = g.add_initializer("s", i64({2}, {0, -1}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Reshape", {x, s}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,12]");
}

// Adds cat = Concat([0], Shape(x)[1:]) to g (a shape computation as exporters write it); the
// Shape's value goes to *sh.
ir::Value* zero_and_shape_tail(ir::Graph& g, ir::Value* x, ir::Value** sh) {
  *sh = g.add_value("sh");
  ir::Attributes sa;
  sa.set_int("start", 1);
  g.add_node("Shape", {x}, {*sh}, sa);
  auto* zero = g.add_value("zero");
  ir::Attributes ca;
  ca.set_ints("value_ints", {0});
  g.add_node("Constant", {}, {zero}, ca);
  auto* cat = g.add_value("cat");
  ir::Attributes axis0;
  axis0.set_int("axis", 0);
  g.add_node("Concat", {zero, *sh}, {cat}, axis0);
  return cat;
}

TEST(TensorInference, ShapeValueFlowsThroughConcatIntoReshape) {
  // z:[N,12] reshaped to Concat([0], Shape(x)[1:]) where x:[N,3,4] -> [N,3,4].
  ir::Graph g;
  g.set_opset_import("", 15);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* z = g.add_input("z", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(12)});
  ir::Value* sh = nullptr;
  ir::Value* cat = zero_and_shape_tail(g, x, &sh);
  auto* y = g.add_value("y");
  g.add_node("Reshape", {z, cat}, {y});
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(sh->shape().to_string(), "[2]");
  EXPECT_EQ(cat->shape().to_string(), "[3]");
  EXPECT_EQ(y->shape().to_string(), "[N,3,4]");
}

TEST(TensorInference, LargeConstantsDoNotUseUpTheFoldBudget) {
  // Inference keeps at most 2^22 folded elements a pass (against 2^k inlined folds); a Constant of
  // that many elements and an Identity of it share storage, were not computed, and must leave the
  // shape computation after them its known values: Reshape(z, Cast(Cast(Concat([0], Shape(x)[1:])))).
  ir::Graph g;
  g.set_opset_import("", 15);
  auto* big = g.add_value("big");
  ir::Attributes ba;
  ba.set_tensor("value", Tensor::zeros(DataType::kFloat32, {int64_t{1} << 22}).value());
  g.add_node("Constant", {}, {big}, ba);
  auto* big2 = g.add_value("big2");
  g.add_node("Identity", {big}, {big2});
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* z = g.add_input("z", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(12)});
  ir::Value* sh = nullptr;
  ir::Value* cat = zero_and_shape_tail(g, x, &sh);
  auto* c32 = g.add_value("c32");
  ir::Attributes to32, to64;
  to32.set_int("to", static_cast<int64_t>(DataType::kInt32));
  to64.set_int("to", static_cast<int64_t>(DataType::kInt64));
  g.add_node("Cast", {cat}, {c32}, to32);
  auto* c64 = g.add_value("c64");
  g.add_node("Cast", {c32}, {c64}, to64);
  auto* y = g.add_value("y");
  g.add_node("Reshape", {z, c64}, {y});
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(big2->shape().to_string(), "[4194304]");
  EXPECT_EQ(y->shape().to_string(), "[N,3,4]");
}

TEST(TensorInference, GatherOfPartlySymbolicShapeFoldsKnownDim) {
  // Reshape(x, Concat([-1], Unsqueeze(Gather(Shape(x), 2), [0]))) with x:[N,3,4] -> [?,4].
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(4)});
  auto* sh = g.add_value("sh");
  g.add_node("Shape", {x}, {sh});
  auto* two = g.add_initializer("two", i64({}, {2}));
  auto* d = g.add_value("d");
  g.add_node("Gather", {sh, two}, {d});
  auto* zero = g.add_initializer("zero", i64({1}, {0}));
  auto* du = g.add_value("du");
  g.add_node("Unsqueeze", {d, zero}, {du});
  auto* m1 = g.add_initializer("m1", i64({1}, {-1}));
  auto* cat = g.add_value("cat");
  ir::Attributes axis0;
  axis0.set_int("axis", 0);
  g.add_node("Concat", {m1, du}, {cat}, axis0);
  auto* y = g.add_value("y");
  g.add_node("Reshape", {x, cat}, {y});
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(d->shape().to_string(), "[]");
  EXPECT_EQ(y->shape().to_string(), "[?,4]");
}

TEST(TensorInference, ShapeOfSymbolicInputCarriesItsDimsIntoReshape) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3)});
  auto* s = g.add_value("s");
  auto* y = g.add_value("y");
  g.add_node("Shape", {x}, {s});
  // Reshape by the input's own (symbolic) shape: its elements are the dims N and 3, so the
  // output keeps them (graph-level inference tracks shape values through shape arithmetic).
  g.add_node("Reshape", {x, s}, {y});
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(s->dtype(), DataType::kInt64);
  EXPECT_EQ(s->shape().to_string(), "[2]");
  EXPECT_EQ(y->shape().to_string(), "[N,3]");
}

// The exporters' shape arithmetic on a symbolic batch: Shape -> Gather -> Unsqueeze -> Concat
// -> Reshape keeps N; torch's Expand idiom Where(Equal(shape, -1), 1, shape) too; Range(0, N, 1)
// has N elements; a -1 in the target is solved when the other dims match the input's.
TEST(TensorInference, SymbolicShapeArithmeticOfExportedModels) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(6), Dim(4)});
  auto* zero = g.add_initializer("zero", i64({}, {0}));
  auto* axes = g.add_initializer("axes", i64({1}, {0}));
  auto* tail = g.add_initializer("tail", i64({2}, {3, 8}));
  auto* minus = g.add_initializer("minus", i64({2}, {-1, 12}));
  auto* one = g.add_initializer("one", i64({}, {1}));
  auto v = [&](const char* name) { return g.add_value(name); };
  g.add_node("Shape", {x}, {v("s")});
  g.add_node("Gather", {g.find_value("s"), zero}, {v("n")});
  g.add_node("Unsqueeze", {g.find_value("n"), axes}, {v("n1")});
  g.add_node("Concat", {g.find_value("n1"), tail}, {v("target")}, [] {
    ir::Attributes a;
    a.set_int("axis", 0);
    return a;
  }());
  g.add_node("Reshape", {x, g.find_value("target")}, {v("y")});
  g.add_node("Reshape", {x, minus}, {v("z")});  // [-1, 12] of [N,6,4]: unsolvable, stays open
  g.add_node("Range", {zero, g.find_value("n"), one}, {v("r")});
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(g.find_value("y")->shape().to_string(), "[N,3,8]");
  EXPECT_EQ(g.find_value("z")->shape().to_string(), "[?,12]");
  EXPECT_EQ(g.find_value("r")->shape().to_string(), "[N]");
}

TEST(TensorInference, SliceKeepsSymbolicDimForFullRange) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(10)});
  auto* st = g.add_initializer("st", i64({2}, {0, 1}));
  auto* en = g.add_initializer("en", i64({2}, {std::numeric_limits<int64_t>::max(), -1}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Slice", {x, st, en}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,8]");
}

TEST(TensorInference, ExpandBroadcastsSymbolAgainstKnownShape) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(1)});
  auto* s = g.add_initializer("s", i64({3}, {2, 1, 5}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Expand", {x, s}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[2,N,5]");
}

TEST(TensorInference, BadAxesAndPermAreErrors) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(2), Dim(3)});
  auto* y = g.add_value("y");
  ir::Attributes p;
  p.set_ints("perm", {0, 0});
  EXPECT_FALSE(ir::infer_node(*g.add_node("Transpose", {x}, {y}, p, "t")).ok());
  auto* y2 = g.add_value("y2");
  ir::Attributes a;
  a.set_int("axis", 2);
  EXPECT_FALSE(ir::infer_node(*g.add_node("Concat", {x, x}, {y2}, a, "c")).ok());
  auto* y3 = g.add_value("y3");
  auto* axes = g.add_initializer("axes", i64({1}, {1}));
  // Squeezing an axis of size 3 is an error.
  EXPECT_FALSE(ir::infer_node(*g.add_node("Squeeze", {x, axes}, {y3}, {}, "s")).ok());
}

TEST(TensorKernels, GatherOutOfRangeIndexIsAnErrorNotACrash) {
  auto r = run_one("Gather", 13, {f32({3}, {1, 2, 3}), i64({1}, {3})}, 1);
  EXPECT_FALSE(r.ok());
  auto ok = run_one("Gather", 13, {f32({3}, {1, 2, 3}), i64({2}, {-1, 0})}, 1);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)[0].to_f64_vector(), (std::vector<double>{3, 1}));
}

TEST(TensorKernels, PadReflectBeyondOnePeriodAndWrap) {
  ir::Attributes a;
  a.set_string("mode", "reflect");
  auto r = run_one("Pad", 18, {f32({3}, {1, 2, 3}), i64({2}, {4, 0})}, 1, a);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{1, 2, 3, 2, 1, 2, 3}));
  ir::Attributes w;
  w.set_string("mode", "wrap");
  auto r2 = run_one("Pad", 19, {f32({3}, {1, 2, 3}), i64({2}, {2, 3})}, 1, w);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ((*r2)[0].to_f64_vector(), (std::vector<double>{2, 3, 1, 2, 3, 1, 2, 3}));
}

TEST(TensorKernels, TopKTiesKeepLowerIndexFirst) {
  auto r = run_one("TopK", 11, {f32({4}, {3, 1, 3, 2}), i64({1}, {2})}, 2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{3, 3}));
  EXPECT_EQ((*r)[1].to_i64_vector(), (std::vector<int64_t>{0, 2}));
  ir::Attributes a;
  a.set_int("largest", 0);
  auto s = run_one("TopK", 11, {f32({4}, {3, 1, 3, 2}), i64({1}, {2})}, 2, a);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)[0].to_f64_vector(), (std::vector<double>{1, 2}));
  EXPECT_EQ((*s)[1].to_i64_vector(), (std::vector<int64_t>{1, 3}));
}

TEST(TensorKernels, UniqueUnsortedKeepsFirstOccurrenceOrder) {
  ir::Attributes a;
  a.set_int("sorted", 0);
  auto r = run_one("Unique", 11, {f32({5}, {2, 1, 2, 3, 1})}, 4, a);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{2, 1, 3}));
  EXPECT_EQ((*r)[1].to_i64_vector(), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ((*r)[2].to_i64_vector(), (std::vector<int64_t>{0, 1, 0, 2, 1}));
  EXPECT_EQ((*r)[3].to_i64_vector(), (std::vector<int64_t>{2, 2, 1}));
}

TEST(TensorKernels, SplitNumOutputsGivesSmallerLastChunk) {
  ir::Attributes a;
  a.set_int("num_outputs", 3);
  auto r = run_one("Split", 18, {f32({7}, {0, 1, 2, 3, 4, 5, 6})}, 3, a);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ((*r)[1].to_f64_vector(), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ((*r)[2].to_f64_vector(), (std::vector<double>{6}));
}

TEST(TensorKernels, SliceNegativeStepOnEmptyAndFullAxis) {
  auto r = run_one("Slice", 13,
                   {f32({4}, {0, 1, 2, 3}), i64({1}, {-1}), i64({1}, {std::numeric_limits<int64_t>::min()}),
                    i64({1}, {0}), i64({1}, {-2})},
                   1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].to_f64_vector(), (std::vector<double>{3, 1}));
  auto e = run_one("Slice", 13, {f32({0}, {}), i64({1}, {-1}), i64({1}, {-10}), i64({1}, {0}), i64({1}, {-1})}, 1);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)[0].numel(), 0);
}

}  // namespace
}  // namespace ingot
