// Copyright ingot authors. Apache-2.0.
//
// The cuBLASLt QuantGemm tactics (ingot::QuantGemm, int8 and float8e4m3fn) against the CPU
// reference (cpu::run_node on the same host inputs): M of 1, 5, 64, 300 and a 3-D X [2, 37, K],
// K of 16, 64, 320, N of 16, 48, 784; random non-zero data; per-tensor and per-channel w_scale
// (int8), with and without a bias of each float type, activations none, Relu, GeluTanh (fused in
// cuBLASLt's fp8 epilogue when the bias allows) and Gelu (our epilogue kernel), outputs fp32,
// fp16 and bf16. Tolerances by precision: int8 accumulates exactly, so only the output rounding
// (and fp32 activation math) differs; fp8 sums in fp32 in cuBLASLt's order, and a bias cuBLASLt
// cannot take is added after Y's rounding. Scales are chosen so outputs are O(1), which makes
// the absolute parts meaningful. Also: each tactic refuses what it does not handle, names round
// trip, and an int8 enqueue captures into a CUDA graph.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/core/device_info.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::quant_gemm_family;

constexpr const char* kInt8 = "cuda.quant_gemm.cublaslt_int8";
constexpr const char* kFp8 = "cuda.quant_gemm.cublaslt_fp8";
constexpr const char* kCutlassInt8 = "cuda.quant_gemm.cutlass_int8";
constexpr const char* kCutlassInt8Pingpong = "cuda.quant_gemm.cutlass_int8_pingpong";

// X shapes ([..., K]) and N: M of 1, 5, 64, 300 and a 3-D X.
struct Shape {
  Shape64 x;
  int64_t n;
};
const Shape kShapes[] = {{{1, 64}, 48},  {{5, 16}, 16},     {{64, 320}, 784},
                         {{300, 64}, 784}, {{2, 37, 320}, 48}, {{300, 320}, 16}};

const char* const kActs[] = {"", "Relu", "GeluTanh", "Gelu"};

class CudaQuantGemmTest : public OpCaseTest {
 protected:
  // "" when fp8 GEMMs can run here (or no device: check() then skips by itself).
  static std::string fp8_skip_reason() {
    const int cc = backend::cuda::current_device_info().cc;
    if (cc != 0 && cc < 89) return "fp8 GEMMs need compute capability 8.9 or newer, the device is " + std::to_string(cc);
    return "";
  }

