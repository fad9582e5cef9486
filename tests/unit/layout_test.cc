// Copyright ingot authors. Apache-2.0.
//
// Channels-last convolution regions (BuilderConfig::conv_layout = "nhwc") on the CPU backend,
// whose reference FusedConv reads NHWC/KRSC: outputs equal the channels-first engine's within
// fp32 rounding, transposes remain only where a region meets a channels-first op, and weights
// are stored once (the KRSC copy replaces the KCRS one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"
#include "quiet_logger.h"

namespace ingot {
namespace {

namespace fs = std::filesystem;

using test::Quiet;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Built {
  std::vector<Tensor> outputs;
  std::vector<LayerDesc> layers;
  BuildSummary summary;
};

Result<Built> build_run(const std::string& bytes, const BuilderConfig& cfg, std::map<std::string, Tensor>& feeds) {
  Quiet q;
  Built b;
  INGOT_ASSIGN_OR_RETURN(auto eng, Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &b.summary));
  INGOT_ASSIGN_OR_RETURN(auto engine, Runtime(q).deserialize(eng.data(), eng.size()));
  INGOT_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  for (auto& [name, t] : feeds) {
    INGOT_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
    INGOT_RETURN_IF_ERROR(ctx->set_tensor_address(name, t.mutable_raw()));
  }
  INGOT_RETURN_IF_ERROR(ctx->enqueue(nullptr));
  for (const IoTensorDesc& d : engine->io_tensors()) {
    if (d.is_input) continue;
    INGOT_ASSIGN_OR_RETURN(auto shape, ctx->tensor_shape(d.name));
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(d.dtype, shape));
    std::memcpy(t.mutable_raw(), ctx->tensor_address(d.name), t.nbytes());
    b.outputs.push_back(t);
  }
  b.layers = engine->layers();
  return b;
}

TEST(LayoutModels, ChannelsLastRegionsMatchChannelsFirstEngines) {
  const char* dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (!dir) GTEST_SKIP() << "INGOT_OPTIMIZER_MODELS not set (ctest sets it to the generated models)";
  int with_convs = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    fs::path data = entry.path() / "test_data_set_0";
    if (!fs::exists(data / "input_0.pb")) continue;
    std::string bytes = slurp(entry.path() / "model.onnx");
    ::onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    std::map<std::string, Tensor> feeds;
    ::onnx::TensorProto tp;
    ASSERT_TRUE(tp.ParseFromString(slurp(data / "input_0.pb")));
    auto t = onnx::tensor_from_proto(tp, onnx::TensorSource());
    ASSERT_TRUE(t.ok());
    if (m.graph().input_size() != 1) continue;  // single-input conv models
    feeds[m.graph().input(0).name()] = *t;
    BuilderConfig nchw, nhwc;
    nchw.conv_layout = "nchw";
    nhwc.conv_layout = "nhwc";
    auto a = build_run(bytes, nchw, feeds);
    auto b = build_run(bytes, nhwc, feeds);
    ASSERT_TRUE(a.ok()) << entry.path() << ": " << a.status().to_string();
    ASSERT_TRUE(b.ok()) << entry.path() << ": " << b.status().to_string();
    if (b->summary.channels_last_convs == 0) continue;
    ++with_convs;
    // Conv weights once (the KRSC copy replaces the KCRS one); only small constants are added
    // (the axes of reductions that replace global pooling: 64 bytes each, aligned).
    EXPECT_GE(b->summary.weight_bytes, a->summary.weight_bytes) << entry.path();
    EXPECT_LE(b->summary.weight_bytes, a->summary.weight_bytes + 1024) << entry.path() << ": weights stored twice";
    int transposes = 0;
    for (const LayerDesc& l : b->layers) transposes += l.op == "Transpose";
    EXPECT_EQ(transposes, b->summary.layout_reformats);
    EXPECT_LT(transposes, b->summary.channels_last_convs) << entry.path() << ": pairs of transposes left between convs";
    ASSERT_EQ(a->outputs.size(), b->outputs.size());
    for (size_t o = 0; o < a->outputs.size(); ++o) {
      double max_err = 0, max_ref = 0;
      for (int64_t i = 0; i < a->outputs[o].numel(); ++i) {
        max_err = std::max(max_err, std::fabs(a->outputs[o].get_f64(i) - b->outputs[o].get_f64(i)));
        max_ref = std::max(max_ref, std::fabs(a->outputs[o].get_f64(i)));
      }
      EXPECT_LT(max_err, 1e-5 * std::max(1.0, max_ref)) << entry.path() << " output " << o;
    }
    if (entry.path().filename() == "resnet_bn") {
      // input -> NHWC, stem out -> NCHW for MaxPool, pool -> NHWC, last block -> NCHW for the
      // global pool: the only four places the region meets channels-first ops.
      EXPECT_EQ(b->summary.layout_reformats, 4);
      EXPECT_EQ(b->summary.channels_last_convs, 8);
    }
  }
  EXPECT_GE(with_convs, 2) << "resnet_bn and mobilenetv3_block have convolutions";
}

TEST(Layout, AutoKeepsFp32ConvsChannelsFirstAndBadModesAreErrors) {
  const char* dir = std::getenv("INGOT_OPTIMIZER_MODELS");
  if (!dir) GTEST_SKIP() << "INGOT_OPTIMIZER_MODELS not set (ctest sets it to the generated models)";
  std::string bytes = slurp(fs::path(dir) / "resnet_bn" / "model.onnx");
  Quiet q;
  BuilderConfig cfg;  // auto, fp32: nothing to gain from NHWC
  BuildSummary s;
  ASSERT_TRUE(Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s).ok());
  EXPECT_EQ(s.channels_last_convs, 0);
  cfg.fp16 = true;  // auto + fp16 on the cpu backend: its reference FusedConv reads NHWC too
  ASSERT_TRUE(Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s).ok());
  EXPECT_EQ(s.channels_last_convs, 8);
  cfg.conv_layout = "nwhc";
  auto bad = Builder(q).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'nwhc'"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace ingot
