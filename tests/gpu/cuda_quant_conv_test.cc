// Copyright ingot authors. Apache-2.0.
//
// The cuDNN graph-API tactics for ingot::QuantConv (cudnn_quant_conv_tactics.cc), channels-last
// (NHWC X/R/Y, KRSC W) as the layout pass gives them, against the CPU reference kernel
// (backend/cpu/kernels/quant_conv.cc) on the same host inputs, on every plan the family offers:
// ResNet-like 1x1 and 3x3 convolutions at strides 1 and 2 with and without pads, with and
// without a bias (fp32, fp16), a residual (the output's type, or fp32 / fp16 beside an int8
// output) and an activation, per-tensor and per-channel w_scale, with a y_scale (int8 or fp8
// output) and without (fp32, fp16, bf16 output); random non-zero int8 data. Scales keep the
// float results around 1 (x_scale * w_scale ~ 1 / (E|x w| sqrt(taps))), so absolute tolerances
// mean something: int8 sums are exact, so a float output differs by the fp32 epilogue and its
// own rounding only; an int8 output by at most one step (a tie, or the quotient rounding the other
// way in fp32). Outputs are poisoned (NaN / 0xFF) before each run.
//
// A plan cuDNN lists that does not build is counted, not failed (as the FusedConv family's tests
// do); so are layers cuDNN offers no plan for, except the int8 ResNet forms, which it must offer
// (without them this family does nothing). supports() decisions, candidates without a device and
// name / params / plan-record round trips need no device (QuantConvNoDevice).
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/core/device_info.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::cudnn_quant_conv_family;

constexpr const char* kPrefix = "cuda.cudnn.graph.quant_conv.";
constexpr DataType kI8 = DataType::kInt8, kF8 = DataType::kFloat8E4M3FN, kF32 = DataType::kFloat32,
                   kF16 = DataType::kFloat16, kBF16 = DataType::kBFloat16, kNone = DataType::kUndefined;

// One QuantConv: X [n, h, w, c] NHWC, W [m, k, k, c] KRSC.
struct Case {
  DataType q = kI8;  // X and W
  int64_t n = 1, h = 8, w = 8, c = 32, m = 32, k = 3, stride = 1, pad = 1;
  DataType bias = kNone;      // kNone: no bias
  DataType residual = kNone;  // kNone: no residual
  bool per_channel = true;    // w_scale [m], else one value
  std::string act;            // the activation's attribute text, e.g. "activation=\"Relu\""
  DataType out = kF32;        // int8 / fp8: with a y_scale
  std::string label() const {
    return std::string(data_type_name(q)) + " X[" + std::to_string(n) + "," + std::to_string(h) + "," +
           std::to_string(w) + "," + std::to_string(c) + "] W[" + std::to_string(m) + "," + std::to_string(k) + "," +
           std::to_string(k) + "] s" + std::to_string(stride) + " p" + std::to_string(pad) + " bias " +
           (bias == kNone ? "none" : data_type_name(bias)) + " residual " +
           (residual == kNone ? "none" : data_type_name(residual)) + (per_channel ? " per-channel" : " per-tensor") +
           " {" + act + "} out " + data_type_name(out);
  }
};

bool quantized(DataType t) { return t == kI8 || t == kF8; }

// What a case may differ by: one step of an 8-bit output; a float output by its precision (fp8
// inputs: what the tensor cores' fp8 sums lose, as the QuantGemm tests allow).
Tolerance tolerance(const Case& c) {
  if (c.out == kI8) return {0.0, 1.0};
  if (c.out == kF8) return {0.13, 0.02};
  if (c.q == kF8) {
    if (c.out == kF32) return {2e-3, 2e-3};
    return c.out == kF16 ? Tolerance{1e-2, 5e-3} : Tolerance{2e-2, 2e-2};
  }
  if (c.out == kF32) return {1e-5, 1e-4};  // fp32 epilogue (cuDNN's activation math) on |Y| ~ 1
  return tolerance_for(c.out);
}

class CudaQuantConvTest : public OpCaseTest {
 public:
  static void TearDownTestSuite() {
    for (const auto& [what, n] : counts_) std::printf("[ quant_conv ] %-40s %d\n", what.c_str(), n);
  }

