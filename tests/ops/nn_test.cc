// Copyright ingot authors. Apache-2.0.
//
// nn family: symbolic-shape inference, error cases and small kernels whose expected values
// are computed by hand in the comments; ingot::Pool (channels-last pooling) against MaxPool /
// AveragePool on the transposed data.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
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


std::vector<Tensor> run_op(int64_t opset, const std::string& op,
                           const std::vector<std::pair<std::string, Tensor>>& ins, ir::Attributes attrs,
                           size_t num_outputs = 1, const std::string& domain = "") {
  ir::Graph g;
  g.set_opset_import("", opset);
  if (!domain.empty()) g.set_opset_import(domain, 1);
  std::vector<ir::Value*> in_vals;
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, t] : ins) {
    in_vals.push_back(g.add_input(name, t.dtype(), Shape::from_concrete(t.shape())));
    feeds[name] = t;
  }
  std::vector<ir::Value*> outs;
  for (size_t i = 0; i < num_outputs; ++i) outs.push_back(g.add_value("out" + std::to_string(i)));
  g.add_node(op, in_vals, outs, std::move(attrs), "", domain);
  for (auto* o : outs) g.add_output(o);
  EXPECT_TRUE(ir::infer_graph(g).ok());
  cpu::Executor ex;
  auto r = ex.run(g, feeds);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

void expect_values(const Tensor& t, const std::vector<double>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_f64(static_cast<int64_t>(i)), want[i], 1e-5) << i;
}

TEST(NnInference, ConvKeepsSymbolicBatch) {
  ir::Graph g;
  g.set_opset_import("", 17);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(3), Dim(224), Dim(224)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(64), Dim(3), Dim(7), Dim(7)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_ints("strides", {2, 2});
  a.set_ints("pads", {3, 3, 3, 3});
  ir::Node* n = g.add_node("Conv", {x, w}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  // (224 + 6 - 7) / 2 + 1 = 112
  EXPECT_EQ(y->shape().to_string(), "[N,64,112,112]");
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
}

TEST(NnInference, ConvSameUpperAndUnknownSpatial) {
  ir::Graph g;
  g.set_opset_import("", 17);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(1), Dim(5), Dim::symbol("W")});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(8), Dim(1), Dim(3), Dim(3)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_string("auto_pad", "SAME_UPPER");
  a.set_ints("strides", {2, 2});
  ir::Node* n = g.add_node("Conv", {x, w}, {y}, a);
  ASSERT_TRUE(ir::infer_node(*n).ok());
  // ceil(5 / 2) = 3; the symbolic width gives an unknown dim.
  EXPECT_EQ(y->shape().to_string(), "[N,8,3,?]");
}

TEST(NnInference, ConvChannelMismatchIsAnError) {
  ir::Graph g;
  g.set_opset_import("", 17);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim(1), Dim(4), Dim(5), Dim(5)});
  auto* w = g.add_input("w", DataType::kFloat32, Shape{Dim(8), Dim(3), Dim(3), Dim(3)});
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Conv", {x, w}, {y}, {}, "bad_conv");
  Status s = ir::infer_node(*n);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad_conv"), std::string::npos);
}

TEST(NnInference, MatMulBroadcastsBatchAndHandlesVectors) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* a = g.add_input("a", DataType::kFloat16, Shape{Dim::symbol("B"), Dim::symbol("S"), Dim(64)});
  auto* b = g.add_input("b", DataType::kFloat16, Shape{Dim(64), Dim(32)});
  auto* v = g.add_input("v", DataType::kFloat16, Shape{Dim(64)});
  auto* y1 = g.add_value("y1");
  auto* y2 = g.add_value("y2");
  auto* y3 = g.add_value("y3");
  ASSERT_TRUE(ir::infer_node(*g.add_node("MatMul", {a, b}, {y1})).ok());
  EXPECT_EQ(y1->shape().to_string(), "[B,S,32]");
  ASSERT_TRUE(ir::infer_node(*g.add_node("MatMul", {a, v}, {y2})).ok());
  EXPECT_EQ(y2->shape().to_string(), "[B,S]");
  ASSERT_TRUE(ir::infer_node(*g.add_node("MatMul", {v, b}, {y3})).ok());
  EXPECT_EQ(y3->shape().to_string(), "[32]");
  auto* y4 = g.add_value("y4");
  EXPECT_FALSE(ir::infer_node(*g.add_node("MatMul", {b, b}, {y4})).ok());  // 32 != 64
}

