// Copyright ingot authors. Apache-2.0.
//
// The stem conv + max pool tactic (ingot::FusedConvPool, "cuda.conv.stem_pool") and its pool-less
// twin on FusedConv ("cuda.conv.stem_mma") against the CPU reference (cpu::run_node on the same
// random inputs): fp16 and bf16; ResNet's stem at 224x224
// (whole 8x8 tiles) and at sizes whose last tiles are partial in both directions; with and without
// the conv's and the pool's padding, ceil_mode, bias or none, every FusedConv activation (the pool
// must see values below zero where there is no ReLU, and -inf past the conv output, not 0); in a
// CUDA graph; what it refuses; the engine bytes.
#include <cstdlib>
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::stem_pool_conv_family;

constexpr const char* kTactic = "cuda.conv.stem_pool";

// ResNet's stem attributes, `extra` first (an activation, other pads, ceil_mode).
std::string stem(const std::string& extra, int conv_pad = 3, int pool_pad = 1) {
  const std::string cp = std::to_string(conv_pad), pp = std::to_string(pool_pad);
  return "ingot::FusedConvPool {channels_last=1, " + extra + "pads=[" + cp + ", " + cp + ", " + cp + ", " + cp +
         "], strides=[2, 2], pool_kernel_shape=[3, 3], pool_strides=[2, 2], pool_pads=[" + pp + ", " + pp + ", " +
         pp + ", " + pp + "]}";
}

// The family offers its tactics unless INGOT_STEM_MMA=0; the tests clear a switch left in the environment.
struct StemMmaOffered {
  StemMmaOffered() { unsetenv("INGOT_STEM_MMA"); }
};

class CudaStemPoolConvTest : public OpCaseTest {
 protected:
  StemMmaOffered offered_;
  void check_stem(DataType t, Shape64 x, const std::string& call, bool bias = true) {
    std::vector<Operand> ins = {input(t, x), input(t, {64, 7, 7, 3})};
    if (bias) ins.push_back(input(t, {64}));
    const Tolerance tol = conv_sum_tolerance(t, 7 * 7 * 3);
    check(stem_pool_conv_family(), 17, ins, call, kTactic, 1, -3.0, 3.0, &tol);
  }
};

TEST_F(CudaStemPoolConvTest, ResNetStem) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    check_stem(t, {1, 224, 224, 3}, stem("activation=\"Relu\", "));
    check_stem(t, {2, 64, 48, 3}, stem("activation=\"Relu\", "), /*bias=*/false);
  }
}

TEST_F(CudaStemPoolConvTest, PartialTilesPadsAndCeilMode) {
  const DataType h = DataType::kFloat16;
  // 37x45 -> conv 19x23 -> pool 10x12: the last tile row and column are partial.
  check_stem(h, {2, 37, 45, 3}, stem("activation=\"Relu\", "));
  // No conv padding (a 7x7 window needs 7 rows: 21 -> 8 -> 4), no pool padding.
  check_stem(h, {3, 21, 29, 3}, stem("activation=\"Relu\", ", 0, 0));
  // ceil_mode: 32 -> conv 16 -> pool 9 (floor 8), the last window partly past the conv output; and
  // without the pool's padding, 32x28 -> conv 16x14 -> pool 8x7 (floor 7x6).
  check_stem(h, {1, 32, 32, 3}, stem("activation=\"Relu\", pool_ceil_mode=1, "));
  check_stem(h, {1, 32, 28, 3}, stem("pool_ceil_mode=1, ", 3, 0));
  // One conv pixel, one pooled pixel.
  check_stem(h, {1, 7, 7, 3}, stem("activation=\"Relu\", ", 0, 1));
}

TEST_F(CudaStemPoolConvTest, EveryActivation) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16})
    for (const char* act : kConvActivations) check_stem(t, {1, 20, 18, 3}, stem(act));
}

// The 3x3 stride-2 forms: with the pool (ShuffleNetV2's K 24, SqueezeNet 1.1's K 64 with ceil_mode)
// and, as "cuda.conv.stem_mma" on a FusedConv, without it (K 16, 24, 32 at 16x16 tiles, partial
// ones included), both types, the mobile CNNs' activations.
TEST_F(CudaStemPoolConvTest, ThreeByThreeForms) {
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const Tolerance tol = conv_sum_tolerance(t, 3 * 3 * 3);
    auto pool3 = [](const std::string& extra) {
      return "ingot::FusedConvPool {channels_last=1, " + extra +
             "pads=[1, 1, 1, 1], strides=[2, 2], pool_kernel_shape=[3, 3], pool_strides=[2, 2], "
             "pool_pads=[1, 1, 1, 1]}";
    };
    check(stem_pool_conv_family(), 17, {input(t, {2, 50, 46, 3}), input(t, {24, 3, 3, 3}), input(t, {24})},
          pool3("activation=\"Relu\", "), kTactic, 1, -3.0, 3.0, &tol);
    check(stem_pool_conv_family(), 17, {input(t, {1, 45, 39, 3}), input(t, {64, 3, 3, 3}), input(t, {64})},
          "ingot::FusedConvPool {channels_last=1, activation=\"Relu\", strides=[2, 2], pool_kernel_shape=[3, 3], "
          "pool_strides=[2, 2], pool_ceil_mode=1}",
          kTactic, 1, -3.0, 3.0, &tol);
    const char* acts[] = {"activation=\"Clip\", activation_params=[0.0, 6.0], ", "activation=\"Silu\", ",
                          "activation=\"HardSwish\", ", ""};
    const int64_t ks[] = {32, 32, 16, 24};
    for (int i = 0; i < 4; ++i)
      check(stem_pool_conv_family(), 17,
            {input(t, {2, 67, 35, 3}), input(t, {ks[i], 3, 3, 3}), input(t, {ks[i]})},
            std::string("ingot::FusedConv {channels_last=1, ") + acts[i] + "pads=[1, 1, 1, 1], strides=[2, 2]}",
            "cuda.conv.stem_mma", 1, -3.0, 3.0, &tol);
    // MobileNetV2's stem at 224x224 (whole 16x16 tiles: 112 = 7 x 16), no bias.
    check(stem_pool_conv_family(), 17, {input(t, {1, 224, 224, 3}), input(t, {32, 3, 3, 3})},
          "ingot::FusedConv {channels_last=1, activation=\"Relu\", pads=[1, 1, 1, 1], strides=[2, 2]}",
          "cuda.conv.stem_mma", 1, -3.0, 3.0, &tol);
  }
}

