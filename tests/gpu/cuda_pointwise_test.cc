// Copyright ingot authors. Apache-2.0.
//
// The NVRTC pointwise family (ingot::Pointwise) against the CPU reference (cpu::run_node runs
// the node's body graph). Graphs are written flat in the IR text form and fused by the real
// fuse_pointwise pass, so the bodies are exactly what the optimizer produces. Every op of
// fuse_pointwise's list runs in bodies of 2..6 ops, with fp32 I/O, fp16 I/O (Cast nodes at the
// body's edges, as the fp16 lowering inserts them), and native fp16/bf16 bodies, over
// same-shape (vectorized path, odd tails), scalar and broadcasting shapes (random, each axis).
// Also: the engine round trip (serialize -> create), CUDA-graph capture, refusals, and the
// host-side pieces (launch planning; every generated source compiles with NVRTC for sm_90a),
// which need no GPU and run everywhere.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/pointwise/pointwise_codegen.h"
#include "gpu_test_util.h"
#include "builder/builder.h"
#include "passes/pass.h"
#include "runtime/engine_impl.h"

namespace ingot::passes {
std::unique_ptr<Pass> make_fuse_pointwise();
}
#include "passes/passes.h"

namespace ingot::gpu_test {
namespace {

using backend::Tactic;
using backend::cuda::pointwise_family;

/// How the float values of a case are typed.
enum class Mode { kF32, kF16Io, kF16, kBF16 };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kF32: return "f32";
    case Mode::kF16Io: return "f16 I/O, f32 body";
    case Mode::kF16: return "f16 body";
    case Mode::kBF16: return "bf16 body";
  }
  return "?";
}

struct In {
  std::string name;
  DataType fixed = DataType::kUndefined;  ///< kUndefined: a float input typed by the mode
  double lo = -3, hi = 3;
  bool scalar = false;       ///< always shaped [] (Clip's bounds)
  bool like_first = false;   ///< input 0's shape with every other dim 1 (PRelu's slope must fit X)
};

/// A body: `ops` uses $name for each input and assigns $y last; `floats_out` says whether $y is
/// a float (else bool/int, never cast).
struct Case {
  std::string label;
  std::vector<In> ins;
  std::string ops;
  bool float_out = true;
  int64_t opset = 17;
};

std::string dims_text(const Shape64& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

DataType float_type(Mode m) {
  return m == Mode::kF32 ? DataType::kFloat32 : m == Mode::kBF16 ? DataType::kBFloat16 : DataType::kFloat16;
}

Shape64 shape_of(const Case& c, size_t i, const std::vector<Shape64>& shapes) {
  if (c.ins[i].scalar) return {};
  if (!c.ins[i].like_first) return shapes[i];
  Shape64 s = shapes[0];
  for (size_t d = 0; d < s.size(); d += 2) s[d] = 1;
  return s;
}

/// The flat graph text of a case for `mode` and per-input shapes.
std::string case_text(const Case& c, Mode mode, const std::vector<Shape64>& shapes) {
  std::string g = "graph main {\n  opset \"\" " + std::to_string(c.opset) + "\n  opset \"ingot\" 1\n";
  std::string pre, ops = c.ops;
  for (size_t i = 0; i < c.ins.size(); ++i) {
    const In& in = c.ins[i];
    DataType t = in.fixed != DataType::kUndefined ? in.fixed : float_type(mode);
    g += "  input %" + in.name + ": " + data_type_name(t) + dims_text(shape_of(c, i, shapes)) + "\n";
    if (mode == Mode::kF16Io && in.fixed == DataType::kUndefined) {
      // One Cast per use, so every Cast has one reader and fuses (the fp16 lowering puts them
      // on the body's edges the same way).
      int uses = 0;
      for (const char* end : {")", ","}) {
        const std::string from = "$" + in.name + end;
        for (size_t p = ops.find(from); p != std::string::npos; p = ops.find(from)) {
          const std::string v = "%" + in.name + "_f" + std::to_string(uses++);
          pre += "  " + v + " = Cast {to=1}(%" + in.name + ")\n";
          ops.replace(p, from.size(), v + end);
        }
      }
    }
    ops = replace_all(ops, "$" + in.name + ")", "%" + in.name + ")");
    ops = replace_all(ops, "$" + in.name + ",", "%" + in.name + ",");
  }
  std::string post;
  if (mode == Mode::kF16Io && c.float_out) {
    ops = replace_all(ops, "$y", "%y_f");
    post = "  %y = Cast {to=10}(%y_f)\n";
  } else {
    ops = replace_all(ops, "$y", "%y");
  }
  return g + pre + ops + post + "  output %y\n}\n";
}

/// Parses, infers and fuses; the Pointwise node must be the graph's only node.
Result<std::unique_ptr<ir::Graph>> fused_graph(const std::string& text) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g, parse_graph(text));
  passes::PassContext ctx;
  INGOT_ASSIGN_OR_RETURN(bool changed, passes::make_fuse_pointwise()->run(*g, ctx));
  if (!changed || g->nodes().size() != 1 || g->nodes()[0]->op_type() != "Pointwise")
    return internal_error("fuse_pointwise did not make the whole graph one Pointwise node:\n", ir::to_text(*g));
  INGOT_RETURN_IF_ERROR(ir::infer_graph(*g));
  return g;
}

