// Copyright ingot authors. Apache-2.0.
//
// If / Loop / Scan: branch-merging inference, loop-carried shape relaxation, scan axes and
// directions, opset-8 Scan with sequence_lens, and unsupported/erroneous cases. Expected
// values are computed by hand.
#include <gtest/gtest.h>

#include <memory>

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

Tensor boolean(bool b) { return Tensor::from_vector<uint8_t>(DataType::kBool, {}, {static_cast<uint8_t>(b)}); }

ir::Attribute graph_attr(std::shared_ptr<ir::Graph> g) {
  ir::Attribute a;
  a.type = ir::AttrType::kGraph;
  a.g = std::move(g);
  return a;
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v;
  for (double d : t.to_f64_vector()) v.push_back(static_cast<float>(d));
  return v;
}

TEST(IfInference, MergesBranchShapesAndRunsTheChosenBranch) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* cond = g.add_input("cond", DataType::kBool, Shape{});
  auto* a = g.add_input("a", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3)});
  auto* b = g.add_input("b", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(4)});
  auto then_g = std::make_shared<ir::Graph>("then", &g);
  then_g->add_output(a);  // branches may return outer-scope values directly
  auto else_g = std::make_shared<ir::Graph>("else", &g);
  else_g->add_output(b);
  ir::Attributes attrs;
  attrs.set("then_branch", graph_attr(then_g));
  attrs.set("else_branch", graph_attr(else_g));
  auto* y = g.add_value("y");
  g.add_node("If", {cond}, {y}, attrs, "if");
  g.add_output(y);
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
  EXPECT_EQ(y->shape().to_string(), "[N,?]");  // 3 vs 4 -> unknown, N kept

  cpu::Executor ex;
  auto out = ex.run(g, {{"cond", boolean(false)}, {"a", f32({1, 3}, {1, 2, 3})}, {"b", f32({1, 4}, {5, 6, 7, 8})}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (Shape64{1, 4}));
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{5, 6, 7, 8}));
}

// Loop M times: x <- x + one, scan output collects every new x.
struct AddLoop {
  ir::Graph g;
  ir::Value *m, *x, *final_x, *scanned;
  explicit AddLoop(Shape x_shape) {
    g.set_opset_import("", 16);
    m = g.add_input("M", DataType::kInt64, Shape{});
    x = g.add_input("x", DataType::kFloat32, x_shape);
    auto* one = g.add_initializer("one", f32({}, {1}));
    auto body = std::make_shared<ir::Graph>("body", &g);
    body->add_input("iter", DataType::kUndefined, Shape::unknown_rank());
    auto* c_in = body->add_input("c_in", DataType::kUndefined, Shape::unknown_rank());
    auto* x_in = body->add_input("x_in", DataType::kUndefined, Shape::unknown_rank());
    auto* x_out = body->add_value("x_out");
    auto* scan = body->add_value("scan");
    body->add_node("Add", {x_in, one}, {x_out});
    body->add_node("Identity", {x_out}, {scan});
    body->set_outputs({c_in, x_out, scan});
    ir::Attributes attrs;
    attrs.set("body", graph_attr(body));
    final_x = g.add_value("final_x");
    scanned = g.add_value("scanned");
    g.add_node("Loop", {m, nullptr, x}, {final_x, scanned}, attrs, "loop");
    g.add_output(final_x);
    g.add_output(scanned);
  }
};

TEST(LoopInference, TypesBodyAndPrependsUnknownScanDim) {
  AddLoop l(Shape{Dim::symbol("B"), Dim(2)});
  Status st = ir::infer_graph(l.g);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(l.final_x->shape().to_string(), "[B,2]");
  EXPECT_EQ(l.scanned->shape().to_string(), "[?,B,2]");
  EXPECT_EQ(l.scanned->dtype(), DataType::kFloat32);
}

