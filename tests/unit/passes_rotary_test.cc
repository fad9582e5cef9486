// Copyright ingot authors. Apache-2.0.
//
// recognize_rotary: the Llama/Qwen2 rotate_half RoPE (Slice, Slice, Neg, Concat, Mul, Mul, Add)
// becomes one ingot::RotaryEmbedding, stated as before and expected graphs in the IR text form
// and checked for the same numbers on the CPU reference executor; the near misses (another split
// point, Neg on the lower half, an intermediate read elsewhere, a Concat on another axis) stay as
// they are, saying why; and a model built end to end on the CPU backend gives the same outputs
// with the pass as without it, in fp32 and with the op kept in fp16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine_run_util.h"
#include "graph_check_util.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ir/op_registry.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "onnx/onnx.pb.h"
#include "passes/pass.h"
#include "quiet_logger.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_recognize_rotary();

namespace {

using testing_util::expect_same_outputs;
using testing_util::node_lines;
using testing_util::parse_ir;
using testing_util::with_weights;

// The graph head declaring `input`, with the Slice bounds as weights.
std::string head_with(const std::string& input) {
  return R"(graph g {
  opset "" 17
  )" + input + R"(
  init %zero: i64[1] = [0]
  init %half: i64[1] = [4]
  init %big: i64[1] = [9223372036854775807]
  init %last: i64[1] = [-1]
  init %one: i64[1] = [1]
)";
}
const std::string kHead = head_with("input %x: f32[2,4,6,8]");

// The export's form: Llama's cos/sin tables [1, 1, S, D] as weights.
const std::string kLlamaBody = R"(  %lo = Slice(%x, %zero, %half, %last, %one)
  %hi = Slice(%x, %half, %big, %last, %one)
  %n = Neg(%hi)
  %r = Concat {axis=-1}(%n, %lo)
  %a = Mul(%x, %cos)
  %b = Mul(%r, %sin)
  %y = Add(%a, %b) @rope
  output %y
)";

std::string llama_text(const std::string& body = kLlamaBody) {
  return with_weights(kHead, {{"cos", {1, 1, 6, 8}}, {"sin", {1, 1, 6, 8}}}, body);
}

struct Rewritten {
  std::unique_ptr<ir::Graph> graph;
  bool changed = false;
  PassContext ctx;
};

Rewritten run_rotary(const std::string& text) {
  Rewritten r;
  r.graph = parse_ir(text);
  if (!r.graph) return r;
  auto pass = make_recognize_rotary();
  auto changed = pass->run(*r.graph, r.ctx);
  EXPECT_TRUE(changed.ok()) << changed.status().to_string();
  r.changed = changed.ok() && *changed;
  Status v = ir::verify_graph(*r.graph);
  EXPECT_TRUE(v.ok()) << v.to_string();
  Status inf = ir::infer_graph(*r.graph);  // the rewritten graph must still type-check
  EXPECT_TRUE(inf.ok()) << inf.to_string() << "\n" << ir::to_text(*r.graph);
  return r;
}

void expect_rewritten(const std::string& before, const std::string& expected_nodes) {
  SCOPED_TRACE(before);
  Rewritten r = run_rotary(before);
  ASSERT_TRUE(r.graph);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(node_lines(*r.graph), expected_nodes);
  expect_same_outputs(before, *r.graph);
}

void expect_refused(const std::string& before, const std::string& why) {
  SCOPED_TRACE(before);
  Rewritten r = run_rotary(before);
  ASSERT_TRUE(r.graph);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(ir::to_text(*r.graph), ir::to_text(*parse_ir(before)));
  std::string notes;
  for (const std::string& n : r.ctx.notes()) notes += n + "\n";
  EXPECT_NE(notes.find(why), std::string::npos) << notes;
}

TEST(PassesRotary, LlamaRotateHalfBecomesOneOp) {
  expect_rewritten(llama_text(), "%y: f32[2,4,6,8] = ingot::RotaryEmbedding(%x, %cos, %sin) @rope/RotaryEmbedding\n");
}