const In kA{"a"}, kB{"b"}, kC{"c"};
const In kPosA{"a", DataType::kUndefined, 0.1, 4};

/// Every op of fuse_pointwise's list, each in at least one body.
std::vector<Case> all_cases() {
  std::vector<Case> v;
  struct Unary { const char* op; double lo, hi; int64_t opset = 17; };
  const Unary unary[] = {
      {"Abs", -3, 3}, {"Neg", -3, 3}, {"Exp", -4, 4}, {"Log", 0.05, 8}, {"Sqrt", 0.01, 9}, {"Reciprocal", -3, 3},
      {"Relu", -3, 3}, {"Sigmoid", -8, 8}, {"Tanh", -3, 3}, {"Erf", -3, 3}, {"Floor", -3, 3}, {"Ceil", -3, 3},
      {"Round", -3, 3}, {"Sign", -3, 3}, {"Sin", -3, 3}, {"Cos", -3, 3}, {"Tan", -1.2, 1.2}, {"Softplus", -8, 8},
      {"Softsign", -3, 3}, {"HardSwish", -5, 5}, {"HardSigmoid", -5, 5}, {"HardSigmoid {alpha=0.3, beta=0.4}", -5, 5},
      {"LeakyRelu", -3, 3}, {"LeakyRelu {alpha=0.25}", -3, 3}, {"Elu", -3, 3}, {"Elu {alpha=0.5}", -3, 3},
      {"Selu", -3, 3}, {"Celu", -3, 3}, {"Celu {alpha=2.0}", -3, 3}, {"Mish", -4, 4, 18}, {"ThresholdedRelu", -3, 3},
      {"ThresholdedRelu {alpha=0.5}", -3, 3},
  };
  for (const Unary& u : unary) {
    Case c{std::string(u.op) + " * b", {In{"a", DataType::kUndefined, u.lo, u.hi}, kB},
           std::string("  %t = ") + u.op + "($a)\n  $y = Mul(%t, $b)\n", true, u.opset};
    v.push_back(c);
  }
  v.push_back({"Gelu(erf) + b", {kA, kB}, "  %t = Gelu($a)\n  $y = Add(%t, $b)\n", true, 20});
  // The activations recognize_gelu_silu makes: Llama's gated MLP is silu(gate) * up.
  v.push_back({"ingot::Silu * b", {In{"a", DataType::kUndefined, -8, 8}, kB}, "  %t = ingot::Silu($a)\n  $y = Mul(%t, $b)\n",
               true, 17});
  v.push_back({"ingot::Gelu(tanh) * b", {kA, kB}, "  %t = ingot::Gelu {approximate=\"tanh\"}($a)\n  $y = Mul(%t, $b)\n",
               true, 17});
  v.push_back({"Gelu(tanh) * b", {kA, kB}, "  %t = Gelu {approximate=\"tanh\"}($a)\n  $y = Mul(%t, $b)\n", true, 20});
  v.push_back({"residual Add+Relu", {kA, kB}, "  %t = Add($a, $b)\n  $y = Relu(%t)\n"});
  v.push_back({"bias, scale, sub, div", {kA, kB, kC},
               "  %t = Add($a, $b)\n  %u = Mul(%t, $c)\n  %w = Sub(%u, $a)\n  $y = Div(%w, $c)\n"});
  v.push_back({"Pow float exponent", {kPosA, In{"b", DataType::kUndefined, -2, 2}},
               "  %t = Pow($a, $b)\n  $y = Add(%t, $b)\n"});
  v.push_back({"Pow int exponent", {In{"a", DataType::kUndefined, -2, 2}, In{"b", DataType::kInt32, -3, 4}},
               "  %t = Pow($a, $b)\n  $y = Neg(%t)\n"});
  v.push_back({"variadic Max / Min", {kA, kB, kC}, "  %t = Max($a, $b, $c)\n  %u = Min($a, $b)\n  $y = Sub(%t, %u)\n"});
  v.push_back({"compare + Where", {kA, kB, kC},
               "  %p = Less($a, $b)\n  %q = GreaterOrEqual($b, $c)\n  %r = And(%p, %q)\n  %s = Not(%r)\n"
               "  %t = Where(%s, $a, $c)\n  $y = Mul(%t, $b)\n"});
  v.push_back({"Equal/Greater/LessOrEqual, Or/Xor", {kA, kB},
               "  %p = Greater($a, $b)\n  %q = LessOrEqual($a, $b)\n  %e = Equal($a, $a)\n  %r = Or(%p, %q)\n"
               "  %s = Xor(%r, %e)\n  $y = Where(%s, $a, $b)\n"});
  v.push_back({"bool output", {kA, kB}, "  %t = Exp($a)\n  $y = Greater(%t, $b)\n", false});
  v.push_back({"int64 mask", {In{"m", DataType::kInt64, -2, 2}, In{"z", DataType::kInt64, 0, 1}, kA, kB},
               "  %p = Equal($m, $z)\n  %t = Where(%p, $a, $b)\n  $y = Sigmoid(%t)\n"});
  v.push_back({"int32 arithmetic", {In{"i", DataType::kInt32, -50, 50}, In{"j", DataType::kInt32, -50, 50}},
               "  %t = Mul($i, $j)\n  %u = Sub(%t, $j)\n  %w = Abs(%u)\n  %s = Neg(%w)\n  %r = Max(%s, $i)\n"
               "  $y = Relu(%r)\n", false});
  v.push_back({"Clip with min and max inputs", {kA, kB, In{"lo", DataType::kUndefined, -1, -0.5, true},
               In{"hi", DataType::kUndefined, 0.5, 1, true}},
               "  %t = Mul($a, $b)\n  $y = Clip(%t, $lo, $hi)\n"});
  v.push_back({"Clip with max only", {kA, In{"hi", DataType::kUndefined, 0.5, 1, true}},
               "  %t = Exp($a)\n  $y = Clip(%t, _, $hi)\n"});
  v.push_back({"Clip with no bounds", {kA, kB}, "  %t = Clip($a)\n  $y = Add(%t, $b)\n"});
  v.push_back({"PRelu", {kA, kB, In{"s", DataType::kUndefined, 0.1, 0.9, false, true}},
               "  %t = Add($a, $b)\n  $y = PRelu(%t, $s)\n"});
  v.push_back({"float Casts inside", {kA, kB},
               "  %t = Mul($a, $b)\n  %h = Cast {to=10}(%t)\n  %bf = Cast {to=16}(%h)\n  %f = Cast {to=1}(%bf)\n"
               "  $y = Add(%f, $a)\n"});
  // Integer and bool Casts (is_plain_cast): widening, wrapping narrowing (i64 -> i8 -> u8), to and
  // from bool, then integer to float: i64 -> f32 past 2^24 (rounds), i64 -> f16, a wrapped i16 -> bf16.
  v.push_back({"integer and bool Casts", {In{"m", DataType::kInt64, -100000, 100000}, In{"z", DataType::kInt64, -3, 3}},
               "  %g = Greater($m, $z)\n  %i = Cast {to=6}(%g)\n  %l = Cast {to=7}(%i)\n  %k = Add(%l, $m)\n"
               "  %s = Cast {to=3}(%k)\n  %u = Cast {to=2}(%s)\n  %w = Cast {to=12}(%u)\n  %v = Cast {to=7}(%w)\n"
               "  %b = Cast {to=9}($m)\n  %c = Cast {to=7}(%b)\n  $y = Add(%v, %c)\n",
               false});
  v.push_back({"integer to float Casts",
               {In{"n", DataType::kInt64, -1099511627776.0, 1099511627776.0}, In{"m", DataType::kInt64, -60000, 60000}, kA},
               "  %f = Cast {to=1}($n)\n  %h = Cast {to=10}($m)\n  %hf = Cast {to=1}(%h)\n  %s = Cast {to=5}($m)\n"
               "  %bf = Cast {to=16}(%s)\n  %bff = Cast {to=1}(%bf)\n  %t = Add(%hf, %bff)\n  %t2 = Mul(%t, $a)\n"
               "  $y = Add(%t2, %f)\n"});
  v.push_back({"six ops", {kA, kB, kC},
               "  %t1 = Mul($a, $b)\n  %t2 = Add(%t1, $c)\n  %t3 = Tanh(%t2)\n  %t4 = Sub(%t3, $a)\n"
               "  %t5 = Sigmoid(%t4)\n  $y = Mul(%t5, $c)\n"});
  return v;
}

