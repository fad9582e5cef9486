// Copyright ingot authors. Apache-2.0.
//
// The cuda elementwise family against the CPU reference executor (cpu::run_node on the same
// host inputs): every op in f32/f16/bf16 over odd sizes, sizes off the 16-byte vector width,
// 0-sized dims, scalars, broadcasting up to 6-D (fixed cases plus seeded random shapes), and
// the unaligned-pointer tail paths. Also: which nodes the family refuses (the builder then
// falls back to the host tactic) and that create() rebuilds a tactic from its name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using backend::Tactic;
using backend::cuda::elementwise_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

std::string dims_text(const Shape64& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

struct InSpec {
  DataType dtype;
  Shape64 shape;  ///< omitted optional input when dtype is kUndefined
};

/// A one-node graph: inputs %i0.. of the given types, `call` with "$k" standing for input k
/// (e.g. "Add($0, $1)"), outputs %y (and `extra_outputs` more, for refusal tests).
std::string one_node_graph(int64_t opset, const std::vector<InSpec>& ins, const std::string& op_and_attrs,
                           const std::string& outputs = "%y") {
  std::string g = "graph main {\n  opset \"\" " + std::to_string(opset) + "\n  opset \"ingot\" 1\n";
  std::string args;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i) args += ", ";
    if (ins[i].dtype == DataType::kUndefined) {
      args += "_";
      continue;
    }
    g += "  input %i" + std::to_string(i) + ": " + data_type_name(ins[i].dtype) + dims_text(ins[i].shape) + "\n";
    args += "%i" + std::to_string(i);
  }
  g += "  " + outputs + " = " + op_and_attrs + "(" + args + ") @n0\n  output %y\n}\n";
  return g;
}

class CudaElementwiseTest : public CudaTest {
 protected:
  std::mt19937 rng_{1234};

  /// Builds the node, asks the family for it, and checks the tactic against the reference.
  /// `data` gives the inputs (generated from `ins` with [lo, hi) when empty).
  void check(int64_t opset, const std::vector<InSpec>& ins, const std::string& op, const std::string& want_tactic,
             double lo = -3.0, double hi = 3.0, std::vector<Tensor> data = {}) {
    const std::string text = one_node_graph(opset, ins, op);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto family = elementwise_family();
    auto cands = family.candidates(node, input_types(node));
    ASSERT_EQ(cands.size(), 1u) << "family refused the node";
    EXPECT_EQ(cands[0]->name(), want_tactic);
    EXPECT_EQ(cands[0]->workspace_bytes(node, {}), 0u);
    if (data.empty()) {
      for (const InSpec& s : ins) {
        if (s.dtype == DataType::kUndefined) data.emplace_back();
        else data.push_back(random_tensor(s.dtype, s.shape, rng_, lo, hi));
      }
    }
    // The rebuilt tactic (as an engine load would make it) must run the same.
    std::unique_ptr<Tactic> rebuilt = family.create(cands[0]->name(), cands[0]->serialize());
    ASSERT_NE(rebuilt, nullptr);
    EXPECT_TRUE(matches_reference(*rebuilt, node, data));
  }

  /// The family must return no candidate for this node.
  void refuses(int64_t opset, const std::vector<InSpec>& ins, const std::string& op,
               const std::string& outputs = "%y") {
    const std::string text = one_node_graph(opset, ins, op, outputs);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    EXPECT_TRUE(elementwise_family().candidates(node, input_types(node)).empty());
  }
};

class CudaElementwiseFamilyTest : public CudaElementwiseTest {
 protected:
  void SetUp() override {}  // host-only checks: no device needed
};

// Sizes around the 4/8-element packs, a 0-sized dim and a scalar.
const std::vector<Shape64> kUnaryShapes = {{}, {1}, {7}, {8}, {3, 5}, {2, 3, 33}, {4, 0, 3}, {1027}, {64, 130}};

