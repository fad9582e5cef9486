// Copyright ingot authors. Apache-2.0.
//
// The small-channel (stem) convolution tactic against the CPU reference (cpu::run_node on the same
// inputs): channels-last, fp32/fp16/bf16, 1-4 input channels, 1x1 to 8x8 kernels with strides,
// dilation and padding, output widths that are and are not whole 4-pixel groups (both thread
// shapes: one pixel per thread at small sizes, four at batch sizes; rows of several tiles; tiles
// narrowed to fit shared memory), bias or none, a residual
// before and after the activation, and every FusedConv activation; what it refuses.
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::small_channel_conv_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kTactic = "cuda.conv.small_c";

std::string fused(const std::string& attrs) { return "ingot::FusedConv {channels_last=1, " + attrs + "}"; }

std::string pads(int p) {
  const std::string s = std::to_string(p);
  return "pads=[" + s + ", " + s + ", " + s + ", " + s + "]";
}

std::string strides(int s) { return "strides=[" + std::to_string(s) + ", " + std::to_string(s) + "]"; }

class CudaSmallChannelConvTest : public OpCaseTest {
 protected:
  // check() with conv_sum_tolerance over the kh·kw·C taps of W [K, kh, kw, C].
  void check_sc(const std::vector<Operand>& ins, const std::string& call) {
    const Shape64& w = ins.at(1).shape;
    const Tolerance tol = conv_sum_tolerance(ins[0].dtype, w[1] * w[2] * w[3]);
    check(small_channel_conv_family(), 17, ins, call, kTactic, 1, -3.0, 3.0, &tol);
  }
};

TEST_F(CudaSmallChannelConvTest, EveryActivation) {
  for (DataType t : kFloatTypes)
    for (const char* act : kConvActivations)
      check_sc({input(t, {2, 17, 15, 3}), input(t, {16, 3, 3, 3}), input(t, {16})},
               fused(std::string(act) + pads(1) + ", " + strides(2)));
}

TEST_F(CudaSmallChannelConvTest, ChannelsKernelsStridesResidual) {
  for (DataType t : kFloatTypes) {
    // 1, 2 and 4 input channels; ResNet's 7x7 stride-2 stem (K 64); ConvNeXt's 4x4 stride-4
    // patchify (K 96); an 8x8 kernel; a dilated 3x3; a 1x1; no bias.
    check_sc({input(t, {2, 9, 10, 1}), input(t, {8, 3, 3, 1}), input(t, {8})}, fused(pads(1)));
    check_sc({input(t, {1, 12, 7, 2}), input(t, {24, 5, 5, 2}), input(t, {24})}, fused(pads(2) + ", " + strides(2)));
    check_sc({input(t, {2, 11, 13, 4}), input(t, {16, 3, 3, 4}), input(t, {16})}, fused(pads(1)));
    check_sc({input(t, {2, 23, 21, 3}), input(t, {64, 7, 7, 3}), input(t, {64})},
             fused("activation=\"Relu\", " + pads(3) + ", " + strides(2)));
    check_sc({input(t, {1, 16, 20, 3}), input(t, {96, 4, 4, 3}), input(t, {96})}, fused(strides(4)));
    check_sc({input(t, {1, 19, 17, 3}), input(t, {8, 8, 8, 3}), input(t, {8})}, fused(pads(3)));
    check_sc({input(t, {1, 13, 13, 3}), input(t, {16, 3, 3, 3}), input(t, {16})},
             fused("dilations=[2, 2], " + pads(2)));
    check_sc({input(t, {2, 5, 6, 3}), input(t, {8, 1, 1, 3})}, fused("activation=\"Relu\""));
    // A residual added before and after a HardSwish.
    for (int before : {1, 0})
      check_sc({input(t, {2, 9, 7, 3}), input(t, {32, 3, 3, 3}), input(t, {32}), input(t, {2, 9, 7, 32})},
               fused("activation=\"HardSwish\", " + pads(1) + ", residual_before_activation=" + std::to_string(before)));
  }
  // Rows wider than one tile (256 pixels): 600 at stride 1, and an 8x8 kernel with K 64 over 4
  // channels, whose weights leave room for only a 128-pixel tile in shared memory.
  check_sc({input(DataType::kFloat16, {1, 3, 600, 3}), input(DataType::kFloat16, {16, 3, 3, 3}),
            input(DataType::kFloat16, {16})},
           fused(pads(1)));
  check_sc({input(DataType::kFloat32, {1, 12, 300, 4}), input(DataType::kFloat32, {64, 8, 8, 4}),
            input(DataType::kFloat32, {64})},
           fused("activation=\"Relu\", " + pads(3)));
  // Enough pixels for four per thread: an output width of 115 (not a whole number of 4-pixel
  // groups) at batch 8 in fp16, and MobileNetV2's batch-16 stem with its ReLU6.
  check_sc({input(DataType::kFloat16, {8, 230, 230, 3}), input(DataType::kFloat16, {64, 3, 3, 3}),
            input(DataType::kFloat16, {64})},
           fused("activation=\"Relu\", " + pads(1) + ", " + strides(2)));
  check_sc({input(DataType::kFloat16, {16, 224, 224, 3}), input(DataType::kFloat16, {32, 3, 3, 3}),
            input(DataType::kFloat16, {32})},
           fused("activation=\"Clip\", activation_params=[0.0, 6.0], " + pads(1) + ", " + strides(2)));
}

