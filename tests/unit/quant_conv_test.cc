// Copyright ingot authors. Apache-2.0.
//
// The quantized convolution: ingot::QuantConv's reference kernel against a direct convolution of
// the dequantized operands written here (random non-zero int8 / E4M3 data, random shapes:
// grouped, depthwise, strided, padded, dilated; int8 exact before the output rounding), its
// channels-last form, fuse_quant_gemm on the Q/DQ forms around a Conv (before / after IR text,
// then the same outputs as the float graph, on the CPU reference and in an engine), what it
// refuses, insert_qdq's 8-bit conv weights, and the builder's split-back where a backend has no
// quantized convolution.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/builder.h"
#include "builder/split_fusions.h"
#include "engine/engine_format.h"
#include "graph_check_util.h"
#include "ingot/engine.h"
#include "ir/verify.h"
#include "named_tactic.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"
#include "quant/insert_qdq.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

using testing_util::expect_same_outputs;
using testing_util::replace_once;
using testing_util::node_lines;
using testing_util::parse_ir;

// ---- the reference kernel against a convolution written out here

struct ConvCase {
  int64_t n, c, m, group, h, w, kh, kw;
  int64_t stride_h, stride_w, dil_h, dil_w;
  int64_t pad_t, pad_l, pad_b, pad_r;
  int64_t oh() const { return (h + pad_t + pad_b - ((kh - 1) * dil_h + 1)) / stride_h + 1; }
  int64_t ow() const { return (w + pad_l + pad_r - ((kw - 1) * dil_w + 1)) / stride_w + 1; }
  std::string attrs() const {
    auto two = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
    return "strides=" + two(stride_h, stride_w) + ", dilations=" + two(dil_h, dil_w) + ", pads=[" +
           std::to_string(pad_t) + ", " + std::to_string(pad_l) + ", " + std::to_string(pad_b) + ", " +
           std::to_string(pad_r) + "], group=" + std::to_string(group);
  }
};

// Random shapes: plain, grouped, depthwise; strides, dilations and asymmetric pads of 0..2.
std::vector<ConvCase> random_cases(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % (hi - lo + 1)); };
  std::vector<ConvCase> out;
  while (static_cast<int>(out.size()) < count) {
    ConvCase k{};
    const int kind = static_cast<int>(out.size() % 3);  // 0 plain, 1 grouped, 2 depthwise
    k.group = kind == 0 ? 1 : kind == 1 ? pick(2, 3) : pick(2, 5);
    const int64_t cg = kind == 2 ? 1 : pick(1, 4), mg = kind == 2 ? pick(1, 2) : pick(1, 3);
    k.c = cg * k.group;
    k.m = mg * k.group;
    k.n = pick(1, 2);
    k.h = pick(4, 9);
    k.w = pick(4, 9);
    k.kh = pick(1, 3);
    k.kw = pick(1, 3);
    k.stride_h = pick(1, 2);
    k.stride_w = pick(1, 2);
    k.dil_h = pick(1, 2);
    k.dil_w = pick(1, 2);
    k.pad_t = pick(0, 2);
    k.pad_l = pick(0, 2);
    k.pad_b = pick(0, 2);
    k.pad_r = pick(0, 2);
    if (k.oh() >= 1 && k.ow() >= 1) out.push_back(k);
  }
  return out;
}

// The decoded operands and epilogue inputs of one case.
struct ConvData {
  DataType q;
  Tensor x, w, b, r;  // x, w 8-bit; b [M] and r (Y's shape) float32
  double sx = 0;
  std::vector<double> sw;  // one or M
};

// Non-zero 8-bit values: int8 in [-127, 127] without 0; E4M3 numbers of magnitude 2^-4..2^5.
double random_8bit(std::mt19937& rng, DataType q) {
  const double sign = rng() & 1 ? 1.0 : -1.0;
  if (q == DataType::kInt8) return sign * static_cast<double>(1 + rng() % 127);
  std::uniform_real_distribution<float> e(-4.0f, 5.0f);
  const float v = std::exp2(e(rng));
  return sign * small_float_to_float(float_to_small_float(v, DataType::kFloat8E4M3FN, true), DataType::kFloat8E4M3FN);
}

ConvData random_data(const ConvCase& k, DataType q, bool per_channel, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  ConvData d;
  d.q = q;
  d.x = Tensor::zeros(q, {k.n, k.c, k.h, k.w}).value();
  d.w = Tensor::zeros(q, {k.m, k.c / k.group, k.kh, k.kw}).value();
  for (int64_t i = 0; i < d.x.numel(); ++i) d.x.set_f64(i, random_8bit(rng, q));
  for (int64_t i = 0; i < d.w.numel(); ++i) d.w.set_f64(i, random_8bit(rng, q));
  d.b = Tensor::zeros(DataType::kFloat32, {k.m}).value();
  for (int64_t i = 0; i < k.m; ++i) d.b.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
  d.r = Tensor::zeros(DataType::kFloat32, {k.n, k.m, k.oh(), k.ow()}).value();
  for (int64_t i = 0; i < d.r.numel(); ++i) d.r.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
  d.sx = static_cast<float>(0.01 * mag(rng));
  for (int64_t i = 0; i < (per_channel ? k.m : 1); ++i) d.sw.push_back(static_cast<float>(0.01 * mag(rng)));
  return d;
}

// sum over the group's channels and the kernel window of x·w, as doubles (exact for int8).
std::vector<double> direct_conv(const ConvCase& k, const ConvData& d) {
  const int64_t cg = k.c / k.group, mg = k.m / k.group, oh = k.oh(), ow = k.ow();
  std::vector<double> acc(static_cast<size_t>(k.n * k.m * oh * ow), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double s = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t iy = y * k.stride_h - k.pad_t + i * k.dil_h, ix = x * k.stride_w - k.pad_l + j * k.dil_w;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const int64_t ci = (m / mg) * cg + c;
                s += d.x.get_f64(((n * k.c + ci) * k.h + iy) * k.w + ix) *
                     d.w.get_f64(((m * cg + c) * k.kh + i) * k.kw + j);
              }
          acc[((n * k.m + m) * oh + y) * ow + x] = s;
        }
  return acc;
}