TEST_F(CudaElementwiseTest, UnaryOps) {
  struct Case { const char* op; double lo, hi; int64_t opset; };
  const Case cases[] = {
      {"Relu", -3, 3, 17},        {"Sigmoid", -6, 6, 17},    {"Tanh", -3, 3, 17},
      {"Exp", -4, 4, 17},         {"Log", 0.05, 8, 17},      {"Sqrt", 0.0, 9, 17},
      {"Abs", -3, 3, 17},         {"Neg", -3, 3, 17},        {"Reciprocal", -3, 3, 17},
      {"Erf", -3, 3, 17},         {"Gelu", -4, 4, 20},       {"Gelu {approximate=\"tanh\"}", -4, 4, 20},
      {"Gelu {approximate=\"none\"}", -4, 4, 20},
      {"LeakyRelu", -3, 3, 17},   {"LeakyRelu {alpha=0.25}", -3, 3, 17},
      {"HardSigmoid", -5, 5, 17}, {"HardSigmoid {alpha=0.3, beta=0.4}", -5, 5, 17},
      {"HardSwish", -5, 5, 17},   {"Softplus", -6, 6, 17},   {"Identity", -3, 3, 17},
      {"ingot::Silu", -5, 5, 17}, {"ingot::Gelu", -4, 4, 17}, {"ingot::Gelu {approximate=\"tanh\"}", -4, 4, 17},
  };
  for (const Case& c : cases) {
    for (DataType t : kFloatTypes) {
      for (const Shape64& s : kUnaryShapes) check(c.opset, {{t, s}}, c.op, "cuda.elementwise.unary", c.lo, c.hi);
    }
  }
}

TEST_F(CudaElementwiseTest, IdentityCopiesAnyFixedWidthType) {
  for (DataType t : {DataType::kInt64, DataType::kInt32, DataType::kUInt8, DataType::kBool, DataType::kFloat64}) {
    for (const Shape64& s : kUnaryShapes) check(17, {{t, s}}, "Identity", "cuda.elementwise.unary", -100, 100);
  }
}

TEST_F(CudaElementwiseTest, ClipWithInputsAndAttributes) {
  for (DataType t : kFloatTypes) {
    for (const Shape64& s : kUnaryShapes) {
      Tensor x = random_tensor(t, s, rng_, -3, 3);
      Tensor lo = Tensor::zeros(t, {}).value();
      Tensor hi = Tensor::zeros(t, {}).value();
      lo.set_f64(0, -0.75);
      hi.set_f64(0, 1.25);
      const InSpec none{DataType::kUndefined, {}};
      check(13, {{t, s}, {t, {}}, {t, {}}}, "Clip", "cuda.elementwise.unary", 0, 0, {x, lo, hi});
      check(13, {{t, s}, {t, {}}}, "Clip", "cuda.elementwise.unary", 0, 0, {x, lo});
      check(13, {{t, s}, none, {t, {}}}, "Clip", "cuda.elementwise.unary", 0, 0, {x, Tensor(), hi});
      check(13, {{t, s}}, "Clip", "cuda.elementwise.unary", 0, 0, {x});
      // A [1]-shaped bound is a scalar too.
      Tensor lo1 = Tensor::zeros(t, {1}).value();
      lo1.set_f64(0, 0.5);
      check(13, {{t, s}, {t, {1}}}, "Clip", "cuda.elementwise.unary", 0, 0, {x, lo1});
      // Opset 6: bounds are attributes.
      check(6, {{t, s}}, "Clip {min=-0.5, max=0.25}", "cuda.elementwise.unary", 0, 0, {x});
      check(6, {{t, s}}, "Clip {max=0.25}", "cuda.elementwise.unary", 0, 0, {x});
    }
  }
}

TEST_F(CudaElementwiseTest, CastBetweenFloatTypes) {
  const int to_codes[] = {1, 10, 16};
  for (DataType from : kFloatTypes) {
    for (int to : to_codes) {
      for (const Shape64& s : kUnaryShapes)
        check(19, {{from, s}}, "Cast {to=" + std::to_string(to) + "}", "cuda.elementwise.cast", -300, 300);
    }
  }
}

