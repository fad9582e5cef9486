// Copyright ingot authors. Apache-2.0.
//
// The depthwise convolution tactic against the CPU reference (cpu::run_node on the same inputs):
// channels-last and channels-first, fp32/fp16/bf16, 3x3 to 7x7, strides, dilation, channel counts
// that do and do not fill 16-byte packs, bias, residual before and after the activation, and every
// FusedConv activation in the epilogue; what it refuses (not depthwise, a channel multiplier, a
// kernel over 7x7, asymmetric pads).
#include <cstring>
#include <string>
#include <vector>

#include "backend/tactic.h"
#include "builder/autotune.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::depthwise_conv_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kTactic = "cuda.conv.depthwise";
constexpr const char* kStrip = "cuda.conv.depthwise.strip";
constexpr const char* kTiled = "cuda.conv.depthwise.tiled";
const std::vector<std::string> kEvery = {kTactic, kTiled, kStrip};

std::string fused(const std::string& attrs) { return "ingot::FusedConv {" + attrs + "}"; }

class CudaDepthwiseConvTest : public OpCaseTest {
 protected:
  // check() with conv_sum_tolerance (seen: f32 7x7 4.9e-6, f16 3x3 1.2e-3 on the H200).
  void check_dw(const std::vector<Operand>& ins, const std::string& call) {
    const Shape64& w = ins.at(1).shape;  // [C, k, k, 1] channels-last, [C, 1, k, k] channels-first
    const Tolerance tol = conv_sum_tolerance(ins[0].dtype, w[1] * w[2] * w[3]);
    // Every variant the family offers (the one-pixel kernel always; the tiled and strip kernels
    // for channels-last 3x3/5x5/7x7 with equal strides 1 or 2 and no dilation).
    const std::vector<std::string> names = candidate_names(depthwise_conv_family(), 17, ins, call);
    ASSERT_FALSE(names.empty()) << call;
    EXPECT_EQ(names[0], kTactic);
    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      check(depthwise_conv_family(), 17, ins, call, name, 1, -3.0, 3.0, &tol);
    }
  }
};

TEST_F(CudaDepthwiseConvTest, ChannelsLastEveryActivation) {
  for (DataType t : kFloatTypes)
    for (const char* act : kConvActivations)
      for (int stride : {1, 2}) {
        const std::string a = std::string(act) + "channels_last=1, group=16, pads=[1, 1, 1, 1], strides=[" +
                              std::to_string(stride) + ", " + std::to_string(stride) + "]";
        check_dw({input(t, {2, 9, 11, 16}), input(t, {16, 3, 3, 1}), input(t, {16})}, fused(a));
      }
}

