// Copyright ingot authors. Apache-2.0.
//
// The IR: a Graph owns Values (tensors) and Nodes (operations). A Value has at most one
// producer (a node output, a graph input or an initializer) and any number of uses. Nodes are
// kept in a topological order (Graph::topological_sort restores it after edits). A node input
// or output that ONNX leaves empty (an omitted optional) is nullptr.
//
// Subgraphs (If/Loop/Scan bodies) are Graphs held by attributes; their nodes may use Values
// of an enclosing graph (outer scope), which is why a Graph knows its parent.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/attribute.h"
#include "ir/shape.h"

namespace ingot::ir {

class Node;
class Graph;

class Value {
 public:
  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  void set_dtype(DataType t) { dtype_ = t; }
  void set_shape(Shape s) { shape_ = std::move(s); }
  /// Set once type inference (or the model) gave this value a type.
  bool has_type() const { return dtype_ != DataType::kUndefined; }
  /// The node producing it, or nullptr for graph inputs and initializers.
  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }
  /// (node, input index) pairs reading this value, across subgraphs too.
  const std::vector<std::pair<Node*, int>>& uses() const { return uses_; }
  /// Constant data when this value is an initializer, else nullptr.
  const Tensor* initializer() const { return initializer_.defined() ? &initializer_ : nullptr; }
  Graph* owner() const { return owner_; }
  /// ONNX allows non-tensor values (sequences, optionals, maps); we note them so consumers
  /// can report "unsupported" precisely.
  const std::string& non_tensor_kind() const { return non_tensor_kind_; }
  void set_non_tensor_kind(std::string k) { non_tensor_kind_ = std::move(k); }

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  DataType dtype_ = DataType::kUndefined;
  Shape shape_ = Shape::unknown_rank();
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  std::vector<std::pair<Node*, int>> uses_;
  Tensor initializer_;
  Graph* owner_ = nullptr;
  std::string non_tensor_kind_;
};

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  ///< "" is the default ONNX domain
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }
  const Attributes& attrs() const { return attrs_; }
  Attributes& mutable_attrs() { return attrs_; }
  Graph* owner() const { return owner_; }
  /// Replaces input i (nullptr allowed), keeping use lists right.
  void set_input(size_t i, Value* v);
  /// "Conv 'conv1' (domain ai.onnx, opset 17)" style description for messages.
  std::string describe() const;
  /// Names of the original model nodes this node stands for (a fused node lists every node it
  /// absorbed; an imported node lists nothing, it is its own origin).
  const std::vector<std::string>& origins() const { return origins_; }
  void add_origin(const std::string& name) { origins_.push_back(name); }
  /// Adds `other`'s origins, or its name when it has none.
  void absorb_origins(const Node& other);

 private:
  friend class Graph;
  std::string op_type_, domain_, name_;
  std::vector<Value*> inputs_, outputs_;
  Attributes attrs_;
  Graph* owner_ = nullptr;
  std::vector<std::string> origins_;
};

class Graph {
 public:
  explicit Graph(std::string name = "main", Graph* parent = nullptr)
      : name_(std::move(name)), parent_(parent) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  Graph* parent() const { return parent_; }

  /// A new value owned by this graph. Names must be unique within the graph ("" allowed for
  /// values that need none).
  Value* add_value(const std::string& name, DataType dtype = DataType::kUndefined,
                   Shape shape = Shape::unknown_rank());
  /// A graph input (appended to inputs()).
  Value* add_input(const std::string& name, DataType dtype, Shape shape);
  /// Appends an existing value (e.g. an initializer with a default) to the graph inputs.
  void add_input_existing(Value* v) { inputs_.push_back(v); }
  /// An initializer value holding `data` (shares its storage).
  Value* add_initializer(const std::string& name, Tensor data);
  /// Drops an initializer that nothing reads and that is neither a graph input nor a graph
  /// output (its data is released); false, and nothing changes, otherwise.
  bool remove_initializer(Value* v);
  /// Turns an existing value into an initializer (graph inputs with defaults in ONNX).
  void set_initializer(Value* v, Tensor data);
  void add_output(Value* v) { outputs_.push_back(v); }
  void set_outputs(std::vector<Value*> outs) { outputs_ = std::move(outs); }
  /// A node at the end of the node list. Outputs must be values of this graph without a
  /// producer. Inputs may belong to this graph or an ancestor.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<Value*>& outputs, Attributes attrs = {},
                 const std::string& name = "", const std::string& domain = "");
  /// Removes a node whose outputs have no uses (and are not graph outputs).
  Status remove_node(Node* n);
  /// Makes every reader of `from` (nodes here and in nested subgraphs, and graph outputs)
  /// read `to` instead. Graph outputs switch to `to`; a pass that must keep an output's public
  /// name renames `to` (rename_value) after the switch.
  void replace_all_uses(Value* from, Value* to);
  /// Renames a value (names must stay unique within the graph).
  void rename_value(Value* v, const std::string& name);
  /// Orders nodes so every node follows its producers; error naming a node on a cycle.
  Status topological_sort();

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Initializer values in insertion order.
  const std::vector<Value*>& initializers() const { return initializers_; }
  /// Looks a name up here, then in enclosing graphs; nullptr if absent.
  Value* find_value(const std::string& name) const;
  size_t num_values() const { return values_.size(); }

  /// Opset imports: domain ("" for ai.onnx) → version. Subgraphs read their root's.
  const std::map<std::string, int64_t>& opset_imports() const;
  void set_opset_import(const std::string& domain, int64_t version) { opsets_[domain] = version; }
  /// Opset version for a domain ("" and "ai.onnx" are the same); 0 when not imported.
  int64_t opset(const std::string& domain) const;

 private:
  std::string name_;
  Graph* parent_;
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_, outputs_, initializers_;
  std::map<std::string, int64_t> opsets_;
};

}  // namespace ingot::ir
