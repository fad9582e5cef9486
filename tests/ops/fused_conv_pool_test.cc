// Copyright ingot authors. Apache-2.0.
//
// ingot::FusedConvPool (a CNN stem's convolution and max pooling as one op): its shape inference on
// ResNet's stem in both layouts and its refusals of malformed pool attributes; its CPU reference on a
// hand-computed case in the IR text form (as the GPU op-case tests state it), and on random non-zero
// data equal to running the FusedConv node and then the pool node through the CPU kernels: exactly,
// since a max only picks one of the values the convolution stored.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "ops/run_cpu_node.h"

namespace ingot {
namespace {

using ir::Dim;
using ir::Shape;

// One `domain::op` node on graph inputs of the given types; its inference status, output in `y`.
Status infer_one(const std::string& op, const std::vector<ir::TensorType>& ins, const ir::Attributes& attrs,
                 ir::TensorType* y) {
  ir::Graph g;
  g.set_opset_import("", 17);
  g.set_opset_import("ingot", 1);
  std::vector<ir::Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i)
    vals.push_back(g.add_input("in" + std::to_string(i), ins[i].dtype, ins[i].shape));
  ir::Value* out = g.add_value("y");
  const ir::Node* n = g.add_node(op, vals, {out}, attrs, "stem", "ingot");
  INGOT_RETURN_IF_ERROR(ir::infer_node(*n));
  *y = {out->dtype(), out->shape()};
  return Status::Ok();
}

// ResNet's stem: Conv 7x7/2 pad 3 (+ BN folded + Relu), MaxPool 3x3/2 pad 1.
ir::Attributes stem_attrs(bool channels_last) {
  ir::Attributes a;
  a.set_ints("kernel_shape", {7, 7});
  a.set_ints("pads", {3, 3, 3, 3});
  a.set_ints("strides", {2, 2});
  a.set_int("channels_last", channels_last ? 1 : 0);
  a.set_string("activation", "Relu");
  a.set_ints("pool_kernel_shape", {3, 3});
  a.set_ints("pool_strides", {2, 2});
  a.set_ints("pool_pads", {1, 1, 1, 1});
  return a;
}

TEST(FusedConvPoolInference, ResNetStemInBothLayouts) {
  const Dim n = Dim::symbol("N");
  struct Case {
    bool channels_last;
    Shape x, w;
    std::string want;
  } cases[] = {
      {true, Shape{Dim(2), Dim(224), Dim(224), Dim(3)}, Shape{Dim(64), Dim(7), Dim(7), Dim(3)}, "[2,56,56,64]"},
      {false, Shape{Dim(2), Dim(3), Dim(224), Dim(224)}, Shape{Dim(64), Dim(3), Dim(7), Dim(7)}, "[2,64,56,56]"},
      {true, Shape{n, Dim(224), Dim(224), Dim(3)}, Shape{Dim(64), Dim(7), Dim(7), Dim(3)}, "[N,56,56,64]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
      ir::TensorType y;
      Status s = infer_one("FusedConvPool", {{t, c.x}, {t, c.w}, {t, Shape{Dim(64)}}}, stem_attrs(c.channels_last), &y);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(y.shape.to_string(), c.want);
      EXPECT_EQ(y.dtype, t);
    }
  }
  // pool_ceil_mode: (112 + 0 - 2) / 2 + 1 = 56 floor, and a 111-pixel conv output gives 55 floor, 56 ceil.
  for (int64_t ceil : {0, 1}) {
    ir::Attributes a = stem_attrs(false);
    a.set_ints("pool_kernel_shape", {2, 2});
    a.set_ints("pool_pads", {0, 0, 0, 0});
    a.set_int("pool_ceil_mode", ceil);
    a.set_ints("pads", {2, 2, 2, 2});  // (224 + 4 - 7) / 2 + 1 = 111
    ir::TensorType y;
    Status s = infer_one("FusedConvPool",
                         {{DataType::kFloat32, Shape{Dim(1), Dim(3), Dim(224), Dim(224)}},
                          {DataType::kFloat32, Shape{Dim(64), Dim(3), Dim(7), Dim(7)}}},
                         a, &y);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(y.shape.to_string(), ceil ? "[1,64,56,56]" : "[1,64,55,55]");
  }
}

TEST(FusedConvPoolInference, MalformedAttributesAreErrors) {
  const std::vector<ir::TensorType> ins = {{DataType::kFloat32, Shape{Dim(1), Dim(16), Dim(16), Dim(3)}},
                                           {DataType::kFloat32, Shape{Dim(8), Dim(3), Dim(3), Dim(3)}}};
  // Each case sets attribute `name` to `ints` (or `text` when it is a string attribute, erases it when both
  // are empty) on the stem's attributes.
  struct Case {
    const char* name;
    std::vector<int64_t> ints;
    std::string text, message;
  } cases[] = {
      {"pool_kernel_shape", {3, 3, 3}, "", "pool_kernel_shape has 3 values, expected 2"},
      {"pool_strides", {2}, "", "pool_strides has 1 values, expected 2"},
      {"pool_pads", {1, 1}, "", "pool_pads has 2 values, expected 4"},
      {"pool_dilations", {1, 1, 1}, "", "pool_dilations has 3 values, expected 2"},
      {"pool_kernel_shape", {}, "", "required attribute 'pool_kernel_shape' is missing"},
      {"activation", {}, "Swoosh", "unknown activation 'Swoosh'"},
      {"residual_before_activation", {0}, "", "unknown attribute 'residual_before_activation'"},
      {"pool_kernel_shape", {40, 3}, "", "the max pool after the convolution"},  // larger than the conv's output
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    ir::Attributes a = stem_attrs(true);
    a.set_ints("kernel_shape", {3, 3});
    a.set_ints("pads", {1, 1, 1, 1});
    if (!c.text.empty())
      a.set_string(c.name, c.text);
    else if (c.ints.empty())
      a.erase(c.name);
    else if (std::string(c.name) == "residual_before_activation")
      a.set_int(c.name, c.ints[0]);
    else
      a.set_ints(c.name, c.ints);
    ir::TensorType y;
    Status s = infer_one("FusedConvPool", ins, a, &y);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.to_string();
  }
}

// y = Relu(2x + 0.5) by a 1x1 conv of one channel, then the max of each 2x2 block of the 4x4 map
// x = [-6 .. 9] row by row:
//   Relu(2x + 0.5) = [0 0 0 0; 0 0 0.5 2.5; 4.5 6.5 8.5 10.5; 12.5 14.5 16.5 18.5] -> [0 2.5; 14.5 18.5].
// With one channel NHWC and NCHW hold the same numbers, so both layouts give these. Stated in the
// IR text form, as tests/gpu/op_case_util.h's check() states a node.
TEST(FusedConvPoolKernel, HandComputedStemInTextForm) {
  for (int cl : {0, 1}) {
    SCOPED_TRACE(cl ? "channels-last" : "channels-first");
    const std::string t = std::string("graph main {\n  opset \"\" 17\n  opset \"ingot\" 1\n") +
                          "  input %x: " + (cl ? "f32[1,4,4,1]" : "f32[1,1,4,4]") +
                          "\n  init %w: f32[1,1,1,1] = [2]\n  init %b: f32[1] = [0.5]\n"
                          "  %y = ingot::FusedConvPool {activation=\"Relu\", channels_last=" +
                          std::to_string(cl) +
                          ", kernel_shape=[1, 1], pool_kernel_shape=[2, 2], pool_strides=[2, 2]}(%x, %w, %b) @n0\n"
                          "  output %y\n}\n";
    auto g = ir::parse_text(t);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_TRUE(ir::infer_graph(**g).ok());
    Tensor x = Tensor::zeros(DataType::kFloat32, (*g)->inputs()[0]->shape().concrete()).value();
    for (int64_t i = 0; i < 16; ++i) x.set_f64(i, static_cast<double>(i - 6));
    auto y = cpu::Executor().run(**g, {{"x", x}});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    const std::vector<double> want = {0, 2.5, 14.5, 18.5};
    ASSERT_EQ((*y)[0].numel(), 4);
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ((*y)[0].get_f64(i), want[static_cast<size_t>(i)]) << i;
  }
}

// One node's first output through the CPU kernels (inference, allocation, kernel).
Result<Tensor> run_one(const std::string& op, const std::string& domain, const std::vector<const Tensor*>& ins,
                       const ir::Attributes& attrs) {
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ops_test::run_cpu_node(op, domain, ins, attrs));
  return outs[0];
}

