// Copyright ingot authors. Apache-2.0.
//
// The grouped convolution tactics (cuda.conv.grouped, 8 output channels per thread, and
// cuda.conv.grouped.m4, 4) against the CPU reference (cpu::run_node on the same inputs):
// channels-last FusedConv, fp32/fp16/bf16, RegNetY-1.6GF's grouped 3x3 layers (group width 24) at
// batch 1 and 4-8, ResNeXt-like widths 4 and 8, widths that take 4-byte or no packs (6; 3 over 9
// channels), a 5x5 and a 7x7, strides, bias or none, a residual before and after the activation,
// and every FusedConv activation; what the family refuses (depthwise, channels-first, unequal group
// widths in and out, widths over 64, dilation), and the params round trip.
#include <cstring>
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::grouped_conv_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kTactic = "cuda.conv.grouped";
constexpr const char* kNarrow = "cuda.conv.grouped.m4";

std::string fused(const std::string& attrs) { return "ingot::FusedConv {channels_last=1, " + attrs + "}"; }

std::string pads(int p) {
  const std::string s = std::to_string(p);
  return "pads=[" + s + ", " + s + ", " + s + ", " + s + "]";
}

std::string strides(int s) { return "strides=[" + std::to_string(s) + ", " + std::to_string(s) + "]"; }

std::string group(int64_t g) { return "group=" + std::to_string(g); }

// X [n, h, w, c], W [c, k, k, c / groups], bias [c] (when `bias`), and a residual of the output's
// shape (when `residual`) for a k x k conv with pads k / 2 and `stride`.
std::vector<Operand> layer(DataType t, int64_t n, int64_t h, int64_t w, int64_t c, int64_t groups, int k, int stride,
                           bool bias = true, bool residual = false) {
  std::vector<Operand> ins = {input(t, {n, h, w, c}), input(t, {c, k, k, c / groups})};
  if (bias || residual) ins.push_back(bias ? input(t, {c}) : omitted());
  if (residual) {
    const int64_t pad = k / 2;
    ins.push_back(input(t, {n, (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1, c}));
  }
  return ins;
}

std::string conv(int64_t groups, int k, int stride, const std::string& more = "") {
  return fused(more + group(groups) + ", " + pads(k / 2) + ", " + strides(stride));
}

class CudaGroupedConvTest : public OpCaseTest {
 protected:
  // Every variant the family offers for the node, with conv_sum_tolerance over the kh·kw·g taps
  // of W [C, kh, kw, g].
  void check_grouped(const std::vector<Operand>& ins, const std::string& call) {
    const Shape64& w = ins.at(1).shape;
    const Tolerance tol = conv_sum_tolerance(ins[0].dtype, w[1] * w[2] * w[3]);
    const std::vector<std::string> names = candidate_names(grouped_conv_family(), 17, ins, call);
    ASSERT_FALSE(names.empty()) << call;
    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      check(grouped_conv_family(), 17, ins, call, name, 1, -3.0, 3.0, &tol);
    }
  }
};

// RegNetY-1.6GF's grouped 3x3s (width 24): 48 channels at 56x56, 120 at stride 2 from 56x56, 336
// at 14x14, 888 at 7x7, each at batch 1 and a batch of 4-8, with its ReLU.
TEST_F(CudaGroupedConvTest, RegNetLayers) {
  const std::string relu = "activation=\"Relu\", ";
  for (DataType t : kFloatTypes) {
    check_grouped(layer(t, 1, 56, 56, 48, 2, 3, 1), conv(2, 3, 1, relu));
    check_grouped(layer(t, 1, 56, 56, 120, 5, 3, 2), conv(5, 3, 2, relu));
    check_grouped(layer(t, 1, 14, 14, 336, 14, 3, 1), conv(14, 3, 1, relu));
    check_grouped(layer(t, 1, 7, 7, 888, 37, 3, 1), conv(37, 3, 1, relu));
  }
  const DataType h = DataType::kFloat16;
  check_grouped(layer(h, 8, 56, 56, 48, 2, 3, 1), conv(2, 3, 1, relu));
  check_grouped(layer(h, 4, 56, 56, 120, 5, 3, 2), conv(5, 3, 2, relu));
  check_grouped(layer(h, 8, 28, 28, 120, 5, 3, 1), conv(5, 3, 1, relu));
  check_grouped(layer(h, 8, 14, 14, 336, 14, 3, 1), conv(14, 3, 1, relu));
  check_grouped(layer(h, 6, 7, 7, 888, 37, 3, 1), conv(37, 3, 1, relu));
  check_grouped(layer(DataType::kBFloat16, 4, 14, 14, 336, 14, 3, 2), conv(14, 3, 2, relu));
  check_grouped(layer(DataType::kFloat32, 4, 7, 7, 888, 37, 3, 1), conv(37, 3, 1, relu));
}

TEST_F(CudaGroupedConvTest, EveryActivation) {
  for (DataType t : kFloatTypes)
    for (const char* act : kConvActivations)
      for (int stride : {1, 2}) check_grouped(layer(t, 2, 9, 11, 48, 2, 3, stride), conv(2, 3, stride, act));
}

