// Copyright ingot authors. Apache-2.0.
//
// Plan -> FlatBuffer. Values and nodes get ids across the whole graph tree, in the order the
// reader recreates them: a graph's own values first, then its nodes (subgraphs depth-first).
#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "engine/engine_format.h"
#include "engine/engine_generated.h"
#include "engine/engine_metadata.h"

namespace ingot::engine::detail {
namespace {

namespace fbs = ::flatbuffers;
using fbs::Offset;

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* weights) : weights_(*weights) {}

  Result<std::vector<uint8_t>> encode(const builder::Plan& plan) {
    if (!plan.graph) return invalid_argument("write_engine: the plan has no graph");
    INGOT_ASSIGN_OR_RETURN(Offset<fb::Graph> graph, encode_graph(*plan.graph));
    std::vector<Offset<fb::Step>> steps;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const builder::Step& s = plan.steps[i];
      int64_t node = -1;
      if (s.node) {
        auto it = node_ids_.find(s.node);
        if (it == node_ids_.end())
          return invalid_argument("write_engine: step ", i, " (", s.node->describe(), ") is not a node of the plan's graph");
        node = it->second;
      }
      steps.push_back(fb::CreateStep(fbb_, node, fbb_.CreateString(s.tactic), fbb_.CreateVector(s.params),
                                     s.workspace_bytes));
    }
    std::vector<Offset<fb::ValuePlan>> values;
    for (size_t i = 0; i < plan.values.size(); ++i) {
      const builder::ValuePlan& vp = plan.values[i];
      int64_t id = -1;
      if (vp.value) {
        auto it = value_ids_.find(vp.value);
        if (it == value_ids_.end())
          return invalid_argument("write_engine: value plan ", i, " ('", vp.value->name(), "') is not a value of the plan's graph");
        id = it->second;
      }
      values.push_back(fb::CreateValuePlan(fbb_, id, static_cast<uint8_t>(vp.storage), vp.offset, vp.max_bytes,
                                           vp.first_step, vp.last_step));
    }
    std::vector<Offset<fb::Profile>> profiles;
    for (const builder::Profile& p : plan.profiles) {
      std::vector<Offset<fb::ProfileDims>> dims;
      for (const builder::ProfileDims& d : p.inputs)
        dims.push_back(fb::CreateProfileDims(fbb_, fbb_.CreateString(d.input), fbb_.CreateVector(d.min),
                                             fbb_.CreateVector(d.opt), fbb_.CreateVector(d.max)));
      profiles.push_back(fb::CreateProfile(fbb_, fbb_.CreateVector(dims)));
    }
    const builder::MemorySummary& m = plan.memory;
    auto memory = fb::CreateMemorySummary(fbb_, m.arena_bytes, m.weight_bytes, m.lower_bound_bytes, m.workspace_bytes);
    fbb_.Finish(fb::CreateEngine(fbb_, graph, fbb_.CreateVector(steps), fbb_.CreateVector(values),
                                 fbb_.CreateVector(profiles), memory));
    return std::vector<uint8_t>(fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize());
  }

 private:
  Offset<fbs::String> str(const std::string& s) { return fbb_.CreateString(s.data(), s.size()); }
  Offset<fbs::Vector<Offset<fbs::String>>> strs(const std::vector<std::string>& v) {
    std::vector<Offset<fbs::String>> o;
    o.reserve(v.size());
    for (const auto& s : v) o.push_back(str(s));
    return fbb_.CreateVector(o);
  }

  // Appends bytes to the weights section at a 64-byte aligned offset, once per storage.
  uint64_t add_weights(const void* data, size_t size) {
    auto key = std::make_pair(data, size);
    if (size > 0) {
      auto it = written_.find(key);
      if (it != written_.end()) return it->second;
    }
    size_t offset = (weights_.size() + kEngineAlignment - 1) / kEngineAlignment * kEngineAlignment;
    weights_.resize(offset + size);
    if (size > 0) std::memcpy(weights_.data() + offset, data, size);
    if (size > 0) written_[key] = offset;
    return offset;
  }

  Offset<fb::Tensor> encode_tensor(const Tensor& t) {
    if (!t.defined()) return fb::CreateTensor(fbb_);
    auto dims = fbb_.CreateVector(t.shape());
    if (t.dtype() == DataType::kString)
      return fb::CreateTensor(fbb_, static_cast<int32_t>(t.dtype()), dims, 0, 0, strs(t.strings()));
    size_t size = t.nbytes();
    uint64_t offset = add_weights(t.raw(), size);
    return fb::CreateTensor(fbb_, static_cast<int32_t>(t.dtype()), dims, offset, size);
  }

  bool in_scope(const ir::Value* v) const {
    return std::find(scope_.begin(), scope_.end(), v->owner()) != scope_.end();
  }

  Result<int64_t> ref(const ir::Value* v, const ir::Graph& g, const char* what) {
    if (!v) return int64_t{-1};
    auto it = value_ids_.find(v);
    if (it == value_ids_.end() || !in_scope(v))
      return invalid_argument("write_engine: ", what, " '", v->name(), "' of graph '", g.name(),
                              "' belongs neither to it nor to an enclosing graph");
    return it->second;
  }

  Result<Offset<fb::Attribute>> encode_attr(const std::string& name, const ir::Attribute& a) {
    Offset<fb::Graph> g = 0;
    if (a.g) { INGOT_ASSIGN_OR_RETURN(g, encode_graph(*a.g)); }
    std::vector<Offset<fb::Graph>> graphs;
    for (const auto& sg : a.graphs) {
      if (!sg) return invalid_argument("write_engine: attribute '", name, "' holds a null graph");
      INGOT_ASSIGN_OR_RETURN(Offset<fb::Graph> o, encode_graph(*sg));
      graphs.push_back(o);
    }
    Offset<fb::Tensor> t = a.t.defined() ? encode_tensor(a.t) : 0;
    std::vector<Offset<fb::Tensor>> tensors;
    for (const Tensor& x : a.tensors) tensors.push_back(encode_tensor(x));
    return fb::CreateAttribute(fbb_, str(name), static_cast<int32_t>(a.type), a.f, a.i, str(a.s), t, g,
                               a.floats.empty() ? 0 : fbb_.CreateVector(a.floats),
                               a.ints.empty() ? 0 : fbb_.CreateVector(a.ints),
                               a.strings.empty() ? 0 : strs(a.strings),
                               tensors.empty() ? 0 : fbb_.CreateVector(tensors),
                               graphs.empty() ? 0 : fbb_.CreateVector(graphs));
  }

  Result<Offset<fb::Graph>> encode_graph(const ir::Graph& g) {
    scope_.push_back(&g);
    // The values this graph owns, in the order the reader recreates them.
    std::vector<const ir::Value*> own;
    auto claim = [&](const ir::Value* v) {
      if (v && v->owner() == &g && !value_ids_.count(v)) {
        value_ids_[v] = next_value_id_++;
        own.push_back(v);
      }
    };
    int64_t first_value_id = next_value_id_;
    for (const ir::Value* v : g.inputs()) claim(v);
    for (const ir::Value* v : g.initializers()) claim(v);
    for (const auto& n : g.nodes()) {
      for (const ir::Value* v : n->outputs()) claim(v);
      for (const ir::Value* v : n->inputs()) claim(v);
    }
    for (const ir::Value* v : g.outputs()) claim(v);

    std::vector<Offset<fb::Value>> values;
    for (const ir::Value* v : own) {
      std::vector<Offset<fb::Dim>> dims;
      for (const ir::Dim& d : v->shape().dims())
        dims.push_back(d.is_symbol() ? fb::CreateDim(fbb_, -1, str(d.symbol_name())) : fb::CreateDim(fbb_, d.value()));
      Offset<fb::Tensor> init = v->initializer() ? encode_tensor(*v->initializer()) : 0;
      values.push_back(fb::CreateValue(fbb_, str(v->name()), static_cast<int32_t>(v->dtype()), v->shape().rank_known(),
                                       fbb_.CreateVector(dims), str(v->non_tensor_kind()), init));
    }
    std::vector<int64_t> inputs, outputs, initializers;
    for (const ir::Value* v : g.inputs()) {
      INGOT_ASSIGN_OR_RETURN(int64_t id, ref(v, g, "input"));
      inputs.push_back(id);
    }
    for (const ir::Value* v : g.initializers()) {
      INGOT_ASSIGN_OR_RETURN(int64_t id, ref(v, g, "initializer"));
      initializers.push_back(id);
    }
    std::vector<Offset<fb::Node>> nodes;
    for (const auto& n : g.nodes()) {
      std::vector<int64_t> ins, outs;
      for (const ir::Value* v : n->inputs()) {
        INGOT_ASSIGN_OR_RETURN(int64_t id, ref(v, g, "node input"));
        ins.push_back(id);
      }
      for (const ir::Value* v : n->outputs()) {
        if (v && v->owner() != &g)
          return invalid_argument("write_engine: output '", v->name(), "' of ", n->describe(), " is not a value of graph '", g.name(), "'");
        INGOT_ASSIGN_OR_RETURN(int64_t id, ref(v, g, "node output"));
        outs.push_back(id);
      }
      std::vector<Offset<fb::Attribute>> attrs;
      for (const auto& [name, a] : n->attrs().all()) {
        INGOT_ASSIGN_OR_RETURN(Offset<fb::Attribute> o, encode_attr(name, a));
        attrs.push_back(o);
      }
      node_ids_[n.get()] = next_node_id_++;  // after its subgraphs' nodes, as the reader adds them
      nodes.push_back(fb::CreateNode(fbb_, str(n->op_type()), str(n->domain()), str(n->name()), strs(n->origins()),
                                     fbb_.CreateVector(ins), fbb_.CreateVector(outs), fbb_.CreateVector(attrs)));
    }
    for (const ir::Value* v : g.outputs()) {
      INGOT_ASSIGN_OR_RETURN(int64_t id, ref(v, g, "output"));
      outputs.push_back(id);
    }
    std::vector<Offset<fb::OpsetImport>> opsets;
    if (!g.parent())
      for (const auto& [d, ver] : g.opset_imports()) opsets.push_back(fb::CreateOpsetImport(fbb_, str(d), ver));
    scope_.pop_back();
    return fb::CreateGraph(fbb_, str(g.name()), fbb_.CreateVector(values), first_value_id, fbb_.CreateVector(inputs),
                           fbb_.CreateVector(outputs), fbb_.CreateVector(initializers), fbb_.CreateVector(nodes),
                           fbb_.CreateVector(opsets));
  }

  fbs::FlatBufferBuilder fbb_{1 << 16};
  std::vector<uint8_t>& weights_;
  std::map<std::pair<const void*, size_t>, uint64_t> written_;
  std::unordered_map<const ir::Value*, int64_t> value_ids_;
  std::unordered_map<const ir::Node*, int64_t> node_ids_;
  std::vector<const ir::Graph*> scope_;
  int64_t next_value_id_ = 0, next_node_id_ = 0;
};

}  // namespace

Result<std::vector<uint8_t>> encode_metadata(const builder::Plan& plan, std::vector<uint8_t>* weights) {
  return Encoder(weights).encode(plan);
}

}  // namespace ingot::engine::detail
