// Copyright ingot authors. Apache-2.0.
//
// fuse_conv_pool (the builder runs it after its layout pass): a FusedConv and the max pooling reading it
// become one ingot::FusedConvPool where the backend's check accepts the node, before/after in the IR text
// form and equal outputs on the CPU reference; every refusal leaves the graph as it was and says why; a
// CPU build of Conv + Relu + MaxPool (no device tactic for the fused node) keeps the two steps.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "builder/builder.h"
#include "graph_check_util.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ir/verify.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "passes/passes.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

using testing_util::node_lines;
using testing_util::parse_ir;
using testing_util::replace_once;
using testing_util::with_weights;

const char* const kHead = "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n";

// ResNet's stem on a small image: FusedConv 7x7/2 pad 3 with Relu, then `pool` reading %c.
std::string stem(bool channels_last, const std::string& pool, const std::string& tail = "  output %y\n") {
  const std::string x = channels_last ? "  input %x: f32[2,19,17,3]\n" : "  input %x: f32[2,3,19,17]\n";
  const Shape64 w = channels_last ? Shape64{8, 7, 7, 3} : Shape64{8, 3, 7, 7};
  return with_weights(std::string(kHead) + x, {{"w", w}, {"b", {8}}},
                      "  %c = ingot::FusedConv {activation=\"Relu\", channels_last=" + std::to_string(channels_last) +
                          ", kernel_shape=[7, 7], pads=[3, 3, 3, 3], strides=[2, 2]}(%x, %w, %b) @conv\n" + pool +
                          tail);
}

const char* const kNhwcPool =
    "  %y = ingot::Pool {channels_last=1, kernel_shape=[3, 3], mode=\"max\", pads=[1, 1, 1, 1], strides=[2, 2]}(%c) "
    "@pool\n";
const char* const kMaxPool = "  %y = MaxPool {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}(%c) @pool\n";

// Runs fuse_conv_pool with `runs` on `text`; `changed` is what the pass must report.
std::unique_ptr<ir::Graph> run_pass(const std::string& text, passes::FusionCheck runs, passes::PassContext* ctx,
                                    bool changed) {
  auto g = parse_ir(text);
  if (!g) return nullptr;
  auto r = passes::make_fuse_conv_pool(std::move(runs))->run(*g, *ctx);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.ok() && *r, changed);
  Status v = ir::verify_graph(*g);
  EXPECT_TRUE(v.ok()) << v.to_string();
  Status inf = ir::infer_graph(*g);
  EXPECT_TRUE(inf.ok()) << inf.to_string();
  return g;
}

bool has_note(const passes::PassContext& ctx, const std::string& text) {
  for (const auto& n : ctx.notes())
    if (n.find(text) != std::string::npos) return true;
  return false;
}

std::string notes_of(const passes::PassContext& ctx) {
  std::string all;
  for (const auto& n : ctx.notes()) all += n + "\n";
  return all;
}

