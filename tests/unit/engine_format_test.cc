// Copyright ingot authors. Apache-2.0.
//
// The engine file: plans from real models survive write -> read exactly (graph text, weights
// bytes, steps, value plans, profiles), weights are read in place, and every kind of damage
// or mismatch ends in an error that says what is wrong, never a crash.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/engine_format.h"
#include "ingot/version.h"
#include "ir/text.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"

namespace ingot {
namespace {

using builder::Plan;
using engine::EngineIdentity;
namespace fs = std::filesystem;

EngineIdentity test_identity() {
  EngineIdentity id;
  id.backend = "cpu";
  id.gpu_arch = "";
  id.ingot_version = "0.1.0";
  id.library_versions = {{"cuda", "13.0"}, {"cudnn", "9.1.0"}};
  return id;
}

// One step per main-graph node and a value plan for every value the main graph names, with
// arbitrary but distinct numbers so a field mix-up shows.
Plan make_plan(std::shared_ptr<ir::Graph> g) {
  Plan p;
  p.graph = g;
  p.backend = "cpu";
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    builder::Step s;
    s.node = g->nodes()[i].get();
    s.tactic = i % 2 ? "cpu.reference" : "cpu.fast";
    s.params = {static_cast<uint8_t>(i), 0xff, 0x00, static_cast<uint8_t>(i * 7)};
    s.workspace_bytes = 64 * i;
    p.steps.push_back(s);
  }
  std::vector<const ir::Value*> seen;
  auto add = [&](const ir::Value* v, builder::Storage st, int step) {
    if (!v || std::find(seen.begin(), seen.end(), v) != seen.end()) return;
    seen.push_back(v);
    builder::ValuePlan vp;
    vp.value = v;
    vp.storage = st;
    vp.offset = 256 * seen.size();
    vp.max_bytes = 1000 + seen.size();
    vp.first_step = step;
    vp.last_step = step + 3;
    p.values.push_back(vp);
  };
  for (const ir::Value* v : g->inputs()) add(v, builder::Storage::kBinding, -1);
  for (const ir::Value* v : g->initializers()) add(v, builder::Storage::kWeight, -1);
  for (size_t i = 0; i < g->nodes().size(); ++i)
    for (const ir::Value* v : g->nodes()[i]->outputs()) add(v, i % 3 ? builder::Storage::kArena : builder::Storage::kDynamic, static_cast<int>(i));
  builder::Profile prof;
  for (const ir::Value* v : g->inputs()) prof.inputs.push_back({v->name(), {1, 2}, {4, 2}, {8, 2}});
  p.profiles = {prof, builder::Profile{}};
  p.memory = {123456, 7890, 4567, 890};
  return p;
}

void expect_same_tensor(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  if (a.dtype() == DataType::kString) {
    EXPECT_EQ(a.strings(), b.strings()) << what;
  } else if (a.nbytes() > 0) {
    EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes())) << what;
  }
}