std::string type_name(DataType t) {
  return t == DataType::kInt8 ? "i8" : t == DataType::kFloat8E4M3FN ? "f8e4m3fn" : "f32";
}

struct Epilogue {
  bool bias = false, residual = false;
  std::string act;
  DataType y_type = DataType::kFloat32;  // int8 / E4M3: quantized by y_scale
  double y_scale = 0.05;
};

// Runs one QuantConv node on the CPU reference executor.
Tensor run_quant_conv(const ConvCase& k, const ConvData& d, const Epilogue& e) {
  const std::string q = type_name(d.q);
  auto dims = [](const Tensor& t) {
    std::string s;
    for (size_t i = 0; i < t.rank(); ++i) s += (i ? "," : "") + std::to_string(t.dim(i));
    return s;
  };
  const bool quantized = e.y_type != DataType::kFloat32;
  std::string text = "graph g {\n  opset \"\" 19\n  opset \"ingot\" 1\n";
  text += "  input %x: " + q + "[" + dims(d.x) + "]\n  input %w: " + q + "[" + dims(d.w) + "]\n";
  text += "  input %sx: f32[]\n  input %sw: f32[" + std::string(d.sw.size() == 1 ? "" : std::to_string(d.sw.size())) +
          "]\n";
  text += "  input %b: f32[" + dims(d.b) + "]\n  input %r: f32[" + dims(d.r) + "]\n  input %ys: f32[]\n";
  std::string attrs = k.attrs() + ", output_dtype=" + std::to_string(static_cast<int>(e.y_type));
  if (!e.act.empty()) attrs += ", activation=\"" + e.act + "\"";
  text += "  %y = ingot::QuantConv {" + attrs + "}(%x, %w, %sx, %sw, " + (e.bias ? "%b" : "_") + ", " +
          (e.residual ? "%r" : "_") + ", " + (quantized ? "%ys" : "_") + ") @qc\n  output %y\n}\n";
  auto g = parse_ir(text);
  EXPECT_TRUE(g);
  if (!g) return {};
  Tensor sx = Tensor::zeros(DataType::kFloat32, {}).value(), ys = Tensor::zeros(DataType::kFloat32, {}).value();
  sx.set_f64(0, d.sx);
  ys.set_f64(0, e.y_scale);
  Tensor sw = Tensor::zeros(DataType::kFloat32, d.sw.size() == 1 ? Shape64{} : Shape64{k.m}).value();
  for (size_t i = 0; i < d.sw.size(); ++i) sw.set_f64(static_cast<int64_t>(i), d.sw[i]);
  cpu::Executor ex;
  auto out = ex.run(*g, {{"x", d.x}, {"w", d.w}, {"sx", sx}, {"sw", sw}, {"b", d.b}, {"r", d.r}, {"ys", ys}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  EXPECT_EQ((*out)[0].dtype(), e.y_type);
  return (*out)[0];
}

// Y's expected real values (before quantization): act(sx·sw[m]·acc + b + r).
std::vector<double> expected(const ConvCase& k, const ConvData& d, const Epilogue& e) {
  std::vector<double> acc = direct_conv(k, d);
  const int64_t plane = k.oh() * k.ow();
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t m = (static_cast<int64_t>(i) / plane) % k.m;
    double v = acc[i] * d.sx * d.sw[d.sw.size() == 1 ? 0 : m];
    if (e.bias) v += d.b.get_f64(m);
    if (e.residual) v += d.r.get_f64(static_cast<int64_t>(i));
    if (e.act == "Relu") v = std::max(v, 0.0);
    acc[i] = v;
  }
  return acc;
}

void check_case(const ConvCase& k, const ConvData& d, const Epilogue& e, const std::string& what) {
  SCOPED_TRACE(what + ": " + k.attrs() + " x [" + std::to_string(k.n) + "," + std::to_string(k.c) + "," +
               std::to_string(k.h) + "," + std::to_string(k.w) + "] w [" + std::to_string(k.m) + ",.," +
               std::to_string(k.kh) + "," + std::to_string(k.kw) + "]");
  Tensor y = run_quant_conv(k, d, e);
  const std::vector<double> want = expected(k, d, e);
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double got = y.get_f64(i), v = want[static_cast<size_t>(i)];
    if (e.y_type == DataType::kFloat32) {
      // One float32 rounding of Y (fp8 sums in double, too: E4M3 products are exact there).
      ASSERT_NEAR(got, v, 2e-7 * std::max(1.0, std::fabs(v))) << "element " << i;
    } else if (e.y_type == DataType::kInt8) {
      // QuantizeLinear: the float32 quotient, rounded half to even, saturated. A quotient within
      // float rounding of a .5 tie may round either way.
      const float qf = static_cast<float>(v) / static_cast<float>(e.y_scale);
      const double want_q = std::nearbyint(std::min(127.0f, std::max(-128.0f, qf)));
      const bool tie = std::fabs(std::fabs(qf - std::trunc(qf)) - 0.5) < 1e-4;
      ASSERT_LE(std::fabs(got - want_q), tie ? 1.0 : 0.0) << "element " << i << " quotient " << qf;
    } else {
      // E4M3: within half a step of its 3-bit mantissa (2^-4 relative), saturated at 448; 2^-10
      // absolute below its normal range.
      const double qv = std::min(448.0, std::max(-448.0, v / e.y_scale));
      ASSERT_LE(std::fabs(got - qv), std::max(std::fabs(qv) / 16.0, 1.0 / 1024.0) * 1.0001) << "element " << i;
    }
  }
}