TEST_F(CudaDepthwiseConvTest, ChannelsLastResidualAndShapes) {
  for (DataType t : kFloatTypes) {
    // Residual before and after a HardSwish (MobileNet adds it after the block's last conv, but
    // the epilogue takes both orders).
    for (int before : {1, 0})
      check_dw(
          {input(t, {2, 7, 5, 24}), input(t, {24, 3, 3, 1}), input(t, {24}), input(t, {2, 7, 5, 24})},
          fused("activation=\"HardSwish\", channels_last=1, group=24, pads=[1, 1, 1, 1], residual_before_activation=" +
                std::to_string(before)));
    // 12 channels: not a whole 16-byte pack in fp16 (the one-element path); no bias.
    check_dw({input(t, {1, 8, 8, 12}), input(t, {12, 3, 3, 1})}, fused("channels_last=1, group=12, pads=[1, 1, 1, 1]"));
    // EfficientNet's 5x5 stride 2, ConvNeXt's 7x7, a dilated 3x3, a 1x1 depthwise.
    check_dw({input(t, {2, 15, 13, 40}), input(t, {40, 5, 5, 1}), input(t, {40})},
             fused("activation=\"Silu\", channels_last=1, group=40, pads=[2, 2, 2, 2], strides=[2, 2]"));
    check_dw({input(t, {1, 14, 14, 96}), input(t, {96, 7, 7, 1}), input(t, {96})},
             fused("channels_last=1, group=96, pads=[3, 3, 3, 3]"));
    check_dw({input(t, {1, 9, 9, 32}), input(t, {32, 3, 3, 1}), input(t, {32})},
             fused("channels_last=1, dilations=[2, 2], group=32, pads=[2, 2, 2, 2]"));
    check_dw({input(t, {2, 4, 4, 8}), input(t, {8, 1, 1, 1}), input(t, {8})}, fused("channels_last=1, group=8"));
    // More channels than one block's tile (32 packs): EfficientNet's last stage (1152 = 4.5
    // fp16 tiles), a tile of 2 packs after two whole ones (264 f32), and 300 channels that are no
    // whole number of fp16 packs (one channel per thread, 32-channel tiles) with a residual.
    check_dw({input(t, {1, 7, 7, 1152}), input(t, {1152, 5, 5, 1}), input(t, {1152})},
             fused("activation=\"Silu\", channels_last=1, group=1152, pads=[2, 2, 2, 2]"));
    check_dw({input(t, {2, 5, 6, 264}), input(t, {264, 3, 3, 1}), input(t, {264})},
             fused("activation=\"Relu\", channels_last=1, group=264, pads=[1, 1, 1, 1], strides=[2, 2]"));
    check_dw({input(t, {1, 4, 5, 300}), input(t, {300, 3, 3, 1}), input(t, {300}), input(t, {1, 4, 5, 300})},
             fused("activation=\"HardSwish\", channels_last=1, group=300, pads=[1, 1, 1, 1]"));
  }
  // Channel counts that take 4- and 8-byte packs (ShuffleNet's 58 and 116 in fp16; 8 bytes in
  // f32), with every unrolled kernel size and a residual; 13 channels with a 7x7 (one element per
  // thread, unrolled taps); a dilated 5x5 at the border.
  for (DataType t : kFloatTypes) {
    for (int64_t c : {58, 116})
      for (int k : {3, 5, 7}) {
        const std::string ks = std::to_string(k), pad = std::to_string(k / 2);
        check_dw({input(t, {2, 9, 7, c}), input(t, {c, k, k, 1}), input(t, {c}), input(t, {2, 5, 4, c})},
                 fused("activation=\"Relu\", channels_last=1, group=" + std::to_string(c) + ", pads=[" + pad + ", " +
                       pad + ", " + pad + ", " + pad + "], strides=[2, 2]"));
      }
    check_dw({input(t, {1, 10, 9, 13}), input(t, {13, 7, 7, 1}), input(t, {13})},
             fused("channels_last=1, group=13, pads=[3, 3, 3, 3]"));
    check_dw({input(t, {2, 6, 11, 20}), input(t, {20, 5, 5, 1})},
             fused("channels_last=1, dilations=[2, 2], group=20, pads=[4, 4, 4, 4]"));
  }
  // ShuffleNetV2's b64 depthwise at full size (fp16, 58 channels: 4-byte packs).
  check_dw({input(DataType::kFloat16, {64, 28, 28, 58}), input(DataType::kFloat16, {58, 3, 3, 1}),
            input(DataType::kFloat16, {58})},
           fused("channels_last=1, group=58, pads=[1, 1, 1, 1]"));
  // MobileNetV3-L's b64 stride-2 depthwise at full size (fp16).
  check_dw({input(DataType::kFloat16, {64, 56, 56, 72}), input(DataType::kFloat16, {72, 5, 5, 1}),
            input(DataType::kFloat16, {72})},
           fused("activation=\"Relu\", channels_last=1, group=72, pads=[2, 2, 2, 2], strides=[2, 2]"));
}

