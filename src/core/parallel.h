// Copyright ingot authors. Apache-2.0.
//
// Host loops over large arrays (weight conversion and filling at model load) split across the
// machine's cores: fn(lo, hi) for contiguous ranges covering [0, n), on the caller's thread alone
// when n is small.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace ingot {

template <class Fn>
void parallel_ranges(int64_t n, Fn&& fn, int64_t min_parallel = int64_t{1} << 20) {
  const int64_t threads =
      n < min_parallel ? 1 : std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back([&fn, n, t, threads] { fn(n * t / threads, n * (t + 1) / threads); });
  fn(int64_t{0}, n / threads);
  for (std::thread& th : pool) th.join();
}

}  // namespace ingot
