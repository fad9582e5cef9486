// Copyright ingot authors. Apache-2.0.
//
// Reduced-precision engines (BuilderConfig::fp16 / bf16) on the CPU backend, whose reference
// kernels compute in the stored type: the test models keep their outputs within fp16/bf16
// tolerance of the fp32 interpreter, engine I/O keeps its types, casts appear only at region
// boundaries, forced layer precisions are honoured, and weights beyond the reduced range keep
// their layer in fp32 instead of turning into infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "backend/cpu/executor.h"
#include "backend/device.h"
#include "builder/precision.h"
#include "builder/split_fusions.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "engine_run_util.h"
#include "ir/text.h"
#include "ir_test_util.h"
#include "named_tactic.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

using test::Quiet;

Tensor read_pb(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ::onnx::TensorProto proto;
  EXPECT_TRUE(proto.ParseFromString(ss.str())) << p;
  auto t = onnx::tensor_from_proto(proto, onnx::TensorSource());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

using testing_util::build_and_run;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// max |got - want| relative to the largest |want|, and the cosine of the two.
std::pair<double, double> error_and_cosine(const Tensor& got, const Tensor& want) {
  double max_err = 0, max_ref = 0, dot = 0, ng = 0, nw = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    if (!std::isfinite(g)) return {INFINITY, 0};
    max_err = std::max(max_err, std::fabs(g - w));
    max_ref = std::max(max_ref, std::fabs(w));
    dot += g * w;
    ng += g * g;
    nw += w * w;
  }
  double cos = ng == 0 && nw == 0 ? 1 : dot / std::sqrt(ng * nw);
  return {max_err / std::max(max_ref, 1e-6), cos};
}

