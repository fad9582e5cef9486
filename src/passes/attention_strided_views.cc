// Copyright ingot authors. Apache-2.0.
//
// attention_strided_views: an ingot::Attention reads Q, K and V, and writes Y, in place inside
// the tensors that the layout nodes around it would copy from and into
// (ir/ops/attention_views.h). Exporters surround attention with data movement that only
// re-indexes memory: PyTorch's nn.MultiheadAttention (torchvision ViT) splits its packed
// in-projection with Unflatten / Unsqueeze / Transpose / Squeeze and three Gathers, then moves
// heads with Reshape + Transpose per tensor; timm's Attention (DeiT) and torchvision's Swin
// permute a [B, N, 3, H, D] tensor and take its three slices; GPT-2 splits with Split.
// recognize_attention absorbs the plainest head split and merge; everything else would run as
// Transpose / Gather / Slice copies, a kernel each, around every attention.
//
// Pattern: for each ingot::Attention (4-D, or 3-D with head counts; not qkv_packed), the chain
// of view nodes above each of Q, K, V — Reshape, Squeeze, Unsqueeze, Flatten, Transpose,
// Gather with a constant single index, Slice with constant positive steps, one output of Split,
// Expand (K/V heads repeated for GQA become the attention's kv heads) — is followed back as far as the tensor stays a strided view whose head-size axis is
// contiguous; below Y, the chain of Reshape / Squeeze / Unsqueeze / Flatten / Transpose nodes
// that each are Y's (or the previous one's) only reader, as far as Y stays such a view of its
// end. Result: one Attention {view_dims, q/k/v/y_view, y_shape} reading the chain starts and
// producing the chain end; the input chains' nodes go where nothing else reads them.
// Refused (left as is): symbolic or zero dims anywhere on a chain (the strides are fixed at
// build time), a Reshape that would need a copy, nothing to absorb.
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/ops/attention_views.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "attention_strided_views";
constexpr size_t kMaxChain = 16;

/// A tensor as a strided view of a root tensor's memory. Each dim is a run of (size, stride)
/// parts, outermost first (sizes > 1; none for a unit dim): a dim that merged two
/// non-adjacent runs (PyTorch's q.view(L, N*H, D) of a packed projection) stays exact, and a
/// later Reshape that splits it again (view(N, H, L, D)) gets plain strides back. Element
/// (i0, i1, ...) lives at root[offset + sum over dims of the parts' strides times the digits
/// of i_k in the parts' sizes].
struct View {
  using Part = std::pair<int64_t, int64_t>;  // size, stride
  int64_t offset = 0;
  std::vector<std::vector<Part>> dims;

  int64_t size(size_t k) const {
    int64_t n = 1;
    for (const Part& p : dims[k]) n *= p.first;
    return n;
  }
  std::vector<int64_t> sizes() const {
    std::vector<int64_t> out;
    for (size_t k = 0; k < dims.size(); ++k) out.push_back(size(k));
    return out;
  }
  /// The one stride of dim k (0 for a unit dim); nullopt when its parts do not merge into one.
  std::optional<int64_t> stride(size_t k) const {
    if (dims[k].empty()) return 0;
    if (dims[k].size() != 1) return std::nullopt;
    return dims[k][0].second;
  }
};

std::optional<std::vector<int64_t>> static_dims(const Value* v) {
  if (v == nullptr || !v->shape().rank_known()) return std::nullopt;
  std::vector<int64_t> d;
  for (const ir::Dim& x : v->shape().dims()) {
    if (!x.is_known() || x.value() <= 0) return std::nullopt;
    d.push_back(x.value());
  }
  return d;
}

/// Merges adjacent parts of one dim that are contiguous with each other.
void normalize(std::vector<View::Part>* parts) {
  std::vector<View::Part> out;
  for (const View::Part& p : *parts) {
    if (p.first == 1) continue;
    if (!out.empty() && out.back().second == p.first * p.second) {
      out.back() = {out.back().first * p.first, p.second};
    } else {
      out.push_back(p);
    }
  }
  *parts = std::move(out);
}

View contiguous(const std::vector<int64_t>& dims) {
  View v;
  int64_t stride = 1;
  v.dims.resize(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1) v.dims[i] = {{dims[i], stride}};
    stride *= dims[i];
  }
  return v;
}