/// Modes a case runs in: float cases in all four; the f16/bf16 bodies skip cases whose ops are
/// written for fp32 (float Casts inside use fixed types).
std::vector<Mode> modes_for(const Case& c) {
  if (c.label == "float Casts inside") return {Mode::kF32, Mode::kF16Io};
  if (c.label == "integer to float Casts") return {Mode::kF32};  // sums near 2^40 overflow an fp16 output
  return {Mode::kF32, Mode::kF16Io, Mode::kF16, Mode::kBF16};
}

/// Input shapes for one run: 0 same shape (vectorized path + tail), 1 NCHW with a per-channel and
/// a scalar operand, 2 and 3 broadcasting along rows that the packed kernel serves, 4.. random.
std::vector<Shape64> shapes_for(size_t n, int config, std::mt19937& rng) {
  std::vector<Shape64> s(n);
  if (config == 0) {
    for (auto& x : s) x = {3, 343};
    return s;
  }
  if (config == 1) {
    for (size_t i = 0; i < n; ++i) s[i] = i == 0 ? Shape64{2, 3, 5, 7} : i == 1 ? Shape64{1, 3, 1, 1} : Shape64{};
    return s;
  }
  if (config == 2) {  // per-channel operand over rows of 16: the vector-along-rows kernel
    for (size_t i = 0; i < n; ++i) s[i] = i == 0 ? Shape64{4, 3, 16} : i == 1 ? Shape64{3, 1} : Shape64{};
    return s;
  }
  if (config == 3) {  // a row vector and a column over [5, 24]
    for (size_t i = 0; i < n; ++i) s[i] = i == 0 ? Shape64{5, 24} : i == 1 ? Shape64{24} : Shape64{5, 1};
    return s;
  }
  const int64_t sizes[] = {1, 2, 3, 5, 7, 13};
  std::uniform_int_distribution<int> rank_d(1, 5), size_d(0, 5), coin(0, 9);
  Shape64 out(static_cast<size_t>(rank_d(rng)));
  for (auto& d : out) d = sizes[size_d(rng)];
  for (size_t i = 0; i < n; ++i) {
    size_t drop = static_cast<size_t>(coin(rng) < 3 ? coin(rng) % (out.size() + 1) : 0);
    Shape64 x(out.begin() + static_cast<std::ptrdiff_t>(drop), out.end());
    for (auto& d : x)
      if (coin(rng) < 4) d = 1;
    s[i] = x;
  }
  return s;
}

