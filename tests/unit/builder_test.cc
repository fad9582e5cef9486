// Copyright ingot authors. Apache-2.0.
//
// Builder behaviour that is not a pass of its own: dims that every optimization profile pins to
// one value are given to the graph before optimizing, so an exporter's shape arithmetic
// (Shape -> Gather -> Concat -> Reshape on a symbolic batch) folds away; an open profile keeps it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "builder/builder.h"
#include "core/status.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

using test::Quiet;

// y = Relu(Reshape(x, Concat(Gather(Shape(x), 0), [2, 4]))), x: f32[batch, 8].
std::string shape_arithmetic_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(8);
  g->add_output()->set_name("y");
  auto ints = [&](const char* name, std::vector<int64_t> v, bool scalar) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  };
  ints("zero", {0}, true);
  ints("axes0", {0}, false);
  ints("rest", {2, 4}, false);
  auto node = [&](const char* op, std::vector<const char*> ins, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const char* i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Shape", {"x"}, "shape");
  node("Gather", {"shape", "zero"}, "b");
  node("Unsqueeze", {"b", "axes0"}, "b1");
  auto* cat = node("Concat", {"b1", "rest"}, "target");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  node("Reshape", {"x", "target"}, "r");
  node("Relu", {"r"}, "y");
  return m.SerializeAsString();
}

Result<std::vector<LayerDesc>> layers_for(int64_t min_b, int64_t max_b, std::vector<float>* out) {
  std::string bytes = shape_arithmetic_model();
  Quiet q;
  BuilderConfig cfg;
  OptimizationProfile p;
  p.set_dimensions("x", {min_b, 8}, {max_b, 8}, {max_b, 8});
  cfg.profiles.push_back(p);
  INGOT_ASSIGN_OR_RETURN(auto eng, Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg));
  INGOT_ASSIGN_OR_RETURN(auto engine, Runtime(q).deserialize(eng.data(), eng.size()));
  INGOT_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  std::vector<float> x(static_cast<size_t>(max_b * 8));
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + static_cast<float>(i));
  INGOT_RETURN_IF_ERROR(ctx->set_input_shape("x", {max_b, 8}));
  INGOT_RETURN_IF_ERROR(ctx->set_tensor_address("x", x.data()));
  INGOT_RETURN_IF_ERROR(ctx->enqueue(nullptr));
  INGOT_ASSIGN_OR_RETURN(auto shape, ctx->tensor_shape("y"));
  if (shape != std::vector<int64_t>{max_b, 2, 4}) return internal_error("y has the wrong shape");
  const float* y = static_cast<const float*>(ctx->tensor_address("y"));
  out->assign(y, y + max_b * 8);
  return engine->layers();
}

// y = Reshape(Gemm(Reshape(x, [6,4]), W, transB=1), [2,3,5]) -- GPT-2's logits -- and
// y2 = Reshape(g2, [2,3,5]) where g2 = Gemm(.., W2) also feeds r = Relu(g2). x: f32[2,3,4].
std::string reshape_into_output_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : {2, 3, 4}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  for (const char* o : {"y", "y2", "r"}) g->add_output()->set_name(o);
  auto ints = [&](const char* name, std::vector<int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  };
  auto weights = [&](const char* name, float scale) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(5);
    t->add_dims(4);
    for (int i = 0; i < 20; ++i) t->add_float_data(scale * static_cast<float>((i * 7) % 11 - 5));
  };
  ints("flat", {6, 4});
  ints("unflat", {2, 3, 5});
  weights("W", 0.25f);
  weights("W2", -0.5f);
  auto node = [&](const char* op, std::vector<const char*> ins, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const char* i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Reshape", {"x", "flat"}, "h");
  for (auto [w, gout] : {std::pair{"W", "g"}, std::pair{"W2", "g2"}}) {
    auto* a = node("Gemm", {"h", w}, gout)->add_attribute();
    a->set_name("transB");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(1);
  }
  node("Reshape", {"g", "unflat"}, "y");
  node("Reshape", {"g2", "unflat"}, "y2");
  node("Relu", {"g2"}, "r");
  return m.SerializeAsString();
}