TEST_F(CudaStemPoolConvTest, InACudaGraph) {
  check_captured(stem_pool_conv_family(), 17,
                 {input(DataType::kFloat16, {2, 40, 40, 3}), input(DataType::kFloat16, {64, 7, 7, 3}),
                  input(DataType::kFloat16, {64})},
                 stem("activation=\"Relu\", "));
}

// What the family refuses: channels-first, 4 input channels, 32 output channels, a 5x5 kernel, a
// 2x2 pool, stride 1, fp32, a grouped conv, asymmetric pool pads.
TEST(CudaStemPoolConvNoDevice, Refusals) {
  StemMmaOffered on;
  auto offered = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    return !stem_pool_conv_family().candidates(node, input_types(node)).empty();
  };
  const DataType h = DataType::kFloat16;
  const std::string ok = stem("activation=\"Relu\", ");
  EXPECT_TRUE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3}), input(h, {64})}, ok));
  EXPECT_TRUE(offered({input(DataType::kBFloat16, {1, 32, 32, 3}), input(DataType::kBFloat16, {64, 7, 7, 3})}, ok));
  auto first = [](std::string s) { return s.replace(s.find("channels_last=1"), 15, "channels_last=0"); };
  EXPECT_FALSE(offered({input(h, {1, 3, 32, 32}), input(h, {64, 3, 7, 7})}, first(ok)));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 4}), input(h, {64, 7, 7, 4})}, ok));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {32, 7, 7, 3})}, ok));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 5, 5, 3})}, stem("", 2)));
  EXPECT_FALSE(offered({input(DataType::kFloat32, {1, 32, 32, 3}), input(DataType::kFloat32, {64, 7, 7, 3})}, ok));
  std::string pool2 = ok;
  pool2.replace(pool2.find("pool_kernel_shape=[3, 3]"), 24, "pool_kernel_shape=[2, 2]");
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3})}, pool2));
  std::string stride1 = ok;
  stride1.replace(stride1.find("strides=[2, 2]"), 14, "strides=[1, 1]");
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3})}, stride1));
  // The FusedConv tactic: no residual, no 7x7 form without the pool, K 64 only with the pool.
  const std::string conv3 = "ingot::FusedConv {channels_last=1, pads=[1, 1, 1, 1], strides=[2, 2]}";
  EXPECT_TRUE(offered({input(h, {1, 32, 32, 3}), input(h, {32, 3, 3, 3})}, conv3));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {32, 3, 3, 3}), omitted(), input(h, {1, 16, 16, 32})}, conv3));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 3, 3, 3})}, conv3));
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3})},
                       "ingot::FusedConv {channels_last=1, pads=[3, 3, 3, 3], strides=[2, 2]}"));
  std::string asym = ok;
  {
    setenv("INGOT_STEM_MMA", "0", 1);  // the switch takes the family out
    EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3}), input(h, {64})}, ok));
    unsetenv("INGOT_STEM_MMA");
    EXPECT_TRUE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3}), input(h, {64})}, ok));
  }
  asym.replace(asym.find("pool_pads=[1, 1, 1, 1]"), 22, "pool_pads=[1, 1, 0, 0]");
  EXPECT_FALSE(offered({input(h, {1, 32, 32, 3}), input(h, {64, 7, 7, 3})}, asym));
}

// Engines keep these bytes: {1, kh, kw, strides, pads, pool kh, kw, strides, pads, act (int32), c,
// k (int64), alpha, beta, lo, hi (float)}; a change of layout must bump the version.
TEST(CudaStemPoolConvNoDevice, ParamsKeepTheirByteLayout) {
  ParamBytes p(1);
  for (int32_t v : {7, 7, 2, 2, 3, 3, 3, 3, 2, 2, 1, 1, 1}) p.add(v);  // act 1 = Relu
  p.add(int64_t{3}).add(int64_t{64});
  for (float v : {0.0f, 0.0f, 0.0f, 0.0f}) p.add(v);
  auto t = stem_pool_conv_family().create(kTactic, p.b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->serialize(), p.b);
  std::vector<uint8_t> shorter(p.b.begin(), p.b.end() - 1), longer = p.b;
  longer.push_back(0);
  EXPECT_EQ(stem_pool_conv_family().create(kTactic, shorter), nullptr);
  EXPECT_EQ(stem_pool_conv_family().create(kTactic, longer), nullptr);
  std::vector<uint8_t> other = p.b;
  other[0] = 7;
  EXPECT_EQ(stem_pool_conv_family().create(kTactic, other), nullptr);
  // A form the kernel was not compiled for (K 32) is not created either.
  ParamBytes k32(1);
  for (int32_t v : {7, 7, 2, 2, 3, 3, 3, 3, 2, 2, 1, 1, 1}) k32.add(v);
  k32.add(int64_t{3}).add(int64_t{32});
  for (float v : {0.0f, 0.0f, 0.0f, 0.0f}) k32.add(v);
  EXPECT_EQ(stem_pool_conv_family().create(kTactic, k32.b), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
