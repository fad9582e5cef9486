// Copyright ingot authors. Apache-2.0.
//
// The one-pixel 1x1 convolution tactic against the CPU reference (cpu::run_node on the same
// inputs): channels-last and channels-first FusedConv and plain Conv, fp32/fp16/bf16,
// EfficientNet's squeeze-excite shapes, input channel counts that fill 16-byte packs and that do
// not (the one-element loads), every group width (4 to 32 lanes), batches of 1 and of several
// sample blocks (2, 5, 64: not all whole blocks of 4), bias or none, a residual before and after
// the activation, every FusedConv activation, a batch left open in the graph, the output on the
// residual's storage; what it refuses; its time beside cuDNN's at EfficientNet's shapes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "builder/autotune.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::pixel_conv_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kTactic = "cuda.conv.pixel";

// `attrs`: attributes to put before the layout's, each followed by ", " (as kConvActivations).
std::string fused_nhwc(const std::string& attrs) { return "ingot::FusedConv {" + attrs + "channels_last=1}"; }
std::string fused_nchw(const std::string& attrs) { return "ingot::FusedConv {" + attrs + "strides=[1, 1]}"; }

// x [N, 1, 1, C] and w [K, 1, 1, C] (channels-last) or [N, C, 1, 1] and [K, C, 1, 1]; bias [K].
std::vector<Operand> pixel_operands(DataType t, int64_t n, int64_t c, int64_t k, bool channels_last, bool bias = true) {
  std::vector<Operand> ins = {input(t, channels_last ? Shape64{n, 1, 1, c} : Shape64{n, c, 1, 1}),
                              input(t, channels_last ? Shape64{k, 1, 1, c} : Shape64{k, c, 1, 1})};
  if (bias) ins.push_back(input(t, {k}));
  return ins;
}

class CudaPixelConvTest : public OpCaseTest {
 protected:
  // check() with conv_sum_tolerance over the C taps of W [K, C, 1, 1] or [K, 1, 1, C].
  void check_px(const std::vector<Operand>& ins, const std::string& call) {
    const Shape64& w = ins.at(1).shape;
    const Tolerance tol = conv_sum_tolerance(ins[0].dtype, w[1] * w[2] * w[3]);
    check(pixel_conv_family(), 17, ins, call, kTactic, 1, -3.0, 3.0, &tol);
  }
};

TEST_F(CudaPixelConvTest, EveryActivation) {
  for (DataType t : kFloatTypes)
    for (const char* act : kConvActivations) {
      check_px(pixel_operands(t, 2, 40, 24, true), fused_nhwc(act));
      check_px(pixel_operands(t, 1, 40, 24, false), fused_nchw(act));
    }
}

// EfficientNet-B3's squeeze-excite FCs (1152 -> 48 with Silu, 48 -> 1152 with Sigmoid) and
// MobileNet-sized ones (4 -> 96), at batch 1 and 5, both layouts and plain Conv.
TEST_F(CudaPixelConvTest, SqueezeExciteShapes) {
  for (DataType t : kFloatTypes)
    for (int64_t n : {1, 5}) {
      check_px(pixel_operands(t, n, 1152, 48, true), fused_nhwc("activation=\"Silu\", "));
      check_px(pixel_operands(t, n, 48, 1152, true), fused_nhwc("activation=\"Sigmoid\", "));
      check_px(pixel_operands(t, n, 4, 96, true), fused_nhwc(""));
      check_px(pixel_operands(t, n, 1152, 48, false), fused_nchw("activation=\"Silu\", "));
      check_px(pixel_operands(t, n, 48, 1152, false), fused_nchw("activation=\"Sigmoid\", "));
      check_px(pixel_operands(t, n, 4, 96, false), "Conv {strides=[1, 1]}");
      check_px(pixel_operands(t, n, 1152, 48, false), "Conv {strides=[1, 1]}");
    }
}

