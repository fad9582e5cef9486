// Copyright ingot authors. Apache-2.0.
//
// Structural checks of a graph, run between passes in debug builds (and by tests): every node
// input is defined (graph input, initializer, earlier node output, or outer scope), values have
// one producer, use lists agree with node inputs, nodes are in topological order, graph outputs
// exist. Errors name the node and value.
#pragma once

#include "core/status.h"
#include "ir/graph.h"

namespace ingot::ir {

Status verify_graph(const Graph& g);

}  // namespace ingot::ir