// The strip kernel (4 outputs along x per thread, 4-byte channel packs): output widths that are
// and are not a whole number of strips (the tail strip's missing outputs are not written),
// stride 2 with an odd input width, every kernel size, pads smaller than k/2, a residual, each pack
// width (f32: one channel), and more packs than one tile (72 fp16 channels: 36 packs, two tiles
// of 18), a C that allows no 4-byte pack in fp16 (odd: the one-pixel kernel runs instead).
TEST_F(CudaDepthwiseConvTest, StripKernelEdges) {
  for (DataType t : kFloatTypes)
    for (int k : {3, 5, 7})
      for (int stride : {1, 2})
        for (int64_t wdt : {4, 7, 13})
          for (int64_t c : {16, 24, 58, 72, 7}) {
            const int pad = stride == 1 ? k / 2 : (k - 1) / 2 - (wdt % 2);
            const int64_t oh = (9 + 2 * pad - k) / stride + 1, ow = (wdt + 2 * pad - k) / stride + 1;
            if (oh < 1 || ow < 1) continue;
            const std::string ps = std::to_string(pad), ss = std::to_string(stride);
            const std::string call = fused("activation=\"Relu\", channels_last=1, group=" + std::to_string(c) +
                                           ", pads=[" + ps + ", " + ps + ", " + ps + ", " + ps + "], strides=[" + ss +
                                           ", " + ss + "]");
            const std::vector<Operand> ins = {input(t, {2, 9, wdt, c}), input(t, {c, k, k, 1}), input(t, {c}),
                                              input(t, {2, oh, ow, c})};
            EXPECT_EQ(candidate_names(depthwise_conv_family(), 17, ins, call), kEvery);
            check_dw(ins, call);
          }
}

// The tiled kernel (8 x 16 output tiles, 16 channel words a block): layers of several tiles in
// both dims with partial tiles at the right and bottom, pads smaller than k/2 and none, more than
// one channel tile with a partial last one (72 fp16 channels: 16-byte loads, 36 words = 16 + 16
// + 4; 58: 4-byte loads, 29 words = 16 + 13; f32 40: 16 + 16 + 8), a residual after the
// activation, and an odd C in fp16 (no 4-byte word: the one-pixel kernel runs instead).
TEST_F(CudaDepthwiseConvTest, TiledKernelTiles) {
  for (DataType t : kFloatTypes)
    for (int k : {3, 5, 7})
      for (int stride : {1, 2})
        for (int pad : {k / 2, 0})
          for (int64_t c : {72, 58, 40, 7}) {
            const int64_t h = 21, wdt = 37;
            const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wdt + 2 * pad - k) / stride + 1;
            const std::string ps = std::to_string(pad), ss = std::to_string(stride);
            const std::string call =
                fused("activation=\"HardSwish\", channels_last=1, group=" + std::to_string(c) + ", pads=[" + ps + ", " +
                      ps + ", " + ps + ", " + ps + "], residual_before_activation=0, strides=[" + ss + ", " + ss + "]");
            const std::vector<Operand> ins = {input(t, {2, h, wdt, c}), input(t, {c, k, k, 1}), input(t, {c}),
                                              input(t, {2, oh, ow, c})};
            EXPECT_EQ(candidate_names(depthwise_conv_family(), 17, ins, call), kEvery);
            check_dw(ins, call);
          }
  // MobileNetV2's b64 first depthwise layer at full size (fp16, 32 channels: one channel tile).
  check_dw({input(DataType::kFloat16, {64, 112, 112, 32}), input(DataType::kFloat16, {32, 3, 3, 1}),
            input(DataType::kFloat16, {32})},
           fused("activation=\"Clip\", activation_params=[0.0, 6.0], channels_last=1, group=32, pads=[1, 1, 1, 1]"));
}

