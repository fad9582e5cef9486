// Copyright ingot authors. Apache-2.0.
//
// The squeeze-excite tactic (ingot::SqueezeExcite: pool, FC1 + act, FC2 + gate act, x * gate in
// three kernels) against the CPU reference (cpu::run_node on the same inputs, in double):
// fp32/fp16/bf16, channels-last and channels-first, EfficientNet-B0's batch-1 shapes (one pool
// split into many chunks, C above the block width), odd batch 2/3 sizes, batch 64, MobileNetV3's
// Relu + HardSigmoid, every FC1 and gate activation, biases present, absent, or only one of them
// (the other omitted as "_"), channel counts that take 16-byte, 8-byte and one-element packs, a
// channels-last row wider than one block's tile; one run captured into a CUDA graph and replayed;
// what the family refuses and the params' byte layout (these two without a device).
#include <cmath>
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::backend::cuda {
TacticFamily squeeze_excite_family();  // squeeze_excite_tactics.cc
}  // namespace ingot::backend::cuda

namespace ingot::gpu_test {
namespace {

using backend::cuda::squeeze_excite_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kTactic = "cuda.squeeze_excite";

std::string se(bool channels_last, const std::string& attrs = "activation=\"Silu\", gate_activation=\"Sigmoid\"") {
  return "ingot::SqueezeExcite {channels_last=" + std::to_string(channels_last ? 1 : 0) +
         (attrs.empty() ? "" : ", " + attrs) + "}";
}

/// The gate activations of the tests: FusedConv's list with "activation" renamed.
std::string gate_of(const char* act) {
  std::string s = act;
  for (size_t at = s.find("activation"); at != std::string::npos; at = s.find("activation", at + 15))
    s.replace(at, 10, "gate_activation");
  return s;
}

class CudaSqueezeExciteTest : public OpCaseTest {
 protected:
  /// The node's operands with data in well-conditioned ranges: x in [-1, 3) (means away from 0),
  /// w1 and w2 scaled by their fan-in so the FCs' sums stay near 1 (gates neither saturated nor
  /// all alike), biases in [-0.5, 0.5). `bias1`/`bias2`: present, else omitted (a trailing
  /// omitted input is left off).
  std::vector<Operand> operands(DataType t, bool cl, int64_t n, int64_t h, int64_t w, int64_t c, int64_t cr,
                                bool bias1 = true, bool bias2 = true) {
    const Shape64 xs = cl ? Shape64{n, h, w, c} : Shape64{n, c, h, w};
    const Shape64 w1s = cl ? Shape64{cr, 1, 1, c} : Shape64{cr, c, 1, 1};
    const Shape64 w2s = cl ? Shape64{c, 1, 1, cr} : Shape64{c, cr, 1, 1};
    const double a1 = 2.0 / std::sqrt(static_cast<double>(c)), a2 = 2.5 / std::sqrt(static_cast<double>(cr));
    std::vector<Operand> ins = {input(random_tensor(t, xs, rng_, -1.0, 3.0)),
                                input(random_tensor(t, w1s, rng_, -a1, a1)),
                                bias1 ? input(random_tensor(t, {cr}, rng_, -0.5, 0.5)) : omitted(),
                                input(random_tensor(t, w2s, rng_, -a2, a2))};
    if (bias2) ins.push_back(input(random_tensor(t, {c}, rng_, -0.5, 0.5)));
    return ins;
  }

  /// Y = X * gate: relative. fp32 widened for the kernels' fp32 sums against the reference's
  /// double ones (pool over H*W, dots over C and Cr); fp16/bf16 are dominated by Y's rounding.
  static Tolerance se_tolerance(DataType t) {
    Tolerance tol = tolerance_for(t);
    if (t == DataType::kFloat32) tol.rel = 5e-5;
    return tol;
  }

