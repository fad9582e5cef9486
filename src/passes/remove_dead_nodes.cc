// Copyright ingot authors. Apache-2.0.
//
// remove_dead_nodes: drops what no graph output depends on.
//
// Pattern → result:
//   - nodes none of whose outputs reach a graph output (directly, through other
//   nodes, or
//     through values read inside a live node's subgraph) are removed;
//   - initializers nobody reads that are neither graph inputs nor graph outputs
//   are removed
//     (needs ir::Graph to support dropping initializers; see pattern_util.h).
// Refuses: nothing live. Graph inputs stay even when unused: they are the
// engine's interface. Only the top-level graph is cleaned; subgraph bodies are
// left as their owner wrote them.
#include <set>

#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

constexpr const char *kName = "remove_dead_nodes";

// Values `n` reads, including those its subgraphs read from enclosing scopes.
void collect_reads(const ir::Node &n, std::vector<const ir::Value *> &out) {
  for (const ir::Value *v : n.inputs())
    if (v)
      out.push_back(v);
  for (const auto &[k, a] : n.attrs().all()) {
    std::vector<const ir::Graph *> gs;
    if (a.g)
      gs.push_back(a.g.get());
    for (const auto &sg : a.graphs)
      gs.push_back(sg.get());
    for (const ir::Graph *sg : gs)
      for (const auto &sn : sg->nodes())
        collect_reads(*sn, out);
  }
}

// Subgraph nodes read outer values; those reads are uses of the outer values,
// which must be dropped before the outer producer can be removed.
void detach_subgraph_reads(ir::Node &n) {
  for (const auto &[k, a] : n.attrs().all()) {
    std::vector<ir::Graph *> gs;
    if (a.g)
      gs.push_back(a.g.get());
    for (const auto &sg : a.graphs)
      gs.push_back(sg.get());
    for (ir::Graph *sg : gs)
      for (const auto &sn : sg->nodes()) {
        for (size_t i = 0; i < sn->inputs().size(); ++i)
          sn->set_input(i, nullptr);
        detach_subgraph_reads(*sn);
      }
  }
}

class RemoveDeadNodes : public Pass {
public:
  const char *name() const override { return kName; }

  Result<bool> run(ir::Graph &g, PassContext &ctx) override {
    std::set<const ir::Value *> live_values(g.outputs().begin(),
                                            g.outputs().end());
    std::set<const ir::Node *> live_nodes;
    // Nodes are in topological order, so one backward sweep settles liveness.
    const auto &nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const ir::Node &n = **it;
      bool live = false;
      for (const ir::Value *o : n.outputs())
        live |= o && live_values.count(o);
      if (!live)
        continue;
      live_nodes.insert(&n);
      std::vector<const ir::Value *> reads;
      collect_reads(n, reads);
      live_values.insert(reads.begin(), reads.end());
    }
    bool changed = false;
    std::vector<ir::Node *> dead;
    for (const auto &n : nodes)
      if (!live_nodes.count(n.get()))
        dead.push_back(n.get());
    // Detach every dead reader first, so removal does not depend on the node
    // order.
    for (ir::Node *n : dead) {
      detach_subgraph_reads(*n);
      for (size_t i = 0; i < n->inputs().size(); ++i)
        n->set_input(i, nullptr);
    }
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      Status s = g.remove_node(*it);
      if (!s.ok())
        return internal_error(kName, ": ", s.message());
      changed = true;
    }
    for (ir::Value *v : std::vector<ir::Value *>(g.initializers()))
      if (v->uses().empty() && remove_unused_initializer(g, v))
        changed = true;
    if (!dead.empty())
      ctx.note(kName, "removed " + std::to_string(dead.size()) + " node(s)");
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> make_remove_dead_nodes() {
  return std::make_unique<RemoveDeadNodes>();
}

} // namespace ingot::passes