// Which nodes get the tiled and strip variants: not a dilated, channels-first, 1x1 or stride-3 one.
TEST(CudaDepthwiseConvNoDevice, StripVariantOnlyWhereItRuns) {
  auto names = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok());
    std::vector<std::string> out;
    if (!g.ok()) return out;
    const ir::Node& node = *(*g)->nodes()[0];
    for (const auto& c : depthwise_conv_family().candidates(node, input_types(node))) out.push_back(c->name());
    return out;
  };
  const DataType h = DataType::kFloat16;
  const std::vector<std::string> both = kEvery, plain = {kTactic};
  EXPECT_EQ(names({input(h, {1, 8, 8, 16}), input(h, {16, 5, 5, 1})}, fused("channels_last=1, group=16, pads=[2, 2, 2, 2]")),
            both);
  EXPECT_EQ(names({input(h, {1, 9, 9, 16}), input(h, {16, 3, 3, 1})},
                  fused("channels_last=1, dilations=[2, 2], group=16, pads=[2, 2, 2, 2]")),
            plain);
  EXPECT_EQ(names({input(h, {1, 16, 8, 8}), input(h, {16, 1, 3, 3})}, "Conv {group=16, pads=[1, 1, 1, 1]}"), plain);
  EXPECT_EQ(names({input(h, {1, 8, 8, 16}), input(h, {16, 1, 1, 1})}, fused("channels_last=1, group=16")), plain);
  EXPECT_EQ(names({input(h, {1, 9, 9, 16}), input(h, {16, 3, 3, 1})},
                  fused("channels_last=1, group=16, pads=[1, 1, 1, 1], strides=[3, 3]")),
            plain);
  EXPECT_EQ(names({input(h, {1, 9, 9, 16}), input(h, {16, 3, 3, 1})},
                  fused("channels_last=1, group=16, pads=[1, 1, 1, 1], strides=[1, 2]")),
            plain);
}

// On the cuda backend, a channels-last depthwise node's candidates put cuDNN's among the first the
// autotuner times at the default level: ConvNeXt's 7x7 depthwise in cuDNN beat ours (session 15),
// and when three strip variants filled the width, cuDNN was never timed for channels-last.
TEST_F(CudaDepthwiseConvTest, CudnnStaysInsideTheAutotunersWidth) {
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  const int width = builder::candidates_for_level(builder::TuneOptions{}.optimization_level);
  const DataType h = DataType::kFloat16;
  auto g = parse_graph(op_graph(17, {input(h, {8, 28, 28, 192}), input(h, {192, 7, 7, 1}), input(h, {192})},
                                fused("channels_last=1, group=192, pads=[3, 3, 3, 3]"), 1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto be = backend::find_backend("cuda");
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  auto cands = (*be)->candidates(node, input_types(node));
  std::string names;
  int first_cudnn = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    names += " " + cands[i]->name();
    if (first_cudnn < 0 && cands[i]->name().rfind("cuda.cudnn.", 0) == 0) first_cudnn = static_cast<int>(i);
  }
#if defined(INGOT_WITH_CUDNN)
  ASSERT_GE(first_cudnn, 0) << "no cuDNN candidate among" << names;
  EXPECT_LT(first_cudnn, width) << "cuDNN lies outside the autotuner's width " << width << ":" << names;
#endif
  EXPECT_EQ(cands.at(0)->name(), kTactic) << names;
}

TEST_F(CudaDepthwiseConvTest, ChannelsFirst) {
  for (DataType t : kFloatTypes) {
    check_dw({input(t, {2, 16, 9, 11}), input(t, {16, 1, 3, 3}), input(t, {16})},
             "Conv {group=16, pads=[1, 1, 1, 1], strides=[2, 2]}");
    check_dw({input(t, {2, 12, 7, 6}), input(t, {12, 1, 5, 5}), input(t, {12}), input(t, {2, 12, 7, 6})},
             fused("activation=\"HardSwish\", group=12, pads=[2, 2, 2, 2]"));
  }
}

TEST_F(CudaDepthwiseConvTest, RefusesWhatIsNotDepthwise) {
  const DataType h = DataType::kFloat16;
  // An ordinary conv (group 1), a channel multiplier (32 filters over 16 groups), a 9x9 kernel,
  // asymmetric pads, a transposed conv.
  refuses(depthwise_conv_family(), 17, {input(h, {1, 8, 8, 16}), input(h, {16, 3, 3, 16})},
          fused("channels_last=1, pads=[1, 1, 1, 1]"));
  refuses(depthwise_conv_family(), 17, {input(h, {1, 16, 8, 8}), input(h, {32, 1, 3, 3})}, "Conv {group=16}");
  refuses(depthwise_conv_family(), 17, {input(h, {1, 16, 12, 12}), input(h, {16, 1, 9, 9})}, "Conv {group=16}");
  refuses(depthwise_conv_family(), 17, {input(h, {1, 16, 8, 8}), input(h, {16, 1, 3, 3})},
          "Conv {group=16, pads=[0, 0, 1, 1]}");
  refuses(depthwise_conv_family(), 17, {input(h, {1, 16, 8, 8}), input(h, {16, 1, 3, 3})},
          fused("group=16, transposed=1"));
}

// An engine's tactic is rebuilt from its name and params alone; other bytes are refused.
// Engines keep these bytes: {3, channels_last, kh, kw, strides, pads, dilations, act, residual
// order, strip, tiled (int32), group (int64), alpha, beta, lo, hi (float)}. A change of layout must bump
// the version; engines written before it then fail to load naming the tactic, never misread.
TEST(CudaDepthwiseConvNoDevice, ParamsKeepTheirByteLayout) {
  ParamBytes p(3);
  for (int32_t v : {1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 1, 0}) p.add(v);  // act 1 = Relu, strip 1, not tiled
  p.add(int64_t{96});
  for (float v : {0.0f, 0.0f, 0.0f, 6.0f}) p.add(v);
  auto t = depthwise_conv_family().create(kTactic, p.b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->serialize(), p.b);
  std::vector<uint8_t> shorter(p.b.begin(), p.b.end() - 1), longer = p.b;
  longer.push_back(0);
  EXPECT_EQ(depthwise_conv_family().create(kTactic, shorter), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTactic, longer), nullptr);
}

