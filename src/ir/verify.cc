// Copyright ingot authors. Apache-2.0.
#include "ir/verify.h"

#include <algorithm>
#include <unordered_set>

namespace ingot::ir {

namespace {

Status verify(const Graph& g, std::unordered_set<const Value*> visible) {
  for (const Value* v : g.inputs()) visible.insert(v);
  for (const Value* v : g.initializers()) visible.insert(v);
  std::unordered_set<const Value*> produced;
  for (const auto& n : g.nodes()) {
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->inputs()[i];
      if (!v) continue;
      if (!visible.count(v))
        return internal_error("graph '", g.name(), "': ", n->describe(), " input ", i, " '", v->name(),
                              "' is not defined before the node");
      const auto& u = v->uses();
      if (std::find(u.begin(), u.end(), std::make_pair(n.get(), static_cast<int>(i))) == u.end())
        return internal_error("graph '", g.name(), "': use list of '", v->name(), "' misses ", n->describe());
    }
    for (const auto& [name, a] : n->attrs().all()) {
      if (a.g) INGOT_RETURN_IF_ERROR(verify(*a.g, visible));
      for (const auto& sg : a.graphs) INGOT_RETURN_IF_ERROR(verify(*sg, visible));
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* o = n->outputs()[i];
      if (!o) continue;
      if (o->producer() != n.get() || o->producer_output() != static_cast<int>(i))
        return internal_error("graph '", g.name(), "': '", o->name(), "' does not record ", n->describe(),
                              " as its producer");
      if (!produced.insert(o).second || visible.count(o))
        return internal_error("graph '", g.name(), "': '", o->name(), "' is produced twice");
      visible.insert(o);
    }
  }
  for (const Value* o : g.outputs())
    if (!visible.count(o)) return internal_error("graph '", g.name(), "': output '", o->name(), "' is never produced");
  return Status::Ok();
}

}  // namespace

Status verify_graph(const Graph& g) {
  std::unordered_set<const Value*> outer;
  // Values of enclosing graphs are visible to a subgraph verified on its own.
  for (const Graph* p = g.parent(); p; p = p->parent()) {
    for (const Value* v : p->inputs()) outer.insert(v);
    for (const Value* v : p->initializers()) outer.insert(v);
    for (const auto& n : p->nodes())
      for (const Value* o : n->outputs())
        if (o) outer.insert(o);
  }
  return verify(g, outer);
}

}  // namespace ingot::ir
