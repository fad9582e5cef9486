// Copyright ingot authors. Apache-2.0.
//
// Runs an ordered list of passes. The default list (default_pipeline in pipeline.cc) is the
// one place that says which passes run and why in that order.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ingot::passes {

struct PipelineOptions {
  PassOptions pass_options;
  /// Pass names to skip (unknown names are an error, so a typo does not silently keep a pass).
  std::set<std::string> disabled;
  /// When set, the IR text is written to <dir>/<NN>_<pass>.ir after every pass that changed
  /// the graph, and <dir>/00_input.ir before the first.
  std::string dump_dir;
  /// Run ir::verify_graph after every pass (always on in debug builds).
  bool verify = false;
};

/// One entry of the pipeline: a pass, or a group re-run until none of its passes changes the
/// graph (bounded by max_rounds).
struct PipelineStage {
  std::vector<std::unique_ptr<Pass>> passes;
  int max_rounds = 1;
};

class PassManager {
 public:
  void add(std::unique_ptr<Pass> pass);
  void add_fixed_point(std::vector<std::unique_ptr<Pass>> passes, int max_rounds = 4);
  /// Names of every pass, in order.
  std::vector<std::string> pass_names() const;
  Status run(ir::Graph& g, const PipelineOptions& options, PassContext& ctx) const;

 private:
  std::vector<PipelineStage> stages_;
};

/// The builder's default pipeline.
PassManager default_pipeline();

}  // namespace ingot::passes