// Integer and bool sources (e.g. an attention mask cast to float) and float -> bool: wrapping
// integer casts, bool as "!= 0", rounding once to fp16/bf16 (values up to 2^40 reach bf16's
// rounding and int32's wrap-around).
TEST_F(CudaElementwiseTest, CastIntegersAndBools) {
  const DataType from[] = {DataType::kBool,  DataType::kInt8,  DataType::kUInt8,
                           DataType::kInt32, DataType::kInt64, DataType::kUInt64};
  const int to_codes[] = {1, 10, 16, 11, 6, 7, 9, 2, 3};  // f32 f16 bf16 f64 i32 i64 bool u8 i8
  for (DataType t : from) {
    const bool wide = t == DataType::kInt64 || t == DataType::kUInt64;
    const double lo = t == DataType::kBool || t == DataType::kUInt8 || t == DataType::kUInt64 ? 0 : wide ? -1e12 : -100;
    const double hi = t == DataType::kBool ? 2 : wide ? 1e12 : 100;
    for (int to : to_codes)
      for (const Shape64& s : kUnaryShapes)
        check(19, {{t, s}}, "Cast {to=" + std::to_string(to) + "}", "cuda.elementwise.cast", lo, hi);
  }
  for (DataType t : kFloatTypes)
    for (const Shape64& s : kUnaryShapes) check(19, {{t, s}}, "Cast {to=9}", "cuda.elementwise.cast", -2, 2);
}

struct ShapePair {
  Shape64 a, b;
};

const std::vector<ShapePair> kBinaryShapes = {
    {{3, 5}, {3, 5}},           {{1027}, {1027}},         {{64, 130}, {64, 130}}, {{7}, {7}},
    {{2, 3, 4}, {4}},           {{2, 1, 4}, {3, 1}},      {{4, 0, 3}, {3}},       {{2, 3, 4, 5}, {1, 3, 1, 1}},
    {{}, {5}},                  {{5}, {}},                {{}, {}},               {{1, 9}, {9}},
    {{2, 1, 3, 1, 2, 3}, {1, 4, 1, 5, 1, 1}},             {{8, 1, 33}, {1, 17, 1}}, {{3, 1}, {1, 1}},
    // Row broadcasts (the packed path where every period is a whole number of 16-byte packs):
    // BERT's [B, S, H] + [1, S, H], a row vector either side, and periods that are not.
    {{4, 16, 96}, {1, 16, 96}}, {{1, 40}, {6, 40}},         {{5, 3, 64}, {64}},     {{6, 2, 12}, {1, 2, 12}},
    {{3, 1, 8}, {1, 4, 8}},
    // Packed broadcasts along a contiguous or broadcast innermost dim (binary_broadcast_packed_kernel):
    // squeeze-excite's scale channels-last [N, H, W, C] * [N, 1, 1, C] (either side) and
    // channels-first [N, C, H, W] * [N, C, 1, 1] (splat: H*W a whole number of packs), a column
    // vector [R, 1] beside [R, 32], and sizes that take the element kernel (H*W = 49; C = 20).
    {{2, 5, 7, 24}, {2, 1, 1, 24}}, {{3, 1, 1, 16}, {3, 4, 2, 16}}, {{2, 24, 4, 8}, {2, 24, 1, 1}},
    {{5, 1}, {5, 32}},              {{2, 16, 7, 7}, {2, 16, 1, 1}}, {{2, 3, 3, 20}, {2, 1, 1, 20}},
};

/// Random numpy-broadcastable shapes: rank 0..6, dims 0..6, each side sometimes 1.
ShapePair random_broadcast_pair(std::mt19937& rng) {
  std::uniform_int_distribution<int> rank_d(0, 6), dim_d(1, 6), coin(0, 3);
  const int r = rank_d(rng);
  Shape64 out(static_cast<size_t>(r));
  for (auto& d : out) d = dim_d(rng);
  if (r > 0 && coin(rng) == 0 && coin(rng) == 0) out[static_cast<size_t>(rng() % r)] = 0;
  auto side = [&]() {
    const int rk = std::uniform_int_distribution<int>(0, r)(rng);
    Shape64 s(out.end() - rk, out.end());
    for (auto& d : s)
      if (coin(rng) == 0) d = 1;
    return s;
  };
  return {side(), side()};
}

