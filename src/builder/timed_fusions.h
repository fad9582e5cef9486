// Copyright ingot authors. Apache-2.0.
//
// Fusions the builder decides by measurement, after the layout pass: a fused node replaces the steps
// it stands for only where the backend has a device tactic for it and, when the build times on a
// device, where its best tactic measured no slower than the best tactics of those steps together.
// A fused kernel wins at one size and loses at another (a squeeze-excite block of RegNetY-16GF at
// batch 64 reads its FC weights once per image), and which it is depends on the GPU: the timing
// cache answers, as it does for the layout choice.
#pragma once

#include <string>
#include <vector>

#include "backend/tactic.h"
#include "builder/layout.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace ingot::builder {

struct TimedFusionReport {
  int fused = 0;          ///< blocks made one node
  int kept_slower = 0;    ///< blocks left as they were because the fused node measured slower
  double fused_ms = 0;    ///< measured totals of the blocks that were compared (both sides)
  double unfused_ms = 0;
};

/// fuse_squeeze_excite with the backend's check: a device tactic for the fused node (never a host
/// round trip), and with `timing` (null: not timed) on a backend that times on a device, the fused
/// node's best time <= the sum of the replaced steps' best times. Unmeasurable sides (open shapes, a
/// step with no device tactic of its own) do not block the fusion. Notes go to `ctx`.
Status fuse_squeeze_excite_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                        passes::PassContext& ctx, TimedFusionReport* report);

/// fuse_conv_pool with the same check: a convolution and the max pooling after it become one
/// ingot::FusedConvPool where the backend runs that node on the device and, timed, it measured no slower
/// than the two steps. Never on a host backend (the CPU's): its reference gains nothing by it.
Status fuse_conv_pool_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                   passes::PassContext& ctx, TimedFusionReport* report);

/// fuse_concat_pointwise with the same check: a Concat moves into the Pointwise reading it where the
/// backend runs the fused node and, timed, it measured no slower than the Concat and the Pointwise.
Status fuse_concat_pointwise_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                          passes::PassContext& ctx, TimedFusionReport* report);

}  // namespace ingot::builder