// What ir::to_text does not show: origins, tensor bytes (large or in attributes), non-tensor
// kinds, and that subgraph nodes read the outer graph's own Value objects.
void expect_same_graph(const ir::Graph& a, const ir::Graph& b) {
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  ASSERT_EQ(a.initializers().size(), b.initializers().size());
  for (size_t i = 0; i < a.initializers().size(); ++i)
    expect_same_tensor(*a.initializers()[i]->initializer(), *b.initializers()[i]->initializer(),
                       "initializer " + a.initializers()[i]->name());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const ir::Node& na = *a.nodes()[i];
    const ir::Node& nb = *b.nodes()[i];
    EXPECT_EQ(na.origins(), nb.origins());
    ASSERT_EQ(na.inputs().size(), nb.inputs().size());
    for (size_t k = 0; k < na.inputs().size(); ++k) {
      if (!na.inputs()[k]) continue;
      // Same scope depth: a value of an outer graph stays a value of the matching outer graph.
      int da = 0, db = 0;
      for (const ir::Graph* g = &a; g && g != na.inputs()[k]->owner(); g = g->parent()) ++da;
      for (const ir::Graph* g = &b; g && g != nb.inputs()[k]->owner(); g = g->parent()) ++db;
      EXPECT_EQ(da, db) << na.describe() << " input " << k;
    }
    for (size_t k = 0; k < na.outputs().size(); ++k)
      if (na.outputs()[k]) EXPECT_EQ(na.outputs()[k]->non_tensor_kind(), nb.outputs()[k]->non_tensor_kind());
    for (const auto& [name, attr] : na.attrs().all()) {
      const ir::Attribute* other = nb.attrs().find(name);
      ASSERT_NE(other, nullptr) << name;
      expect_same_tensor(attr.t, other->t, na.describe() + " attribute " + name);
      ASSERT_EQ(attr.tensors.size(), other->tensors.size());
      for (size_t k = 0; k < attr.tensors.size(); ++k) expect_same_tensor(attr.tensors[k], other->tensors[k], name);
      EXPECT_EQ(attr.strings, other->strings);
      if (attr.g) expect_same_graph(*attr.g, *other->g);
      ASSERT_EQ(attr.graphs.size(), other->graphs.size());
      for (size_t k = 0; k < attr.graphs.size(); ++k) expect_same_graph(*attr.graphs[k], *other->graphs[k]);
    }
  }
}

int node_index(const Plan& p, const ir::Node* n) {
  for (size_t i = 0; i < p.graph->nodes().size(); ++i)
    if (p.graph->nodes()[i].get() == n) return static_cast<int>(i);
  return -1;
}

// Writes, reads back and compares everything. Returns the file for further checks.
std::vector<uint8_t> round_trip(const Plan& plan, Plan* out = nullptr) {
  auto bytes = engine::write_engine(plan, test_identity());
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  if (!bytes.ok()) return {};
  auto file = std::make_shared<std::vector<uint8_t>>(std::move(bytes).value());
  auto back = engine::read_engine(file->data(), file->size(), file, test_identity());
  EXPECT_TRUE(back.ok()) << back.status().to_string();
  if (!back.ok()) return *file;
  const Plan& r = back.value();
  EXPECT_EQ(ir::to_text(*r.graph), ir::to_text(*plan.graph));
  EXPECT_EQ(ir::to_text(*r.graph, 1u << 20), ir::to_text(*plan.graph, 1u << 20));
  expect_same_graph(*plan.graph, *r.graph);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.gpu_arch, "");
  EXPECT_FALSE(r.storage.empty());
  EXPECT_EQ(r.graph->opset_imports(), plan.graph->opset_imports());
  EXPECT_EQ(r.graph->name(), plan.graph->name());
  EXPECT_EQ(r.graph->inputs().size(), plan.graph->inputs().size());  // initializer inputs too
  [&] {
    ASSERT_EQ(r.steps.size(), plan.steps.size());
    for (size_t i = 0; i < r.steps.size(); ++i) {
      EXPECT_EQ(node_index(r, r.steps[i].node), node_index(plan, plan.steps[i].node));
      EXPECT_EQ(r.steps[i].tactic, plan.steps[i].tactic);
      EXPECT_EQ(r.steps[i].params, plan.steps[i].params);
      EXPECT_EQ(r.steps[i].workspace_bytes, plan.steps[i].workspace_bytes);
    }
    ASSERT_EQ(r.values.size(), plan.values.size());
    for (size_t i = 0; i < r.values.size(); ++i) {
      const auto& a = plan.values[i];
      const auto& b = r.values[i];
      ASSERT_NE(b.value, nullptr);
      EXPECT_EQ(b.value->name(), a.value->name());
      EXPECT_EQ(b.value->owner(), r.graph.get());
      EXPECT_EQ(b.storage, a.storage);
      EXPECT_EQ(b.offset, a.offset);
      EXPECT_EQ(b.max_bytes, a.max_bytes);
      EXPECT_EQ(b.first_step, a.first_step);
      EXPECT_EQ(b.last_step, a.last_step);
    }
    ASSERT_EQ(r.profiles.size(), plan.profiles.size());
    for (size_t i = 0; i < r.profiles.size(); ++i) {
      ASSERT_EQ(r.profiles[i].inputs.size(), plan.profiles[i].inputs.size());
      for (size_t k = 0; k < r.profiles[i].inputs.size(); ++k) {
        const auto& a = plan.profiles[i].inputs[k];
        const auto& b = r.profiles[i].inputs[k];
        EXPECT_EQ(b.input, a.input);
        EXPECT_EQ(b.min, a.min);
        EXPECT_EQ(b.opt, a.opt);
        EXPECT_EQ(b.max, a.max);
      }
    }
    EXPECT_EQ(r.memory.arena_bytes, plan.memory.arena_bytes);
    EXPECT_EQ(r.memory.weight_bytes, plan.memory.weight_bytes);
    EXPECT_EQ(r.memory.lower_bound_bytes, plan.memory.lower_bound_bytes);
    EXPECT_EQ(r.memory.workspace_bytes, plan.memory.workspace_bytes);
  }();
  std::vector<uint8_t> copy = *file;
  if (out) *out = std::move(back).value();
  return copy;
}

