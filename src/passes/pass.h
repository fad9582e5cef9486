// Copyright ingot authors. Apache-2.0.
//
// A graph optimization pass. Each pass lives in its own file (src/passes/<name>.cc) and says in
// its header comment the pattern it matches, what it produces and what it refuses and why.
// A pass must never change results beyond float rounding, must be deterministic, and must keep
// graph input/output names. Fused nodes record the original nodes they absorbed
// (Node::absorb_origins) so tools can show where a fused node came from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ingot::passes {

struct PassOptions {
  /// Constant folding: do not fold a node whose outputs would exceed this many bytes in total
  /// (weights must not balloon, e.g. an Expand of a scalar to a huge tensor).
  size_t fold_size_limit_bytes = 1 << 20;
};

/// What passes report while running: refusals ("fold_bn: refused BatchNormalization 'bn3':
/// statistics are not constant") and counts, printed by --verbose builds and `ingot inspect`.
class PassContext {
 public:
  explicit PassContext(PassOptions options = {}) : options_(options) {}
  const PassOptions& options() const { return options_; }
  void note(const std::string& pass, const std::string& message) { notes_.push_back(pass + ": " + message); }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  PassOptions options_;
  std::vector<std::string> notes_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  /// Stable name, used by --disable-pass and in dumps: "fold_constants", "fuse_conv_bias_act".
  virtual const char* name() const = 0;
  /// Rewrites `g` in place; returns whether anything changed.
  virtual Result<bool> run(ir::Graph& g, PassContext& ctx) = 0;
};

/// Ops added by fusion passes live in this domain (opset 1), e.g. ingot::FusedConv.
inline constexpr const char* kIngotDomain = "ingot";

}  // namespace ingot::passes
