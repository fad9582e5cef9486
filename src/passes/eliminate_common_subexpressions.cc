// Copyright ingot authors. Apache-2.0.
//
// eliminate_common_subexpressions: computes each distinct expression once.
//
// Pattern → result:
//   - two nodes with the same op, domain, attributes and input values
//   (exporters repeat
//     Shape/Gather/Unsqueeze chains per use): the later one's readers read the
//     earlier one's outputs, and the later node is removed;
//   - identical small initializers (same dtype, shape and bytes, at most
//   kMaxMergeBytes):
//     readers of the later one read the first.
// Refuses:
//   - nodes with subgraphs (comparing bodies is not worth it) and random ops
//   (two draws are
//     two different values);
//   - a merge where both are graph outputs, or the kept one is a graph input:
//   the dropped
//     output could not keep its name;
//   - initializers that are graph inputs (the caller may override each
//   separately).
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

constexpr const char *kName = "eliminate_common_subexpressions";
constexpr size_t kMaxMergeBytes = 4096;

void append_tensor(std::ostringstream &os, const Tensor &t) {
  os << "T" << static_cast<int>(t.dtype()) << shape_to_string(t.shape()) << ":";
  if (t.dtype() == DataType::kString) {
    for (const auto &s : t.strings())
      os << s.size() << ":" << s;
  } else {
    os.write(static_cast<const char *>(t.raw()),
             static_cast<std::streamsize>(t.nbytes()));
  }
}

// A byte key equal for two nodes exactly when they compute the same thing;
// nullopt for nodes never merged.
std::optional<std::string>
node_key(const ir::Node &n, const std::map<const ir::Value *, size_t> &ids) {
  static const std::set<std::string> random_ops = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Bernoulli",    "Multinomial",   "Dropout"};
  if (n.domain().empty() && random_ops.count(n.op_type()))
    return std::nullopt;
  std::ostringstream os;
  os << n.domain() << "::" << n.op_type() << "(";
  for (const ir::Value *v : n.inputs()) {
    if (!v) {
      os << "_,";
      continue;
    }
    auto it = ids.find(v);
    // Values of an enclosing scope are not numbered; their address identifies
    // them.
    if (it == ids.end())
      os << "p" << reinterpret_cast<uintptr_t>(v) << ",";
    else
      os << it->second << ",";
  }
  os << ")->";
  for (const ir::Value *o : n.outputs())
    os << (o ? "o" : "_");
  for (const auto &[k, a] : n.attrs().all()) {
    if (a.g || !a.graphs.empty())
      return std::nullopt;
    os << "|" << k << "=" << static_cast<int>(a.type) << ":";
    switch (a.type) {
    case ir::AttrType::kFloat:
      os.write(reinterpret_cast<const char *>(&a.f), sizeof a.f);
      break;
    case ir::AttrType::kInt:
      os << a.i;
      break;
    case ir::AttrType::kString:
      os << a.s.size() << ":" << a.s;
      break;
    case ir::AttrType::kTensor:
      append_tensor(os, a.t);
      break;
    case ir::AttrType::kFloats:
      for (float f : a.floats)
        os.write(reinterpret_cast<const char *>(&f), sizeof f);
      break;
    case ir::AttrType::kInts:
      for (int64_t i : a.ints)
        os << i << ",";
      break;
    case ir::AttrType::kStrings:
      for (const auto &s : a.strings)
        os << s.size() << ":" << s;
      break;
    case ir::AttrType::kTensors:
      for (const auto &t : a.tensors)
        append_tensor(os, t);
      break;
    default:
      return std::nullopt;
    }
  }
  return os.str();
}

class EliminateCommonSubexpressions : public Pass {
public:
  const char *name() const override { return kName; }

  Result<bool> run(ir::Graph &g, PassContext &ctx) override {
    bool changed = false;
    // Number values so keys do not depend on addresses (determinism) and merged
    // values share a number.
    std::map<const ir::Value *, size_t> ids;
    size_t next_id = 0;
    for (const ir::Value *v : g.inputs())
      ids[v] = next_id++;

    // Initializers first: merging them lets nodes reading either one merge
    // below.
    std::map<std::string, ir::Value *> init_by_key;
    for (ir::Value *v : std::vector<ir::Value *>(g.initializers())) {
      if (ids.count(v))
        continue; // a graph input: overridable, never merged
      ids[v] = next_id++;
      const Tensor &t = *v->initializer();
      if (t.dtype() == DataType::kString || t.nbytes() > kMaxMergeBytes)
        continue;
      std::ostringstream os;
      append_tensor(os, t);
      auto [it, fresh] = init_by_key.emplace(os.str(), v);
      if (fresh || !can_replace_value(g, v, it->second))
        continue;
      if (v->uses().empty())
        continue;
      INGOT_RETURN_IF_ERROR(replace_value(g, v, it->second));
      ids[v] = ids[it->second];
      changed = true;
    }

    std::map<std::string, ir::Node *> node_by_key;
    std::vector<ir::Node *> nodes;
    for (const auto &up : g.nodes())
      nodes.push_back(up.get());
    for (ir::Node *n : nodes) {
      auto key = node_key(*n, ids);
      auto number_outputs = [&](ir::Node *from) {
        for (size_t i = 0; i < n->outputs().size(); ++i)
          if (n->output(i))
            ids[n->output(i)] = from == n ? next_id++ : ids[from->output(i)];
      };
      if (!key) {
        number_outputs(n);
        continue;
      }
      auto [it, fresh] = node_by_key.emplace(*key, n);
      ir::Node *keep = it->second;
      bool mergeable = !fresh;
      for (size_t i = 0; mergeable && i < n->outputs().size(); ++i)
        if (n->output(i) &&
            !can_replace_value(g, n->output(i), keep->output(i)))
          mergeable = false;
      if (!mergeable) {
        if (!fresh)
          ctx.note(kName, "kept " + n->describe() + ": it and " +
                              keep->describe() + " both produce graph outputs");
        number_outputs(n);
        continue;
      }
      for (size_t i = 0; i < n->outputs().size(); ++i)
        if (n->output(i))
          INGOT_RETURN_IF_ERROR(
              replace_value(g, n->output(i), keep->output(i)));
      keep->absorb_origins(*n);
      number_outputs(keep);
      INGOT_RETURN_IF_ERROR(g.remove_node(n));
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> make_eliminate_common_subexpressions() {
  return std::make_unique<EliminateCommonSubexpressions>();
}

} // namespace ingot::passes
