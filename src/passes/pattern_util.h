// Copyright ingot authors. Apache-2.0.
//
// Small helpers shared by pattern-matching passes: "is this value a constant,
// and which", "does only one node read it", "put this tensor in the graph as a
// weight", and "make readers of one value read another without losing a graph
// output's public name". Every pass used to reimplement these, and the subtle
// cases (an initializer that is also a graph input is NOT a constant: the
// caller may override it; a graph output must keep its name) were the ones that
// went wrong, so they live here once.
//
// eval_op runs one op on the CPU reference kernels, so passes/ using it depend
// on backend/cpu (as constant folding does anyway).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::passes {

/// The recognize_* passes' driver: tries `match` at every node of `g` that `is_anchor` picks (collected
/// in graph order before any rewrite), skipping anchors that an earlier match removed (`match` adds
/// the nodes it deletes to the set), and re-sorts the graph when any match rewrote it. Returns
/// whether one did.
Result<bool> match_at_anchors(ir::Graph &g, const std::function<bool(const ir::Node &)> &is_anchor,
                              const std::function<Result<bool>(ir::Node *, std::set<const ir::Node *> *)> &match);

/// True when `v` is one of `g`'s outputs.
bool is_graph_output(const ir::Graph &g, const ir::Value *v);
/// True when `v` is one of `g`'s inputs (including initializers listed as
/// inputs).
bool is_graph_input(const ir::Graph &g, const ir::Value *v);

/// True when exactly one node input reads `v` and it is not a graph output: a
/// pass may then rewrite the producer for that one consumer without duplicating
/// work or changing an output.
bool has_single_consumer(const ir::Graph &g, const ir::Value *v);
/// The node reading `v` when has_single_consumer(), else nullptr.
ir::Node *single_consumer(const ir::Graph &g, const ir::Value *v);

/// The data of `v` when it is fixed at build time: an initializer that is not a
/// graph input, or the output of a Constant node (value / value_float(s) /
/// value_int(s) / value_string(s)). std::nullopt otherwise (including sparse
/// constants, which we do not expand).
std::optional<Tensor> constant_value(const ir::Value *v);
/// The single element of a constant holding exactly one element (any rank), as
/// double.
std::optional<double> scalar_value(const ir::Value *v);
/// The elements of a constant integer tensor (shape inputs: Reshape's shape,
/// Slice's starts).
std::optional<std::vector<int64_t>> constant_ints(const ir::Value *v);

/// A name not yet used in `g` (or its enclosing graphs), derived from `base`:
/// base, base<sep>1, base<sep>2, ... The recognize_* passes use "." so their
/// helper values read as suffixes of the value they came from.
std::string unique_value_name(const ir::Graph &g, const std::string &base,
                              const char *sep = "_");
/// Adds `data` as an initializer named after `base` (made unique).
ir::Value *make_initializer(ir::Graph &g, const std::string &base, Tensor data);
/// A 1-D int64 initializer holding `values` (a Reshape's shape, a Transpose's or Slice's list).
ir::Value *make_int64s(ir::Graph &g, const std::string &base, const std::vector<int64_t> &values);

/// The single element of an initializer or a Constant's `value` tensor of rank
/// 0 or 1, as double. Looser than scalar_value() (an initializer that is also
/// a graph input counts) and stricter (no value_float, no rank > 1); the
/// recognize_* passes match on this and must keep doing so.
std::optional<double> literal_scalar(const ir::Value *v);
/// The producer of `v` when it is `op_type` in the default domain, else
/// nullptr.
ir::Node *onnx_producer(const ir::Value *v, const char *op_type);
/// The only reader of `v` when has_single_consumer() and it is `op_type` in
/// the default domain, else nullptr.
ir::Node *single_onnx_consumer(const ir::Graph &g, const ir::Value *v,
                               const char *op_type);
/// The other input of a binary node given one of them (the second input when
/// `n` reads `v` twice); nullptr when `n` is not binary or does not read `v`.
ir::Value *other_input(const ir::Node *n, const ir::Value *v);
/// Whether a matched pattern can be replaced by one node standing for `last`:
/// every output of every other node in `nodes` is read only inside `nodes` and
/// is not a graph output.
bool self_contained(const ir::Graph &g, const std::vector<ir::Node *> &nodes,
                    const ir::Node *last);
/// Whether two nodes' attributes have the same names with equal int, float, string,
/// ints and floats values (false for graph or tensor attributes): the check before
/// packing sibling projections (fuse_qkv_projection, fuse_gated_mlp) into one GEMM.
bool same_scalar_attrs(const ir::Attributes &a, const ir::Attributes &b);
/// The text passes note when they decline a match, so every refusal reads
/// alike: "refused <what> at [<anchor_op> ]'<anchor name>': <why>".
std::string refusal_note(const std::string &what, const std::string &anchor_op,
                         const ir::Node *anchor, const std::string &why);
/// Hands `out`'s public name to `fused_out` (after its readers moved there);
/// `out` keeps a fresh "<name>.unfused" name.
void take_over_name(ir::Graph &g, ir::Value *out, ir::Value *fused_out);
/// Removes `nodes`, each once nothing reads its outputs (consumers first,
/// whatever the order given); kInternal naming `who` when some stay in use.
Status remove_nodes_consumers_first(ir::Graph &g, std::vector<ir::Node *> nodes,
                                    const char *who);

/// Whether replace_value() can make readers of `from` read `to`: false only
/// when `from` is a graph output and `to` cannot take its name (`to` is a graph
/// input, or already a graph output under its own name). Callers refuse the
/// rewrite then.
bool can_replace_value(const ir::Graph &g, const ir::Value *from,
                       const ir::Value *to);
/// Makes every reader of `from` read `to`. When `from` is a graph output, `to`
/// takes over its name (and `from` becomes nameless), so the graph's public
/// names stay the same. Fails (kInternal) where can_replace_value() is false.
Status replace_value(ir::Graph &g, ir::Value *from, ir::Value *to);

/// Runs `op_type` (default domain, opset of `like`'s root graph or 17) on
/// constant inputs with the CPU reference kernels; returns its outputs. For
/// computing new weights.
Result<std::vector<Tensor>> eval_op(const std::string &op_type,
                                    const std::vector<Tensor> &inputs,
                                    const ir::Attributes &attrs = {},
                                    const ir::Graph *like = nullptr);

/// Removes an initializer nobody reads (not a graph input or output). Returns
/// false when the value is still needed or when ir::Graph offers no way to drop
/// initializers.
bool remove_unused_initializer(ir::Graph &g, ir::Value *v);
/// Whether this build's ir::Graph can drop initializers (see
/// remove_unused_initializer).
bool graph_can_remove_initializers();

} // namespace ingot::passes
