// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target: any byte string given to the ONNX importer must end in a model or a
// clean Status, never a crash, hang, leak or sanitizer report.
#include <cstddef>
#include <cstdint>

#include "ir/op_registry.h"
#include "onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Nested model-local function calls multiply (2^depth nodes); the default cap of 2^20 inlined
  // nodes takes seconds to build, past libFuzzer's per-input timeout, so the fuzzer's is lower.
  ingot::onnx::ImportOptions options;
  options.max_inlined_nodes = 1 << 14;
  auto model = ingot::onnx::import_model_bytes(data, size, "", options);
  if (model.ok()) {
    // Exercise the graph a little more: inference again must agree with itself.
    (void)ingot::ir::infer_graph(*model->graph);
  }
  (void)ingot::onnx::parse_tensor_proto(data, size);
  return 0;
}