TEST_F(CudaElementwiseTest, BinaryOps) {
  struct Case { const char* op; double lo, hi; };
  // Pow: positive bases keep real results; Div: random_tensor keeps |b| >= 0.1.
  const Case cases[] = {{"Add", -3, 3}, {"Sub", -3, 3}, {"Mul", -3, 3}, {"Div", -3, 3},
                        {"Pow", 0.2, 2.5}, {"Max", -3, 3}, {"Min", -3, 3}};
  std::mt19937 shapes_rng(99);
  std::vector<ShapePair> shapes = kBinaryShapes;
  for (int i = 0; i < 12; ++i) shapes.push_back(random_broadcast_pair(shapes_rng));
  for (const Case& c : cases) {
    for (DataType t : kFloatTypes) {
      for (const ShapePair& p : shapes) check(17, {{t, p.a}, {t, p.b}}, c.op, "cuda.elementwise.binary", c.lo, c.hi);
    }
  }
}

// int32/int64 Add, Sub, Mul, Max, Min with broadcasting (text models compute position ids in
// integers: RoBERTa's CumSum(mask) * mask + padding_idx), wrapping where the reference wraps;
// integer Div and Pow are refused (host fallback).
TEST_F(CudaElementwiseTest, IntegerArithmetic) {
  std::mt19937 shapes_rng(7);
  std::vector<ShapePair> shapes = kBinaryShapes;
  for (int i = 0; i < 6; ++i) shapes.push_back(random_broadcast_pair(shapes_rng));
  for (DataType t : {DataType::kInt32, DataType::kInt64}) {
    for (const char* op : {"Add", "Sub", "Mul", "Max", "Min"})
      for (const ShapePair& p : shapes) check(17, {{t, p.a}, {t, p.b}}, op, "cuda.elementwise.binary", -1000, 1000);
    check(17, {{t, {1, 128}}, {t, {}}}, "Add", "cuda.elementwise.binary", -1000, 1000);  // + a scalar
    refuses(17, {{t, {4}}, {t, {4}}}, "Div");
    refuses(17, {{t, {4}}, {t, {4}}}, "Pow");
  }
  const std::vector<int64_t> big = {2147483647, -2147483647 - 1, 123456789, -5};
  const std::vector<int64_t> small = {1, -1, 1000, 7};
  for (DataType t : {DataType::kInt32, DataType::kInt64})
    for (const char* op : {"Add", "Sub", "Mul"})
      check(17, {{t, {4}}, {t, {4}}}, op, "cuda.elementwise.binary", 0, 0,
            {Tensor::from_vector(t, {4}, big), Tensor::from_vector(t, {4}, small)});
}

TEST_F(CudaElementwiseTest, MaxMinPropagateNaN) {
  for (DataType t : kFloatTypes) {
    Tensor a = random_tensor(t, {9}, rng_);
    Tensor b = random_tensor(t, {9}, rng_);
    a.set_f64(2, std::nan(""));
    b.set_f64(5, std::nan(""));
    check(17, {{t, {9}}, {t, {9}}}, "Max", "cuda.elementwise.binary", 0, 0, {a, b});
    check(17, {{t, {9}}, {t, {9}}}, "Min", "cuda.elementwise.binary", 0, 0, {a, b});
  }
}

TEST_F(CudaElementwiseTest, Where) {
  struct Triple { Shape64 c, x, y; };
  std::vector<Triple> shapes = {
      {{3, 4}, {3, 4}, {3, 4}}, {{1, 4}, {3, 1}, {4}},       {{2, 3, 5}, {5}, {}},
      {{1027}, {1027}, {1027}}, {{4, 0, 3}, {3}, {1, 3}},    {{2, 1, 3, 1, 2, 3}, {1, 4, 1, 5, 1, 1}, {3}},
      {{}, {2, 2}, {2, 1}},
  };
  std::mt19937 shapes_rng(7);
  for (int i = 0; i < 8; ++i) {
    ShapePair p = random_broadcast_pair(shapes_rng);
    ShapePair q = random_broadcast_pair(shapes_rng);
    // Third operand: q.a only when it broadcasts with the pair's output.
    auto out = ir::broadcast_shapes(p.a, p.b);
    auto all = out.ok() ? ir::broadcast_shapes(*out, q.a) : out;
    shapes.push_back({p.a, p.b, all.ok() ? q.a : Shape64{}});
  }
  for (DataType t : kFloatTypes) {
    for (const Triple& s : shapes)
      check(17, {{DataType::kBool, s.c}, {t, s.x}, {t, s.y}}, "Where", "cuda.elementwise.where");
  }
}