// What the family refuses: channels-first, grouped, 5 input channels, K not a multiple of 8, a
// kernel over 8x8, asymmetric pads.
TEST(CudaSmallChannelConvNoDevice, Refusals) {
  auto offered = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    return !small_channel_conv_family().candidates(node, input_types(node)).empty();
  };
  const DataType h = DataType::kFloat16;
  EXPECT_TRUE(offered({input(h, {1, 8, 8, 3}), input(h, {16, 3, 3, 3})}, fused(pads(1))));
  EXPECT_FALSE(offered({input(h, {1, 3, 8, 8}), input(h, {16, 3, 3, 3})}, "ingot::FusedConv {pads=[1, 1, 1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 3, 8, 8}), input(h, {16, 3, 3, 3})}, "Conv {pads=[1, 1, 1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 4}), input(h, {16, 3, 3, 2})}, fused("group=2, " + pads(1))));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 5}), input(h, {16, 3, 3, 5})}, fused(pads(1))));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 3}), input(h, {12, 3, 3, 3})}, fused(pads(1))));
  EXPECT_FALSE(offered({input(h, {1, 12, 12, 3}), input(h, {16, 9, 9, 3})}, fused(pads(4))));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 3}), input(h, {16, 3, 3, 3})}, fused("pads=[1, 1, 0, 0]")));
}

// Engines keep these bytes: {1, kh, kw, strides, pads, dilations, act, residual order (int32), c, k
// (int64), alpha, beta, lo, hi (float)}; a change of layout must bump the version.
TEST(CudaSmallChannelConvNoDevice, ParamsKeepTheirByteLayout) {
  ParamBytes p(1);
  for (int32_t v : {3, 3, 2, 2, 1, 1, 1, 1, 1, 0}) p.add(v);  // 3x3 stride 2 pad 1, act 1 = Relu
  p.add(int64_t{3}).add(int64_t{32});
  for (float v : {0.0f, 0.0f, 0.0f, 6.0f}) p.add(v);
  auto t = small_channel_conv_family().create(kTactic, p.b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->serialize(), p.b);
  std::vector<uint8_t> shorter(p.b.begin(), p.b.end() - 1), longer = p.b;
  longer.push_back(0);
  EXPECT_EQ(small_channel_conv_family().create(kTactic, shorter), nullptr);
  EXPECT_EQ(small_channel_conv_family().create(kTactic, longer), nullptr);
  std::vector<uint8_t> other = p.b;
  other[0] = 7;
  EXPECT_EQ(small_channel_conv_family().create(kTactic, other), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
