// Copyright ingot authors. Apache-2.0.
//
// Cast / small-float / quantization family: fp8 and fp4 bit patterns derived by hand from the
// format definitions, Cast corner cases (double rounding, wraparound, strings, e8m0 rounding
// modes), shape inference with symbolic dims, errors, and quantization granularities.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "backend/cpu/executor.h"
#include "core/dtype.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "../test_util.h"

namespace ingot {
namespace {

using test::f32;

using ir::Dim;
using ir::Shape;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor i32(Shape64 shape, std::vector<int32_t> v) { return Tensor::from_vector(DataType::kInt32, shape, v); }
Tensor u8(Shape64 shape, std::vector<uint8_t> v) { return Tensor::from_vector(DataType::kUInt8, shape, v); }
Tensor i8(Shape64 shape, std::vector<int8_t> v) { return Tensor::from_vector(DataType::kInt8, shape, v); }

uint8_t enc(float f, DataType t, bool sat = true) { return float_to_small_float(f, t, sat); }

// ---- fp8 / fp4 bit patterns

TEST(Float8, E4M3FN) {
  const DataType t = DataType::kFloat8E4M3FN;  // s eeee mmm, bias 7
  EXPECT_EQ(enc(1.0f, t), 0x38);                // e=7
  EXPECT_EQ(enc(-2.0f, t), 0xC0);
  EXPECT_EQ(enc(448.0f, t), 0x7E);              // 1.75 * 2^8, largest finite
  EXPECT_EQ(enc(-448.0f, t), 0xFE);
  EXPECT_EQ(enc(1.0625f, t), 0x38);             // tie 1.0 / 1.125 -> even mantissa 0
  EXPECT_EQ(enc(1.1875f, t), 0x3A);             // tie 1.125 / 1.25 -> even mantissa 2
  EXPECT_EQ(enc(std::ldexp(1.0f, -9), t), 0x01);         // smallest subnormal
  EXPECT_EQ(enc(std::ldexp(1.0f, -10), t), 0x00);        // half of it: tie -> 0
  EXPECT_EQ(enc(3 * std::ldexp(1.0f, -10), t), 0x02);    // 1.5 steps: tie -> 2
  EXPECT_EQ(enc(-0.0f, t), 0x80);
  EXPECT_EQ(enc(500.0f, t, true), 0x7E);
  EXPECT_EQ(enc(500.0f, t, false), 0x7F);       // NaN, no inf in this format
  EXPECT_EQ(enc(464.0f, t, false), 0x7E);       // tie 448 / (480) -> even -> 448
  EXPECT_EQ(enc(kInf, t, true), 0x7E);
  EXPECT_EQ(enc(-kInf, t, true), 0xFE);
  EXPECT_EQ(enc(-kInf, t, false), 0xFF);
  EXPECT_EQ(enc(kNaN, t), 0x7F);
  EXPECT_EQ(small_float_to_float(0x38, t), 1.0f);
  EXPECT_EQ(small_float_to_float(0x7E, t), 448.0f);
  EXPECT_EQ(small_float_to_float(0x01, t), std::ldexp(1.0f, -9));
  EXPECT_EQ(small_float_to_float(0x7F & 0x78, t), 256.0f);  // e=15, m=0 is a number here
  EXPECT_TRUE(std::isnan(small_float_to_float(0x7F, t)));
  EXPECT_TRUE(std::isnan(small_float_to_float(0xFF, t)));
}

TEST(Float8, E4M3FNUZ) {
  const DataType t = DataType::kFloat8E4M3FNUZ;  // bias 8, NaN = 0x80, no -0
  EXPECT_EQ(enc(1.0f, t), 0x40);
  EXPECT_EQ(enc(-1.0f, t), 0xC0);
  EXPECT_EQ(enc(240.0f, t), 0x7F);                // 1.875 * 2^7
  EXPECT_EQ(enc(-0.0f, t), 0x00);
  EXPECT_EQ(enc(-1e-9f, t), 0x00);                // underflow has no sign
  EXPECT_EQ(enc(kNaN, t), 0x80);
  EXPECT_EQ(enc(kInf, t, false), 0x80);
  EXPECT_EQ(enc(-kInf, t, true), 0xFF);
  EXPECT_TRUE(std::isnan(small_float_to_float(0x80, t)));
  EXPECT_EQ(small_float_to_float(0xFF, t), -240.0f);
}

TEST(Float8, E5M2) {
  const DataType t = DataType::kFloat8E5M2;  // IEEE-like, bias 15
  EXPECT_EQ(enc(1.0f, t), 0x3C);
  EXPECT_EQ(enc(57344.0f, t), 0x7B);
  EXPECT_EQ(enc(61440.0f, t, true), 0x7B);  // tie 57344 / 65536 -> overflow -> saturate
  EXPECT_EQ(enc(61440.0f, t, false), 0x7C);  // inf
  EXPECT_EQ(enc(-kInf, t, false), 0xFC);
  EXPECT_EQ(enc(std::ldexp(1.0f, -16), t), 0x01);
  EXPECT_EQ(enc(1.125f, t), 0x3C);  // tie 1.0 / 1.25 -> even
  EXPECT_EQ(enc(1.375f, t), 0x3E);  // tie 1.25 / 1.5 -> even (1.5)
  EXPECT_TRUE(std::isinf(small_float_to_float(0x7C, t)));
  EXPECT_TRUE(std::isnan(small_float_to_float(0x7D, t)));
  EXPECT_EQ(small_float_to_float(0x01, t), std::ldexp(1.0f, -16));
}

TEST(Float8, E5M2FNUZ) {
  const DataType t = DataType::kFloat8E5M2FNUZ;  // bias 16
  EXPECT_EQ(enc(1.0f, t), 0x40);
  EXPECT_EQ(enc(57344.0f, t), 0x7F);
  EXPECT_EQ(enc(kInf, t, false), 0x80);
  EXPECT_EQ(enc(kInf, t, true), 0x7F);
  EXPECT_EQ(enc(std::ldexp(1.0f, -17), t), 0x01);
  EXPECT_TRUE(std::isnan(small_float_to_float(0x80, t)));
}

TEST(Float4, E2M1) {
  const DataType t = DataType::kFloat4E2M1;
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(enc(values[c], t), c);
    EXPECT_EQ(small_float_to_float(static_cast<uint8_t>(c), t), values[c]);
    EXPECT_EQ(small_float_to_float(static_cast<uint8_t>(c | 8), t), -values[c]);
  }
  EXPECT_EQ(enc(0.25f, t), 0);  // tie 0 / 0.5 -> even
  EXPECT_EQ(enc(0.75f, t), 2);  // tie 0.5 / 1 -> even (1.0)
  EXPECT_EQ(enc(5.0f, t), 6);   // tie 4 / 6 -> even (4)
  EXPECT_EQ(enc(100.0f, t, false), 7);  // no inf/NaN: always saturates
  EXPECT_EQ(enc(-kInf, t), 0xF);
  EXPECT_EQ(enc(-1.5f, t), 0xB);
}

TEST(Float8, E8M0) {
  const DataType t = DataType::kFloat8E8M0;
  EXPECT_EQ(small_float_to_float(127, t), 1.0f);
  EXPECT_EQ(small_float_to_float(128, t), 2.0f);
  EXPECT_EQ(small_float_to_float(0, t), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(small_float_to_float(0xFF, t)));
  EXPECT_EQ(enc(1.0f, t), 127);
  EXPECT_EQ(enc(1.5f, t), 128);   // rounds up (ONNX Cast default)
  EXPECT_EQ(enc(0.25f, t), 125);
  EXPECT_EQ(enc(kNaN, t), 0xFF);
}

// ---- running single nodes

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
  auto inf = ir::infer_graph(g);
  EXPECT_TRUE(inf.ok()) << inf.message();
  cpu::Executor ex;
  auto r = ex.run(g, feeds);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Tensor>{};
}