TEST_F(CudaElementwiseTest, SoftmaxLastAxis) {
  const std::vector<Shape64> shapes = {{4, 10}, {3, 1000}, {2, 3, 2050}, {5, 1}, {0, 7}, {7}, {2, 33}, {1, 5000}};
  for (DataType t : kFloatTypes) {
    for (const Shape64& s : shapes) {
      check(13, {{t, s}}, "Softmax", "cuda.elementwise.softmax", -8, 8);
      check(13, {{t, s}}, "Softmax {axis=" + std::to_string(s.size() - 1) + "}", "cuda.elementwise.softmax", -8, 8);
    }
  }
}

TEST_F(CudaElementwiseTest, SoftmaxOtherAxesAndOldOpsets) {
  for (DataType t : kFloatTypes) {
    check(13, {{t, {3, 5, 7}}}, "Softmax {axis=0}", "cuda.elementwise.softmax", -8, 8);
    check(13, {{t, {3, 5, 7}}}, "Softmax {axis=1}", "cuda.elementwise.softmax", -8, 8);
    check(13, {{t, {3, 5, 7}}}, "Softmax {axis=-2}", "cuda.elementwise.softmax", -8, 8);
    check(13, {{t, {2, 130, 3, 2}}}, "Softmax {axis=1}", "cuda.elementwise.softmax", -8, 8);
    check(13, {{t, {}}}, "Softmax", "cuda.elementwise.softmax", -8, 8);
    // Opset < 13 coerces to 2-D at `axis` (default 1) and normalizes everything after it.
    check(11, {{t, {2, 3, 4}}}, "Softmax", "cuda.elementwise.softmax", -8, 8);
    check(11, {{t, {2, 3, 4}}}, "Softmax {axis=2}", "cuda.elementwise.softmax", -8, 8);
    check(11, {{t, {2, 3, 4}}}, "Softmax {axis=0}", "cuda.elementwise.softmax", -8, 8);
  }
}

TEST_F(CudaElementwiseTest, SoftmaxInfinities) {
  Tensor x = Tensor::zeros(DataType::kFloat32, {3, 4}).value();
  for (int64_t i = 0; i < 12; ++i) x.set_f64(i, static_cast<double>(i % 5) - 2);
  for (int64_t i = 0; i < 4; ++i) x.set_f64(i, -INFINITY);  // row 0: all -inf -> NaN, as the reference
  x.set_f64(5, -INFINITY);                                   // row 1: one -inf -> 0 there
  check(13, {{DataType::kFloat32, {3, 4}}}, "Softmax", "cuda.elementwise.softmax", 0, 0, {x});
}

TEST_F(CudaElementwiseTest, LayerNormalization) {
  struct Case { Shape64 x, scale; bool bias; std::string attrs; };
  const Case cases[] = {
      {{2, 5, 8}, {8}, true, ""},
      {{3, 1000}, {1000}, false, ""},
      {{4, 1027}, {1027}, true, " {epsilon=0.001}"},
      {{2, 3, 4}, {3, 4}, true, " {axis=-2}"},
      {{2, 3, 4}, {3, 4}, true, " {axis=1}"},
      {{2, 3, 4}, {2, 3, 4}, false, " {axis=0}"},
      {{6, 1, 5}, {1, 5}, true, ""},
      {{0, 16}, {16}, true, ""},
      {{7}, {7}, true, ""},
      {{1, 4096}, {4096}, true, ""},
      // Warp-per-row kernel (rows a multiple of 16 bytes, up to 2048 fp16 / 1024 fp32 elements):
      // BERT's rows, a partial last block of rows, each register-chunk count, and just past it.
      {{3, 100, 768}, {768}, true, ""},
      {{37, 256}, {256}, false, " {epsilon=0.01}"},
      {{9, 1032}, {1032}, true, ""},
      {{5, 2048}, {2048}, true, ""},
      {{3, 2056}, {2056}, true, ""},
  };
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      std::vector<InSpec> ins = {{t, c.x}, {t, c.scale}};
      if (c.bias) ins.push_back({t, c.scale});
      check(17, ins, "LayerNormalization" + c.attrs, "cuda.elementwise.layernorm");
      check(17, ins, "ingot::LayerNormalization" + c.attrs, "cuda.elementwise.layernorm");
    }
  }
}