TEST_F(CudaGroupedConvTest, ResidualBeforeAndAfterTheActivation) {
  for (DataType t : kFloatTypes)
    for (int before : {1, 0})
      for (int stride : {1, 2}) {
        const std::string more =
            "activation=\"HardSwish\", residual_before_activation=" + std::to_string(before) + ", ";
        check_grouped(layer(t, 2, 9, 7, 72, 3, 3, stride, true, true), conv(3, 3, stride, more));
        // No bias, a width (6) that takes no 16-byte pack, Silu.
        check_grouped(
            layer(t, 2, 8, 8, 36, 6, 3, stride, false, true),
            conv(6, 3, stride, "activation=\"Silu\", residual_before_activation=" + std::to_string(before) + ", "));
      }
}

// Widths and kernels: ResNeXt-like widths 4 and 8 (many groups), 16, 32 and 64; odd widths where
// no pack applies (3 over 9 channels, 5, 6 (4-byte packs in fp16), 12 (8-byte in fp16)), 2;
// 5x5 and 7x7 kernels, a 1x1, non-square kernels and strides, pads smaller than k / 2, output
// widths that are not a whole number of 4-pixel strips; no bias.
TEST_F(CudaGroupedConvTest, WidthsKernelsAndStrides) {
  for (DataType t : kFloatTypes) {
    check_grouped(layer(t, 2, 12, 12, 128, 32, 3, 1), conv(32, 3, 1));                           // width 4
    check_grouped(layer(t, 2, 10, 10, 256, 32, 3, 2), conv(32, 3, 2, "activation=\"Relu\", "));  // width 8
    check_grouped(layer(t, 1, 9, 9, 64, 4, 3, 1), conv(4, 3, 1));                                // 16
    check_grouped(layer(t, 1, 8, 9, 96, 3, 3, 1), conv(3, 3, 1));                                // 32
    check_grouped(layer(t, 1, 7, 7, 128, 2, 3, 1), conv(2, 3, 1));                               // 64
    check_grouped(layer(t, 2, 7, 6, 9, 3, 3, 1), conv(3, 3, 1));                                 // 3 over 9
    check_grouped(layer(t, 1, 6, 7, 15, 3, 3, 2), conv(3, 3, 2));                                // 5
    check_grouped(layer(t, 2, 8, 9, 24, 4, 3, 1), conv(4, 3, 1));                                // 6
    check_grouped(layer(t, 2, 8, 9, 36, 3, 3, 1), conv(3, 3, 1));                                // 12
    check_grouped(layer(t, 2, 5, 8, 8, 4, 3, 1), conv(4, 3, 1));                                 // 2
    check_grouped(layer(t, 2, 11, 13, 48, 2, 5, 1), conv(2, 5, 1, "activation=\"Silu\", "));
    check_grouped(layer(t, 1, 15, 13, 96, 4, 5, 2), conv(4, 5, 2));
    check_grouped(layer(t, 1, 9, 10, 64, 2, 7, 1), conv(2, 7, 1));  // width 32, 7x7
    check_grouped(layer(t, 2, 6, 5, 48, 2, 1, 1, false), conv(2, 1, 1));
    check_grouped(layer(t, 1, 9, 11, 24, 3, 3, 1, false), fused(group(3) + ", pads=[0, 0, 0, 0], strides=[1, 3]"));
    check_grouped({input(t, {2, 8, 10, 32}), input(t, {32, 3, 5, 8}), input(t, {32})},
                  fused(group(4) + ", pads=[1, 2, 1, 2], strides=[2, 1]"));
  }
  // 7x7 over a width of 64 (98 KB of staged weights in one 8-channel tile: above the default
  // 48 KB of shared memory), and one of 64 at 3x3 split over several tiles.
  check_grouped(layer(DataType::kFloat16, 2, 9, 9, 128, 2, 7, 1), conv(2, 7, 1));
  check_grouped(layer(DataType::kFloat32, 4, 16, 16, 192, 3, 3, 1), conv(3, 3, 1, "activation=\"Relu\", "));
}

// Which variants a node gets: both over a width of 4, only the narrow one at 4 or less.
TEST(CudaGroupedConvNoDevice, VariantsByWidth) {
  auto names = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    std::vector<std::string> out;
    if (!g.ok()) return out;
    const ir::Node& node = *(*g)->nodes()[0];
    for (const auto& c : grouped_conv_family().candidates(node, input_types(node))) out.push_back(c->name());
    return out;
  };
  const DataType h = DataType::kFloat16;
  const std::vector<std::string> both = {kTactic, kNarrow}, narrow = {kNarrow};
  EXPECT_EQ(names(layer(h, 1, 56, 56, 48, 2, 3, 1), conv(2, 3, 1)), both);
  EXPECT_EQ(names(layer(h, 1, 8, 8, 30, 5, 3, 1), conv(5, 3, 1)), both);
  EXPECT_EQ(names(layer(h, 1, 8, 8, 128, 32, 3, 1), conv(32, 3, 1)), narrow);
  EXPECT_EQ(names(layer(h, 1, 8, 8, 9, 3, 3, 1), conv(3, 3, 1)), narrow);
}

