// Copyright ingot authors. Apache-2.0.
//
// fold_constants: evaluates at build time what does not depend on the graph
// inputs.
//
// Pattern → result:
//   - a node whose inputs are all constants (initializers that are not graph
//   inputs, or
//     Constant node outputs) is run on the CPU reference kernels (backend/cpu
//     run_node: this pass depends on backend/cpu, the one oracle, instead of a
//     second set of kernels) and its outputs become initializers with the same
//     names;
//   - a Constant node becomes an initializer;
//   - Shape(x) / Size(x) where x's shape is concrete after inference become
//   constants (the
//     shape subgraphs exporters emit around Reshape then fold away).
// Refuses:
//   - results larger than PassOptions::fold_size_limit_bytes (noted), unless the node alone
//     reads its constant inputs and its result is no larger than they are (a weight's
//     Transpose or Cast: nothing grows): an Expand
//   or
//     ConstantOfShape would turn a few bytes into megabytes of weights;
//   - nodes with subgraphs (If/Loop/Scan) and non-deterministic ops (Random*,
//   Bernoulli,
//     Multinomial, Dropout — inference Dropout is remove_noops' job);
//   - non-tensor outputs (sequences, optionals) and ops the CPU backend cannot
//   run (noted);
//   - a DequantizeLinear of an 8-bit constant weight that a MatMul/Gemm/Conv reads:
//     fuse_quant_gemm multiplies the 8-bit numbers (and folds the ones it leaves).
#include <set>

#include "backend/cpu/executor.h"
#include "ir/op_registry.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes {
namespace {

constexpr const char *kName = "fold_constants";

bool is_non_deterministic(const ir::Node &n) {
  static const std::set<std::string> ops = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Bernoulli",    "Multinomial",   "Dropout"};
  return n.domain().empty() && ops.count(n.op_type());
}

bool has_subgraph(const ir::Node &n) {
  for (const auto &[k, a] : n.attrs().all())
    if (a.g || !a.graphs.empty())
      return true;
  return false;
}

// Shape/Size of a concrete-shaped input, computed from the type alone.
std::optional<Tensor> fold_shape_of(const ir::Node &n) {
  if (!n.domain().empty() || (n.op_type() != "Shape" && n.op_type() != "Size"))
    return std::nullopt;
  const ir::Value *x = n.input(0);
  if (!x || !x->shape().is_concrete())
    return std::nullopt;
  Shape64 dims = x->shape().concrete();
  if (n.op_type() == "Size")
    return Tensor::from_vector<int64_t>(DataType::kInt64, {},
                                        {shape_numel(dims)});
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t s = n.attrs().get_int("start", 0), e = n.attrs().get_int("end", r);
  if (s < 0)
    s += r;
  if (e < 0)
    e += r;
  s = std::clamp<int64_t>(s, 0, r);
  e = std::clamp<int64_t>(e, 0, r);
  std::vector<int64_t> v;
  for (int64_t i = s; i < e; ++i)
    v.push_back(dims[static_cast<size_t>(i)]);
  return Tensor::from_vector<int64_t>(DataType::kInt64,
                                      {static_cast<int64_t>(v.size())}, v);
}

// Bytes the outputs will take when inference already knows their shapes (to
// refuse before computing a huge result); 0 when unknown.
size_t known_output_bytes(const ir::Node &n) {
  size_t total = 0;
  for (const ir::Value *o : n.outputs())
    if (o && o->has_type() && o->shape().is_concrete() &&
        o->dtype() != DataType::kString)
      total += storage_bytes(o->dtype(), shape_numel(o->shape().concrete()));
  return total;
}

// Replaces every output of `n` by an initializer of the same name holding
// `results[i]`.
Status replace_by_initializers(ir::Graph &g, ir::Node *n,
                               std::vector<Tensor> results) {
  for (size_t i = 0; i < n->outputs().size(); ++i) {
    ir::Value *o = n->outputs()[i];
    if (!o)
      continue;
    std::string name = o->name();
    g.rename_value(o, "");
    ir::Value *init =
        g.add_initializer(name.empty() ? unique_value_name(g, "folded") : name,
                          std::move(results[i]));
    g.replace_all_uses(o, init);
  }
  return g.remove_node(n);
}

// A node whose constant inputs it alone reads, with a result no larger than they are (a
// Transpose or Cast of a weight): folding it grows nothing, since the inputs go as dead, so the
// size limit does not apply.
bool replaces_its_inputs(const ir::Graph &g, const ir::Node &n) {
  size_t in_bytes = 0;
  for (const ir::Value *v : n.inputs()) {
    if (!v)
      continue;
    if (!v->initializer() || v->uses().size() != 1 || is_graph_output(g, v) || is_graph_input(g, v))
      return false;
    in_bytes += storage_bytes(v->dtype(), v->initializer()->numel());
  }
  return known_output_bytes(n) <= in_bytes;
}

class FoldConstants : public Pass {
public:
  const char *name() const override { return kName; }