// ---- a hand-built model: If branches reading outer values, a Loop, string tensors --------

void set_type(::onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<int64_t> dims,
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

void float_tensor(::onnx::TensorProto* t, const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

std::string control_flow_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("cf");
  set_type(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {0, 3}, {"batch", ""});
  set_type(g->add_input(), "cond", ::onnx::TensorProto::BOOL, {});
  float_tensor(g->add_initializer(), "w", {3}, {1.5f, -2.0f, 0.25f});
  auto* names = g->add_initializer();
  names->set_name("labels");
  names->set_data_type(::onnx::TensorProto::STRING);
  names->add_dims(3);
  for (const char* s : {"cat", "", "a longer label with spaces"}) names->add_string_data(s);
  // then: x + w (both outer); else: x * w
  auto branch = [&](const char* name, const char* op_type) {
    ::onnx::GraphProto b;
    b.set_name(name);
    auto* n = b.add_node();
    n->set_op_type(op_type);
    n->add_input("x");
    n->add_input("w");
    n->add_output(std::string(name) + "_out");
    n->set_name(std::string(name) + "_node");
    set_type(b.add_output(), std::string(name) + "_out", ::onnx::TensorProto::FLOAT, {0, 3}, {"batch", ""});
    return b;
  };
  auto* ifn = g->add_node();
  ifn->set_op_type("If");
  ifn->set_name("the_if");
  ifn->add_input("cond");
  ifn->add_output("branch");
  auto* a = ifn->add_attribute();
  a->set_name("then_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = branch("then", "Add");
  a = ifn->add_attribute();
  a->set_name("else_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  *a->mutable_g() = branch("else", "Mul");
  // Loop: 3 trips of acc = acc + w (w from outer scope, two levels: body -> main).
  auto* trip = g->add_initializer();
  trip->set_name("trip");
  trip->set_data_type(::onnx::TensorProto::INT64);
  trip->add_int64_data(3);
  auto* loop = g->add_node();
  loop->set_op_type("Loop");
  loop->set_name("the_loop");
  loop->add_input("trip");
  loop->add_input("");
  loop->add_input("w");
  loop->add_output("acc_final");
  a = loop->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  body->set_name("body");
  set_type(body->add_input(), "i", ::onnx::TensorProto::INT64, {});
  set_type(body->add_input(), "c_in", ::onnx::TensorProto::BOOL, {});
  set_type(body->add_input(), "acc", ::onnx::TensorProto::FLOAT, {3});
  auto* n = body->add_node();
  n->set_op_type("Identity");
  n->add_input("c_in");
  n->add_output("c_out");
  n = body->add_node();
  n->set_op_type("Add");
  n->add_input("acc");
  n->add_input("w");
  n->add_output("acc_out");
  set_type(body->add_output(), "c_out", ::onnx::TensorProto::BOOL, {});
  set_type(body->add_output(), "acc_out", ::onnx::TensorProto::FLOAT, {3});
  // A Constant holding a string tensor attribute, and the string initializer passed through.
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->set_name("strings_const");
  c->add_output("greeting");
  a = c->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(::onnx::TensorProto::STRING);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_string_data("hello");
  a->mutable_t()->add_string_data(std::string("wor\0ld", 6));
  auto* idn = g->add_node();
  idn->set_op_type("Identity");
  idn->add_input("labels");
  idn->add_output("labels_out");
  set_type(g->add_output(), "branch", ::onnx::TensorProto::FLOAT, {0, 3}, {"batch", ""});
  set_type(g->add_output(), "acc_final", ::onnx::TensorProto::FLOAT, {3});
  set_type(g->add_output(), "greeting", ::onnx::TensorProto::STRING, {2});
  set_type(g->add_output(), "labels_out", ::onnx::TensorProto::STRING, {3});
  return m.SerializeAsString();
}

std::shared_ptr<ir::Graph> import_bytes(const std::string& bytes, std::vector<std::shared_ptr<const void>>* keep) {
  auto m = onnx::import_model_bytes(bytes.data(), bytes.size());
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  keep->insert(keep->end(), m.value().storage.begin(), m.value().storage.end());
  return std::shared_ptr<ir::Graph>(std::move(m.value().graph));
}

TEST(EngineFormat, ControlFlowAndStringsRoundTrip) {
  std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  ASSERT_NE(g, nullptr);
  g->nodes()[0]->add_origin("fused_a");  // origins survive too
  g->nodes()[0]->add_origin("fused_b");
  Plan back;
  round_trip(make_plan(g), &back);
  ASSERT_NE(back.graph, nullptr);
  // The If branch's Add reads the main graph's own `x` and `w` Values.
  const ir::Node* ifn = back.graph->nodes()[0].get();
  for (const ir::Node* n : {back.graph->nodes()[0].get(), back.graph->nodes()[1].get()})
    if (n->op_type() == "If") ifn = n;
  ASSERT_EQ(ifn->op_type(), "If");
  const ir::Graph* then_g = ifn->attrs().get_graph("then_branch");
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->parent(), back.graph.get());
  const ir::Node& add = *then_g->nodes()[0];
  EXPECT_EQ(add.input(0), back.graph->find_value("x"));
  EXPECT_EQ(add.input(1), back.graph->find_value("w"));
  ASSERT_EQ(add.input(1)->uses().size(), back.graph->find_value("w")->uses().size());
  // Strings came back, including an embedded NUL.
  const ir::Value* labels = back.graph->find_value("labels");
  ASSERT_NE(labels, nullptr);
  EXPECT_EQ(labels->initializer()->strings(), (std::vector<std::string>{"cat", "", "a longer label with spaces"}));
  for (const auto& n : back.graph->nodes())
    if (n->op_type() == "Constant")
      EXPECT_EQ(n->attrs().get_tensor("value")->strings(), (std::vector<std::string>{"hello", std::string("wor\0ld", 6)}));
}

TEST(EngineFormat, WeightsAreBorrowedFromTheBuffer) {
  std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  ASSERT_NE(g, nullptr);
  auto bytes = engine::write_engine(make_plan(g), test_identity());
  ASSERT_TRUE(bytes.ok());
  auto file = std::make_shared<std::vector<uint8_t>>(std::move(bytes).value());
  std::weak_ptr<std::vector<uint8_t>> weak = file;
  const uint8_t* begin = file->data();
  const uint8_t* end = begin + file->size();
  const void* w_data = nullptr;
  {
    auto back = engine::read_engine(file->data(), file->size(), file, test_identity());
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    const Tensor* w = back.value().graph->find_value("w")->initializer();
    ASSERT_NE(w, nullptr);
    auto* p = static_cast<const uint8_t*>(w->raw());
    EXPECT_GE(p, begin);
    EXPECT_LE(p + w->nbytes(), end);
    EXPECT_EQ((p - begin) % 64, 0);
    EXPECT_EQ(w->to_f64_vector(), (std::vector<double>{1.5, -2.0, 0.25}));
    w_data = p;
    // The plan keeps the buffer alive on its own.
    file.reset();
    EXPECT_FALSE(weak.expired());
    EXPECT_EQ(w->to_f64_vector(), (std::vector<double>{1.5, -2.0, 0.25}));
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_NE(w_data, nullptr);
}

TEST(EngineFormat, MisalignedBufferStillLoads) {
  std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  ASSERT_NE(g, nullptr);
  auto bytes = engine::write_engine(make_plan(g), test_identity()).value();
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  auto back = engine::read_engine(shifted.data() + 1, bytes.size(), nullptr, test_identity());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const Tensor* w = back.value().graph->find_value("w")->initializer();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->raw()) % 64, 0u);
  shifted.assign(shifted.size(), 0);  // the plan owns its copy
  EXPECT_EQ(w->to_f64_vector(), (std::vector<double>{1.5, -2.0, 0.25}));
}

fs::path node_dir() {
  const char* env = std::getenv("INGOT_NODE_TESTS_DIR");
  return env ? fs::path(env) : fs::path("/tmp/gen/node");
}

TEST(EngineFormat, NodeSuiteModelsRoundTrip) {
  fs::path dir = node_dir();
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " missing (generate the ONNX node suite)";
  int imported = 0, subgraphs = 0;
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(dir))
    if (fs::exists(e.path() / "model.onnx")) models.push_back(e.path() / "model.onnx");
  std::sort(models.begin(), models.end());
  for (const auto& path : models) {
    auto m = onnx::import_model_file(path.string());
    if (!m.ok()) continue;
    ++imported;
    std::shared_ptr<ir::Graph> g(std::move(m.value().graph));
    for (const auto& n : g->nodes())
      for (const auto& [k, a] : n->attrs().all()) subgraphs += a.g || !a.graphs.empty();
    SCOPED_TRACE(path.string());
    round_trip(make_plan(g));
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(imported, 1000);
  EXPECT_GT(subgraphs, 10);
  std::cout << "round-tripped " << imported << " node-suite models (" << subgraphs << " subgraph attributes)\n";
}

TEST(EngineFormat, WholeModelsRoundTrip) {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("INGOT_TEST_MODELS")) dirs.push_back(env);
  dirs.push_back("/tmp/m_engine");
  dirs.push_back("/tmp/m");
  int n = 0;
  for (const auto& d : dirs) {
    if (!fs::exists(d)) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      if (!fs::exists(e.path() / "model.onnx")) continue;
      auto m = onnx::import_model_file((e.path() / "model.onnx").string());
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      SCOPED_TRACE(e.path().string());
      round_trip(make_plan(std::shared_ptr<ir::Graph>(std::move(m.value().graph))));
      ++n;
    }
    break;
  }
  if (n == 0) GTEST_SKIP() << "no test models (python3 tests/models/make_models.py -o /tmp/m)";
}