  Tensor int8_data(const Shape64& s) {
    Tensor t = Tensor::zeros(DataType::kInt8, s).value();
    std::uniform_int_distribution<int> d(-127, 127);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, d(rng_));
    return t;
  }
  // Values in [-4, 4] rounded to fp8 (none below 0.1 in magnitude).
  Tensor fp8_data(const Shape64& s) { return random_tensor(DataType::kFloat8E4M3FN, s, rng_, -4.0, 4.0); }
  // Positive float32 scales in [lo, hi): one value (shape [] or [1]) or n.
  Tensor scales(int64_t n, bool scalar_rank0, double lo, double hi) {
    const Shape64 s = n > 1 ? Shape64{n} : scalar_rank0 ? Shape64{} : Shape64{1};
    return random_tensor(DataType::kFloat32, s, rng_, lo, hi);
  }

  static std::string call(DataType out, const std::string& act) {
    std::string c = "ingot::QuantGemm {output_dtype=" + std::to_string(static_cast<int>(out));
    if (!act.empty()) c += ", activation=\"" + act + "\"";
    return c + "}";
  }

  static Tolerance tolerance(DataType q, DataType out) {
    if (q == DataType::kInt8) return tolerance_for(out);  // only the output's rounding
    // Hopper's FP8 tensor cores keep fewer bits than fp32 while they accumulate inside an MMA
    // (about 14; cuBLASLt without fast accumulation promotes to fp32 every few k-blocks): s25q2
    // (H100) saw up to ~5e-4 of the terms' magnitude at K = 320 against the exact sum.
    switch (out) {
      case DataType::kFloat32: return {2e-3, 1e-3};
      case DataType::kFloat16: return {1e-2, 5e-3};
      default: return {2e-2, 2e-2};
    }
  }

  // One QuantGemm case through the tactic `want`. Scales keep |Y| around 1: int8 sums reach
  // ~sqrt(K) * 5400, fp8 ones ~sqrt(K) * 5.
  void run(DataType q, const Shape& shape, bool per_channel, DataType bias, const std::string& act, DataType out) {
    const int64_t k = shape.x.back(), n = shape.n;
    SCOPED_TRACE(std::string(data_type_name(q)) + " X " + shape_to_string(shape.x) + " N " + std::to_string(n) +
                 (per_channel ? " per-channel" : " per-tensor") + " bias " +
                 (bias == DataType::kUndefined ? "none" : data_type_name(bias)) + " act '" + act + "' out " +
                 data_type_name(out));
    const bool int8 = q == DataType::kInt8;
    std::vector<Operand> ins = {
        input(int8 ? int8_data(shape.x) : fp8_data(shape.x)),
        input(int8 ? int8_data({n, k}) : fp8_data({n, k})),
        input(int8 ? scales(1, per_channel, 0.01, 0.02) : scales(1, per_channel, 0.05, 0.15)),
        input(int8 ? scales(per_channel ? n : 1, !per_channel, 0.001, 0.003) : scales(1, true, 0.05, 0.15))};
    if (bias != DataType::kUndefined) ins.push_back(input(random_tensor(bias, {n}, rng_, -1.0, 1.0)));
    const Tolerance tol = tolerance(q, out);
    check(quant_gemm_family(), 17, ins, call(out, act), int8 ? kInt8 : kFp8, 1, -3.0, 3.0, &tol);
  }
};

TEST_F(CudaQuantGemmTest, Int8MatchesReference) {
  const DataType biases[] = {DataType::kUndefined, DataType::kFloat32, DataType::kFloat16};
  int i = 0;
  for (const Shape& s : kShapes)
    for (const char* act : kActs)
      for (DataType out : {DataType::kFloat32, DataType::kFloat16}) {
        run(DataType::kInt8, s, i % 2 == 1, biases[i % 3], act, out);
        ++i;
      }
  run(DataType::kInt8, kShapes[2], true, DataType::kBFloat16, "Gelu", DataType::kBFloat16);
  // The activations only our epilogue kernel has, with their parameters.
  for (const char* act : {"Silu", "Sigmoid", "Tanh", "HardSwish"})
    run(DataType::kInt8, kShapes[1], true, DataType::kFloat32, act, DataType::kFloat16);
}

TEST_F(CudaQuantGemmTest, Int8ActivationParameters) {
  const Shape s = kShapes[0];
  for (const char* act : {"activation=\"Clip\", activation_params=[-0.5, 0.5]",
                          "activation=\"LeakyRelu\", activation_params=[0.1]",
                          "activation=\"HardSigmoid\", activation_params=[0.2, 0.5]"}) {
    const int64_t k = s.x.back();
    std::vector<Operand> ins = {input(int8_data(s.x)), input(int8_data({s.n, k})), input(scales(1, true, 0.01, 0.02)),
                                input(scales(s.n, false, 0.001, 0.003)),
                                input(random_tensor(DataType::kFloat32, {s.n}, rng_, -1.0, 1.0))};
    check(quant_gemm_family(), 17, ins, std::string("ingot::QuantGemm {") + act + "}", kInt8);
  }
}