  Result<bool> run(ir::Graph &g, PassContext &ctx) override {
    (void)ir::infer_graph(g); // Shape/Size folding reads the inferred shapes
    const size_t limit = ctx.options().fold_size_limit_bytes;
    bool changed = false;
    std::vector<ir::Node *> nodes;
    for (const auto &n : g.nodes())
      nodes.push_back(n.get());
    for (ir::Node *n : nodes) {
      if (is_non_deterministic(*n) || has_subgraph(*n) || keeps_quantized_weight(*n))
        continue;
      bool tensors_only = true;
      for (const ir::Value *o : n->outputs())
        tensors_only &= !o || o->non_tensor_kind().empty();
      if (!tensors_only)
        continue;

      if (n->domain().empty() && n->op_type() == "Constant") {
        auto v = constant_value(n->output(0));
        if (!v || !n->output(0))
          continue; // sparse_value: left to the importer
        INGOT_RETURN_IF_ERROR(replace_by_initializers(g, n, {*v}));
        changed = true;
        continue;
      }
      if (auto shape = fold_shape_of(*n)) {
        INGOT_RETURN_IF_ERROR(replace_by_initializers(g, n, {*shape}));
        changed = true;
        continue;
      }

      std::vector<Tensor> held;
      held.reserve(n->inputs().size());
      std::vector<const Tensor *> ins;
      bool all_constant = !n->inputs().empty();
      for (const ir::Value *v : n->inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        auto c = constant_value(v);
        if (!c) {
          all_constant = false;
          break;
        }
        held.push_back(*c);
        ins.push_back(&held.back());
      }
      if (!all_constant)
        continue;
      const bool replaces = replaces_its_inputs(g, *n);
      if (known_output_bytes(*n) > limit && !replaces) {
        ctx.note(kName, "kept " + n->describe() + ": its result (" +
                            std::to_string(known_output_bytes(*n)) +
                            " bytes) exceeds the fold limit of " +
                            std::to_string(limit) + " bytes");
        continue;
      }
      auto out = cpu::run_node(*n, ins);
      if (!out.ok()) {
        ctx.note(kName,
                 "kept " + n->describe() + ": " + out.status().message());
        continue;
      }
      size_t bytes = 0;
      for (size_t i = 0; i < out->size(); ++i)
        if (n->output(i))
          bytes += (*out)[i].nbytes();
      if (bytes > limit && !replaces) {
        ctx.note(kName, "kept " + n->describe() + ": its result (" +
                            std::to_string(bytes) +
                            " bytes) exceeds the fold limit of " +
                            std::to_string(limit) + " bytes");
        continue;
      }
      INGOT_RETURN_IF_ERROR(
          replace_by_initializers(g, n, std::move(out).value()));
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> make_fold_constants() {
  return std::make_unique<FoldConstants>();
}

} // namespace ingot::passes
