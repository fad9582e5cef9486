// Copyright ingot authors. Apache-2.0.
//
// Looking inside a model the way the builder sees it: the node table as imported and after
// the optimizer, op counts, and the notes passes left (refusals, counts). This is what
// `ingot inspect MODEL.onnx` prints; it is public so that tools outside libingot need no
// internal header. Engines need nothing extra: Engine (engine.h) already exposes their I/O,
// profiles, steps and memory figures.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingot/status.h"

namespace ingot {

struct InspectOptions {
  /// Optimizer passes to skip, by name; an unknown name fails the inspection (as a build would),
  /// so a typo does not silently show the full pipeline.
  std::vector<std::string> disabled_passes;
  /// false: `after` is a copy of `before` and no pass runs.
  bool optimize = true;
};

/// One node of a graph. Tensors print as "name: dtype[dims]", e.g. "x: f32[N,3,224,224]":
/// dtype as data_type_name gives it, symbolic dims by their symbol, unknown dims as "?",
/// unknown rank as "[*]". An omitted optional input prints as "_".
struct NodeRow {
  std::string name;  ///< node name ("" when the model gave none)
  std::string op;    ///< op type, "domain::Op" outside ai.onnx (e.g. "ingot::FusedConv")
  std::vector<std::string> inputs, outputs;
  /// Model nodes a fused node absorbed; empty for a node that stands for itself.
  std::vector<std::string> origins;
  /// The op of each origin as imported ("Conv", "BatchNormalization", ...), parallel to
  /// `origins`; "?" where the name does not identify one imported node.
  std::vector<std::string> origin_ops;
};

struct GraphReport {
  std::vector<NodeRow> nodes;            ///< in the graph's (topological) order
  std::map<std::string, int> op_counts;  ///< op (as in NodeRow::op) → number of nodes
  /// Graph inputs (without initializers) and outputs, as tensor texts like NodeRow's.
  std::vector<std::string> inputs, outputs;
};

struct ModelReport {
  GraphReport before;  ///< as imported (functions inlined, shapes inferred)
  GraphReport after;   ///< after the builder's default optimization pipeline
  std::vector<std::string> pass_notes;  ///< "pass: message" lines, in the order passes wrote them
  int64_t opset = 0;   ///< opset of the default (ai.onnx) domain
};

/// Imports `onnx_path` (external data resolved next to it) and runs the default optimization
/// pipeline on it, exactly as the builder does before choosing tactics. Fails with the
/// importer's message (naming the file and node) for a missing, truncated or invalid model,
/// with kInvalidArgument for an unknown pass name, and with the failing pass's message.
Result<ModelReport> inspect_model(const std::string& onnx_path, const InspectOptions& options = {});

/// Graphviz text of a graph report, a `digraph`: one box per node labeled with its op and
/// name (a fused node also with the ops it absorbed, or its origin names when origin_ops is
/// empty), one ellipse per graph input and output, and an edge for every tensor a node reads
/// from another node or a graph input, labeled with the part of the tensor text after "name: "
/// (dtype and shape). Tensors with no producer that are not graph inputs (weights) draw no
/// edge. `title` labels the graph. Tensor names are matched by the text before ": ".
std::string to_dot(const GraphReport& report, const std::string& title);

}  // namespace ingot