Tensor cast(const Tensor& x, DataType to, int64_t opset = 21, int saturate = 1, const std::string& round = "") {
  ir::Attributes a;
  a.set_int("to", static_cast<int64_t>(to));
  if (opset >= 19) a.set_int("saturate", saturate);
  if (!round.empty()) a.set_string("round_mode", round);
  auto r = run_one(opset, "Cast", {{"x", x}}, a);
  return r.empty() ? Tensor() : r[0];
}

TEST(CastKernel, DoubleToHalfRoundsOnce) {
  // 1 + 2^-11 + 2^-40 lies just above the f16 midpoint between 1 and 1 + 2^-10. Rounding to
  // float first would land exactly on the midpoint and then round down to 1.0.
  double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  Tensor y = cast(Tensor::from_vector(DataType::kFloat64, {1}, std::vector<double>{v}), DataType::kFloat16);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.data<uint16_t>()[0], 0x3C01);
}

TEST(CastKernel, IntegerWraparoundAndTruncation) {
  Tensor a = cast(i32({3}, {300, -1, 128}), DataType::kInt8);
  EXPECT_EQ(a.to_i64_vector(), (std::vector<int64_t>{44, -1, -128}));
  Tensor b = cast(f32({3}, {-2.7f, 2.7f, 255.9f}), DataType::kUInt8);
  EXPECT_EQ(b.to_i64_vector(), (std::vector<int64_t>{254, 2, 255}));
  Tensor c = cast(f32({4}, {9, -9, 15, 7}), DataType::kInt4);  // wraps modulo 16
  EXPECT_EQ(c.to_i64_vector(), (std::vector<int64_t>{-7, 7, -1, 7}));
  Tensor d = cast(f32({3}, {0.0f, -0.0f, kNaN}), DataType::kBool);
  EXPECT_EQ(d.to_i64_vector(), (std::vector<int64_t>{0, 0, 1}));
  // int64 -> float rounds once (2^24 + 1 is a tie -> even 2^24; 2^24 + 3 -> 2^24 + 4).
  Tensor e = cast(Tensor::from_vector(DataType::kInt64, {2}, std::vector<int64_t>{16777217, 16777219}),
                  DataType::kFloat32);
  EXPECT_EQ(e.data<float>()[0], 16777216.0f);
  EXPECT_EQ(e.data<float>()[1], 16777220.0f);
}

