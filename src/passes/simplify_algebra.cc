// Copyright ingot authors. Apache-2.0.
//
// simplify_algebra: small algebraic rewrites that remove nodes or move work
// into weights.
//
// Pattern → result:
//   - Transpose(Transpose(x, p1), p2) → Transpose(x, p1∘p2), or x when that is
//   the identity;
//   - a Transpose/Reshape chain (static shapes) whose result is a permutation of
//   its start's input → one Transpose (or the input itself): exporters spell K^T
//   as Reshape [B*H,S,D] / Transpose / Reshape [B,H,D,S]; one that keeps the order
//   of every non-unit axis → one Reshape (a channels-last 1-D conv region's end);
//   - a Transpose/Reshape chain that splits and merges axes with at least two Transposes
//   (MaxViT's window departition, then the grid partition and its axis swap) → one
//   Reshape / Transpose / Reshape over the factors of the input's dims (one copy);
//   - Reshape(Reshape(x, s1), s2) → Reshape(x, s2) when s2 is constant and has
//   no 0 that
//     would copy a dim from the inner result (allowzero=1 makes 0 literal,
//     which is fine);
//   - Add/Sub chains with constants: (x ± a) ± b, (a - x) ± b, b - (x ± a) ...
//   → one Add or
//     Sub of x and a folded constant (x + a + b → x + (a+b));
//   - Mul/Div of a Conv/Gemm/MatMul output by a constant that is per output
//   channel (Conv:
//     axis 1) or per column (Gemm/MatMul: last axis) → the weights (and bias)
//     scaled instead.
//   - Mul/Div(Add(y, b), s) with y a Conv/Gemm/MatMul output and b, s constants → Add(Mul/Div(y, s),
//     b·s), so the scale folds into the weights too (Whisper's q_proj(x) * scaling);
//   - Gather(W, Expand(c, s)) on axis 0, W and c constant → Expand(Gather(W, c),
//   Concat(s, W's trailing dims)): the inner Gather folds to c's few rows (BERT's
//   token-type embedding gathers [B, 128, 768] rows of a [2, 768] table by an
//   expanded constant [1, 128]);
//   - Gather(W, C) likewise where C is a constant index tensor that repeats
//   along some axes (such an Expand folded for a fixed batch): C's one slice
//   gathered, then expanded;
//   - GatherND(X, I) whose constant I lists X's elements in order → Reshape;
//   - a Transpose that moves only unit axes (static shapes) → Reshape;
//   - MatMul(x, Transpose(W)) with W a 2-D constant → Gemm {transB=1} on W as stored (with
//     Reshapes to and from 2-D; static shapes): tied LM heads;
//   - Reshape(MatMul(a, B)) regrouping only leading dims → MatMul(Reshape(a), B);
//   - Reshape -> Gemm(A, B, C) -> Reshape that keeps the leading dims (PyTorch's addmm) →
//     MatMul(x, B) + C, so the bias and what follows fuse into one FusedGemm;
//   - Reshape (one axis split into factors) -> Transpose (of those factors only) -> Reshape back
//     to the input's shape: a permutation of that axis' elements (ShuffleNet's channel shuffle)
//     -> Gather(x, constant indices, axis), which a channels-last region can carry;
//   - a chain of Gathers (constant 1-D indices), Transposes and Reshapes that all keep the last
//     axis (at least two nodes, one a Gather: Swin's roll + window partition, the window
//     reverse + roll back) moves whole rows: one Gather of x's rows [R, C] by a constant row
//     table, between two Reshapes (one copy instead of three);
//   - Concat {axis a} of Slices of one x along axis a alone (each read only there; constant
//     bounds, any step): one Gather(x, the slices' indices one after another, axis a). torch's
//     roll exports as two Slices and a Concat per axis (Swin's shifted windows: 6 copies per
//     roll over two axes, 2 Gathers after this), patch merging's strided Slices likewise;
//   - a Conv (static input dims) whose outer kernel taps read only padding at every output position
//     (DeepLabV3's ASPP, dilation 24/36 on 20x20) -> the Conv on the live taps' weights, pads
//     reduced to match: same shape and values, fewer taps (often a 1x1 conv);
//   - an Expand(y, s) operand of a broadcasting elementwise op (Add, Mul, Where,
//   ...) → y, where the op's output shape stays the same: the op broadcasts y
//   itself, and no full-size copy is made.
// Refuses (with a note for the Mul/Div fold, which users ask about):
//   - rewrites whose inner node has other readers or is a graph output (work
//   would be
//     duplicated, or an output changed);
//   - a scale that is not constant, not float, of another dtype than the
//   weights, or that
//     broadcasts beyond one channel/column (it would change the output shape or
//     mix channels);
//   - weights or biases that are not constants, MatMul weights of rank != 2;
//   - folded constants larger than PassOptions::fold_size_limit_bytes.
// Reassociation changes results only by float rounding; integer wrap-around is
// associative.
#include <algorithm>
#include <numeric>
#include <set>

#include "ir/ops/tensor_shared.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

constexpr const char *kName = "simplify_algebra";

bool is_op(const ir::Node *n, const char *op) {
  return n && n->domain().empty() && n->op_type() == op;
}

void absorb(ir::Node &into, const ir::Node &from) {
  if (into.origins().empty())
    into.add_origin(into.name());
  into.absorb_origins(from);
}

// Adds `op_type(inputs)` producing a value shaped like `like`, takes over
// `like`'s readers.
Status replace_with_node(ir::Graph &g, ir::Node *old,
                         const std::string &op_type,
                         const std::vector<ir::Value *> &inputs) {
  ir::Value *like = old->output(0);
  ir::Value *out = g.add_value(unique_value_name(g, like->name()),
                               like->dtype(), like->shape());
  ir::Node *n = g.add_node(op_type, inputs, {out}, {}, old->name());
  absorb(*n, *old);
  INGOT_RETURN_IF_ERROR(replace_value(g, like, out));
  return g.remove_node(old);
}