// Llama's export: q projected [B,S,H*D], viewed [B,S,H,D], transposed to [B,H,S,D], then rotated
// with [1,1,S,D] tables. The rotation moves above the transpose (tables permuted to [1,S,1,D]), so
// the Transpose left feeds the attention directly, which reads it as a strided view.
TEST(PassesRotary, HeadTransposeMovesBelowTheRotation) {
  const std::string head = head_with("input %q: f32[2,6,4,8]");
  const std::string body = "  %x = Transpose {perm=[0, 2, 1, 3]}(%q) @heads\n" + kLlamaBody;
  expect_rewritten(with_weights(head, {{"cos", {1, 1, 6, 8}}, {"sin", {1, 1, 6, 8}}}, body),
                   "%y.rotated: f32[2,6,4,8] = ingot::RotaryEmbedding(%q, %cos.unpermuted, %sin.unpermuted) "
                   "@rope/RotaryEmbedding\n%y: f32[2,4,6,8] = Transpose {perm=[0, 2, 1, 3]}(%y.rotated) @heads\n");
  // The transposed x read elsewhere too: the rotation stays below it.
  const std::string shared = "  %x = Transpose {perm=[0, 2, 1, 3]}(%q) @heads\n  output %x\n" + kLlamaBody;
  Rewritten r = run_rotary(with_weights(head, {{"cos", {1, 1, 6, 8}}, {"sin", {1, 1, 6, 8}}}, shared));
  EXPECT_NE(node_lines(*r.graph).find("ingot::RotaryEmbedding(%x, %cos, %sin)"), std::string::npos)
      << node_lines(*r.graph);
}

// Operands of both Muls and of the Add swapped, axes as 3 and the upper end as D; x read
// elsewhere too (another graph output); cos/sin computed from graph inputs, [S, D].
TEST(PassesRotary, OperandOrderAxisFormsAndComputedTables) {
  const std::string text = R"(graph g {
  opset "" 17
  input %x: f32[2,4,6,8]
  input %theta: f32[6,8]
  init %zero: i64[1] = [0]
  init %half: i64[1] = [4]
  init %end: i64[1] = [8]
  init %axis: i64[1] = [3]
  init %one: i64[1] = [1]
  %cos = Cos(%theta)
  %sin = Sin(%theta)
  %lo = Slice(%x, %zero, %half, %axis, %one)
  %hi = Slice(%x, %half, %end, %axis, %one)
  %n = Neg(%hi)
  %r = Concat {axis=3}(%n, %lo)
  %a = Mul(%cos, %x)
  %b = Mul(%sin, %r)
  %y = Add(%b, %a) @rope
  %x2 = Relu(%x)
  output %y
  output %x2
}
)";
  expect_rewritten(text,
                   "%cos: f32[6,8] = Cos(%theta)\n"
                   "%sin: f32[6,8] = Sin(%theta)\n"
                   "%x2: f32[2,4,6,8] = Relu(%x)\n"
                   "%y: f32[2,4,6,8] = ingot::RotaryEmbedding(%x, %cos, %sin) @rope/RotaryEmbedding\n");
}

// Per-sequence tables [B, 1, S, D] (positions differing by batch row), D = 32.
TEST(PassesRotary, PerBatchTables) {
  const std::string text = R"(graph g {
  opset "" 17
  input %x: f32[2,3,5,32]
  input %cos: f32[2,1,5,32]
  input %sin: f32[2,1,5,32]
  init %zero: i64[1] = [0]
  init %half: i64[1] = [16]
  init %big: i64[1] = [9223372036854775807]
  init %last: i64[1] = [-1]
  %lo = Slice(%x, %zero, %half, %last)
  %hi = Slice(%x, %half, %big, %last)
  %n = Neg(%hi)
  %r = Concat {axis=-1}(%n, %lo)
  %a = Mul(%x, %cos)
  %b = Mul(%r, %sin)
  %y = Add(%a, %b) @rope
  output %y
}
)";
  expect_rewritten(text, "%y: f32[2,3,5,32] = ingot::RotaryEmbedding(%x, %cos, %sin) @rope/RotaryEmbedding\n");
}

