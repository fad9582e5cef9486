// Copyright ingot authors. Apache-2.0.
//
// Image family (Resize, Upsample, GridSample, AffineGrid, RoiAlign): symbolic-shape inference,
// error cases and kernel behaviours the ONNX node suite covers thinly. Expected values are
// computed by hand (see the comments).
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


// Runs one node on concrete inputs (nullptr = omitted optional input); returns output 0.
Result<Tensor> run_one(const std::string& op, int64_t opset, const std::vector<const Tensor*>& inputs,
                       ir::Attributes attrs) {
  ir::Graph g;
  g.set_opset_import("", opset);
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(g.add_input("in" + std::to_string(i), inputs[i]->dtype(), Shape::from_concrete(inputs[i]->shape())));
  }
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node(op, ins, {y}, std::move(attrs), "n");
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, cpu::run_node(*n, inputs));
  return outs[0];
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << t.to_string();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_f64(static_cast<int64_t>(i)), want[i], tol) << "at " << i;
}

// ------------------------------------------------------------------ inference

TEST(ImageInference, ResizeScalesKeepSymbolicBatchAndScaleKnownDims) {
  ir::Graph g;
  g.set_opset_import("", 19);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim::symbol("C"), Dim(3), Dim(5)});
  auto* scales = g.add_initializer("scales", f32({4}, {1, 1, 2, 2}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Resize", {x, nullptr, scales}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
  EXPECT_EQ(y->shape().to_string(), "[N,C,6,10]");  // floor(3*2), floor(5*2)
}

TEST(ImageInference, ResizeUnknownSizesWithAxesOnlyForgetResizedDims) {
  ir::Graph g;
  g.set_opset_import("", 18);
  auto* x = g.add_input("x", DataType::kFloat16, Shape{Dim::symbol("N"), Dim(3), Dim(8), Dim(8)});
  auto* sizes = g.add_input("sizes", DataType::kInt64, Shape{Dim(2)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_ints("axes", {-1, 2});
  ir::Node* n = g.add_node("Resize", {x, nullptr, nullptr, sizes}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,3,?,?]");
}

TEST(ImageInference, ResizeNotLargerPolicyRoundsHalfUp) {
  ir::Graph g;
  g.set_opset_import("", 19);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(1), Dim(1), Dim(4), Dim(6)});
  auto* sizes = g.add_initializer("sizes", i64({2}, {2, 2}));
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_ints("axes", {2, 3});
  a.set_string("keep_aspect_ratio_policy", "not_larger");
  ir::Node* n = g.add_node("Resize", {x, nullptr, nullptr, sizes}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  // scale = min(2/4, 2/6) = 1/3: 4/3 + 0.5 -> 1, 6/3 + 0.5 -> 2.
  EXPECT_EQ(y->shape().to_string(), "[1,1,1,2]");
}

TEST(ImageInference, ResizeRejectsBadAxisAndScalesWithSizes) {
  ir::Graph g;
  g.set_opset_import("", 19);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(1), Dim(1), Dim(4), Dim(4)});
  auto* scales = g.add_initializer("scales", f32({1}, {2}));
  auto* sizes = g.add_initializer("sizes", i64({1}, {8}));
  ir::Attributes a;
  a.set_ints("axes", {4});
  ir::Node* bad_axis = g.add_node("Resize", {x, nullptr, scales}, {g.add_value("y1")}, a, "bad_axis");
  EXPECT_FALSE(ir::infer_node(*bad_axis).ok());
  ir::Attributes b;
  b.set_ints("axes", {3});
  ir::Node* both = g.add_node("Resize", {x, nullptr, scales, sizes}, {g.add_value("y2")}, b, "both");
  EXPECT_FALSE(ir::infer_node(*both).ok());
  ir::Attributes c;
  c.set_string("mode", "bogus");
  ir::Node* bad_mode = g.add_node("Resize", {x, nullptr, scales}, {g.add_value("y3")}, c, "bad_mode");
  EXPECT_FALSE(ir::infer_node(*bad_mode).ok());
}