std::optional<std::vector<int64_t>> perm_of(const ir::Node &t, size_t rank) {
  std::vector<int64_t> p = t.attrs().get_ints("perm");
  if (p.empty()) {
    p.resize(rank);
    for (size_t i = 0; i < rank; ++i)
      p[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (p.size() != rank)
    return std::nullopt;
  return p;
}

Result<bool> merge_transposes(ir::Graph &g, ir::Node *n) {
  ir::Node *p = n->input(0) ? n->input(0)->producer() : nullptr;
  if (!is_op(p, "Transpose") || !p->input(0) ||
      !p->input(0)->shape().rank_known())
    return false;
  size_t r = p->input(0)->shape().rank();
  auto p1 = perm_of(*p, r), p2 = perm_of(*n, r);
  if (!p1 || !p2)
    return false;
  std::vector<int64_t> c(r);
  bool identity = true;
  for (size_t j = 0; j < r; ++j) {
    if ((*p2)[j] < 0 || (*p2)[j] >= static_cast<int64_t>(r))
      return false;
    c[j] = (*p1)[static_cast<size_t>((*p2)[j])];
    identity &= c[j] == static_cast<int64_t>(j);
  }
  ir::Value *x = p->input(0);
  if (identity) {
    if (!can_replace_value(g, n->output(0), x))
      return false;
    INGOT_RETURN_IF_ERROR(replace_value(g, n->output(0), x));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;
  }
  n->set_input(0, x);
  n->mutable_attrs().set_ints("perm", c);
  absorb(*n, *p);
  return true;
}

Result<bool> merge_reshapes(ir::Graph &g, ir::Node *n) {
  ir::Node *p = n->input(0) ? n->input(0)->producer() : nullptr;
  if (!is_op(p, "Reshape") || !p->input(0))
    return false;
  auto s2 = constant_ints(n->input(1));
  if (!s2)
    return false;
  if (n->attrs().get_int("allowzero", 0) == 0)
    for (int64_t d : *s2)
      if (d == 0)
        return false;
  n->set_input(0, p->input(0));
  absorb(*n, *p);
  return true;
}

// A chain of Transposes and Reshapes whose end is only a permutation of the chain start's input
// dims: x -> Transpose -> Reshape [B*H,S,D] -> Transpose -> Reshape [B,H,D,S] -> Transpose is
// one Transpose of x (exporters spell K^T this way; the attention rewrite then transposes it
// back). The tensor at each link is tracked as Reshape(Transpose(src, P), group sizes): each dim
// is a group of src axes, a Transpose permutes groups, a Reshape regroups the same axis
// sequence and fails when it would split a src axis. Dims may be symbolic: a named dim matches
// one axis of the same name, and one dim of unknown size takes the axes its neighbours leave
// (as with an open batch: [batch,S,H,D] -> [?, S, D]).
struct ViewGroups {
  std::vector<ir::Dim> src_dims;
  std::vector<std::vector<int>> groups;  // per current dim, the src axes it merges (in order)
};

bool view_dims(const ir::Value *v, std::vector<ir::Dim> *out) {
  if (!v || !v->shape().rank_known())
    return false;
  out->clear();
  for (size_t i = 0; i < v->shape().rank(); ++i)
    out->push_back(v->shape()[i]);
  return true;
}

bool unit_axis(const ViewGroups &vg, int a) {
  const ir::Dim &d = vg.src_dims[static_cast<size_t>(a)];
  return d.is_known() && d.value() == 1;
}

// Takes from seq (at *k, stepping by `step`) the axes of one output dim `want`; false when they
// do not make exactly that dim.
bool take_group(const ViewGroups &vg, const std::vector<int> &seq, const ir::Dim &want, int step, int *k,
                std::vector<int> *group) {
  const int n = static_cast<int>(seq.size());
  auto in_range = [&](int i) { return i >= 0 && i < n; };
  if (want.is_symbol()) {  // exactly one axis with that name (unit axes around it stay for unit dims)
    if (!in_range(*k) || !(vg.src_dims[static_cast<size_t>(seq[*k])] == want))
      return false;
    group->push_back(seq[*k]);
    *k += step;
    return true;
  }
  if (!want.is_known())
    return false;
  int64_t prod = 1;
  while (in_range(*k) && (prod < want.value() || (want.value() == 1 && group->empty() && unit_axis(vg, seq[*k])))) {
    const ir::Dim &d = vg.src_dims[static_cast<size_t>(seq[*k])];
    if (!d.is_known())
      return false;
    prod *= d.value();
    group->push_back(seq[*k]);
    *k += step;
  }
  return prod == want.value();
}

// A Transpose's permutation of the current dims' groups (apply_view, apply_atom_view).
bool permute_groups(const ir::Node &n, std::vector<std::vector<int>> *groups) {
  auto p = perm_of(n, groups->size());
  if (!p)
    return false;
  std::vector<std::vector<int>> g;
  for (int64_t a : *p) {
    if (a < 0 || a >= static_cast<int64_t>(groups->size()))
      return false;
    g.push_back((*groups)[static_cast<size_t>(a)]);
  }
  *groups = std::move(g);
  return true;
}

// A Reshape to `out` over the axis sequence `seq`: dims before the one of unknown size from the
// front, those after it from the back (take(want, step, &k, &group) takes one dim's axes at k),
// that one takes the rest; without one, leftover unit axes join the last dim.
template <class Take, class Unit>
bool regroup(const std::vector<ir::Dim> &out, std::vector<int> &seq, Take take, Unit unit,
             std::vector<std::vector<int>> *groups) {
  int unknown = -1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (out[j].is_known() || out[j].is_symbol())
      continue;
    if (unknown >= 0)
      return false;
    unknown = static_cast<int>(j);
  }
  const int m = static_cast<int>(out.size());
  std::vector<std::vector<int>> g(out.size());
  int k = 0;
  for (int j = 0; j < (unknown >= 0 ? unknown : m); ++j)
    if (!take(out[static_cast<size_t>(j)], 1, &k, &g[static_cast<size_t>(j)]))
      return false;
  if (unknown < 0) {
    for (; k < static_cast<int>(seq.size()); ++k) {
      if (!unit(seq[static_cast<size_t>(k)]) || g.empty())
        return false;
      g.back().push_back(seq[static_cast<size_t>(k)]);
    }
  } else {
    int back = static_cast<int>(seq.size()) - 1;
    for (int j = m - 1; j > unknown; --j) {
      std::vector<int> rev;
      if (!take(out[static_cast<size_t>(j)], -1, &back, &rev))
        return false;
      g[static_cast<size_t>(j)].assign(rev.rbegin(), rev.rend());
    }
    if (back < k - 1)
      return false;
    for (int i = k; i <= back; ++i)
      g[static_cast<size_t>(unknown)].push_back(seq[static_cast<size_t>(i)]);
    if (g[static_cast<size_t>(unknown)].empty())
      return false;  // an unknown dim of size 1 cannot be told apart
  }
  *groups = std::move(g);
  return true;
}

bool apply_view(const ir::Node &n, ViewGroups *vg) {
  std::vector<ir::Dim> out;
  if (!view_dims(n.output(0), &out))
    return false;
  if (is_op(&n, "Transpose"))
    return permute_groups(n, &vg->groups);
  // Reshape: the same axis sequence, regrouped to the output dims.
  std::vector<int> seq;
  for (const auto &g : vg->groups)
    seq.insert(seq.end(), g.begin(), g.end());
  auto take = [&](const ir::Dim &want, int step, int *k, std::vector<int> *group) {
    return take_group(*vg, seq, want, step, k, group);
  };
  return regroup(out, seq, take, [&](int a) { return unit_axis(*vg, a); }, &vg->groups);
}

bool all_single(const ViewGroups &vg) {
  for (const auto &grp : vg.groups)
    if (grp.size() != 1)
      return false;
  return true;
}

// The end of a view chain as Reshape(src) when its non-unit src axes stay in order.
Result<bool> chain_to_reshape(ir::Graph &g, ir::Node *n, ir::Value *src, const ViewGroups &vg,
                              const std::vector<ir::Node *> &chain, size_t start) {
  int last = -1;
  for (const auto &grp : vg.groups)
    for (int a : grp) {
      if (unit_axis(vg, a))
        continue;
      if (a < last)
        return false;
      last = a;
    }
  ir::Value *like = n->output(0);
  std::vector<ir::Dim> out;
  if (!view_dims(like, &out))
    return false;
  std::vector<int64_t> dims;
  for (const ir::Dim &d : out) {
    if (!d.is_known())
      return false;
    dims.push_back(d.value());
  }
  if (chain.size() - start == 1 && is_op(n, "Reshape"))
    return false;  // already one Reshape
  ir::Value *shape = make_int64s(g, like->name() + ".shape", dims);
  ir::Value *out_v = g.add_value(unique_value_name(g, like->name()), like->dtype(), like->shape());
  ir::Node *r = g.add_node("Reshape", {src, shape}, {out_v}, {}, n->name());
  for (size_t i = start; i < chain.size(); ++i)
    absorb(*r, *chain[i]);
  if (!can_replace_value(g, like, out_v)) {
    INGOT_RETURN_IF_ERROR(g.remove_node(r));
    return false;
  }
  INGOT_RETURN_IF_ERROR(replace_value(g, like, out_v));
  INGOT_RETURN_IF_ERROR(g.remove_node(n));
  return true;
}

Result<bool> fold_view_chain(ir::Graph &g, ir::Node *n) {
  std::vector<ir::Node *> chain = {n};
  while (chain.size() < 16) {
    ir::Node *p = chain.back()->input(0) ? chain.back()->input(0)->producer() : nullptr;
    if (!(is_op(p, "Transpose") || is_op(p, "Reshape")) || !p->input(0))
      break;
    chain.push_back(p);
  }
  std::reverse(chain.begin(), chain.end());  // chain.back() == n
  for (size_t start = 0; start + 1 < chain.size(); ++start) {
    ir::Value *src = chain[start]->input(0);
    ViewGroups vg;
    if (!view_dims(src, &vg.src_dims))
      continue;
    for (size_t a = 0; a < vg.src_dims.size(); ++a)
      vg.groups.push_back({static_cast<int>(a)});
    bool ok = true;
    for (size_t i = start; ok && i < chain.size(); ++i)
      ok = apply_view(*chain[i], &vg);
    if (!ok)
      continue;
    if (vg.groups.size() != vg.src_dims.size() || !all_single(vg)) {
      // Not a permutation: still one Reshape of src when the chain keeps the order of every
      // axis that is not 1 (a channels-last 1-D conv's [N,1,W,C] back to [N,C,1,W], squeezed to
      // [N,C,W], permuted to [N,W,C] is [N,1,W,C] reshaped). Static output dims only.
      INGOT_ASSIGN_OR_RETURN(bool done, chain_to_reshape(g, n, src, vg, chain, start));
      if (done)
        return true;
      continue;
    }
    std::vector<int64_t> perm;
    bool identity = true;
    for (size_t j = 0; j < vg.groups.size() && ok; ++j) {
      ok = vg.groups[j].size() == 1;
      if (ok) {
        perm.push_back(vg.groups[j][0]);
        identity &= vg.groups[j][0] == static_cast<int>(j);
      }
    }
    if (!ok)
      continue;
    if (identity) {
      if (!can_replace_value(g, n->output(0), src))
        return false;
      INGOT_RETURN_IF_ERROR(replace_value(g, n->output(0), src));
      INGOT_RETURN_IF_ERROR(g.remove_node(n));
      return true;
    }
    ir::Value *like = n->output(0);
    ir::Value *out = g.add_value(unique_value_name(g, like->name()), like->dtype(), like->shape());
    ir::Attributes attrs;
    attrs.set_ints("perm", perm);
    ir::Node *t = g.add_node("Transpose", {src}, {out}, attrs, n->name());
    for (size_t i = start; i < chain.size(); ++i)
      absorb(*t, *chain[i]);
    INGOT_RETURN_IF_ERROR(replace_value(g, like, out));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;
  }
  return false;
}

// A chain of Transposes and Reshapes that splits and merges axes (MaxViT's window and grid
// partitions: [B,G,P*P,C] -> [B,h,w,P,P,C] -> Transpose -> [B,C,H,W] -> [B,C,h',P',w',P'] ->
// Transpose -> [B,G',P'*P',C] -> Transpose) is one copy: Reshape(src, atoms) -> Transpose ->
// Reshape. The tensor at each link is tracked over "atoms", factors of src's dims: a Reshape
// that cuts inside an atom splits it into two (an atom is contiguous both in src's order and in
// the current one, so its outer factor comes first in both); a Transpose permutes the current
// dims' groups of atoms. Static sizes, except atoms that are never split or merged with a
// known one may be one symbolic dim (a dynamic batch, spelled -1 in the new Reshapes). Applied
// at a chain's end, where the chain holds at least two Transposes, each link read only by the
// next (the copies then become one).
struct AtomView {
  std::vector<ir::Dim> size;             // per atom id
  std::vector<int> src_order;            // atom ids in src's element order
  std::vector<std::vector<int>> groups;  // per current dim, its atoms in the current order
  bool unit(int atom) const {
    const ir::Dim &d = size[static_cast<size_t>(atom)];
    return d.is_known() && d.value() == 1;
  }
};

// Splits atom `a` (known size) into an outer factor `outer` and the inner rest, everywhere it
// appears (src order, seq); returns the two new ids.
std::pair<int, int> split_atom(AtomView &v, std::vector<int> &seq, int a, int64_t outer) {
  const int64_t s = v.size[static_cast<size_t>(a)].value();
  const int a1 = static_cast<int>(v.size.size()), a2 = a1 + 1;
  v.size.push_back(ir::Dim(outer));
  v.size.push_back(ir::Dim(s / outer));
  auto replace_in = [&](std::vector<int> &list) {
    auto it = std::find(list.begin(), list.end(), a);
    if (it == list.end())
      return;
    *it = a2;
    list.insert(it, a1);
  };
  replace_in(v.src_order);
  replace_in(seq);
  return {a1, a2};
}

// Takes the atoms of one output dim `want` from seq at *k (step +1 from the front, -1 from the
// back), splitting the last atom when it straddles the dim's edge.
bool take_atoms(AtomView &v, std::vector<int> &seq, const ir::Dim &want, int step, int *k, std::vector<int> *group) {
  auto in_range = [&](int i) { return i >= 0 && i < static_cast<int>(seq.size()); };
  auto unit = [&](int atom) { return v.unit(atom); };
  if (want.is_symbol()) {
    if (!in_range(*k) || !(v.size[static_cast<size_t>(seq[static_cast<size_t>(*k)])] == want))
      return false;
    group->push_back(seq[static_cast<size_t>(*k)]);
    *k += step;
    return true;
  }
  if (!want.is_known() || want.value() < 1)
    return false;
  int64_t prod = 1;
  while (in_range(*k) &&
         (prod < want.value() || (want.value() == 1 && group->empty() && unit(seq[static_cast<size_t>(*k)])))) {
    const int atom = seq[static_cast<size_t>(*k)];
    const ir::Dim &d = v.size[static_cast<size_t>(atom)];
    if (!d.is_known())
      return false;
    if (prod * d.value() > want.value()) {  // straddles: split off what this dim needs
      const int64_t need = want.value() / prod;
      if (want.value() % prod != 0 || d.value() % need != 0)
        return false;
      // From the front this dim takes the outer factor; from the back, the inner one.
      const int64_t outer = step > 0 ? need : d.value() / need;
      const auto [a1, a2] = split_atom(v, seq, atom, outer);
      if (step > 0) {
        group->push_back(a1);
        *k += 1;  // at a2 now
      } else {
        group->push_back(a2);  // seq[*k] is a1 now; it stays for the next dim
      }
      prod = want.value();
      break;
    }
    group->push_back(atom);
    prod *= d.value();
    *k += step;
  }
  return prod == want.value();
}

bool apply_atom_view(const ir::Node &n, AtomView *v) {
  std::vector<ir::Dim> out;
  if (!view_dims(n.output(0), &out))
    return false;
  if (is_op(&n, "Transpose"))
    return permute_groups(n, &v->groups);
  std::vector<int> seq;
  for (const auto &grp : v->groups)
    seq.insert(seq.end(), grp.begin(), grp.end());
  auto take = [&](const ir::Dim &want, int step, int *k, std::vector<int> *group) {
    return take_atoms(*v, seq, want, step, k, group);
  };
  return regroup(out, seq, take, [&](int a) { return v->unit(a); }, &v->groups);
}

// A Reshape target for `dims`: known sizes, and -1 for at most one other; nullopt otherwise.
std::optional<std::vector<int64_t>> reshape_target(const std::vector<ir::Dim> &dims) {
  std::vector<int64_t> t;
  bool open = false;
  for (const ir::Dim &d : dims) {
    if (d.is_known()) {
      t.push_back(d.value());
    } else {
      if (open)
        return std::nullopt;
      open = true;
      t.push_back(-1);
    }
  }
  return t;
}

Result<bool> fold_split_view_chain(ir::Graph &g, ir::Node *n) {
  auto is_view = [](const ir::Node *p) { return is_op(p, "Transpose") || is_op(p, "Reshape"); };
  // Only at the chain's end: its output is not read by one more view alone.
  ir::Node *next = single_consumer(g, n->output(0));
  if (next && is_view(next) && next->input(0) == n->output(0) && !is_graph_output(g, n->output(0)))
    return false;
  std::vector<ir::Node *> chain = {n};
  while (chain.size() < 16) {
    ir::Value *in = chain.back()->input(0);
    ir::Node *p = in ? in->producer() : nullptr;
    if (!is_view(p) || !p->input(0) || !has_single_consumer(g, in) || is_graph_output(g, in))
      break;
    chain.push_back(p);
  }
  std::reverse(chain.begin(), chain.end());
  for (size_t start = 0; start + 2 < chain.size(); ++start) {
    int transposes = 0;
    for (size_t i = start; i < chain.size(); ++i)
      transposes += is_op(chain[i], "Transpose");
    if (transposes < 2)
      break;  // later starts hold fewer
    ir::Value *src = chain[start]->input(0);
    AtomView v;
    if (!view_dims(src, &v.size))
      continue;
    for (size_t a = 0; a < v.size.size(); ++a) {
      v.src_order.push_back(static_cast<int>(a));
      v.groups.push_back({static_cast<int>(a)});
    }
    bool ok = true;
    for (size_t i = start; ok && i < chain.size(); ++i)
      ok = apply_atom_view(*chain[i], &v);
    if (!ok)
      continue;
    // The current order without unit atoms, cut into runs that are consecutive in src too.
    auto unit = [&](int a) { return v.unit(a); };
    std::vector<int> src_seq, cur_seq;
    for (int a : v.src_order)
      if (!unit(a))
        src_seq.push_back(a);
    for (const auto &grp : v.groups)
      for (int a : grp)
        if (!unit(a))
          cur_seq.push_back(a);
    std::vector<int> src_pos(v.size.size(), -1);
    for (size_t i = 0; i < src_seq.size(); ++i)
      src_pos[static_cast<size_t>(src_seq[i])] = static_cast<int>(i);
    std::vector<std::vector<int>> runs;  // in the current order
    for (int a : cur_seq) {
      if (!runs.empty() && src_pos[static_cast<size_t>(runs.back().back())] + 1 == src_pos[static_cast<size_t>(a)])
        runs.back().push_back(a);
      else
        runs.push_back({a});
    }
    auto run_dim = [&](const std::vector<int> &run) {
      if (run.size() == 1)
        return v.size[static_cast<size_t>(run[0])];
      int64_t prod = 1;
      for (int a : run) {
        if (!v.size[static_cast<size_t>(a)].is_known())
          return ir::Dim();
        prod *= v.size[static_cast<size_t>(a)].value();
      }
      return ir::Dim(prod);
    };
    // The runs in src's order, and the permutation that takes them to the current order.
    std::vector<size_t> by_src(runs.size());
    std::iota(by_src.begin(), by_src.end(), size_t{0});
    std::sort(by_src.begin(), by_src.end(), [&](size_t x, size_t y) {
      return src_pos[static_cast<size_t>(runs[x][0])] < src_pos[static_cast<size_t>(runs[y][0])];
    });
    std::vector<int64_t> perm(runs.size());
    std::vector<ir::Dim> src_dims, cur_dims;
    for (size_t i = 0; i < by_src.size(); ++i) {
      perm[by_src[i]] = static_cast<int64_t>(i);
      src_dims.push_back(run_dim(runs[by_src[i]]));
    }
    for (const auto &run : runs)
      cur_dims.push_back(run_dim(run));
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == static_cast<int64_t>(i);
    if (!identity && perm.size() > 8)
      continue;  // the Transpose kernels' rank limit
    std::vector<ir::Dim> out_dims;
    if (!view_dims(n->output(0), &out_dims))
      continue;
    auto first_target = reshape_target(src_dims), last_target = reshape_target(out_dims);
    if (!first_target || !last_target)
      continue;
    ir::Value *like = n->output(0);
    const std::string base = n->name().empty() ? like->name() : n->name();
    ir::Value *x = src;
    std::vector<ir::Node *> added;
    if (!identity) {
      ir::Value *shape = make_initializer(
          g, base + "/atoms_shape",
          Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(first_target->size())}, *first_target));
      ir::Value *xs = g.add_value(unique_value_name(g, base + ".atoms"), like->dtype(), ir::Shape(src_dims));
      added.push_back(g.add_node("Reshape", {x, shape}, {xs}, {}, base + "/atoms"));
      ir::Value *xt = g.add_value(unique_value_name(g, base + ".permuted"), like->dtype(), ir::Shape(cur_dims));
      ir::Attributes attrs;
      attrs.set_ints("perm", perm);
      added.push_back(g.add_node("Transpose", {xs}, {xt}, attrs, base));
      x = xt;
    }
    ir::Value *shape = make_initializer(
        g, base + "/out_shape",
        Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(last_target->size())}, *last_target));
    ir::Value *out = g.add_value(unique_value_name(g, like->name()), like->dtype(), like->shape());
    added.push_back(g.add_node("Reshape", {x, shape}, {out}, {}, base + "/out"));
    for (ir::Node *a : added)
      for (size_t i = start; i < chain.size(); ++i)
        absorb(*a, *chain[i]);
    if (!can_replace_value(g, like, out)) {
      for (auto it = added.rbegin(); it != added.rend(); ++it)
        INGOT_RETURN_IF_ERROR(g.remove_node(*it));
      return false;
    }
    INGOT_RETURN_IF_ERROR(replace_value(g, like, out));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;  // the chain's other nodes go as dead nodes
  }
  return false;
}