TEST(PrecisionModels, Fp16AndBf16EnginesOfTheTestModelsMatchTheInterpreter) {
  int checked = 0;
  for (const char* env : {"INGOT_TEST_MODELS", "INGOT_OPTIMIZER_MODELS"}) {
    const char* dir = std::getenv(env);
    if (!dir) GTEST_SKIP() << env << " not set (ctest sets it to the generated models)";
    for (const auto& entry : fs::directory_iterator(dir)) {
      fs::path data = entry.path() / "test_data_set_0";
      if (!fs::exists(entry.path() / "model.onnx") || !fs::exists(data)) continue;
      std::string bytes = slurp(entry.path() / "model.onnx");
      auto model = onnx::import_model_bytes(bytes.data(), bytes.size());
      ASSERT_TRUE(model.ok()) << entry.path();
      std::map<std::string, Tensor> feeds;
      size_t k = 0;
      for (const ir::Value* in : model->graph->inputs()) {
        if (in->initializer()) continue;
        fs::path pb = data / ("input_" + std::to_string(k++) + ".pb");
        if (!fs::exists(pb)) break;
        feeds[in->name()] = read_pb(pb);
      }
      cpu::Executor exec;
      auto want = exec.run(*model->graph, feeds);
      ASSERT_TRUE(want.ok()) << entry.path() << ": " << want.status().to_string();
      bool fp32_finite = true;
      for (const Tensor& w : *want)
        for (int64_t i = 0; i < w.numel() && is_float(w.dtype()); ++i) fp32_finite &= std::isfinite(w.get_f64(i));
      if (!fp32_finite) continue;
      for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
        BuilderConfig cfg;
        (t == DataType::kFloat16 ? cfg.fp16 : cfg.bf16) = true;
        // Same dims as the data: models with open dims get a profile pinned to it.
        for (const auto& [name, tensor] : feeds) {
          OptimizationProfile p;
          if (cfg.profiles.empty()) cfg.profiles.emplace_back();
          cfg.profiles[0].set_dimensions(name, tensor.shape(), tensor.shape(), tensor.shape());
        }
        auto got = build_and_run(bytes, cfg, feeds);
        ASSERT_TRUE(got.ok()) << entry.path() << ": " << got.status().to_string();
        EXPECT_GT(got->summary.reduced_precision_layers, 0) << entry.path();
        // Casts only where fp32 meets the reduced region: at most one per engine input and
        // output, plus the few layers kept in fp32 on purpose.
        EXPECT_LE(got->summary.precision_casts, static_cast<int>(got->io.size()) + 2) << entry.path();
        for (const IoTensorDesc& d : got->io) EXPECT_NE(d.dtype, t) << d.name << " changed type";
        ASSERT_EQ(got->outputs.size(), want->size());
        const double tol = t == DataType::kFloat16 ? 2e-2 : 8e-2;
        for (size_t o = 0; o < want->size(); ++o) {
          if (!is_float((*want)[o].dtype())) continue;
          auto [err, cos] = error_and_cosine(got->outputs[o], (*want)[o]);
          EXPECT_LT(err, tol) << entry.path() << " output " << o << " in " << data_type_name(t);
          EXPECT_GT(cos, t == DataType::kFloat16 ? 0.9995 : 0.995) << entry.path() << " output " << o;
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 8) << "expected the test and optimizer models with their data";
}

// A small ONNX model written in code: typed inputs and outputs, sin-pattern fp32 weights, nodes.
struct OnnxModel {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = nullptr;
  OnnxModel() {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    g = m.mutable_graph();
  }
  static void io(::onnx::ValueInfoProto* vi, const char* name, int type, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const char* name, std::vector<int64_t> dims, int type = ::onnx::TensorProto::FLOAT) {
    io(g->add_input(), name, type, std::move(dims));
  }
  void output(const char* name, std::vector<int64_t> dims) { io(g->add_output(), name, ::onnx::TensorProto::FLOAT, dims); }
  void weight(const char* name, std::vector<int64_t> dims, float scale) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(scale * std::sin(0.7f * static_cast<float>(i) + 0.3f));
  }
  void node(const char* op, std::vector<const char*> in, const char* out, const char* name) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

// y = (x · W1 [mm1] → Relu [act]) · W2 [mm2] + big [add_big], with W1 shared by a fp32 path.
std::string small_model(float big) {
  OnnxModel m;
  m.input("x", {4, 8});
  m.output("y", {4, 8});
  m.weight("w1", {8, 8}, 0.5f);
  m.weight("w2", {8, 8}, 0.5f);
  m.weight("big", {8}, big);
  m.node("MatMul", {"x", "w1"}, "h", "mm1");
  m.node("Relu", {"h"}, "hr", "act");
  m.node("MatMul", {"hr", "w2"}, "o", "mm2");
  m.node("Add", {"o", "big"}, "y", "add_big");
  return m.bytes();
}

std::map<std::string, Tensor> small_feeds() {
  Tensor x = Tensor::zeros(DataType::kFloat32, {4, 8}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(0.37 * i) + 0.05);
  return {{"x", x}};
}

int count_op(const std::vector<LayerDesc>& layers, const std::string& op) {
  int n = 0;
  for (const LayerDesc& l : layers) n += l.op == op;
  return n;
}

TEST(Precision, ForcedLayerPrecisionsAreHonouredAndNamesChecked) {
  std::string bytes = small_model(0.25f);
  BuilderConfig cfg;
  cfg.fp16 = true;
  cfg.disabled_passes = {"fuse_conv_gemm", "fuse_pointwise"};  // keep one layer per node
  auto all = build_and_run(bytes, cfg, small_feeds());
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(all->summary.reduced_precision_layers, 4);
  EXPECT_EQ(count_op(all->layers, "Cast"), 2);  // x in, y out

  // mm2 forced to fp32: the reduced region is cut there, with a cast on each side of it.
  cfg.layer_precisions["mm2"] = "fp32";
  auto cut = build_and_run(bytes, cfg, small_feeds());
  ASSERT_TRUE(cut.ok()) << cut.status().to_string();
  EXPECT_EQ(cut->summary.reduced_precision_layers, 3);
  EXPECT_EQ(count_op(cut->layers, "Cast"), 4);
  auto [err, cos] = error_and_cosine(cut->outputs[0], all->outputs[0]);
  EXPECT_LT(err, 2e-2);
  EXPECT_GT(cos, 0.999);

  // Only act forced to fp16, no global flag: only it is lowered.
  BuilderConfig one;
  one.disabled_passes = cfg.disabled_passes;
  one.layer_precisions["act"] = "fp16";
  auto single = build_and_run(bytes, one, small_feeds());
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  EXPECT_EQ(single->summary.reduced_precision_layers, 1);

  BuilderConfig typo = cfg;
  typo.layer_precisions = {{"mm3", "fp32"}};
  auto bad = build_and_run(bytes, typo, small_feeds());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mm3'"), std::string::npos) << bad.status().message();
  typo.layer_precisions = {{"mm1", "fp8"}};
  bad = build_and_run(bytes, typo, small_feeds());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos) << bad.status().message();
}

// --reduced-io: the fp32 input and output take the reduced type, so no Cast runs at the edges;
// the outputs are those of the default fp16 engine (which casts at its edges) to fp16 rounding.
// A layer kept in fp32 next to the input or output gets the Casts instead, and the I/O stays
// reduced. Without --fp16/--bf16 the flag is an error.
TEST(Precision, ReducedIoEnginesTakeAndGiveTheReducedType) {
  const std::string bytes = small_model(0.25f);
  BuilderConfig cfg;
  cfg.fp16 = true;
  cfg.disabled_passes = {"fuse_conv_gemm", "fuse_pointwise"};  // keep one layer per node
  auto edges = build_and_run(bytes, cfg, small_feeds());
  ASSERT_TRUE(edges.ok()) << edges.status().to_string();

  std::map<std::string, Tensor> feeds16;
  for (const auto& [name, t] : small_feeds()) {
    Tensor h = Tensor::zeros(DataType::kFloat16, t.shape()).value();
    for (int64_t i = 0; i < t.numel(); ++i) h.set_f64(i, t.get_f64(i));
    feeds16[name] = h;
  }
  cfg.reduced_io = true;
  auto io = build_and_run(bytes, cfg, feeds16);
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  for (const IoTensorDesc& d : io->io) EXPECT_EQ(d.dtype, DataType::kFloat16) << d.name;
  EXPECT_EQ(count_op(io->layers, "Cast"), 0);
  EXPECT_EQ(io->summary.reduced_precision_layers, edges->summary.reduced_precision_layers);
  ASSERT_EQ(io->outputs.size(), 1u);
  EXPECT_EQ(io->outputs[0].dtype(), DataType::kFloat16);
  auto [err, cos] = error_and_cosine(io->outputs[0], edges->outputs[0]);
  EXPECT_LT(err, 1e-3);  // the same fp16 math; the output rounded to fp16 once more
  EXPECT_GT(cos, 0.99999);

  // mm1 (reads x) and add_big (writes y) kept in fp32: Casts up from x and down to y.
  cfg.layer_precisions = {{"mm1", "fp32"}, {"add_big", "fp32"}};
  auto kept = build_and_run(bytes, cfg, feeds16);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  for (const IoTensorDesc& d : kept->io) EXPECT_EQ(d.dtype, DataType::kFloat16) << d.name;
  EXPECT_EQ(kept->io.size(), 2u);
  for (const IoTensorDesc& d : kept->io) EXPECT_TRUE(d.name == "x" || d.name == "y") << d.name;
  EXPECT_EQ(count_op(kept->layers, "Cast"), 4);  // x up; mm1's output down; o up; y down
  auto [err2, cos2] = error_and_cosine(kept->outputs[0], edges->outputs[0]);
  EXPECT_LT(err2, 2e-2);
  EXPECT_GT(cos2, 0.999);

  BuilderConfig no_reduced;
  no_reduced.reduced_io = true;
  auto bad = build_and_run(bytes, no_reduced, small_feeds());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--fp16"), std::string::npos) << bad.status().message();
}

// Data movement right on a reduced-I/O input follows the input's type: lift_conv1d's Reshape of
// Whisper's mel input ran fp32 between a Cast up and a Cast down (35 us at batch 32 on the H200).
TEST(Precision, ReducedIoInputsCarryTheirTypeThroughDataMovement) {
  OnnxModel m;
  m.input("x", {8, 4});
  m.output("y", {4, 8});
  m.weight("w1", {8, 8}, 0.5f);
  m.node("Flatten", {"x"}, "xf", "flat");  // [8, 4]: a no-op copy the cleanup keeps as a view
  m.node("Transpose", {"xf"}, "xt", "move");
  m.node("MatMul", {"xt", "w1"}, "y", "mm1");
  const std::string bytes = m.bytes();
  BuilderConfig cfg;
  cfg.fp16 = true;
  cfg.reduced_io = true;
  Tensor x = Tensor::zeros(DataType::kFloat16, {8, 4}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::cos(0.37 * i) + 0.05);
  auto io = build_and_run(bytes, cfg, {{"x", x}});
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  EXPECT_EQ(count_op(io->layers, "Cast"), 0);
  for (const LayerDesc& l : io->layers) EXPECT_NE(l.precision, "f32") << l.name << " " << l.op;
}

TEST(Precision, WeightsBeyondTheReducedRangeKeepTheirLayerInFp32) {
  std::string bytes = small_model(1e6f);  // 1e6 overflows fp16 (max 65504), not bf16
  BuilderConfig cfg;
  cfg.fp16 = true;
  cfg.disabled_passes = {"fuse_conv_gemm", "fuse_pointwise"};
  auto got = build_and_run(bytes, cfg, small_feeds());
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->summary.reduced_precision_layers, 3);  // add_big stays fp32
  bool noted = false;
  for (const std::string& n : got->summary.notes) noted |= n.find("'big'") != std::string::npos;
  EXPECT_TRUE(noted) << "a note names the weight that keeps its layer in fp32";
  for (int64_t i = 0; i < got->outputs[0].numel(); ++i) ASSERT_TRUE(std::isfinite(got->outputs[0].get_f64(i)));
  BuilderConfig b = cfg;
  b.fp16 = false;
  b.bf16 = true;
  auto bf = build_and_run(bytes, b, small_feeds());
  ASSERT_TRUE(bf.ok()) << bf.status().to_string();
  EXPECT_EQ(bf->summary.reduced_precision_layers, 4);  // 1e6 fits bf16
}