TEST_F(CudaQuantGemmTest, Fp8MatchesReference) {
  const std::string why = fp8_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  // Biases: none, Y's type (cuBLASLt's epilogue for fp16/bf16 Y), and one it cannot take (ours).
  int i = 0;
  for (const Shape& s : kShapes)
    for (const char* act : kActs)
      for (DataType out : {DataType::kFloat32, DataType::kFloat16}) {
        const DataType other = out == DataType::kFloat32 ? DataType::kFloat16 : DataType::kFloat32;
        const DataType bias = i % 3 == 0 ? DataType::kUndefined : i % 3 == 1 ? out : other;
        run(DataType::kFloat8E4M3FN, s, false, bias, act, out);
        ++i;
      }
  for (DataType bias : {DataType::kBFloat16, DataType::kFloat32})
    for (const char* act : {"Relu", "GeluTanh", "Silu"})
      run(DataType::kFloat8E4M3FN, kShapes[2], false, bias, act, DataType::kBFloat16);
}

// A residual R (a transformer's skip connection): fp8 takes it as cuBLASLt's C (beta 1), int8
// in our epilogue; with and without a bias, with an activation after the sum.
TEST_F(CudaQuantGemmTest, ResidualMatchesReference) {
  const std::string fp8_why = fp8_skip_reason();
  for (DataType q : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    if (q == DataType::kFloat8E4M3FN && !fp8_why.empty()) continue;
    const bool int8 = q == DataType::kInt8;
    for (const Shape& s : {kShapes[1], kShapes[3]})
      for (DataType out : {DataType::kFloat16, DataType::kFloat32})
        for (bool bias : {false, true})
          for (const char* act : {"", "Relu"}) {
            const int64_t k = s.x.back();
            Shape64 ys = s.x;
            ys.back() = s.n;
            SCOPED_TRACE(std::string(data_type_name(q)) + " X " + shape_to_string(s.x) + " out " +
                         data_type_name(out) + (bias ? " bias" : "") + " act '" + act + "'");
            std::vector<Operand> ins = {
                input(int8 ? int8_data(s.x) : fp8_data(s.x)), input(int8 ? int8_data({s.n, k}) : fp8_data({s.n, k})),
                input(int8 ? scales(1, true, 0.01, 0.02) : scales(1, true, 0.05, 0.15)),
                input(int8 ? scales(s.n, false, 0.001, 0.003) : scales(1, true, 0.05, 0.15)),
                bias ? input(random_tensor(out, {s.n}, rng_, -1.0, 1.0)) : Operand{},
                input(random_tensor(out, ys, rng_, -2.0, 2.0))};
            const Tolerance tol = tolerance(q, out);
            check(quant_gemm_family(), 17, ins, call(out, act), int8 ? kInt8 : kFp8, 1, -3.0, 3.0, &tol);
          }
  }
}

