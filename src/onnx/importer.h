// Copyright ingot authors. Apache-2.0.
//
// ONNX → ir::Graph. Parses a ModelProto (protobuf, the schema the onnx package installs),
// converts every graph, initializer and attribute, inlines model-local functions, resolves
// outer-scope names in subgraphs, validates each node against the op registry and runs shape
// inference over the whole graph (symbolic dims stay symbolic).
//
// Weights: raw_data initializers are borrowed from the parsed protobuf (which the graph keeps
// alive), and external-data initializers are borrowed from a read-only memory map of their
// file, so no weight is copied more than once after the file is read.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::onnx {

struct ImportOptions {
  /// Run registry validation and shape inference after conversion. Off only for tools that
  /// want the raw graph (e.g. to report every unsupported op at once).
  bool infer_shapes = true;
  /// Most nodes that inlining model-local functions may add. Each call is inlined, so nested
  /// calls multiply: f calling g twice, g calling h twice, ... grows as 2^depth. The default is
  /// far above any real model's size; a model past it is refused rather than expanded for
  /// minutes. Fuzzers lower it.
  int64_t max_inlined_nodes = int64_t{1} << 20;
};

struct Model {
  std::unique_ptr<ir::Graph> graph;
  int64_t ir_version = 0;
  std::string producer_name, producer_version;
  /// Keeps borrowed weight memory alive (the parsed protobuf, mapped external files).
  std::vector<std::shared_ptr<const void>> storage;
};

/// Imports a model file. External-data paths resolve relative to the file's folder.
Result<Model> import_model_file(const std::string& path, const ImportOptions& options = {});
/// Imports serialized ModelProto bytes; `base_dir` resolves external data ("" = none allowed).
Result<Model> import_model_bytes(const void* data, size_t size, const std::string& base_dir = "",
                                 const ImportOptions& options = {});

/// Parses a serialized TensorProto (the conformance suite's input_N.pb / output_N.pb).
/// Fails with kUnsupported for sequences/optionals/maps, which are other protos.
Result<Tensor> parse_tensor_proto(const void* data, size_t size, std::string* name = nullptr);
/// Reads and parses a TensorProto file.
Result<Tensor> load_tensor_proto_file(const std::string& path, std::string* name = nullptr);

}  // namespace ingot::onnx
