// Copyright ingot authors. Apache-2.0.
//
// "cuda.cublaslt.conv.<i>": a channels-last ingot::FusedConv with a 1x1 kernel, stride 1, no padding
// and one group, run as one cuBLASLt GEMM (X [N, H, W, C] as A [N·H·W, C], W [K, 1, 1, C] as B
// stored [N, K]), against the CPU reference on random shapes (odd pixel counts, channel counts that
// are and are not multiples of 8), with bias, Relu, the residual before Relu, a Clip run after the
// GEMM, in fp16 and bf16, and captured into a CUDA graph. supports() decisions and name/param round
// trips need no device.
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using Input = std::optional<Shape64>;  // nullopt: an omitted optional input

constexpr const char* kName = "cuda.cublaslt.conv.0";

// A channels-last FusedConv with `attrs` besides.
std::string graph_text(const std::string& attrs, DataType dt, const std::vector<Input>& ins) {
  return one_node_graph("ingot::FusedConv", "channels_last=1" + (attrs.empty() ? "" : ", " + attrs), dt, ins);
}

std::unique_ptr<backend::Tactic> conv_tactic(const std::string& name = kName) {
  return backend::cuda::cublaslt_conv_family().create(name, {});
}

bool supported(const std::string& attrs, DataType dt, const std::vector<Input>& ins) {
  const std::string text = graph_text(attrs, dt, ins);
  auto g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << text;
  if (!g.ok()) return false;
  const ir::Node& node = *(*g)->nodes()[0];
  const bool ok = conv_tactic()->supports(node, input_types(node));
  // The plain GEMM family never takes a convolution, whatever its shape.
  EXPECT_FALSE(backend::cuda::cublaslt_family().create("cuda.cublaslt.0", {})->supports(node, input_types(node)));
  EXPECT_TRUE(backend::cuda::cublaslt_family().candidates(node, input_types(node)).empty());
  return ok;
}

// ---- no device needed ----------------------------------------------------------------------

TEST(CublasLtConvNoDevice, SupportsDecisions) {
  const auto f16 = DataType::kFloat16;
  const Shape64 x{2, 7, 9, 16}, w{24, 1, 1, 16}, b{24}, y{2, 7, 9, 24};
  EXPECT_TRUE(supported("", f16, {x, w}));
  EXPECT_TRUE(supported("", DataType::kBFloat16, {x, w, b}));
  EXPECT_TRUE(supported("", DataType::kFloat32, {x, w, b}));  // supported, though never offered (conv_candidates)
  EXPECT_TRUE(supported("activation=\"Relu\"", f16, {x, w, b, y}));
  EXPECT_TRUE(supported("activation=\"Relu\"", f16, {x, w, std::nullopt, y}));
  EXPECT_TRUE(supported("activation=\"Clip\", activation_params=[0.0, 6.0]", f16, {x, w, b}));
  EXPECT_TRUE(supported("activation=\"Silu\"", f16, {x, w, b}));
  EXPECT_TRUE(supported("strides=[1, 1], pads=[0, 0, 0, 0], dilations=[2, 2], kernel_shape=[1, 1]", f16, {x, w, b}));
  EXPECT_TRUE(supported("auto_pad=\"VALID\"", f16, {x, w, b}));
  EXPECT_TRUE(supported("", f16, {Shape64{3, 11, 16}, Shape64{24, 1, 16}, b}));  // 1-D: [N, L, C]
  // Not one GEMM: a wider kernel, a stride, padding, groups, channels first (below); a residual
  // after Relu (cuBLASLt adds C before its epilogue); a bias that is not [K].
  EXPECT_FALSE(supported("", f16, {x, Shape64{24, 3, 3, 16}, b}));
  EXPECT_FALSE(supported("strides=[2, 2]", f16, {x, w, b}));
  EXPECT_FALSE(supported("pads=[1, 1, 1, 1]", f16, {x, w, b}));
  EXPECT_FALSE(supported("auto_pad=\"SAME_UPPER\"", f16, {x, w, b}));
  EXPECT_FALSE(supported("group=2", f16, {x, Shape64{24, 1, 1, 8}, b}));
  EXPECT_FALSE(supported("activation=\"Relu\", residual_before_activation=0", f16, {x, w, b, y}));
  EXPECT_FALSE(supported("", f16, {x, w, Shape64{1, 24}}));
  EXPECT_FALSE(supported("", DataType::kFloat64, {x, w}));
  auto g = parse_graph(
      "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %x: f16[2,16,7,9]\n  input %w: f16[24,16,1,1]\n"
      "  %y = ingot::FusedConv(%x, %w) @n\n  output %y\n}\n");  // channels first
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& nchw = *(*g)->nodes()[0];
  EXPECT_FALSE(conv_tactic()->supports(nchw, input_types(nchw)));
  EXPECT_TRUE(backend::cuda::cublaslt_conv_family().candidates(nchw, input_types(nchw)).empty());
}

