// Copyright ingot authors. Apache-2.0.
//
// A stand-in tactic for tests of backend-aware passes: it has a name and says whether it is the
// host fallback (what split_fusions and precision lowering ask); it never runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/tactic.h"

namespace ingot::testing_util {

class NamedTactic : public backend::Tactic {
 public:
  NamedTactic(std::string name, bool fallback) : name_(std::move(name)), fallback_(fallback) {}
  std::string name() const override { return name_; }
  bool supports(const ir::Node&, const std::vector<ir::TensorType>&) const override { return true; }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }
  Status enqueue(backend::StepIO&) const override { return internal_error("not run in these tests"); }
  bool capturable() const override { return !fallback_; }
  bool is_host_fallback() const override { return fallback_; }

 private:
  std::string name_;
  bool fallback_;
};

}  // namespace ingot::testing_util