TEST(QuantConvKernel, Int8AccumulatesExactlyOnRandomShapes) {
  // Unit scales, no epilogue: Y is the integer sum itself (exact in float32 at these sizes).
  int i = 0;
  for (const ConvCase& k : random_cases(11, 12)) {
    ConvData d = random_data(k, DataType::kInt8, false, 100 + i++);
    d.sx = 1;
    d.sw = {1};
    SCOPED_TRACE(k.attrs());
    Tensor y = run_quant_conv(k, d, {});
    const std::vector<double> acc = direct_conv(k, d);
    ASSERT_EQ(y.numel(), static_cast<int64_t>(acc.size()));
    for (int64_t j = 0; j < y.numel(); ++j) ASSERT_EQ(y.get_f64(j), acc[static_cast<size_t>(j)]) << "element " << j;
  }
}

TEST(QuantConvKernel, ScalesBiasResidualReluAndQuantizedOutputsOnRandomShapes) {
  int i = 0;
  for (const ConvCase& k : random_cases(23, 9)) {
    for (DataType q : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
      const std::string tag = q == DataType::kInt8 ? "int8" : "fp8";
      const ConvData d = random_data(k, q, /*per_channel=*/i % 2 == 0, 200 + i);
      check_case(k, d, {true, false, "", DataType::kFloat32}, tag + " + bias");
      check_case(k, d, {true, true, "Relu", DataType::kFloat32}, tag + " + bias + residual + relu");
      // The y scales put the quotients around +-10..100: both roundings and saturation are seen.
      const double spread = q == DataType::kInt8 ? 0.01 : 0.02;
      check_case(k, d, {true, true, "", DataType::kInt8, spread}, tag + " -> int8");
      check_case(k, d, {true, false, "Relu", DataType::kFloat8E4M3FN, spread / 4}, tag + " -> fp8");
      ++i;
    }
  }
}

TEST(QuantConvKernel, ChannelsLastIsThePermutedChannelsFirstResult) {
  const ConvCase k = random_cases(5, 2)[1];  // grouped
  const ConvData d = random_data(k, DataType::kInt8, true, 7);
  const Epilogue e{true, true, "Relu", DataType::kFloat32};
  const Tensor want = run_quant_conv(k, d, e);
  // The same node channels-last: X, R, Y NHWC, W KRSC.
  ConvData dl = d;
  dl.x = permute_dims(d.x, ir::channels_last_perm(4)).value();
  dl.w = permute_dims(d.w, ir::channels_last_perm(4)).value();
  dl.r = permute_dims(d.r, ir::channels_last_perm(4)).value();
  auto g = parse_ir(R"(graph g {
  opset "" 19
  opset "ingot" 1
  input %x: i8[)" + std::to_string(k.n) +
                    "," + std::to_string(k.h) + "," + std::to_string(k.w) + "," + std::to_string(k.c) + R"(]
  input %w: i8[)" + std::to_string(k.m) +
                    "," + std::to_string(k.kh) + "," + std::to_string(k.kw) + "," + std::to_string(k.c / k.group) + R"(]
  input %sx: f32[]
  input %sw: f32[)" +
                    std::to_string(k.m) + R"(]
  input %b: f32[)" + std::to_string(k.m) +
                    R"(]
  input %r: f32[)" + std::to_string(k.n) +
                    "," + std::to_string(k.oh()) + "," + std::to_string(k.ow()) + "," + std::to_string(k.m) + R"(]
  %y = ingot::QuantConv {)" +
                    k.attrs() + R"(, channels_last=1, activation="Relu"}(%x, %w, %sx, %sw, %b, %r) @qc
  output %y
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape().to_string(),
            ir::Shape(std::vector<ir::Dim>{ir::Dim(k.n), ir::Dim(k.oh()), ir::Dim(k.ow()), ir::Dim(k.m)}).to_string());
  Tensor sx = Tensor::zeros(DataType::kFloat32, {}).value();
  sx.set_f64(0, d.sx);
  Tensor sw = Tensor::zeros(DataType::kFloat32, {k.m}).value();
  for (int64_t m = 0; m < k.m; ++m) sw.set_f64(m, d.sw[static_cast<size_t>(m)]);
  cpu::Executor ex;
  auto out = ex.run(*g, {{"x", dl.x}, {"w", dl.w}, {"sx", sx}, {"sw", sw}, {"b", d.b}, {"r", dl.r}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor back = permute_dims((*out)[0], ir::channels_first_perm(4)).value();
  ASSERT_EQ(back.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(back.get_f64(i), want.get_f64(i)) << "element " << i;
}

TEST(QuantConvKernel, InferenceRefusesMismatchedOperands) {
  auto g = parse_ir(R"(graph g {
  opset "" 19
  opset "ingot" 1
  input %x: i8[1,4,5,5]
  input %w: f8e4m3fn[2,4,3,3]
  init %sx: f32[] = [0.5]
  init %sw: f32[] = [0.5]
  %y = ingot::QuantConv(%x, %w, %sx, %sw) @qc
  output %y
}
)",
                    /*infer=*/false);
  ASSERT_TRUE(g);
  Status st = ir::infer_graph(*g);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("W must have X's type"), std::string::npos) << st.to_string();
}