/// Reshape without a copy: the parts in order, regrouped into the new dims (a part splits where
/// a new dim ends inside it and its size allows). False when the sizes do not divide.
bool reshape_view(View* v, const std::vector<int64_t>& nd) {
  std::vector<View::Part> seq;
  for (const auto& d : v->dims) seq.insert(seq.end(), d.begin(), d.end());
  std::vector<std::vector<View::Part>> out(nd.size());
  size_t i = 0;
  for (size_t j = 0; j < nd.size(); ++j) {
    int64_t need = nd[j];
    while (need > 1) {
      if (i >= seq.size()) return false;
      View::Part& p = seq[i];
      if (p.first <= need) {
        if (need % p.first != 0) return false;
        out[j].push_back(p);
        need /= p.first;
        ++i;
      } else {  // take the outer `need` of this part; its inner rest stays for the next dim
        if (p.first % need != 0) return false;
        const int64_t inner = p.first / need;
        out[j].push_back({need, p.second * inner});
        p = {inner, p.second};
        need = 1;
      }
    }
    normalize(&out[j]);
  }
  if (i != seq.size()) return false;
  v->dims = std::move(out);
  return true;
}

void transpose_view(View* v, const std::vector<int64_t>& perm) {
  std::vector<std::vector<View::Part>> t(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) t[i] = v->dims[static_cast<size_t>(perm[i])];
  v->dims = std::move(t);
}

