// Copyright ingot authors. Apache-2.0.
//
// The importer on good and bad models. Bad input must end in one clear error, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "backend/cpu/executor.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

namespace ingot {
namespace {

using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

void set_tensor_type(::onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<int64_t> dims,
                     std::vector<std::string> syms = {}) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = sh->add_dim();
    if (i < syms.size() && !syms[i].empty()) d->set_dim_param(syms[i]);
    else d->set_dim_value(dims[i]);
  }
}

// y = Relu(x + w), x: f32[batch, 3] (symbolic batch), w: f32[3] initializer.
ModelProto make_add_relu(int opset = 17) {
  ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  set_tensor_type(g->add_input(), "x", TensorProto::FLOAT, {-1, 3}, {"batch"});
  set_tensor_type(g->add_output(), "y", TensorProto::FLOAT, {-1, 3}, {"batch"});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(3);
  for (float v : {1.0f, -2.0f, 0.5f}) w->add_float_data(v);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add0");
  add->add_input("x");
  add->add_input("w");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu0");
  relu->add_input("s");
  relu->add_output("y");
  return m;
}

Result<onnx::Model> import(const ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  return onnx::import_model_bytes(bytes.data(), bytes.size());
}

TEST(Importer, KeepsSymbolicDimsThroughInference) {
  auto r = import(make_add_relu());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = *r->graph;
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0]->outputs()[0]->shape().to_string(), "[batch,3]");
  EXPECT_EQ(g.outputs()[0]->dtype(), DataType::kFloat32);
}

TEST(Importer, RunsOnTheReferenceBackendAtTwoBatchSizes) {
  auto r = import(make_add_relu());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int64_t batch : {1, 4}) {
    Tensor x = Tensor::zeros(DataType::kFloat32, {batch, 3}).value();
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(i % 3) - 0.75);
    cpu::Executor exec;
    auto out = exec.run(*r->graph, {{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ((*out)[0].shape(), (Shape64{batch, 3}));
    // x row = [-0.75, 0.25, 1.25]; + w = [0.25, -1.75, 1.75]; relu = [0.25, 0, 1.75]
    EXPECT_FLOAT_EQ((*out)[0].get_f64(0), 0.25);
    EXPECT_FLOAT_EQ((*out)[0].get_f64(1), 0.0);
    EXPECT_FLOAT_EQ((*out)[0].get_f64(2), 1.75);
  }
}

TEST(Importer, ExecutorNamesAWrongInput) {
  auto r = import(make_add_relu());
  ASSERT_TRUE(r.ok());
  cpu::Executor exec;
  auto missing = exec.run(*r->graph, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'x'"), std::string::npos);
  Tensor bad = Tensor::zeros(DataType::kFloat32, {2, 4}).value();
  auto wrong = exec.run(*r->graph, {{"x", bad}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("dim 1 must be 3"), std::string::npos) << wrong.status().message();
  Tensor i64 = Tensor::zeros(DataType::kInt64, {2, 3}).value();
  auto dt = exec.run(*r->graph, {{"x", i64}});
  ASSERT_FALSE(dt.ok());
  EXPECT_NE(dt.status().message().find("must be f32"), std::string::npos);
}

TEST(Importer, RejectsTruncatedFilesAndRandomBytes) {
  std::string bytes = make_add_relu().SerializeAsString();
  for (size_t cut = 1; cut < bytes.size(); cut += 7) {
    auto r = onnx::import_model_bytes(bytes.data(), cut);
    if (!r.ok()) EXPECT_FALSE(r.status().message().empty());  // never a crash; any error is clear
  }
  auto r = onnx::import_model_bytes(bytes.data(), bytes.size() / 2);
  EXPECT_FALSE(r.ok());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk(1 + rng() % 512, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    auto j = onnx::import_model_bytes(junk.data(), junk.size());
    EXPECT_FALSE(j.ok());
  }
}

TEST(Importer, UnknownOpNamesNodeOpDomainAndOpset) {
  ModelProto m = make_add_relu(17);
  m.mutable_graph()->mutable_node(1)->set_op_type("FrobnicateV2");
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("FrobnicateV2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("relu0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ai.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 17"), std::string::npos) << msg;
}

TEST(Importer, MissingGraphInputIsAnError) {
  ModelProto m = make_add_relu();
  m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'nowhere'"), std::string::npos) << r.status().message();
}

TEST(Importer, CycleIsAnError) {
  ModelProto m = make_add_relu();
  // add0 reads relu0's output, relu0 reads add0's: a cycle.
  m.mutable_graph()->mutable_node(0)->set_input(0, "y");
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cycle"), std::string::npos) << r.status().message();
}

TEST(Importer, SortsNodesListedOutOfOrder) {
  ModelProto m = make_add_relu();
  auto* g = m.mutable_graph();
  g->mutable_node()->SwapElements(0, 1);  // Relu listed before the Add that feeds it
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph->nodes()[0]->op_type(), "Add");
  EXPECT_EQ(r->graph->nodes()[1]->op_type(), "Relu");
}

TEST(Importer, InitializerSizeMismatchIsAnError) {
  ModelProto m = make_add_relu();
  m.mutable_graph()->mutable_initializer(0)->add_float_data(9.0f);  // 4 values for dims [3]
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos) << r.status().message();
  ModelProto raw = make_add_relu();
  auto* w = raw.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_raw_data(std::string(10, '\0'));  // 10 bytes for 12 needed
  auto r2 = import(raw);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("raw_data has 10 bytes"), std::string::npos) << r2.status().message();
}

TEST(Importer, NegativeDimIsAnError) {
  ModelProto m = make_add_relu();
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, -3);
  EXPECT_FALSE(import(m).ok());
  ModelProto m2 = make_add_relu();
  m2.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-2);
  auto r = import(m2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("negative dim"), std::string::npos) << r.status().message();
}