// Embedding tables: Gather(table, ids) -> MatMul. The Gather reads the table converted to fp16
// (no fp32 rows, no Cast after it); a Gather whose rows are an engine output, or feed an fp32
// layer, keeps its fp32 table.
std::string embedding_model() {
  OnnxModel m;
  m.input("ids", {2, 3}, ::onnx::TensorProto::INT64);
  m.output("y", {2, 3, 8});
  m.output("rows", {2, 3, 8});
  m.weight("table", {10, 8}, 1.0f);
  m.weight("table2", {10, 8}, 0.9f);  // not table's values, which CSE would merge
  m.weight("w", {8, 8}, 0.5f);
  m.node("Gather", {"table", "ids"}, "e", "embed");
  m.node("MatMul", {"e", "w"}, "y", "proj");
  m.node("Gather", {"table2", "ids"}, "rows", "embed_out");
  return m.bytes();
}

TEST(Precision, EmbeddingGathersReadTheConvertedTable) {
  Tensor ids = Tensor::zeros(DataType::kInt64, {2, 3}).value();
  for (int64_t i = 0; i < ids.numel(); ++i) ids.set_f64(i, static_cast<double>((3 * i + 1) % 10));
  BuilderConfig fp32;
  auto want = build_and_run(embedding_model(), fp32, {{"ids", ids}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  BuilderConfig cfg;
  cfg.fp16 = true;
  auto got = build_and_run(embedding_model(), cfg, {{"ids", ids}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::map<std::string, std::string> precision;
  for (const LayerDesc& l : got->layers) precision[l.name] = l.precision;
  EXPECT_EQ(precision["embed"], "f16") << "the Gather feeding the fp16 MatMul reads the fp16 table";
  EXPECT_EQ(precision["embed_out"], "f32") << "rows that are an engine output keep fp32";
  // One Cast: y back to fp32. None between the Gather and the MatMul.
  EXPECT_EQ(count_op(got->layers, "Cast"), 1);
  auto [err, cos] = error_and_cosine(got->outputs[0], want->outputs[0]);
  EXPECT_LT(err, 5e-3);
  EXPECT_GT(cos, 0.9999);
  for (int64_t i = 0; i < want->outputs[1].numel(); ++i)
    ASSERT_EQ(got->outputs[1].get_f64(i), want->outputs[1].get_f64(i)) << "fp32 rows, bit for bit, element " << i;
}

// x -> RMSNormalization [rms] -> MatMul [mm] -> InstanceNormalization [inorm] -> y (opset 23).
std::string norm_model() {
  OnnxModel m;
  m.m.mutable_opset_import(0)->set_version(23);
  m.input("x", {2, 4, 16});
  m.output("y", {2, 4, 16});
  m.weight("g", {16}, 1.0f);
  m.weight("w", {16, 16}, 0.5f);
  m.weight("s", {4}, 0.8f);
  m.weight("b", {4}, 0.3f);
  m.node("RMSNormalization", {"x", "g"}, "n", "rms");
  m.node("MatMul", {"n", "w"}, "h", "mm");
  m.node("InstanceNormalization", {"h", "s", "b"}, "y", "inorm");
  return m.bytes();
}

// Normalizations keep their statistics in fp32 inside the kernel, so a fp16 engine runs them in
// fp16 between fp16 neighbours: no Casts around them (Llama's RMSNorms kept in fp32 cost two
// Casts each, 19 in a 4-layer decoder).
TEST(Precision, NormalizationsRunInTheReducedTypeWithoutCasts) {
  Tensor x = Tensor::zeros(DataType::kFloat32, {2, 4, 16}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, 2.0 * std::sin(0.37 * i) + 0.1);
  BuilderConfig fp32;
  auto want = build_and_run(norm_model(), fp32, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  BuilderConfig cfg;
  cfg.fp16 = true;
  auto got = build_and_run(norm_model(), cfg, {{"x", x}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::map<std::string, std::string> precision;
  for (const LayerDesc& l : got->layers) precision[l.name] = l.precision;
  EXPECT_EQ(precision["rms"], "f16");
  EXPECT_EQ(precision["inorm"], "f16");
  EXPECT_EQ(count_op(got->layers, "Cast"), 2);  // x in, y out
  auto [err, cos] = error_and_cosine(got->outputs[0], want->outputs[0]);
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(cos, 0.9999);
}

// Calibrates on one batch: the test input itself (min-max).
class OneBatch final : public Calibrator {
 public:
  explicit OneBatch(const Tensor& x) : x_(x) {}
  Result<std::vector<HostTensor>> next_batch(const std::vector<TensorInfo>&) override {
    if (done_) return std::vector<HostTensor>{};
    done_ = true;
    INGOT_ASSIGN_OR_RETURN(HostTensor h, HostTensor::zeros("x", DataType::kFloat32, x_.shape()));
    for (int64_t i = 0; i < x_.numel(); ++i) h.set_element(i, x_.get_f64(i));
    return std::vector<HostTensor>{h};
  }
  std::string algorithm() const override { return "minmax"; }

 private:
  Tensor x_;
  bool done_ = false;
};

// An fp16 + int8 engine quantizes reduced activations as they are: Relu -> QuantizeLinear reads
// the fp16 value, no Cast up in between (without the precision pass's rule: 4 Casts) (BERT fp8 at batch 64 paid 49 such Casts, 1.5 of 7.1 ms,
// in s25q2); the quantized GEMMs write fp16 for the fp16 neighbours.
TEST(Precision, QuantizeLinearReadsTheReducedActivationWithoutACast) {
  OnnxModel m;
  m.input("x", {4, 16});
  m.output("y", {4, 16});
  m.weight("w1", {16, 16}, 0.5f);
  m.weight("w2", {16, 16}, 0.25f);
  m.node("Relu", {"x"}, "r1", "relu1");
  m.node("MatMul", {"r1", "w1"}, "h", "mm1");
  m.node("Relu", {"h"}, "r2", "relu2");
  m.node("MatMul", {"r2", "w2"}, "y", "mm2");
  Tensor x = Tensor::zeros(DataType::kFloat32, {4, 16}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, 2.0 * std::sin(0.37 * i) + 0.1);
  BuilderConfig fp32;
  auto want = build_and_run(m.bytes(), fp32, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  OneBatch cal(x);
  BuilderConfig cfg;
  cfg.fp16 = true;
  cfg.int8 = true;
  cfg.calibrator = &cal;
  auto got = build_and_run(m.bytes(), cfg, {{"x", x}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // relu1 -> QuantizeLinear in fp16; mm1 takes relu2 and the second QuantizeLinear in and writes
  // int8 for mm2 (fuse_quant_gemm), so one QuantizeLinear step is left.
  EXPECT_EQ(count_op(got->layers, "ingot::QuantGemm"), 2);
  EXPECT_EQ(count_op(got->layers, "QuantizeLinear"), 1);
  EXPECT_EQ(count_op(got->layers, "Cast"), 2);  // x in, y out
  std::map<std::string, std::string> precision;
  for (const LayerDesc& l : got->layers) precision[l.name] = l.precision;
  EXPECT_EQ(precision["relu1"], "f16");
  auto [err, cos] = error_and_cosine(got->outputs[0], want->outputs[0]);
  EXPECT_LT(err, 5e-2);  // int8 min-max on one batch: ~1/127 per operand
  EXPECT_GT(cos, 0.999);
}

// A small int8 ResNet in float (the calibrated build quantizes it): conv1 -> Relu, then a block of
// conv2 and a second branch conv_d joined by a residual Add -> Relu, then conv3, the engine
// output. Every conv becomes an ingot::QuantConv: conv1 and the block's writing int8 for the next
// conv, conv_d and conv3 a float result.
std::string int8_resnet_model() {
  OnnxModel m;
  m.input("x", {2, 4, 8, 8});
  m.output("y", {2, 3, 2, 2});
  m.weight("w1", {4, 4, 3, 3}, 0.3f);
  m.weight("b1", {4}, 0.2f);
  m.weight("w2", {4, 4, 3, 3}, 0.25f);
  m.weight("b2", {4}, 0.1f);
  m.weight("wd", {4, 4, 3, 3}, 0.2f);
  m.weight("bd", {4}, 0.15f);
  m.weight("w3", {3, 4, 3, 3}, 0.3f);
  m.weight("b3", {3}, 0.1f);
  m.node("Conv", {"x", "w1", "b1"}, "c1", "conv1");
  m.node("Relu", {"c1"}, "r1", "relu1");
  m.node("Conv", {"r1", "w2", "b2"}, "c2", "conv2");
  m.node("Conv", {"r1", "wd", "bd"}, "d", "conv_d");
  m.node("Add", {"c2", "d"}, "a", "add");
  m.node("Relu", {"a"}, "r2", "relu2");
  m.node("Conv", {"r2", "w3", "b3"}, "y", "conv3");
  return m.bytes();
}

// An fp16 / bf16 + int8 CNN: the QuantConvs compute in the reduced type (their bias, residual and
// float results; the 8-bit operands and fp32 scales as they are), so the only Cast is the engine
// output's; the block's QuantConv, which writes int8, reads the reduced residual as it is. The
// outputs are the int8 fp32 engine's to the reduced type's rounding. (Before: every QuantConv
// stayed fp32, with a Cast wherever it met a reduced neighbour.)
TEST(Precision, QuantConvsComputeInTheReducedTypeWithoutCasts) {
  const std::string bytes = int8_resnet_model();
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  Tensor x = Tensor::zeros(DataType::kFloat32, {2, 4, 8, 8}).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
  OneBatch cal32(x);
  BuilderConfig int8;
  int8.int8 = true;
  int8.calibrator = &cal32;
  auto want = build_and_run(bytes, int8, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  EXPECT_EQ(count_op(want->layers, "ingot::QuantConv"), 4);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const bool fp16 = t == DataType::kFloat16;
    SCOPED_TRACE(fp16 ? "fp16" : "bf16");
    const std::string reduced = fp16 ? "f16" : "bf16";
    OneBatch cal(x);
    BuilderConfig cfg = int8;
    cfg.calibrator = &cal;
    (fp16 ? cfg.fp16 : cfg.bf16) = true;
    auto got = build_and_run(bytes, cfg, {{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    std::string layers;
    std::map<std::string, std::string> precision;
    for (const LayerDesc& l : got->layers) {
      precision[l.name] = l.precision;
      layers += l.name + " " + l.op + " " + l.precision + "\n";
    }
    EXPECT_EQ(count_op(got->layers, "ingot::QuantConv"), 4) << layers;
    EXPECT_EQ(precision["conv1"], "i8") << layers;
    EXPECT_EQ(precision["conv_d"], reduced) << layers;
    EXPECT_EQ(precision["conv3"], reduced) << layers;
    EXPECT_EQ(count_op(got->layers, "Cast"), 1) << "y out only:\n" << layers;
    ASSERT_EQ(got->outputs.size(), 1u);
    EXPECT_EQ(got->outputs[0].dtype(), DataType::kFloat32);
    auto [err, cos] = error_and_cosine(got->outputs[0], want->outputs[0]);
    EXPECT_LT(err, fp16 ? 2e-2 : 8e-2);
    EXPECT_GT(cos, fp16 ? 0.9995 : 0.995);
  }
}

// A backend whose QuantConv (never run: the builder stages only ask) is a half-precision kernel:
// its scales fp32, its residual and a float result fp16, never fp32 (the bias in any type). Every
// other node has a device tactic.
testing_util::PredicateBackend half_quant_conv_backend() {
  return testing_util::PredicateBackend([](const ir::Node& n, const std::vector<ir::TensorType>& in) {
    if (n.op_type() != "QuantConv") return true;
    bool ok = true;
    for (size_t i : {size_t{2}, size_t{3}, size_t{6}})
      ok &= i >= in.size() || !n.input(i) || in[i].dtype == DataType::kFloat32;
    ok &= in.size() <= 5 || !n.input(5) || in[5].dtype == DataType::kFloat16;
    return ok && n.output(0)->dtype() != DataType::kFloat32;
  });
}

// The split-back's question (has_device_tactic at the reduced type) and precision lowering agree
// on what a QuantConv becomes: the split before lowering keeps every QuantConv the half kernel
// runs once lowered (conv2, which writes int8, once its residual is fp16), lowering gives them
// exactly that (scales fp32), and the split at the final types keeps them all.
TEST(Precision, SplitBackAndLoweringAgreeOnAQuantConvsTypes) {
  auto g = testing_util::parse_ir(R"(graph g {
  opset "" 19
  opset "ingot" 1
  input %x: f32[1,2,4,4]
  init %sx: f32[] = [0.01]
  init %z: i8[] = [0]
  init %w: i8[2,2,1,1] = [3, -5, 7, 2]
  init %sw: f32[2] = [0.01, 0.02]
  init %b: f32[2] = [0.1, -0.2]
  init %s1: f32[] = [0.05]
  %xq = QuantizeLinear(%x, %sx, %z) @q
  %q1 = ingot::QuantConv {activation="Relu", output_dtype=3}(%xq, %w, %sx, %sw, %b, _, %s1) @conv1
  %d = ingot::QuantConv(%q1, %w, %s1, %sw, %b) @conv_d
  %q2 = ingot::QuantConv {output_dtype=3}(%q1, %w, %s1, %sw, %b, %d, %s1) @conv2
  %y = ingot::QuantConv(%q2, %w, %s1, %sw, %b) @conv3
  output %y
}
)");
  ASSERT_TRUE(g);
  testing_util::PredicateBackend be = half_quant_conv_backend();
  builder::SplitReport split;
  Status st = builder::split_host_fusions(*g, be, &split, DataType::kFloat16);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(split.split, 0) << ir::to_text(*g);
  builder::PrecisionOptions opt;
  opt.reduced = DataType::kFloat16;
  builder::PrecisionReport rep;
  st = builder::lower_precision(*g, be, opt, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = builder::split_host_fusions(*g, be, &split);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(split.split, 0) << ir::to_text(*g);
  std::map<std::string, const ir::Node*> by_name;
  int casts = 0;
  for (const auto& n : g->nodes()) {
    by_name[n->name()] = n.get();
    casts += n->op_type() == "Cast";
    if (n->op_type() != "QuantConv") continue;
    for (size_t i : {size_t{2}, size_t{3}, size_t{6}})
      if (n->input(i)) EXPECT_EQ(n->input(i)->dtype(), DataType::kFloat32) << n->describe() << " input " << i;
  }
  EXPECT_EQ(casts, 1) << "y out only:\n" << ir::to_text(*g);
  ASSERT_TRUE(by_name["conv_d"] && by_name["conv2"] && by_name["conv3"]);
  EXPECT_EQ(by_name["conv_d"]->output(0)->dtype(), DataType::kFloat16);
  EXPECT_EQ(by_name["conv_d"]->attrs().get_int("output_dtype", 1), static_cast<int64_t>(DataType::kFloat16));
  EXPECT_EQ(by_name["conv2"]->input(5)->dtype(), DataType::kFloat16);
  EXPECT_EQ(by_name["conv2"]->output(0)->dtype(), DataType::kInt8);
  EXPECT_EQ(by_name["conv3"]->output(0)->dtype(), DataType::kFloat16);
}

}  // namespace
}  // namespace ingot