std::optional<std::vector<int64_t>> perm_of(const Node& n, size_t rank) {
  std::vector<int64_t> p = n.attrs().get_ints("perm");
  if (p.empty()) {
    p.resize(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (p.size() != rank) return std::nullopt;
  std::vector<bool> seen(rank, false);
  for (int64_t a : p) {
    if (a < 0 || a >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(a)]) return std::nullopt;
    seen[static_cast<size_t>(a)] = true;
  }
  return p;
}

bool onnx_op(const Node* n, const char* op) { return n != nullptr && n->domain().empty() && n->op_type() == op; }

bool reshape_like(const Node* n) {
  return onnx_op(n, "Reshape") || onnx_op(n, "Squeeze") || onnx_op(n, "Unsqueeze") || onnx_op(n, "Flatten");
}

/// The view of `n`'s output `out_index` given the view of its data input; false when `n` is not
/// a view node this pass follows or the result is not a strided view.
bool apply_forward(const Graph& g, const Node& n, int out_index, View* v) {
  const std::optional<std::vector<int64_t>> out = static_dims(n.output(static_cast<size_t>(out_index)));
  if (!out) return false;
  const size_t rank = v->dims.size();
  if (reshape_like(&n)) return reshape_view(v, *out);
  if (onnx_op(&n, "Transpose")) {
    std::optional<std::vector<int64_t>> p = perm_of(n, rank);
    if (!p) return false;
    transpose_view(v, *p);
    return v->sizes() == *out;
  }
  if (onnx_op(&n, "Gather")) {
    std::optional<Tensor> idx = constant_value(n.input(1));
    if (!idx || idx->numel() != 1 || idx->rank() > 1) return false;
    int64_t axis = n.attrs().get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
    const size_t a = static_cast<size_t>(axis);
    int64_t i = static_cast<int64_t>(idx->get_f64(0));
    if (i < 0) i += v->size(a);
    if (i < 0 || i >= v->size(a)) return false;
    for (size_t k = v->dims[a].size(); k-- > 0;) {  // the index's digits in the parts' sizes
      v->offset += (i % v->dims[a][k].first) * v->dims[a][k].second;
      i /= v->dims[a][k].first;
    }
    if (idx->rank() == 0) {
      v->dims.erase(v->dims.begin() + static_cast<std::ptrdiff_t>(a));
    } else {
      v->dims[a].clear();
    }
    return v->sizes() == *out;
  }
  if (onnx_op(&n, "Slice")) {
    std::optional<std::vector<int64_t>> starts, axes, steps;
    if (g.opset("") >= 10) {
      starts = constant_ints(n.input(1));
      if (n.input(3) != nullptr) axes = constant_ints(n.input(3));
      if (n.input(4) != nullptr) steps = constant_ints(n.input(4));
      if (!starts || (n.input(3) != nullptr && !axes) || (n.input(4) != nullptr && !steps)) return false;
    } else {
      starts = n.attrs().get_ints("starts");
      if (n.attrs().has("axes")) axes = n.attrs().get_ints("axes");
    }
    if (!axes) {
      axes = std::vector<int64_t>(starts->size());
      std::iota(axes->begin(), axes->end(), 0);
    }
    if (axes->size() != starts->size() || (steps && steps->size() != starts->size())) return false;
    if (out->size() != rank) return false;
    for (size_t k = 0; k < starts->size(); ++k) {
      int64_t a = (*axes)[k];
      if (a < 0) a += static_cast<int64_t>(rank);
      if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
      const size_t ax = static_cast<size_t>(a);
      const int64_t step = steps ? (*steps)[k] : 1;
      const std::optional<int64_t> st = v->stride(ax);
      if (step <= 0 || !st) return false;
      int64_t s = (*starts)[k];
      if (s < 0) s += v->size(ax);
      s = std::max<int64_t>(0, std::min(s, v->size(ax)));
      v->offset += s * *st;
      v->dims[ax].clear();
      if ((*out)[ax] > 1) v->dims[ax] = {{(*out)[ax], *st * step}};
    }
    return v->sizes() == *out;
  }
  if (onnx_op(&n, "Expand")) {  // broadcast dims read one element: stride 0
    if (out->size() < rank) return false;
    const size_t lead = out->size() - rank;
    std::vector<std::vector<View::Part>> dims(out->size());
    for (size_t k = 0; k < out->size(); ++k) {
      const int64_t want = (*out)[k];
      if (k < lead) {
        if (want > 1) dims[k] = {{want, 0}};
        continue;
      }
      const int64_t have = v->size(k - lead);
      if (have == want) {
        dims[k] = v->dims[k - lead];
      } else if (have == 1) {
        dims[k] = {{want, 0}};
      } else {
        return false;
      }
    }
    v->dims = std::move(dims);
    return v->sizes() == *out;
  }
  if (onnx_op(&n, "Split")) {
    int64_t axis = n.attrs().get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || out->size() != rank) return false;
    const size_t a = static_cast<size_t>(axis);
    const std::optional<int64_t> st = v->stride(a);
    if (!st) return false;
    for (int k = 0; k < out_index; ++k) {
      std::optional<std::vector<int64_t>> prev = static_dims(n.output(static_cast<size_t>(k)));
      if (!prev || prev->size() != rank) return false;
      v->offset += (*prev)[a] * *st;
    }
    v->dims[a].clear();
    if ((*out)[a] > 1) v->dims[a] = {{(*out)[a], *st}};
    return v->sizes() == *out;
  }
  return false;
}

/// The inverse of a reshape-like or Transpose node: the view of its input given its output's.
bool apply_backward(const Node& n, View* v) {
  const std::optional<std::vector<int64_t>> in = static_dims(n.input(0));
  if (!in) return false;
  if (reshape_like(&n)) return reshape_view(v, *in);
  if (!onnx_op(&n, "Transpose")) return false;
  std::optional<std::vector<int64_t>> p = perm_of(n, v->dims.size());
  if (!p) return false;
  std::vector<int64_t> inv(p->size());
  for (size_t i = 0; i < p->size(); ++i) inv[static_cast<size_t>((*p)[i])] = static_cast<int64_t>(i);
  transpose_view(v, inv);
  return v->sizes() == *in;
}

/// A 3-D [B, S, H*D] attention operand as the 4-D [B, H, S, D] the views describe.
bool to_bhsd(View* v, int64_t heads) {
  if (v->dims.size() == 4) return true;
  if (v->dims.size() != 3 || heads <= 0 || v->size(2) % heads != 0) return false;
  if (!reshape_view(v, {v->size(0), v->size(1), heads, v->size(2) / heads})) return false;
  transpose_view(v, {0, 2, 1, 3});
  return true;
}