// ---- errors -----------------------------------------------------------------------------

std::vector<uint8_t> small_engine() {
  static std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  return engine::write_engine(make_plan(g), test_identity()).value();
}

Status read(const std::vector<uint8_t>& b, size_t size, const EngineIdentity& id = test_identity()) {
  return engine::read_engine(b.data(), size, nullptr, id).status();
}

TEST(EngineFormat, BadMagic) {
  auto b = small_engine();
  b[0] = 'X';
  Status s = read(b, b.size());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not an ingot engine"), std::string::npos) << s.message();
  EXPECT_FALSE(engine::read_engine_identity(b.data(), b.size()).ok());
  std::string onnx = control_flow_model();
  EXPECT_FALSE(engine::read_engine(onnx.data(), onnx.size(), nullptr, test_identity()).ok());
  EXPECT_FALSE(engine::read_engine(nullptr, 0, nullptr, test_identity()).ok());
}

TEST(EngineFormat, TruncatedAnywhere) {
  auto b = small_engine();
  ASSERT_TRUE(read(b, b.size()).ok());
  for (size_t cut = 0; cut < b.size(); cut += (cut < 200 ? 1 : 37)) {
    std::vector<uint8_t> t(b.begin(), b.begin() + cut);
    Status s = read(t, t.size());
    EXPECT_FALSE(s.ok()) << "cut at " << cut;
  }
  Status s = read(b, b.size() - 1);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  b.push_back(0);
  EXPECT_FALSE(read(b, b.size()).ok());
}