// An 8-bit residual with r_scale is the float residual r_scale * R (what its DequantizeLinear gives).
TEST(QuantConvKernel, AnEightBitResidualIsItsScaledNumbers) {
  for (DataType q : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    const std::string qt = type_name(q);
    SCOPED_TRACE(qt);
    const ConvCase k = random_cases(31, 1)[0];
    const ConvData d = random_data(k, q, true, 41);
    std::mt19937 rng(43);
    const Shape64 ys{k.n, k.m, k.oh(), k.ow()};
    Tensor r8 = Tensor::zeros(q, ys).value();
    for (int64_t i = 0; i < r8.numel(); ++i) r8.set_f64(i, random_8bit(rng, q));
    const double r_scale = 0.0371;
    Tensor rf = Tensor::zeros(DataType::kFloat32, ys).value();
    for (int64_t i = 0; i < rf.numel(); ++i) rf.set_f64(i, static_cast<float>(r_scale * r8.get_f64(i)));
    std::string dims;
    for (size_t i = 0; i < ys.size(); ++i) dims += (i ? "," : "") + std::to_string(ys[i]);
    auto run = [&](bool eight) {
      std::string text = "graph g {\n  opset \"\" 19\n  opset \"ingot\" 1\n";
      text += "  input %x: " + qt + "[" + std::to_string(k.n) + "," + std::to_string(k.c) + "," + std::to_string(k.h) +
              "," + std::to_string(k.w) + "]\n";
      text += "  input %w: " + qt + "[" + std::to_string(k.m) + "," + std::to_string(k.c / k.group) + "," +
              std::to_string(k.kh) + "," + std::to_string(k.kw) + "]\n";
      text += "  input %sx: f32[]\n  input %sw: f32[" + std::to_string(k.m) + "]\n  input %b: f32[" +
              std::to_string(k.m) + "]\n";
      text += "  input %r: " + std::string(eight ? qt : "f32") + "[" + dims + "]\n  input %rs: f32[]\n";
      text += "  %y = ingot::QuantConv {" + k.attrs() + ", activation=\"Relu\"}(%x, %w, %sx, %sw, %b, %r" +
              (eight ? ", _, %rs" : "") + ") @qc\n  output %y\n}\n";
      auto g = parse_ir(text);
      EXPECT_TRUE(g);
      Tensor sx = Tensor::zeros(DataType::kFloat32, {}).value(), rs = Tensor::zeros(DataType::kFloat32, {}).value();
      sx.set_f64(0, d.sx);
      rs.set_f64(0, r_scale);
      Tensor sw = Tensor::zeros(DataType::kFloat32, {k.m}).value();
      for (int64_t m = 0; m < k.m; ++m) sw.set_f64(m, d.sw[static_cast<size_t>(m)]);
      cpu::Executor ex;
      auto out = ex.run(*g, {{"x", d.x}, {"w", d.w}, {"sx", sx}, {"sw", sw}, {"b", d.b}, {"r", eight ? r8 : rf},
                             {"rs", rs}});
      EXPECT_TRUE(out.ok()) << out.status().to_string();
      return out.ok() ? (*out)[0] : Tensor();
    };
    const Tensor a = run(true), b = run(false);
    ASSERT_EQ(a.shape(), b.shape());
    int positive = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_NEAR(a.get_f64(i), b.get_f64(i), 1e-6 * std::max(1.0, std::fabs(b.get_f64(i)))) << "element " << i;
      positive += a.get_f64(i) > 0;
    }
    EXPECT_GT(positive, a.numel() / 4);
  }
}

TEST(QuantConvKernel, InferenceRefusesAResidualScaleWithoutAnEightBitResidual) {
  auto infer = [](const std::string& r_type, const std::string& extra) {
    auto g = parse_ir("graph g {\n  opset \"\" 19\n  opset \"ingot\" 1\n  input %x: i8[1,4,5,5]\n"
                      "  input %w: i8[2,4,3,3]\n  input %r: " + r_type + "[1,2,3,3]\n  init %sx: f32[] = [0.5]\n"
                      "  init %sw: f32[] = [0.5]\n  init %rs: f32[] = [0.25]\n"
                      "  %y = ingot::QuantConv(%x, %w, %sx, %sw, _, %r" + extra + ") @qc\n  output %y\n}\n",
                      /*infer=*/false);
    EXPECT_TRUE(g);
    return g ? ir::infer_graph(*g) : internal_error("parse");
  };
  EXPECT_TRUE(infer("i8", ", _, %rs").ok());
  Status st = infer("i8", "");
  EXPECT_NE(st.message().find("needs r_scale"), std::string::npos) << st.to_string();
  st = infer("f32", ", _, %rs");
  EXPECT_NE(st.message().find("r_scale goes with an 8-bit R"), std::string::npos) << st.to_string();
  st = infer("f8e4m3fn", ", _, %rs");  // 8-bit, but not X's type
  EXPECT_FALSE(st.ok());
}

// ---- fuse_quant_gemm on convolutions

// A ResNet block's second conv, as TensorRT's explicit quantization writes it: Q/DQ on the input,
// an int8 per-channel weight with its DequantizeLinear, the conv's bias, the residual Add, Relu,
// and the next block's QuantizeLinear (its DequantizeLinear the graph output).
std::string qdq_conv_block(const std::string& x_zero_point = "0") {
  std::mt19937 rng(9);
  std::string w;
  for (int i = 0; i < 4 * 2 * 3 * 3; ++i)
    w += (i ? ", " : "") + std::to_string((rng() & 1 ? 1 : -1) * static_cast<int>(1 + rng() % 127));
  return R"(graph g {
  opset "" 19
  input %x: f32[2,4,6,6]
  input %skip: f32[2,4,3,3]
  init %sx: f32[] = [0.01]
  init %zx: i8[] = [)" +
         x_zero_point + R"(]
  init %wq: i8[4,2,3,3] = [)" +
         w + R"(]
  init %sw: f32[4] = [0.004, 0.002, 0.003, 0.005]
  init %zw: i8[4] = [0, 0, 0, 0]
  init %b: f32[4] = [0.1, -0.2, 0.05, 0.3]
  init %sy: f32[] = [0.02]
  init %zy: i8[] = [0]
  %xq: i8[2,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q
  %xd: f32[2,4,6,6] = DequantizeLinear(%xq, %sx, %zx) @dqx
  %wd: f32[4,2,3,3] = DequantizeLinear {axis=0}(%wq, %sw, %zw) @dqw
  %c: f32[2,4,3,3] = Conv {group=2, strides=[2, 2], pads=[1, 1, 1, 1]}(%xd, %wd, %b) @conv
  %a: f32[2,4,3,3] = Add(%c, %skip) @add
  %r: f32[2,4,3,3] = Relu(%a) @relu
  %yq: i8[2,4,3,3] = QuantizeLinear(%r, %sy, %zy) @q2
  %y: f32[2,4,3,3] = DequantizeLinear(%yq, %sy, %zy) @dq2
  output %y
}
)";
}

