// Copyright ingot authors. Apache-2.0.
#include "passes/pattern_util.h"

#include <algorithm>
#include <set>
#include <type_traits>
#include <utility>

#include "backend/cpu/executor.h"

namespace ingot::passes {

Result<bool> match_at_anchors(ir::Graph &g, const std::function<bool(const ir::Node &)> &is_anchor,
                              const std::function<Result<bool>(ir::Node *, std::set<const ir::Node *> *)> &match) {
  std::vector<ir::Node *> anchors;
  for (const auto &n : g.nodes())
    if (is_anchor(*n)) anchors.push_back(n.get());
  std::set<const ir::Node *> removed;
  bool changed = false;
  for (ir::Node *a : anchors) {
    if (removed.count(a) != 0) continue;
    INGOT_ASSIGN_OR_RETURN(bool did, match(a, &removed));
    changed = changed || did;
  }
  if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());
  return changed;
}

bool is_graph_output(const ir::Graph &g, const ir::Value *v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) !=
         g.outputs().end();
}

bool is_graph_input(const ir::Graph &g, const ir::Value *v) {
  return std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end();
}

bool has_single_consumer(const ir::Graph &g, const ir::Value *v) {
  return v && v->uses().size() == 1 && !is_graph_output(g, v);
}

ir::Node *single_consumer(const ir::Graph &g, const ir::Value *v) {
  return has_single_consumer(g, v) ? v->uses()[0].first : nullptr;
}

std::optional<Tensor> constant_value(const ir::Value *v) {
  if (!v)
    return std::nullopt;
  if (const Tensor *t = v->initializer()) {
    if (v->owner() && is_graph_input(*v->owner(), v))
      return std::nullopt;
    return *t;
  }
  const ir::Node *p = v->producer();
  if (!p || p->op_type() != "Constant" || !p->domain().empty())
    return std::nullopt;
  const ir::Attributes &a = p->attrs();
  if (const Tensor *t = a.get_tensor("value"))
    return *t;
  if (const ir::Attribute *f = a.find("value_float"))
    return Tensor::from_vector<float>(DataType::kFloat32, {}, {f->f});
  if (const ir::Attribute *f = a.find("value_floats"))
    return Tensor::from_vector<float>(DataType::kFloat32,
                                      {static_cast<int64_t>(f->floats.size())},
                                      f->floats);
  if (const ir::Attribute *i = a.find("value_int"))
    return Tensor::from_vector<int64_t>(DataType::kInt64, {}, {i->i});
  if (const ir::Attribute *i = a.find("value_ints"))
    return Tensor::from_vector<int64_t>(
        DataType::kInt64, {static_cast<int64_t>(i->ints.size())}, i->ints);
  if (const ir::Attribute *s = a.find("value_string"))
    return Tensor::from_strings({}, {s->s});
  if (const ir::Attribute *s = a.find("value_strings"))
    return Tensor::from_strings({static_cast<int64_t>(s->strings.size())},
                                s->strings);
  return std::nullopt;
}

std::optional<double> scalar_value(const ir::Value *v) {
  auto t = constant_value(v);
  if (!t || t->numel() != 1 || t->dtype() == DataType::kString)
    return std::nullopt;
  return t->get_f64(0);
}

std::optional<std::vector<int64_t>> constant_ints(const ir::Value *v) {
  auto t = constant_value(v);
  if (!t || !(is_integer(t->dtype())))
    return std::nullopt;
  return t->to_i64_vector();
}

std::string unique_value_name(const ir::Graph &g, const std::string &base,
                              const char *sep) {
  if (!base.empty() && !g.find_value(base))
    return base;
  for (int i = 1;; ++i) {
    std::string n = base + sep + std::to_string(i);
    if (!g.find_value(n))
      return n;
  }
}

std::optional<double> literal_scalar(const ir::Value *v) {
  if (v == nullptr)
    return std::nullopt;
  const Tensor *t = v->initializer();
  const ir::Node *p = v->producer();
  if (t == nullptr && p != nullptr && p->op_type() == "Constant" &&
      p->domain().empty())
    t = p->attrs().get_tensor("value");
  if (t == nullptr || t->numel() != 1 || t->rank() > 1)
    return std::nullopt;
  return t->get_f64(0);
}

ir::Node *onnx_producer(const ir::Value *v, const char *op_type) {
  if (v == nullptr || v->producer() == nullptr)
    return nullptr;
  ir::Node *p = v->producer();
  return p->op_type() == op_type && p->domain().empty() ? p : nullptr;
}

ir::Node *single_onnx_consumer(const ir::Graph &g, const ir::Value *v,
                               const char *op_type) {
  ir::Node *u = single_consumer(g, v);
  return u != nullptr && u->op_type() == op_type && u->domain().empty()
             ? u
             : nullptr;
}

ir::Value *other_input(const ir::Node *n, const ir::Value *v) {
  if (n->inputs().size() != 2)
    return nullptr;
  if (n->input(0) == v)
    return n->input(1);
  if (n->input(1) == v)
    return n->input(0);
  return nullptr;
}

bool self_contained(const ir::Graph &g, const std::vector<ir::Node *> &nodes,
                    const ir::Node *last) {
  std::set<const ir::Node *> in(nodes.begin(), nodes.end());
  for (const ir::Node *n : nodes) {
    if (n == last)
      continue;
    for (const ir::Value *o : n->outputs()) {
      if (o == nullptr)
        continue;
      if (is_graph_output(g, o))
        return false;
      for (const auto &u : o->uses())
        if (in.count(u.first) == 0)
          return false;
    }
  }
  return true;
}