TEST(NnInference, MaxPoolCeilModeAndIndices) {
  ir::Graph g;
  g.set_opset_import("", 12);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(2), Dim(5), Dim(5)});
  auto* y = g.add_value("y");
  auto* idx = g.add_value("i");
  ir::Attributes a;
  a.set_ints("kernel_shape", {2, 2});
  a.set_ints("strides", {2, 2});
  a.set_int("ceil_mode", 1);
  ASSERT_TRUE(ir::infer_node(*g.add_node("MaxPool", {x}, {y, idx}, a)).ok());
  // ceil((5 - 2) / 2) + 1 = 3 (floor mode would give 2)
  EXPECT_EQ(y->shape().to_string(), "[N,2,3,3]");
  EXPECT_EQ(idx->dtype(), DataType::kInt64);
}

TEST(NnInference, IngotPoolChannelsLast) {
  ir::Graph g;
  g.set_opset_import("", 19);
  g.set_opset_import("ingot", 1);
  auto* x = g.add_input("x", DataType::kFloat16, Shape{Dim::symbol("N"), Dim(112), Dim(112), Dim(64)});
  auto pool = [&](ir::Attributes a, ir::Value* in) {
    auto* y = g.add_value("y" + std::to_string(g.num_values()));
    Status st = ir::infer_node(*g.add_node("Pool", {in}, {y}, std::move(a), "", "ingot"));
    return std::make_pair(st, y);
  };
  ir::Attributes a;
  a.set_string("mode", "max");
  a.set_int("channels_last", 1);
  a.set_ints("kernel_shape", {3, 3});
  a.set_ints("strides", {2, 2});
  a.set_ints("pads", {1, 1, 1, 1});
  auto [st, y] = pool(a, x);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(y->shape().to_string(), "[N,56,56,64]");  // ResNet-50's stem pool, NHWC
  EXPECT_EQ(y->dtype(), DataType::kFloat16);
  // ceil_mode on the spatial dims only: H (5 - 2) / 2 -> 3 rows, W (6 - 2) / 2 -> 3 columns.
  auto* small = g.add_input("s", DataType::kFloat32, Shape{Dim(1), Dim(5), Dim(6), Dim(7)});
  ir::Attributes c;
  c.set_string("mode", "average");
  c.set_int("channels_last", 1);
  c.set_ints("kernel_shape", {2, 2});
  c.set_ints("strides", {2, 2});
  c.set_int("ceil_mode", 1);
  c.set_int("count_include_pad", 1);
  auto [cst, cy] = pool(c, small);
  ASSERT_TRUE(cst.ok()) << cst.to_string();
  EXPECT_EQ(cy->shape().to_string(), "[1,3,3,7]");
  // channels_last = 0 is the channels-first pool: [1, 5, 6, 7] pools 6 x 7.
  c.set_int("channels_last", 0);
  auto [fst, fy] = pool(c, small);
  ASSERT_TRUE(fst.ok()) << fst.to_string();
  EXPECT_EQ(fy->shape().to_string(), "[1,5,3,4]");
  // Errors: an unknown mode, count_include_pad on a max pool, channels_last outside {0, 1}, rank 2.
  ir::Attributes bad = a;
  bad.set_string("mode", "lp");
  EXPECT_FALSE(pool(bad, x).first.ok());
  bad = a;
  bad.set_int("count_include_pad", 1);
  EXPECT_FALSE(pool(bad, x).first.ok());
  bad = a;
  bad.set_int("channels_last", 2);
  EXPECT_FALSE(pool(bad, x).first.ok());
  auto* flat = g.add_input("f", DataType::kFloat32, Shape{Dim(4), Dim(8)});
  EXPECT_FALSE(pool(a, flat).first.ok());
}

TEST(NnInference, EinsumImplicitOutputAndErrors) {
  ir::Graph g;
  g.set_opset_import("", 12);
  auto* a = g.add_input("a", DataType::kFloat32, Shape{Dim::symbol("B"), Dim(2), Dim(3)});
  auto* b = g.add_input("b", DataType::kFloat32, Shape{Dim(3), Dim(4)});
  auto* y = g.add_value("y");
  ir::Attributes at;
  at.set_string("equation", "...ij,jk");
  ASSERT_TRUE(ir::infer_node(*g.add_node("Einsum", {a, b}, {y}, at)).ok());
  // implicit output: ellipsis dims, then i and k (each once) in alphabetical order
  EXPECT_EQ(y->shape().to_string(), "[B,2,4]");
  auto* y2 = g.add_value("y2");
  ir::Attributes bad;
  bad.set_string("equation", "ij->i");
  EXPECT_FALSE(ir::infer_node(*g.add_node("Einsum", {a, b}, {y2}, bad)).ok());  // 2 inputs, 1 term
}