std::unique_ptr<ir::Graph> fuse(const std::string& text, bool expect_change = true) {
  auto g = parse_ir(text);
  EXPECT_TRUE(g);
  if (!g) return nullptr;
  passes::PassContext ctx;
  auto r = passes::make_fuse_quant_gemm()->run(*g, ctx);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.ok() && *r, expect_change);
  auto dead = passes::make_remove_dead_nodes()->run(*g, ctx);
  EXPECT_TRUE(dead.ok());
  EXPECT_TRUE(ir::verify_graph(*g).ok());
  Status inf = ir::infer_graph(*g);
  EXPECT_TRUE(inf.ok()) << inf.to_string();
  return g;
}

TEST(FuseQuantConv, DqConvAddReluQBecomesOneQuantConv) {
  const std::string text = qdq_conv_block();
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%yq: i8[2,4,3,3] = ingot::QuantConv {activation=\"Relu\", dilations=[1, 1], group=2, output_dtype=3, "
            "pads=[1, 1, 1, 1], strides=[2, 2]}(%xq, %wq, %sx.f32, %sw.f32, %b, %skip, %sy.f32) @conv\n"
            "%y: f32[2,4,3,3] = DequantizeLinear(%yq, %sy, %zy) @dq2\n");
  // The same int8 numbers as the float graph's QuantizeLinear (the fused sum is exact, the float
  // one rounds in float32: a quotient at a tie could differ by one step; none does here).
  expect_same_outputs(text, *g, 1e-6);
}

// The same block with its residual quantized too (TensorRT's and insert_qdq's placement): the conv
// reads the int8 residual and its scale, and the residual's DequantizeLinear goes.
std::string qdq_conv_block_int8_skip() {
  std::string t = qdq_conv_block();
  replace_once(t, "  init %sy: f32[] = [0.02]\n", "  init %sy: f32[] = [0.02]\n  init %ss: f32[] = [0.015]\n  init %zs: i8[] = [0]\n");
  replace_once(t, "  %a: f32[2,4,3,3] = Add(%c, %skip) @add\n",
      "  %skipq: i8[2,4,3,3] = QuantizeLinear(%skip, %ss, %zs) @qs\n"
      "  %skipd: f32[2,4,3,3] = DequantizeLinear(%skipq, %ss, %zs) @dqs\n"
      "  %a: f32[2,4,3,3] = Add(%c, %skipd) @add\n");
  return t;
}

TEST(FuseQuantConv, APerTensorInt8WeightScaleIsWrittenOncePerChannel) {
  // One weight scale (onnxruntime's quantize_static default): the QuantConv gets [M] equal values,
  // the per-channel form every int8 conv kernel takes, with the same outputs.
  std::string text = qdq_conv_block();
  replace_once(text, "init %sw: f32[4] = [0.004, 0.002, 0.003, 0.005]", "init %sw: f32[] = [0.003]");
  replace_once(text, "DequantizeLinear {axis=0}(%wq, %sw, %zw)", "DequantizeLinear(%wq, %sw, %zw)");
  replace_once(text, "init %zw: i8[4] = [0, 0, 0, 0]", "init %zw: i8[] = [0]");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 3u);
  EXPECT_EQ(g->nodes()[1]->op_type(), "QuantConv");
  const Tensor* sw = g->find_value("sw.f32")->initializer();
  ASSERT_NE(sw, nullptr);
  ASSERT_EQ(sw->shape(), (Shape64{4}));
  for (int64_t m = 0; m < 4; ++m) EXPECT_FLOAT_EQ(static_cast<float>(sw->get_f64(m)), 0.003f);
  expect_same_outputs(text, *g, 1e-6);
}

TEST(FuseQuantConv, AnInt8ResidualIsReadWithItsScale) {
  const std::string text = qdq_conv_block_int8_skip();
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%skipq: i8[2,4,3,3] = QuantizeLinear(%skip, %ss, %zs) @qs\n"
            "%yq: i8[2,4,3,3] = ingot::QuantConv {activation=\"Relu\", dilations=[1, 1], group=2, output_dtype=3, "
            "pads=[1, 1, 1, 1], strides=[2, 2]}(%xq, %wq, %sx.f32, %sw.f32, %b, %skipq, %sy.f32, %ss.f32) @conv\n"
            "%y: f32[2,4,3,3] = DequantizeLinear(%yq, %sy, %zy) @dq2\n");
  expect_same_outputs(text, *g, 1e-6);
}

// A max pool between two quantized layers, as ModelOpt and onnxruntime write it (DQ -> MaxPool ->
// Q with one scale) runs on the int8 numbers: the same bits, with padding and a ragged last
// window. A different scale on the Q, a zero point, or fp8 leave it as it is.
TEST(FuseQuantConv, AMaxPoolBetweenQuantizedLayersRunsOnInt8) {
  auto block = [](const std::string& sq, const std::string& zq, const std::string& type) {
    return R"(graph g {
  opset "" 19
  input %x: f32[2,3,7,7]
  init %s: f32[] = [0.05]
  init %s2: f32[] = [)" + sq + R"(]
  init %z: )" + type + R"([] = [0]
  init %z2: )" + type + R"([] = [)" + zq + R"(]
  %xq: )" + type + R"([2,3,7,7] = QuantizeLinear(%x, %s, %z) @q
  %xd: f32[2,3,7,7] = DequantizeLinear(%xq, %s, %z) @dq
  %p: f32[2,3,4,4] = MaxPool {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}(%xd) @pool
  %pq: )" + type + R"([2,3,4,4] = QuantizeLinear(%p, %s2, %z2) @q2
  %y: f32[2,3,4,4] = DequantizeLinear(%pq, %s2, %z2) @dq2
  output %y
}
)";
  };
  const std::string text = block("0.05", "0", "i8");
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,3,7,7] = QuantizeLinear(%x, %s, %z) @q\n"
            "%p.int8: i8[2,3,4,4] = MaxPool {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}(%xq) @pool\n"
            "%y: f32[2,3,4,4] = DequantizeLinear(%p.int8, %s2, %z2) @dq2\n");
  expect_same_outputs(text, *g, 0.0);
  for (const auto& [sq, zq, type] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"0.04", "0", "i8"}, {"0.05", "3", "i8"}, {"0.05", "0", "f8e4m3fn"}}) {
    SCOPED_TRACE(sq + " " + zq + " " + type);
    auto kept = fuse(block(sq, zq, type), /*expect_change=*/false);
    ASSERT_TRUE(kept);
    EXPECT_NE(node_lines(*kept).find("MaxPool {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}(%xd)"),
              std::string::npos)
        << node_lines(*kept);
  }
}

