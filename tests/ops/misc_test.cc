// Copyright ingot authors. Apache-2.0.
//
// Misc family: DFT/window/Det/NMS inference and kernels, string ops and ai.onnx.ml ops on
// corner cases the ONNX node suite covers thinly. Expected values are computed by hand.
#include <gtest/gtest.h>

#include <cmath>

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


// Runs a one-node graph on `inputs` (named x0, x1, ...; nullopt-like undefined tensors are
// omitted optional inputs); returns the outputs.
Result<std::vector<Tensor>> run_one(const std::string& op, int64_t opset, std::vector<Tensor> inputs, size_t n_out,
                                    ir::Attributes attrs = {}, const std::string& domain = "") {
  ir::Graph g;
  g.set_opset_import(domain, opset);
  std::vector<ir::Value*> ins, outs;
  std::map<std::string, Tensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    std::string name = "x" + std::to_string(i);
    ins.push_back(g.add_input(name, inputs[i].dtype(), Shape::from_concrete(inputs[i].shape())));
    feed[name] = inputs[i];
  }
  for (size_t i = 0; i < n_out; ++i) outs.push_back(g.add_value("y" + std::to_string(i)));
  g.add_node(op, ins, outs, attrs, "n", domain);
  for (auto* o : outs) g.add_output(o);
  Status s = ir::infer_graph(g);
  if (!s.ok()) return s;
  cpu::Executor ex;
  return ex.run(g, feed);
}

TEST(DftInference, OnesidedKeepsSymbolsAndUnknownAxisInputRelaxesDims) {
  ir::Graph g;
  g.set_opset_import("", 20);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(8), Dim(1)});
  auto* axis = g.add_input("axis", DataType::kInt64, Shape{});
  auto* y = g.add_value("y");
  auto* z = g.add_value("z");
  ir::Attributes a;
  a.set_int("onesided", 1);
  ir::Node* n1 = g.add_node("DFT", {x}, {y}, a);  // default axis -2 -> dim 1
  ir::Node* n2 = g.add_node("DFT", {x, nullptr, axis}, {z});
  ASSERT_TRUE(ir::infer_node(*n1).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,5,2]");  // 8/2+1 bins
  ASSERT_TRUE(ir::infer_node(*n2).ok());
  EXPECT_EQ(z->shape().to_string(), "[?,?,2]");
}

TEST(DftInference, AxisOnTheComplexDimIsAnError) {
  ir::Attributes a;
  a.set_int("axis", 2);
  auto r = run_one("DFT", 17, {f32({1, 4, 1}, {1, 2, 3, 4})}, 1, a);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("axis"), std::string::npos);
}

TEST(DftKernel, ForwardOfARealSignalAndInverseRoundTrip) {
  // DFT of [1,2,3,4]: X0 = 10, X1 = -2+2i, X2 = -2, X3 = -2-2i.
  auto r = run_one("DFT", 17, {f32({1, 4, 1}, {1, 2, 3, 4})}, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want = {10, 0, -2, 2, -2, 0, -2, -2};
  std::vector<double> got = (*r)[0].to_f64_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  ir::Attributes inv;
  inv.set_int("inverse", 1);
  auto back = run_one("DFT", 17, {(*r)[0]}, 1, inv);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  std::vector<double> b = (*back)[0].to_f64_vector();
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(b[2 * i], i + 1, 1e-5);
    EXPECT_NEAR(b[2 * i + 1], 0, 1e-5);
  }
}

TEST(DftKernel, InverseOnesidedGivesARealSignal) {
  // One-sided spectrum of [1,2,3,4] is {10, -2+2i, -2}: irfft with n = 2*(3-1) = 4.
  ir::Attributes a;
  a.set_int("inverse", 1);
  a.set_int("onesided", 1);
  auto r = run_one("DFT", 20, {f32({1, 3, 2}, {10, 0, -2, 2, -2, 0})}, 1, a);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape64{1, 4, 1}));
  std::vector<double> got = (*r)[0].to_f64_vector();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], i + 1, 1e-5);
}

TEST(WindowKernel, PeriodicAndSymmetricHann) {
  auto p = run_one("HannWindow", 17, {i64({}, {4})}, 1);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<double> want = {0, 0.5, 1, 0.5};  // 0.5 - 0.5 cos(2*pi*n/4)
  for (int i = 0; i < 4; ++i) EXPECT_NEAR((*p)[0].get_f64(i), want[i], 1e-6);
  ir::Attributes a;
  a.set_int("periodic", 0);
  a.set_int("output_datatype", static_cast<int64_t>(DataType::kFloat64));
  auto s = run_one("HannWindow", 17, {i64({}, {3})}, 1, a);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)[0].dtype(), DataType::kFloat64);
  std::vector<double> want3 = {0, 1, 0};  // N-1 = 2
  for (int i = 0; i < 3; ++i) EXPECT_NEAR((*s)[0].get_f64(i), want3[i], 1e-12);
}