// The CUTLASS int8 GEMM with its epilogue in the kernel, in the three forms it takes (BERT's layers):
// fp16 Y = scaled sums + fp16 bias (or none), + bias + residual, and int8 Y = Gelu(scaled sums + fp32
// bias) / y_scale; per-channel w_scale; every shape of kShapes (N and K multiples of 16, M of 1 to 300, a 3-D
// X). What it refuses (a per-tensor w_scale, Relu, an fp32 output, N not a multiple of 16) goes to
// the cuBLASLt tactic.
TEST_F(CudaQuantGemmTest, CutlassInt8FormsMatchReference) {
  if (!quant_gemm_family().create(kCutlassInt8, {})) GTEST_SKIP() << "built without CUTLASS (no sm90a kernels)";
  const int cc = backend::cuda::current_device_info().cc;
  if (cc != 0 && cc != 90) GTEST_SKIP() << "the CUTLASS int8 kernels are sm90a, the device is sm_" << cc;
  for (const char* tactic : {kCutlassInt8, kCutlassInt8Pingpong})  // both schedules (cutlass_int8_gemm.h)
  for (const Shape& s : kShapes)
    for (int form = 0; form < 3; ++form)
      for (bool bias : {false, true}) {
        const int64_t k = s.x.back();
        Shape64 ys = s.x;
        ys.back() = s.n;
        SCOPED_TRACE(std::string(tactic) + " X " + shape_to_string(s.x) + " N " + std::to_string(s.n) + " form " +
                     std::to_string(form) + (bias ? " bias" : ""));
        // The bias as the precision pass leaves it: fp16 beside an fp16 Y, float32 beside an int8 one.
        const DataType bias_type = form == 2 ? DataType::kFloat32 : DataType::kFloat16;
        std::vector<Operand> ins = {input(int8_data(s.x)), input(int8_data({s.n, k})), input(scales(1, true, 0.01, 0.02)),
                                    input(scales(s.n, false, 0.001, 0.003)),
                                    bias ? input(random_tensor(bias_type, {s.n}, rng_, -1.0, 1.0)) : Operand{}};
        std::string c;
        Tolerance tol = tolerance_for(DataType::kFloat16);
        if (form == 2) {  // FFN1: Gelu, quantized for the next layer
          Tensor ysc = Tensor::zeros(DataType::kFloat32, {}).value();
          ysc.set_f64(0, 0.01);
          ins.push_back(Operand{});
          ins.push_back(input(ysc));
          c = "ingot::QuantGemm {output_dtype=3, activation=\"Gelu\"}";
          tol = Tolerance{0.0, 1.0};  // one int8 step where a quotient falls next to a rounding boundary
        } else {
          if (form == 1) ins.push_back(input(random_tensor(DataType::kFloat16, ys, rng_, -2.0, 2.0)));
          c = call(DataType::kFloat16, "");
        }
        check(quant_gemm_family(), 17, ins, c, tactic, 1, -3.0, 3.0, &tol);
      }
  // Not its forms: a per-tensor w_scale, Relu, an fp32 output, N = 40.
  auto offered = [&](const std::vector<Operand>& ins, const std::string& c) {
    auto g = parse_graph(op_graph(17, ins, c, 1));
    EXPECT_TRUE(g.ok());
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    int found = 0;
    for (const auto& t : quant_gemm_family().candidates(node, input_types(node)))
      found += t->name() == kCutlassInt8 || t->name() == kCutlassInt8Pingpong;
    EXPECT_TRUE(found == 0 || found == 2) << "one schedule offered without the other: " << found;
    return found == 2;
  };
  const Shape64 x{64, 320};
  auto base = [&](int64_t n, bool per_channel) {
    return std::vector<Operand>{input(int8_data(x)), input(int8_data({n, 320})), input(scales(1, true, 0.01, 0.02)),
                                input(scales(per_channel ? n : 1, !per_channel, 0.001, 0.003))};
  };
  EXPECT_TRUE(offered(base(48, true), call(DataType::kFloat16, "")));
  EXPECT_FALSE(offered(base(48, false), call(DataType::kFloat16, "")));
  EXPECT_FALSE(offered(base(48, true), call(DataType::kFloat16, "Relu")));
  EXPECT_FALSE(offered(base(48, true), call(DataType::kFloat32, "")));
  EXPECT_FALSE(offered(base(40, true), call(DataType::kFloat16, "")));
}

