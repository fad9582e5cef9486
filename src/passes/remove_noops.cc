// Copyright ingot authors. Apache-2.0.
//
// remove_noops: drops nodes that pass their input through unchanged, so later
// patterns see the real dataflow.
//
// Pattern → result (the output's readers read the input instead):
//   Identity(x); Dropout(x) in inference (mask output unused, or replaced by an
//   all-true constant when its shape is concrete); Cast/CastLike to x's own
//   dtype; Reshape/Expand whose inferred output shape equals x's (known sizes,
//   or the same symbol dim by dim); Transpose with the identity perm; Pad with
//   all-zero pads; Slice whose every sliced axis has step 1, starts at 0 and
//   ends at or past the dim.
// Refuses:
//   - Dropout whose training_mode is not a constant false (it would drop
//   values);
//   - shapes with unknown dims (`?` equals `?` textually but not at run time);
//   - Slice with a symbolic dim unless its end is a "to the end" sentinel (>=
//   2^62), since
//     a finite end may cut a dim we cannot see;
//   - a node whose output is a graph output and whose input is a graph input or
//   another
//     graph output: the output could not keep its name (noted).
#include <limits>

#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

constexpr const char *kName = "remove_noops";

bool shapes_provably_equal(const ir::Shape &a, const ir::Shape &b) {
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank())
    return false;
  for (size_t i = 0; i < a.rank(); ++i) {
    if (a[i].is_unknown() || b[i].is_unknown() || a[i] != b[i])
      return false;
  }
  return true;
}

// Dropout is a no-op unless training mode is on (opset 12+: input 2; earlier:
// is_test=0 in opset < 7 meant training, which no inference model carries).
bool dropout_is_noop(const ir::Node &n) {
  if (n.op_type() != "Dropout")
    return false;
  if (ir::Value *tm = n.input(2)) {
    auto t = constant_value(tm);
    if (!t || t->numel() != 1 || t->get_i64(0) != 0)
      return false;
  }
  if (n.owner()->opset("") < 7 && n.attrs().get_int("is_test", 0) == 0)
    return false;
  return true;
}