TEST(Importer, AttributeOfWrongTypeIsAnError) {
  ModelProto m = make_add_relu();
  auto* relu = m.mutable_graph()->mutable_node(1);
  relu->set_op_type("LeakyRelu");
  auto* a = relu->add_attribute();
  a->set_name("alpha");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(3);
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'alpha' must be float"), std::string::npos) << r.status().message();
}

TEST(Importer, GraphInputWithInitializerDefaultAndConstantNodes) {
  ModelProto m = make_add_relu();
  auto* g = m.mutable_graph();
  set_tensor_type(g->add_input(), "w", TensorProto::FLOAT, {3});  // w is also an input now
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph->inputs().size(), 2u);
  cpu::Executor exec;
  Tensor x = Tensor::zeros(DataType::kFloat32, {1, 3}).value();
  auto with_default = exec.run(*r->graph, {{"x", x}});
  ASSERT_TRUE(with_default.ok()) << with_default.status().to_string();
  EXPECT_FLOAT_EQ((*with_default)[0].get_f64(0), 1.0);  // relu(0 + 1)
  Tensor w = Tensor::zeros(DataType::kFloat32, {3}).value();
  w.set_f64(0, 5.0);
  auto overridden = exec.run(*r->graph, {{"x", x}, {"w", w}});
  ASSERT_TRUE(overridden.ok());
  EXPECT_FLOAT_EQ((*overridden)[0].get_f64(0), 5.0);
}

TEST(Importer, InlinesModelLocalFunctions) {
  // y = MyAddRelu(x, w) where MyAddRelu(a, b) = Relu(Add(a, b)) is a model-local function.
  ModelProto m = make_add_relu();
  auto* g = m.mutable_graph();
  g->clear_node();
  auto* call = g->add_node();
  call->set_op_type("MyAddRelu");
  call->set_domain("local");
  call->set_name("call0");
  call->add_input("x");
  call->add_input("w");
  call->add_output("y");
  auto* opl = m.add_opset_import();
  opl->set_domain("local");
  opl->set_version(1);
  auto* f = m.add_functions();
  f->set_name("MyAddRelu");
  f->set_domain("local");
  f->add_input("a");
  f->add_input("b");
  f->add_output("c");
  auto* fo = f->add_opset_import();
  fo->set_domain("");
  fo->set_version(17);
  auto* n1 = f->add_node();
  n1->set_op_type("Add");
  n1->add_input("a");
  n1->add_input("b");
  n1->add_output("t");
  auto* n2 = f->add_node();
  n2->set_op_type("Relu");
  n2->add_input("t");
  n2->add_output("c");
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph->nodes().size(), 2u);
  EXPECT_EQ(r->graph->nodes()[0]->op_type(), "Add");
  EXPECT_EQ(r->graph->nodes()[1]->op_type(), "Relu");
  EXPECT_EQ(r->graph->outputs()[0]->shape().to_string(), "[batch,3]");
}