TEST(DetKernel, PivotingAndBatches) {
  // det [[2,1],[1,3]] = 5; det [[0,1],[1,0]] = -1 (needs a row swap).
  auto r = run_one("Det", 11, {f32({2, 2, 2}, {2, 1, 1, 3, 0, 1, 1, 0})}, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape64{2}));
  EXPECT_NEAR((*r)[0].get_f64(0), 5, 1e-6);
  EXPECT_NEAR((*r)[0].get_f64(1), -1, 1e-6);
}

TEST(DetInference, NonSquareIsAnErrorAndSymbolsStay) {
  EXPECT_FALSE(run_one("Det", 11, {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, 1).ok());
  ir::Graph g;
  g.set_opset_import("", 11);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("B"), Dim(3), Dim(3)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Det", {x}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[B]");
}

TEST(NmsKernel, SuppressesOverlapAboveThresholdOnly) {
  // Box 0 [0,0,1,1]; box 1 [0,0.5,1,1.5] overlaps it with IoU 0.5/1.5 = 1/3;
  // box 2 [0,0,1,0.8] inside box 0: IoU 0.8. Scores 0.9, 0.8, 0.7.
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.5f, 1, 1.5f, 0, 0, 1, 0.8f});
  Tensor scores = f32({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  auto r = run_one("NonMaxSuppression", 11, {boxes, scores, i64({1}, {10}), f32({1}, {0.4f})}, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape64{2, 3}));
  EXPECT_EQ((*r)[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 0, 0, 1}));
  // max_output_boxes_per_class defaults to 0: nothing is selected.
  auto none = run_one("NonMaxSuppression", 11, {boxes, scores}, 1);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ((*none)[0].shape(), (Shape64{0, 3}));
}

TEST(StringKernels, SplitOnWhitespaceWithMaxsplitAndPadding) {
  ir::Attributes a;
  a.set_int("maxsplit", 1);
  auto r = run_one("StringSplit", 20, {Tensor::from_strings({2}, {"  a b  c ", "x"})}, 2, a);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape64{2, 2}));
  EXPECT_EQ((*r)[0].strings(), (std::vector<std::string>{"a", "b  c", "x", ""}));
  EXPECT_EQ((*r)[1].to_i64_vector(), (std::vector<int64_t>{2, 1}));
}

TEST(StringKernels, NormalizerRemovingEverythingLeavesOneEmptyString) {
  ir::Attributes a;
  a.set_string("case_change_action", "UPPER");
  ir::Attribute stop;
  stop.type = ir::AttrType::kStrings;
  stop.strings = {"the", "A"};
  a.set("stopwords", stop);
  auto r = run_one("StringNormalizer", 10, {Tensor::from_strings({1, 2}, {"The", "a"})}, 1, a);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape64{1, 1}));
  EXPECT_EQ((*r)[0].strings()[0], "");
  auto kept = run_one("StringNormalizer", 10, {Tensor::from_strings({3}, {"The", "cat", "a"})}, 1, a);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)[0].strings(), (std::vector<std::string>{"CAT"}));
}

TEST(StringKernels, RegexFullMatchNeedsTheWholeString) {
  ir::Attributes a;
  a.set_string("pattern", "[a-z]+\\d");
  auto r = run_one("RegexFullMatch", 20, {Tensor::from_strings({3}, {"abc1", "abc12", "1abc1"})}, 1, a);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].to_i64_vector(), (std::vector<int64_t>{1, 0, 0}));
  a.set_string("pattern", "(unclosed");
  EXPECT_FALSE(run_one("RegexFullMatch", 20, {Tensor::from_strings({1}, {"x"})}, 1, a).ok());
}

TEST(MlKernels, LabelEncoderDefaultsAndArrayFeatureExtractorOnAVector) {
  ir::Attributes a;
  ir::Attribute keys, vals;
  keys.type = ir::AttrType::kInts;
  keys.ints = {1, 5};
  vals.type = ir::AttrType::kFloats;
  vals.floats = {0.5f, 2.5f};
  a.set("keys_int64s", keys);
  a.set("values_floats", vals);
  auto r = run_one("LabelEncoder", 2, {i64({3}, {5, 7, 1})}, 1, a, "ai.onnx.ml");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].dtype(), DataType::kFloat32);
  std::vector<double> got = (*r)[0].to_f64_vector();
  EXPECT_EQ(got[0], 2.5);
  EXPECT_TRUE(got[1] == 0.0 && std::signbit(got[1]));  // default_float is -0.0
  EXPECT_EQ(got[2], 0.5);

  auto f = run_one("ArrayFeatureExtractor", 1, {f32({4}, {10, 11, 12, 13}), i64({2}, {3, 0})}, 1, {}, "ai.onnx.ml");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)[0].shape(), (Shape64{1, 2}));
  EXPECT_EQ((*f)[0].to_f64_vector(), (std::vector<double>{13, 10}));
  EXPECT_FALSE(run_one("ArrayFeatureExtractor", 1, {f32({2}, {1, 2}), i64({1}, {2})}, 1, {}, "ai.onnx.ml").ok());
}

}  // namespace
}  // namespace ingot