 protected:
  // "" when fp8 convolutions can run here (or no device: the cases then skip by themselves).
  static std::string fp8_skip_reason() {
    const int cc = backend::cuda::current_device_info().cc;
    if (cc != 0 && cc < 90) return "cuDNN's fp8 convolutions need sm_90, the device is sm_" + std::to_string(cc);
    return "";
  }

  // Random non-zero 8-bit values: int8 in [-127, 127], fp8 in [-4, 4] (none below 0.1).
  Tensor q_data(DataType q, const Shape64& s) {
    if (q == kF8) return random_tensor(kF8, s, rng_, -4.0, 4.0);
    Tensor t = Tensor::zeros(kI8, s).value();
    std::uniform_int_distribution<int> d(1, 127);
    std::bernoulli_distribution neg(0.5);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, neg(rng_) ? -d(rng_) : d(rng_));
    return t;
  }
  // fp32 values in [lo, hi) as they come (random_tensor would push those below 0.1 up to 0.1).
  Tensor f32_values(const Shape64& s, double lo, double hi) {
    return random_tensor(kF32, s, rng_, lo, hi, /*nonzero=*/false);
  }

  // The case's operands: X, W, x_scale, w_scale, [B], [R], [y_scale].
  std::vector<Operand> operands(const Case& c) {
    const int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1, ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
    // E|x w| of the products: int8 uniform in +-127 ~ 127^2 / 3; fp8 in +-4 ~ 16 / 3.
    const double product = c.q == kI8 ? 5376.0 : 5.33, taps = static_cast<double>(c.c * c.k * c.k);
    const double x_scale_mid = 0.015, w_scale_mid = 1.0 / (x_scale_mid * product * std::sqrt(taps));
    std::vector<Operand> ins = {
        input(q_data(c.q, {c.n, c.h, c.w, c.c})), input(q_data(c.q, {c.m, c.k, c.k, c.c})),
        input(f32_values({}, 0.01, 0.02)),
        input(f32_values(c.per_channel ? Shape64{c.m} : Shape64{1}, 0.5 * w_scale_mid, 1.5 * w_scale_mid))};
    ins.push_back(c.bias == kNone ? omitted() : input(random_tensor(c.bias, {c.m}, rng_, -1.0, 1.0)));
    const bool r8 = c.residual == c.q;  // an 8-bit residual (X's type) with r_scale
    ins.push_back(c.residual == kNone ? omitted()
                  : r8                ? input(q_data(c.q, {c.n, oh, ow, c.m}))
                                      : input(random_tensor(c.residual, {c.n, oh, ow, c.m}, rng_, -2.0, 2.0)));
    if (quantized(c.out)) {
      // |Y| ~ 1 spread over the int8 range (1/40: the tails saturate) or fp8's (1/64).
      Tensor ys = Tensor::zeros(kF32, {}).value();
      ys.set_f64(0, c.out == kI8 ? 1.0 / 40 : 1.0 / 64);
      ins.push_back(input(ys));
    } else {
      ins.push_back(omitted());
    }
    if (r8) {  // |r_scale * R| ~ 1: int8 in +-127, fp8 in +-4
      Tensor rs = Tensor::zeros(kF32, {}).value();
      rs.set_f64(0, c.q == kI8 ? 1.0 / 64 : 0.25);
      ins.push_back(input(rs));
    }
    while (ins.back().dtype == kNone) ins.pop_back();
    return ins;
  }

  static std::string call(const Case& c) {
    std::string s = "ingot::QuantConv {channels_last=1, kernel_shape=[" + std::to_string(c.k) + ", " +
                    std::to_string(c.k) + "], strides=[" + std::to_string(c.stride) + ", " + std::to_string(c.stride) +
                    "], pads=[" + std::to_string(c.pad) + ", " + std::to_string(c.pad) + ", " + std::to_string(c.pad) +
                    ", " + std::to_string(c.pad) + "], output_dtype=" + std::to_string(static_cast<int>(c.out));
    if (!c.act.empty()) s += ", " + c.act;
    return s + "}";
  }

  // Every plan the family offers for the case against the reference. Without a device only the
  // host side runs (parse, inference, the family's decision, the reference). `must_offer`: a
  // device present, cuDNN must have a plan (else the layer's absence is counted).
  void every_plan(const Case& c, bool must_offer) {
    SCOPED_TRACE(c.label());
    const std::vector<Operand> ins = operands(c);
    const std::string text = op_graph(17, ins, call(c));
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    const auto fam = cudnn_quant_conv_family();
    auto cands = fam.candidates(node, input_types(node));
    std::vector<Tensor> data;
    for (const Operand& o : ins) data.push_back(o.data);
    auto ref = run_reference(node, data);
    ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
    if (!no_device_.empty()) {
      ASSERT_EQ(cands.size(), 1u) << "without a device the family offers plan 0, untried";
      return;
    }
    if (cands.empty()) {
      EXPECT_FALSE(must_offer) << "cuDNN offers no plan for an int8 ResNet form";
      ++counts_["layers without a plan (" + std::string(data_type_name(c.q)) + ")"];
      return;
    }
    ASSERT_LE(cands.size(), 3u);
    const Tolerance tol = tolerance(c);
    for (size_t i = 0; i < cands.size(); ++i) {
      ASSERT_EQ(cands[i]->name(), kPrefix + std::to_string(i));
      auto tactic = fam.create(cands[i]->name(), cands[i]->serialize());
      ASSERT_NE(tactic, nullptr);
      auto got = run_tactic(*tactic, node, data);
      if (!got.ok() && got.status().code() == StatusCode::kUnsupported &&
          got.status().to_string().find("buildable plans") != std::string::npos) {
        ++counts_["listed plans that did not build"];
        continue;
      }
      ASSERT_TRUE(got.ok()) << cands[i]->name() << ": " << got.status().to_string();
      EXPECT_TRUE(all_close((*got)[0], (*ref)[0], tol)) << cands[i]->name();
      ++counts_["plans checked (" + std::string(data_type_name(c.q)) + " -> " + data_type_name(c.out) + ")"];
    }
  }

  static inline std::map<std::string, int> counts_;
};

