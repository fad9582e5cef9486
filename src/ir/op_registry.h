// Copyright ingot authors. Apache-2.0.
//
// The op registry: every op ingot knows is registered here once, with its schema (input and
// output counts, attributes and their types) and its type/shape inference. The importer
// validates nodes against it, graph-wide inference calls it, and the CPU executor calls the
// same inference with concrete input values to size outputs: there is one shape path.
//
// Ops are registered family by family (src/ir/ops/<family>.cc), each family exposing
// `void register_<family>_ops(OpRegistry&)`, called from src/ir/ops/all_ops.cc.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::ir {

/// What inference knows about one input, and receives for one output.
struct TensorType {
  DataType dtype = DataType::kUndefined;
  Shape shape = Shape::unknown_rank();
};

class InferenceContext {
 public:
  InferenceContext(const Node& node, int64_t opset, std::vector<TensorType> input_types,
                   std::vector<const Tensor*> input_values);

  const Node& node() const { return node_; }
  const Attributes& attrs() const { return node_.attrs(); }
  /// Opset version of the node's domain in the model.
  int64_t opset() const { return opset_; }

  size_t num_inputs() const { return inputs_.size(); }
  /// False for omitted optional inputs (and indices past the end).
  bool has_input(size_t i) const;
  /// dtype/shape of input i; kUndefined / unknown rank for omitted or missing inputs, so a
  /// malformed node cannot make inference read out of bounds.
  DataType input_dtype(size_t i) const { return i < inputs_.size() ? inputs_[i].dtype : DataType::kUndefined; }
  const Shape& input_shape(size_t i) const { return i < inputs_.size() ? inputs_[i].shape : unknown_shape(); }
  /// The input's data when known (initializer, constant, or the executor's concrete value);
  /// nullptr otherwise. Shape ops use it (Reshape's shape, Slice's starts, ...).
  const Tensor* input_value(size_t i) const { return i < values_.size() ? values_[i] : nullptr; }

  size_t num_outputs() const { return outputs_.size(); }
  bool has_output(size_t i) const;
  void set_output(size_t i, DataType dtype, Shape shape);
  const TensorType& output(size_t i) const { return outputs_[i]; }
  static const Shape& unknown_shape() {
    static const Shape kUnknown = Shape::unknown_rank();
    return kUnknown;
  }
  /// Outputs whose values inference could compute (Shape of a concrete input, ...).
  void set_output_value(size_t i, Tensor value);
  const Tensor* output_value(size_t i) const;

  /// An error carrying the node's description: "Reshape 'r1': <message>".
  template <class... Args>
  Status error(Args&&... args) const {
    return invalid_model(node_.describe(), ": ", std::forward<Args>(args)...);
  }

  /// Shortcut for elementwise ops: output i gets dtype and the broadcast of all inputs' shapes.
  Status propagate_broadcast(size_t output, DataType dtype);
  /// Shortcut: output `o` copies input `i`'s dtype and shape.
  Status propagate_same(size_t output, size_t input);

 private:
  const Node& node_;
  int64_t opset_;
  std::vector<TensorType> inputs_;
  std::vector<const Tensor*> values_;
  std::vector<TensorType> outputs_;
  std::vector<Tensor> output_values_;
};

using InferFn = std::function<Status(InferenceContext&)>;

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
};

/// Declarative description of one op. Build it with the chained setters.
class OpSchema {
 public:
  OpSchema(std::string op_type, std::string domain) : op_type_(std::move(op_type)), domain_(std::move(domain)) {}

  /// Input count range; `max` of -1 is variadic.
  OpSchema& inputs(int min, int max) { min_in_ = min; max_in_ = max; return *this; }
  OpSchema& outputs(int min, int max) { min_out_ = min; max_out_ = max; return *this; }
  /// Opset range this implementation follows (inclusive; max -1 = up to the newest).
  OpSchema& opsets(int64_t min, int64_t max = -1) { min_opset_ = min; max_opset_ = max; return *this; }
  OpSchema& attr(const std::string& name, AttrType type, bool required = false) {
    attrs_.push_back({name, type, required});
    return *this;
  }
  OpSchema& infer(InferFn fn) { infer_ = std::move(fn); return *this; }
  OpSchema& doc(std::string d) { doc_ = std::move(d); return *this; }

  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }
  int min_inputs() const { return min_in_; }
  int max_inputs() const { return max_in_; }
  int min_outputs() const { return min_out_; }
  int max_outputs() const { return max_out_; }
  int64_t min_opset() const { return min_opset_; }
  int64_t max_opset() const { return max_opset_; }
  const std::vector<AttrSpec>& attrs() const { return attrs_; }
  const InferFn& inference() const { return infer_; }
  const std::string& documentation() const { return doc_; }

  /// Checks counts, attribute names/types/required-ness and the opset range for `node`
  /// with the model's opset for its domain. Errors name node, op, domain and opset.
  Status validate(const Node& node, int64_t opset) const;

 private:
  std::string op_type_, domain_;
  int min_in_ = 0, max_in_ = -1, min_out_ = 1, max_out_ = 1;
  int64_t min_opset_ = 1, max_opset_ = -1;
  std::vector<AttrSpec> attrs_;
  InferFn infer_;
  std::string doc_;
};

class OpRegistry {
 public:
  /// The process-wide registry with every built-in op (thread-safe lazy initialization).
  static const OpRegistry& global();

  /// Adds a schema; the op/domain pair must be new.
  OpSchema& add(const std::string& op_type, const std::string& domain = "");
  /// nullptr when unknown. "" and "ai.onnx" are the same domain.
  const OpSchema* find(const std::string& op_type, const std::string& domain = "") const;
  std::vector<const OpSchema*> all() const;

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<OpSchema>> schemas_;
};

/// Normalizes "ai.onnx" to "".
std::string canonical_domain(const std::string& domain);

/// Runs validation and inference for one node using the types already on its input values
/// (and initializer data), writing dtype/shape to its outputs. Errors name the node.
Status infer_node(const Node& node, const OpRegistry& registry = OpRegistry::global());
/// Inference over a whole graph in node order. Symbolic dims stay symbolic; graph outputs
/// declared in the model keep their declared info when inference knows less. Subgraphs are
/// inferred by their owning op (If/Loop/Scan inference binds the body's input types first).
Status infer_graph(Graph& graph, const OpRegistry& registry = OpRegistry::global());

}  // namespace ingot::ir