TEST(CudaDepthwiseConvNoDevice, ParamsRoundTripAndForeignParamsAreRefused) {
  auto g =
      parse_graph(op_graph(17, {input(DataType::kFloat16, {1, 8, 8, 16}), input(DataType::kFloat16, {16, 3, 3, 1})},
                           fused("activation=\"HardSigmoid\", activation_params=[0.25, 0.5], channels_last=1, "
                                 "group=16, pads=[1, 1, 1, 1], strides=[2, 2]")));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = depthwise_conv_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 3u);  // plain, tiled, strip
  for (const auto& c : cands) {
    auto again = depthwise_conv_family().create(c->name(), c->serialize());
    ASSERT_NE(again, nullptr) << c->name();
    EXPECT_EQ(again->name(), c->name());
    EXPECT_EQ(again->serialize(), c->serialize());
    EXPECT_TRUE(again->supports(node, input_types(node)));
  }
  EXPECT_EQ(depthwise_conv_family().create(kTactic, {}), nullptr);
  std::vector<uint8_t> bad = cands[0]->serialize();
  bad[0] = 99;
  EXPECT_EQ(depthwise_conv_family().create(kTactic, bad), nullptr);
  EXPECT_EQ(depthwise_conv_family().create("cuda.conv.other", cands[0]->serialize()), nullptr);
  // A name that does not match the params' variant.
  EXPECT_EQ(depthwise_conv_family().create(kStrip, cands[0]->serialize()), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTiled, cands[0]->serialize()), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTactic, cands[1]->serialize()), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kStrip, cands[1]->serialize()), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTactic, cands[2]->serialize()), nullptr);
  // A strip width the kernel does not have; a tiled flag other than 0 and 1; tiled and strip together.
  auto with_i32 = [](std::vector<uint8_t> b, int field, int32_t v) {
    std::memcpy(b.data() + 1 + field * sizeof(int32_t), &v, sizeof v);
    return b;
  };
  EXPECT_EQ(depthwise_conv_family().create(kStrip, with_i32(cands[2]->serialize(), 11, 3)), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTiled, with_i32(cands[1]->serialize(), 12, 2)), nullptr);
  EXPECT_EQ(depthwise_conv_family().create(kTiled, with_i32(cands[1]->serialize(), 11, 4)), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