// ---- device tests (the host side runs everywhere) ----------------------------------------------

// ResNet-50's int8 forms (the layout pass's channels-last QuantConv): the block's convs with Relu
// quantized for the next one, conv3 with the block's residual (fp32 or fp16) before the Relu, the
// strided 3x3 and 1x1 downsample (its float output is the next residual), the last block's fp32
// output. cuDNN must offer these.
TEST_F(CudaQuantConvTest, ResNetFormsEveryPlan) {
  const std::string relu = "activation=\"Relu\"";
  for (bool per_channel : {true, false}) {
    // conv1 1x1 256 -> 64, conv2 3x3 64 -> 64, conv3 1x1 64 -> 256 + residual (layer1, 14x14 here).
    every_plan({kI8, 2, 14, 14, 256, 64, 1, 1, 0, kF32, kNone, per_channel, relu, kI8}, true);
    every_plan({kI8, 2, 14, 14, 64, 64, 3, 1, 1, kF32, kNone, per_channel, relu, kI8}, true);
    every_plan({kI8, 2, 14, 14, 64, 256, 1, 1, 0, kF32, kF32, per_channel, relu, kI8}, true);
    every_plan({kI8, 2, 14, 14, 64, 256, 1, 1, 0, kF32, kF16, per_channel, relu, kI8}, true);
    // layer2's first block: 3x3 stride 2 (128 -> 128), 1x1 stride 2 downsample (256 -> 512), float out.
    every_plan({kI8, 1, 16, 16, 128, 128, 3, 2, 1, kF32, kNone, per_channel, relu, kI8}, true);
    every_plan({kI8, 1, 16, 16, 256, 512, 1, 2, 0, kF32, kNone, per_channel, "", kF32}, true);
    every_plan({kI8, 1, 16, 16, 256, 512, 1, 2, 0, kF16, kNone, per_channel, "", kF16}, true);
    // layer4's last conv3 + residual + Relu in float (to the average pool); K = 9 x 512 on conv2.
    every_plan({kI8, 1, 7, 7, 512, 2048, 1, 1, 0, kF32, kF32, per_channel, relu, kF32}, true);
    every_plan({kI8, 1, 7, 7, 512, 512, 3, 1, 1, kF32, kNone, per_channel, relu, kI8}, true);
  }
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// The residual block's output quantized once (insert_qdq's and TensorRT's placement): conv3 reads
// the int8 (or fp8) residual with its r_scale and writes the block's output in 8 bits. Where cuDNN
// has no plan for an 8-bit pointwise operand the builder dequantizes the residual in a step of its
// own (split_fusions), so absence is counted and printed, not failed.
TEST_F(CudaQuantConvTest, EightBitResidualEveryPlan) {
  const std::string relu = "activation=\"Relu\"";
  for (bool per_channel : {true, false}) {
    every_plan({kI8, 2, 14, 14, 64, 256, 1, 1, 0, kF32, kI8, per_channel, relu, kI8}, false);
    every_plan({kI8, 1, 7, 7, 512, 2048, 1, 1, 0, kF32, kI8, per_channel, relu, kF32}, false);
    every_plan({kI8, 1, 7, 7, 512, 2048, 1, 1, 0, kF16, kI8, per_channel, relu, kF16}, false);
  }
  if (fp8_skip_reason().empty())
    every_plan({kF8, 2, 9, 9, 32, 64, 1, 1, 0, kF32, kF8, true, relu, kF8}, false);
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// ResNet's 1x1 int8 convolutions as the CUTLASS int8 GEMM over their pixels (quant_gemm_family's
// "cuda.quant_conv.cutlass_int8_1x1"), in the four forms of a bottleneck: quantized for the next conv
// with no residual, with an fp16 residual (a downsample's output) or an int8 one (the previous block's,
// with r_scale), and fp16 out of an int8 residual (the last block). Relu in each; the bias float32
// beside an int8 Y and fp16 beside an fp16 one, as the precision pass leaves them.
TEST_F(CudaQuantConvTest, CutlassOneByOneFormsMatchReference) {
  const char* name = "cuda.quant_conv.cutlass_int8_1x1";
  if (!backend::cuda::quant_gemm_family().create(name, {})) GTEST_SKIP() << "built without CUTLASS (no sm90a kernels)";
  const int cc = backend::cuda::current_device_info().cc;
  if (cc != 0 && cc != 90) GTEST_SKIP() << "the CUTLASS int8 kernels are sm90a, the device is sm_" << cc;
  const std::string relu = "activation=\"Relu\"";
  const Case cases[] = {
      {kI8, 2, 14, 14, 256, 64, 1, 1, 0, kF32, kNone, true, relu, kI8},
      {kI8, 2, 14, 14, 64, 256, 1, 1, 0, kF32, kF16, true, relu, kI8},
      {kI8, 2, 14, 14, 64, 256, 1, 1, 0, kF32, kI8, true, relu, kI8},
      {kI8, 1, 7, 7, 512, 2048, 1, 1, 0, kF16, kI8, true, relu, kF16},
      {kI8, 3, 5, 9, 48, 32, 1, 1, 0, kNone, kI8, true, relu, kI8},  // no bias, 135 pixels
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label());
    const Tolerance tol = tolerance(c);
    check(backend::cuda::quant_gemm_family(), 17, operands(c), call(c), name, 1, -3.0, 3.0, &tol);
  }
  // Not its forms: a 3x3 kernel, a stride, no Relu, a per-tensor w_scale.
  auto offered = [&](const Case& c) {
    auto g = parse_graph(op_graph(17, operands(c), call(c), 1));
    EXPECT_TRUE(g.ok());
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    return !backend::cuda::quant_gemm_family().candidates(node, input_types(node)).empty();
  };
  EXPECT_TRUE(offered({kI8, 1, 8, 8, 64, 64, 1, 1, 0, kF32, kNone, true, relu, kI8}));
  EXPECT_FALSE(offered({kI8, 1, 8, 8, 64, 64, 3, 1, 1, kF32, kNone, true, relu, kI8}));
  EXPECT_FALSE(offered({kI8, 1, 8, 8, 64, 64, 1, 2, 0, kF32, kNone, true, relu, kI8}));
  EXPECT_FALSE(offered({kI8, 1, 8, 8, 64, 64, 1, 1, 0, kF32, kNone, true, "", kI8}));
  EXPECT_FALSE(offered({kI8, 1, 8, 8, 64, 64, 1, 1, 0, kF32, kNone, false, relu, kI8}));
}

// Every epilogue form on one 3x3 convolution: bias none / fp32 / fp16, residual or not, per-tensor
// or per-channel w_scale, no activation or Relu, output fp32 / fp16 / bf16 / int8 (whose residual
// alternates fp32 and fp16).
TEST_F(CudaQuantConvTest, EpiloguesEveryPlan) {
  int i = 0;
  for (DataType out : {kF32, kF16, kBF16, kI8})
    for (DataType bias : {kNone, kF32, kF16})
      for (bool residual : {false, true})
        for (bool per_channel : {false, true})
          for (const char* act : {"", "activation=\"Relu\""}) {
            const DataType r = !residual ? kNone : out == kI8 ? (i % 2 ? kF32 : kF16) : out;
            every_plan({kI8, 2, 9, 9, 32, 32, 3, 1, 1, bias, r, per_channel, act, out}, out != kBF16);
            ++i;
          }
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// The activations the FusedConv graph family fuses (add_activation), before an int8 and a float
// output, with a residual before them. Counted where cuDNN offers no plan (the builder splits).
TEST_F(CudaQuantConvTest, ActivationsEveryPlan) {
  for (const char* act : kConvActivations) {
    std::string a = act;
    if (a.find("Tanh") != std::string::npos) continue;  // refused (QuantConvNoDevice)
    while (!a.empty() && (a.back() == ' ' || a.back() == ',')) a.pop_back();
    for (DataType out : {kI8, kF16})
      every_plan({kI8, 2, 9, 7, 16, 24, 3, 1, 1, kF32, out == kI8 ? kF32 : kF16, true, a, out}, false);
  }
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// Random ResNet-like shapes: 1x1 / 3x3, strides 1 and 2, pads 0 / 1, channels multiples of 4,
// random epilogues.
TEST_F(CudaQuantConvTest, RandomShapesEveryPlan) {
  std::mt19937 pick_rng(29);
  auto pick = [&](int lo, int hi) {
    return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(pick_rng));
  };
  const DataType outs[] = {kF32, kF16, kI8};
  for (int iter = 0; iter < 24; ++iter) {
    Case c;
    c.k = pick(0, 1) ? 3 : 1;
    c.stride = pick(1, 2);
    c.pad = c.k == 3 ? pick(0, 1) : 0;
    c.n = pick(1, 3);
    c.h = pick(5, 17);
    c.w = pick(5, 17);
    c.c = 4 * pick(1, 24);
    c.m = 4 * pick(1, 24);
    c.bias = pick(0, 2) ? kF32 : kNone;
    c.out = outs[iter % 3];
    c.residual = pick(0, 1) ? (c.out == kI8 ? kF32 : c.out) : kNone;
    c.per_channel = pick(0, 1) != 0;
    c.act = pick(0, 1) ? "activation=\"Relu\"" : "";
    every_plan(c, false);
  }
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// fp8 (float8e4m3fn) X and W, where cuDNN offers it (Hopper): float outputs and fp8 ones.
TEST_F(CudaQuantConvTest, Fp8EveryPlan) {
  const std::string why = fp8_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string relu = "activation=\"Relu\"";
  for (bool residual : {false, true}) {
    every_plan({kF8, 2, 9, 9, 32, 48, 3, 1, 1, kF32, residual ? kF16 : kNone, false, relu, kF16}, false);
    every_plan({kF8, 2, 9, 9, 64, 32, 1, 2, 0, kF32, residual ? kF32 : kNone, true, "", kF32}, false);
    every_plan({kF8, 2, 9, 9, 32, 32, 3, 1, 1, kF32, residual ? kF32 : kNone, true, relu, kF8}, false);
  }
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
}

// The output on the residual's storage (the planner's in-place step), a float output.
TEST_F(CudaQuantConvTest, OutputAliasesResidual) {
  const Case c{kI8, 2, 9, 9, 32, 32, 3, 1, 1, kF32, kF16, true, "activation=\"Relu\"", kF16};
  const std::vector<Operand> ins = operands(c);
  auto g = parse_graph(op_graph(17, ins, call(c)));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host;
  for (const Operand& o : ins) host.push_back(o.data);
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
  auto cands = cudnn_quant_conv_family().candidates(node, input_types(node));
  ASSERT_FALSE(cands.empty());
  std::vector<Tensor> dev;
  auto uploaded = upload_inputs(host, &dev);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
  const std::vector<const Tensor*> ptrs = *uploaded;
  std::vector<Tensor> outs = {dev[5]};  // the residual's storage
  DeviceBuffer ws(cands[0]->workspace_bytes(node, {}));
  backend::StepIO io;
  io.node = &node;
  io.inputs = ptrs;
  io.outputs = &outs;
  io.workspace = ws.get();
  io.in_place = true;
  Status st = cands[0]->enqueue(io);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(all_close(*got, (*want)[0], tolerance(c)));
}

// Enqueue captures into a CUDA graph once the plan is built (the scales are read on the device),
// and replays right.
TEST_F(CudaQuantConvTest, EnqueueCapturesIntoCudaGraph) {
  const Case c{kI8, 2, 14, 14, 64, 64, 3, 1, 1, kF32, kF32, true, "activation=\"Relu\"", kI8};
  const std::vector<Operand> ins = operands(c);
  auto g = parse_graph(op_graph(17, ins, call(c)));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host;
  for (const Operand& o : ins) host.push_back(o.data);
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
  auto cands = cudnn_quant_conv_family().candidates(node, input_types(node));
  ASSERT_FALSE(cands.empty());
  std::vector<Tensor> dev;
  auto uploaded = upload_inputs(host, &dev);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
  const std::vector<const Tensor*> ptrs = *uploaded;
  auto y = device_alloc(kI8, (*want)[0].shape());
  ASSERT_TRUE(y.ok());
  std::vector<Tensor> outs = {*y};
  DeviceBuffer ws(cands[0]->workspace_bytes(node, {}));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend::StepIO io;
  io.node = &node;
  io.inputs = ptrs;
  io.outputs = &outs;
  io.workspace = ws.get();
  io.stream = stream;
  Status warm = cands[0]->enqueue(io);  // builds the plan
  ASSERT_TRUE(warm.ok()) << warm.to_string();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_TRUE(poison(outs[0]).ok());
  {
    const Status st = capture_and_replay(*cands[0], io, 2);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(all_close(*got, (*want)[0], tolerance(c)));
  cudaStreamDestroy(stream);
}

// The builder stores the chosen plan serialized for its opt shapes (serialize_for); a tactic made
// from those params runs its first call from the record, without building the plan, with the
// reference's outputs.
TEST_F(CudaQuantConvTest, PlanTravelsInTheEngineParams) {
  const Case c{kI8, 2, 10, 12, 32, 64, 3, 1, 1, kF32, kF16, true, "activation=\"Relu\"", kI8};
  const std::vector<Operand> ins = operands(c);
  auto g = parse_graph(op_graph(17, ins, call(c)));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  if (!no_device_.empty()) GTEST_SKIP() << no_device_ << " (host side checked)";
  const auto fam = cudnn_quant_conv_family();
  ASSERT_FALSE(fam.candidates(node, input_types(node)).empty());
  std::vector<Tensor> host;
  std::vector<Shape64> shapes;
  for (const Operand& o : ins) {
    host.push_back(o.data);
    shapes.push_back(o.data.defined() ? o.data.shape() : Shape64{});
  }
  const std::string name = std::string(kPrefix) + "0";
  const std::vector<uint8_t> params = fam.create(name, {})->serialize_for(node, shapes);
  ASSERT_GT(params.size(), 2u);
  if (params[0] != 2) GTEST_SKIP() << "this cuDNN does not serialize the chosen plan (params stay {1, 0})";
  auto loaded = fam.create(name, params);
  ASSERT_NE(loaded, nullptr);
  const int64_t before = backend::cuda::cudnn_quant_conv_plans_deserialized();
  auto got = run_tactic(*loaded, node, host);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(backend::cuda::cudnn_quant_conv_plans_deserialized(), before + 1) << "the record was not used";
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_TRUE(all_close((*got)[0], (*want)[0], tolerance(c)));
}

// ---- no device needed ----------------------------------------------------------------------------

// A QuantConv graph with the given inputs (omitted(): an absent optional input) and attributes.
std::unique_ptr<ir::Graph> quant_graph(const std::vector<Operand>& ins, const std::string& attrs) {
  auto g = parse_graph(op_graph(17, ins, "ingot::QuantConv {" + attrs + "}"));
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << op_graph(17, ins, "ingot::QuantConv {" + attrs + "}");
  return g.ok() ? std::move(*g) : nullptr;
}

bool supported(const std::vector<Operand>& ins, const std::string& attrs) {
  auto g = quant_graph(ins, attrs);
  if (!g) return false;
  const ir::Node& node = *g->nodes()[0];
  const bool s = cudnn_quant_conv_family().create(std::string(kPrefix) + "0", {})->supports(node, input_types(node));
  // Without a device the family offers its first plan exactly where supports() holds.
  if (!cuda_unavailable_reason().empty())
    EXPECT_EQ(cudnn_quant_conv_family().candidates(node, input_types(node)).size(), s ? 1u : 0u);
  return s;
}

// An operand of type `dt` and shape `s` (random data where a test needs it).
Operand op(DataType dt, Shape64 s) { return input(dt, std::move(s)); }

TEST(QuantConvNoDevice, SupportsDecisions) {
  const Shape64 x{2, 9, 9, 16}, w{32, 3, 3, 16}, y{2, 9, 9, 32};
  const std::string cl = "channels_last=1, pads=[1, 1, 1, 1]";
  const Operand sx = op(kF32, {}), sw = op(kF32, {32}), b = op(kF32, {32}), sy = op(kF32, {});
  // int8, float and int8 outputs, per-channel and per-tensor scales, any float bias and residual.
  EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), sx, sw}, cl));
  EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), sx, op(kF32, {1}), b}, cl + ", output_dtype=10"));
  EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), op(kF32, {1}), op(kF32, {}), op(kF16, {32}), op(kF16, y)},
                        cl + ", output_dtype=10, activation=\"Relu\""));
  EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), sx, sw, b, op(kBF16, y)}, cl + ", output_dtype=16"));
  EXPECT_TRUE(
      supported({op(kI8, x), op(kI8, w), sx, sw, b, op(kF16, y), sy}, cl + ", output_dtype=3, activation=\"Relu\""));
  EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), sx, sw, omitted(), omitted(), sy}, cl + ", output_dtype=3"));
  EXPECT_TRUE(supported({op(kI8, Shape64{1, 16, 16, 64}), op(kI8, Shape64{128, 1, 1, 64}), sx, op(kF32, {128})},
                        "channels_last=1, strides=[2, 2]"));
  for (const char* act : {"activation=\"Silu\"", "activation=\"Gelu\"", "activation=\"HardSwish\"",
                          "activation=\"Clip\", activation_params=[0.0, 6.0]",
                          "activation=\"HardSigmoid\", activation_params=[0.2, 0.5]"})
    EXPECT_TRUE(supported({op(kI8, x), op(kI8, w), sx, sw, b}, cl + ", " + act)) << act;
  // fp8 (without a device its architecture is unknown: offered, cuDNN decides on one).
  if (!cuda_unavailable_reason().empty())
    EXPECT_TRUE(supported({op(kF8, x), op(kF8, w), sx, op(kF32, {}), b, omitted(), sy}, cl + ", output_dtype=17"));

  // Channels-first (cuDNN's 8-bit convolutions read NHWC only): the builder splits it.
  EXPECT_FALSE(supported({op(kI8, Shape64{2, 16, 9, 9}), op(kI8, Shape64{32, 16, 3, 3}), sx, sw}, "pads=[1, 1, 1, 1]"));
  // Channels not multiples of 4 (a stem's C = 3; M = 6), groups.
  EXPECT_FALSE(supported({op(kI8, Shape64{1, 32, 32, 3}), op(kI8, Shape64{32, 3, 3, 3}), sx, sw}, cl));
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, Shape64{6, 3, 3, 16}), sx, op(kF32, {6})}, cl));
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, Shape64{32, 3, 3, 8}), sx, sw}, cl + ", group=2"));
  // Scales that are not one value / [M]; an 8-bit output of another type than X.
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, w), sx, op(kF32, {16})}, cl));
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, w), op(kF32, {2}), sw}, cl));
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, w), sx, sw, b, omitted(), op(kF32, {2})}, cl + ", output_dtype=3"));
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, w), sx, sw, b, omitted(), sy}, cl + ", output_dtype=17"));
  // Tanh (cuDNN's TANH_FWD gave NaN; the FusedConv family refuses it too).
  EXPECT_FALSE(supported({op(kI8, x), op(kI8, w), sx, sw, b}, cl + ", activation=\"Tanh\""));
  // uint8 X and W (op inference takes int8 / fp8 only: the types are handed over as a caller
  // with stale types would).
  auto g = quant_graph({op(kI8, x), op(kI8, w), sx, sw}, cl);
  ASSERT_NE(g, nullptr);
  const ir::Node& node = *g->nodes()[0];
  std::vector<ir::TensorType> types = input_types(node);
  auto tactic = cudnn_quant_conv_family().create(std::string(kPrefix) + "0", {});
  EXPECT_TRUE(tactic->supports(node, types));
  types[0].dtype = types[1].dtype = DataType::kUInt8;
  EXPECT_FALSE(tactic->supports(node, types));
  // The float convolution families leave QuantConv alone, and this one the float convolutions.
  types = input_types(node);
  EXPECT_TRUE(backend::cuda::cudnn_graph_conv_family().candidates(node, types).empty());
  EXPECT_TRUE(backend::cuda::cudnn_conv_family().candidates(node, types).empty());
  auto fg = parse_graph(op_graph(17, {op(kF16, x), op(kF16, w), op(kF16, {32})}, "ingot::FusedConv {" + cl + "}"));
  ASSERT_TRUE(fg.ok()) << fg.status().to_string();
  const ir::Node& fused = *(*fg)->nodes()[0];
  EXPECT_FALSE(tactic->supports(fused, input_types(fused)));
  EXPECT_TRUE(cudnn_quant_conv_family().candidates(fused, input_types(fused)).empty());
}