TEST(NnKernels, ConvTranspose1dStride2) {
  // x = [1, 2], w = [1, 1, 1], stride 2: out[j] = sum_i x[i] * w[j - 2i]
  //   -> [1, 1, 1+2, 2, 2]
  ir::Attributes a;
  a.set_ints("strides", {2});
  auto out = run_op(17, "ConvTranspose", {{"x", f32({1, 1, 2}, {1, 2})}, {"w", f32({1, 1, 3}, {1, 1, 1})}}, a);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape64{1, 1, 5}));
  expect_values(out[0], {1, 1, 3, 2, 2});
}

TEST(NnKernels, GroupedConvWithBias) {
  // Two groups, each 1 channel, 1x2 kernel on a 1x3 image; bias [10, 20].
  // group 0: x=[1,2,3], w=[1,-1] -> [1-2, 2-3] = [-1,-1] + 10 = [9, 9]
  // group 1: x=[4,5,7], w=[2,1]  -> [8+5, 10+7] = [13, 17] + 20 = [33, 37]
  ir::Attributes a;
  a.set_int("group", 2);
  auto out = run_op(17, "Conv",
                    {{"x", f32({1, 2, 1, 3}, {1, 2, 3, 4, 5, 7})},
                     {"w", f32({2, 1, 1, 2}, {1, -1, 2, 1})},
                     {"b", f32({2}, {10, 20})}},
                    a);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape64{1, 2, 1, 2}));
  expect_values(out[0], {9, 9, 33, 37});
}

TEST(NnKernels, AveragePoolCountIncludePad) {
  // x = [[1,2],[3,4]], kernel 2x2, stride 1, pads 1 on every side -> 3x3 output.
  // corner (0,0) sees only x[0][0]=1: 1/1 without pads, 1/4 with pads; centre sees all: 10/4.
  ir::Attributes a;
  a.set_ints("kernel_shape", {2, 2});
  a.set_ints("pads", {1, 1, 1, 1});
  auto ex = run_op(19, "AveragePool", {{"x", f32({1, 1, 2, 2}, {1, 2, 3, 4})}}, a);
  ASSERT_EQ(ex.size(), 1u);
  expect_values(ex[0], {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  a.set_int("count_include_pad", 1);
  auto in = run_op(19, "AveragePool", {{"x", f32({1, 1, 2, 2}, {1, 2, 3, 4})}}, a);
  ASSERT_EQ(in.size(), 1u);
  expect_values(in[0], {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
}

TEST(NnKernels, MaxPoolIndicesRowAndColumnMajor) {
  // x (2x2 of one plane) = [[1, 5], [7, 2]]; global 2x2 window: max 7 at (1, 0).
  // row-major index 1*2+0 = 2, column-major index 0*2+1 = 1.
  ir::Attributes a;
  a.set_ints("kernel_shape", {2, 2});
  auto r = run_op(12, "MaxPool", {{"x", f32({1, 1, 2, 2}, {1, 5, 7, 2})}}, a, 2);
  ASSERT_EQ(r.size(), 2u);
  expect_values(r[0], {7});
  EXPECT_EQ(r[1].get_i64(0), 2);
  a.set_int("storage_order", 1);
  auto c = run_op(12, "MaxPool", {{"x", f32({1, 1, 2, 2}, {1, 5, 7, 2})}}, a, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].get_i64(0), 1);
}

// ingot::Pool{channels_last=1} on NHWC data equals MaxPool / AveragePool on the NCHW transpose,
// exactly (one reference computes both), on odd sizes, with pads, strides, dilations, ceil_mode,
// auto_pad, count_include_pad both ways, windows without a valid tap, and NaNs in the data.
TEST(NnKernels, IngotPoolMatchesChannelsFirstPoolOnTransposedData) {
  struct Case {
    Shape64 nhwc;
    std::vector<std::pair<const char*, std::vector<int64_t>>> ints;
    std::string auto_pad;
  };
  const Case cases[] = {
      {{2, 9, 9, 8}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}, ""},
      {{1, 7, 10, 3}, {{"kernel_shape", {3, 2}}, {"strides", {2, 3}}, {"pads", {1, 0, 2, 1}}}, ""},
      {{1, 10, 9, 5}, {{"kernel_shape", {3, 3}}, {"dilations", {2, 1}}, {"pads", {2, 1, 2, 1}}}, ""},
      {{3, 9, 10, 2}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"ceil_mode", {1}}}, ""},
      {{1, 4, 5, 4}, {{"kernel_shape", {2, 2}}, {"pads", {2, 2, 2, 2}}}, ""},  // corner windows see no input
      {{1, 9, 8, 6}, {{"kernel_shape", {4, 3}}, {"strides", {2, 2}}}, "SAME_UPPER"},
      {{1, 9, 8, 6}, {{"kernel_shape", {3, 2}}}, "SAME_LOWER"},
      {{2, 6, 7, 3}, {{"kernel_shape", {3, 3}}, {"strides", {1, 2}}}, "VALID"},
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> dist(0.1, 3.0);
  for (const Case& c : cases) {
    Tensor x = Tensor::zeros(DataType::kFloat32, c.nhwc).value();
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, (rng() & 1 ? 1 : -1) * dist(rng));
    for (int64_t i = 5; i < x.numel(); i += 17) x.set_f64(i, std::numeric_limits<double>::quiet_NaN());
    Tensor x_nchw = permute_dims(x, {0, 3, 1, 2}).value();
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int count_pad : {0, 1}) {
        const bool max = op[0] == 'M';
        if (max && count_pad) continue;
        ir::Attributes a;
        for (const auto& [name, v] : c.ints) {
          if (v.size() == 1) a.set_int(name, v[0]);
          else a.set_ints(name, v);
        }
        if (!c.auto_pad.empty()) a.set_string("auto_pad", c.auto_pad);
        if (count_pad) a.set_int("count_include_pad", 1);
        SCOPED_TRACE(std::string(op) + " on " + std::to_string(c.nhwc[1]) + "x" + std::to_string(c.nhwc[2]) +
                     (c.auto_pad.empty() ? "" : " " + c.auto_pad) + (count_pad ? " count_include_pad" : ""));
        auto want = run_op(19, op, {{"x", x_nchw}}, a);
        ir::Attributes p = a;
        p.set_string("mode", max ? "max" : "average");
        p.set_int("channels_last", 1);
        auto got = run_op(19, "Pool", {{"x", x}}, p, 1, "ingot");
        ASSERT_EQ(want.size(), 1u);
        ASSERT_EQ(got.size(), 1u);
        Tensor got_nchw = permute_dims(got[0], {0, 3, 1, 2}).value();
        ASSERT_EQ(got_nchw.shape(), want[0].shape());
        int nans = 0;
        for (int64_t i = 0; i < want[0].numel(); ++i) {
          const double w = want[0].get_f64(i), g = got_nchw.get_f64(i);
          nans += std::isnan(w);
          if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << i;
          else EXPECT_EQ(g, w) << i;
        }
        if (!max) EXPECT_GT(nans, 0) << "the NaNs reached no window";  // a max keeps one only as the first tap
        // channels_last = 0: the same as the ONNX op on the same data.
        p.set_int("channels_last", 0);
        auto same = run_op(19, "Pool", {{"x", x_nchw}}, p, 1, "ingot");
        ASSERT_EQ(same.size(), 1u);
        ASSERT_EQ(same[0].shape(), want[0].shape());
        for (int64_t i = 0; i < want[0].numel(); ++i) {
          const double w = want[0].get_f64(i), g = same[0].get_f64(i);
          if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << i;
          else EXPECT_EQ(g, w) << i;
        }
      }
    }
  }
}

