// Copyright ingot authors. Apache-2.0.
//
// Layout selection: 2-D convolutions may run channels-last (NHWC activations, KRSC weights),
// the layout tensor-core convolution kernels read. The pass rewrites each eligible Conv /
// ingot::FusedConv into FusedConv{channels_last=1} (and each int8 / fp8 ingot::QuantConv into
// QuantConv{channels_last=1}) between Transposes, converts its weights once, then cancels every
// Transpose pair that undoes itself, so a chain of convolutions (and their fused
// bias/residual/activation epilogues, and per-tensor Q/DQ between quantized ones) stays
// channels-last end to end and reformats remain only where the region meets a channels-first op.
// The remaining reformats are ordinary Transpose steps, visible in the engine's layer list.
//
// Modes: "auto" turns a conv channels-last when it computes in fp16/bf16 or is an 8-bit
// QuantConv, and the backend has a real (not host-fallback) tactic for the channels-last node;
// "nhwc" does it for every 2-D float or 8-bit conv the backend can run that way; "nchw" leaves
// layouts alone.
#pragma once

#include <string>
#include <vector>

#include "backend/tactic.h"
#include "builder/autotune.h"
#include "core/status.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace ingot::builder {

struct LayoutReport {
  int channels_last_convs = 0;  ///< convolutions now channels-last
  int reformats = 0;            ///< Transpose steps left at region boundaries
  std::vector<std::string> reformat_values;  ///< their outputs' names
  double nchw_ms = -1, nhwc_ms = -1;  ///< measured totals when "auto" timed both layouts
};

/// What "auto" needs to time both layouts (the autotuner's cache and options). Without it, or on
/// a backend that does not time, or with shapes the graph does not fix, "auto" follows the rule
/// above.
struct LayoutTiming {
  TimingCache* cache = nullptr;
  const TuneOptions* options = nullptr;
  std::string identity;
  TuneStats* stats = nullptr;
};

/// The best time (ms) of `n`'s capturable device tactics (no host fallback) at its own shapes, from the
/// timing cache or measured: what the layout choice and the timed fusions compare. +inf when no such
/// tactic runs or a shape is not concrete.
Result<double> measured_best_ms(const backend::Backend& be, const ir::Node& n, const LayoutTiming& timing);

/// In "auto" mode with timing: every eligible convolution is timed in both layouts (best tactic
/// each), the transposes the channels-last region would need at its edges are timed too, and the
/// region is made only when its total is faster.
Status choose_conv_layout(ir::Graph& g, const backend::Backend& be, const std::string& mode, LayoutReport* report,
                          const LayoutTiming* timing = nullptr);

/// After choose_conv_layout made channels-last regions: where a region ends in a view chain (a
/// 1-D conv's [N,1,W,C] transposed back, squeezed, then permuted by the model to [N,W,C]), the
/// chain is one Reshape and no data moves (simplify_algebra, then dead nodes go).
/// `report` (choose_conv_layout's): its reformats are counted again afterwards.
Status simplify_region_edges(ir::Graph& g, passes::PassContext& ctx, LayoutReport* report = nullptr);

}  // namespace ingot::builder