// y = sx*x + k*c for an Add/Sub node with exactly one constant input.
struct SignedTerm {
  ir::Value *x = nullptr;
  int sx = 1, kc = 1;
  Tensor c;
};

std::optional<SignedTerm> split_add_sub(const ir::Node *n) {
  if (!(is_op(n, "Add") || is_op(n, "Sub")) || n->inputs().size() != 2)
    return std::nullopt;
  auto c0 = constant_value(n->input(0)), c1 = constant_value(n->input(1));
  if (c0.has_value() == c1.has_value())
    return std::nullopt;
  SignedTerm t;
  bool sub = n->op_type() == "Sub";
  if (c1) {
    t.x = n->input(0);
    t.c = *c1;
    t.kc = sub ? -1 : 1;
  } else {
    t.x = n->input(1);
    t.c = *c0;
    t.sx = sub ? -1 : 1;
  }
  return t;
}

Result<bool> merge_add_sub_chain(ir::Graph &g, ir::Node *n, PassContext &ctx) {
  auto outer = split_add_sub(n);
  if (!outer)
    return false;
  ir::Node *p = outer->x->producer();
  auto inner = split_add_sub(p);
  if (!inner || !has_single_consumer(g, outer->x))
    return false;
  if (inner->c.dtype() != outer->c.dtype())
    return false;
  // n = so*(si*x + ki*a) + ko*b = (so*si)*x + (so*ki)*a + ko*b
  int sx = outer->sx * inner->sx, ka = outer->sx * inner->kc, kb = outer->kc;
  std::string op = "Add";
  std::vector<Tensor> args = {inner->c, outer->c};
  int kc = 1;
  if (ka == 1 && kb == -1)
    op = "Sub";
  else if (ka == -1 && kb == 1) {
    op = "Sub";
    args = {outer->c, inner->c};
  } else if (ka == -1 && kb == -1)
    kc = -1;
  if (sx == -1 && kc == -1)
    return false; // -x - c needs a Neg; not worth a new op here
  auto c = eval_op(op, args, {}, &g);
  if (!c.ok())
    return false;
  if ((*c)[0].nbytes() > ctx.options().fold_size_limit_bytes)
    return false;
  ir::Value *cv = make_initializer(
      g, n->name().empty() ? "merged_const" : n->name() + "_const", (*c)[0]);
  ir::Node *old_inner = p;
  if (sx == 1)
    INGOT_RETURN_IF_ERROR(
        replace_with_node(g, n, kc == 1 ? "Add" : "Sub", {inner->x, cv}));
  else
    INGOT_RETURN_IF_ERROR(replace_with_node(g, n, "Sub", {cv, inner->x}));
  // The new node absorbed n; also record the inner node, now dead.
  if (ir::Node *nn = g.nodes().back().get())
    absorb(*nn, *old_inner);
  return true;
}

