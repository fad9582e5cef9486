// Copyright ingot authors. Apache-2.0.
//
// The Plan: what the builder produces and the engine file stores. It is the contract between
// builder/, engine/ and runtime/:
//   - the optimized graph the steps execute (its initializers are the engine's weights),
//   - one Step per node, naming the backend tactic chosen for it and the tactic's parameters,
//   - the memory plan: an arena offset for every intermediate, sized for the profile maximum,
//   - the optimization profiles and the I/O description.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::builder {

/// min/opt/max dims for one input of one profile.
struct ProfileDims {
  std::string input;
  Shape64 min, opt, max;
};

struct Profile {
  std::vector<ProfileDims> inputs;
  /// The entry for `input`, or nullptr.
  const ProfileDims* find(const std::string& input) const {
    for (const auto& d : inputs)
      if (d.input == input) return &d;
    return nullptr;
  }
};

/// How a value of the graph is stored at run time.
enum class Storage : uint8_t {
  kBinding = 0,   ///< a graph input or output: memory given by the caller (set_tensor_address)
  kArena = 1,     ///< an intermediate at arena_offset in the context's arena
  kWeight = 2,    ///< an initializer, in the engine's read-only weights region
  kDynamic = 3,   ///< size unknown until run time (data-dependent): allocated per run
  /// An intermediate that only a reshape into a graph output reads: it lives in that output's
  /// binding (ValuePlan::offset is the output's index in Plan::values), seen with its own shape,
  /// so the reshape runs in place instead of copying into the binding.
  kOutputView = 4,
};

/// Planned storage of one value, indexed like Plan::values.
struct ValuePlan {
  const ir::Value* value = nullptr;  ///< in Plan::graph
  Storage storage = Storage::kArena;
  uint64_t offset = 0;     ///< arena offset (kArena), weight offset (kWeight), output value (kOutputView)
  uint64_t max_bytes = 0;  ///< bytes at the profile maximum (kArena, kWeight)
  int first_step = -1;     ///< step producing it (-1: before the first step)
  int last_step = -1;      ///< last step reading it (graph outputs: the last step)
};

struct Step {
  const ir::Node* node = nullptr;  ///< in Plan::graph
  std::string tactic;              ///< backend tactic name, e.g. "cpu.reference"
  std::vector<uint8_t> params;     ///< the tactic's serialized parameters
  uint64_t workspace_bytes = 0;
};

struct MemorySummary {
  uint64_t arena_bytes = 0;        ///< size of one context's arena
  uint64_t weight_bytes = 0;       ///< engine weights, shared by every context
  uint64_t lower_bound_bytes = 0;  ///< largest sum of simultaneously live arena tensors
  uint64_t workspace_bytes = 0;    ///< largest step workspace
};

struct Plan {
  std::shared_ptr<ir::Graph> graph;
  std::vector<Step> steps;
  std::vector<ValuePlan> values;
  std::vector<Profile> profiles;
  MemorySummary memory;
  std::string backend;  ///< "cpu" or "cuda"
  std::string gpu_arch; ///< "" for cpu, e.g. "sm_90"
  /// Keeps borrowed weight memory alive (a parsed model, a mapped engine file).
  std::vector<std::shared_ptr<const void>> storage;

  /// Index in `values` of a value, or -1.
  int value_index(const ir::Value* v) const {
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i].value == v) return static_cast<int>(i);
    return -1;
  }
};

}  // namespace ingot::builder
