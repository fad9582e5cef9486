// Copyright ingot authors. Apache-2.0.
//
// Builds an engine from serialized ONNX bytes with the public API (Builder, then Runtime on the
// bytes it wrote), runs one query on host tensors and returns what tests compare: the outputs,
// the layer list, the I/O descriptions and the build summary.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "quiet_logger.h"

namespace ingot::testing_util {

struct EngineRun {
  std::vector<Tensor> outputs;  ///< in io_tensors() order
  std::vector<LayerDesc> layers;
  std::vector<IoTensorDesc> io;
  BuildSummary summary;
};

inline Result<EngineRun> build_and_run(const std::string& model_bytes, const BuilderConfig& cfg,
                                       std::map<std::string, Tensor> feeds) {
  test::Quiet quiet;
  EngineRun out;
  INGOT_ASSIGN_OR_RETURN(auto bytes, Builder(quiet).build_serialized_from_bytes(model_bytes.data(), model_bytes.size(),
                                                                               cfg, &out.summary));
  INGOT_ASSIGN_OR_RETURN(auto engine, Runtime(quiet).deserialize(bytes.data(), bytes.size()));
  INGOT_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  for (auto& [name, t] : feeds) {  // the context reads through the bound addresses
    INGOT_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
    INGOT_RETURN_IF_ERROR(ctx->set_tensor_address(name, t.mutable_raw()));
  }
  INGOT_RETURN_IF_ERROR(ctx->enqueue(nullptr));
  for (const IoTensorDesc& d : engine->io_tensors()) {
    out.io.push_back(d);
    if (d.is_input) continue;
    INGOT_ASSIGN_OR_RETURN(auto shape, ctx->tensor_shape(d.name));
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(d.dtype, shape));
    std::memcpy(t.mutable_raw(), ctx->tensor_address(d.name), t.nbytes());
    out.outputs.push_back(t);
  }
  out.layers = engine->layers();
  return out;
}

}  // namespace ingot::testing_util