// Batches of several sample blocks (2, 5 and 64: 4 per block, the last one partial), C that is
// not whole packs (20 in fp16/bf16, 6, 3: one element per load), every group width (C from 3 to
// 1280 spans 4 to 32 lanes), no bias, strides and dilations (which a 1x1 kernel on one pixel
// ignores).
TEST_F(CudaPixelConvTest, BatchesChannelsAndBias) {
  for (DataType t : kFloatTypes) {
    for (int64_t n : {2, 5, 64}) {
      check_px(pixel_operands(t, n, 96, 40, true), fused_nhwc("activation=\"Relu\", "));
      check_px(pixel_operands(t, n, 200, 30, false), "Conv {strides=[1, 1]}");
    }
    for (int64_t c : {20, 6, 3})
      for (int64_t n : {1, 5}) {
        check_px(pixel_operands(t, n, c, 16, true), fused_nhwc("activation=\"HardSwish\", "));
        check_px(pixel_operands(t, n, c, 9, false), "Conv {strides=[1, 1]}");
      }
    for (int64_t c : {8, 64, 128, 256, 1280}) check_px(pixel_operands(t, 3, c, 12, true), fused_nhwc(""));
    check_px(pixel_operands(t, 2, 32, 16, true, false), fused_nhwc("activation=\"Sigmoid\", "));
    check_px(pixel_operands(t, 1, 32, 16, false, false), "Conv {strides=[1, 1]}");
    check_px(pixel_operands(t, 2, 32, 16, false), "Conv {strides=[2, 2], dilations=[3, 3]}");
  }
}

// A residual added before and after the activation, both layouts.
TEST_F(CudaPixelConvTest, Residual) {
  for (DataType t : kFloatTypes)
    for (int before : {1, 0})
      for (int64_t n : {1, 5}) {
        const std::string a = "activation=\"HardSwish\", residual_before_activation=" + std::to_string(before) + ", ";
        std::vector<Operand> nhwc = pixel_operands(t, n, 64, 24, true);
        nhwc.push_back(input(t, {n, 1, 1, 24}));
        check_px(nhwc, fused_nhwc(a));
        std::vector<Operand> nchw = pixel_operands(t, n, 20, 24, false, false);
        nchw.push_back(omitted());
        nchw.push_back(input(t, {n, 24, 1, 1}));
        check_px(nchw, fused_nchw(a));
      }
}

// One tactic for a graph whose batch is open, run at several batch sizes (read from X at enqueue).
TEST_F(CudaPixelConvTest, OpenBatch) {
  auto g = parse_graph(R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %x: f16[batch,1,1,48]
    input %w: f16[1152,1,1,48]
    input %b: f16[1152]
    %y = ingot::FusedConv {channels_last=1, activation="Sigmoid"}(%x, %w, %b) @n
    output %y
  })");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = pixel_conv_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  for (int64_t n : {1, 7, 2, 64}) {
    std::vector<Tensor> in = {random_tensor(DataType::kFloat16, {n, 1, 1, 48}, rng_),
                              random_tensor(DataType::kFloat16, {1152, 1, 1, 48}, rng_),
                              random_tensor(DataType::kFloat16, {1152}, rng_)};
    auto got = run_tactic(*cands[0], node, in, {{n, 1, 1, 1152}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run_reference(node, in);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_TRUE(all_close((*got)[0], (*want)[0], conv_sum_tolerance(DataType::kFloat16, 48))) << "batch " << n;
  }
}

