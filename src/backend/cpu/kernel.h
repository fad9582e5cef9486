// Copyright ingot authors. Apache-2.0.
//
// CPU reference kernels: the oracle every other backend is checked against. A kernel is a
// plain function over a KernelContext. Before it runs, the executor has run the op's shape
// inference (ir/op_registry.h) with the concrete input values and allocated every output
// whose shape that settled; kernels whose output size depends on the data (NonZero, Unique,
// ...) call allocate_output() themselves.
//
// Kernels are registered family by family (src/backend/cpu/kernels/<family>.cc), each
// family exposing `void register_<family>_kernels(KernelRegistry&)`, called from
// src/backend/cpu/kernels/all_kernels.cc.
//
// Reference kernels are simple and obviously correct: compute in double (or int64 for
// integer ops), fp16/bf16/fp8 through float, loops over flat indices. Speed matters only as
// far as the test models must finish in seconds.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::cpu {

class KernelContext;
using KernelFn = std::function<Status(KernelContext&)>;

/// Runs a subgraph (If/Loop/Scan body) with the given graph inputs, outer-scope values
/// visible; returns its outputs in order.
using SubgraphRunner =
    std::function<Result<std::vector<Tensor>>(const ir::Graph&, const std::vector<Tensor>&)>;

class KernelContext {
 public:
  KernelContext(const ir::Node& node, int64_t opset, std::vector<const Tensor*> inputs,
                std::vector<Tensor> outputs, SubgraphRunner run_subgraph);

  const ir::Node& node() const { return node_; }
  const ir::Attributes& attrs() const { return node_.attrs(); }
  int64_t opset() const { return opset_; }

  size_t num_inputs() const { return inputs_.size(); }
  /// nullptr for an omitted optional input.
  const Tensor* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  bool has_input(size_t i) const { return input(i) != nullptr; }

  size_t num_outputs() const { return outputs_.size(); }
  /// False for an omitted optional output.
  bool has_output(size_t i) const;
  /// The pre-allocated output (undefined if inference could not size it).
  Tensor& output(size_t i) { return outputs_[i]; }
  /// (Re)allocates output i zero-filled with the given dtype and shape.
  Result<Tensor*> allocate_output(size_t i, DataType dtype, Shape64 shape);
  std::vector<Tensor>& outputs() { return outputs_; }

  Result<std::vector<Tensor>> run_subgraph(const ir::Graph& g, const std::vector<Tensor>& inputs) const;

  /// An error naming the node: "<op> '<name>': <message>".
  template <class... Args>
  Status error(Args&&... args) const {
    return invalid_argument(node_.describe(), ": ", std::forward<Args>(args)...);
  }
  template <class... Args>
  Status unsupported_case(Args&&... args) const {
    return ::ingot::unsupported(node_.describe(), ": ", std::forward<Args>(args)...);
  }

 private:
  const ir::Node& node_;
  int64_t opset_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  SubgraphRunner run_subgraph_;
};

class KernelRegistry {
 public:
  /// Every built-in kernel.
  static const KernelRegistry& global();
  void add(const std::string& op_type, KernelFn fn, const std::string& domain = "");
  const KernelFn* find(const std::string& op_type, const std::string& domain = "") const;
  std::vector<std::string> op_types() const;

 private:
  std::map<std::pair<std::string, std::string>, KernelFn> kernels_;
};

}  // namespace ingot::cpu
