// Copyright ingot authors. Apache-2.0.
//
// INT8 calibration and Q/DQ insertion (src/quant/): the growing |x| histogram equals one built
// over the final range at once; min-max, percentile and entropy thresholds on data whose answer
// is known; the calibration cache's text form round trips and bad text is named by line; the
// Q/DQ rewrite of Conv / MatMul layers (node lines), layers it keeps in float and why, and the
// rewritten graph computing what int8 layers compute (against a direct fake-quant on the CPU).
// The entropy calibrator's choice is checked against an independent NumPy implementation of the
// same algorithm in tests/cli/test_int8_cli.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph_check_util.h"
#include "quant/calibration.h"
#include "quant/insert_qdq.h"
#include "quant/sensitivity.h"

namespace ingot {
namespace {

using quant::CalibrationAlgorithm;
using quant::kHistogramBins;
using quant::TensorCalibration;
using testing_util::node_lines;
using testing_util::parse_ir;
using testing_util::with_weights;

TEST(Calibration, GrowingRangeMergesBinsExactly) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> small(-1.0f, 1.0f), big(-7.0f, 7.0f);
  std::vector<float> a(5000), b(5000);
  for (float& v : a) v = small(rng);
  for (float& v : b) v = big(rng);
  TensorCalibration grown;
  grown.observe(a.data(), static_cast<int64_t>(a.size()));
  const double first_range = grown.range();
  grown.observe(b.data(), static_cast<int64_t>(b.size()));
  // Doubled until past 7: a power-of-two multiple of the first range.
  const double ratio = grown.range() / first_range;
  EXPECT_EQ(ratio, std::exp2(std::round(std::log2(ratio))));
  EXPECT_GT(grown.range(), grown.amax());
  // The same values binned directly over the final range.
  std::vector<double> direct(kHistogramBins, 0.0);
  for (const auto* v : {&a, &b})
    for (float x : *v)
      direct[static_cast<size_t>(std::fabs(static_cast<double>(x)) * kHistogramBins / grown.range())] += 1;
  EXPECT_EQ(grown.histogram(), direct);
  EXPECT_EQ(grown.count(), 10000);
  // NaN and inf have no range to cover: skipped.
  const float odd[3] = {NAN, INFINITY, 0.5f};
  grown.observe(odd, 3);
  EXPECT_EQ(grown.count(), 10001);
}

TEST(Calibration, MinMaxAndPercentileOnKnownData) {
  // |x| uniform on 1..1000 (one of each): min-max keeps 1000; the 50th percentile is about 500.
  std::vector<float> x;
  for (int i = 1; i <= 1000; ++i) x.push_back(static_cast<float>(i % 2 ? i : -i));
  TensorCalibration t;
  t.observe(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_DOUBLE_EQ(quant::threshold(t, CalibrationAlgorithm::kMinMax), 1000.0);
  const double width = t.range() / kHistogramBins;
  EXPECT_NEAR(quant::threshold(t, CalibrationAlgorithm::kPercentile, 50.0), 500.0, 2 * width);
  EXPECT_NEAR(quant::threshold(t, CalibrationAlgorithm::kPercentile, 99.9), 999.0, 2 * width);
  EXPECT_DOUBLE_EQ(quant::threshold(t, CalibrationAlgorithm::kPercentile, 100.0), 1000.0);
  TensorCalibration zeros;
  const float z[4] = {0, 0, 0, 0};
  zeros.observe(z, 4);
  EXPECT_EQ(quant::threshold(zeros, CalibrationAlgorithm::kEntropy), 0.0) << "nothing to cover";
}

TEST(Calibration, EntropyClipsARareOutlierAndKeepsTheBulk) {
  // 100000 values uniform in [0, 10) and ten at 40: min-max would spend 3/4 of the levels on the
  // empty stretch; entropy keeps about the bulk (its threshold is at least 128 bins: 2.5 here).
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 10.0f);
  std::vector<float> x(100000);
  for (float& v : x) v = u(rng);
  for (int i = 0; i < 10; ++i) x.push_back(40.0f);
  TensorCalibration t;
  t.observe(x.data(), static_cast<int64_t>(x.size()));
  const double th = quant::threshold(t, CalibrationAlgorithm::kEntropy);
  EXPECT_GT(th, 9.0);
  EXPECT_LT(th, 12.0);
  // A ReLU's output: exponential values (mean 2) and more exact zeros than values. Before the
  // zero bin counted as its neighbour the threshold fell to 2.9 of a 23.5 max (the same drag
  // cost a real Fashion-MNIST CNN 14 points of top-1, session 10); now it covers the tail.
  std::exponential_distribution<float> ex(0.5f);
  std::vector<float> relu(110000, 0.0f);
  for (size_t i = 0; i < 50000; ++i) relu[i] = ex(rng);
  TensorCalibration tr;
  tr.observe(relu.data(), static_cast<int64_t>(relu.size()));
  const double thr = quant::threshold(tr, CalibrationAlgorithm::kEntropy);
  EXPECT_GT(thr, 8.0) << "of max " << tr.amax();
  // A histogram with mass in every bin up to its end: no clipping pays, all bins are kept.
  std::vector<double> flat(kHistogramBins, 10.0);
  EXPECT_EQ(quant::entropy_bins(flat), kHistogramBins);
}

TEST(Calibration, CacheRoundTripsInTensorRtsTextForm) {
  std::map<std::string, float> scales = {{"input", 0.0123f}, {"conv1/out", 1.0f / 127}, {"a:b", 3.5e-6f}};
  const std::string text = quant::write_cache(CalibrationAlgorithm::kEntropy, scales);
  EXPECT_EQ(text.substr(0, text.find('\n')), "INGOT-1-EntropyCalibration2");
  EXPECT_NE(text.find("\ninput: 3c4985f0\n"), std::string::npos) << text;  // 0.0123f's bits
  std::string header;
  auto back = quant::read_cache(text, &header);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, scales);  // bit-exact
  // TensorRT's own header and CRLF line ends read too.
  auto trt = quant::read_cache("TRT-8601-EntropyCalibration2\r\ndata: 3c010a14\r\n", &header);
  ASSERT_TRUE(trt.ok()) << trt.status().to_string();
  EXPECT_EQ(header, "TRT-8601-EntropyCalibration2");
  uint32_t bits = 0x3c010a14;
  float want;
  std::memcpy(&want, &bits, 4);
  EXPECT_EQ(trt->at("data"), want);
  for (const char* bad : {"", "x: 3c010a14\n", "H\nx 3c010a14\n", "H\nx: 3c01\n", "H\nx: 3c01zz14\n",
                          "H\nx: 7fc00000\n", "H\nx: bf800000\n"}) {
    auto r = quant::read_cache(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' was accepted";
  }
  auto line = quant::read_cache("H\nok: 3c010a14\nbroken\n");
  ASSERT_FALSE(line.ok());
  EXPECT_NE(line.status().message().find("line 3"), std::string::npos) << line.status().message();
  EXPECT_TRUE(quant::parse_algorithm("percentile").ok());
  EXPECT_FALSE(quant::parse_algorithm("kl").ok());
}

const char* const kHead = "graph g {\n  opset \"\" 17\n  input %x: f32[1,3,6,6]\n  input %m: f32[2,5]\n";

std::string qdq_model() {
  return with_weights(kHead, {{"w", {4, 3, 3, 3}}, {"b", {4}}, {"v", {5, 3}}},
                      "  %c: f32[1,4,4,4] = Conv(%x, %w, %b) @conv\n"
                      "  %r: f32[1,4,4,4] = Relu(%c) @relu\n"
                      "  %d: f32[1,4,4,4] = Conv(%r, %w2, %b2) @conv2\n"
                      "  %p: f32[2,3] = MatMul(%m, %v) @mm\n"
                      "  output %d\n  output %p\n");
}

TEST(InsertQdq, ActivationsThroughQdqPairsWeightsEightBitPerChannel) {
  std::string text = qdq_model();
  // A second conv with its own weights; it has no calibrated input: kept in float.
  text.insert(
      text.find("  %c:"), "  init %w2: f32[4,4,1,1] = [" + [] {
        std::string v;
        for (int i = 0; i < 16; ++i) v += (i ? ", " : "") + std::to_string(0.1 * (i + 1));
        return v;
      }() + "]\n  init %b2: f32[4] = [0.1, 0.2, 0.3, 0.4]\n");
  auto g = parse_ir(text);
  ASSERT_TRUE(g);
  const std::map<std::string, float> scales = {{"x", 2.0f / 127}, {"m", 1.5f / 127}};
  auto rep = quant::insert_qdq(*g, scales);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->quantized_layers, 2);
  EXPECT_EQ(rep->qdq_pairs, 2);
  ASSERT_EQ(rep->kept.size(), 1u);
  EXPECT_EQ(rep->kept[0], "conv2 (Conv): no calibrated range for 'r'");
  const std::string lines = node_lines(*g);
  EXPECT_NE(lines.find("QuantizeLinear(%x, %x_int8_scale, %x_int8_zero_point) @x/quantize"), std::string::npos)
      << lines;
  // A Conv's and a MatMul's weights stay 8-bit behind a DequantizeLinear (fuse_quant_gemm takes
  // the pair): per output channel, axis 0 of a conv weight, axis 1 of a MatMul's [K, N].
  EXPECT_NE(lines.find("= DequantizeLinear {axis=0}(%w_int8, %w_int8_scale) @w/dequantize"), std::string::npos)
      << lines;
  EXPECT_NE(lines.find("= Conv(%x_dequantized, %w_dequantized, %b) @conv"), std::string::npos) << lines;
  EXPECT_NE(lines.find("= DequantizeLinear {axis=1}(%v_int8, %v_int8_scale) @v/dequantize"), std::string::npos)
      << lines;
  EXPECT_NE(lines.find("= MatMul(%m_dequantized, %v_dequantized) @mm"), std::string::npos) << lines;
  EXPECT_NE(lines.find("= Conv(%r, %w2, %b2) @conv2"), std::string::npos) << lines;