bool is_identity_perm(const ir::Node &n, const ir::Value *x) {
  if (!x->shape().rank_known())
    return false;
  size_t r = x->shape().rank();
  const ir::Attribute *p = n.attrs().find("perm");
  if (!p)
    return r <= 1; // the default perm reverses the axes
  if (p->ints.size() != r)
    return false;
  for (size_t i = 0; i < r; ++i)
    if (p->ints[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

bool pad_is_noop(const ir::Node &n) {
  std::vector<int64_t> pads;
  if (n.owner()->opset("") < 11) {
    if (!n.attrs().has("pads"))
      return false;
    pads = n.attrs().get_ints("pads");
  } else {
    auto c = constant_ints(n.input(1));
    if (!c)
      return false;
    pads = *c;
  }
  for (int64_t p : pads)
    if (p != 0)
      return false;
  return true;
}

bool slice_is_noop(const ir::Node &n, const ir::Value *x) {
  const ir::Shape &s = x->shape();
  if (!s.rank_known())
    return false;
  int64_t r = static_cast<int64_t>(s.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.owner()->opset("") < 10) {
    starts = n.attrs().get_ints("starts");
    ends = n.attrs().get_ints("ends");
    axes = n.attrs().get_ints("axes");
  } else {
    auto st = constant_ints(n.input(1));
    auto en = constant_ints(n.input(2));
    if (!st || !en)
      return false;
    starts = *st;
    ends = *en;
    if (n.input(3)) {
      auto ax = constant_ints(n.input(3));
      if (!ax)
        return false;
      axes = *ax;
    }
    if (n.input(4)) {
      auto sp = constant_ints(n.input(4));
      if (!sp)
        return false;
      steps = *sp;
    }
  }
  if (starts.size() != ends.size())
    return false;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != starts.size() ||
      (!steps.empty() && steps.size() != starts.size()))
    return false;
  constexpr int64_t kToTheEnd = int64_t{1} << 62;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + r : axes[i];
    if (axis < 0 || axis >= r)
      return false;
    if (!steps.empty() && steps[i] != 1)
      return false;
    const ir::Dim &d = s[static_cast<size_t>(axis)];
    if (d.is_known()) {
      int64_t start = starts[i] < 0 ? starts[i] + d.value() : starts[i];
      int64_t end = ends[i] < 0 ? ends[i] + d.value() : ends[i];
      if (start > 0 || end < d.value())
        return false;
    } else {
      if (starts[i] != 0 || ends[i] < kToTheEnd)
        return false;
    }
  }
  return true;
}

// The input whose value the node's first output equals, or nullptr when it is
// no no-op.
ir::Value *passthrough_input(const ir::Node &n) {
  if (!n.domain().empty() || n.inputs().empty() || !n.input(0))
    return nullptr;
  ir::Value *x = n.input(0);
  ir::Value *y = n.output(0);
  if (!y)
    return nullptr;
  const std::string &op = n.op_type();
  if (op == "Identity")
    return x;
  if (op == "Dropout")
    return dropout_is_noop(n) ? x : nullptr;
  if (!x->has_type() || !y->has_type() || x->dtype() != y->dtype())
    return nullptr;
  if (op == "Cast")
    return n.attrs().get_int("to", -1) == static_cast<int64_t>(x->dtype())
               ? x
               : nullptr;
  if (op == "CastLike")
    return n.input(1) && n.input(1)->has_type() &&
                   n.input(1)->dtype() == x->dtype()
               ? x
               : nullptr;
  if (op == "Reshape" || op == "Expand")
    return shapes_provably_equal(x->shape(), y->shape()) ? x : nullptr;
  if (op == "Transpose")
    return is_identity_perm(n, x) ? x : nullptr;
  if (op == "Pad")
    return pad_is_noop(n) ? x : nullptr;
  if (op == "Slice")
    return slice_is_noop(n, x) ? x : nullptr;
  return nullptr;
}

class RemoveNoops : public Pass {
public:
  const char *name() const override { return kName; }

  Result<bool> run(ir::Graph &g, PassContext &ctx) override {
    // Fresh types: the decisions below compare shapes, and earlier passes may
    // have made more of them known. A graph inference cannot fully type keeps
    // what it has.
    (void)ir::infer_graph(g);
    bool changed = false;
    std::vector<ir::Node *> nodes;
    for (const auto &n : g.nodes())
      nodes.push_back(n.get());
    for (ir::Node *n : nodes) {
      ir::Value *x = passthrough_input(*n);
      if (!x)
        continue;
      ir::Value *y = n->output(0);
      if (!can_replace_value(g, y, x)) {
        ctx.note(kName, "kept " + n->describe() + ": graph output '" +
                            y->name() + "' would lose its name to '" +
                            x->name() + "'");
        continue;
      }
      // Dropout's mask: all true in inference. Replace it when used and its
      // shape is known.
      ir::Value *mask = n->op_type() == "Dropout" ? n->output(1) : nullptr;
      ir::Value *mask_const = nullptr;
      if (mask && (!mask->uses().empty() || is_graph_output(g, mask))) {
        if (!mask->has_type() || !mask->shape().is_concrete()) {
          ctx.note(kName,
                   "kept " + n->describe() +
                       ": its mask output is used and its shape is not known");
          continue;
        }
        auto t = Tensor::zeros(mask->dtype(), mask->shape().concrete());
        if (!t.ok())
          return t.status();
        for (int64_t i = 0; i < t->numel(); ++i)
          t->set_i64(i, 1);
        mask_const = make_initializer(g, mask->name() + "_const", *t);
        if (!can_replace_value(g, mask, mask_const))
          continue;
        INGOT_RETURN_IF_ERROR(replace_value(g, mask, mask_const));
      }
      INGOT_RETURN_IF_ERROR(replace_value(g, y, x));
      INGOT_RETURN_IF_ERROR(g.remove_node(n));
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> make_remove_noops() {
  return std::make_unique<RemoveNoops>();
}

} // namespace ingot::passes