Tensor random_input(const In& in, DataType t, const Shape64& shape, std::mt19937& rng) {
  if (is_integer(t)) {
    Tensor x = Tensor::zeros(t, shape).value();
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(in.lo), static_cast<int64_t>(in.hi));
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(d(rng)));
    return x;
  }
  return random_tensor(t, shape, rng, in.lo, in.hi, /*nonzero=*/true, 0.05);
}

const ir::Node& pointwise_node(const ir::Graph& g) { return *g.nodes()[0]; }

/// The CPU reference for a Pointwise node (runs its body; the body reads no outer values).
Result<Tensor> reference(const ir::Node& node, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  auto runner = cpu::make_subgraph_runner([](const ir::Value*) -> const Tensor* { return nullptr; });
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, cpu::run_node(node, ptrs, runner));
  if (outs.size() != 1) return internal_error("reference returned ", outs.size(), " outputs");
  return outs[0];
}

::testing::AssertionResult matches_cpu(const Tactic& tactic, const ir::Node& node, const std::vector<Tensor>& inputs) {
  auto got = run_tactic(tactic, node, inputs);
  if (!got.ok()) return ::testing::AssertionFailure() << "tactic: " << got.status().to_string();
  auto want = reference(node, inputs);
  if (!want.ok()) return ::testing::AssertionFailure() << "reference: " << want.status().to_string();
  return all_close((*got)[0], *want);
}

/// Host tensors for the Pointwise node's inputs (its inputs are graph inputs, by name).
std::vector<Tensor> inputs_for(const Case& c, const ir::Node& node, std::mt19937& rng) {
  std::vector<Tensor> data;
  for (const ir::Value* v : node.inputs()) {
    const In* spec = nullptr;
    for (const In& in : c.ins)
      if (in.name == v->name()) spec = &in;
    data.push_back(random_input(spec ? *spec : kA, v->dtype(), v->shape().concrete(), rng));
  }
  return data;
}

/// DenseNet's Concat of feature maps with its BatchNorm + Relu after it, as the builder leaves it:
/// fp16 pieces of `widths` channels along `axis` of [N, H, W, C] (axis 3) or [N, C, H, W] (axis 1),
/// the Cast to fp32, scale, shift, Relu and the Cast back in one Pointwise whose body starts with the
/// Concat (fuse_pointwise, then fuse_concat_pointwise).
Result<std::unique_ptr<ir::Graph>> concat_graph(const std::vector<int64_t>& widths, int axis, int64_t n = 2,
                                                int64_t h = 5, int64_t w = 3) {
  int64_t total = 0;
  std::string t = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n", args;
  for (size_t j = 0; j < widths.size(); ++j) {
    const Shape64 s = axis == 3 ? Shape64{n, h, w, widths[j]} : Shape64{n, widths[j], h, w};
    t += "  input %x" + std::to_string(j) + ": f16" + dims_text(s) + "\n";
    args += (j ? ", %x" : "%x") + std::to_string(j);
    total += widths[j];
  }
  const std::string param = axis == 3 ? dims_text({total}) : dims_text({total, 1, 1});
  t += "  input %s: f32" + param + "\n  input %t: f32" + param + "\n  %c = Concat {axis=" + std::to_string(axis) +
       "}(" + args + ")\n  %cf = Cast {to=1}(%c)\n  %m = Mul(%cf, %s)\n  %a = Add(%m, %t)\n  %r = Relu(%a)\n" +
       "  %y = Cast {to=10}(%r)\n  output %y\n}\n";
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g, parse_graph(t));
  passes::PassContext ctx;
  INGOT_RETURN_IF_ERROR(passes::make_fuse_pointwise()->run(*g, ctx).status());
  INGOT_RETURN_IF_ERROR(passes::make_fuse_concat_pointwise({})->run(*g, ctx).status());
  if (g->nodes().size() != 1 || g->nodes()[0]->op_type() != "Pointwise")
    return internal_error("not one Pointwise node:\n", ir::to_text(*g));
  INGOT_RETURN_IF_ERROR(ir::infer_graph(*g));
  return g;
}

/// Random inputs of a concat_graph's node: pieces in [-3, 3], the scale in [0.5, 2], the shift in [-1, 1].
std::vector<Tensor> concat_inputs(const ir::Node& node, std::mt19937& rng) {
  std::vector<Tensor> data;
  for (const ir::Value* v : node.inputs()) {
    const bool scale = v->name() == "s", shift = v->name() == "t";
    data.push_back(random_input(In{v->name(), DataType::kUndefined, scale ? 0.5 : shift ? -1.0 : -3.0,
                                   scale ? 2.0 : shift ? 1.0 : 3.0},
                                v->dtype(), v->shape().concrete(), rng));
  }
  return data;
}