TEST_F(CudaElementwiseTest, Transpose) {
  struct Case { Shape64 x; std::string perm; };
  std::vector<Case> cases = {
      {{2, 3}, ""},
      {{2, 3, 4}, "[1,0,2]"},
      {{2, 3, 4}, "[2,0,1]"},
      {{2, 3, 4, 5}, "[0,2,3,1]"},
      {{2, 1, 3, 2, 2, 3}, "[5,4,3,2,1,0]"},
      {{2, 1, 3, 2, 2, 3}, "[0,1,2,3,4,5]"},
      {{0, 3}, "[1,0]"},
      {{33, 65}, "[1,0]"},
      {{1027}, ""},
      {{}, ""},
      // Batched 2-D transposes (the tiled kernel): NCHW <-> NHWC reformats, tile edges.
      {{2, 37, 5, 7}, "[0,2,3,1]"},
      {{3, 5, 7, 37}, "[0,3,1,2]"},
      {{1, 64, 56, 56}, "[0,2,3,1]"},
      {{1, 56, 56, 64}, "[0,3,1,2]"},
      {{1, 1, 33, 65}, "[0,1,3,2]"},
      {{4, 96, 31}, "[0,2,1]"},
      // A short side (<= 8) takes the one-thread-per-column kernels: image channels in and out of NHWC.
      {{4, 3, 17, 19}, "[0,2,3,1]"},
      {{4, 17, 19, 3}, "[0,3,1,2]"},
      {{2, 8, 33}, "[0,2,1]"},
      {{2, 33, 8}, "[0,2,1]"},
      {{2, 9, 33}, "[0,2,1]"},
      {{5, 1027}, "[1,0]"},
      // transpose_plan.h's forms. Runs: a window partition keeping channels innermost (16-byte units
      // for 2-byte types), odd channel counts (narrower units), a run of one element.
      {{2, 3, 7, 3, 7, 64}, "[0,1,3,2,4,5]"},
      {{2, 3, 7, 3, 7, 5}, "[0,1,3,2,4,5]"},
      {{3, 4, 5, 2}, "[2,0,1,3]"},
      // Tiles over flattened groups (1 MB and up; smaller ones take the loop): a window un-partition
      // to NCHW (J spans three short output dims, tiles of 64 or 32 by block count, a batch), a short
      // stride-1 dim that K extends, a 6-D shuffle.
      {{8, 8, 8, 7, 7, 64}, "[0,5,1,3,2,4]"},
      {{4, 8, 8, 7, 7, 64}, "[0,5,1,3,2,4]"},
      {{2, 3, 3, 7, 7, 96}, "[0,5,1,3,2,4]"},
      {{4096, 6, 5, 3}, "[2,0,3,1]"},
      {{3, 4, 2, 5, 3, 7 * 1024}, "[5,3,1,0,4,2]"},
  };
  std::mt19937 perm_rng(5);
  for (int i = 0; i < 8; ++i) {
    const int r = std::uniform_int_distribution<int>(1, 6)(perm_rng);
    Shape64 s(static_cast<size_t>(r));
    for (auto& d : s) d = std::uniform_int_distribution<int>(1, 5)(perm_rng);
    std::vector<int> p(static_cast<size_t>(r));
    for (int k = 0; k < r; ++k) p[static_cast<size_t>(k)] = k;
    std::shuffle(p.begin(), p.end(), perm_rng);
    std::string ps = "[";
    for (int k = 0; k < r; ++k) ps += (k ? "," : "") + std::to_string(p[static_cast<size_t>(k)]);
    cases.push_back({s, ps + "]"});
  }
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt64, DataType::kUInt8}) {
    for (const Case& c : cases) {
      const std::string op = c.perm.empty() ? "Transpose" : "Transpose {perm=" + c.perm + "}";
      check(17, {{t, c.x}}, op, "cuda.elementwise.transpose", -50, 50);
    }
  }
}