// An intermediate that only a reshape into a graph output reads is planned in that output's
// binding (the reshape then runs in place, no copy into the output); one that something else
// also reads stays in the arena. The outputs are right with the output bound by the caller and
// with the context's own buffer.
TEST(Builder, AnIntermediateReshapedIntoAnOutputLivesInTheOutput) {
  const std::string bytes = reshape_into_output_model();
  auto m = onnx::import_model_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  builder::BuildOptions opt;
  opt.optimize = false;
  std::shared_ptr<ir::Graph> graph(std::move(m->graph));
  auto plan = builder::build_plan(graph, m->storage, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto find = [&](const std::string& name) -> const builder::ValuePlan* {
    for (const builder::ValuePlan& v : plan->values)
      if (v.value && v.value->name() == name) return &v;
    return nullptr;
  };
  const builder::ValuePlan *g = find("g"), *g2 = find("g2");
  ASSERT_TRUE(g && g2);
  EXPECT_EQ(g->storage, builder::Storage::kOutputView);
  ASSERT_LT(g->offset, plan->values.size());
  EXPECT_EQ(plan->values[static_cast<size_t>(g->offset)].value->name(), "y");
  EXPECT_EQ(g2->storage, builder::Storage::kArena);

  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(static_cast<int>(i % 9) - 4);
  auto expect = [&](float scale, bool relu) {
    std::vector<float> y(30);
    for (int r = 0; r < 6; ++r)
      for (int n = 0; n < 5; ++n) {
        float acc = 0;
        for (int k = 0; k < 4; ++k) acc += x[r * 4 + k] * scale * static_cast<float>(((n * 4 + k) * 7) % 11 - 5);
        y[r * 5 + n] = relu && acc < 0 ? 0.0f : acc;
      }
    return y;
  };
  Quiet q;
  for (int level : {0, 3}) {
    BuilderConfig cfg;
    cfg.optimization_level = level;
    auto eng = Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg);
    ASSERT_TRUE(eng.ok()) << eng.status().to_string();
    auto engine = Runtime(q).deserialize(eng->data(), eng->size());
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    for (bool bound : {true, false}) {
      SCOPED_TRACE(std::string("level ") + std::to_string(level) + (bound ? ", outputs bound" : ", own outputs"));
      auto ctx = (*engine)->create_execution_context();
      ASSERT_TRUE(ctx.ok());
      std::vector<float> y(30, -7.0f), y2(30, -7.0f), r(30, -7.0f);
      ASSERT_TRUE((*ctx)->set_tensor_address("x", x.data()).ok());
      if (bound)
        for (auto [name, buf] : {std::pair{"y", &y}, std::pair{"y2", &y2}, std::pair{"r", &r}})
          ASSERT_TRUE((*ctx)->set_tensor_address(name, buf->data()).ok());
      for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the views
        Status st = (*ctx)->enqueue(nullptr);
        ASSERT_TRUE(st.ok()) << st.to_string();
        auto read = [&](const char* name, std::vector<float>* buf) {
          const float* p = static_cast<const float*>((*ctx)->tensor_address(name));
          ASSERT_NE(p, nullptr);
          if (p != buf->data()) buf->assign(p, p + 30);
        };
        read("y", &y);
        read("y2", &y2);
        read("r", &r);
        const std::vector<float> want_y = expect(0.25f, false), want_y2 = expect(-0.5f, false),
                                 want_r = expect(-0.5f, true);
        for (size_t i = 0; i < 30; ++i) {
          EXPECT_FLOAT_EQ(y[i], want_y[i]) << i;
          EXPECT_FLOAT_EQ(y2[i], want_y2[i]) << i;
          EXPECT_FLOAT_EQ(r[i], want_r[i]) << i;
        }
      }
    }
  }
}

TEST(Builder, DimsPinnedByEveryProfileFoldTheShapeArithmetic) {
  std::vector<float> pinned_out, open_out;
  auto pinned = layers_for(3, 3, &pinned_out);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  auto open = layers_for(1, 3, &open_out);
  ASSERT_TRUE(open.ok()) << open.status().to_string();
  // Pinned: Shape/Gather/Unsqueeze/Concat fold into a constant; Reshape and Relu remain (or less).
  EXPECT_LE(pinned->size(), 2u);
  for (const LayerDesc& l : *pinned) EXPECT_NE(l.op, "Shape") << "the batch was pinned to 3";
  // Open: the shape arithmetic runs at run time.
  bool has_shape = false;
  for (const LayerDesc& l : *open) has_shape |= l.op == "Shape";
  EXPECT_TRUE(has_shape);
  // Same numbers either way: Relu of the input, reshaped.
  ASSERT_EQ(pinned_out.size(), open_out.size());
  for (size_t i = 0; i < pinned_out.size(); ++i) {
    float want = (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + static_cast<float>(i));
    EXPECT_EQ(pinned_out[i], want > 0 ? want : 0.0f) << i;
    EXPECT_EQ(open_out[i], pinned_out[i]) << i;
  }
}