// Mul/Div of a Conv/Gemm/MatMul output by a per-channel/per-column constant.
// The constant operand of a Mul (either side) or Div (the divisor) and its input slot.
struct ConstantScale {
  Tensor s;
  size_t slot = 1;
  bool div = false;
};

std::optional<ConstantScale> constant_scale(const ir::Node *n) {
  const bool div = is_op(n, "Div");
  if (!(div || is_op(n, "Mul")) || n->inputs().size() != 2)
    return std::nullopt;
  if (std::optional<Tensor> s = constant_value(n->input(1)))
    return ConstantScale{*s, 1, div};
  if (div)
    return std::nullopt;
  if (std::optional<Tensor> s = constant_value(n->input(0)))
    return ConstantScale{*s, 0, div};
  return std::nullopt;
}

Result<bool> fold_scale_into_weights(ir::Graph &g, ir::Node *n,
                                     PassContext &ctx) {
  std::optional<ConstantScale> cs = constant_scale(n);
  if (!cs)
    return false;
  const bool div = cs->div;
  const size_t si = cs->slot;
  std::optional<Tensor> s = cs->s;
  ir::Value *y = n->input(1 - si);
  ir::Node *p = y ? y->producer() : nullptr;
  if (!(is_op(p, "Conv") || is_op(p, "Gemm") || is_op(p, "MatMul")) ||
      p->output(0) != y)
    return false;
  auto refuse = [&](const std::string &why) -> Result<bool> {
    ctx.note(kName, "not folding " + n->describe() + " into " + p->describe() +
                        ": " + why);
    return false;
  };
  if (!has_single_consumer(g, y))
    return refuse("its output has other readers");
  if (!is_float(s->dtype()) || s->dtype() != y->dtype())
    return refuse("the scale is not a float of the output's dtype");
  if (!y->shape().rank_known())
    return refuse("the output rank is unknown");
  size_t r = y->shape().rank();
  auto w = constant_value(p->input(1));
  if (!w || w->dtype() != s->dtype())
    return refuse("the weights are not constant");
  bool conv = p->op_type() == "Conv", gemm = p->op_type() == "Gemm";
  bool trans_b = gemm && p->attrs().get_int("transB", 0) != 0;
  if (conv && w->rank() < 3)
    return refuse("unexpected weight rank");
  if (!conv && w->rank() != 2)
    return refuse("weights of rank " + std::to_string(w->rank()) +
                  " (only 2 is folded)");
  int64_t channels = conv ? w->dim(0) : (trans_b ? w->dim(0) : w->dim(1));
  size_t channel_axis = conv ? 1 : r - 1;
  if (s->rank() > r || r == 0 || channel_axis >= r)
    return refuse("the scale would broadcast the output to a larger rank");
  for (size_t i = 0; i < s->rank(); ++i) {
    size_t axis = r - s->rank() + i;
    int64_t d = s->dim(i);
    if (d == 1)
      continue;
    if (axis != channel_axis || d != channels)
      return refuse("the scale is not per output channel");
  }
  Tensor flat = *s->reshaped({s->numel()});
  ir::Value *b = p->input(2);
  std::optional<Tensor> bias;
  if (b) {
    bias = constant_value(b);
    if (!bias || bias->dtype() != s->dtype())
      return refuse("the bias is not constant");
  }
  // The scale shaped to broadcast over the weights' output-channel axis.
  Shape64 ws(w->rank(), 1);
  size_t w_axis = conv ? 0 : (trans_b ? 0 : 1);
  ws[w_axis] = flat.numel();
  const char *op = div ? "Div" : "Mul";
  auto new_w = eval_op(op, {*w, *flat.reshaped(ws)}, {}, &g);
  if (!new_w.ok())
    return refuse(new_w.status().message());
  std::optional<Tensor> new_b;
  if (bias) {
    auto nb = eval_op(op, {*bias, flat}, {}, &g);
    if (!nb.ok())
      return refuse(nb.status().message());
    if ((*nb)[0].nbytes() > ctx.options().fold_size_limit_bytes)
      return refuse("the scaled bias is too large");
    new_b = (*nb)[0];
  }
  if (!can_replace_value(g, n->output(0), y))
    return refuse("the output name cannot be kept");
  p->set_input(
      1, make_initializer(g, p->input(1)->name() + "_scaled", (*new_w)[0]));
  if (new_b)
    p->set_input(2, make_initializer(g, b->name() + "_scaled", *new_b));
  absorb(*p, *n);
  INGOT_RETURN_IF_ERROR(replace_value(g, n->output(0), y));
  INGOT_RETURN_IF_ERROR(g.remove_node(n));
  return true;
}

// Mul/Div(Add(y, b), s) with y made by a Conv/Gemm/MatMul and b, s constants -> Add(Mul/Div(y, s),
// b*s): the scale then folds into the weights (above). Whisper scales q after its biased
// projection (q_proj(x) * d^-0.5): a 26 us Mul per layer at batch 32 before.
Result<bool> scale_through_bias_add(ir::Graph &g, ir::Node *n, PassContext &ctx) {
  std::optional<ConstantScale> cs = constant_scale(n);
  if (!cs)
    return false;
  const bool div = cs->div;
  const size_t si = cs->slot;
  const Tensor *s = &cs->s;
  ir::Value *a = n->input(1 - si);
  ir::Node *add = a ? a->producer() : nullptr;
  if (!is_op(add, "Add") || add->inputs().size() != 2 || !has_single_consumer(g, a))
    return false;
  size_t bi = constant_value(add->input(1)) ? 1 : 0;
  std::optional<Tensor> b = constant_value(add->input(bi));
  ir::Value *y = add->input(1 - bi);
  ir::Node *p = y ? y->producer() : nullptr;
  if (!b || !(is_op(p, "Conv") || is_op(p, "Gemm") || is_op(p, "MatMul")) || !has_single_consumer(g, y) ||
      b->dtype() != s->dtype() || !is_float(s->dtype()))
    return false;
  auto nb = eval_op(div ? "Div" : "Mul", {*b, *s}, {}, &g);
  if (!nb.ok() || (*nb)[0].nbytes() > std::max<size_t>(b->nbytes(), ctx.options().fold_size_limit_bytes))
    return false;
  ir::Value *out = n->output(0);
  ir::Value *scaled = g.add_value(unique_value_name(g, y->name() + "_scaled"), y->dtype(), y->shape());
  ir::Node *m = g.add_node(n->op_type(), {y, n->input(si)}, {scaled}, {}, n->name());
  absorb(*m, *n);
  ir::Value *bias = make_initializer(g, add->input(bi)->name() + "_scaled", (*nb)[0]);
  ir::Value *sum = g.add_value(unique_value_name(g, out->name() + "_biased"), out->dtype(), out->shape());
  ir::Node *na = g.add_node("Add", {scaled, bias}, {sum}, {}, add->name());
  absorb(*na, *add);
  if (!can_replace_value(g, out, sum)) {
    INGOT_RETURN_IF_ERROR(g.remove_node(na));
    INGOT_RETURN_IF_ERROR(g.remove_node(m));
    return false;
  }
  INGOT_RETURN_IF_ERROR(replace_value(g, out, sum));
  INGOT_RETURN_IF_ERROR(g.remove_node(n));
  INGOT_RETURN_IF_ERROR(g.remove_node(add));
  return true;
}

// Replaces Gather `n` (of table w, axis 0) by Expand(Gather(w, c), shape): the rows of the few
// indices c, broadcast to n's output; rows_dims are c's dims (known or not) then w's trailing dims.
Status expand_gathered_rows(ir::Graph &g, ir::Node *n, ir::Value *w, ir::Value *c,
                            std::vector<ir::Dim> rows_dims, ir::Value *shape) {
  ir::Value *rows = g.add_value(
      unique_value_name(g, n->output(0)->name() + "/rows"), w->dtype(),
      ir::Shape(std::move(rows_dims)));
  g.add_node("Gather", {w, c}, {rows}, {}, n->name() + "/rows");
  return replace_with_node(g, n, "Expand", {rows, shape});
}

