// Copyright ingot authors. Apache-2.0.
//
// The default optimization pipeline: the one list that says which passes run, in which order,
// and why there.
#include "passes/pass_manager.h"
#include "passes/passes.h"

namespace ingot::passes {

PassManager default_pipeline() {
  PassManager pm;
  // Cleanup first so later patterns see the real dataflow: Identity/Dropout and no-op
  // Reshape/Transpose/Cast/... would otherwise sit between the nodes a fusion looks for.
  // Folding and cleanup feed each other (folding makes shapes known, which makes more no-ops
  // visible), so they run together to a fixed point.
  {
    std::vector<std::unique_ptr<Pass>> v;
    v.push_back(make_remove_noops());
    v.push_back(make_fold_constants());
    v.push_back(make_eliminate_common_subexpressions());
    v.push_back(make_remove_dead_nodes());
    pm.add_fixed_point(std::move(v));
  }
  return pm;
}

}  // namespace ingot::passes