/// The [offset, stride_b, stride_h, stride_s] of a [B, H, S, D] view with one stride per dim and
/// a contiguous D, and its head count. With `gqa`, a head dim of two parts (Hkv, s) (rep, 0) —
/// K/V heads repeated by an Expand (Llama's repeat_kv) — reads as Hkv heads of stride s: the
/// attention's GQA maps query head h to kv head h / rep, as the repeat did.
std::optional<std::vector<int64_t>> final_view(const View& v, bool gqa, int64_t* heads) {
  if (v.dims.size() != 4) return std::nullopt;
  std::vector<int64_t> out = {v.offset};
  *heads = v.size(1);
  for (size_t k = 0; k < 3; ++k) {
    std::optional<int64_t> st = v.stride(k);
    if (!st && k == 1 && gqa && v.dims[1].size() == 2 && v.dims[1][1].second == 0) {
      st = v.dims[1][0].second;
      *heads = v.dims[1][0].first;
    }
    if (!st) return std::nullopt;
    out.push_back(*st);
  }
  if (v.size(3) != 1 && v.stride(3) != std::optional<int64_t>(1)) return std::nullopt;
  return out;
}

struct Operand {
  Value* root = nullptr;
  View view;
  std::vector<int64_t> attr;  // offset, stride_b, stride_h, stride_s
  int64_t heads = 0;
  std::vector<Node*> absorbed;  // view nodes between the root and the operand
};

/// The furthest root above `x` of which x (as [B, H, S, D]) is a view with a contiguous last axis.
std::optional<Operand> trace_input(const Graph& g, Value* x, int64_t heads, bool gqa) {
  std::vector<std::pair<Node*, int>> chain;  // producer of each link, nearest first
  Value* cur = x;
  while (chain.size() < kMaxChain && cur->producer() != nullptr) {
    Node* p = cur->producer();
    if (!(reshape_like(p) || onnx_op(p, "Transpose") || onnx_op(p, "Gather") || onnx_op(p, "Slice") ||
          onnx_op(p, "Split") || onnx_op(p, "Expand")) ||
        p->input(0) == nullptr)
      break;
    int idx = -1;
    for (size_t o = 0; o < p->outputs().size(); ++o)
      if (p->output(o) == cur) idx = static_cast<int>(o);
    if (idx < 0) break;
    chain.emplace_back(p, idx);
    cur = p->input(0);
  }
  for (size_t start = chain.size() + 1; start-- > 0;) {
    // Root: the input of chain[start - 1] (start == 0: x itself).
    Value* root = start == 0 ? x : chain[start - 1].first->input(0);
    std::optional<std::vector<int64_t>> rd = static_dims(root);
    if (!rd) continue;
    View v = contiguous(*rd);
    bool ok = true;
    for (size_t k = start; k-- > 0 && ok;) ok = apply_forward(g, *chain[k].first, chain[k].second, &v);
    if (!ok || !to_bhsd(&v, heads)) continue;
    Operand o;
    std::optional<std::vector<int64_t>> attr = final_view(v, gqa, &o.heads);
    if (!attr) continue;
    o.root = root;
    o.view = v;
    o.attr = *attr;
    for (size_t k = 0; k < start; ++k) o.absorbed.push_back(chain[k].first);
    return o;
  }
  return std::nullopt;
}

/// The furthest end below `y` (through single-reader reshape-like / Transpose nodes) that y (as
/// [B, H, S, D]) is a view of, with a contiguous last axis.
std::optional<Operand> trace_output(const Graph& g, Value* y, int64_t heads) {
  std::vector<Node*> chain;  // nearest first
  Value* cur = y;
  while (chain.size() < kMaxChain && has_single_consumer(g, cur)) {
    Node* c = single_consumer(g, cur);
    if (c == nullptr || !(reshape_like(c) || onnx_op(c, "Transpose")) || c->input(0) != cur ||
        c->outputs().size() != 1)
      break;
    chain.push_back(c);
    cur = c->output(0);
  }
  for (size_t end = chain.size() + 1; end-- > 0;) {
    Value* z = end == 0 ? y : chain[end - 1]->output(0);
    std::optional<std::vector<int64_t>> zd = static_dims(z);
    if (!zd) continue;
    View v = contiguous(*zd);
    bool ok = true;
    for (size_t k = end; k-- > 0 && ok;) ok = apply_backward(*chain[k], &v);
    if (!ok || !to_bhsd(&v, heads)) continue;
    Operand o;
    std::optional<std::vector<int64_t>> attr = final_view(v, false, &o.heads);
    if (!attr) continue;
    o.root = z;
    o.view = v;
    o.attr = *attr;
    o.absorbed.assign(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(end));
    return o;
  }
  return std::nullopt;
}

