// Copyright ingot authors. Apache-2.0.
//
// The cuda normalization family against the CPU reference (cpu::run_node on the same host
// inputs): RMSNormalization (opset 23 and ingot's form) over one or several trailing axes, and
// GroupNormalization with per-group (opset 18) and per-channel (opset 21) scale/bias and
// InstanceNormalization, in
// f32/f16/bf16 on odd sizes and rows longer than a block (RMSNormalization through the LayerNorm
// row kernels' RMS mode: warp-per-row and block-per-row); ingot::LayerNormQuantize (the norm and
// its int8 / float8e4m3fn copy). Also which nodes the family refuses.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::norm_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

class CudaNormTest : public OpCaseTest {};

TEST_F(CudaNormTest, RmsNormalization) {
  struct Case {
    Shape64 x, scale;
    int64_t axis;
  };
  const Case cases[] = {{{2, 7, 768}, {768}, -1}, {{3, 5, 6}, {5, 6}, 1}, {{4, 1027}, {1, 1027}, -1},
                        {{2, 3, 1, 9}, {9}, 2},   {{5, 33}, {33}, 1},
                        // The warp-per-row kernel (Llama's 512 over many rows, its widest 2048 fp16
                        // rows) and the block kernel past it (4096).
                        {{96, 512}, {512}, -1},   {{8, 2048}, {2048}, -1}, {{3, 4096}, {4096}, -1}};
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      const std::string attrs = " {axis=" + std::to_string(c.axis) + ", epsilon=0.001}";
      check(norm_family(), 23, {input(t, c.x), input(t, c.scale)}, "RMSNormalization" + attrs, "cuda.norm.rmsnorm");
      check(norm_family(), 17, {input(t, c.x), input(t, c.scale)}, "ingot::RMSNormalization" + attrs,
            "cuda.norm.rmsnorm");
    }
  }
}

TEST_F(CudaNormTest, GroupNormalization) {
  struct Case {
    Shape64 x;
    int64_t groups;
  };
  const Case cases[] = {{{2, 64, 9, 9}, 32}, {{1, 6, 5}, 3}, {{3, 4, 2, 3, 5}, 2}, {{2, 8, 70, 70}, 4}, {{2, 5, 7}, 5}};
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      const std::string call = "GroupNormalization {epsilon=0.0001, num_groups=" + std::to_string(c.groups) + "}";
      check(norm_family(), 21, {input(t, c.x), input(t, {c.x[1]}), input(t, {c.x[1]})}, call, "cuda.norm.groupnorm");
      check(norm_family(), 18, {input(t, c.x), input(t, {c.groups}), input(t, {c.groups})}, call,
            "cuda.norm.groupnorm");
    }
  }
}

TEST_F(CudaNormTest, InstanceNormalization) {
  const Shape64 cases[] = {{2, 64, 9, 9}, {1, 6, 5}, {3, 4, 2, 3, 5}, {2, 8, 70, 70}, {2, 3, 1, 1}};
  for (DataType t : kFloatTypes)
    for (const Shape64& x : cases)
      check(norm_family(), 17, {input(t, x), input(t, {x[1]}), input(t, {x[1]})},
            "InstanceNormalization {epsilon=0.0001}", "cuda.norm.instancenorm");
}