// The BERT layer as torch.onnx.export writes it (make_optimizer_models.py bert_torch_export):
// with the batch pinned and with a batch range, the optimizer must see through the exporter's
// shape arithmetic and SDPA decomposition to one fused Attention, and the engine must agree
// with the interpreter. bert_dynamo_export spells K^T as the dynamo exporter does (Reshape /
// Transpose / Reshape): that chain folds into the head-split Transpose (also with the batch
// open: [batch,4,10,8] -> [?,10,8] keeps the batch axis whole) and the Attention takes the 3-D
// tensors, no layout step left.
class BuilderModelsBert : public ::testing::TestWithParam<const char*> {};

TEST_P(BuilderModelsBert, TorchExportedBertLayerFusesWithPinnedAndOpenBatch) {
  const char* dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (!dir) GTEST_SKIP() << "INGOT_OPTIMIZER_MODELS not set (ctest sets it to the generated models)";
  namespace fs = std::filesystem;
  fs::path m = fs::path(dir) / GetParam();
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  std::string bytes = slurp(m / "model.onnx");
  ASSERT_FALSE(bytes.empty()) << m;
  std::vector<Tensor> in;
  for (int i = 0; i < 2; ++i) {
    ::onnx::TensorProto tp;
    ASSERT_TRUE(tp.ParseFromString(slurp(m / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"))));
    auto t = onnx::tensor_from_proto(tp, onnx::TensorSource());
    ASSERT_TRUE(t.ok());
    in.push_back(*t);
  }
  ::onnx::TensorProto want_tp;
  ASSERT_TRUE(want_tp.ParseFromString(slurp(m / "test_data_set_0" / "output_0.pb")));
  auto want = onnx::tensor_from_proto(want_tp, onnx::TensorSource());
  ASSERT_TRUE(want.ok());
  const int64_t batch = in[0].shape()[0], seq = in[0].shape()[1], hidden = in[0].shape()[2];
  for (int64_t lo : {batch, int64_t{1}}) {
    Quiet q;
    BuilderConfig cfg;
    OptimizationProfile p;
    p.set_dimensions("hidden", {lo, seq, hidden}, {batch, seq, hidden}, {batch + 2, seq, hidden});
    p.set_dimensions("attention_mask", {lo, seq}, {batch, seq}, {batch + 2, seq});
    if (lo == batch) {  // pinned: min = opt = max
      p = OptimizationProfile();
      p.set_dimensions("hidden", {batch, seq, hidden}, {batch, seq, hidden}, {batch, seq, hidden});
      p.set_dimensions("attention_mask", {batch, seq}, {batch, seq}, {batch, seq});
    }
    cfg.profiles.push_back(p);
    auto eng = Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg);
    ASSERT_TRUE(eng.ok()) << eng.status().to_string();
    auto engine = Runtime(q).deserialize(eng->data(), eng->size());
    ASSERT_TRUE(engine.ok());
    int attention = 0, leftovers = 0;
    for (const LayerDesc& l : (*engine)->layers()) {
      attention += l.op == "ingot::Attention";
      leftovers += l.op == "Softmax" || l.op == "IsNaN" || l.op == "MatMul" || l.op == "Transpose";
    }
    EXPECT_EQ(attention, 1) << "batch " << lo << "..";
    EXPECT_EQ(leftovers, 0) << "batch " << lo << "..";
    auto ctx = (*engine)->create_execution_context();
    ASSERT_TRUE(ctx.ok());
    ASSERT_TRUE((*ctx)->set_input_shape("hidden", in[0].shape()).ok());
    ASSERT_TRUE((*ctx)->set_input_shape("attention_mask", in[1].shape()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("hidden", in[0].mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("attention_mask", in[1].mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->enqueue(nullptr).ok());
    const float* y = static_cast<const float*>((*ctx)->tensor_address("last_hidden_state"));
    double max_err = 0;
    for (int64_t i = 0; i < want->numel(); ++i) max_err = std::max(max_err, std::fabs(y[i] - want->get_f64(i)));
    EXPECT_LT(max_err, 1e-4) << "batch " << lo << ".. against onnxruntime";
  }
}

INSTANTIATE_TEST_SUITE_P(Exporters, BuilderModelsBert, ::testing::Values("bert_torch_export", "bert_dynamo_export"));

}  // namespace
}  // namespace ingot