// ---- seq-first layouts: a Transpose next to a row-wise GEMM moves to the attention's side ----
// PyTorch's nn.MultiheadAttention works seq-first: x [N, L, E] -> Transpose -> in-projection ->
// attention -> out-projection -> Transpose back. A GEMM over the last axis commutes with any
// permutation of the leading axes, so the Transposes can move to the attention's side of the
// GEMMs, where its views absorb them (at batch 1 they are Reshapes already).

/// MatMul / FusedGemm {kind=matmul} with a constant 2-D B and no residual: row-wise over the last axis.
bool row_wise_gemm(const Node* n) {
  if (n == nullptr || n->outputs().size() != 1 || n->input(0) == nullptr || n->input(1) == nullptr) return false;
  const bool mm = onnx_op(n, "MatMul");
  const bool fused = n->domain() == kIngotDomain && n->op_type() == "FusedGemm" &&
                     n->attrs().get_string("kind", "") == "matmul" && n->inputs().size() <= 3;
  if (!mm && !fused) return false;
  const std::optional<std::vector<int64_t>> b = static_dims(n->input(1));
  const std::optional<std::vector<int64_t>> a = static_dims(n->input(0));
  return b && b->size() == 2 && a && a->size() >= 2 && constant_value(n->input(1)).has_value();
}

/// A Transpose that keeps the last axis in place (its perm), or nullopt.
std::optional<std::vector<int64_t>> leading_perm(const Node* t) {
  if (!onnx_op(t, "Transpose") || t->input(0) == nullptr || !static_dims(t->input(0))) return std::nullopt;
  const size_t rank = static_dims(t->input(0))->size();
  std::optional<std::vector<int64_t>> p = perm_of(*t, rank);
  if (!p || p->back() != static_cast<int64_t>(rank) - 1) return std::nullopt;
  return p;
}

std::vector<int64_t> permuted(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t a : perm) out.push_back(dims[static_cast<size_t>(a)]);
  return out;
}

ir::Shape shape_of(const std::vector<int64_t>& dims) {
  std::vector<ir::Dim> d;
  for (int64_t x : dims) d.emplace_back(x);
  return ir::Shape(d);
}

/// GEMM(Transpose(x, p)) -> Transpose(GEMM(x), p), the Transpose read only by the GEMM.
Result<bool> transpose_below_gemm(Graph& g, Node* gemm) {
  if (!row_wise_gemm(gemm)) return false;
  Node* t = gemm->input(0)->producer();
  std::optional<std::vector<int64_t>> p = leading_perm(t);
  if (!p || gemm->input(0)->uses().size() != 1 || is_graph_output(g, gemm->input(0))) return false;
  Value* x = t->input(0);
  Value* y = gemm->output(0);
  std::vector<int64_t> xd = *static_dims(x);
  xd.back() = (*static_dims(gemm->input(1)))[1];
  Value* y2 = g.add_value(unique_value_name(g, y->name() + ".unpermuted", "."), y->dtype(), shape_of(xd));
  std::vector<Value*> ins = gemm->inputs();
  ins[0] = x;
  Node* g2 = g.add_node(gemm->op_type(), ins, {y2}, gemm->attrs(), gemm->name(), gemm->domain());
  g2->absorb_origins(*gemm);
  ir::Attributes ta;
  ta.set_ints("perm", *p);
  Value* y3 = g.add_value(unique_value_name(g, y->name() + ".t", "."), y->dtype(), y->shape());
  Node* t2 = g.add_node("Transpose", {y2}, {y3}, std::move(ta), t->name());
  t2->absorb_origins(*t);
  g.replace_all_uses(y, y3);
  INGOT_RETURN_IF_ERROR(g.remove_node(gemm));
  INGOT_RETURN_IF_ERROR(g.remove_node(t));
  take_over_name(g, y, y3);
  return true;
}

