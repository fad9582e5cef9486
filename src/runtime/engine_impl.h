// Copyright ingot authors. Apache-2.0.
//
// The runtime's Engine and ExecutionContext behind the public interfaces in
// include/ingot/engine.h.
#pragma once

#include <memory>
#include <vector>

#include "backend/tactic.h"
#include "builder/plan.h"
#include "ingot/engine.h"

namespace ingot::runtime {

/// Creates an Engine from a plan (built or read from a file); rebuilds each step's tactic.
Result<std::shared_ptr<Engine>> make_engine(builder::Plan plan);

}  // namespace ingot::runtime