bool same_scalar_attrs(const ir::Attributes &a, const ir::Attributes &b) {
  if (a.all().size() != b.all().size()) return false;
  for (const auto &[k, x] : a.all()) {
    auto it = b.all().find(k);
    if (it == b.all().end() || it->second.type != x.type) return false;
    const ir::Attribute &y = it->second;
    switch (x.type) {
      case ir::AttrType::kInt: if (x.i != y.i) return false; break;
      case ir::AttrType::kFloat: if (x.f != y.f) return false; break;
      case ir::AttrType::kString: if (x.s != y.s) return false; break;
      case ir::AttrType::kFloats: if (x.floats != y.floats) return false; break;
      case ir::AttrType::kInts: if (x.ints != y.ints) return false; break;
      default: return false;
    }
  }
  return true;
}

std::string refusal_note(const std::string &what, const std::string &anchor_op,
                         const ir::Node *anchor, const std::string &why) {
  return "refused " + what + " at " +
         (anchor_op.empty() ? std::string() : anchor_op + " ") + "'" +
         anchor->name() + "': " + why;
}

void take_over_name(ir::Graph &g, ir::Value *out, ir::Value *fused_out) {
  const std::string keep = out->name();
  g.rename_value(out, unique_value_name(g, keep + ".unfused", "."));
  g.rename_value(fused_out, keep);
}

Status remove_nodes_consumers_first(ir::Graph &g, std::vector<ir::Node *> nodes,
                                    const char *who) {
  while (!nodes.empty()) {
    bool progress = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      bool free = true;
      for (const ir::Value *o : nodes[i]->outputs())
        if (o != nullptr && (!o->uses().empty() || is_graph_output(g, o)))
          free = false;
      if (!free)
        continue;
      INGOT_RETURN_IF_ERROR(g.remove_node(nodes[i]));
      nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
      break;
    }
    if (!progress)
      return internal_error(who, ": matched nodes are still in use");
  }
  return Status::Ok();
}

ir::Value *make_initializer(ir::Graph &g, const std::string &base,
                            Tensor data) {
  return g.add_initializer(unique_value_name(g, base.empty() ? "const" : base),
                           std::move(data));
}

ir::Value *make_int64s(ir::Graph &g, const std::string &base, const std::vector<int64_t> &values) {
  return make_initializer(
      g, base, Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(values.size())}, values));
}

bool can_replace_value(const ir::Graph &g, const ir::Value *from,
                       const ir::Value *to) {
  if (from == to)
    return true;
  if (!is_graph_output(g, from))
    return true;
  return !is_graph_input(g, to) && !is_graph_output(g, to) && to->owner() == &g;
}

Status replace_value(ir::Graph &g, ir::Value *from, ir::Value *to) {
  if (from == to)
    return Status::Ok();
  if (!can_replace_value(g, from, to))
    return internal_error("cannot replace graph output '", from->name(),
                          "' by '", to->name(), "'");
  bool output = is_graph_output(g, from);
  g.replace_all_uses(from, to);
  if (output) {
    std::string name = from->name();
    g.rename_value(from, "");
    g.rename_value(to, name);
  }
  return Status::Ok();
}

Result<std::vector<Tensor>> eval_op(const std::string &op_type,
                                    const std::vector<Tensor> &inputs,
                                    const ir::Attributes &attrs,
                                    const ir::Graph *like) {
  ir::Graph tmp("eval");
  int64_t opset = like ? like->opset("") : 0;
  tmp.set_opset_import("", opset > 0 ? opset : 17);
  std::vector<ir::Value *> ins;
  std::vector<const Tensor *> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(tmp.add_initializer("in" + std::to_string(i), inputs[i]));
    ptrs.push_back(&inputs[i]);
  }
  ir::Node *n =
      tmp.add_node(op_type, ins, {tmp.add_value("out")}, attrs, "eval");
  return cpu::run_node(*n, ptrs);
}

namespace {
// ir::Graph has no way to drop an initializer yet; once it grows
// `bool remove_initializer(Value*)` this picks it up without a change here.
template <class G, class = void>
struct HasRemoveInitializer : std::false_type {};
template <class G>
struct HasRemoveInitializer<
    G, std::void_t<decltype(std::declval<G &>().remove_initializer(
           static_cast<ir::Value *>(nullptr)))>> : std::true_type {};

template <class G> bool remove_initializer_if_supported(G &g, ir::Value *v) {
  if constexpr (HasRemoveInitializer<G>::value) {
    using R = decltype(g.remove_initializer(v));
    if constexpr (std::is_same_v<R, bool>)
      return g.remove_initializer(v);
    else if constexpr (std::is_same_v<R, void>) {
      g.remove_initializer(v);
      return true;
    } else {
      return g.remove_initializer(v).ok();
    }
  } else {
    (void)g;
    (void)v;
    return false;
  }
}
} // namespace

bool graph_can_remove_initializers() {
  return HasRemoveInitializer<ir::Graph>::value;
}

bool remove_unused_initializer(ir::Graph &g, ir::Value *v) {
  if (!v->initializer() || !v->uses().empty() || is_graph_input(g, v) ||
      is_graph_output(g, v))
    return false;
  return remove_initializer_if_supported(g, v);
}

} // namespace ingot::passes
