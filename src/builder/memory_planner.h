// Copyright ingot authors. Apache-2.0.
//
// Assigns every arena tensor an offset in one block from its lifetime, so tensors that are
// never live at the same time share memory. Lifetimes are in step indices, inclusive: a tensor
// produced by step 3 and last read by step 7 is live over [3, 7].
#pragma once

#include <cstdint>
#include <vector>

namespace ingot::builder {

struct TensorLifetime {
  uint64_t bytes = 0;
  int first = 0;  ///< producing step
  int last = 0;   ///< last reading step (>= first)
  /// Index (into the same vector) of an input this tensor may overwrite in place: the op
  /// allows it (elementwise, same size) and that input's lifetime ends at `first`. -1: none.
  int inplace_of = -1;
};

struct MemoryAssignment {
  std::vector<uint64_t> offsets;  ///< one per tensor, multiples of the alignment
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;  ///< max over steps of the sum of live tensors' bytes (aligned)
  int inplace_reuses = 0;          ///< how many inplace_of requests were honoured
};

/// Plans offsets (alignment: a power of two, e.g. 256 for GPU-friendly addresses). The result
/// never places two tensors with overlapping lifetimes over the same bytes, except a tensor
/// and the input it is allowed to overwrite in place.
MemoryAssignment plan_memory(const std::vector<TensorLifetime>& tensors, uint64_t alignment = 256);

}  // namespace ingot::builder