// ---- host-only: no device needed -------------------------------------------------------------

TEST(CudaPointwiseHost, PlanCollapsesAndDetectsFlat) {
  using backend::cuda::PointwiseArgs;
  using backend::cuda::plan_pointwise_launch;
  PointwiseArgs a;
  bool flat = false;
  Shape64 x{2, 3, 4, 5}, bias{1, 3, 1, 1}, scalar{}, same{2, 3, 4, 5}, row{5};
  const Shape64* ins1[] = {&x, &bias};
  ASSERT_TRUE(plan_pointwise_launch(x, ins1, 2, &a, &flat));
  EXPECT_FALSE(flat);
  ASSERT_EQ(a.rank, 3);
  EXPECT_EQ(a.n, 120);
  EXPECT_EQ(a.dims[0], 2);
  EXPECT_EQ(a.dims[1], 3);
  EXPECT_EQ(a.dims[2], 20);
  EXPECT_EQ(a.strides[0][0], 60);
  EXPECT_EQ(a.strides[0][1], 20);
  EXPECT_EQ(a.strides[0][2], 1);
  EXPECT_EQ(a.strides[1][0], 0);
  EXPECT_EQ(a.strides[1][1], 1);
  EXPECT_EQ(a.strides[1][2], 0);
  const Shape64* ins2[] = {&x, &same, &scalar};
  ASSERT_TRUE(plan_pointwise_launch(x, ins2, 3, &a, &flat));
  EXPECT_TRUE(flat);
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.strides[0][0], 1);
  EXPECT_EQ(a.strides[2][0], 0);
  const Shape64* ins3[] = {&x, &row};
  ASSERT_TRUE(plan_pointwise_launch(x, ins3, 2, &a, &flat));
  EXPECT_FALSE(flat);
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.dims[0], 24);
  EXPECT_EQ(a.dims[1], 5);
  Shape64 bad{4};
  const Shape64* ins4[] = {&x, &bad};
  EXPECT_FALSE(plan_pointwise_launch(x, ins4, 2, &a, &flat));
  // Ten dims that collapse to one still run.
  Shape64 deep(10, 2);
  const Shape64* ins5[] = {&deep, &deep};
  ASSERT_TRUE(plan_pointwise_launch(deep, ins5, 2, &a, &flat));
  EXPECT_TRUE(flat);
  EXPECT_EQ(a.n, 1024);
}

// Every case's generated source compiles for the H200 (NVRTC needs no device), each case in one
// of its modes, in turn, to keep CI time down (the GPU test compiles every mode).
TEST(CudaPointwiseHost, EveryCaseCompilesWithNvrtc) {
  size_t turn = 0;
  for (const Case& c : all_cases()) {
    const std::vector<Mode> modes = modes_for(c);
    for (Mode m : {modes[turn++ % modes.size()]}) {
      std::vector<Shape64> shapes(c.ins.size(), Shape64{2, 3});
      const std::string text = case_text(c, m, shapes);
      SCOPED_TRACE(c.label + " / " + mode_name(m) + "\n" + text);
      auto g = fused_graph(text);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      const ir::Node& node = pointwise_node(**g);
      std::vector<DataType> storage;
      for (const ir::Value* v : node.inputs()) storage.push_back(v->dtype());
      auto src = backend::cuda::generate_pointwise_source(node, storage, node.output(0)->dtype());
      ASSERT_TRUE(src.ok()) << src.status().to_string();
      if (std::getenv("INGOT_DUMP_POINTWISE"))  // to read what the generator writes
        std::printf("==== %s / %s\n%s\n", c.label.c_str(), mode_name(m), src->source.c_str());
      auto cubin = backend::cuda::compile_pointwise_source(src->source, "sm_90a");
      ASSERT_TRUE(cubin.ok()) << cubin.status().to_string() << "\n" << src->source;
      EXPECT_GT(cubin->size(), 0u);
    }
  }
}

// The test inputs are in every op's domain: the reference runs every case without error or NaN.
TEST(CudaPointwiseHost, ReferenceRunsEveryCase) {
  std::mt19937 rng(7);
  for (const Case& c : all_cases()) {
    for (Mode m : modes_for(c)) {
      for (int config = 0; config < 8; ++config) {
        const std::string text = case_text(c, m, shapes_for(c.ins.size(), config, rng));
        SCOPED_TRACE(c.label + " / " + mode_name(m) + "\n" + text);
        auto g = fused_graph(text);
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        const ir::Node& node = pointwise_node(**g);
        auto want = reference(node, inputs_for(c, node, rng));
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        for (int64_t i = 0; i < want->numel(); ++i) ASSERT_FALSE(std::isnan(want->get_f64(i))) << "element " << i;
      }
    }
  }
}