// Gather(W, Expand(c, s)) -> Expand(Gather(W, c), Concat(s, W.shape[1:])), W and c constant,
// axis 0. Expand's output is broadcast(c.shape, s); the rows Gather(W, c) have c.shape + W's
// trailing dims, which broadcast against s + the same trailing dims to the original shape.
Result<bool> gather_through_expand(ir::Graph &g, ir::Node *n) {
  ir::Value *w = n->input(0), *idx = n->input(1);
  if (!w || !idx || !w->initializer() || n->attrs().get_int("axis", 0) != 0)
    return false;
  ir::Node *e = idx->producer();
  if (!is_op(e, "Expand") || !e->input(0) || !e->input(1))
    return false;
  ir::Value *c = e->input(0), *s = e->input(1);
  if (!constant_value(c) || !w->shape().is_concrete() || w->shape().rank() < 1 ||
      !c->shape().rank_known() || !s->shape().rank_known() ||
      s->shape().rank() != 1 || !n->output(0)->shape().rank_known())
    return false;
  const Shape64 wd = w->shape().concrete();
  std::vector<ir::Dim> rows_dims = c->shape().dims();
  std::vector<int64_t> tail(wd.begin() + 1, wd.end());
  for (int64_t d : tail)
    rows_dims.push_back(d);
  ir::Value *tail_v = g.add_initializer(
      unique_value_name(g, n->name() + "/row_dims"),
      Tensor::from_vector(DataType::kInt64,
                          {static_cast<int64_t>(tail.size())}, tail));
  const ir::Dim s_len = s->shape()[0];
  ir::Value *shape2 = g.add_value(
      unique_value_name(g, n->name() + "/expand_shape"), DataType::kInt64,
      ir::Shape({s_len.is_known()
                     ? ir::Dim(s_len.value() + static_cast<int64_t>(tail.size()))
                     : ir::Dim::unknown()}));
  ir::Attributes axis0;
  axis0.set_int("axis", 0);
  g.add_node("Concat", {s, tail_v}, {shape2}, std::move(axis0),
             n->name() + "/expand_shape");
  INGOT_RETURN_IF_ERROR(expand_gathered_rows(g, n, w, c, std::move(rows_dims), shape2));
  return true;
}

// Gather(W, C), W and C constant, axis 0, C repeating itself along some axes (an index
// tensor that an Expand made, folded for a fixed batch) -> Expand(Gather(W, C'), shape), C'
// holding one slice along each such axis: the inner Gather folds to C''s few rows.
Result<bool> gather_of_repeating_constant(ir::Graph &g, ir::Node *n) {
  ir::Value *w = n->input(0), *idx = n->input(1);
  if (!w || !idx || !w->initializer() || n->attrs().get_int("axis", 0) != 0 ||
      !w->shape().is_concrete() || w->shape().rank() < 1 ||
      !idx->shape().is_concrete() || idx->shape().rank() < 1)
    return false;
  const Shape64 d = idx->shape().concrete();
  if (shape_numel(d) < 2 || shape_numel(d) > (1 << 20))
    return false;
  std::optional<Tensor> t = constant_value(idx);
  if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32))
    return false;
  // An axis repeats when every element of C equals its slice-0 twin.
  const Shape64 stride = shape_strides(d);
  Shape64 small = d;
  for (size_t a = 0; a < d.size(); ++a) {
    if (d[a] < 2)
      continue;
    bool repeats = true;
    for (int64_t i = 0; i < t->numel() && repeats; ++i) {
      const int64_t k = (i / stride[a]) % d[a];
      repeats = k == 0 || t->get_i64(i) == t->get_i64(i - k * stride[a]);
    }
    if (repeats)
      small[a] = 1;
  }
  if (small == d)
    return false;
  Tensor reduced = Tensor::zeros(t->dtype(), small).value();
  const Shape64 small_stride = shape_strides(small);
  for (int64_t j = 0; j < reduced.numel(); ++j) {
    int64_t src = 0;  // the same multi-index in C (every reduced axis at 0)
    for (size_t a = 0; a < small.size(); ++a)
      src += ((j / small_stride[a]) % small[a]) * stride[a];
    reduced.set_i64(j, t->get_i64(src));
  }
  const Shape64 wd = w->shape().concrete();
  Shape64 rows_dims = small, out_dims = d;
  for (size_t a = 1; a < wd.size(); ++a) {
    rows_dims.push_back(wd[a]);
    out_dims.push_back(wd[a]);
  }
  ir::Value *c = g.add_initializer(unique_value_name(g, idx->name() + "/slice"), reduced);
  ir::Value *shape = g.add_initializer(
      unique_value_name(g, n->name() + "/expand_shape"),
      Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(out_dims.size())}, out_dims));
  INGOT_RETURN_IF_ERROR(
      expand_gathered_rows(g, n, w, c, ir::Shape::from_concrete(rows_dims).dims(), shape));
  return true;
}

// GatherND(X, I) with a constant I that lists every element of X in row-major order (batch_dims
// 0, full-rank index tuples) -> Reshape(X, I.shape[:-1]): the dynamo export of BERT's
// attention_mask[:, None, None, :] builds such an I (Range, Expand, Concat, folded for a fixed
// batch), and the Reshape is free where the GatherND was a copy kernel.
Result<bool> gather_nd_identity(ir::Graph &g, ir::Node *n) {
  ir::Value *x = n->input(0), *idx = n->input(1);
  if (!x || !idx || n->attrs().get_int("batch_dims", 0) != 0 || !x->shape().is_concrete() ||
      !idx->shape().is_concrete() || idx->shape().rank() < 1)
    return false;
  const Shape64 xd = x->shape().concrete(), id = idx->shape().concrete();
  const int64_t r = id.back();
  if (r != static_cast<int64_t>(xd.size()) || r == 0 || shape_numel(id) / r != shape_numel(xd) ||
      shape_numel(id) > (1 << 22))
    return false;
  std::optional<Tensor> t = constant_value(idx);
  if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32))
    return false;
  for (int64_t p = 0, total = shape_numel(xd); p < total; ++p) {
    int64_t linear = 0;
    for (int64_t a = 0; a < r; ++a) {
      int64_t v = t->get_i64(p * r + a);
      if (v < 0)
        v += xd[a];  // negative indices count from the end
      if (v < 0 || v >= xd[a])
        return false;
      linear = linear * xd[a] + v;
    }
    if (linear != p)
      return false;
  }
  const Shape64 out(id.begin(), id.end() - 1);
  ir::Value *shape = g.add_initializer(
      unique_value_name(g, n->name() + "/shape"),
      Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(out.size())}, out));
  INGOT_RETURN_IF_ERROR(replace_with_node(g, n, "Reshape", {x, shape}));
  return true;
}

// A Transpose that moves only unit axes (the others keep their order) moves no data: a Reshape
// to its output shape, which the planner runs in place. PyTorch's seq-first attention at batch
// 1 spells [1, S, E] -> [S, 1, E] this way around every layer. Static shapes only.
Result<bool> unit_transpose_to_reshape(ir::Graph &g, ir::Node *n) {
  const ir::Value *x = n->input(0), *y = n->output(0);
  if (!x || !y || !x->shape().is_concrete() || !y->shape().is_concrete())
    return false;
  const Shape64 in = x->shape().concrete(), out = y->shape().concrete();
  auto p = perm_of(*n, in.size());
  if (!p)
    return false;
  int64_t last = -1;
  for (int64_t a : *p) {
    if (a < 0 || a >= static_cast<int64_t>(in.size()))
      return false;
    if (in[static_cast<size_t>(a)] == 1)
      continue;
    if (a < last)
      return false;
    last = a;
  }
  ir::Value *shape = g.add_initializer(
      unique_value_name(g, n->name() + "/shape"),
      Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(out.size())}, out));
  INGOT_RETURN_IF_ERROR(replace_with_node(g, n, "Reshape", {n->input(0), shape}));
  return true;
}