/// Transpose(GEMM(a), p) -> GEMM(Transpose(a, p)), the GEMM read only by the Transpose.
Result<bool> transpose_above_gemm(Graph& g, Node* t) {
  std::optional<std::vector<int64_t>> p = leading_perm(t);
  Node* gemm = t && t->input(0) ? t->input(0)->producer() : nullptr;
  if (!p || !row_wise_gemm(gemm) || !has_single_consumer(g, gemm->output(0))) return false;
  Value* a = gemm->input(0);
  if (static_dims(a)->size() != p->size()) return false;
  ir::Attributes ta;
  ta.set_ints("perm", *p);
  Value* a2 = g.add_value(unique_value_name(g, a->name() + ".t", "."), a->dtype(), shape_of(permuted(*static_dims(a), *p)));
  Node* t2 = g.add_node("Transpose", {a}, {a2}, std::move(ta), t->name());
  t2->absorb_origins(*t);
  Value* out = t->output(0);
  Value* out2 = g.add_value(unique_value_name(g, out->name() + ".gemm", "."), out->dtype(), out->shape());
  std::vector<Value*> ins = gemm->inputs();
  ins[0] = a2;
  Node* g2 = g.add_node(gemm->op_type(), ins, {out2}, gemm->attrs(), gemm->name(), gemm->domain());
  g2->absorb_origins(*gemm);
  g.replace_all_uses(out, out2);
  INGOT_RETURN_IF_ERROR(g.remove_node(t));
  INGOT_RETURN_IF_ERROR(g.remove_node(gemm));
  take_over_name(g, out, out2);
  return true;
}

bool view_op(const Node* p) {
  return reshape_like(p) || onnx_op(p, "Transpose") || onnx_op(p, "Gather") || onnx_op(p, "Slice") ||
         onnx_op(p, "Split") || onnx_op(p, "Expand");
}

/// Moves the seq-first Transposes around `att`'s projections next to it: above Q/K/V's view
/// chains (through the in-projection) and below Y's (through the out-projection).
Result<bool> move_seq_first_transposes(Graph& g, Node* att) {
  bool changed = false;
  for (size_t i = 0; i < 3; ++i) {
    Value* cur = att->input(i);
    for (size_t k = 0; cur && k < kMaxChain && cur->producer() && view_op(cur->producer()); ++k)
      cur = cur->producer()->input(0);
    if (cur && cur->producer()) {
      INGOT_ASSIGN_OR_RETURN(bool r, transpose_below_gemm(g, cur->producer()));
      changed |= r;
    }
  }
  Value* cur = att->output(0);
  for (size_t k = 0; k < kMaxChain && has_single_consumer(g, cur); ++k) {
    Node* c = single_consumer(g, cur);
    if (reshape_like(c) || onnx_op(c, "Transpose")) {
      cur = c->output(0);
      continue;
    }
    if (row_wise_gemm(c) && c->input(0) == cur && has_single_consumer(g, c->output(0))) {
      INGOT_ASSIGN_OR_RETURN(bool r, transpose_above_gemm(g, single_consumer(g, c->output(0))));
      changed |= r;
    }
    break;
  }
  return changed;
}