TEST(ImageInference, GridSampleTakesSpatialDimsFromGrid) {
  ir::Graph g;
  g.set_opset_import("", 20);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim::symbol("H"), Dim(9)});
  auto* grid = g.add_input("grid", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(5), Dim(7), Dim(2)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("GridSample", {x, grid}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[N,3,5,7]");

  auto* grid3 = g.add_input("grid3", DataType::kFloat32, Shape{Dim(1), Dim(5), Dim(7), Dim(3)});
  ir::Node* bad = g.add_node("GridSample", {x, grid3}, {g.add_value("y2")}, {}, "bad");
  EXPECT_FALSE(ir::infer_node(*bad).ok());  // 4-D input needs 2 coordinates per point
}

TEST(ImageInference, AffineGridRankFromThetaWhenSizeUnknown) {
  ir::Graph g;
  g.set_opset_import("", 20);
  auto* theta = g.add_input("theta", DataType::kFloat32, Shape{Dim::symbol("B"), Dim(3), Dim(4)});
  auto* size = g.add_input("size", DataType::kInt64, Shape{Dim(5)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("AffineGrid", {theta, size}, {y});
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[B,?,?,?,3]");
}

TEST(ImageInference, RoiAlignShape) {
  ir::Graph g;
  g.set_opset_import("", 16);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(256), Dim(14), Dim(14)});
  auto* rois = g.add_input("rois", DataType::kFloat32, Shape{Dim::symbol("R"), Dim(4)});
  auto* bi = g.add_input("bi", DataType::kInt64, Shape{Dim::symbol("R")});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_int("output_height", 7);
  a.set_int("output_width", 5);
  ir::Node* n = g.add_node("RoiAlign", {x, rois, bi}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape().to_string(), "[R,256,7,5]");
}

// ------------------------------------------------------------------ kernels

TEST(ImageKernels, ResizeLinearHalfPixelDownsample1D) {
  Tensor x = f32({4}, {1, 2, 3, 4});
  Tensor s = f32({1}, {0.5f});
  ir::Attributes a;
  a.set_string("mode", "linear");
  auto y = run_one("Resize", 19, {&x, nullptr, &s}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  // x_src = (y + 0.5) / 0.5 - 0.5 = 0.5, 2.5
  expect_values(y.value(), {1.5, 3.5});
}

TEST(ImageKernels, ResizeNearestModesAsymmetric) {
  Tensor x = f32({2}, {1, 2});
  Tensor s = f32({1}, {2});
  // x_src = 0, 0.5, 1, 1.5
  ir::Attributes a;
  a.set_string("coordinate_transformation_mode", "asymmetric");
  a.set_string("nearest_mode", "round_prefer_ceil");
  auto y = run_one("Resize", 13, {&x, nullptr, &s}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  expect_values(y.value(), {1, 2, 2, 2});  // 0, 1, 1, 2 (clamped to 1)
  a.set_string("nearest_mode", "round_prefer_floor");
  y = run_one("Resize", 13, {&x, nullptr, &s}, a);
  ASSERT_TRUE(y.ok());
  expect_values(y.value(), {1, 1, 2, 2});  // 0, 0, 1, 1
}

TEST(ImageKernels, ResizeNearestCopiesInt64Exactly) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable as a double
  Tensor x = i64({1, 2}, {big, -big});
  Tensor sizes = i64({2}, {1, 4});
  auto y = run_one("Resize", 19, {&x, nullptr, nullptr, &sizes}, {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y.value().shape(), (Shape64{1, 4}));
  // half_pixel, scale 2: x_src = -0.25, 0.25, 0.75, 1.25 -> 0, 0, 1, 1
  EXPECT_EQ(y.value().to_i64_vector(), (std::vector<int64_t>{big, big, -big, -big}));
}

TEST(ImageKernels, ResizeLinearOnUint8RoundsHalfToEven) {
  Tensor x = Tensor::from_vector(DataType::kUInt8, {3}, std::vector<uint8_t>{0, 1, 3});
  Tensor sizes = i64({1}, {5});
  ir::Attributes a;
  a.set_string("mode", "linear");
  a.set_string("coordinate_transformation_mode", "align_corners");
  auto y = run_one("Resize", 19, {&x, nullptr, nullptr, &sizes}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  // x_src = 0, 0.5, 1, 1.5, 2 -> 0, 0.5, 1, 2, 3 ; 0.5 rounds to 0 (half to even)
  EXPECT_EQ(y.value().to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 2, 3}));
}

TEST(ImageKernels, ResizeTfCropAndResizeExtrapolates) {
  Tensor x = f32({4}, {10, 20, 30, 40});
  Tensor roi = f32({2}, {0.5f, 1.5f});
  Tensor sizes = i64({1}, {3});
  ir::Attributes a;
  a.set_string("mode", "linear");
  a.set_string("coordinate_transformation_mode", "tf_crop_and_resize");
  a.set_float("extrapolation_value", 7);
  auto y = run_one("Resize", 19, {&x, &roi, nullptr, &sizes}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  // x_src = y * (1.5 - 0.5) * 3 / 2 + 0.5 * 3 = 1.5, 3, 4.5 (outside)
  expect_values(y.value(), {25, 40, 7});
}

TEST(ImageKernels, UpsampleOpset7NearestRepeats) {
  Tensor x = f32({1, 2}, {1, 2});
  ir::Attributes a;
  a.set_floats("scales", {2, 3});
  auto y = run_one("Upsample", 7, {&x}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y.value().shape(), (Shape64{2, 6}));
  expect_values(y.value(), {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
}

TEST(ImageKernels, GridSampleBilinearPaddingModes) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = f32({1, 1, 2, 2}, {0, 0, -1, -1});
  ir::Attributes a;
  auto y = run_one("GridSample", 20, {&x, &grid}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  // (0,0) -> pixel coords (0.5, 0.5): mean 2.5. (-1,-1) -> (-0.5,-0.5): a quarter of x[0,0]
  // with zero padding.
  expect_values(y.value(), {2.5, 0.25});
  a.set_string("padding_mode", "border");
  y = run_one("GridSample", 20, {&x, &grid}, a);
  ASSERT_TRUE(y.ok());
  expect_values(y.value(), {2.5, 1.0});
}

TEST(ImageKernels, AffineGridIdentity2D) {
  Tensor theta = f32({1, 2, 3}, {1, 0, 0, 0, 1, 0});
  Tensor size = i64({4}, {1, 1, 2, 2});
  auto y = run_one("AffineGrid", 20, {&theta, &size}, {});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y.value().shape(), (Shape64{1, 2, 2, 2}));
  expect_values(y.value(), {-0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5});
}

TEST(ImageKernels, RoiAlignAvgAndBadBatchIndex) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor rois = f32({1, 4}, {0, 0, 2, 2});
  Tensor bi = i64({1}, {0});
  ir::Attributes a;
  a.set_int("sampling_ratio", 2);
  auto y = run_one("RoiAlign", 10, {&x, &rois, &bi}, a);
  ASSERT_TRUE(y.ok()) << y.status().message();
  // Samples at (0.5,0.5)=2.5, (0.5,1.5)->(0.5,1)=3, (1.5,0.5)->(1,0.5)=3.5, (1.5,1.5)->(1,1)=4.
  expect_values(y.value(), {3.25});
  Tensor bad = i64({1}, {1});
  EXPECT_FALSE(run_one("RoiAlign", 10, {&x, &rois, &bad}, a).ok());
}

}  // namespace
}  // namespace ingot