// A Conv whose kernel taps outside [first, last] along a spatial axis read only padding at every
// output position (static input dims; DeepLabV3's ASPP: 3x3 convs with dilation 24 and 36 on a
// 20x20 map, where only the centre tap ever lands inside) -> the same Conv on the weights cropped
// to the live taps, each pad reduced by the taps cut on its side times the dilation: the output
// shape is the same and so are the values (the cut taps only ever multiplied zeros). A kernel
// left one tap wide along an axis takes dilation 1 there.
Result<bool> crop_dead_conv_taps(ir::Graph &g, ir::Node *n) {
  if (n->inputs().size() < 2 || !n->input(0) || !n->input(1) || !n->input(1)->initializer()) return false;
  const ir::Value *x = n->input(0);
  const Tensor &wt = *n->input(1)->initializer();
  if (!x->shape().rank_known() || x->shape().rank() < 3 || !is_float(wt.dtype()) ||
      wt.rank() != x->shape().rank())
    return false;
  const ir::Attributes &at = n->attrs();
  if (at.get_string("auto_pad", "NOTSET") != "NOTSET") return false;
  const size_t sp = x->shape().rank() - 2;
  const std::vector<int64_t> dil = at.get_ints("dilations", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> str = at.get_ints("strides", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> pads = at.get_ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (dil.size() != sp || str.size() != sp || pads.size() != 2 * sp) return false;
  std::vector<int64_t> first(sp), last(sp), new_pads = pads, new_dil = dil;
  bool cut = false;
  for (size_t i = 0; i < sp; ++i) {
    const ir::Dim &hd = x->shape()[2 + i];
    const int64_t k = wt.dim(2 + i), d = dil[i], s = str[i], pb = pads[i], pe = pads[sp + i];
    if (!hd.is_known() || k < 1 || d < 1 || s < 1 || pb < 0 || pe < 0) return false;
    const int64_t h = hd.value();
    const int64_t out = (h + pb + pe - d * (k - 1) - 1) / s + 1;
    if (h < 1 || out < 1) return false;
    first[i] = -1;
    for (int64_t t = 0; t < k; ++t) {
      // The first output position whose input index for tap t is >= 0, and that index.
      const int64_t off = t * d - pb;
      const int64_t o0 = off >= 0 ? 0 : (-off + s - 1) / s;
      if (o0 < out && o0 * s + off < h) {
        if (first[i] < 0) first[i] = t;
        last[i] = t;
      }
    }
    if (first[i] < 0) return false;  // the output is the bias alone: leave it
    new_pads[i] = pb - first[i] * d;
    new_pads[sp + i] = pe - (k - 1 - last[i]) * d;
    if (new_pads[i] < 0 || new_pads[sp + i] < 0) return false;
    if (last[i] == first[i]) new_dil[i] = 1;
    cut = cut || first[i] > 0 || last[i] < k - 1;
  }
  if (!cut) return false;
  Shape64 shape = wt.shape();
  for (size_t i = 0; i < sp; ++i) shape[2 + i] = last[i] - first[i] + 1;
  INGOT_ASSIGN_OR_RETURN(Tensor cropped, Tensor::zeros(wt.dtype(), shape));
  // Copy element by element: index in the cropped tensor -> index in the full one.
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t e = 0; e < cropped.numel(); ++e) {
    int64_t src = 0;
    for (size_t a = 0; a < shape.size(); ++a) src = src * wt.dim(a) + idx[a] + (a >= 2 ? first[a - 2] : 0);
    cropped.set_f64(e, wt.get_f64(src));
    for (size_t a = shape.size(); a-- > 0;)
      if (++idx[a] < shape[a]) break;
      else idx[a] = 0;
  }
  ir::Value *nw = g.add_initializer(unique_value_name(g, n->input(1)->name() + "_live_taps"), std::move(cropped));
  n->set_input(1, nw);
  ir::Attributes &ma = n->mutable_attrs();
  ma.set_ints("pads", new_pads);
  ma.set_ints("dilations", new_dil);
  if (at.has("kernel_shape")) ma.set_ints("kernel_shape", Shape64(shape.begin() + 2, shape.end()));
  return true;
}

// MatMul(x, Transpose(W, [1, 0])) with W a 2-D constant too large to fold (a tied LM head: GPT-2
// reads its [50257, 768] embedding as the output projection) -> Reshape(Gemm {transB = 1}
// (Reshape(x, [M, K]), W), x's leading dims + [N]): the GEMM reads W as stored, nothing
// transposes 77 MB per query, and W's rows stay 16-byte aligned. Static shapes only.
Result<bool> matmul_of_transposed_constant(ir::Graph &g, ir::Node *n) {
  ir::Value *x = n->input(0), *bt = n->input(1), *y = n->output(0);
  ir::Node *t = bt ? bt->producer() : nullptr;
  if (!x || !y || !is_op(t, "Transpose") || !t->input(0) || !constant_value(t->input(0)) ||
      !x->shape().is_concrete() || !y->shape().is_concrete() || x->shape().rank() < 2)
    return false;
  const ir::Value *w = t->input(0);
  if (!w->shape().is_concrete() || w->shape().rank() != 2 || perm_of(*t, 2) != std::vector<int64_t>{1, 0})
    return false;
  const Shape64 xs = x->shape().concrete(), ys = y->shape().concrete(), ws = w->shape().concrete();
  const int64_t k = xs.back(), n_out = ws[0];
  if (ws[1] != k || ys.back() != n_out)
    return false;
  int64_t m = 1;
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    m *= xs[i];
  ir::Value *x2 = x;
  if (xs.size() != 2) {
    ir::Value *s2 = g.add_initializer(unique_value_name(g, n->name() + "/rows"),
                                      Tensor::from_vector(DataType::kInt64, {2}, Shape64{m, k}));
    x2 = g.add_value(unique_value_name(g, x->name() + ".rows"), x->dtype(), ir::Shape{ir::Dim(m), ir::Dim(k)});
    g.add_node("Reshape", {x, s2}, {x2}, {}, n->name() + "/rows");
  }
  ir::Attributes a;
  a.set_int("transB", 1);
  ir::Value *y2 = xs.size() == 2 ? nullptr
                                 : g.add_value(unique_value_name(g, y->name() + ".rows"), y->dtype(),
                                               ir::Shape{ir::Dim(m), ir::Dim(n_out)});
  if (y2 == nullptr) {
    ir::Value *out = g.add_value(unique_value_name(g, y->name()), y->dtype(), y->shape());
    ir::Node *gemm = g.add_node("Gemm", {x2, t->input(0)}, {out}, std::move(a), n->name());
    absorb(*gemm, *n);
    INGOT_RETURN_IF_ERROR(replace_value(g, y, out));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;
  }
  ir::Node *gemm = g.add_node("Gemm", {x2, t->input(0)}, {y2}, std::move(a), n->name());
  absorb(*gemm, *n);
  ir::Value *s3 = g.add_initializer(unique_value_name(g, n->name() + "/shape"),
                                    Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(ys.size())}, ys));
  INGOT_RETURN_IF_ERROR(replace_with_node(g, n, "Reshape", {y2, s3}));
  return true;
}

// Reshape(x [.., K] -> [M, K]) -> Gemm(A, B [K, N], C) -> Reshape([.., N]), as PyTorch's addmm
// exports (GPT-2's Conv1D): MatMul(x, B) [+ Add(C)] on x's own shape (a 2-D A that no Reshape
// made gets one to the output's leading dims, which the planner runs in place), so fuse_conv_gemm can
// take the bias, the activation and the residual that follow the last Reshape into one
// FusedGemm (transB: B^T as a constant Transpose, folded into the weight). Only Gemms without
// transA, with alpha = beta = 1 and C constant per column, with
// static shapes whose leading dims come back unchanged.
Result<bool> gemm_between_reshapes_to_matmul(ir::Graph &g, ir::Node *n, std::set<ir::Node *> *removed) {
  const ir::Attributes &a = n->attrs();
  if (a.get_int("transA", 0) != 0 || a.get_float("alpha", 1.0f) != 1.0f ||
      a.get_float("beta", 1.0f) != 1.0f || n->outputs().size() != 1)
    return false;
  ir::Node *in_rs = n->input(0) ? n->input(0)->producer() : nullptr;
  ir::Node *out_rs = single_consumer(g, n->output(0));
  if (!n->input(0) || !is_op(out_rs, "Reshape") || !n->input(1) || !constant_value(n->input(1)))
    return false;
  if (!is_op(in_rs, "Reshape") || !in_rs->input(0))
    in_rs = nullptr;  // A itself, given the leading dims by a Reshape of our own (an alias)
  ir::Value *x = in_rs ? in_rs->input(0) : n->input(0);
  const ir::Value *y = out_rs->output(0);
  ir::Value *b = n->input(1);
  if (!x->shape().is_concrete() || !y->shape().is_concrete() || !b->shape().is_concrete() ||
      b->shape().rank() != 2 || n->input(0)->shape().rank() != 2)
    return false;
  const bool trans_b = a.get_int("transB", 0) != 0;
  if (trans_b && b->uses().size() != 1)
    return false;  // B^T would not fold (a tied weight): the Gemm reads B as stored instead
  Shape64 bs = b->shape().concrete();
  if (trans_b)
    std::swap(bs[0], bs[1]);
  const Shape64 ys = y->shape().concrete();
  Shape64 xs = x->shape().concrete();
  if (ys.size() < 2 || ys.back() != bs[1])
    return false;
  if (in_rs == nullptr || xs.size() != ys.size() || xs.back() != bs[0] ||
      !std::equal(xs.begin(), xs.end() - 1, ys.begin())) {
    x = n->input(0);  // A itself, [M, K]
    xs = x->shape().concrete();
    if (xs.back() != bs[0] || ys.size() == 2)
      return false;  // nothing to gain: the GEMM is already on the output's shape
    Shape64 want(ys.begin(), ys.end() - 1);
    want.push_back(bs[0]);
    ir::Value *s = g.add_initializer(unique_value_name(g, n->name() + "/lead"),
                                     Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(want.size())}, want));
    std::vector<ir::Dim> dims;
    for (int64_t d : want)
      dims.emplace_back(d);
    ir::Value *x3 = g.add_value(unique_value_name(g, x->name() + ".lead"), x->dtype(), ir::Shape(dims));
    g.add_node("Reshape", {x, s}, {x3}, {}, n->name() + "/lead");
    x = x3;
    in_rs = nullptr;
  }
  ir::Value *c = n->input(2);
  if (c != nullptr) {
    if (!constant_value(c) || !c->shape().is_concrete() || c->shape().concrete().empty() ||
        shape_numel(c->shape().concrete()) != bs[1] || c->shape().concrete().back() != bs[1])
      return false;
  }
  removed->insert(out_rs);  // replaced below; the Gemm and the first Reshape go as dead nodes
  if (trans_b) {  // B^T as a constant Transpose, which fold_constants turns into the weight
    ir::Attributes ta;
    ta.set_ints("perm", {1, 0});
    ir::Value *bt = g.add_value(unique_value_name(g, b->name() + ".t"), b->dtype(),
                                ir::Shape{ir::Dim(bs[0]), ir::Dim(bs[1])});
    g.add_node("Transpose", {b}, {bt}, std::move(ta), n->name() + "/weight_t");
    b = bt;
  }
  ir::Value *mm = c == nullptr ? nullptr
                               : g.add_value(unique_value_name(g, y->name() + ".mm"), y->dtype(), y->shape());
  if (c == nullptr) {
    INGOT_RETURN_IF_ERROR(replace_with_node(g, out_rs, "MatMul", {x, b}));
  } else {
    ir::Node *m = g.add_node("MatMul", {x, b}, {mm}, {}, n->name());
    absorb(*m, *n);
    ir::Value *c1 = c;
    if (c->shape().rank() != 1) {
      std::optional<Tensor> cv = constant_value(c);
      Tensor flat = Tensor::zeros(cv->dtype(), {bs[1]}).value();
      for (int64_t i = 0; i < bs[1]; ++i)
        flat.set_f64(i, cv->get_f64(i));
      c1 = g.add_initializer(unique_value_name(g, n->name() + "/bias"), std::move(flat));
    }
    INGOT_RETURN_IF_ERROR(replace_with_node(g, out_rs, "Add", {mm, c1}));
  }
  return true;
}