// Device views that start one element past a 16-byte boundary take the scalar path; a
// 16-byte-aligned input with an unaligned output must too.
TEST_F(CudaElementwiseTest, UnalignedViews) {
  for (DataType t : kFloatTypes) {
    const Shape64 s = {1031};
    const std::string text = one_node_graph(17, {{t, s}, {t, s}}, "Mul");
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto cands = elementwise_family().candidates(node, input_types(node));
    ASSERT_EQ(cands.size(), 1u);
    Tensor a = random_tensor(t, s, rng_), b = random_tensor(t, s, rng_);
    const size_t esz = static_cast<size_t>(data_type_bits(t) / 8);
    DeviceBuffer da((a.nbytes() + esz)), db(b.nbytes() + esz), dy(a.nbytes() + esz);
    ASSERT_TRUE(da.valid() && db.valid() && dy.valid());
    auto* pa = static_cast<uint8_t*>(da.get()) + esz;
    auto* pb = static_cast<uint8_t*>(db.get());  // aligned
    auto* py = static_cast<uint8_t*>(dy.get()) + esz;
    ASSERT_EQ(cudaMemcpy(pa, a.raw(), a.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pb, b.raw(), b.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, dy.bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream copy/memset done before the tactics' streams run
    Tensor va = Tensor::borrow(t, s, pa, nullptr), vb = Tensor::borrow(t, s, pb, nullptr);
    std::vector<Tensor> outs = {Tensor::borrow(t, s, py, nullptr)};
    backend::StepIO io;
    io.node = &node;
    io.inputs = {&va, &vb};
    io.outputs = &outs;
    ASSERT_TRUE(cands[0]->enqueue(io).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Tensor got = Tensor::zeros(t, s).value();
    ASSERT_EQ(cudaMemcpy(got.mutable_raw(), py, got.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    auto want = run_reference(node, {a, b});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(all_close(got, (*want)[0]));

    // Unary (Sigmoid) and Cast on the same unaligned views.
    for (const std::string& op : {std::string("Sigmoid"), std::string("Cast {to=1}")}) {
      auto g1 = parse_graph(one_node_graph(19, {{t, s}}, op));
      ASSERT_TRUE(g1.ok());
      const ir::Node& n1 = *(*g1)->nodes()[0];
      auto c1 = elementwise_family().candidates(n1, input_types(n1));
      ASSERT_EQ(c1.size(), 1u);
      const DataType ot = n1.output(0)->dtype();
      DeviceBuffer dy1(storage_bytes(ot, 1031) + 4);
      ASSERT_TRUE(dy1.valid());
      auto* py1 = static_cast<uint8_t*>(dy1.get()) + 4;  // 4 bytes off: unaligned for 16-byte packs
      std::vector<Tensor> o1 = {Tensor::borrow(ot, s, py1, nullptr)};
      backend::StepIO io1;
      io1.node = &n1;
      io1.inputs = {&va};
      io1.outputs = &o1;
      ASSERT_TRUE(c1[0]->enqueue(io1).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      Tensor got1 = Tensor::zeros(ot, s).value();
      ASSERT_EQ(cudaMemcpy(got1.mutable_raw(), py1, got1.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      auto want1 = run_reference(n1, {a});
      ASSERT_TRUE(want1.ok());
      EXPECT_TRUE(all_close(got1, (*want1)[0])) << op;
    }
  }
}

// In-place steps (the output view aliases input 0) must give the same result.
TEST_F(CudaElementwiseTest, InPlace) {
  for (DataType t : kFloatTypes) {
    const Shape64 s = {5, 131};
    for (const std::string& op : {std::string("Add"), std::string("Tanh"), std::string("Softmax")}) {
      const bool binary = op == "Add";
      std::vector<InSpec> ins = {{t, s}};
      if (binary) ins.push_back({t, {131}});
      auto g = parse_graph(one_node_graph(17, ins, op));
      ASSERT_TRUE(g.ok());
      const ir::Node& node = *(*g)->nodes()[0];
      auto cands = elementwise_family().candidates(node, input_types(node));
      ASSERT_EQ(cands.size(), 1u);
      std::vector<Tensor> host = {random_tensor(t, s, rng_)};
      if (binary) host.push_back(random_tensor(t, {131}, rng_));
      auto want = run_reference(node, host);
      ASSERT_TRUE(want.ok());
      auto dx = upload(host[0]);
      ASSERT_TRUE(dx.ok());
      Tensor db;
      std::vector<const Tensor*> in_ptrs = {&*dx};
      if (binary) {
        auto u = upload(host[1]);
        ASSERT_TRUE(u.ok());
        db = *u;
        in_ptrs.push_back(&db);
      }
      std::vector<Tensor> outs = {*dx};
      backend::StepIO io;
      io.node = &node;
      io.inputs = in_ptrs;
      io.outputs = &outs;
      io.in_place = true;
      ASSERT_TRUE(cands[0]->enqueue(io).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got = download(*dx);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(all_close(*got, (*want)[0])) << op;
    }
  }
}

// No device needed: these run on CPU-only CI machines too.
TEST_F(CudaElementwiseFamilyTest, RefusesWhatTheKernelsCannotDo) {
  const DataType f32 = DataType::kFloat32;
  refuses(17, {{DataType::kFloat64, {4}}}, "Relu");
  refuses(17, {{DataType::kInt32, {4}}}, "Abs");
  refuses(17, {{DataType::kInt64, {4}}, {DataType::kInt64, {4}}}, "Div");  // integer Add/Sub/Mul/Max/Min run
  refuses(17, {{DataType::kInt8, {4}}, {DataType::kInt8, {4}}}, "Add");
  refuses(17, {{f32, {4}}, {DataType::kInt32, {4}}}, "Pow");
  refuses(17, {{f32, {4}}, {f32, {4}}, {f32, {4}}}, "Max");  // variadic: two inputs only
  refuses(17, {{f32, {4}}}, "Max");
  refuses(17, {{f32, {2, 1, 1, 1, 1, 1, 3}}, {f32, {3}}}, "Add");  // 7-D
  refuses(19, {{f32, {4}}}, "Cast {to=6}");
  refuses(19, {{DataType::kInt32, {4}}}, "Cast {to=8}");  // to string
  refuses(19, {{DataType::kFloat16, {4}}}, "Cast {to=7}");  // float -> integer: the reference decides
  refuses(17, {{f32, {2, 1, 1, 1, 1, 1, 3}}}, "Transpose");
  refuses(17, {{DataType::kString, {2, 3}}}, "Transpose");
  // LayerNormalization: Mean/InvStdDev outputs, fp64 stash, broadcasting scale.
  refuses(17, {{f32, {2, 8}}, {f32, {8}}}, "LayerNormalization", "%y, %mean, %inv");
  refuses(17, {{f32, {2, 8}}, {f32, {8}}}, "LayerNormalization {stash_type=11}");
  refuses(17, {{f32, {2, 8}}, {f32, {1}}}, "LayerNormalization");
  refuses(17, {{f32, {2, 8}}, {f32, {8}}}, "LayerNormalization {axis=-2}");
  // Ops outside the family.
  refuses(17, {{f32, {4}}}, "Sin");
  refuses(17, {{f32, {4}}, {f32, {4}}}, "Mod {fmod=1}");
}

TEST_F(CudaElementwiseFamilyTest, CreateRebuildsEveryTacticByName) {
  auto family = elementwise_family();
  EXPECT_EQ(family.name, "elementwise");
  for (const char* k : {"unary", "binary", "where", "cast", "softmax", "layernorm", "transpose"}) {
    auto t = family.create(std::string("cuda.elementwise.") + k, {});
    ASSERT_NE(t, nullptr) << k;
    EXPECT_EQ(t->name(), std::string("cuda.elementwise.") + k);
    EXPECT_TRUE(t->serialize().empty());
  }
  EXPECT_EQ(family.create("cuda.elementwise.nope", {}), nullptr);
  EXPECT_EQ(family.create("cuda.cublaslt.algo1", {}), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