TEST(FuseConvPool, StemBecomesOneNodeInBothLayouts) {
  struct Case {
    const char* what;
    bool channels_last;
    std::string pool, fused_layout;
  } cases[] = {
      {"channels-last ingot::Pool", true, kNhwcPool, "channels_last=1"},
      {"channels-first MaxPool", false, kMaxPool, "channels_last=0"},
      {"MaxPool with storage_order 0 and an unread Indices output", false,
       "  %y, %idx = MaxPool {kernel_shape=[3, 3], pads=[1, 1, 1, 1], storage_order=0, strides=[2, 2]}(%c) @pool\n",
       "channels_last=0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string t = stem(c.channels_last, c.pool);
    passes::PassContext ctx;
    int asked = 0;
    auto yes = [&](const ir::Node& fused, const std::vector<const ir::Node*>& parts, std::string*) -> Result<bool> {
      ++asked;
      EXPECT_EQ(fused.op_type(), "FusedConvPool");
      EXPECT_EQ(parts.size(), 2u);  // the convolution and the pooling
      return true;
    };
    auto g = run_pass(t, yes, &ctx, true);
    ASSERT_TRUE(g);
    EXPECT_EQ(asked, 1);
    auto want = parse_ir(with_weights(
        std::string(kHead) + (c.channels_last ? "  input %x: f32[2,19,17,3]\n" : "  input %x: f32[2,3,19,17]\n"),
        {{"w", c.channels_last ? Shape64{8, 7, 7, 3} : Shape64{8, 3, 7, 7}}, {"b", {8}}},
        "  %y = ingot::FusedConvPool {activation=\"Relu\", " + c.fused_layout +
            ", kernel_shape=[7, 7], pads=[3, 3, 3, 3], pool_kernel_shape=[3, 3], pool_pads=[1, 1, 1, 1], "
            "pool_strides=[2, 2], strides=[2, 2]}(%x, %w, %b) @pool\n  output %y\n"));
    ASSERT_TRUE(want);
    EXPECT_EQ(node_lines(*g), node_lines(*want));
    const ir::Node& n = *g->nodes()[0];
    EXPECT_EQ(n.origins(), (std::vector<std::string>{"conv", "pool"}));
    EXPECT_EQ(g->outputs()[0]->name(), "y");
    // 19x17 -> conv 10x9 -> pool 5x5.
    EXPECT_EQ(g->outputs()[0]->shape().to_string(), c.channels_last ? "[2,5,5,8]" : "[2,8,5,5]");
    testing_util::expect_same_outputs(t, *g, 0.0);
  }
}

// Without a bias, with ceil_mode and dilations on the pool: the conv's two inputs, every window attribute.
TEST(FuseConvPool, CarriesEveryPoolWindowAttribute) {
  std::string t = stem(true,
                       "  %y = ingot::Pool {channels_last=1, ceil_mode=1, dilations=[1, 2], kernel_shape=[2, 2], "
                       "mode=\"max\", strides=[2, 2]}(%c) @pool\n");
  replace_once(t, "(%x, %w, %b) @conv", "(%x, %w) @conv");
  passes::PassContext ctx;
  auto g = run_pass(t, {}, &ctx, true);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 1u);
  const ir::Node& n = *g->nodes()[0];
  EXPECT_EQ(n.inputs().size(), 2u);
  EXPECT_EQ(n.attrs().get_int("pool_ceil_mode", 0), 1);
  EXPECT_EQ(n.attrs().get_ints("pool_dilations"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.attrs().get_ints("pool_kernel_shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(n.attrs().has("pool_pads"));
  testing_util::expect_same_outputs(t, *g, 0.0);
}

TEST(FuseConvPool, RefusalsLeaveTheGraphAndSayWhy) {
  struct Case {
    const char* what;
    std::string text, note;  // an empty note: not matched at all, nothing noted
  } cases[] = {
      {"conv output read by another node", stem(true, kNhwcPool, "  %r = Neg(%c) @other\n  output %y\n  output %r\n"),
       "the convolution's output is read elsewhere"},
      {"conv output is a graph output", stem(false, kMaxPool, "  output %y\n  output %c\n"),
       "the convolution's output is read elsewhere"},
      {"MaxPool's Indices read",
       stem(false, "  %y, %idx = MaxPool {kernel_shape=[3, 3], strides=[2, 2]}(%c) @pool\n",
            "  output %y\n  output %idx\n"),
       "Indices"},
      {"MaxPool storage_order 1",
       stem(false, "  %y = MaxPool {kernel_shape=[3, 3], storage_order=1, strides=[2, 2]}(%c) @pool\n"),
       "storage_order"},
      {"pool auto_pad SAME_UPPER",
       stem(true,
            "  %y = ingot::Pool {auto_pad=\"SAME_UPPER\", channels_last=1, kernel_shape=[3, 3], mode=\"max\", "
            "strides=[2, 2]}(%c) @pool\n"),
       "auto_pad is SAME_UPPER"},
      {"pool layout differs from the conv's",
       stem(true,
            "  %y = ingot::Pool {channels_last=0, kernel_shape=[3, 3], mode=\"max\", strides=[2, 2]}(%c) @pool\n"),
       "layout differs"},
      {"average ingot::Pool",
       stem(true,
            "  %y = ingot::Pool {channels_last=1, kernel_shape=[3, 3], mode=\"average\", "
            "strides=[2, 2]}(%c) @pool\n"),
       ""},
      {"AveragePool", stem(false, "  %y = AveragePool {kernel_shape=[3, 3], strides=[2, 2]}(%c) @pool\n"), ""},
      {"MaxPool of a graph input", std::string(kHead) + "  input %c: f32[1,2,8,8]\n" + kMaxPool + "  output %y\n}\n",
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    passes::PassContext ctx;
    auto always = [](const ir::Node&, const std::vector<const ir::Node*>&, std::string*) -> Result<bool> {
      return true;
    };
    auto g = run_pass(c.text, always, &ctx, false);
    ASSERT_TRUE(g);
    auto before = parse_ir(c.text);
    ASSERT_TRUE(before);
    EXPECT_EQ(node_lines(*g), node_lines(*before));
    if (c.note.empty())
      EXPECT_TRUE(ctx.notes().empty()) << notes_of(ctx);
    else
      EXPECT_TRUE(has_note(ctx, "fuse_conv_pool: refused") && has_note(ctx, c.note)) << notes_of(ctx);
  }
  // A residual FusedConv: the pool would read the residual sum.
  {
    std::string t =
        with_weights(std::string(kHead) + "  input %x: f32[1,9,9,4]\n  input %r: f32[1,9,9,4]\n", {{"w", {4, 3, 3, 4}}},
                     "  %c = ingot::FusedConv {activation=\"Relu\", channels_last=1, kernel_shape=[3, 3], "
                     "pads=[1, 1, 1, 1]}(%x, %w, _, %r) @conv\n" +
                         std::string(kNhwcPool) + "  output %y\n");
    passes::PassContext ctx;
    auto g = run_pass(t, {}, &ctx, false);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->nodes().size(), 2u);
    EXPECT_TRUE(has_note(ctx, "residual")) << notes_of(ctx);
  }
  // A transposed FusedConv.
  {
    std::string t = with_weights(std::string(kHead) + "  input %x: f32[1,4,5,5]\n", {{"w", {4, 2, 3, 3}}},
                                 "  %c = ingot::FusedConv {kernel_shape=[3, 3], transposed=1}(%x, %w) @conv\n" +
                                     std::string(kMaxPool) + "  output %y\n");
    passes::PassContext ctx;
    auto g = run_pass(t, {}, &ctx, false);
    ASSERT_TRUE(g);
    EXPECT_TRUE(has_note(ctx, "transposed")) << notes_of(ctx);
  }
  // The backend's check says no (no tactic; then measured slower): the pair stays, the note says why.
  for (const char* why : {"", "the fused node measured 2.0000 ms, its 2 steps 1.0000 ms"}) {
    const std::string t = stem(true, kNhwcPool);
    passes::PassContext ctx;
    auto no = [why](const ir::Node&, const std::vector<const ir::Node*>&, std::string* w) -> Result<bool> {
      *w = why;
      return false;
    };
    auto g = run_pass(t, no, &ctx, false);
    ASSERT_TRUE(g);
    auto before = parse_ir(t);
    EXPECT_EQ(node_lines(*g), node_lines(*before));
    EXPECT_TRUE(has_note(ctx, *why ? why : "the backend has no tactic for the fused node")) << notes_of(ctx);
  }
}

// y = MaxPool(Relu(Conv(x, W, B))) as an exporter writes a stem (BatchNorm already folded), x: f32[1,3,15,13].
std::string conv_relu_maxpool_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 3, 15, 13}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  g->add_output()->set_name("y");
  auto weights = [&](const char* name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.05f * static_cast<float>((i * 7) % 13 - 6) + 0.01f);
  };
  weights("W", {4, 3, 7, 7});
  weights("B", {4});
  auto node = [&](const char* op, std::vector<const char*> ins, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const char* i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  auto ints = [](::onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto* conv = node("Conv", {"x", "W", "B"}, "c");
  ints(conv, "kernel_shape", {7, 7});
  ints(conv, "pads", {3, 3, 3, 3});
  ints(conv, "strides", {2, 2});
  node("Relu", {"c"}, "r");
  auto* pool = node("MaxPool", {"r"}, "y");
  ints(pool, "kernel_shape", {3, 3});
  ints(pool, "pads", {1, 1, 1, 1});
  ints(pool, "strides", {2, 2});
  return m.SerializeAsString();
}

// The CPU backend has no device tactic for the fused node, so a CPU build keeps the conv and the pool as
// two steps (and says so), and its engine gives the interpreter's numbers.
TEST(FuseConvPool, CpuBuildKeepsConvAndPoolApart) {
  const std::string bytes = conv_relu_maxpool_model();
  auto m = onnx::import_model_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<ir::Graph> graph(std::move(m->graph));
  builder::BuildOptions opt;
  builder::BuildReport rep;
  auto plan = builder::build_plan(graph, m->storage, opt, &rep);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  bool pool_step = false;
  for (const builder::Step& s : plan->steps) {
    EXPECT_NE(s.node->op_type(), "FusedConvPool");
    pool_step |= s.node->op_type() == "MaxPool" || s.node->op_type() == "Pool";
  }
  EXPECT_TRUE(pool_step);
  std::string notes;
  for (const std::string& n : rep.notes) notes += n + "\n";
  EXPECT_NE(notes.find("fuse_conv_pool: refused"), std::string::npos) << notes;

  // Through the public API: the engine runs, unfused, with the interpreter's numbers.
  auto reference = onnx::import_model_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(reference.ok());
  Tensor x = Tensor::zeros(DataType::kFloat32, {1, 3, 15, 13}).value();
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set_f64(i, (i % 3 == 0 ? -1.0 : 1.0) * (0.1 + 0.01 * static_cast<double>(i % 50)));
  auto want = cpu::Executor().run(*reference->graph, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  test::Quiet q;
  auto eng = Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), BuilderConfig());
  ASSERT_TRUE(eng.ok()) << eng.status().to_string();
  auto engine = Runtime(q).deserialize(eng->data(), eng->size());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (const LayerDesc& l : (*engine)->layers()) EXPECT_EQ(l.op.find("FusedConvPool"), std::string::npos) << l.op;
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("x", x.mutable_raw()).ok());
  Status st = (*ctx)->enqueue(nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto shape = (*ctx)->tensor_shape("y");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (std::vector<int64_t>{1, 4, 4, 4}));  // 15x13 -> conv 8x7 -> pool 4x4
  const float* y = static_cast<const float*>((*ctx)->tensor_address("y"));
  ASSERT_NE(y, nullptr);
  ASSERT_EQ((*want)[0].numel(), 64);
  for (int64_t i = 0; i < 64; ++i) EXPECT_NEAR(y[i], (*want)[0].get_f64(i), 1e-5) << i;
}

}  // namespace
}  // namespace ingot