  // The rewritten graph computes int8 layers: inputs rounded to scale steps (clamped to 127),
  // weights rounded per output channel. Against the same rounding done on the inputs here and
  // the weights read back, on the CPU reference.
  // Conv [M, C, kh, kw]: int8 numbers and one scale per output channel, max |w_k| / 127.
  const ir::Value* wi = g->find_value("w_int8");
  const ir::Value* ws = g->find_value("w_int8_scale");
  const ir::Value* w0 = g->find_value("w");
  ASSERT_TRUE(wi && wi->initializer() && ws && ws->initializer() && w0 && w0->initializer());
  ASSERT_EQ(wi->initializer()->dtype(), DataType::kInt8);
  ASSERT_EQ(ws->initializer()->shape(), Shape64{4});
  Tensor wq = Tensor::zeros(DataType::kFloat32, {4, 3, 3, 3}).value();  // dequantized, for the reference
  for (int64_t k = 0; k < 4; ++k) {
    double amax = 0;
    for (int64_t i = 0; i < 27; ++i) amax = std::max(amax, std::fabs(w0->initializer()->get_f64(k * 27 + i)));
    EXPECT_NEAR(ws->initializer()->get_f64(k), amax / 127, 1e-7) << "channel " << k;
    for (int64_t i = 0; i < 27; ++i) {
      const double q = wi->initializer()->get_f64(k * 27 + i);
      EXPECT_EQ(q, std::nearbyint(w0->initializer()->get_f64(k * 27 + i) / ws->initializer()->get_f64(k)));
      wq.set_f64(k * 27 + i, static_cast<float>(q * ws->initializer()->get_f64(k)));
    }
  }
  // MatMul [K, N]: int8 numbers and one scale per column, max |v| of the column / 127; the
  // column's largest magnitude is 127 steps.
  const ir::Value* vi = g->find_value("v_int8");
  const ir::Value* vs = g->find_value("v_int8_scale");
  const ir::Value* v0 = g->find_value("v");
  ASSERT_TRUE(vi && vi->initializer() && vs && vs->initializer() && v0 && v0->initializer());
  ASSERT_EQ(vi->initializer()->dtype(), DataType::kInt8);
  ASSERT_EQ(vs->initializer()->shape(), Shape64{3});
  Tensor vq = Tensor::zeros(DataType::kFloat32, {5, 3}).value();  // dequantized, for the reference
  for (int64_t n = 0; n < 3; ++n) {
    double amax = 0, qmax = 0;
    for (int64_t k = 0; k < 5; ++k) {
      amax = std::max(amax, std::fabs(v0->initializer()->get_f64(k * 3 + n)));
      qmax = std::max(qmax, std::fabs(vi->initializer()->get_f64(k * 3 + n)));
    }
    EXPECT_NEAR(vs->initializer()->get_f64(n), amax / 127, 1e-7) << "column " << n;
    EXPECT_EQ(qmax, 127.0) << "column " << n;
    for (int64_t k = 0; k < 5; ++k) {
      const double q = vi->initializer()->get_f64(k * 3 + n);
      EXPECT_EQ(q, std::nearbyint(v0->initializer()->get_f64(k * 3 + n) / vs->initializer()->get_f64(n)));
      vq.set_f64(k * 3 + n, static_cast<float>(q * vs->initializer()->get_f64(n)));
    }
  }
  cpu::Executor ex;
  Tensor x = Tensor::zeros(DataType::kFloat32, {1, 3, 6, 6}).value();
  Tensor m = Tensor::zeros(DataType::kFloat32, {2, 5}).value();
  Tensor xr = Tensor::zeros(DataType::kFloat32, {1, 3, 6, 6}).value();
  Tensor mr = Tensor::zeros(DataType::kFloat32, {2, 5}).value();
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> d(-2.5, 2.5);  // past 2.0: some saturate at 127 steps
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = d(rng);
    x.set_f64(i, v);
    xr.set_f64(i, std::clamp(std::nearbyint(v / (2.0 / 127)), -128.0, 127.0) * (2.0 / 127));
  }
  for (int64_t i = 0; i < m.numel(); ++i) {
    const double v = d(rng);
    m.set_f64(i, v);
    mr.set_f64(i, std::clamp(std::nearbyint(v / (1.5 / 127)), -128.0, 127.0) * (1.5 / 127));
  }
  // Reference: the original graph with the rounded weights, fed the rounded inputs.
  auto ref = parse_ir(text);
  ASSERT_TRUE(ref);
  ref->set_initializer(ref->find_value("w"), wq);
  ref->set_initializer(ref->find_value("v"), vq);
  auto want = ex.run(*ref, {{"x", xr}, {"m", mr}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = ex.run(*g, {{"x", x}, {"m", m}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (size_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < (*want)[o].numel(); ++i)
      EXPECT_NEAR((*got)[o].get_f64(i), (*want)[o].get_f64(i), 1e-4) << "output " << o << " element " << i;
}

// FP8: the MatMuls that read one input (an attention's Q, K and V) get one weight scale, the
// largest max |w| / 448 among them, so fuse_qkv_projection can make them one FP8 GEMM.
TEST(InsertQdq, Fp8LayersReadingOneInputShareTheirWeightScale) {
  auto g = parse_ir(with_weights("graph g {\n  opset \"\" 19\n  input %m: f32[2,5]\n", {{"a", {5, 3}}, {"b", {5, 3}}},
                                 "  %p: f32[2,3] = MatMul(%m, %a) @mm1\n  %r: f32[2,3] = MatMul(%m, %b) @mm2\n"
                                 "  output %p\n  output %r\n"));
  ASSERT_TRUE(g);
  // b twice as large as a: both scales are max |b| / 448.
  Tensor b = *g->find_value("b")->initializer();
  for (int64_t i = 0; i < b.numel(); ++i) b.set_f64(i, 2 * b.get_f64(i));
  g->set_initializer(g->find_value("b"), b);
  double bmax = 0;
  for (int64_t i = 0; i < b.numel(); ++i) bmax = std::max(bmax, std::fabs(b.get_f64(i)));
  auto rep = quant::insert_qdq(*g, {{"m", 1.0f / 448}}, {}, quant::QuantType::kFp8E4M3);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  const ir::Value* sa = g->find_value("a_fp8_scale");
  const ir::Value* sb = g->find_value("b_fp8_scale");
  ASSERT_TRUE(sa && sa->initializer() && sb && sb->initializer()) << node_lines(*g);
  EXPECT_EQ(sa->initializer()->numel(), 1);
  EXPECT_FLOAT_EQ(sa->initializer()->get_f64(0), static_cast<float>(bmax / 448));
  EXPECT_EQ(sa->initializer()->get_f64(0), sb->initializer()->get_f64(0));
}

TEST(InsertQdq, LayersWithoutAFloatActivationStayAsTheyAre) {
  auto g = parse_ir(with_weights("graph g {\n  opset \"\" 17\n  input %i: f64[2,5]\n", {{"v", {5, 3}}},
                                 "  %v64: f64[5,3] = Cast {to=11}(%v) @cast\n"
                                 "  %p: f64[2,3] = MatMul(%i, %v64) @mm\n  output %p\n"));
  ASSERT_TRUE(g);
  auto rep = quant::insert_qdq(*g, {{"i", 0.01f}, {"v64", 0.01f}});
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->quantized_layers, 0);
  ASSERT_EQ(rep->kept.size(), 1u);
  EXPECT_EQ(rep->kept[0], "mm (MatMul): input 'i' is f64, not f32");
}

// The mixed-precision search's measure: one ruined sample among many good ones must show.
TEST(Sensitivity, WorstSampleCosineSeesOneRuinedSampleTheWholeTensorHides) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  Tensor want = Tensor::zeros(DataType::kFloat32, {64, 32}).value();
  for (int64_t i = 0; i < want.numel(); ++i) want.mutable_data<float>()[i] = nd(rng) + 0.1f;
  Tensor got = want.clone();
  // Sample 17 loses its sign pattern: the negated row has cosine -1 against the reference.
  for (int64_t j = 0; j < 32; ++j) got.mutable_data<float>()[17 * 32 + j] *= -1.f;
  const double whole = quant::cosine(got, want);
  EXPECT_GT(whole, 0.9);  // 63 of 64 rows are exact: (63 - 1) / 64 of the energy agrees
  EXPECT_NEAR(quant::worst_sample_cosine(got, want), -1.0, 1e-9);
  // One sample, or a vector: the whole tensor is the sample.
  Tensor one = Tensor::zeros(DataType::kFloat32, {1, 32}).value();
  for (int64_t j = 0; j < 32; ++j) one.mutable_data<float>()[j] = static_cast<float>(j + 1);
  Tensor neg = one.clone();
  neg.mutable_data<float>()[0] = -1.f;
  EXPECT_DOUBLE_EQ(quant::worst_sample_cosine(neg, one), quant::cosine(neg, one));
}

}  // namespace
}  // namespace ingot