// Needs no device (candidates are host logic): the ping-pong int8 GEMM is offered beside the cooperative
// one only with INGOT_CUTLASS_INT8_PINGPONG=1, and can be created by name either way (an engine that
// chose it loads without the variable).
// Offered by default since its forms test passed on a device (session 41); INGOT_CUTLASS_INT8_PINGPONG=0
// takes it out.
TEST_F(CudaQuantGemmTest, Int8PingpongOfferedUnlessTurnedOff) {
  if (!quant_gemm_family().create(kCutlassInt8, {})) GTEST_SKIP() << "built without CUTLASS (no sm90a kernels)";
  const std::vector<Operand> ins = {input(DataType::kInt8, {64, 320}), input(DataType::kInt8, {48, 320}),
                                    input(scales(1, true, 0.01, 0.02)), input(scales(48, false, 0.001, 0.003))};
  auto g = parse_graph(op_graph(17, ins, call(DataType::kFloat16, ""), 1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto names = [&] {
    std::vector<std::string> out;
    for (const auto& t : quant_gemm_family().candidates(node, input_types(node))) out.push_back(t->name());
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const char* n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  unsetenv("INGOT_CUTLASS_INT8_PINGPONG");
  std::vector<std::string> on = names();
  EXPECT_TRUE(has(on, kCutlassInt8));
  EXPECT_TRUE(has(on, kCutlassInt8Pingpong));
  setenv("INGOT_CUTLASS_INT8_PINGPONG", "0", 1);
  std::vector<std::string> off = names();
  unsetenv("INGOT_CUTLASS_INT8_PINGPONG");
  EXPECT_TRUE(has(off, kCutlassInt8));
  EXPECT_FALSE(has(off, kCutlassInt8Pingpong));
  EXPECT_NE(quant_gemm_family().create(kCutlassInt8Pingpong, {}), nullptr);
}

// The next layer's QuantizeLinear taken in (y_scale): Y int8 or fp8 straight from the epilogue.
// The fp8 kind quantizes an fp16 D and the reference a double, so a value may land one step
// away where it falls next to a rounding boundary: one int8 step, one fp8 step (1/8 relative).
TEST_F(CudaQuantGemmTest, QuantizedOutputMatchesReference) {
  const std::string fp8_why = fp8_skip_reason();
  for (DataType q : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    if (q == DataType::kFloat8E4M3FN && !fp8_why.empty()) continue;
    const bool int8 = q == DataType::kInt8;
    for (const Shape& s : {kShapes[1], kShapes[2], kShapes[4]})
      for (DataType yq : {DataType::kInt8, DataType::kFloat8E4M3FN})
        for (const char* act : {"", "Gelu"}) {
          const int64_t k = s.x.back();
          SCOPED_TRACE(std::string(data_type_name(q)) + " X " + shape_to_string(s.x) + " Y " + data_type_name(yq) +
                       " act '" + act + "'");
          // |Y| ~ 1 before quantization: y_scale 1/100 spreads it over the int8 range; fp8 1/64.
          Tensor ysc = Tensor::zeros(DataType::kFloat32, {}).value();
          ysc.set_f64(0, yq == DataType::kInt8 ? 0.01 : 1.0 / 64);
          std::vector<Operand> ins = {
              input(int8 ? int8_data(s.x) : fp8_data(s.x)), input(int8 ? int8_data({s.n, k}) : fp8_data({s.n, k})),
              input(int8 ? scales(1, true, 0.01, 0.02) : scales(1, true, 0.05, 0.15)),
              input(int8 ? scales(s.n, false, 0.001, 0.003) : scales(1, true, 0.05, 0.15)),
              input(random_tensor(DataType::kFloat32, {s.n}, rng_, -1.0, 1.0)), Operand{}, input(ysc)};
          const Tolerance tol = yq == DataType::kInt8 ? Tolerance{0.0, 1.0} : Tolerance{0.13, 0.02};
          std::string c = "ingot::QuantGemm {output_dtype=" + std::to_string(static_cast<int>(yq));
          if (*act) c += std::string(", activation=\"") + act + "\"";
          check(quant_gemm_family(), 17, ins, c + "}", int8 ? kInt8 : kFp8, 1, -3.0, 3.0, &tol);
        }
  }
}

TEST_F(CudaQuantGemmTest, RefusesWhatItDoesNotHandle) {
  // fp8 with a per-channel w_scale (cuBLASLt's fp8 scales are per tensor).
  refuses(quant_gemm_family(), 17,
          {input(DataType::kFloat8E4M3FN, {8, 64}), input(DataType::kFloat8E4M3FN, {48, 64}),
           input(DataType::kFloat32, {}), input(DataType::kFloat32, {48})},
          "ingot::QuantGemm {output_dtype=10}");
  // fp8 with K % 16 != 0, and with N * 2 bytes not a multiple of 16.
  refuses(quant_gemm_family(), 17,
          {input(DataType::kFloat8E4M3FN, {8, 40}), input(DataType::kFloat8E4M3FN, {48, 40}),
           input(DataType::kFloat32, {}), input(DataType::kFloat32, {})},
          "ingot::QuantGemm {output_dtype=10}");
  refuses(quant_gemm_family(), 17,
          {input(DataType::kFloat8E4M3FN, {8, 64}), input(DataType::kFloat8E4M3FN, {20, 64}),
           input(DataType::kFloat32, {}), input(DataType::kFloat32, {})},
          "ingot::QuantGemm {output_dtype=10}");
  // int8 with K % 4 != 0.
  refuses(quant_gemm_family(), 17,
          {input(DataType::kInt8, {8, 18}), input(DataType::kInt8, {48, 18}), input(DataType::kFloat32, {}),
           input(DataType::kFloat32, {48})},
          "ingot::QuantGemm {output_dtype=1}");
  // A w_scale that is neither one value nor [N]; a Clip without its bounds.
  refuses(quant_gemm_family(), 17,
          {input(DataType::kInt8, {8, 64}), input(DataType::kInt8, {48, 64}), input(DataType::kFloat32, {}),
           input(DataType::kFloat32, {24})},
          "ingot::QuantGemm {output_dtype=1}");
  refuses(quant_gemm_family(), 17,
          {input(DataType::kInt8, {8, 64}), input(DataType::kInt8, {48, 64}), input(DataType::kFloat32, {}),
           input(DataType::kFloat32, {})},
          "ingot::QuantGemm {output_dtype=1, activation=\"Clip\"}");
  // uint8 X and W (op inference takes only int8/fp8, so the types are handed to the family as
  // a caller with stale types would).
  auto g = parse_graph(op_graph(17,
                                {input(DataType::kInt8, {8, 64}), input(DataType::kInt8, {48, 64}),
                                 input(DataType::kFloat32, {}), input(DataType::kFloat32, {})},
                                "ingot::QuantGemm {output_dtype=1}"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<ir::TensorType> types = input_types(node);
  EXPECT_FALSE(quant_gemm_family().candidates(node, types).empty());
  types[0].dtype = types[1].dtype = DataType::kUInt8;
  EXPECT_TRUE(quant_gemm_family().candidates(node, types).empty());
  // Other ops are not this family's.
  refuses(quant_gemm_family(), 17, {input(DataType::kFloat16, {8, 64}), input(DataType::kFloat16, {64, 48})},
          "MatMul");
}

TEST_F(CudaQuantGemmTest, NamesRoundTrip) {
  for (const char* name : {kInt8, kFp8}) {
    auto t = quant_gemm_family().create(name, {});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name(), name);
    auto again = quant_gemm_family().create(name, t->serialize());
    ASSERT_NE(again, nullptr) << name;
  }
  EXPECT_EQ(quant_gemm_family().create("cuda.quant_gemm.cublaslt_fp4", {}), nullptr);
  EXPECT_EQ(quant_gemm_family().create(kInt8, {99}), nullptr);
  for (const char* name : {kCutlassInt8, kCutlassInt8Pingpong})
    if (auto t = quant_gemm_family().create(name, {})) {  // built with CUTLASS
      EXPECT_EQ(t->name(), name);
      EXPECT_NE(quant_gemm_family().create(name, t->serialize()), nullptr);
    }
}

TEST_F(CudaQuantGemmTest, Int8EnqueueIsCapturable) {
  // Random int8 X, W and scales in [-50, 50): fp32 outputs of ~1e7, compared relatively.
  check_captured(quant_gemm_family(), 17,
                 {input(DataType::kInt8, {2, 7, 64}), input(DataType::kInt8, {48, 64}), input(DataType::kFloat32, {}),
                  input(DataType::kFloat32, {48}), input(DataType::kFloat32, {48})},
                 "ingot::QuantGemm {output_dtype=1, activation=\"Relu\"}", -50.0, 50.0);
}

}  // namespace
}  // namespace ingot::gpu_test
