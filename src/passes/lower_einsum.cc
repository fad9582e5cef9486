// Copyright ingot authors. Apache-2.0.
//
// lower_einsum: two-operand Einsums that are batched matrix products become MatMul, with a
// Transpose of the last two axes of an operand whose contracted letter is on the other side:
//
//   "bghid,bghjd->bghij" (MaxViT's q·kᵀ)  ->  MatMul(q, Transpose(k, [0,1,2,4,3]))
//   "bghij,bghjd->bghid" (its probs·v)    ->  MatMul(p, v)
//   "bij,jk->bik"                          ->  MatMul(a, b)      (the 2-D operand broadcasts)
//
// Backends run MatMul as a GEMM (and recognize_attention can then find the attention the two
// Einsums spell); an Einsum has no GPU tactic and would run on the host.
//
// The equation must be explicit ("->"), without an ellipsis, with letters unique in each term.
// With r the output's rank: the output is batch letters then (m, n); the longer operand holds
// the same batch letters (the shorter one a suffix of them: MatMul broadcasts from the right);
// each operand's last two letters are {m, k} and {k, n} in either order, k being the one letter
// both operands have and the output lacks. Anything else (traces, outer products, several
// contracted letters, reordered batch letters) stays an Einsum.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_lower_einsum();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "lower_einsum";

struct Terms {
  std::string a, b, out;
};

/// "ab,bc->ac" (spaces ignored) into its three terms; false for anything but two explicit
/// operands of letters, each letter once per term.
bool parse(const std::string& equation, Terms* t) {
  std::string e;
  for (char c : equation)
    if (c != ' ') e += c;
  const size_t arrow = e.find("->"), comma = e.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow ||
      e.find(',', comma + 1) != std::string::npos)
    return false;
  t->a = e.substr(0, comma);
  t->b = e.substr(comma + 1, arrow - comma - 1);
  t->out = e.substr(arrow + 2);
  for (const std::string* s : {&t->a, &t->b, &t->out}) {
    for (size_t i = 0; i < s->size(); ++i) {
      const char c = (*s)[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || s->find(c, i + 1) != std::string::npos)
        return false;
    }
  }
  return true;
}

/// The operand's value, transposed on its last two axes when `swap`.
Value* last_two_swapped(Graph& g, Value* v, bool swap, const Node* einsum, const char* tag) {
  if (!swap)
    return v;
  const size_t r = v->shape().rank();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i)
    perm[i] = static_cast<int64_t>(i);
  std::swap(perm[r - 1], perm[r - 2]);
  std::vector<ir::Dim> dims = v->shape().dims();
  std::swap(dims[r - 1], dims[r - 2]);
  Value* t = g.add_value(unique_value_name(g, v->name() + "." + tag + "_t", "."), v->dtype(), ir::Shape(dims));
  ir::Attributes a;
  a.set_ints("perm", perm);
  Node* n = g.add_node("Transpose", {v}, {t}, std::move(a), einsum->name() + "/" + tag + "_t");
  n->absorb_origins(*einsum);
  return t;
}

class LowerEinsum final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    bool changed = false;
    std::vector<Node*> einsums;
    for (const auto& n : g.nodes())
      if (n->domain().empty() && n->op_type() == "Einsum" && n->inputs().size() == 2 && n->outputs().size() == 1)
        einsums.push_back(n.get());
    for (Node* n : einsums) {
      INGOT_ASSIGN_OR_RETURN(bool done, lower(g, ctx, n));
      changed = changed || done;
    }
    return changed;
  }

 private:
  Result<bool> lower(Graph& g, PassContext& ctx, Node* n) {
    Value *a = n->input(0), *b = n->input(1), *y = n->output(0);
    Terms t;
    if (!a || !b || !y || !parse(n->attrs().get_string("equation", ""), &t))
      return false;
    if (!a->shape().rank_known() || !b->shape().rank_known() || a->shape().rank() != t.a.size() ||
        b->shape().rank() != t.b.size())
      return false;
    const size_t r = t.out.size();
    if (r < 2 || t.a.size() < 2 || t.b.size() < 2 || std::max(t.a.size(), t.b.size()) != r)
      return false;
    const std::string batch = t.out.substr(0, r - 2);
    const char m = t.out[r - 2], nn = t.out[r - 1];
    // Batch letters: the longer operand has them all, in order; the shorter one a suffix.
    for (const std::string* s : {&t.a, &t.b}) {
      const std::string sb = s->substr(0, s->size() - 2);
      if (sb.size() > batch.size() || batch.compare(batch.size() - sb.size(), sb.size(), sb) != 0)
        return false;
    }
    // The contracted letter: in both operands' last two, in neither output position.
    const std::string la = t.a.substr(t.a.size() - 2), lb = t.b.substr(t.b.size() - 2);
    char k = 0;
    for (char c : la)
      if (c != m && lb.find(c) != std::string::npos)
        k = c;
    if (k == 0 || k == nn || la.find(m) == std::string::npos || lb.find(nn) == std::string::npos || m == nn ||
        batch.find(k) != std::string::npos)
      return false;
    const bool swap_a = la == std::string{k, m};
    const bool swap_b = lb == std::string{nn, k};
    if (!(swap_a || la == std::string{m, k}) || !(swap_b || lb == std::string{k, nn}))
      return false;
    Value* a2 = last_two_swapped(g, a, swap_a, n, "a");
    Value* b2 = last_two_swapped(g, b, swap_b, n, "b");
    Value* out = g.add_value(unique_value_name(g, y->name() + ".matmul", "."), y->dtype(), y->shape());
    Node* mm = g.add_node("MatMul", {a2, b2}, {out}, {}, n->name());
    mm->absorb_origins(*n);
    ctx.note(kName, "Einsum '" + n->name() + "' (" + t.a + "," + t.b + "->" + t.out + ") is a MatMul" +
                        (swap_a || swap_b ? " with a Transpose" : ""));
    INGOT_RETURN_IF_ERROR(replace_value(g, y, out));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_lower_einsum() { return std::make_unique<LowerEinsum>(); }

}  // namespace ingot::passes