  void check_se(const std::vector<Operand>& ins, const std::string& call) {
    const Tolerance tol = se_tolerance(ins[0].dtype);
    check(squeeze_excite_family(), 17, ins, call, kTactic, 1, -3.0, 3.0, &tol);
  }
};

// Every float type and both layouts at small odd sizes: batch 2 and 3, C = 20 (fp16/bf16 rows of
// one-element packs, fp32 of 16-byte packs), Cr = 5, 9x9.
TEST_F(CudaSqueezeExciteTest, TypesLayoutsOddSizes) {
  for (DataType t : kFloatTypes)
    for (bool cl : {true, false}) {
      check_se(operands(t, cl, 2, 9, 9, 20, 5), se(cl));
      check_se(operands(t, cl, 3, 9, 9, 20, 5), se(cl));
      check_se(operands(t, cl, 3, 5, 7, 16, 8), se(cl));
    }
}

// EfficientNet-B0's squeeze-excite blocks at batch 1: the first ([1,112,112,32], Cr 8: 32 outputs
// of 12544 elements, split into many chunks), a mid one ([1,56,56,144], Cr 6) and the last
// ([1,7,7,1152], Cr 48: C above one block's width; 7x7 rows of one-element packs channels-first).
TEST_F(CudaSqueezeExciteTest, EfficientNetB0Batch1) {
  for (DataType t : kFloatTypes)
    for (bool cl : {true, false}) {
      check_se(operands(t, cl, 1, 112, 112, 32, 8), se(cl));
      check_se(operands(t, cl, 1, 56, 56, 144, 6), se(cl));
      check_se(operands(t, cl, 1, 7, 7, 1152, 48), se(cl));
    }
}

// Batch 64 at EfficientNet-B0's [14,14,240] with Cr 10 (196 rows: 8-byte packs channels-first in
// fp16).
TEST_F(CudaSqueezeExciteTest, Batch64) {
  for (DataType t : {DataType::kFloat16, DataType::kFloat32})
    for (bool cl : {true, false}) check_se(operands(t, cl, 64, 14, 14, 240, 10), se(cl));
}

// MobileNetV3's squeeze-excite: Relu, then HardSigmoid(1/6, 0.5) as the gate (72 -> 24 at 28x28,
// 480 -> 120 at 14x14).
TEST_F(CudaSqueezeExciteTest, MobileNetV3ReluHardSigmoid) {
  const std::string attrs =
      "activation=\"Relu\", gate_activation=\"HardSigmoid\", gate_activation_params=[0.1666667, 0.5]";
  for (DataType t : kFloatTypes)
    for (bool cl : {true, false}) {
      check_se(operands(t, cl, 2, 28, 28, 72, 24), se(cl, attrs));
      check_se(operands(t, cl, 1, 14, 14, 480, 120), se(cl, attrs));
    }
}

// Every FusedConv activation as FC1's and as the gate's (the other Silu / Sigmoid), and none.
TEST_F(CudaSqueezeExciteTest, EveryActivation) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    for (const char* act : kConvActivations) {
      const std::string a(act);
      const std::string first = a + "gate_activation=\"Sigmoid\"";
      const std::string gate = "activation=\"Silu\", " + gate_of(act);
      check_se(operands(t, true, 2, 6, 5, 40, 10), se(true, first));
      check_se(operands(t, false, 2, 6, 5, 40, 10), se(false, gate.substr(0, gate.find_last_not_of(", ") + 1)));
    }
  check_se(operands(DataType::kFloat32, true, 2, 6, 5, 40, 10), se(true, ""));
}

// No biases, only B2 (B1 omitted as "_"), only B1 (B2 left off).
TEST_F(CudaSqueezeExciteTest, Biases) {
  for (DataType t : kFloatTypes)
    for (bool cl : {true, false}) {
      check_se(operands(t, cl, 2, 8, 8, 64, 16, false, false), se(cl));
      check_se(operands(t, cl, 2, 8, 8, 64, 16, false, true), se(cl));
      check_se(operands(t, cl, 2, 8, 8, 64, 16, true, false), se(cl));
    }
}

// Packs: C and Cr not multiples of 8 (one-element packs of x, w1 and w2 rows), multiples of 4
// but not 8 (8-byte packs of fp16/bf16 x), of 2 but not 4 (8-byte packs of fp32); H*W likewise
// channels-first (7x7, 6x6, 5x6).
TEST_F(CudaSqueezeExciteTest, PackWidths) {
  for (DataType t : kFloatTypes)
    for (bool cl : {true, false}) {
      check_se(operands(t, cl, 2, 7, 7, 21, 7), se(cl));
      check_se(operands(t, cl, 2, 6, 6, 36, 12), se(cl));
      check_se(operands(t, cl, 2, 5, 6, 30, 4), se(cl));
      check_se(operands(t, cl, 1, 3, 3, 7, 3), se(cl));
    }
}

// Wide channels: a channels-last row of more packs than one block takes (fp32 C = 2304: 576
// 16-byte packs, three tiles), RegNetY-16GF-sized 3024 -> 756 at 7x7, one channel, one pixel.
TEST_F(CudaSqueezeExciteTest, WideAndTiny) {
  for (bool cl : {true, false}) {
    check_se(operands(DataType::kFloat32, cl, 2, 4, 4, 2304, 64), se(cl));
    check_se(operands(DataType::kFloat16, cl, 2, 7, 7, 3024, 756), se(cl));
    check_se(operands(DataType::kFloat16, cl, 3, 5, 5, 1, 1), se(cl));
    check_se(operands(DataType::kBFloat16, cl, 2, 1, 1, 96, 24), se(cl));
  }
}

// The three launches captured into a CUDA graph and replayed twice (no host sync, the same
// result from the same workspace).
TEST_F(CudaSqueezeExciteTest, Captured) {
  for (bool cl : {true, false})
    check_captured(squeeze_excite_family(), 17, operands(DataType::kFloat16, cl, 1, 56, 56, 144, 6), se(cl));
}

// What the family offers and refuses: a well-formed node (also with open N, H and W); not a
// SqueezeExcite; W1 whose rows do not match Cr or whose columns do not match C (types given
// directly: the op's inference refuses such graphs); W2 not [C, Cr]; a bias of the wrong length;
// mixed dtypes; an unknown or parameterless activation (set on the parsed node); C above the
// kernels' limit.
TEST(CudaSqueezeExciteNoDevice, Refusals) {
  const DataType h = DataType::kFloat16;
  const std::vector<Operand> ok = {input(h, {1, 8, 8, 32}), input(h, {8, 1, 1, 32}), input(h, {8}),
                                   input(h, {32, 1, 1, 8}), input(h, {32})};
  auto g = parse_graph(op_graph(17, ok, se(true), 1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ir::Node& node = *(*g)->nodes()[0];
  const std::vector<ir::TensorType> types = input_types(node);
  auto offered = [&](const std::vector<ir::TensorType>& ts) {
    return !squeeze_excite_family().candidates(node, ts).empty();
  };
  EXPECT_TRUE(offered(types));
  auto with = [&](size_t i, DataType dt, const ir::Shape& s) {
    std::vector<ir::TensorType> ts = types;
    ts[i].dtype = dt;
    ts[i].shape = s;
    return ts;
  };
  EXPECT_FALSE(offered(with(1, h, ir::Shape{8, 1, 1, 16})));                   // W1 columns != C
  EXPECT_FALSE(offered(with(1, h, ir::Shape{8, 32})));                         // W1 not 4-D
  EXPECT_FALSE(offered(with(3, h, ir::Shape{32, 1, 1, 4})));                   // W2 columns != Cr
  EXPECT_FALSE(offered(with(3, h, ir::Shape{16, 1, 1, 8})));                   // W2 rows != C
  EXPECT_FALSE(offered(with(2, h, ir::Shape{4})));                             // B1 not [Cr]
  EXPECT_FALSE(offered(with(4, h, ir::Shape{8})));                             // B2 not [C]
  EXPECT_FALSE(offered(with(1, DataType::kFloat32, ir::Shape{8, 1, 1, 32})));  // mixed dtypes
  EXPECT_FALSE(offered(with(4, DataType::kBFloat16, ir::Shape{32})));
  EXPECT_FALSE(offered(with(0, h, ir::Shape{1, 8, 8, ir::Dim::unknown()})));  // open C
  EXPECT_FALSE(offered(with(0, DataType::kInt32, ir::Shape{1, 8, 8, 32})));   // not float
  {
    ir::Node& n = node;
    n.mutable_attrs().set_string("gate_activation", "Softplus");
    EXPECT_FALSE(offered(types));
    n.mutable_attrs().set_string("gate_activation", "HardSigmoid");  // without its two params
    EXPECT_FALSE(offered(types));
    n.mutable_attrs().set_floats("gate_activation_params", {0.2f, 0.5f});
    EXPECT_TRUE(offered(types));
    n.mutable_attrs().set_string("activation", "Mish");
    EXPECT_FALSE(offered(types));
    n.mutable_attrs().set_string("activation", "Relu");
    EXPECT_TRUE(offered(types));
  }
  // Open N, H, W are fine (read at enqueue); C past the limit is not.
  auto dyn = parse_graph(R"(graph main {
  opset "" 17
  opset "ingot" 1
  input %x: f16[batch,h,w,32]
  input %w1: f16[8,1,1,32]
  input %w2: f16[32,1,1,8]
  %y = ingot::SqueezeExcite {channels_last=1, activation="Relu", gate_activation="Sigmoid"}(%x, %w1, _, %w2) @n0
  output %y
}
)");
  ASSERT_TRUE(dyn.ok()) << dyn.status().to_string();
  const ir::Node& dn = *(*dyn)->nodes()[0];
  EXPECT_FALSE(squeeze_excite_family().candidates(dn, input_types(dn)).empty());
  const std::vector<Operand> wide = {input(h, {1, 2, 2, 16384}), input(h, {4, 1, 1, 16384}), omitted(),
                                     input(h, {16384, 1, 1, 4})};
  auto gw = parse_graph(op_graph(17, wide, se(true), 1));
  ASSERT_TRUE(gw.ok()) << gw.status().to_string();
  const ir::Node& wn = *(*gw)->nodes()[0];
  EXPECT_TRUE(squeeze_excite_family().candidates(wn, input_types(wn)).empty());
  // Not a SqueezeExcite.
  auto conv = parse_graph(op_graph(17, {input(h, {1, 32, 8, 8}), input(h, {8, 32, 1, 1})}, "Conv {}", 1));
  ASSERT_TRUE(conv.ok()) << conv.status().to_string();
  const ir::Node& cn = *(*conv)->nodes()[0];
  EXPECT_TRUE(squeeze_excite_family().candidates(cn, input_types(cn)).empty());
}

// The workspace at a profile's max shapes covers every smaller run: the launcher's bound is
// monotone in N and H*W.
TEST(CudaSqueezeExciteNoDevice, WorkspaceBoundsSmallerShapes) {
  const DataType h = DataType::kFloat16;
  auto g = parse_graph(op_graph(
      17, {input(h, {1, 8, 8, 32}), input(h, {8, 1, 1, 32}), input(h, {8}), input(h, {32, 1, 1, 8}), input(h, {32})},
      se(true), 1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = squeeze_excite_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  auto bytes = [&](int64_t n, int64_t hh, int64_t ww) {
    return cands[0]->workspace_bytes(node, {{n, hh, ww, 32}, {8, 1, 1, 32}, {8}, {32, 1, 1, 8}, {32}});
  };
  const uint64_t max = bytes(64, 112, 112);
  EXPECT_GT(max, 0u);
  for (int64_t n : {1, 2, 3, 17, 64})
    for (int64_t s : {1, 7, 14, 56, 112}) {
      EXPECT_LE(bytes(n, s, s), max) << n << "x" << s;
      EXPECT_LE(bytes(n, s, s), bytes(n, 112, 112)) << n << "x" << s;
      EXPECT_LE(bytes(n, s, s), bytes(64, s, s)) << n << "x" << s;
    }
}

// Engines keep these bytes: {1, channels_last, act1, act2 (int32), c, cr (int64), act1's alpha,
// beta, lo, hi, act2's alpha, beta, lo, hi (float)}; a change of layout must bump the version.
TEST(CudaSqueezeExciteNoDevice, ParamsKeepTheirByteLayout) {
  ParamBytes p(1);
  // channels-last, act1 = Relu (1), act2 = HardSigmoid (14).
  for (int32_t v : {1, 1, 14}) p.add(v);
  p.add(int64_t{72}).add(int64_t{24});
  for (float v : {0.0f, 0.0f, 0.0f, 0.0f, 0.1666667f, 0.5f, 0.0f, 0.0f}) p.add(v);
  auto t = squeeze_excite_family().create(kTactic, p.b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name(), kTactic);
  EXPECT_EQ(t->serialize(), p.b);
  std::vector<uint8_t> shorter(p.b.begin(), p.b.end() - 1), longer = p.b;
  longer.push_back(0);
  EXPECT_EQ(squeeze_excite_family().create(kTactic, shorter), nullptr);
  EXPECT_EQ(squeeze_excite_family().create(kTactic, longer), nullptr);
  std::vector<uint8_t> other = p.b;
  other[0] = 7;
  EXPECT_EQ(squeeze_excite_family().create(kTactic, other), nullptr);
  EXPECT_EQ(squeeze_excite_family().create("cuda.squeeze_excite.other", p.b), nullptr);

  // The bytes a parsed node's tactic writes: the same layout.
  const DataType h = DataType::kFloat16;
  auto g = parse_graph(op_graph(
      17,
      {input(h, {2, 28, 28, 72}), input(h, {24, 1, 1, 72}), input(h, {24}), input(h, {72, 1, 1, 24}), input(h, {72})},
      se(true,
         "activation=\"Relu\", gate_activation=\"HardSigmoid\", "
         "gate_activation_params=[0.1666667, 0.5]"),
      1));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = squeeze_excite_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0]->serialize(), p.b);
  EXPECT_TRUE(t->supports(node, input_types(node)));
}

}  // namespace
}  // namespace ingot::gpu_test