TEST(FuseQuantConv, BatchNormFoldsIntoTheScalesAndAutoPadIntoPads) {
  // Fp8, one weight scale; the BatchNormalization becomes a per-channel scale and the bias;
  // SAME_UPPER with stride 2 over 7 columns pads 0 before and 1 after (kernel 2); no
  // QuantizeLinear after: a float Y.
  std::mt19937 rng(4);
  std::string w;
  for (int i = 0; i < 3 * 2 * 2 * 2; ++i)
    w += (i ? ", " : "") + std::to_string((rng() & 1 ? 1 : -1) * std::ldexp(1 + static_cast<int>(rng() % 8), -2));
  const std::string text = R"(graph g {
  opset "" 19
  input %x: f32[1,2,7,7]
  init %sx: f32[] = [0.01]
  init %z8: f8e4m3fn[] = [0]
  init %wq: f8e4m3fn[3,2,2,2] = [)" +
                           w + R"(]
  init %sw: f32[] = [0.05]
  init %gamma: f32[3] = [1.5, -0.5, 0.8]
  init %beta: f32[3] = [0.1, 0.2, -0.3]
  init %mean: f32[3] = [0.01, -0.02, 0.03]
  init %var: f32[3] = [0.5, 1.2, 0.9]
  %xq: f8e4m3fn[1,2,7,7] = QuantizeLinear(%x, %sx, %z8) @q
  %xd: f32[1,2,7,7] = DequantizeLinear(%xq, %sx, %z8) @dqx
  %wd: f32[3,2,2,2] = DequantizeLinear(%wq, %sw) @dqw
  %c: f32[1,3,4,4] = Conv {auto_pad="SAME_UPPER", strides=[2, 2]}(%xd, %wd) @conv
  %n: f32[1,3,4,4] = BatchNormalization {epsilon=0.001}(%c, %gamma, %beta, %mean, %var) @bn
  %y: f32[1,3,4,4] = Relu(%n) @relu
  output %y
}
)";
  auto g = fuse(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(node_lines(*g),
            "%xq: f8e4m3fn[1,2,7,7] = QuantizeLinear(%x, %sx, %z8) @q\n"
            "%y: f32[1,3,4,4] = ingot::QuantConv {activation=\"Relu\", dilations=[1, 1], group=1, output_dtype=1, "
            "pads=[0, 0, 1, 1], strides=[2, 2]}(%xq, %wq, %sx.f32, %sw.bn, %conv.bias) @conv\n");
  const Tensor* sw = g->find_value("sw.bn")->initializer();
  ASSERT_NE(sw, nullptr);
  EXPECT_EQ(sw->shape(), (Shape64{3}));
  EXPECT_LT(sw->get_f64(1), 0);  // gamma < 0: a negative scale, as the folded float weight would be
  expect_same_outputs(text, *g, 1e-5);
}

TEST(FuseQuantConv, RefusesANonZeroZeroPointAndFoldsTheWeightItLeaves) {
  const std::string text = qdq_conv_block("3");
  auto g = fuse(text);  // changed: the weight's DequantizeLinear is folded
  ASSERT_TRUE(g);
  const std::string lines = node_lines(*g);
  EXPECT_EQ(lines.find("QuantConv"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("@dqw"), std::string::npos) << lines;
  EXPECT_NE(lines.find("= Conv {group=2, pads=[1, 1, 1, 1], strides=[2, 2]}(%xd, %wd, %b) @conv"), std::string::npos)
      << lines;
  ASSERT_NE(g->find_value("wd"), nullptr);
  EXPECT_NE(g->find_value("wd")->initializer(), nullptr);
  expect_same_outputs(text, *g, 1e-6);
}

TEST(FuseQuantConv, FoldConstantsKeepsAnInt8ConvWeightForIt) {
  auto g = parse_ir(qdq_conv_block());
  ASSERT_TRUE(g);
  passes::PassContext ctx;
  ASSERT_TRUE(passes::make_fold_constants()->run(*g, ctx).ok());
  EXPECT_NE(node_lines(*g).find("DequantizeLinear {axis=0}(%wq, %sw, %zw) @dqw"), std::string::npos) << node_lines(*g);
}

// The engine of the optimized graph (one QuantConv step) computes what the engine of the graph as
// written (every Q/DQ a step) does.
struct EngineResult {
  std::vector<Tensor> outputs;
  std::vector<LayerDesc> layers;
};

Result<EngineResult> engine_run(const std::string& text, bool optimize, const std::map<std::string, Tensor>& feeds) {
  auto g = parse_ir(text);
  if (!g) return internal_error("parse");
  builder::BuildOptions opt;
  opt.optimize = optimize;
  std::shared_ptr<ir::Graph> graph(std::move(g));
  INGOT_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(graph, {}, opt));
  engine::EngineIdentity id = engine::current_identity(plan.backend, plan.gpu_arch);
  INGOT_ASSIGN_OR_RETURN(const backend::Backend* be, backend::find_backend(plan.backend));
  id.library_versions = be->device().library_versions();
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, engine::write_engine(plan, id));
  test::Quiet quiet;
  INGOT_ASSIGN_OR_RETURN(auto eng, Runtime(quiet).deserialize(bytes.data(), bytes.size()));
  INGOT_ASSIGN_OR_RETURN(auto ctx, eng->create_execution_context());
  std::map<std::string, Tensor> in = feeds;
  for (auto& [name, t] : in) {
    INGOT_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
    INGOT_RETURN_IF_ERROR(ctx->set_tensor_address(name, t.mutable_raw()));
  }
  INGOT_RETURN_IF_ERROR(ctx->enqueue(nullptr));
  EngineResult out;
  for (const IoTensorDesc& d : eng->io_tensors()) {
    if (d.is_input) continue;
    INGOT_ASSIGN_OR_RETURN(auto shape, ctx->tensor_shape(d.name));
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(d.dtype, shape));
    std::memcpy(t.mutable_raw(), ctx->tensor_address(d.name), t.nbytes());
    out.outputs.push_back(t);
  }
  out.layers = eng->layers();
  return out;
}

