// Copyright ingot authors. Apache-2.0.
//
// The per-tactic cache of plans (descriptors, chosen algorithm, cuDNN graphs) that the CUDA
// tactics fill on a shape's first call and read on every later one: lookups take no lock
// (entries never change once published, the count is released after the entry is written),
// inserts take a mutex. Fixed capacity: when full, the caller keeps its plan for that call.
// `Plan` has a member `key` comparable with ==.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

namespace ingot::backend::cuda {

template <class Plan, int kCapacity = 32>
class PlanCache {
 public:
  template <class Key>
  const Plan* find(const Key& key) const {
    const int n = count_.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i)
      if (slots_[static_cast<size_t>(i)]->key == key) return slots_[static_cast<size_t>(i)].get();
    return nullptr;
  }

  /// The cached plan for plan->key (this one, taken over, or an earlier one); nullptr when the
  /// cache is full (the plan then stays with the caller).
  const Plan* insert(std::unique_ptr<Plan>& plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (const Plan* p = find(plan->key)) return p;
    const int n = count_.load(std::memory_order_relaxed);
    if (n == kCapacity) return nullptr;
    slots_[static_cast<size_t>(n)] = std::move(plan);
    count_.store(n + 1, std::memory_order_release);
    return slots_[static_cast<size_t>(n)].get();
  }

 private:
  std::mutex mu_;
  std::array<std::unique_ptr<Plan>, kCapacity> slots_{};
  std::atomic<int> count_{0};
};

}  // namespace ingot::backend::cuda