Tensor random_tensor(DataType t, const Shape64& shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  Tensor x = Tensor::zeros(t, shape).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
  return x;
}

TEST(FusedConvPoolKernel, EqualsFusedConvThenMaxPool) {
  struct Case {
    const char* what;
    int64_t n, c, h, w, k, group;
    std::vector<int64_t> kernel, strides, pads;
    std::vector<int64_t> pool_kernel, pool_strides, pool_pads, pool_dilations;
    int64_t pool_ceil;
  } cases[] = {
      // clang-format off
      {"stem 7x7/2, pool 3x3/2 pad 1", 2, 3, 23, 21, 8, 1, {7, 7}, {2, 2}, {3, 3, 3, 3}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0},
      {"3x3 conv, pool 2x2/2", 1, 4, 11, 14, 6, 1, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, 0},
      {"grouped 3x3/2, pool 3x3/2 pad 1, ceil", 3, 4, 13, 9, 6, 2, {3, 3}, {2, 2}, {1, 0, 1, 0}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1},
      {"1x1 conv, dilated pool 2x2/2 pad 0", 1, 5, 9, 10, 3, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {2, 1}, 0},
      // clang-format on
  };
  const std::vector<std::pair<std::string, std::vector<float>>> acts = {{"Relu", {}}, {"LeakyRelu", {0.1f}}, {"", {}}};
  std::mt19937 rng(29);
  for (const Case& c : cases) {
    for (bool cl : {false, true}) {
      for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        for (bool bias : {true, false}) {
          for (const auto& [act, params] : acts) {
            // bf16 once per case and layout: the types share every code path but the rounding.
            if (t == DataType::kBFloat16 && (!bias || act != "Relu")) continue;
            SCOPED_TRACE(std::string(c.what) + (cl ? ", channels-last " : ", channels-first ") + data_type_name(t) +
                         (bias ? ", bias, " : ", no bias, ") + (act.empty() ? "no activation" : act));
            const Shape64 xs = cl ? Shape64{c.n, c.h, c.w, c.c} : Shape64{c.n, c.c, c.h, c.w};
            const int64_t cg = c.c / c.group;
            const Shape64 ws =
                cl ? Shape64{c.k, c.kernel[0], c.kernel[1], cg} : Shape64{c.k, cg, c.kernel[0], c.kernel[1]};
            Tensor x = random_tensor(t, xs, rng), w = random_tensor(t, ws, rng), b = random_tensor(t, {c.k}, rng);
            ir::Attributes conv;
            conv.set_ints("kernel_shape", c.kernel);
            conv.set_ints("strides", c.strides);
            conv.set_ints("pads", c.pads);
            conv.set_int("group", c.group);
            conv.set_int("channels_last", cl ? 1 : 0);
            if (!act.empty()) conv.set_string("activation", act);
            if (!params.empty()) conv.set_floats("activation_params", params);
            ir::Attributes pool;
            pool.set_ints("kernel_shape", c.pool_kernel);
            pool.set_ints("strides", c.pool_strides);
            pool.set_ints("pads", c.pool_pads);
            if (!c.pool_dilations.empty()) pool.set_ints("dilations", c.pool_dilations);
            if (c.pool_ceil) pool.set_int("ceil_mode", 1);
            ir::Attributes fused = conv;
            for (const auto& [name, a] : pool.all()) fused.set("pool_" + name, a);
            const std::vector<const Tensor*> ins = {&x, &w, bias ? &b : nullptr};
            auto got = run_one("FusedConvPool", "ingot", ins, fused);
            ASSERT_TRUE(got.ok()) << got.status().to_string();
            auto conv_out = run_one("FusedConv", "ingot", ins, conv);
            ASSERT_TRUE(conv_out.ok()) << conv_out.status().to_string();
            // Channels-first through ONNX MaxPool, channels-last through ingot::Pool.
            if (cl) {
              pool.set_string("mode", "max");
              pool.set_int("channels_last", 1);
            }
            auto want = run_one(cl ? "Pool" : "MaxPool", cl ? "ingot" : "", {&*conv_out}, pool);
            ASSERT_TRUE(want.ok()) << want.status().to_string();
            ASSERT_EQ(got->dtype(), t);
            ASSERT_EQ(got->shape(), want->shape());
            ASSERT_GT(got->numel(), 0);
            int64_t nonzero = 0;
            for (int64_t i = 0; i < got->numel(); ++i) {
              ASSERT_EQ(got->get_f64(i), want->get_f64(i)) << "element " << i;
              nonzero += got->get_f64(i) != 0;
            }
            EXPECT_GT(nonzero, got->numel() / 4);  // the comparison saw real numbers
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ingot
