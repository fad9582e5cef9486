// Copyright ingot authors. Apache-2.0.
//
// Concrete shapes of every value of a graph for given input shapes — the builder runs it at
// each profile's min/opt/max, the runtime whenever input shapes change. It runs each node's
// registry inference with the dims known so far; small nodes whose inputs are all known on the
// host (initializers, or values computed here — Shape → Gather → Concat chains) are executed
// on the CPU reference kernels so the shape tensors they produce feed Reshape/Expand/... Device
// data (graph inputs and what depends on them) is never touched. Values whose size depends on
// data (NonZero, Unique, ...) stay unknown: `dynamic`.
#pragma once

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::builder {

struct ShapeState {
  std::unordered_map<const ir::Value*, Shape64> shapes;
  std::unordered_map<const ir::Value*, Tensor> host_values;
  std::unordered_set<const ir::Value*> dynamic;
  /// For dynamic values: what inference knows (rank and the dims that do not depend on data).
  std::unordered_map<const ir::Value*, ir::Shape> partial;
};

/// Host-executed nodes may have at most this many elements in every input and output.
inline constexpr int64_t kHostValueLimit = 1 << 14;

Result<ShapeState> propagate_shapes(const ir::Graph& g, const std::map<const ir::Value*, Shape64>& input_shapes);

}  // namespace ingot::builder
