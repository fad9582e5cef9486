// Copyright ingot authors. Apache-2.0.
//
// Factories for every pass; each is defined in src/passes/<name>.cc.
#pragma once

#include <memory>

#include "passes/pass.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_remove_noops();                   // remove_noops.cc
std::unique_ptr<Pass> make_fold_constants();                 // fold_constants.cc
std::unique_ptr<Pass> make_eliminate_common_subexpressions(); // eliminate_common_subexpressions.cc
std::unique_ptr<Pass> make_remove_dead_nodes();              // remove_dead_nodes.cc

}  // namespace ingot::passes