TEST(LoopKernel, CountsTripsAndStacksScanOutputs) {
  AddLoop l(Shape{Dim(2)});
  ASSERT_TRUE(ir::infer_graph(l.g).ok());
  cpu::Executor ex;
  auto out = ex.run(l.g, {{"M", i64({}, {3})}, {"x", f32({2}, {10, 20})}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{13, 23}));
  EXPECT_EQ((*out)[1].shape(), (Shape64{3, 2}));
  EXPECT_EQ(floats((*out)[1]), (std::vector<float>{11, 21, 12, 22, 13, 23}));
  // Zero trips: x passes through, the scan output is empty with the per-iteration shape.
  auto zero = ex.run(l.g, {{"M", i64({}, {0})}, {"x", f32({2}, {10, 20})}});
  ASSERT_TRUE(zero.ok()) << zero.status().to_string();
  EXPECT_EQ(floats((*zero)[0]), (std::vector<float>{10, 20}));
  EXPECT_EQ((*zero)[1].shape(), (Shape64{0, 2}));
}

TEST(LoopInference, LoopCarriedValueThatGrowsGetsAnUnknownDim) {
  ir::Graph g;
  g.set_opset_import("", 16);
  auto* m = g.add_input("M", DataType::kInt64, Shape{});
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(1), Dim(3)});
  auto body = std::make_shared<ir::Graph>("body", &g);
  body->add_input("iter", DataType::kInt64, Shape{});
  auto* c_in = body->add_input("c_in", DataType::kBool, Shape{});
  auto* x_in = body->add_input("x_in", DataType::kUndefined, Shape::unknown_rank());
  auto* x_out = body->add_value("x_out");
  ir::Attributes cat;
  cat.set_int("axis", 0);
  body->add_node("Concat", {x_in, x_in}, {x_out}, cat);
  body->set_outputs({c_in, x_out});
  ir::Attributes attrs;
  attrs.set("body", graph_attr(body));
  auto* y = g.add_value("y");
  g.add_node("Loop", {m, nullptr, x}, {y}, attrs, "loop");
  g.add_output(y);
  ASSERT_TRUE(ir::infer_graph(g).ok());
  EXPECT_EQ(y->shape().to_string(), "[?,3]");
  EXPECT_EQ(x_out->shape().to_string(), "[?,3]");
  cpu::Executor ex;
  auto out = ex.run(g, {{"M", i64({}, {2})}, {"x", f32({1, 3}, {1, 2, 3})}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (Shape64{4, 3}));
}

TEST(LoopInference, OptionalLoopCarriedValueIsUnsupported) {
  ir::Graph g;
  g.set_opset_import("", 16);
  auto* m = g.add_input("M", DataType::kInt64, Shape{});
  auto body = std::make_shared<ir::Graph>("body", &g);
  body->add_input("iter", DataType::kInt64, Shape{});
  auto* c_in = body->add_input("c_in", DataType::kBool, Shape{});
  auto* v_in = body->add_input("v_in", DataType::kUndefined, Shape::unknown_rank());
  body->set_outputs({c_in, v_in});
  ir::Attributes attrs;
  attrs.set("body", graph_attr(body));
  auto* y = g.add_value("y");
  auto* opt = g.add_input("opt", DataType::kUndefined, Shape::unknown_rank());
  opt->set_non_tensor_kind("optional");
  g.add_node("Loop", {m, nullptr, opt}, {y}, attrs, "loop");
  Status s = ir::infer_graph(g);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("'opt' is an optional"), std::string::npos) << s.to_string();
}

