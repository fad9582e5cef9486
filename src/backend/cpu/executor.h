// Copyright ingot authors. Apache-2.0.
//
// Runs an ir::Graph node by node on the CPU reference kernels: the oracle for conformance,
// constant folding and accuracy comparison.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/kernel.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::cpu {

struct ExecutorOptions {
  /// Keep every intermediate value (for per-layer comparison); otherwise only outputs.
  bool keep_intermediates = false;
};

class Executor {
 public:
  explicit Executor(ExecutorOptions options = {}) : options_(options) {}

  /// Runs `graph` with inputs by graph-input name (initializer-backed inputs may be omitted).
  /// Checks each input's dtype and rank/dims against the graph's declaration and names the
  /// input on a mismatch. Returns the graph outputs in order.
  Result<std::vector<Tensor>> run(const ir::Graph& graph,
                                  const std::map<std::string, Tensor>& inputs);

  /// After run() with keep_intermediates: every value computed, by name.
  const std::map<std::string, Tensor>& intermediates() const { return intermediates_; }

 private:
  ExecutorOptions options_;
  std::map<std::string, Tensor> intermediates_;
};

/// Runs one node on concrete inputs (inference, allocation, kernel). Used by the executor and
/// by constant folding. `run_subgraph` serves control-flow ops.
Result<std::vector<Tensor>> run_node(const ir::Node& node, const std::vector<const Tensor*>& inputs,
                                     const SubgraphRunner& run_subgraph = nullptr);

/// Like run_node, but writes into `outputs` where the caller provides a view (an engine's arena
/// or a binding): the view's shape must equal the inferred one, and it is zero-filled before the
/// kernel runs unless `zero_fill` is false (in-place steps, whose view aliases an input).
/// Undefined entries are allocated (data-dependent outputs).
Status run_node_into(const ir::Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                     const SubgraphRunner& run_subgraph, bool zero_fill = true);

/// Runs `op_type` (in `domain`, the default one unless given) with `attrs` on `inputs` as a one-node
/// graph of the opset of `k`'s node's graph (17 when it has none); returns its output 0. How the
/// reference kernels of fused ops defer to the plain ops' kernels instead of repeating their math.
Result<Tensor> run_inner_op(const KernelContext& k, const std::string& op_type, ir::Attributes attrs,
                            const std::vector<const Tensor*>& inputs, const std::string& domain = "");

/// A SubgraphRunner for control-flow nodes whose outer-scope values come from `lookup`.
SubgraphRunner make_subgraph_runner(std::function<const Tensor*(const ir::Value*)> lookup);

}  // namespace ingot::cpu