TEST(EngineFormat, EveryFlippedByteIsAnError) {
  auto b = small_engine();
  int checksum_errors = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      b[i] ^= mask;
      Status s = read(b, b.size());
      EXPECT_FALSE(s.ok()) << "byte " << i;
      checksum_errors += s.message().find("checksum") != std::string::npos;
      b[i] ^= mask;
    }
  }
  EXPECT_GT(checksum_errors, static_cast<int>(b.size()));  // past the header, the checksum catches it
  EXPECT_TRUE(read(b, b.size()).ok());
}

// A value planned in an output's binding (Storage::kOutputView) round-trips; one whose offset names
// a value that is not a binding (a foreign or damaged engine with a valid checksum) is refused.
TEST(EngineFormat, OutputViewsMustNameABinding) {
  static std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  Plan p = make_plan(g);
  int arena = -1, binding = -1, weight = -1;
  for (size_t i = 0; i < p.values.size(); ++i) {
    if (arena < 0 && p.values[i].storage == builder::Storage::kArena) arena = static_cast<int>(i);
    if (binding < 0 && p.values[i].storage == builder::Storage::kBinding) binding = static_cast<int>(i);
    if (weight < 0 && p.values[i].storage == builder::Storage::kWeight) weight = static_cast<int>(i);
  }
  ASSERT_TRUE(arena >= 0 && binding >= 0 && weight >= 0);
  p.values[static_cast<size_t>(arena)].storage = builder::Storage::kOutputView;
  p.values[static_cast<size_t>(arena)].offset = static_cast<uint64_t>(binding);
  Plan back;
  round_trip(p, &back);
  ASSERT_EQ(back.values.size(), p.values.size());
  EXPECT_EQ(back.values[static_cast<size_t>(arena)].storage, builder::Storage::kOutputView);
  EXPECT_EQ(back.values[static_cast<size_t>(arena)].offset, static_cast<uint64_t>(binding));
  for (uint64_t bad : {static_cast<uint64_t>(weight), static_cast<uint64_t>(p.values.size()), uint64_t{1} << 40}) {
    p.values[static_cast<size_t>(arena)].offset = bad;
    auto bytes = engine::write_engine(p, test_identity());
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    Status s = read(*bytes, bytes->size());
    ASSERT_FALSE(s.ok()) << "offset " << bad;
    EXPECT_NE(s.message().find("names no output"), std::string::npos) << s.message();
  }
}