TEST(FuseQuantConv, AnEngineOfTheFusedGraphMatchesTheUnfusedOne) {
  const std::string text = qdq_conv_block();
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  std::map<std::string, Tensor> feeds;
  for (auto [name, shape] : {std::pair<const char*, Shape64>{"x", {2, 4, 6, 6}}, {"skip", {2, 4, 3, 3}}}) {
    Tensor t = Tensor::zeros(DataType::kFloat32, shape).value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
    feeds[name] = t;
  }
  auto fused = engine_run(text, true, feeds);
  auto plain = engine_run(text, false, feeds);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  int quant_convs = 0;
  for (const LayerDesc& l : fused->layers) quant_convs += l.op == "ingot::QuantConv";
  EXPECT_EQ(quant_convs, 1);
  ASSERT_EQ(fused->outputs.size(), 1u);
  const Tensor &a = fused->outputs[0], &b = plain->outputs[0];
  ASSERT_EQ(a.shape(), b.shape());
  int nonzero = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_NEAR(a.get_f64(i), b.get_f64(i), 1e-6) << "element " << i;
    nonzero += a.get_f64(i) != 0;
  }
  EXPECT_GT(nonzero, a.numel() / 4);  // Relu leaves a real share of the outputs
}

TEST(FuseQuantConv, InsertQdqGivesConvsEightBitWeightsAndTheyBecomeQuantConv) {
  const std::string text = testing_util::with_weights(
      "graph g {\n  opset \"\" 17\n  input %x: f32[1,3,8,8]\n", {{"w", {4, 3, 3, 3}}, {"b", {4}}},
      "  %c: f32[1,4,8,8] = Conv {pads=[1, 1, 1, 1]}(%x, %w, %b) @conv\n  %y: f32[1,4,8,8] = Relu(%c) @relu\n"
      "  output %y\n");
  for (quant::QuantType type : {quant::QuantType::kInt8, quant::QuantType::kFp8E4M3}) {
    const bool int8 = type == quant::QuantType::kInt8;
    SCOPED_TRACE(int8 ? "int8" : "fp8");
    auto g = parse_ir(text);
    ASSERT_TRUE(g);
    auto rep = quant::insert_qdq(*g, {{"x", 1.0f / 127}}, {}, type);
    ASSERT_TRUE(rep.ok()) << rep.status().to_string();
    EXPECT_EQ(rep->quantized_layers, 1);
    const ir::Node* dqw = nullptr;
    for (const auto& n : g->nodes())
      if (n->op_type() == "DequantizeLinear" && n->input(0)->initializer()) dqw = n.get();
    ASSERT_NE(dqw, nullptr) << node_lines(*g);
    EXPECT_EQ(dqw->input(0)->dtype(), int8 ? DataType::kInt8 : DataType::kFloat8E4M3FN);
    EXPECT_EQ(dqw->input(1)->initializer()->numel(), int8 ? 4 : 1);  // int8 per output channel, fp8 per tensor
    if (int8) EXPECT_EQ(dqw->attrs().get_int("axis", 1), 0);
    passes::PassContext ctx;
    ASSERT_TRUE(passes::default_pipeline().run(*g, {}, ctx).ok());
    const std::string lines = node_lines(*g);
    EXPECT_NE(lines.find("ingot::QuantConv {activation=\"Relu\""), std::string::npos) << lines;
    EXPECT_EQ(lines.find("DequantizeLinear"), std::string::npos) << lines;
  }
}

// ---- split-back where a backend has no quantized convolution (everything else runs on its
// "device")

testing_util::PredicateBackend no_quant_conv_backend() {
  return testing_util::PredicateBackend([](const ir::Node& n, const auto&) { return n.op_type() != "QuantConv"; });
}

TEST(FuseQuantConv, SplitBackGivesTheNativeKernelsOutputs) {
  const std::string text = qdq_conv_block();
  auto g = fuse(text);
  ASSERT_TRUE(g);
  const std::string fused_text = ir::to_text(*g, 1u << 20);
  testing_util::PredicateBackend be = no_quant_conv_backend();
  builder::SplitReport rep;
  Status st = builder::split_host_fusions(*g, be, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(rep.split, 1);
  EXPECT_EQ(node_lines(*g),
            "%xq: i8[2,4,6,6] = QuantizeLinear(%x, %sx, %zx) @q\n"
            "%conv/x_float: f32[2,4,6,6] = DequantizeLinear(%xq, %sx.f32) @conv/dequantize\n"
            "%conv/conv: f32[2,4,3,3] = ingot::FusedConv {activation=\"Relu\", dilations=[1, 1], group=2, "
            "pads=[1, 1, 1, 1], residual_before_activation=1, strides=[2, 2]}"
            "(%conv/x_float, %conv/w_float, %conv/bias_float, %skip) @conv\n"
            "%yq: i8[2,4,3,3] = QuantizeLinear(%conv/conv, %sy.f32, %conv/y_zero_point) @conv/quantize\n"
            "%y: f32[2,4,3,3] = DequantizeLinear(%yq, %sy, %zy) @dq2\n");
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("no quantized convolution"), std::string::npos) << rep.notes[0];
  expect_same_outputs(fused_text, *g, 1e-6);
  expect_same_outputs(text, *g, 1e-6);
}