// A symbolic sequence length that cos/sin share with x is provably the same dim.
TEST(PassesRotary, SymbolicSequenceLength) {
  Rewritten r = run_rotary(R"(graph g {
  opset "" 17
  input %x: f32[batch,4,seq,8]
  input %cos: f32[1,1,seq,8]
  input %sin: f32[1,1,seq,8]
  init %zero: i64[1] = [0]
  init %half: i64[1] = [4]
  init %big: i64[1] = [9223372036854775807]
  init %last: i64[1] = [-1]
  init %one: i64[1] = [1]
  %lo = Slice(%x, %zero, %half, %last, %one)
  %hi = Slice(%x, %half, %big, %last, %one)
  %n = Neg(%hi)
  %r = Concat {axis=-1}(%n, %lo)
  %a = Mul(%x, %cos)
  %b = Mul(%r, %sin)
  %y = Add(%a, %b) @rope
  output %y
}
)");
  ASSERT_TRUE(r.graph);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(node_lines(*r.graph),
            "%y: f32[batch,4,seq,8] = ingot::RotaryEmbedding(%x, %cos, %sin) @rope/RotaryEmbedding\n");
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(PassesRotary, WrongSplitPointIsRefused) {
  // Halves split at 3 instead of D/2 = 4 (the Concat still has 8 elements).
  std::string text = replaced(llama_text(), "init %half: i64[1] = [4]", "init %half: i64[1] = [3]");
  expect_refused(text, "the Slices are not [0, D/2)");
}

TEST(PassesRotary, NegOnTheLowerHalfIsRefused) {
  // concat(-x[:h], x[h:]) is not rotate_half (nor its inverse, which also swaps the halves).
  std::string text = llama_text(R"(  %lo = Slice(%x, %zero, %half, %last, %one)
  %hi = Slice(%x, %half, %big, %last, %one)
  %n = Neg(%lo)
  %r = Concat {axis=-1}(%n, %hi)
  %a = Mul(%x, %cos)
  %b = Mul(%r, %sin)
  %y = Add(%a, %b) @rope
  output %y
)");
  expect_refused(text, "the Slices are not [0, D/2)");
}

TEST(PassesRotary, IntermediateReadElsewhereIsRefused) {
  std::string text = llama_text(kLlamaBody + "  output %r\n");
  expect_refused(text, "an intermediate is read outside the pattern");
  text = llama_text(replaced(kLlamaBody, "  output %y\n", "  %t = Tanh(%a)\n  output %y\n  output %t\n"));
  expect_refused(text, "an intermediate is read outside the pattern");
}

TEST(PassesRotary, ConcatOnAnotherAxisIsRefused) {
  // The halves of the sequence axis swapped and negated: the same nodes, another rotation.
  const std::string text = with_weights(R"(graph g {
  opset "" 17
  input %x: f32[2,4,8,8]
  init %zero: i64[1] = [0]
  init %half: i64[1] = [4]
  init %big: i64[1] = [9223372036854775807]
  init %axis: i64[1] = [2]
  init %one: i64[1] = [1]
)",
                                        {{"cos", {1, 1, 8, 8}}, {"sin", {1, 1, 8, 8}}},
                                        R"(  %lo = Slice(%x, %zero, %half, %axis, %one)
  %hi = Slice(%x, %half, %big, %axis, %one)
  %n = Neg(%hi)
  %r = Concat {axis=2}(%n, %lo)
  %a = Mul(%x, %cos)
  %b = Mul(%r, %sin)
  %y = Add(%a, %b) @rope
  output %y
)");
  expect_refused(text, "the Concat is not on the last axis");
}

TEST(PassesRotary, TablesThatWouldEnlargeXAreRefused) {
  // cos/sin [2, 1, 6, 8] on x [1, 4, 6, 8]: y is [2, 4, 6, 8], not x's shape.
  const std::string head = replaced(kHead, "input %x: f32[2,4,6,8]", "input %x: f32[1,4,6,8]");
  expect_refused(with_weights(head, {{"cos", {2, 1, 6, 8}}, {"sin", {2, 1, 6, 8}}}, kLlamaBody),
                 "would broadcast x to a larger shape");
}

// ---------------------------------------------------------------------------------------
// End to end: Builder on the CPU backend, with and without the pass.

