// Copyright ingot authors. Apache-2.0.
//
// Lowering an imported graph to a Plan: optimize (passes/), validate the optimization
// profiles, propagate shapes at each profile's min/opt/max, choose a tactic per node from the
// target backend, plan the arena from lifetimes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <functional>

#include "builder/autotune.h"
#include "builder/layout.h"
#include "builder/split_fusions.h"
#include "builder/plan.h"
#include "builder/precision.h"
#include "passes/pass_manager.h"

namespace ingot::builder {

struct BuildOptions {
  std::string backend = "cpu";
  std::vector<Profile> profiles;
  passes::PipelineOptions pipeline;
  bool optimize = true;
  PrecisionOptions precision;
  TuneOptions tune;
  std::string conv_layout = "auto";  ///< see layout.h: auto, nhwc, nchw
  std::string timing_cache_file;  ///< read before and written after tactic selection when set
  /// false: a step left on the backend's host fallback is an error naming every such step.
  bool allow_host_fallback = true;
  /// Progress: phase ("optimize", "tactics", "memory"), steps done and total in it.
  std::function<void(const char* phase, int done, int total)> progress;
};

struct BuildReport {
  int nodes_before = 0;
  int fused_steps = 0;
  int tactics_considered = 0;
  PrecisionReport precision;
  TuneStats tune;
  LayoutReport layout;
  SplitReport split;
  /// Steps on the host fallback: "<op> '<node>' (<domain> opset N): why", in step order.
  std::vector<std::string> host_steps;
  size_t timing_cache_entries = 0;
  /// Wall seconds per build phase, in order ("optimize", "split", "precision", "layout",
  /// "tactics", "memory"): where a slow build spends its time.
  std::vector<std::pair<std::string, double>> phase_seconds;
  std::vector<std::string> notes;
};

Result<Plan> build_plan(std::shared_ptr<ir::Graph> graph, std::vector<std::shared_ptr<const void>> storage,
                        const BuildOptions& options, BuildReport* report = nullptr);

/// Whether `node`'s output 0 may overwrite its input 0 in place (elementwise, same size).
bool op_allows_in_place(const ir::Node& node);
/// Reshape, Flatten, Squeeze, Unsqueeze (default domain): every element stays where it is.
bool is_reshape_op(const ir::Node& node);

}  // namespace ingot::builder