// ---- model-local functions built for the inlining limits

// Appends `op`(in) -> out to `nodes` (in the "local" domain when `local`).
NodeProto* append_node(google::protobuf::RepeatedPtrField<NodeProto>* nodes, const std::string& op,
                       const std::string& in, const std::string& out, bool local = false) {
  NodeProto* n = nodes->Add();
  n->set_op_type(op);
  if (local) n->set_domain("local");
  if (!in.empty()) n->add_input(in);
  n->add_output(out);
  return n;
}

// make_add_relu()'s model with its nodes replaced by y = `op`(x) of the "local" domain.
ModelProto calling_local(const std::string& op) {
  ModelProto m = make_add_relu();
  m.mutable_graph()->clear_node();
  append_node(m.mutable_graph()->mutable_node(), op, "x", "y", /*local=*/true);
  auto* opl = m.add_opset_import();
  opl->set_domain("local");
  opl->set_version(1);
  return m;
}

// A local function name(a) -> c that imports the default opset 17 and the "local" domain.
::onnx::FunctionProto* add_local_function(ModelProto& m, const std::string& name) {
  auto* f = m.add_functions();
  f->set_name(name);
  f->set_domain("local");
  f->add_input("a");
  f->add_output("c");
  for (const char* domain : {"", "local"}) {
    auto* o = f->add_opset_import();
    o->set_domain(domain);
    o->set_version(*domain ? 1 : 17);
  }
  return f;
}

// Appends cond = Constant(true) and c = If(cond) to f's body; returns the If.
NodeProto* append_if_true(::onnx::FunctionProto* f) {
  NodeProto* cst = append_node(f->mutable_node(), "Constant", "", "cond");
  auto* v = cst->add_attribute();
  v->set_name("value");
  v->set_type(::onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(TensorProto::BOOL);
  v->mutable_t()->add_int32_data(1);
  return append_node(f->mutable_node(), "If", "cond", "c");
}

// A model whose graph calls local function f<depth> on x; f<k> calls f<k-1> twice in a chain,
// f0 is Relu, so the inlined graph has 2^depth Relus. `self_call` makes f<depth>'s second call
// target f<depth> itself instead (recursion).
ModelProto make_nested_functions(int depth, bool self_call) {
  ModelProto m = calling_local("f" + std::to_string(depth));
  for (int k = 0; k <= depth; ++k) {
    auto* f = add_local_function(m, "f" + std::to_string(k));
    if (k == 0) {
      append_node(f->mutable_node(), "Relu", "a", "c");
      continue;
    }
    const bool self = self_call && k == depth;
    append_node(f->mutable_node(), "f" + std::to_string(k - 1), "a", "t", true);
    append_node(f->mutable_node(), "f" + std::to_string(self ? k : k - 1), "t", "c", true);
  }
  return m;
}

TEST(Importer, NestedFunctionsInlineWhole) {
  auto r = import(make_nested_functions(5, false));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph->nodes().size(), 32u);
  for (const auto& n : r->graph->nodes()) EXPECT_EQ(n->op_type(), "Relu");
  EXPECT_EQ(r->graph->outputs()[0]->shape().to_string(), "[batch,3]");
}

TEST(Importer, RecursiveFunctionIsAClearError) {
  // Found by the importer fuzzer: a function calling itself recursed until the stack overflowed.
  auto r = import(make_nested_functions(3, true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().to_string();
  EXPECT_NE(r.status().message().find("'f3' calls itself (f3 -> f3)"), std::string::npos)
      << r.status().to_string();
}

TEST(Importer, ExponentialFunctionNestingIsRefused) {
  // Found by the importer fuzzer: 2^depth inlined nodes took minutes. 2^30 nodes must be refused
  // at once with the default cap, and a lowered cap must hold exactly.
  auto t0 = std::chrono::steady_clock::now();
  auto huge = import(make_nested_functions(30, false));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("more than 1048576 nodes"), std::string::npos)
      << huge.status().to_string();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);

  ModelProto m = make_nested_functions(6, false);  // 64 Relus
  std::string bytes = m.SerializeAsString();
  onnx::ImportOptions options;
  options.max_inlined_nodes = 64;
  auto fits = onnx::import_model_bytes(bytes.data(), bytes.size(), "", options);
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  EXPECT_EQ(fits->graph->nodes().size(), 64u);
  options.max_inlined_nodes = 63;
  auto over = onnx::import_model_bytes(bytes.data(), bytes.size(), "", options);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("more than 63 nodes"), std::string::npos) << over.status().to_string();
}