TEST(QuantConvNoDevice, NamesAndParamsRoundTrip) {
  const auto fam = cudnn_quant_conv_family();
  for (int i = 0; i < 3; ++i) {
    const std::string name = kPrefix + std::to_string(i);
    auto tac = fam.create(name, {});
    ASSERT_NE(tac, nullptr) << name;
    EXPECT_EQ(tac->name(), name);
    auto again = fam.create(name, tac->serialize());
    ASSERT_NE(again, nullptr) << name;
    EXPECT_EQ(again->name(), name);
  }
  EXPECT_EQ(fam.create(std::string(kPrefix) + "3", {}), nullptr);
  EXPECT_EQ(fam.create(std::string(kPrefix) + "x", {}), nullptr);
  EXPECT_EQ(fam.create("cuda.cudnn.graph.conv.0", {}), nullptr);  // the FusedConv family's
  EXPECT_EQ(backend::cuda::cudnn_graph_conv_family().create(std::string(kPrefix) + "0", {}), nullptr);
  EXPECT_EQ(fam.create(std::string(kPrefix) + "1", {1, 2}), nullptr);  // params of another index
}

// An engine's plan record (params {2, i, ...}) cut short, of another index, with bytes left over
// or out-of-range fields is refused (the engine then fails to load naming the tactic), never read past.
TEST(QuantConvNoDevice, BadPlanRecordsAreRefused) {
  const auto fam = cudnn_quant_conv_family();
  const std::string name = std::string(kPrefix) + "0";
  // nd 4, per-channel | y_scale | channels-last, X int8, Y int8, B fp32, R fp16, x [1,8,8,16]
  // (channels-first dims), w [32,16,3,3], workspace 0, name "e", blob "B".
  std::vector<uint8_t> good = {2, 0, 4, 7};
  for (DataType d : {kI8, kI8, kF32, kF16}) good.push_back(static_cast<uint8_t>(d));
  auto put32 = [](std::vector<uint8_t>& v, uint32_t x) {
    for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
  };
  for (uint32_t d : {1, 16, 8, 8, 32, 16, 3, 3}) put32(good, d);
  for (int i = 0; i < 8; ++i) good.push_back(0);  // workspace
  put32(good, 1);
  good.push_back('e');
  put32(good, 1);
  good.push_back('B');
  EXPECT_NE(fam.create(name, good), nullptr);
  EXPECT_EQ(fam.create(std::string(kPrefix) + "1", good), nullptr);  // a record of index 0
  for (size_t cut = 3; cut < good.size(); ++cut)
    EXPECT_EQ(fam.create(name, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut))), nullptr)
        << "cut at " << cut;
  auto extra = good;
  extra.push_back(0);
  EXPECT_EQ(fam.create(name, extra), nullptr);
  auto bad_field = [&](size_t at, uint8_t v) {
    auto b = good;
    b[at] = v;
    return fam.create(name, b);
  };
  EXPECT_EQ(bad_field(2, 5), nullptr);                                       // nd 5
  EXPECT_EQ(bad_field(3, 8), nullptr);                                       // unknown flag
  EXPECT_EQ(bad_field(4, static_cast<uint8_t>(kF16)), nullptr);              // X not 8-bit
  EXPECT_EQ(bad_field(5, static_cast<uint8_t>(kNone)), nullptr);             // no Y type
  EXPECT_EQ(bad_field(6, static_cast<uint8_t>(DataType::kInt64)), nullptr);  // bias type
  EXPECT_EQ(bad_field(8, 0), nullptr);                                       // x[0] = 0
  auto huge = good;
  huge[huge.size() - 5] = 0xff;  // blob length far beyond the params
  EXPECT_EQ(fam.create(name, huge), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