// What the family refuses: depthwise (one channel per group), group 1, channels-first (plain Conv
// and FusedConv channels_last = 0), unequal group widths in and out (a channel multiplier), a
// width over 64, dilation 2, a 9x9 kernel, asymmetric pads.
TEST(CudaGroupedConvNoDevice, Refusals) {
  auto offered = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    return !grouped_conv_family().candidates(node, input_types(node)).empty();
  };
  const DataType h = DataType::kFloat16;
  EXPECT_TRUE(offered(layer(h, 1, 8, 8, 48, 2, 3, 1), conv(2, 3, 1)));
  EXPECT_FALSE(offered(layer(h, 1, 8, 8, 48, 48, 3, 1), conv(48, 3, 1)));  // depthwise
  EXPECT_FALSE(offered(layer(h, 1, 8, 8, 16, 1, 3, 1), fused(pads(1))));   // group 1
  EXPECT_FALSE(offered({input(h, {1, 48, 8, 8}), input(h, {48, 24, 3, 3}), input(h, {48})},
                       "Conv {group=2, pads=[1, 1, 1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 48, 8, 8}), input(h, {48, 24, 3, 3}), input(h, {48})},
                       "ingot::FusedConv {group=2, pads=[1, 1, 1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 48}), input(h, {96, 3, 3, 24}), input(h, {96})}, conv(2, 3, 1)));
  EXPECT_FALSE(offered({input(h, {1, 8, 8, 48}), input(h, {24, 3, 3, 24}), input(h, {24})}, conv(2, 3, 1)));
  EXPECT_FALSE(offered(layer(h, 1, 8, 8, 256, 2, 3, 1), conv(2, 3, 1)));  // width 128
  EXPECT_TRUE(offered(layer(h, 1, 8, 8, 128, 2, 3, 1), conv(2, 3, 1)));   // width 64
  EXPECT_FALSE(offered(layer(h, 1, 9, 9, 48, 2, 3, 1), fused("dilations=[2, 2], group=2, pads=[2, 2, 2, 2]")));
  EXPECT_FALSE(offered(layer(h, 1, 12, 12, 48, 2, 9, 1), conv(2, 9, 1)));
  EXPECT_FALSE(offered(layer(h, 1, 8, 8, 48, 2, 3, 1), fused("group=2, pads=[0, 0, 1, 1]")));
}

// An engine's tactic is rebuilt from its name and params alone; other bytes are refused.
TEST(CudaGroupedConvNoDevice, ParamsRoundTripAndForeignParamsAreRefused) {
  auto g = parse_graph(op_graph(17, layer(DataType::kFloat16, 1, 8, 8, 48, 2, 3, 2, true, true),
                                conv(2, 3, 2,
                                     "activation=\"HardSigmoid\", activation_params=[0.25, 0.5], "
                                     "residual_before_activation=0, ")));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = grouped_conv_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(cands[0]->name(), kTactic);
  EXPECT_EQ(cands[1]->name(), kNarrow);
  for (const auto& c : cands) {
    auto again = grouped_conv_family().create(c->name(), c->serialize());
    ASSERT_NE(again, nullptr) << c->name();
    EXPECT_EQ(again->name(), c->name());
    EXPECT_EQ(again->serialize(), c->serialize());
    EXPECT_TRUE(again->supports(node, input_types(node)));
  }
  EXPECT_NE(cands[0]->serialize(), cands[1]->serialize());
  EXPECT_EQ(grouped_conv_family().create(kTactic, {}), nullptr);
  std::vector<uint8_t> bad = cands[0]->serialize();
  bad[0] = 99;
  EXPECT_EQ(grouped_conv_family().create(kTactic, bad), nullptr);
  EXPECT_EQ(grouped_conv_family().create("cuda.conv.other", cands[0]->serialize()), nullptr);
  // A name that does not match the params' variant, and an outputs-per-thread the kernel lacks.
  EXPECT_EQ(grouped_conv_family().create(kNarrow, cands[0]->serialize()), nullptr);
  EXPECT_EQ(grouped_conv_family().create(kTactic, cands[1]->serialize()), nullptr);
  std::vector<uint8_t> odd = cands[0]->serialize();
  const int32_t six = 6;
  std::memcpy(odd.data() + 1 + 8 * sizeof(int32_t), &six, sizeof six);
  EXPECT_EQ(grouped_conv_family().create(kTactic, odd), nullptr);
  // A tactic of one node does not claim another (other strides).
  auto other = parse_graph(op_graph(17, layer(DataType::kFloat16, 1, 8, 8, 48, 2, 3, 1), conv(2, 3, 1)));
  ASSERT_TRUE(other.ok());
  const ir::Node& o = *(*other)->nodes()[0];
  EXPECT_FALSE(cands[0]->supports(o, input_types(o)));
}

}  // namespace
}  // namespace ingot::gpu_test