// Scan (opset 9+): state s <- s + x_t over rows of x; scan output is the running sum.
struct SumScan {
  ir::Graph g;
  ir::Value* total;
  ir::Value* sums;
  SumScan(int64_t opset, ir::Attributes attrs, bool with_lens) {
    g.set_opset_import("", opset);
    auto* lens = with_lens ? g.add_input("lens", DataType::kInt64, Shape{Dim(2)}) : nullptr;
    auto* s0 = g.add_input("s0", DataType::kFloat32, Shape::unknown_rank());
    auto* x = g.add_input("x", DataType::kFloat32, Shape::unknown_rank());
    auto body = std::make_shared<ir::Graph>("body", &g);
    auto* s_in = body->add_input("s_in", DataType::kUndefined, Shape::unknown_rank());
    auto* x_in = body->add_input("x_in", DataType::kUndefined, Shape::unknown_rank());
    auto* s_out = body->add_value("s_out");
    auto* o = body->add_value("o");
    body->add_node("Add", {s_in, x_in}, {s_out});
    body->add_node("Identity", {s_out}, {o});
    body->set_outputs({s_out, o});
    attrs.set("body", graph_attr(body));
    attrs.set_int("num_scan_inputs", 1);
    total = g.add_value("total");
    sums = g.add_value("sums");
    std::vector<ir::Value*> ins = {s0, x};
    if (opset < 9) ins.insert(ins.begin(), lens);
    g.add_node("Scan", ins, {total, sums}, attrs, "scan");
    g.add_output(total);
    g.add_output(sums);
  }
};

TEST(ScanKernel, ReverseInputAlongAxisOneWithOutputAxisOne) {
  // x [2,3] scanned along axis 1 in reverse: columns (3,6), (2,5), (1,4).
  ir::Attributes a;
  a.set_ints("scan_input_axes", {1});
  a.set_ints("scan_input_directions", {1});
  a.set_ints("scan_output_axes", {1});
  SumScan s(11, a, false);
  ASSERT_TRUE(ir::infer_graph(s.g).ok());
  cpu::Executor ex;
  auto out = ex.run(s.g, {{"s0", f32({2}, {0, 0})}, {"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{6, 15}));
  // Running sums per step: (3,6), (5,11), (6,15); output axis 1 -> [2,3].
  EXPECT_EQ((*out)[1].shape(), (Shape64{2, 3}));
  EXPECT_EQ(floats((*out)[1]), (std::vector<float>{3, 5, 6, 6, 11, 15}));
}

TEST(ScanInference, SequenceDimGoesToTheOutputAxis) {
  ir::Attributes a;
  a.set_ints("scan_output_axes", {-1});
  SumScan s(16, a, false);
  s.g.inputs()[0]->set_dtype(DataType::kFloat32);
  s.g.inputs()[0]->set_shape(Shape{Dim(4)});
  s.g.inputs()[1]->set_shape(Shape{Dim::symbol("T"), Dim(4)});
  ASSERT_TRUE(ir::infer_graph(s.g).ok());
  EXPECT_EQ(s.total->shape().to_string(), "[4]");
  EXPECT_EQ(s.sums->shape().to_string(), "[4,T]");
}

TEST(ScanKernel, Opset8BatchesAndPadsShortSequences) {
  // Batch 2, sequences of length 3 with lens {3, 1}; state per batch is a [1] vector.
  SumScan s(8, {}, true);
  ASSERT_TRUE(ir::infer_graph(s.g).ok());
  cpu::Executor ex;
  auto out = ex.run(s.g, {{"lens", i64({2}, {3, 1})},
                          {"s0", f32({2, 1}, {0, 100})},
                          {"x", f32({2, 3, 1}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), (std::vector<float>{6, 104}));
  EXPECT_EQ((*out)[1].shape(), (Shape64{2, 3, 1}));
  EXPECT_EQ(floats((*out)[1]), (std::vector<float>{1, 3, 6, 104, 0, 0}));
}

TEST(ScanInference, BadInputAxisIsAnError) {
  ir::Attributes a;
  a.set_ints("scan_input_axes", {2});
  SumScan s(11, a, false);
  s.g.inputs()[1]->set_dtype(DataType::kFloat32);
  s.g.inputs()[1]->set_shape(Shape{Dim(2), Dim(3)});
  Status st = ir::infer_graph(s.g);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("scan_input_axes"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace ingot