// Reshape(MatMul(a, B)) that regroups only the leading dims (the last stays N), B a constant
// [K, N], the MatMul read only by the Reshape -> MatMul(Reshape(a, leading + [K]), B): the Reshape
// of the input is an alias, and what follows (a bias, a residual Add) meets the MatMul directly.
Result<bool> reshape_above_matmul(ir::Graph &g, ir::Node *rs) {
  ir::Node *mm = rs->input(0) ? rs->input(0)->producer() : nullptr;
  if (!is_op(mm, "MatMul") || !has_single_consumer(g, mm->output(0)) || !mm->input(0) || !mm->input(1) ||
      !constant_value(mm->input(1)))
    return false;
  const ir::Value *a = mm->input(0), *b = mm->input(1), *y = rs->output(0);
  if (!a->shape().is_concrete() || !b->shape().is_concrete() || b->shape().rank() != 2 || !y->shape().is_concrete() ||
      a->shape().rank() < 2)
    return false;
  const Shape64 as = a->shape().concrete(), bs = b->shape().concrete(), ys = y->shape().concrete();
  if (ys.size() < 2 || ys.back() != bs[1] || as.back() != bs[0])
    return false;
  Shape64 want(ys.begin(), ys.end() - 1);
  want.push_back(bs[0]);
  std::vector<ir::Dim> dims;
  for (int64_t d : want)
    dims.emplace_back(d);
  ir::Value *s = g.add_initializer(unique_value_name(g, rs->name() + "/lead"),
                                   Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(want.size())}, want));
  ir::Value *a2 = g.add_value(unique_value_name(g, a->name() + ".lead"), a->dtype(), ir::Shape(dims));
  g.add_node("Reshape", {mm->input(0), s}, {a2}, {}, rs->name() + "/lead");
  INGOT_RETURN_IF_ERROR(replace_with_node(g, rs, "MatMul", {a2, mm->input(1)}));
  return true;
}

bool broadcasting_op(const ir::Node *n) {
  static const std::set<std::string> kOps = {
      "Add",  "Sub",     "Mul",  "Div",  "Pow",           "Max",
      "Min",  "Where",   "And",  "Or",   "Xor",           "Equal",
      "Less", "Greater", "Sum",  "Mean", "LessOrEqual",   "GreaterOrEqual"};
  return n && n->domain().empty() && kOps.count(n->op_type()) > 0;
}

// An Expand(y, s) operand of a broadcasting op -> y, where the op's output shape is unchanged.
Result<bool> drop_expanded_operands(ir::Graph &g, ir::Node *n) {
  const ir::Value *out = n->output(0);
  if (!out || !out->shape().rank_known() || n->outputs().size() != 1)
    return false;
  bool changed = false;
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    ir::Value *in = n->input(i);
    ir::Node *e = in ? in->producer() : nullptr;
    if (!is_op(e, "Expand") || !e->input(0) || !e->input(0)->shape().rank_known() ||
        e->input(0)->dtype() != in->dtype())
      continue;
    ir::Shape b = e->input(0)->shape();
    bool ok = true;
    for (size_t j = 0; j < n->inputs().size() && ok; ++j) {
      if (j == i)
        continue;
      const ir::Value *o = n->input(j);
      if (!o || !o->shape().rank_known()) {
        ok = false;
        break;
      }
      Result<ir::Shape> r = ir::broadcast_shapes(b, o->shape());
      ok = r.ok();
      if (ok)
        b = *r;
    }
    if (!ok || !(b == out->shape()))
      continue;
    n->set_input(i, e->input(0));  // the Expand goes as dead once nothing reads it
    changed = true;
  }
  return changed;
}

// Reshape(x, [pre.., f1..fk, ..post]) -> Transpose (pre and post fixed, the f's permuted) ->
// Reshape(x's shape), x's axis a = pre.size() holding f1*..*fk: y[.., j, ..] = x[.., idx[j], ..].
// `n` is the last Reshape. Static shapes only.
Result<bool> axis_shuffle_to_gather(ir::Graph &g, ir::Node *n) {
  ir::Node *t = n->input(0) ? n->input(0)->producer() : nullptr;
  if (!is_op(t, "Transpose") || !has_single_consumer(g, n->input(0)) || !t->input(0))
    return false;
  ir::Node *r = t->input(0)->producer();
  if (!is_op(r, "Reshape") || !has_single_consumer(g, t->input(0)) || !r->input(0))
    return false;
  ir::Value *x = r->input(0);
  const ir::Value *mid = r->output(0), *y = n->output(0);
  if (!x->shape().is_concrete() || !mid->shape().is_concrete() || !y->shape().is_concrete() ||
      !(x->shape() == y->shape()))
    return false;
  const Shape64 xs = x->shape().concrete(), ms = mid->shape().concrete();
  std::optional<std::vector<int64_t>> perm = perm_of(*t, ms.size());
  if (!perm || ms.size() <= xs.size())
    return false;
  // pre: leading dims equal and fixed by perm; post likewise from the end.
  size_t pre = 0;
  while (pre < xs.size() && xs[pre] == ms[pre] && (*perm)[pre] == static_cast<int64_t>(pre))
    ++pre;
  size_t post = 0;
  while (post < xs.size() - pre && xs[xs.size() - 1 - post] == ms[ms.size() - 1 - post] &&
         (*perm)[ms.size() - 1 - post] == static_cast<int64_t>(ms.size() - 1 - post))
    ++post;
  if (pre + post + 1 != xs.size())
    return false;  // more than one axis changed
  const size_t k = ms.size() - pre - post;
  int64_t len = 1;
  for (size_t i = 0; i < k; ++i) {
    const int64_t p = (*perm)[pre + i];
    if (p < static_cast<int64_t>(pre) || p >= static_cast<int64_t>(pre + k))
      return false;
    len *= ms[pre + i];
  }
  if (len != xs[pre] || len > (int64_t{1} << 20))
    return false;
  // Output position j, unraveled over the permuted factors, names the source factors.
  std::vector<int64_t> pdims(k), idx(static_cast<size_t>(len));
  for (size_t i = 0; i < k; ++i)
    pdims[i] = ms[static_cast<size_t>((*perm)[pre + i])];
  for (int64_t j = 0; j < len; ++j) {
    std::vector<int64_t> src(k);
    int64_t rem = j;
    for (size_t i = k; i-- > 0;) {
      src[static_cast<size_t>((*perm)[pre + i]) - pre] = rem % pdims[i];
      rem /= pdims[i];
    }
    int64_t lin = 0;
    for (size_t i = 0; i < k; ++i)
      lin = lin * ms[pre + i] + src[i];
    idx[static_cast<size_t>(j)] = lin;
  }
  ir::Value *iv = g.add_initializer(unique_value_name(g, n->name() + "/indices"),
                                    Tensor::from_vector(DataType::kInt64, {len}, idx));
  ir::Value *like = n->output(0);
  ir::Value *out = g.add_value(unique_value_name(g, like->name()), like->dtype(), like->shape());
  ir::Attributes a;
  a.set_int("axis", static_cast<int64_t>(pre));
  ir::Node *gather = g.add_node("Gather", {x, iv}, {out}, std::move(a), n->name());
  absorb(*gather, *n);
  gather->absorb_origins(*t);
  gather->absorb_origins(*r);
  INGOT_RETURN_IF_ERROR(replace_value(g, like, out));
  INGOT_RETURN_IF_ERROR(g.remove_node(n));
  return true;
}

bool keeps_last_axis(const ir::Node *n) {
  const ir::Value *x = n->input(0), *y = n->output(0);
  if (!x || !y || !x->shape().is_concrete() || !y->shape().is_concrete() || x->shape().rank() < 2 ||
      y->shape().rank() < 2 || n->outputs().size() != 1)
    return false;
  const Shape64 xs = x->shape().concrete(), ys = y->shape().concrete();
  if (xs.back() != ys.back())
    return false;
  const int64_t r = static_cast<int64_t>(xs.size());
  if (is_op(n, "Gather")) {
    std::optional<Tensor> idx = n->input(1) ? constant_value(n->input(1)) : std::nullopt;
    int64_t axis = n->attrs().get_int("axis", 0);
    if (axis < 0)
      axis += r;
    return idx && idx->rank() == 1 && axis >= 0 && axis < r - 1;
  }
  if (is_op(n, "Transpose")) {
    std::optional<std::vector<int64_t>> p = perm_of(*n, xs.size());
    return p && p->back() == r - 1;
  }
  return is_op(n, "Reshape");
}

// Runs `n` (a Gather / Transpose / Reshape keeping the last axis) on the row ids `ids` (x's
// shape with the last dim 1).
Result<Tensor> apply_to_rows(const ir::Graph &g, const ir::Node *n, const Tensor &ids) {
  if (is_op(n, "Reshape")) {
    Shape64 ys = n->output(0)->shape().concrete();
    ys.back() = 1;
    return ids.reshaped(ys);
  }
  std::vector<Tensor> ins = {ids};
  if (is_op(n, "Gather"))
    ins.push_back(*constant_value(n->input(1)));
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> out, eval_op(n->op_type(), ins, n->attrs(), &g));
  return std::move(out[0]);
}