TEST(CudaPointwiseHost, RefusesWhatItCannotMirror) {
  // Integer Div (the reference errors on division by zero) is left to the host fallback.
  Case c{"int div", {In{"i", DataType::kInt32}, In{"j", DataType::kInt32}}, "  %t = Div($i, $j)\n  $y = Add(%t, $i)\n",
         false};
  auto g = fused_graph(case_text(c, Mode::kF32, {{4}, {4}}));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = pointwise_node(**g);
  auto src = backend::cuda::generate_pointwise_source(node, {DataType::kInt32, DataType::kInt32}, DataType::kInt32);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("Div"), std::string::npos) << src.status().message();
  EXPECT_NE(src.status().message().find("Pointwise"), std::string::npos) << src.status().message();
  EXPECT_TRUE(pointwise_family().candidates(node, input_types(node)).empty());
  // Storage of another kind than the body's input (int stored, float read) is refused.
  Case f{"float", {kA, kB}, "  %t = Add($a, $b)\n  $y = Relu(%t)\n"};
  auto g2 = fused_graph(case_text(f, Mode::kF32, {{4}, {4}}));
  ASSERT_TRUE(g2.ok());
  EXPECT_FALSE(backend::cuda::generate_pointwise_source(pointwise_node(**g2), {DataType::kInt32, DataType::kFloat32},
                                                        DataType::kFloat32)
                   .ok());
}

TEST(CudaPointwiseHost, CompileErrorsCarryTheLog) {
  auto r =
      backend::cuda::compile_pointwise_source("extern \"C\" __global__ void k() { undeclared_thing(); }", "sm_90a");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("undeclared_thing"), std::string::npos) << r.status().message();
}

// A body that starts with a Concat: its pieces are not kernel inputs of their own (x0 is gathered),
// the source compiles, and a Concat with more pieces than the kernel takes is refused.
TEST(CudaPointwiseHost, LeadingConcatCompilesWithNvrtc) {
  for (int axis : {3, 1}) {
    auto g = concat_graph({16, 8, 8}, axis);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = pointwise_node(**g);
    ASSERT_EQ(node.inputs().size(), 5u);
    std::vector<DataType> storage;
    for (const ir::Value* v : node.inputs()) storage.push_back(v->dtype());
    auto src = backend::cuda::generate_pointwise_source(node, storage, node.output(0)->dtype());
    ASSERT_TRUE(src.ok()) << src.status().to_string();
    EXPECT_EQ(src->concat.pieces, 3);
    EXPECT_EQ(src->concat.axis, axis);
    EXPECT_NE(src->source.find("pw_cat_ld"), std::string::npos);
    if (std::getenv("INGOT_DUMP_POINTWISE")) std::printf("==== leading Concat, axis %d\n%s\n", axis, src->source.c_str());
    auto cubin = backend::cuda::compile_pointwise_source(src->source, "sm_90a");
    ASSERT_TRUE(cubin.ok()) << cubin.status().to_string() << "\n" << src->source;
  }
  auto big = concat_graph(std::vector<int64_t>(backend::cuda::kPointwiseMaxConcat + 1, 4), 3, 1, 1, 1);
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_TRUE(pointwise_family().candidates(pointwise_node(**big), input_types(pointwise_node(**big))).empty());
}

// ---- on the GPU ---------------------------------------------------------------------------------

class CudaPointwiseTest : public CudaTest {
 protected:
  std::mt19937 rng_{2024};

  /// A prepared candidate for the graph's Pointwise node.
  std::unique_ptr<Tactic> prepared(const ir::Node& node) {
    auto cands = pointwise_family().candidates(node, input_types(node));
    if (cands.size() != 1) return nullptr;
    Status st = cands[0]->prepare(node);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return nullptr;
    return std::move(cands[0]);
  }
};

