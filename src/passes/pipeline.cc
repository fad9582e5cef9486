// Copyright ingot authors. Apache-2.0.
//
// The default optimization pipeline: the one list that says which passes run,
// in which order, and why there.
#include "passes/pass_manager.h"
#include "passes/passes.h"

namespace ingot::passes {

PassManager default_pipeline() {
  PassManager pm;
  // 1. Cleanup and folding, first, so later patterns see the real dataflow:
  // Identity/Dropout
  //    and no-op Reshape/Transpose/Cast/... would otherwise sit between the
  //    nodes a fusion looks for. These feed each other (folding makes shapes
  //    known, which exposes no-ops; algebra leaves constant subexpressions; CSE
  //    and folding leave dead nodes), so they run together until none changes
  //    the graph. remove_dead_nodes is last so each round ends with a clean
  //    graph.
  {
    std::vector<std::unique_ptr<Pass>> v;
    v.push_back(make_remove_noops());
    v.push_back(make_fold_constants());
    v.push_back(make_simplify_algebra());
    v.push_back(make_eliminate_common_subexpressions());
    v.push_back(make_remove_dead_nodes());
    pm.add_fixed_point(std::move(v));
  }

  // 2. Fusion passes (fold BN into conv, conv/gemm + bias + activation,
  // pointwise chains) go
  //    here: after cleanup, so constant weights and a clean dataflow are what
  //    they see.

  // 3. Pattern recognition passes (LayerNorm, GELU, attention) go here: after
  // fusion of the
  //    simple producers, before precision assignment.

  return pm;
}

} // namespace ingot::passes
