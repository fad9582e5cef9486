// Copyright ingot authors. Apache-2.0.
#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace ingot::ir {

void Node::set_input(size_t i, Value* v) {
  if (i >= inputs_.size()) inputs_.resize(i + 1, nullptr);
  if (Value* old = inputs_[i]) {
    auto& u = old->uses_;
    auto it = std::find(u.begin(), u.end(), std::make_pair(this, static_cast<int>(i)));
    if (it != u.end()) u.erase(it);
  }
  inputs_[i] = v;
  if (v) v->uses_.emplace_back(this, static_cast<int>(i));
}

std::string Node::describe() const {
  std::string d = op_type_;
  if (!name_.empty()) d += " '" + name_ + "'";
  if (!domain_.empty()) d += " (domain " + domain_ + ")";
  return d;
}

Value* Graph::add_value(const std::string& name, DataType dtype, Shape shape) {
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->dtype_ = dtype;
  v->shape_ = std::move(shape);
  v->owner_ = this;
  Value* raw = v.get();
  values_.push_back(std::move(v));
  if (!name.empty()) by_name_[name] = raw;
  return raw;
}

Value* Graph::add_input(const std::string& name, DataType dtype, Shape shape) {
  Value* v = add_value(name, dtype, std::move(shape));
  inputs_.push_back(v);
  return v;
}

Value* Graph::add_initializer(const std::string& name, Tensor data) {
  Value* v = add_value(name);
  set_initializer(v, std::move(data));
  return v;
}

void Graph::set_initializer(Value* v, Tensor data) {
  v->dtype_ = data.dtype();
  v->shape_ = Shape::from_concrete(data.shape());
  if (!v->initializer_.defined()) initializers_.push_back(v);
  v->initializer_ = std::move(data);
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<Value*>& outputs, Attributes attrs,
                      const std::string& name, const std::string& domain) {
  auto n = std::make_unique<Node>();
  n->op_type_ = op_type;
  n->domain_ = domain == "ai.onnx" ? "" : domain;
  n->name_ = name;
  n->attrs_ = std::move(attrs);
  n->owner_ = this;
  Node* raw = n.get();
  for (size_t i = 0; i < inputs.size(); ++i) raw->set_input(i, inputs[i]);
  raw->outputs_ = outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) continue;
    outputs[i]->producer_ = raw;
    outputs[i]->producer_output_ = static_cast<int>(i);
  }
  nodes_.push_back(std::move(n));
  return raw;
}

Status Graph::remove_node(Node* n) {
  for (Value* o : n->outputs_) {
    if (!o) continue;
    if (!o->uses_.empty()) return internal_error("cannot remove ", n->describe(), ": output '", o->name(), "' is used");
    if (std::find(outputs_.begin(), outputs_.end(), o) != outputs_.end())
      return internal_error("cannot remove ", n->describe(), ": output '", o->name(), "' is a graph output");
  }
  for (size_t i = 0; i < n->inputs_.size(); ++i) n->set_input(i, nullptr);
  for (Value* o : n->outputs_)
    if (o) o->producer_ = nullptr;
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [n](const auto& p) { return p.get() == n; });
  if (it != nodes_.end()) nodes_.erase(it);
  return Status::Ok();
}

namespace {
// Values a node reads, including those its subgraphs read from outside themselves.
void collect_reads(const Node& n, std::vector<const Value*>& out) {
  for (const Value* v : n.inputs())
    if (v) out.push_back(v);
  for (const auto& [name, a] : n.attrs().all()) {
    std::vector<const Graph*> gs;
    if (a.g) gs.push_back(a.g.get());
    for (const auto& g : a.graphs) gs.push_back(g.get());
    for (const Graph* g : gs)
      for (const auto& sn : g->nodes()) collect_reads(*sn, out);
  }
}
}  // namespace

Status Graph::topological_sort() {
  std::unordered_map<const Value*, Node*> producer;
  for (auto& n : nodes_)
    for (Value* o : n->outputs_)
      if (o) producer[o] = n.get();
  std::unordered_map<Node*, int> state;  // 0 new, 1 visiting, 2 done
  std::vector<std::unique_ptr<Node>> order;
  std::unordered_map<Node*, std::unique_ptr<Node>*> slot;
  for (auto& n : nodes_) slot[n.get()] = &n;
  // Iterative DFS keeps deep graphs off the call stack.
  for (auto& root : nodes_) {
    // A slot is empty once its node has moved to `order` as a dependency of an earlier root.
    if (!root || state[root.get()] != 0) continue;
    std::vector<std::pair<Node*, size_t>> stack{{root.get(), 0}};
    std::vector<std::vector<const Value*>> reads;
    reads.emplace_back();
    collect_reads(*root, reads.back());
    state[root.get()] = 1;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      auto& r = reads.back();
      if (next < r.size()) {
        const Value* v = r[next++];
        auto it = producer.find(v);
        if (it == producer.end() || it->second == n) {
          if (it != producer.end() && it->second == n)
            return invalid_model("graph '", name_, "' has a cycle: ", n->describe(), " reads its own output '", v->name(), "'");
          continue;
        }
        Node* p = it->second;
        if (state[p] == 1)
          return invalid_model("graph '", name_, "' has a cycle through ", p->describe(), " and ", n->describe());
        if (state[p] == 0) {
          state[p] = 1;
          stack.emplace_back(p, 0);
          reads.emplace_back();
          collect_reads(*p, reads.back());
        }
        continue;
      }
      state[n] = 2;
      order.push_back(std::move(*slot[n]));
      stack.pop_back();
      reads.pop_back();
    }
  }
  nodes_ = std::move(order);
  return Status::Ok();
}

Value* Graph::find_value(const std::string& name) const {
  for (const Graph* g = this; g; g = g->parent_) {
    auto it = g->by_name_.find(name);
    if (it != g->by_name_.end()) return it->second;
  }
  return nullptr;
}

const std::map<std::string, int64_t>& Graph::opset_imports() const {
  const Graph* g = this;
  while (g->parent_) g = g->parent_;
  return g->opsets_;
}

int64_t Graph::opset(const std::string& domain) const {
  const auto& m = opset_imports();
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = m.find(d);
  if (it == m.end() && d.empty()) it = m.find("ai.onnx");
  return it == m.end() ? 0 : it->second;
}

}  // namespace ingot::ir

namespace ingot::ir {

void Node::absorb_origins(const Node& other) {
  if (other.origins_.empty()) origins_.push_back(other.name_);
  else origins_.insert(origins_.end(), other.origins_.begin(), other.origins_.end());
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  // Copy: set_input edits the use list we iterate.
  std::vector<std::pair<Node*, int>> uses = from->uses_;
  for (auto& [node, index] : uses) node->set_input(static_cast<size_t>(index), to);
  for (Value*& o : outputs_)
    if (o == from) o = to;
}

void Graph::rename_value(Value* v, const std::string& name) {
  Graph* g = v->owner_ ? v->owner_ : this;
  auto it = g->by_name_.find(v->name_);
  if (it != g->by_name_.end() && it->second == v) g->by_name_.erase(it);
  v->name_ = name;
  if (!name.empty()) g->by_name_[name] = v;
}

}  // namespace ingot::ir

namespace ingot::ir {

bool Graph::remove_initializer(Value* v) {
  if (!v || !v->initializer() || !v->uses_.empty()) return false;
  if (std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end()) return false;
  if (std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end()) return false;
  auto it = std::find(initializers_.begin(), initializers_.end(), v);
  if (it == initializers_.end()) return false;
  initializers_.erase(it);
  v->initializer_ = Tensor();
  return true;
}

}  // namespace ingot::ir