TEST_F(CudaPointwiseTest, EveryOpMatchesReference) {
  int runs = 0;
  for (const Case& c : all_cases()) {
    for (Mode m : modes_for(c)) {
      for (int config = 0; config < 8; ++config) {
        std::vector<Shape64> shapes = shapes_for(c.ins.size(), config, rng_);
        const std::string text = case_text(c, m, shapes);
        SCOPED_TRACE(c.label + " / " + mode_name(m) + "\n" + text);
        auto g = fused_graph(text);
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        const ir::Node& node = pointwise_node(**g);
        auto tactic = prepared(node);
        ASSERT_NE(tactic, nullptr) << "family refused the node";
        EXPECT_EQ(tactic->name(), "cuda.pointwise.nvrtc");
        EXPECT_TRUE(tactic->capturable());
        std::vector<Tensor> data = inputs_for(c, node, rng_);
        EXPECT_TRUE(matches_cpu(*tactic, node, data));
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 600);
}

TEST_F(CudaPointwiseTest, LargeAndOddSizesTakeEveryKernel) {
  Case c{"residual", {kA, kB}, "  %t = Add($a, $b)\n  %u = Relu(%t)\n  $y = Mul(%u, $b)\n"};
  const std::vector<std::vector<Shape64>> shape_sets = {
      {{1}, {1}}, {{7}, {7}}, {{8}, {8}}, {{1 << 20}, {1 << 20}}, {{1000003}, {}},  // flat, vec + tail
      {{64, 1, 999}, {1, 33, 999}}, {{256, 4097}, {4097}},                         // general32
      {{64, 33, 1024}, {33, 1}}, {{1000, 4096}, {4096}}, {{2, 4096}, {2, 1}},       // packed rows
      {{8, 3, 196}, {3, 1}}, {{4, 3, 20}, {3, 1}}, {{4, 3, 6}, {3, 1}},             // half packs, none
      {{2, 3, 0, 5}, {5}},                                                          // empty: no launch
  };
  for (Mode m : {Mode::kF32, Mode::kF16Io, Mode::kF16}) {
    for (const auto& shapes : shape_sets) {
      const std::string text = case_text(c, m, shapes);
      SCOPED_TRACE(std::string(mode_name(m)) + "\n" + text);
      auto g = fused_graph(text);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      const ir::Node& node = pointwise_node(**g);
      auto tactic = prepared(node);
      ASSERT_NE(tactic, nullptr);
      EXPECT_TRUE(matches_cpu(*tactic, node, inputs_for(c, node, rng_)));
    }
  }
}

TEST_F(CudaPointwiseTest, EngineRoundTripNeedsNoCompiler) {
  Case c{"gelu bias", {kA, kB}, "  %t = Add($a, $b)\n  $y = Gelu(%t)\n", true, 20};
  auto g = fused_graph(case_text(c, Mode::kF16Io, {{4, 77}, {77}}));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = pointwise_node(**g);
  auto tactic = prepared(node);
  ASSERT_NE(tactic, nullptr);
  std::vector<uint8_t> params = tactic->serialize();
  ASSERT_GT(params.size(), 64u);
  std::unique_ptr<Tactic> rebuilt = pointwise_family().create(tactic->name(), params);
  ASSERT_NE(rebuilt, nullptr);
  std::vector<Tensor> data = inputs_for(c, node, rng_);
  EXPECT_TRUE(matches_cpu(*rebuilt, node, data));
  // Bit-identical to the tactic that compiled it.
  auto x = run_tactic(*tactic, node, data);
  auto y = run_tactic(*rebuilt, node, data);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(std::memcmp((*x)[0].raw(), (*y)[0].raw(), (*x)[0].nbytes()), 0);
  // Damaged parameters give a clear error at enqueue, not a crash.
  params.resize(params.size() / 2);
  std::unique_ptr<Tactic> broken = pointwise_family().create(tactic->name(), params);
  ASSERT_NE(broken, nullptr);
  auto r = run_tactic(*broken, node, data);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rebuild"), std::string::npos) << r.status().message();
  EXPECT_EQ(pointwise_family().create("cuda.pointwise.other", {}), nullptr);
}

// The joined value read from its pieces, against the CPU reference (which runs the Concat): packs
// within pieces (widths multiples of 8, channels-last), half packs (multiples of 4), single
// elements (odd widths), channels-first (packs along H*W), DenseNet's 25-piece Concat; and the
// engine round trip rebuilds the kernel with its pieces.
TEST_F(CudaPointwiseTest, LeadingConcatMatchesReference) {
  struct Shape {
    std::vector<int64_t> widths;
    int axis;
    int64_t n, h, w;
  } shapes[] = {
      {{16, 8, 8}, 3, 2, 5, 3},  {{64, 32, 32, 32}, 3, 4, 7, 7}, {{12, 4, 20}, 3, 1, 9, 9},
      {{3, 5, 7}, 3, 2, 3, 5},   {{16, 8}, 1, 2, 8, 8},           {{5, 3}, 1, 3, 5, 5},
      {{1, 2}, 3, 1, 1, 1},
  };
  for (const Shape& sh : shapes) {
    auto g = concat_graph(sh.widths, sh.axis, sh.n, sh.h, sh.w);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    SCOPED_TRACE(ir::to_text(**g));
    const ir::Node& node = pointwise_node(**g);
    auto tactic = prepared(node);
    ASSERT_NE(tactic, nullptr);
    EXPECT_TRUE(matches_cpu(*tactic, node, concat_inputs(node, rng_)));
  }
  std::vector<int64_t> dense(25, 32);
  dense[0] = 256;
  auto g = concat_graph(dense, 3, 2, 14, 14);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = pointwise_node(**g);
  auto tactic = prepared(node);
  ASSERT_NE(tactic, nullptr);
  std::vector<Tensor> data = concat_inputs(node, rng_);
  EXPECT_TRUE(matches_cpu(*tactic, node, data));
  std::unique_ptr<Tactic> rebuilt = pointwise_family().create(tactic->name(), tactic->serialize());
  ASSERT_NE(rebuilt, nullptr);
  auto x = run_tactic(*tactic, node, data);
  auto y = run_tactic(*rebuilt, node, data);
  ASSERT_TRUE(x.ok() && y.ok()) << (x.ok() ? y.status().to_string() : x.status().to_string());
  EXPECT_EQ(std::memcmp((*x)[0].raw(), (*y)[0].raw(), (*x)[0].nbytes()), 0);
}

TEST_F(CudaPointwiseTest, CapturedGraphReplayIsBitIdentical) {
  Case c{"bias sigmoid", {kA, kB}, "  %t = Add($a, $b)\n  $y = Sigmoid(%t)\n"};
  auto g = fused_graph(case_text(c, Mode::kF32, {{33, 65}, {65}}));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = pointwise_node(**g);
  auto tactic = prepared(node);
  ASSERT_NE(tactic, nullptr);
  std::vector<Tensor> data = inputs_for(c, node, rng_);
  auto want = run_tactic(*tactic, node, data);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  auto da = upload(data[0]);
  auto db = upload(data[1]);
  auto dy = device_alloc(DataType::kFloat32, {33, 65});
  ASSERT_TRUE(da.ok() && db.ok() && dy.ok());
  ASSERT_TRUE(poison(*dy).ok());
  std::vector<Tensor> outs = {*dy};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend::StepIO io;
  io.node = &node;
  io.inputs = {&*da, &*db};
  io.outputs = &outs;
  io.stream = stream;
  {
    const Status st = capture_and_replay(*tactic, io);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(std::memcmp(got->raw(), (*want)[0].raw(), got->nbytes()), 0);
  cudaStreamDestroy(stream);
}


// Through the builder and the engine: the residual Add+Relu(+bias) of a ResNet block becomes one
// Pointwise step on the NVRTC tactic, and the engine (rebuilt from the plan's parameters) matches
// the CPU reference of the unfused graph.
TEST_F(CudaPointwiseTest, EngineStepUsesTheGeneratedKernel) {
  const std::string text = R"(graph main {
  opset "" 17
  input %x: f32[2,8,5,5]
  input %r: f32[2,8,5,5]
  init %bias: f32[8,1,1] = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8]
  %s = Add(%x, %bias)
  %t = Add(%s, %r)
  %y = Relu(%t)
  output %y
})";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<Tensor> data = {random_tensor(DataType::kFloat32, {2, 8, 5, 5}, rng_),
                              random_tensor(DataType::kFloat32, {2, 8, 5, 5}, rng_)};
  // Reference: the unfused nodes one by one on the CPU.
  const auto& nodes = (*g)->nodes();
  auto s = cpu::run_node(*nodes[0], {&data[0], (*g)->initializers()[0]->initializer()});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto t = cpu::run_node(*nodes[1], {&(*s)[0], &data[1]});
  ASSERT_TRUE(t.ok());
  auto want = cpu::run_node(*nodes[2], {&(*t)[0]});
  ASSERT_TRUE(want.ok());

  builder::BuildOptions opt;
  opt.backend = "cuda";
  std::shared_ptr<ir::Graph> graph(std::move(*g));
  auto plan = builder::build_plan(graph, {}, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = runtime::make_engine(std::move(*plan));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  bool found = false;
  for (const LayerDesc& l : (*engine)->layers()) {
    EXPECT_NE(l.tactic, "cuda.host_fallback") << l.name;
    found |= l.tactic == "cuda.pointwise.nvrtc";
  }
  EXPECT_TRUE(found);
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  auto dx = upload(data[0]);
  auto dr = upload(data[1]);
  auto dy = device_alloc(DataType::kFloat32, {2, 8, 5, 5});
  ASSERT_TRUE(dx.ok() && dr.ok() && dy.ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("x", dx->mutable_raw()).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("r", dr->mutable_raw()).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("y", dy->mutable_raw()).ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Status st = (*ctx)->enqueue(stream);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  auto got = download(*dy);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(all_close(*got, (*want)[0]));
}


// Not a pass/fail check: prints the bandwidth of two ResNet-style epilogues in fp16 (residual
// Add+Relu on same-shape tensors, the vectorized path; and per-channel bias + Relu, the
// broadcasting path), so regressions show in the GPU log.
TEST_F(CudaPointwiseTest, ReportsBandwidth) {
  struct Perf { const char* label; Case c; std::vector<Shape64> shapes; };
  const Perf perfs[] = {
      {"residual add+relu f16 [64,256,56,56]", {"r", {kA, kB}, "  %t = Add($a, $b)\n  $y = Relu(%t)\n"},
       {{64, 256, 56, 56}, {64, 256, 56, 56}}},
      {"bias+relu f16 [64,256,56,56]+[256,1,1]", {"b", {kA, kB}, "  %t = Add($a, $b)\n  $y = Relu(%t)\n"},
       {{64, 256, 56, 56}, {256, 1, 1}}},
  };
  for (const Perf& p : perfs) {
    auto g = fused_graph(case_text(p.c, Mode::kF16, p.shapes));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = pointwise_node(**g);
    auto tactic = prepared(node);
    ASSERT_NE(tactic, nullptr);
    std::vector<Tensor> dev;
    for (const Shape64& sh : p.shapes) {
      auto d = device_alloc(DataType::kFloat16, sh);
      ASSERT_TRUE(d.ok());
      ASSERT_EQ(cudaMemset(d->mutable_raw(), 0x3c, d->nbytes()), cudaSuccess);
      dev.push_back(*d);
    }
    auto y = device_alloc(DataType::kFloat16, p.shapes[0]);
    ASSERT_TRUE(y.ok());
    std::vector<Tensor> outs = {*y};
    backend::StepIO io;
    io.node = &node;
    io.inputs = {&dev[0], &dev[1]};
    io.outputs = &outs;
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    io.stream = stream;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(tactic->enqueue(io).ok());
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int iters = 20;
    cudaEventRecord(e0, stream);
    for (int i = 0; i < iters; ++i) ASSERT_TRUE(tactic->enqueue(io).ok());
    cudaEventRecord(e1, stream);
    ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    double bytes = 0;
    for (const Tensor& t : dev) bytes += static_cast<double>(t.nbytes());
    bytes += static_cast<double>(outs[0].nbytes());
    std::printf("[ pointwise perf ] %-42s %8.1f us  %7.1f GB/s\n", p.label, 1e3 * ms / iters,
                bytes * iters / (ms * 1e-3) / 1e9);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace ingot::gpu_test