// The planner may place the output on the residual's storage: each element's residual is read by
// the lane that then writes it.
TEST_F(CudaPixelConvTest, OutputAliasesResidual) {
  const DataType h = DataType::kFloat16;
  const std::vector<Operand> ins = {input(h, {5, 1, 1, 64}), input(h, {40, 1, 1, 64}), input(h, {40}),
                                    input(h, {5, 1, 1, 40})};
  auto g = parse_graph(op_graph(17, ins, fused_nhwc("activation=\"Relu\", residual_before_activation=0, "), 1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = pixel_conv_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  std::vector<Tensor> host;
  for (const Operand& o : ins) host.push_back(random_tensor(o.dtype, o.shape, rng_));
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  std::vector<Tensor> dev;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : host) {
    auto d = upload(t);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    dev.push_back(*d);
  }
  for (const Tensor& t : dev) ptrs.push_back(&t);
  std::vector<Tensor> outs = {dev[3]};
  backend::StepIO io;
  io.node = &node;
  io.inputs = ptrs;
  io.outputs = &outs;
  io.in_place = true;
  Status st = cands[0]->enqueue(io);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(all_close(*got, (*want)[0], conv_sum_tolerance(h, 64)));
}

// Not a pass/fail check: the device time (as the autotuner counts it) of every candidate the cuda
// backend offers for EfficientNet-B3's squeeze-excite FCs, fp16, both layouts, batch 1 and 64, so
// the GPU log shows what this tactic saves over cuDNN's. It must be among those the autotuner
// times.
TEST_F(CudaPixelConvTest, TimesSqueezeExciteShapes) {
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  auto be = backend::find_backend("cuda");
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  const DataType h = DataType::kFloat16;
  const int width = builder::candidates_for_level(builder::TuneOptions{}.optimization_level);
  struct Fc {
    int64_t c, k;
    const char* act;
  };
  for (const Fc& fc : {Fc{1152, 48, "activation=\"Silu\", "}, Fc{48, 1152, "activation=\"Sigmoid\", "},
                       Fc{96, 4, "activation=\"Silu\", "}, Fc{4, 96, "activation=\"Sigmoid\", "}})
    for (bool channels_last : {true, false})
      for (int64_t n : {1, 64}) {
        const std::vector<Operand> ins = pixel_operands(h, n, fc.c, fc.k, channels_last);
        auto g = parse_graph(op_graph(17, ins, channels_last ? fused_nhwc(fc.act) : fused_nchw(fc.act), 1));
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        const ir::Node& node = *(*g)->nodes()[0];
        auto cands = (*be)->candidates(node, input_types(node));
        const std::vector<size_t> timed = builder::considered_candidates(cands, static_cast<size_t>(width));
        bool ours_timed = false;
        for (size_t i : timed) ours_timed |= cands[i]->name() == kTactic;
        EXPECT_TRUE(ours_timed) << "n " << n << " c " << fc.c << " k " << fc.k;
        std::vector<Tensor> dev_in;
        std::vector<Shape64> shapes;
        for (const Operand& o : ins) {
          auto d = upload(random_tensor(o.dtype, o.shape, rng_));
          ASSERT_TRUE(d.ok()) << d.status().to_string();
          dev_in.push_back(*d);
          shapes.push_back(o.shape);
        }
        std::vector<const Tensor*> ptrs;
        for (const Tensor& t : dev_in) ptrs.push_back(&t);
        auto y = device_alloc(h, node.output(0)->shape().concrete());
        ASSERT_TRUE(y.ok());
        std::vector<Tensor> outs = {*y};
        for (size_t i : timed) {
          backend::Tactic& t = *cands[i];
          if (t.is_host_fallback() || !t.prepare(node).ok()) continue;
          DeviceBuffer ws(std::max<uint64_t>(t.workspace_bytes(node, shapes), 1));
          std::vector<backend::StepIO> ios(1);
          ios[0].node = &node;
          ios[0].inputs = ptrs;
          ios[0].outputs = &outs;
          ios[0].workspace = ws.get();
          auto ms = (*be)->time_enqueue(t, ios, 10, 50, backend::TimingMode::kDevice);
          if (!ms.ok()) continue;
          std::printf("[timing] %s n %3lld c %4lld k %4lld %-36s %7.2f us\n", channels_last ? "nhwc" : "nchw",
                      static_cast<long long>(n), static_cast<long long>(fc.c), static_cast<long long>(fc.k),
                      t.name().c_str(), *ms * 1000.0);
        }
      }
}

// What the family refuses: a 3x3 kernel, an input of more than one pixel, a grouped conv, pads, a
// transposed conv, auto_pad, mixed types.
TEST(CudaPixelConvNoDevice, Refusals) {
  auto offered = [](const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(17, ins, call, 1));
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return false;
    const ir::Node& node = *(*g)->nodes()[0];
    return !pixel_conv_family().candidates(node, input_types(node)).empty();
  };
  const DataType h = DataType::kFloat16;
  EXPECT_TRUE(offered({input(h, {1, 1, 1, 64}), input(h, {16, 1, 1, 64})}, fused_nhwc("")));
  EXPECT_TRUE(offered({input(h, {1, 64, 1, 1}), input(h, {16, 64, 1, 1})}, fused_nchw("")));
  EXPECT_TRUE(offered({input(h, {1, 64, 1, 1}), input(h, {16, 64, 1, 1})}, "Conv {strides=[1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 3, 3, 64}), input(h, {16, 3, 3, 64})}, fused_nhwc("")));
  EXPECT_FALSE(offered({input(h, {1, 64, 3, 3}), input(h, {16, 64, 3, 3})}, "Conv {strides=[1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 2, 2, 64}), input(h, {16, 1, 1, 64})}, fused_nhwc("")));
  EXPECT_FALSE(offered({input(h, {1, 64, 2, 2}), input(h, {16, 64, 1, 1})}, "Conv {strides=[1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 1, 1, 64}), input(h, {16, 1, 1, 32})}, fused_nhwc("group=2, ")));
  EXPECT_FALSE(offered({input(h, {1, 64, 1, 1}), input(h, {16, 32, 1, 1})}, "Conv {group=2}"));
  EXPECT_FALSE(offered({input(h, {1, 1, 1, 64}), input(h, {16, 1, 1, 64})}, fused_nhwc("pads=[1, 1, 1, 1], ")));
  EXPECT_FALSE(offered({input(h, {1, 64, 1, 1}), input(h, {16, 64, 1, 1})}, "Conv {pads=[1, 1, 1, 1]}"));
  EXPECT_FALSE(offered({input(h, {1, 64, 1, 1}), input(h, {64, 16, 1, 1})}, fused_nchw("transposed=1, ")));
  EXPECT_FALSE(offered({input(h, {1, 64, 1, 1}), input(h, {16, 64, 1, 1})}, "Conv {auto_pad=\"SAME_UPPER\"}"));
  EXPECT_FALSE(offered({input(h, {1, 64, 1, 1}), input(DataType::kFloat32, {16, 64, 1, 1})}, "Conv {strides=[1, 1]}"));
}

// Engines keep these bytes: {1, act, residual order (int32), c, k (int64), alpha, beta, lo, hi
// (float)}; a change of layout must bump the version.
TEST(CudaPixelConvNoDevice, ParamsKeepTheirByteLayout) {
  ParamBytes p(1);
  for (int32_t v : {1, 1}) p.add(v);  // act 1 = Relu, residual after it
  p.add(int64_t{1152}).add(int64_t{48});
  for (float v : {0.0f, 0.0f, 0.0f, 6.0f}) p.add(v);
  auto t = pixel_conv_family().create(kTactic, p.b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->serialize(), p.b);
  std::vector<uint8_t> shorter(p.b.begin(), p.b.end() - 1), longer = p.b;
  longer.push_back(0);
  EXPECT_EQ(pixel_conv_family().create(kTactic, shorter), nullptr);
  EXPECT_EQ(pixel_conv_family().create(kTactic, longer), nullptr);
  std::vector<uint8_t> other = p.b;
  other[0] = 7;
  EXPECT_EQ(pixel_conv_family().create(kTactic, other), nullptr);
  EXPECT_EQ(pixel_conv_family().create("cuda.conv.small_c", p.b), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