TEST(CastKernel, Float8SaturateAttribute) {
  Tensor x = f32({2}, {1e6f, -kInf});
  Tensor s = cast(x, DataType::kFloat8E4M3FN, 19, 1);
  EXPECT_EQ(s.data<uint8_t>()[0], 0x7E);
  EXPECT_EQ(s.data<uint8_t>()[1], 0xFE);
  Tensor n = cast(x, DataType::kFloat8E5M2, 19, 0);
  EXPECT_EQ(n.data<uint8_t>()[0], 0x7C);
  EXPECT_EQ(n.data<uint8_t>()[1], 0xFC);
}

TEST(CastKernel, E8M0RoundModes) {
  Tensor x = f32({3}, {1.5f, 1.25f, 1.0f});
  auto bits = [](const Tensor& t) {
    return std::vector<int>{t.data<uint8_t>()[0], t.data<uint8_t>()[1], t.data<uint8_t>()[2]};
  };
  EXPECT_EQ(bits(cast(x, DataType::kFloat8E8M0, 24, 1, "up")), (std::vector<int>{128, 128, 127}));
  EXPECT_EQ(bits(cast(x, DataType::kFloat8E8M0, 24, 1, "down")), (std::vector<int>{127, 127, 127}));
  EXPECT_EQ(bits(cast(x, DataType::kFloat8E8M0, 24, 1, "nearest")), (std::vector<int>{128, 127, 127}));
}

TEST(CastKernel, StringsBothWays) {
  Tensor s = Tensor::from_strings({5}, {"1e3", "-INF", "NaN", " 2.5 ", "+inf"});
  Tensor y = cast(s, DataType::kFloat32);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.data<float>()[0], 1000.0f);
  EXPECT_EQ(y.data<float>()[1], -kInf);
  EXPECT_TRUE(std::isnan(y.data<float>()[2]));
  EXPECT_EQ(y.data<float>()[3], 2.5f);
  EXPECT_EQ(y.data<float>()[4], kInf);
  Tensor n = cast(Tensor::from_strings({2}, {"-12", "7"}), DataType::kInt64);
  EXPECT_EQ(n.to_i64_vector(), (std::vector<int64_t>{-12, 7}));

  Tensor t = cast(f32({5}, {0.1f, 1.0f, 1e20f, -1.5e-7f, kInf}), DataType::kString);
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.strings(), (std::vector<std::string>{"0.1", "1.0", "1e+20", "-1.5e-07", "inf"}));
  Tensor u = cast(i32({2}, {-5, 42}), DataType::kString);
  EXPECT_EQ(u.strings(), (std::vector<std::string>{"-5", "42"}));
}

TEST(CastKernel, BitCastKeepsBits) {
  ir::Attributes a;
  a.set_int("to", static_cast<int64_t>(DataType::kInt32));
  auto r = run_one(26, "BitCast", {{"x", f32({2}, {1.0f, -2.0f})}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].to_i64_vector(), (std::vector<int64_t>{0x3F800000, static_cast<int32_t>(0xC0000000u)}));
}

// ---- inference