TEST(CublasLtConvNoDevice, NamesAndParamsRoundTrip) {
  auto conv = backend::cuda::cublaslt_conv_family();
  auto gemm = backend::cuda::cublaslt_family();
  for (int i = 0; i < 4; ++i) {
    const std::string name = "cuda.cublaslt.conv." + std::to_string(i);
    auto t = conv.create(name, {});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name(), name);
    auto again = conv.create(name, t->serialize());
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again->name(), name);
    EXPECT_EQ(gemm.create(name, {}), nullptr) << name << " is the conv family's";
  }
  EXPECT_EQ(conv.create("cuda.cublaslt.conv.4", {}), nullptr);
  EXPECT_EQ(conv.create("cuda.cublaslt.0", {}), nullptr);
  EXPECT_EQ(conv.create("cuda.cublaslt.conv.1", {1, 2, 0}), nullptr);  // params of another index
  EXPECT_EQ(conv.create("cuda.cublaslt.conv.1", {1, 1, 1}), nullptr);  // tf32 params
}

TEST(CublasLtConvNoDevice, OneCandidateForHalfPrecision) {
  const Shape64 x{2, 7, 9, 16}, w{24, 1, 1, 16}, b{24};
  for (DataType dt : {DataType::kFloat16, DataType::kFloat32}) {
    auto g = parse_graph(graph_text("activation=\"Relu\"", dt, {x, w, b}));
    ASSERT_TRUE(g.ok());
    const ir::Node& n = *(*g)->nodes()[0];
    auto c = backend::cuda::cublaslt_conv_family().candidates(n, input_types(n));
    if (dt == DataType::kFloat32) {
      EXPECT_TRUE(c.empty()) << "fp32 convs stay with cuDNN";
      continue;
    }
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0]->name(), kName);
  }
}

// ---- device tests -------------------------------------------------------------------------

class CublasLtConvTest : public CudaTest {
 protected:
  void check(const std::string& attrs, DataType dt, const std::vector<Input>& ins, const std::string& name = kName) {
    const std::string text = graph_text(attrs, dt, ins);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto tactic = conv_tactic(name);
    ASSERT_NE(tactic, nullptr);
    ASSERT_TRUE(tactic->supports(node, input_types(node)));
    std::vector<Tensor> in;
    for (const Input& s : ins) in.push_back(s ? random_tensor(dt, *s, rng_) : Tensor());
    EXPECT_TRUE(matches_reference(*tactic, node, in, conv_sum_tolerance(dt, (*ins[0]).back())));
  }
  std::mt19937 rng_{20261207};
};

TEST_F(CublasLtConvTest, RandomShapesAndEpilogues) {
  std::uniform_int_distribution<int64_t> batch(1, 3), side(1, 13), chans(1, 72);
  const char* epilogues[] = {"", "activation=\"Relu\"", "activation=\"Clip\", activation_params=[0.0, 6.0]",
                             "activation=\"Silu\""};
  for (int i = 0; i < 24; ++i) {
    const DataType dt = i % 3 == 2 ? DataType::kBFloat16 : DataType::kFloat16;
    const int64_t n = batch(rng_), h = side(rng_), w = side(rng_);
    // Every other case has channel counts in whole 16-byte rows (the fast, aligned cuBLASLt kernels).
    int64_t c = chans(rng_), k = chans(rng_);
    if (i % 2 == 0) c = (c + 7) / 8 * 8, k = (k + 7) / 8 * 8;
    const Shape64 xs{n, h, w, c}, ws{k, 1, 1, c}, bs{k}, ys{n, h, w, k};
    const std::string epi = epilogues[i % 4];
    const bool bias = i % 5 != 4, residual = i % 4 < 2;  // residual with none and with Relu
    check(epi, dt, {xs, ws, bias ? Input(bs) : std::nullopt, residual ? Input(ys) : std::nullopt});
  }
}

// ResNet-50's 1x1 shapes at batch 2 (C 64 -> 256 with the residual and Relu; 256 -> 64; 1024 -> 256).
TEST_F(CublasLtConvTest, ResNetBottleneckShapesEveryIndex) {
  const struct { int64_t hw, c, k; bool residual; } cases[] = {{56, 64, 256, true}, {56, 256, 64, false},
                                                               {14, 1024, 256, false}, {7, 512, 2048, true}};
  for (const auto& s : cases)
    for (int i = 0; i < 4; ++i) {
      const Shape64 xs{2, s.hw, s.hw, s.c}, ws{s.k, 1, 1, s.c}, bs{s.k}, ys{2, s.hw, s.hw, s.k};
      check("activation=\"Relu\"", DataType::kFloat16, {xs, ws, bs, s.residual ? Input(ys) : std::nullopt},
            "cuda.cublaslt.conv." + std::to_string(i));
    }
}

TEST_F(CublasLtConvTest, EnqueueCapturesIntoCudaGraph) {
  const Shape64 xs{2, 13, 13, 32}, ws{48, 1, 1, 32}, bs{48}, ys{2, 13, 13, 48};
  auto g = parse_graph(graph_text("activation=\"Relu\"", DataType::kFloat16, {xs, ws, bs, ys}));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host;
  for (const Shape64& s : {xs, ws, bs, ys}) host.push_back(random_tensor(DataType::kFloat16, s, rng_));
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok());
  auto got = run_tactic_captured(*conv_tactic(), node, host);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(all_close((*got)[0], (*want)[0], conv_sum_tolerance(DataType::kFloat16, 32)));
}

}  // namespace
}  // namespace ingot::gpu_test