Result<bool> fold_row_permutation(ir::Graph &g, ir::Node *n) {
  if (!keeps_last_axis(n))
    return false;
  // n must end the chain: not read by one more such node alone.
  ir::Node *next = single_consumer(g, n->output(0));
  if (next && next->input(0) == n->output(0) && keeps_last_axis(next))
    return false;
  std::vector<ir::Node *> chain = {n};
  while (chain.size() < 32) {
    ir::Value *in = chain.back()->input(0);
    ir::Node *p = in->producer();
    if (!p || !keeps_last_axis(p) || !has_single_consumer(g, in) || is_graph_output(g, in))
      break;
    chain.push_back(p);
  }
  std::reverse(chain.begin(), chain.end());
  int gathers = 0, copies = 0;
  for (const ir::Node *c : chain) {
    gathers += is_op(c, "Gather");
    copies += !is_op(c, "Reshape");
  }
  ir::Value *x = chain.front()->input(0);
  if (gathers == 0 || copies < 2 || x->uses().size() != 1 || is_graph_output(g, x))
    return false;
  const Shape64 xs = x->shape().concrete(), ys = n->output(0)->shape().concrete();
  const int64_t c = xs.back();
  const int64_t rows_in = shape_numel(xs) / c, rows_out = shape_numel(ys) / c;
  if (c * static_cast<int64_t>(storage_bytes(x->dtype(), 1)) < 16 || rows_out > (int64_t{1} << 22))
    return false;
  Shape64 ids_shape = xs;
  ids_shape.back() = 1;
  std::vector<int64_t> iota(static_cast<size_t>(rows_in));
  for (int64_t i = 0; i < rows_in; ++i)
    iota[static_cast<size_t>(i)] = i;
  Tensor ids = Tensor::from_vector(DataType::kInt64, ids_shape, iota);
  for (const ir::Node *c2 : chain) {
    INGOT_ASSIGN_OR_RETURN(ids, apply_to_rows(g, c2, ids));
  }
  INGOT_ASSIGN_OR_RETURN(Tensor table, ids.reshaped({rows_out}));
  const std::string base = n->name().empty() ? "rows" : n->name();
  ir::Value *s2 = g.add_initializer(unique_value_name(g, base + "/rows_shape"),
                                    Tensor::from_vector(DataType::kInt64, {2}, Shape64{rows_in, c}));
  ir::Value *x2 = g.add_value(unique_value_name(g, x->name() + ".rows"), x->dtype(),
                              ir::Shape{ir::Dim(rows_in), ir::Dim(c)});
  g.add_node("Reshape", {x, s2}, {x2}, {}, base + "/rows");
  ir::Value *tv = g.add_initializer(unique_value_name(g, base + "/row_table"), std::move(table));
  ir::Value *gy = g.add_value(unique_value_name(g, base + ".gathered"), x->dtype(),
                              ir::Shape{ir::Dim(rows_out), ir::Dim(c)});
  ir::Attributes ga;
  ga.set_int("axis", 0);
  ir::Node *gather = g.add_node("Gather", {x2, tv}, {gy}, std::move(ga), base);
  for (ir::Node *c2 : chain)
    absorb(*gather, *c2);
  ir::Value *s3 = g.add_initializer(unique_value_name(g, base + "/out_shape"),
                                    Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(ys.size())}, ys));
  INGOT_RETURN_IF_ERROR(replace_with_node(g, n, "Reshape", {gy, s3}));
  return true;  // the chain's other nodes go as dead nodes
}

// The element indices Slice `s` takes from axis `axis` of its input (rank `rank`, that axis
// `len` long), when it slices that axis alone with constant bounds; nullopt otherwise.
std::optional<std::vector<int64_t>> slice_indices_on(const ir::Graph &g, const ir::Node *s, int64_t rank,
                                                     int64_t axis, int64_t len) {
  std::vector<std::optional<Tensor>> held(s->inputs().size());
  std::vector<const Tensor *> in(s->inputs().size(), nullptr);
  for (size_t i = 1; i < s->inputs().size(); ++i) {
    if (s->input(i) == nullptr)
      continue;
    held[i] = constant_value(s->input(i));
    if (!held[i] || !is_integer(held[i]->dtype()))
      return std::nullopt;
    in[i] = &*held[i];
  }
  std::vector<int64_t> starts, ends, axes, steps;
  bool known = false;
  if (!ir::tensor_slice_params(nullptr, g.opset(""), s->attrs(), in, rank, &starts, &ends, &axes, &steps, &known)
           .ok() ||
      !known)
    return std::nullopt;
  std::vector<int64_t> idx;
  bool found = false;
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    int64_t b = 0, e = 0, count = 0;
    if (a != axis) {
      // Another axis must be taken whole (start 0, step 1, all of it).
      const ir::Dim &d = s->input(0)->shape()[static_cast<size_t>(a)];
      if (!d.is_known() || steps[k] != 1)
        return std::nullopt;
      ir::tensor_slice_range(d.value(), starts[k], ends[k], 1, &b, &e, &count);
      if (b != 0 || count != d.value())
        return std::nullopt;
      continue;
    }
    if (found || steps[k] == 0)
      return std::nullopt;
    found = true;
    ir::tensor_slice_range(len, starts[k], ends[k], steps[k], &b, &e, &count);
    for (int64_t j = 0; j < count; ++j)
      idx.push_back(b + j * steps[k]);
  }
  if (!found) {  // the axis untouched: all of it
    for (int64_t j = 0; j < len; ++j)
      idx.push_back(j);
  }
  return idx;
}

Result<bool> concat_of_slices_to_gather(ir::Graph &g, ir::Node *n) {
  const ir::Value *y = n->output(0);
  if (n->inputs().size() < 2 || !y || !y->shape().is_concrete())
    return false;
  const int64_t rank = static_cast<int64_t>(y->shape().rank());
  int64_t axis = n->attrs().get_int("axis", 0);
  if (axis < 0)
    axis += rank;
  ir::Value *x = nullptr;
  std::vector<int64_t> indices;
  for (ir::Value *v : n->inputs()) {
    ir::Node *s = v ? v->producer() : nullptr;
    if (!is_op(s, "Slice") || !s->input(0) || (x && s->input(0) != x) || !has_single_consumer(g, v) ||
        is_graph_output(g, v))
      return false;
    x = s->input(0);
    if (!x->shape().is_concrete() || static_cast<int64_t>(x->shape().rank()) != rank)
      return false;
    const int64_t len = x->shape().concrete()[static_cast<size_t>(axis)];
    std::optional<std::vector<int64_t>> idx = slice_indices_on(g, s, rank, axis, len);
    if (!idx)
      return false;
    indices.insert(indices.end(), idx->begin(), idx->end());
  }
  if (indices.empty() || static_cast<int64_t>(indices.size()) != y->shape().concrete()[static_cast<size_t>(axis)])
    return false;
  ir::Value *iv = g.add_initializer(
      unique_value_name(g, n->name() + "/indices"),
      Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(indices.size())}, indices));
  ir::Value *like = n->output(0);
  ir::Value *out = g.add_value(unique_value_name(g, like->name()), like->dtype(), like->shape());
  ir::Attributes a;
  a.set_int("axis", axis);
  ir::Node *gather = g.add_node("Gather", {x, iv}, {out}, std::move(a), n->name());
  absorb(*gather, *n);
  for (ir::Value *v : n->inputs())
    gather->absorb_origins(*v->producer());
  INGOT_RETURN_IF_ERROR(replace_value(g, like, out));
  INGOT_RETURN_IF_ERROR(g.remove_node(n));
  return true;  // the Slices go as dead nodes
}

class SimplifyAlgebra : public Pass {
public:
  const char *name() const override { return kName; }

  Result<bool> run(ir::Graph &g, PassContext &ctx) override {
    bool changed = false;
    std::vector<ir::Node *> nodes;
    for (const auto &n : g.nodes())
      nodes.push_back(n.get());
    std::set<ir::Node *> removed;
    for (ir::Node *n : nodes) {
      if (removed.count(n) || !n->output(0))
        continue;
      // Rewrites may remove `n` itself; remember it so the loop does not touch
      // it again.
      Result<bool> r = false;
      if (is_op(n, "Transpose")) {
        ir::Value *out = n->output(0);
        r = merge_transposes(g, n);
        if (r.ok() && *r && !out->producer())
          removed.insert(n);
        if (r.ok() && !*r) {
          r = fold_view_chain(g, n);
          if (r.ok() && *r)
            removed.insert(n);
        }
        if (r.ok() && !*r) {
          r = fold_split_view_chain(g, n);
          if (r.ok() && *r)
            removed.insert(n);
        }
        if (r.ok() && !*r) {
          r = unit_transpose_to_reshape(g, n);
          if (r.ok() && *r)
            removed.insert(n);
        }
      } else if (is_op(n, "Reshape")) {
        r = axis_shuffle_to_gather(g, n);
        if (r.ok() && *r) {
          removed.insert(n);
          changed = true;
          continue;
        }
        if (!r.ok())
          return r.status();
        r = reshape_above_matmul(g, n);
        if (r.ok() && *r) {
          removed.insert(n);
        } else if (r.ok()) {
          r = merge_reshapes(g, n);
          if (r.ok() && !*r) {
            r = fold_view_chain(g, n);
            if (r.ok() && *r)
              removed.insert(n);
          }
          if (r.ok() && !*r) {
            r = fold_split_view_chain(g, n);
            if (r.ok() && *r)
              removed.insert(n);
          }
        }
      } else if (is_op(n, "Add") || is_op(n, "Sub")) {
        r = merge_add_sub_chain(g, n, ctx);
        if (r.ok() && *r)
          removed.insert(n);
      } else if (is_op(n, "Mul") || is_op(n, "Div")) {
        r = fold_scale_into_weights(g, n, ctx);
        if (r.ok() && !*r)
          r = scale_through_bias_add(g, n, ctx);
        if (r.ok() && *r)
          removed.insert(n);
      } else if (is_op(n, "Gemm")) {
        // The Gemm stays as a dead node (the final Reshape's replacement reads x and B).
        r = gemm_between_reshapes_to_matmul(g, n, &removed);
      } else if (is_op(n, "MatMul")) {
        r = matmul_of_transposed_constant(g, n);
        if (r.ok() && *r)
          removed.insert(n);
      } else if (is_op(n, "Concat")) {
        r = concat_of_slices_to_gather(g, n);
        if (r.ok() && *r)
          removed.insert(n);
      } else if (is_op(n, "Conv")) {
        r = crop_dead_conv_taps(g, n);
      } else if (is_op(n, "GatherND")) {
        r = gather_nd_identity(g, n);
        if (r.ok() && *r)
          removed.insert(n);
      } else if (is_op(n, "Gather")) {
        r = gather_through_expand(g, n);
        if (r.ok() && !*r)
          r = gather_of_repeating_constant(g, n);
        if (r.ok() && *r)
          removed.insert(n);
      }
      if (r.ok() && !*r && !removed.count(n) && n->output(0) &&
          (is_op(n, "Gather") || is_op(n, "Transpose") || is_op(n, "Reshape"))) {
        r = fold_row_permutation(g, n);
        if (r.ok() && *r)
          removed.insert(n);
      }
      if (r.ok() && !*r && !removed.count(n) && broadcasting_op(n))
        r = drop_expanded_operands(g, n);
      if (!r.ok())
        return r.status();
      changed |= *r;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> make_simplify_algebra() {
  return std::make_unique<SimplifyAlgebra>();
}

} // namespace ingot::passes