// Q and K of one attention layer, [B, S, H, D] -> Transpose -> RoPE with shared cos/sin tables.
std::string two_head_rope_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto io = [](::onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  auto ints = [&](const std::string& name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(1);
    t->add_int64_data(v);
  };
  // Llama's tables: angle s * f_i at positions i and i + D/2 alike.
  auto table = [&](const std::string& name, double (*fn)(double)) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 1, 6, 16}) t->add_dims(d);
    for (int s = 0; s < 6; ++s)
      for (int i = 0; i < 16; ++i) t->add_float_data(static_cast<float>(fn(0.3 * s * (1 + i % 8))));
  };
  auto node = [&](const std::string& op, std::vector<std::string> ins, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  ints("zero", 0);
  ints("half", 8);
  ints("big", INT64_MAX);
  ints("last", 3);
  ints("one", 1);
  table("cos", [](double a) { return std::cos(a); });
  table("sin", [](double a) { return std::sin(a); });
  for (const std::string p : {"q", "k"}) {
    io(g->add_input(), p, {2, 6, 3, 16});
    io(g->add_output(), p + "_rot", {2, 3, 6, 16});
    auto* tr = node("Transpose", {p}, p + "_t");
    auto* perm = tr->add_attribute();
    perm->set_name("perm");
    perm->set_type(::onnx::AttributeProto::INTS);
    for (int64_t a : {0, 2, 1, 3}) perm->add_ints(a);
    node("Slice", {p + "_t", "zero", "half", "last", "one"}, p + "_lo");
    node("Slice", {p + "_t", "half", "big", "last", "one"}, p + "_hi");
    node("Neg", {p + "_hi"}, p + "_neg");
    auto* cat = node("Concat", {p + "_neg", p + "_lo"}, p + "_cat");
    auto* axis = cat->add_attribute();
    axis->set_name("axis");
    axis->set_type(::onnx::AttributeProto::INT);
    axis->set_i(-1);
    node("Mul", {p + "_t", "cos"}, p + "_c");
    node("Mul", {p + "_cat", "sin"}, p + "_s");
    node("Add", {p + "_c", p + "_s"}, p + "_rot");
  }
  return m.SerializeAsString();
}

Result<testing_util::EngineRun> build_and_run(const BuilderConfig& cfg, const std::map<std::string, Tensor>& feeds) {
  return testing_util::build_and_run(two_head_rope_model(), cfg, feeds);
}

std::map<std::string, std::string> rotary_layers(const std::vector<LayerDesc>& layers) {
  std::map<std::string, std::string> precision;
  for (const LayerDesc& l : layers)
    if (l.op == "ingot::RotaryEmbedding") precision[l.name] = l.precision;
  return precision;
}

TEST(PassesRotary, EngineMatchesTheEngineBuiltWithoutThePass) {
  std::map<std::string, Tensor> feeds;
  for (const char* name : {"q", "k"}) {
    Tensor t = Tensor::zeros(DataType::kFloat32, {2, 6, 3, 16}).value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::sin(0.37 * i + (name[0] == 'k')) + 0.05);
    feeds[name] = t;
  }
  BuilderConfig plain;
  plain.disabled_passes = {"recognize_rotary"};
  auto want = build_and_run(plain, feeds);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_TRUE(rotary_layers(want->layers).empty());

  BuilderConfig fused;
  auto got = build_and_run(fused, feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(rotary_layers(got->layers).size(), 2u) << "one RotaryEmbedding for Q, one for K";
  ASSERT_EQ(got->outputs.size(), want->outputs.size());
  for (size_t o = 0; o < want->outputs.size(); ++o) {
    ASSERT_EQ(got->outputs[o].shape(), want->outputs[o].shape());
    for (int64_t i = 0; i < want->outputs[o].numel(); ++i)
      ASSERT_NEAR(got->outputs[o].get_f64(i), want->outputs[o].get_f64(i), 1e-5) << "output " << o << " element " << i;
  }

  // fp16 engines keep the op in fp16 (precision.cc's rule), within fp16 rounding of fp32.
  BuilderConfig half;
  half.fp16 = true;
  auto low = build_and_run(half, feeds);
  ASSERT_TRUE(low.ok()) << low.status().to_string();
  const auto precisions = rotary_layers(low->layers);
  EXPECT_EQ(precisions.size(), 2u);
  for (const auto& [name, p] : precisions) EXPECT_EQ(p, "f16") << name;
  ASSERT_EQ(low->outputs.size(), want->outputs.size());
  for (size_t o = 0; o < want->outputs.size(); ++o)
    for (int64_t i = 0; i < want->outputs[o].numel(); ++i)
      ASSERT_NEAR(low->outputs[o].get_f64(i), want->outputs[o].get_f64(i), 5e-3) << "output " << o << " element " << i;
}

}  // namespace
}  // namespace ingot::passes