TEST(EngineFormat, OtherFormatVersion) {
  auto b = small_engine();
  b[8] = 2;  // u32 little-endian at offset 8
  Status s = read(b, b.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("format version"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("file has 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("reads version 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rebuild"), std::string::npos) << s.message();
  EXPECT_FALSE(engine::read_engine_identity(b.data(), b.size()).ok());
}

void expect_mismatch(EngineIdentity file_id, const std::vector<std::string>& words) {
  std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  Plan p = make_plan(g);
  p.backend = "";
  auto b = engine::write_engine(p, file_id);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  Status s = read(b.value(), b.value().size());
  ASSERT_FALSE(s.ok());
  for (const auto& w : words) EXPECT_NE(s.message().find(w), std::string::npos) << w << " not in: " << s.message();
  auto id = engine::read_engine_identity(b.value().data(), b.value().size());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id.value().backend, file_id.backend);
  EXPECT_EQ(id.value().gpu_arch, file_id.gpu_arch);
  EXPECT_EQ(id.value().ingot_version, file_id.ingot_version);
  EXPECT_EQ(id.value().library_versions, file_id.library_versions);
}

TEST(EngineFormat, IdentityMismatchesNameTheField) {
  EngineIdentity id = test_identity();
  id.ingot_version = "0.0.9";
  expect_mismatch(id, {"ingot version", "'0.0.9'", "'0.1.0'", "rebuild the engine with this ingot"});
  id = test_identity();
  id.backend = "cuda";
  expect_mismatch(id, {"backend", "'cuda'", "'cpu'", "rebuild"});
  id = test_identity();
  id.gpu_arch = "sm_80";
  expect_mismatch(id, {"GPU arch", "'sm_80'", "(none)", "rebuild the engine on this GPU"});
  id = test_identity();
  id.library_versions["cudnn"] = "8.9.7";
  expect_mismatch(id, {"library version of cudnn", "'8.9.7'", "'9.1.0'", "rebuild"});
  id = test_identity();
  id.library_versions.erase("cuda");
  expect_mismatch(id, {"library version of cuda", "(none)", "'13.0'"});
  id = test_identity();
  id.library_versions["cublas"] = "13.1";
  expect_mismatch(id, {"library version of cublas", "'13.1'", "(none)"});
}

TEST(EngineFormat, GpuArchMismatchAgainstARunningGpu) {
  auto b = small_engine();
  EngineIdentity gpu = test_identity();
  gpu.gpu_arch = "sm_90";
  Status s = read(b, b.size(), gpu);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("GPU arch: file has (none), this GPU is 'sm_90'"), std::string::npos) << s.message();
}

TEST(EngineFormat, WriteRejectsForeignNodesAndValues) {
  std::vector<std::shared_ptr<const void>> keep;
  auto g = import_bytes(control_flow_model(), &keep);
  Plan p = make_plan(g);
  ir::Graph other;
  ir::Value* stranger = other.add_input("stranger", DataType::kFloat32, ir::Shape{});
  p.values[0].value = stranger;
  auto r = engine::write_engine(p, test_identity());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stranger"), std::string::npos) << r.status().message();
  p = make_plan(g);
  p.backend = "cuda";
  EXPECT_FALSE(engine::write_engine(p, test_identity()).ok());
}

TEST(EngineFormat, CurrentIdentityIsThisBuild) {
  EngineIdentity id = engine::current_identity("cpu", "");
  EXPECT_EQ(id.ingot_version, std::string(version()));
  EXPECT_EQ(id.backend, "cpu");
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// Not a check: writes fuzz seeds (mode byte 1 + engine) when INGOT_ENGINE_SEEDS_DIR is set.
TEST(EngineFormat, WriteFuzzSeeds) {
  const char* dir = std::getenv("INGOT_ENGINE_SEEDS_DIR");
  if (!dir) GTEST_SKIP() << "set INGOT_ENGINE_SEEDS_DIR to write fuzz seeds";
  fs::create_directories(dir);
  std::vector<std::shared_ptr<const void>> keep;
  std::vector<std::pair<std::string, std::shared_ptr<ir::Graph>>> graphs = {{"control_flow", import_bytes(control_flow_model(), &keep)}};
  for (const char* name : {"test_if", "test_loop11", "test_scan9_sum", "test_add_bcast", "test_constant"}) {
    auto m = onnx::import_model_file((node_dir() / name / "model.onnx").string());
    if (m.ok()) graphs.emplace_back(name, std::shared_ptr<ir::Graph>(std::move(m.value().graph)));
  }
  for (const auto& [name, g] : graphs) {
    auto b = engine::write_engine(make_plan(g), test_identity());
    ASSERT_TRUE(b.ok());
    std::ofstream f(fs::path(dir) / (name + ".seed"), std::ios::binary);
    f.put(1);
    f.write(reinterpret_cast<const char*>(b.value().data()), static_cast<std::streamsize>(b.value().size()));
  }
}

}  // namespace
}  // namespace ingot