class AttentionStridedViews : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> attentions;
    for (const auto& n : g.nodes())
      if (n->domain() == kIngotDomain && n->op_type() == "Attention" && n->attrs().get_int("qkv_packed", 0) == 0 &&
          !ir::attention_has_views(n->attrs()))
        attentions.push_back(n.get());
    bool changed = false;
    for (Node* att : attentions) {
      INGOT_ASSIGN_OR_RETURN(bool r, rewrite(g, ctx, att));
      changed |= r;
    }
    if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());
    return changed;
  }

 private:
  Result<bool> rewrite(Graph& g, PassContext& ctx, Node* att) {
    if (att->inputs().size() < 3 || att->outputs().size() != 1 || !att->input(0) || !att->input(1) ||
        !att->input(2) || !att->output(0))
      return false;
    const bool three_d = att->input(0)->shape().rank_known() && att->input(0)->shape().rank() == 3;
    const int64_t hq = three_d ? att->attrs().get_int("q_num_heads", 0) : 0;
    const int64_t hkv = three_d ? att->attrs().get_int("kv_num_heads", 0) : 0;
    INGOT_ASSIGN_OR_RETURN(bool moved, move_seq_first_transposes(g, att));
    std::optional<Operand> ops[4];
    for (int i = 0; i < 3; ++i) {
      ops[i] = trace_input(g, att->input(static_cast<size_t>(i)), i == 0 ? hq : hkv, i > 0);
      if (!ops[i]) return moved;
    }
    ops[3] = trace_output(g, att->output(0), hq);
    if (!ops[3]) return moved;
    bool absorbs = false;
    for (const auto& o : ops) absorbs |= !o->absorbed.empty();
    if (!absorbs) return moved;
    const View &q = ops[0]->view, &k = ops[1]->view, &v = ops[2]->view, &y = ops[3]->view;
    // The views must agree on B, H, S, D (shape inference checked the original node already).
    std::vector<int64_t> qd = q.sizes(), kd = k.sizes(), vd = v.sizes();
    kd[1] = ops[1]->heads;  // GQA: the kv heads before a repeat
    vd[1] = ops[2]->heads;
    if (kd != vd || qd[0] != kd[0] || qd[3] != kd[3] || y.sizes() != qd || qd[1] % kd[1] != 0) {
      ctx.note(name(), "attention " + att->name() + ": the traced views disagree on B/H/S/D; left as is");
      return moved;
    }
    ir::Attributes attrs;
    const int64_t d = qd[3];
    attrs.set_float("scale", att->attrs().has("scale")
                                 ? att->attrs().get_float("scale", 1.0f)
                                 : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
    attrs.set_int("is_causal", att->attrs().get_int("is_causal", 0));
    if (att->attrs().has("mask_batch_period"))
      attrs.set_int("mask_batch_period", att->attrs().get_int("mask_batch_period", 0));
    attrs.set_ints("view_dims", {qd[0], qd[1], kd[1], qd[2], kd[2], d});
    const char* names[4] = {"q_view", "k_view", "v_view", "y_view"};
    for (int i = 0; i < 4; ++i) attrs.set_ints(names[i], ops[i]->attr);
    Value* z = ops[3]->root;
    attrs.set_ints("y_shape", *static_dims(z));
    std::vector<Value*> ins = {ops[0]->root, ops[1]->root, ops[2]->root};
    if (att->inputs().size() > 3 && att->input(3) != nullptr) ins.push_back(att->input(3));
    Value* fused_out = g.add_value(unique_value_name(g, z->name() + ".fused", "."), z->dtype(), z->shape());
    Node* fused = g.add_node("Attention", ins, {fused_out}, std::move(attrs), att->name(), kIngotDomain);
    fused->absorb_origins(*att);
    for (Node* n : ops[3]->absorbed) fused->absorb_origins(*n);
    g.replace_all_uses(z, fused_out);
    std::vector<Node*> gone = {att};
    gone.insert(gone.end(), ops[3]->absorbed.begin(), ops[3]->absorbed.end());
    INGOT_RETURN_IF_ERROR(remove_nodes_consumers_first(g, gone, kName));
    take_over_name(g, z, fused_out);
    // The input chains' nodes that nothing reads any more go now (nearest first, so a shared
    // node goes once its last reader has), their origins to the attention.
    std::vector<Node*> left;
    for (int i = 0; i < 3; ++i) left.insert(left.end(), ops[i]->absorbed.begin(), ops[i]->absorbed.end());
    for (bool again = true; again;) {
      again = false;
      for (Node*& n : left) {
        if (n == nullptr) continue;
        bool dead = true;
        for (Value* o : n->outputs()) dead &= o == nullptr || (o->uses().empty() && !is_graph_output(g, o));
        if (!dead) continue;
        fused->absorb_origins(*n);
        Node* d = n;
        for (Node*& m : left)
          if (m == d) m = nullptr;
        INGOT_RETURN_IF_ERROR(g.remove_node(d));
        again = true;
      }
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_attention_strided_views() { return std::make_unique<AttentionStridedViews>(); }

}  // namespace ingot::passes