TEST(QuantInference, SymbolicShapesAndDtypes) {
  ir::Graph g;
  g.set_opset_import("", 21);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N"), Dim(4)});
  auto* s = g.add_input("s", DataType::kFloat32, Shape{});
  auto* z = g.add_input("z", DataType::kInt8, Shape{});
  auto* q = g.add_value("q");
  ASSERT_TRUE(ir::infer_node(*g.add_node("QuantizeLinear", {x, s, z}, {q})).ok());
  EXPECT_EQ(q->dtype(), DataType::kInt8);
  EXPECT_EQ(q->shape().to_string(), "[N,4]");

  auto* q2 = g.add_value("q2");
  ir::Attributes a;
  a.set_int("output_dtype", static_cast<int64_t>(DataType::kUInt4));
  ASSERT_TRUE(ir::infer_node(*g.add_node("QuantizeLinear", {x, s}, {q2}, a)).ok());
  EXPECT_EQ(q2->dtype(), DataType::kUInt4);

  auto* q3 = g.add_value("q3");
  ASSERT_TRUE(ir::infer_node(*g.add_node("QuantizeLinear", {x, s}, {q3})).ok());
  EXPECT_EQ(q3->dtype(), DataType::kUInt8);

  auto* d = g.add_value("d");
  ASSERT_TRUE(ir::infer_node(*g.add_node("DequantizeLinear", {q, s, z}, {d})).ok());
  EXPECT_EQ(d->dtype(), DataType::kFloat32);
  EXPECT_EQ(d->shape().to_string(), "[N,4]");
}

TEST(QuantInference, ConvIntegerAndMatMulIntegerShapes) {
  ir::Graph g;
  g.set_opset_import("", 10);
  auto* x = g.add_input("x", DataType::kUInt8, Shape{Dim::symbol("B"), Dim(2), Dim(5), Dim(5)});
  auto* w = g.add_input("w", DataType::kUInt8, Shape{Dim(4), Dim(2), Dim(3), Dim(3)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_ints("pads", {1, 1, 1, 1});
  a.set_ints("strides", {2, 2});
  ASSERT_TRUE(ir::infer_node(*g.add_node("ConvInteger", {x, w}, {y}, a)).ok());
  EXPECT_EQ(y->dtype(), DataType::kInt32);
  EXPECT_EQ(y->shape().to_string(), "[B,4,3,3]");  // (5 + 2 - 3) / 2 + 1

  auto* m = g.add_input("m", DataType::kInt8, Shape{Dim::symbol("S"), Dim(7)});
  auto* n = g.add_input("n", DataType::kInt8, Shape{Dim(7), Dim(3)});
  auto* mo = g.add_value("mo");
  ASSERT_TRUE(ir::infer_node(*g.add_node("MatMulInteger", {m, n}, {mo})).ok());
  EXPECT_EQ(mo->shape().to_string(), "[S,3]");

  auto* bad = g.add_input("bad", DataType::kInt8, Shape{Dim(5), Dim(3)});
  auto* bo = g.add_value("bo");
  EXPECT_FALSE(ir::infer_node(*g.add_node("MatMulInteger", {m, bad}, {bo})).ok());
}

TEST(QuantInference, CastAndBitCastErrors) {
  ir::Graph g;
  g.set_opset_import("", 26);
  auto* x = g.add_input("x", DataType::kFloat32, Shape{Dim::symbol("N")});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_int("to", static_cast<int64_t>(DataType::kInt16));
  EXPECT_FALSE(ir::infer_node(*g.add_node("BitCast", {x}, {y}, a)).ok());  // 32 vs 16 bits
  auto* y2 = g.add_value("y2");
  ir::Attributes b;
  b.set_int("to", 99);
  EXPECT_FALSE(ir::infer_node(*g.add_node("Cast", {x}, {y2}, b)).ok());
  auto* y3 = g.add_value("y3");
  ir::Attributes c;
  c.set_int("to", static_cast<int64_t>(DataType::kFloat8E4M3FN));
  ASSERT_TRUE(ir::infer_node(*g.add_node("Cast", {x}, {y3}, c)).ok());
  EXPECT_EQ(y3->dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(y3->shape().to_string(), "[N]");
}

// ---- quantization kernels

TEST(QuantKernels, BlockedQuantizeWithRemainderBlock) {
  // x [1,5], axis 1, block 2: scales [1,3] cover columns {0,1}, {2,3}, {4}.
  Tensor x = f32({1, 5}, {1, 3, 10, -10, 7});
  Tensor s = f32({1, 3}, {2, 4, 1});
  Tensor z = i8({1, 3}, {0, 1, -2});
  ir::Attributes a;
  a.set_int("axis", 1);
  a.set_int("block_size", 2);
  auto r = run_one(21, "QuantizeLinear", {{"x", x}, {"s", s}, {"z", z}}, a);
  ASSERT_EQ(r.size(), 1u);
  // 1/2 = 0.5 -> 0 (even), 3/2 = 1.5 -> 2, 10/4 = 2.5 -> 2, +1 = 3, -2.5 -> -2, +1 = -1, 7 - 2 = 5
  EXPECT_EQ(r[0].to_i64_vector(), (std::vector<int64_t>{0, 2, 3, -1, 5}));
}

TEST(QuantKernels, PerAxisDequantizeAndSaturatingQuantize) {
  Tensor q = u8({2, 2}, {10, 20, 30, 40});
  Tensor s = f32({2}, {0.5f, 2.0f});
  Tensor z = u8({2}, {10, 0});
  ir::Attributes a;
  a.set_int("axis", 1);
  auto r = run_one(13, "DequantizeLinear", {{"q", q}, {"s", s}, {"z", z}}, a);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].to_f64_vector(), (std::vector<double>{0, 40, 10, 80}));

  auto r2 = run_one(13, "QuantizeLinear", {{"x", f32({3}, {-5, 1000, 2.5f})}, {"s", f32({}, {1})}}, {});
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0].to_i64_vector(), (std::vector<int64_t>{0, 255, 2}));
}

