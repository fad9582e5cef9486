// Copyright ingot authors. Apache-2.0.
//
// Stand-ins for tests of backend-aware passes: a tactic that has a name and says whether it is the
// host fallback (what split_fusions and precision lowering ask), never run; and a backend whose
// "device" tactic takes the nodes a predicate accepts, every node also having the host fallback.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/device.h"
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

/// A backend named "test" on the host device: `on_device(node, input types)` says whether the
/// node has its "test.device" tactic; every node has "test.host_fallback". Tactics are not created
/// from names.
class PredicateBackend final : public backend::Backend {
 public:
  using Predicate = std::function<bool(const ir::Node&, const std::vector<ir::TensorType>&)>;
  explicit PredicateBackend(Predicate on_device) : on_device_(std::move(on_device)) {}
  std::string name() const override { return "test"; }
  backend::Device& device() const override { return backend::host_device(); }
  std::vector<std::unique_ptr<backend::Tactic>> candidates(const ir::Node& n,
                                                           const std::vector<ir::TensorType>& in) const override {
    std::vector<std::unique_ptr<backend::Tactic>> v;
    if (on_device_(n, in)) v.push_back(std::make_unique<NamedTactic>("test.device", false));
    v.push_back(std::make_unique<NamedTactic>("test.host_fallback", true));
    return v;
  }
  Result<std::unique_ptr<backend::Tactic>> create_tactic(const std::string& n,
                                                         const std::vector<uint8_t>&) const override {
    return unsupported(n);
  }

 private:
  Predicate on_device_;
};

}  // namespace ingot::testing_util