// Local function f_k's body is Constant(true) -> If whose then and else branches each call
// f_(k-1) on the graph input x twice (f_0 is Relu): the calls hide inside subgraphs, and the model
// would still inline to about 4^depth nodes.
ModelProto make_functions_nested_in_branches(int depth) {
  ModelProto m = calling_local("f" + std::to_string(depth));
  for (int k = 0; k <= depth; ++k) {
    auto* f = add_local_function(m, "f" + std::to_string(k));
    if (k == 0) {
      append_node(f->mutable_node(), "Relu", "a", "c");
      continue;
    }
    NodeProto* iff = append_if_true(f);
    for (const char* branch : {"then_branch", "else_branch"}) {
      auto* at = iff->add_attribute();
      at->set_name(branch);
      at->set_type(::onnx::AttributeProto::GRAPH);
      auto* bg = at->mutable_g();
      bg->set_name(std::string(branch) + std::to_string(k));
      append_node(bg->mutable_node(), "f" + std::to_string(k - 1), "x", "t", true);
      append_node(bg->mutable_node(), "f" + std::to_string(k - 1), "t", "o", true);
      bg->add_output()->set_name("o");
    }
  }
  return m;
}

TEST(Importer, FunctionCallsInsideSubgraphsCountTowardTheCap) {
  // Depth 2 imports (If branches calling f1, whose branches call f0); depth 12 (about 4^12 nodes)
  // is refused before any node is made.
  auto small = import(make_functions_nested_in_branches(2));
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  auto t0 = std::chrono::steady_clock::now();
  auto huge = import(make_functions_nested_in_branches(12));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("more than 1048576 nodes"), std::string::npos) << huge.status().to_string();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(Importer, SubgraphsTakenByReferenceAreCountedAsTheyAreMade) {
  // f(a) = If(Constant(true)) with both branches the caller's graph attribute `body` (ref_attr_name):
  // the count before inlining sees Constant and If (2 nodes); inlining makes 4 (the two branches'
  // Relu too). A cap of 4 takes it; 3 is refused while the nodes are made.
  ModelProto m = calling_local("f");
  auto* body = m.mutable_graph()->mutable_node(0)->add_attribute();
  body->set_name("body");
  body->set_type(::onnx::AttributeProto::GRAPH);
  body->mutable_g()->set_name("body");
  append_node(body->mutable_g()->mutable_node(), "Relu", "x", "o");
  body->mutable_g()->add_output()->set_name("o");
  auto* f = add_local_function(m, "f");
  f->add_attribute("body");
  NodeProto* iff = append_if_true(f);
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* at = iff->add_attribute();
    at->set_name(branch);
    at->set_type(::onnx::AttributeProto::GRAPH);
    at->set_ref_attr_name("body");
  }
  std::string bytes = m.SerializeAsString();
  onnx::ImportOptions options;
  options.max_inlined_nodes = 4;
  auto fits = onnx::import_model_bytes(bytes.data(), bytes.size(), "", options);
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  options.max_inlined_nodes = 3;
  auto over = onnx::import_model_bytes(bytes.data(), bytes.size(), "", options);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("more than 3 nodes"), std::string::npos) << over.status().to_string();
}

TEST(Importer, ExternalDataIsMappedAndPathsAreConfined) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ingot_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  float values[3] = {0.5f, -1.0f, 2.0f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("PAD!", 4);  // the tensor starts at offset 4
    f.write(reinterpret_cast<const char*>(values), sizeof values);
  }
  ModelProto m = make_add_relu();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "4");
  kv("length", "12");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  auto r = onnx::import_model_file((dir / "model.onnx").string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor* t = r->graph->initializers()[0]->initializer();
  ASSERT_NE(t, nullptr);
  EXPECT_FLOAT_EQ(static_cast<float>(t->get_f64(1)), -1.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(t->get_f64(2)), 2.0f);

  w->mutable_external_data(0)->set_value("../escape.bin");
  {
    std::ofstream f(dir / "model2.onnx", std::ios::binary);
    f << m.SerializeAsString();
  }
  auto bad = onnx::import_model_file((dir / "model2.onnx").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("inside the model's folder"), std::string::npos) << bad.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ingot