// Where the backend has a quantized convolution for float residuals only, the 8-bit residual is
// dequantized by its own step and the conv stays quantized; where it has none, the whole layer
// runs in float with the residual dequantized. Both give the fused node's outputs.
testing_util::PredicateBackend float_residual_quant_conv_backend() {
  return testing_util::PredicateBackend([](const ir::Node& n, const std::vector<ir::TensorType>& in) {
    return !(n.op_type() == "QuantConv" && in.size() > 5 && in[5].dtype == DataType::kInt8);
  });
}

TEST(FuseQuantConv, SplitBackOfAnInt8ResidualDequantizesIt) {
  const std::string text = qdq_conv_block_int8_skip();
  {
    auto g = fuse(text);
    ASSERT_TRUE(g);
    const std::string fused_text = ir::to_text(*g, 1u << 20);
    testing_util::PredicateBackend be = float_residual_quant_conv_backend();
    builder::SplitReport rep;
    ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
    EXPECT_EQ(rep.split, 1);
    const std::string lines = node_lines(*g);
    EXPECT_NE(lines.find("DequantizeLinear {output_dtype=1}(%skipq, %ss.f32) @conv/residual_dequantize"),
              std::string::npos) << lines;
    EXPECT_NE(lines.find("ingot::QuantConv"), std::string::npos) << lines;
    ASSERT_EQ(rep.notes.size(), 1u);
    EXPECT_NE(rep.notes[0].find("8-bit residual"), std::string::npos) << rep.notes[0];
    expect_same_outputs(fused_text, *g, 1e-6);
  }
  {
    auto g = fuse(text);
    ASSERT_TRUE(g);
    const std::string fused_text = ir::to_text(*g, 1u << 20);
    testing_util::PredicateBackend be = no_quant_conv_backend();
    builder::SplitReport rep;
    ASSERT_TRUE(builder::split_host_fusions(*g, be, &rep).ok());
    const std::string lines = node_lines(*g);
    EXPECT_EQ(lines.find("ingot::QuantConv"), std::string::npos) << lines;
    EXPECT_NE(lines.find("DequantizeLinear(%skipq, %ss.f32) @conv/residual_dequantize"), std::string::npos) << lines;
    expect_same_outputs(fused_text, *g, 1e-6);
    expect_same_outputs(text, *g, 1e-6);
  }
}

// Two residual blocks as insert_qdq quantizes them: each block's output is quantized once, for the
// next conv and for the residual Add alike, so after the default pipeline every conv is a QuantConv,
// the residual convs read 8-bit residuals, and the only QuantizeLinear left is the input's.
TEST(FuseQuantConv, InsertQdqSharesTheResidualsPairAndNoQuantizeIsLeftBetweenBlocks) {
  const std::string text = testing_util::with_weights(
      "graph g {\n  opset \"\" 17\n  input %x: f32[1,8,6,6]\n",
      {{"w0", {8, 8, 3, 3}}, {"w1", {8, 8, 3, 3}}, {"w2", {8, 8, 3, 3}}, {"w3", {4, 8, 1, 1}}},
      "  %c0: f32[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%x, %w0) @conv0\n"
      "  %h0: f32[1,8,6,6] = Relu(%c0) @relu0\n"
      "  %c1: f32[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%h0, %w1) @conv1\n"
      "  %a1: f32[1,8,6,6] = Add(%c1, %h0) @add1\n"
      "  %h1: f32[1,8,6,6] = Relu(%a1) @relu1\n"
      "  %c2: f32[1,8,6,6] = Conv {pads=[1, 1, 1, 1]}(%h1, %w2) @conv2\n"
      "  %a2: f32[1,8,6,6] = Add(%h1, %c2) @add2\n"
      "  %h2: f32[1,8,6,6] = Relu(%a2) @relu2\n"
      "  %y: f32[1,4,6,6] = Conv(%h2, %w3) @conv3\n"
      "  output %y\n");
  auto g = parse_ir(text);
  ASSERT_TRUE(g);
  auto rep = quant::insert_qdq(*g, {{"x", 0.01f}, {"h0", 0.02f}, {"h1", 0.03f}, {"h2", 0.04f}}, {},
                               quant::QuantType::kInt8);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->quantized_layers, 4);
  // The Adds read the Q/DQ outputs of h0 and h1 (add2 has the activation first: either order).
  for (const auto& n : g->nodes())
    if (n->op_type() == "Add") {
      bool reads_dq = false;
      for (const ir::Value* v : n->inputs()) reads_dq |= v->producer() && v->producer()->op_type() == "DequantizeLinear";
      EXPECT_TRUE(reads_dq) << n->describe();
    }
  const std::string qdq_text = ir::to_text(*g, 1u << 20);
  passes::PassContext ctx;
  ASSERT_TRUE(passes::default_pipeline().run(*g, {}, ctx).ok());
  const std::string lines = node_lines(*g);
  int quant_convs = 0, quantizes = 0, dequantizes = 0, eight_bit_residuals = 0;
  for (const auto& n : g->nodes()) {
    quant_convs += n->op_type() == "QuantConv";
    quantizes += n->op_type() == "QuantizeLinear";
    dequantizes += n->op_type() == "DequantizeLinear";
    if (n->op_type() == "QuantConv" && n->inputs().size() > 7 && n->input(7)) {
      ++eight_bit_residuals;
      EXPECT_EQ(n->input(5)->dtype(), DataType::kInt8) << n->describe();
    }
  }
  EXPECT_EQ(quant_convs, 4) << lines;
  EXPECT_EQ(eight_bit_residuals, 2) << lines;
  EXPECT_EQ(quantizes, 1) << lines;  // the input's
  EXPECT_EQ(dequantizes, 0) << lines;
  expect_same_outputs(qdq_text, *g, 1e-5);
}

}  // namespace
}  // namespace ingot