TEST(NnKernels, GemmTransAWithRowBias) {
  // A^T = [[1,3],[2,4]] (A = [[1,2],[3,4]]), B = [[1,0],[1,1]], alpha 2, C row [1, -1], beta 3
  // A^T B = [[1+3, 3], [2+4, 4]] = [[4,3],[6,4]]; *2 = [[8,6],[12,8]]; + 3*[1,-1] = [[11,3],[15,5]]
  ir::Attributes a;
  a.set_int("transA", 1);
  a.set_float("alpha", 2.0f);
  a.set_float("beta", 3.0f);
  auto r = run_op(13, "Gemm",
                  {{"a", f32({2, 2}, {1, 2, 3, 4})}, {"b", f32({2, 2}, {1, 0, 1, 1})}, {"c", f32({2}, {1, -1})}}, a);
  ASSERT_EQ(r.size(), 1u);
  expect_values(r[0], {11, 3, 15, 5});
}

TEST(NnKernels, EinsumTraceAndIntegerMatMul) {
  ir::Attributes a;
  a.set_string("equation", "ii->");
  auto tr = run_op(12, "Einsum", {{"x", f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}}, a);
  ASSERT_EQ(tr.size(), 1u);
  expect_values(tr[0], {15});  // 1 + 5 + 9
  Tensor ia = Tensor::from_vector(DataType::kInt32, {1, 2}, std::vector<int32_t>{3, -2});
  Tensor ib = Tensor::from_vector(DataType::kInt32, {2, 1}, std::vector<int32_t>{5, 7});
  auto mm = run_op(13, "MatMul", {{"a", ia}, {"b", ib}}, {});
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(mm[0].dtype(), DataType::kInt32);
  EXPECT_EQ(mm[0].get_i64(0), 1);  // 15 - 14
}

}  // namespace
}  // namespace ingot