// ingot::LayerNormQuantize: Y against the reference within the float type's tolerance; Yq exactly
// QuantizeLinear (the CPU reference op) of the Y this kernel stored, and within one quantization
// step of the reference's Yq (a Y one ulp apart may round across a step). Rows through the
// warp-per-row kernel (768, 512) and the block-per-row one (1027, 30, 4096 fp16), LayerNorm with and
// without B, RMSNorm, Y kept and not stored, an inner axis, a scale of f32 and of X's type, and a
// scale small enough that some values saturate.
TEST_F(CudaNormTest, LayerNormQuantize) {
  unsetenv("INGOT_NORM_QUANTIZE");  // offered unless the switch is 0
  struct Case {
    Shape64 x;
    int64_t axis;
    bool bias, rms, keep_y;
  };
  const Case cases[] = {{{4, 7, 768}, -1, true, false, true},  {{64, 384}, -1, false, false, false},
                        {{3, 1027}, -1, true, false, true},    {{2, 5, 6}, 1, true, false, true},
                        {{96, 512}, -1, false, true, false},   {{3, 4096}, -1, true, false, true},
                        {{5, 2048}, -1, false, true, true}};
  for (DataType t : kFloatTypes) {
    for (DataType qt : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
      for (const Case& c : cases) {
        for (DataType st : {DataType::kFloat32, t}) {
          const bool int8 = qt == DataType::kInt8;
          // Y spans about [-4, 4] (unit variance, gamma and B in [-1.5, 1.5)): an int8 step of
          // 0.025 saturates past 3.2, an fp8 scale of 0.01 stays inside 448.
          const double scale = int8 ? 0.025 : 0.01;
          Shape64 p(c.x.begin() + (c.axis < 0 ? static_cast<int64_t>(c.x.size()) + c.axis : c.axis), c.x.end());
          std::vector<Tensor> data{random_tensor(t, c.x, rng_, -3.0, 3.0), random_tensor(t, p, rng_, -1.5, 1.5),
                                   c.bias ? random_tensor(t, p, rng_, -1.5, 1.5) : Tensor(),
                                   Tensor::zeros(st, Shape64{}).value(), Tensor::zeros(qt, Shape64{}).value()};
          data[3].set_f64(0, scale);
          const std::string ty = std::string(data_type_name(t)), ps = ty + dims_text(p);
          std::string text = "graph main {\n  opset \"\" 21\n  opset \"ingot\" 1\n  input %x: " + ty +
                             dims_text(c.x) + "\n  input %g: " + ps + "\n";
          if (c.bias) text += "  input %b: " + ps + "\n";
          text += "  init %s: " + std::string(data_type_name(st)) + "[] = [" + std::to_string(scale) + "]\n";
          text += "  init %z: " + std::string(data_type_name(qt)) + "[] = [0]\n";
          text += std::string("  ") + (c.keep_y ? "%y" : "_") + ", %q = ingot::LayerNormQuantize {axis=" +
                  std::to_string(c.axis) + ", epsilon=0.001, rms=" + (c.rms ? "1" : "0") + "}(%x, %g, " +
                  (c.bias ? "%b" : "_") + ", %s, %z) @n0\n";
          if (c.keep_y) text += "  output %y\n";
          text += "  output %q\n}\n";
          SCOPED_TRACE(text);
          auto g = parse_graph(text);
          ASSERT_TRUE(g.ok()) << g.status().to_string();
          const ir::Node& node = *(*g)->nodes()[0];
          auto cands = norm_family().candidates(node, input_types(node));
          ASSERT_EQ(cands.size(), 1u) << "family refused the node";
          auto rebuilt = norm_family().create(cands[0]->name(), cands[0]->serialize());
          ASSERT_NE(rebuilt, nullptr);
          EXPECT_EQ(rebuilt->name(), "cuda.norm.layernorm_quantize");
          auto ref = run_reference(node, data);
          ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
          if (!no_device_.empty()) GTEST_SKIP() << no_device_;
          auto got = run_tactic_captured(*rebuilt, node, data);
          ASSERT_TRUE(got.ok()) << "tactic: " << got.status().to_string();
          ASSERT_EQ(got->size(), 2u);
          if (c.keep_y) EXPECT_TRUE(all_close((*got)[0], (*ref)[0])) << "Y";
          else EXPECT_FALSE((*got)[0].defined());
          // Within one step of the reference (fp8: one e4m3 step is at most 1/8 of the value).
          const Tolerance step = int8 ? Tolerance{0, 1} : Tolerance{0.125, 0.002};
          EXPECT_TRUE(all_close((*got)[1], (*ref)[1], step)) << "Yq against the reference";
          if (!c.keep_y) continue;
          // Exactly QuantizeLinear of the stored Y.
          auto qg = parse_graph("graph main {\n  opset \"\" 21\n  input %y: " + ty + dims_text(c.x) +
                                "\n  init %s: " + std::string(data_type_name(st)) + "[] = [" +
                                std::to_string(scale) + "]\n  init %z: " + std::string(data_type_name(qt)) +
                                "[] = [0]\n  %q = QuantizeLinear(%y, %s, %z) @n0\n  output %q\n}\n");
          ASSERT_TRUE(qg.ok()) << qg.status().to_string();
          auto want = run_reference(*(*qg)->nodes()[0], {(*got)[0], data[3], data[4]});
          ASSERT_TRUE(want.ok()) << want.status().to_string();
          EXPECT_TRUE(all_close((*got)[1], (*want)[0], Tolerance{0, 0})) << "Yq is not QuantizeLinear(Y as stored)";
        }
      }
    }
  }
}

TEST_F(CudaNormTest, RefusesWhatItDoesNotHandle) {
  // A scale broadcast inside the normalized dims, stash_type other than fp32, mixed types.
  refuses(norm_family(), 23, {input(DataType::kFloat32, {2, 3, 4}), input(DataType::kFloat32, {1, 4})},
          "RMSNormalization {axis=1}");
  refuses(norm_family(), 23, {input(DataType::kFloat16, {2, 4}), input(DataType::kFloat16, {4})},
          "RMSNormalization {stash_type=10}");
  refuses(norm_family(), 21,
          {input(DataType::kFloat16, {2, 4, 3}), input(DataType::kFloat32, {4}), input(DataType::kFloat32, {4})},
          "GroupNormalization {num_groups=2}");
  // LayerNormQuantize: a zero point that is not 0, a scale per channel, uint8.
  const auto lnq = [](const char* scale, const char* zp) {
    return std::string("graph main {\n  opset \"\" 21\n  opset \"ingot\" 1\n  input %x: float16[2,8]\n"
                       "  input %g: float16[8]\n  init %s: ") + scale + "\n  init %z: " + zp +
           "\n  %y, %q = ingot::LayerNormQuantize {axis=-1}(%x, %g, _, %s, %z) @n0\n  output %y\n  output %q\n}\n";
  };
  unsetenv("INGOT_NORM_QUANTIZE");  // refused for the node, not by the switch
  for (const auto& [scale, zp] : {std::pair{"float32[] = [0.5]", "int8[] = [3]"},
                                   std::pair{"float32[8] = [1, 1, 1, 1, 1, 1, 1, 1]", "int8[] = [0]"},
                                   std::pair{"float32[] = [0.5]", "uint8[] = [0]"}}) {
    auto g = parse_graph(lnq(scale, zp));
    if (!g.ok()) continue;  // the op's inference refuses it already: nothing reaches the tactic
    const ir::Node& node = *(*g)->nodes()[0];
    EXPECT_TRUE(norm_family().candidates(node, input_types(node)).empty()) << scale << " " << zp;
  }
}

}  // namespace
}  // namespace ingot::gpu_test