TEST(QuantKernels, MatMulIntegerPerRowZeroPoint) {
  // A [2,2] with per-row zero points {1, 2}; B [2,1] with zero point 3.
  Tensor a = u8({2, 2}, {1, 2, 3, 4});
  Tensor b = u8({2, 1}, {4, 5});
  auto r = run_one(10, "MatMulInteger", {{"a", a}, {"b", b}, {"az", u8({2}, {1, 2})}, {"bz", u8({}, {3})}}, {});
  ASSERT_EQ(r.size(), 1u);
  // rows (0,1) and (1,2) against (1,2): 0*1 + 1*2 = 2, 1*1 + 2*2 = 5
  EXPECT_EQ(r[0].to_i64_vector(), (std::vector<int64_t>{2, 5}));
}

TEST(QuantKernels, QLinearConvPerChannelScaleAndBias) {
  // 1x1 kernel, two output channels over one input channel of 2 pixels.
  Tensor x = u8({1, 1, 1, 2}, {12, 14});
  Tensor w = i8({2, 1, 1, 1}, {2, -1});
  auto r = run_one(10, "QLinearConv",
                   {{"x", x}, {"xs", f32({}, {0.5f})}, {"xz", u8({}, {10})}, {"w", w},
                    {"ws", f32({2}, {1.0f, 2.0f})}, {"wz", i8({2}, {0, 0})}, {"ys", f32({}, {1.0f})},
                    {"yz", u8({}, {100})}, {"b", i32({2}, {1, -2})}},
                   {});
  ASSERT_EQ(r.size(), 1u);
  // ch0: (x-10)*2 + 1 = {5, 9}, * 0.5 + 100 = {102.5 -> 102, 104.5 -> 104}
  // ch1: (x-10)*-1 - 2 = {-4, -6}, * 1.0 + 100 = {96, 94}
  EXPECT_EQ(r[0].to_i64_vector(), (std::vector<int64_t>{102, 104, 96, 94}));
}

TEST(QuantKernels, DynamicQuantizeLinear) {
  auto r = run_one(11, "DynamicQuantizeLinear", {{"x", f32({4}, {0, 191, -64, 10.5f})}}, {}, 3);
  ASSERT_EQ(r.size(), 3u);
  // range [-64, 191] -> scale 255 / 255 = 1, zero point 64; 10.5 -> 10 (even) + 64
  EXPECT_EQ(r[1].get_f64(0), 1.0);
  EXPECT_EQ(r[2].get_i64(0), 64);
  EXPECT_EQ(r[0].to_i64_vector(), (std::vector<int64_t>{64, 255, 0, 74}));
}

TEST(QuantKernels, BadAxisIsAnError) {
  ir::Graph g;
  g.set_opset_import("", 13);
  auto* x = g.add_input("x", DataType::kUInt8, Shape{Dim(2), Dim(2)});
  auto* s = g.add_input("s", DataType::kFloat32, Shape{Dim(2)});
  auto* y = g.add_value("y");
  ir::Attributes a;
  a.set_int("axis", 3);
  g.add_node("DequantizeLinear", {x, s}, {y}, a);
  g.add_output(y);
  ASSERT_TRUE(ir::infer_graph(g).ok());
  cpu::Executor ex;
  auto r = ex.run(g, {{"x", u8({2, 2}, {1, 2, 3, 4})}, {"s", f32({2}, {1, 2})}});
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace ingot
