// Copyright ingot authors. Apache-2.0.
#include "builder/memory_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

namespace ingot::builder {
namespace {

uint64_t align_up(uint64_t bytes, uint64_t a) { return (bytes + a - 1) / a * a; }

bool overlap_in_time(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first <= b.last && b.first <= a.last;
}

// The in-place exception the header allows: `t` overwrites its requested input `i`, legally,
// and the planner gave them the same offset.
bool is_honoured_pair(const std::vector<TensorLifetime>& ts, const MemoryAssignment& m, int t, int i) {
  if (ts[t].inplace_of != i) return false;
  return ts[t].bytes > 0 && ts[t].bytes <= ts[i].bytes && ts[i].last == ts[t].first && m.offsets[t] == m.offsets[i];
}

// Checks the assignment from first principles, step by step and pair by pair; returns the
// number of honoured in-place pairs it saw.
int check_assignment(const std::vector<TensorLifetime>& ts, const MemoryAssignment& m, uint64_t alignment) {
  const int n = static_cast<int>(ts.size());
  EXPECT_EQ(m.offsets.size(), ts.size());
  if (static_cast<int>(m.offsets.size()) != n) return 0;
  uint64_t end = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(m.offsets[i] % alignment, 0u) << "tensor " << i;
    if (ts[i].bytes == 0) {
      EXPECT_EQ(m.offsets[i], 0u) << "zero-byte tensor " << i;
    }
    end = std::max(end, m.offsets[i] + ts[i].bytes);
  }
  EXPECT_GE(m.arena_bytes, end);

  std::set<std::pair<int, int>> honoured;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      if (ts[a].bytes == 0 || ts[b].bytes == 0 || !overlap_in_time(ts[a], ts[b])) continue;
      const bool disjoint_bytes =
          m.offsets[a] + ts[a].bytes <= m.offsets[b] || m.offsets[b] + ts[b].bytes <= m.offsets[a];
      if (disjoint_bytes) continue;
      if (is_honoured_pair(ts, m, a, b) || is_honoured_pair(ts, m, b, a)) {
        honoured.insert({a, b});
        continue;
      }
      ADD_FAILURE() << "tensors " << a << " [" << ts[a].first << "," << ts[a].last << "] @" << m.offsets[a] << "+"
                    << ts[a].bytes << " and " << b << " [" << ts[b].first << "," << ts[b].last << "] @" << m.offsets[b]
                    << "+" << ts[b].bytes << " share bytes while both live";
    }

  // Lower bound, recomputed by walking every step: live aligned bytes, an honoured pair once.
  int lo = 0, hi = -1;
  for (const auto& t : ts) {
    lo = std::min(lo, t.first);
    hi = std::max(hi, std::max(t.first, t.last));
  }
  uint64_t bound = 0;
  for (int s = lo; s <= hi; ++s) {
    uint64_t sum = 0;
    for (const auto& t : ts)
      if (t.bytes > 0 && t.first <= s && s <= t.last) sum += align_up(t.bytes, alignment);
    for (const auto& [a, b] : honoured)
      if (ts[a].first <= s && s <= ts[a].last && ts[b].first <= s && s <= ts[b].last)
        sum -= std::min(align_up(ts[a].bytes, alignment), align_up(ts[b].bytes, alignment));
    bound = std::max(bound, sum);
  }
  EXPECT_EQ(m.lower_bound_bytes, bound);
  EXPECT_GE(m.arena_bytes, m.lower_bound_bytes);
  return static_cast<int>(honoured.size());
}

TEST(MemoryPlanner, ChainReusesMemoryTwoBuffersNotThree) {
  // A -> B -> C: A dies when B is made, so C can take A's place.
  std::vector<TensorLifetime> ts = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}};
  MemoryAssignment m = plan_memory(ts, 256);
  EXPECT_EQ(m.arena_bytes, 2048u);
  EXPECT_EQ(m.lower_bound_bytes, 2048u);
  EXPECT_EQ(m.offsets[0], m.offsets[2]);
  EXPECT_NE(m.offsets[0], m.offsets[1]);
  EXPECT_EQ(m.inplace_reuses, 0);
  check_assignment(ts, m, 256);
}

TEST(MemoryPlanner, InPlaceChainUsesOneBuffer) {
  std::vector<TensorLifetime> ts = {{1000, 0, 1}, {1000, 1, 2, 0}, {900, 2, 3, 1}};
  MemoryAssignment m = plan_memory(ts, 256);
  EXPECT_EQ(m.arena_bytes, 1024u);
  EXPECT_EQ(m.lower_bound_bytes, 1024u);
  EXPECT_EQ(m.offsets, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(m.inplace_reuses, 2);
  EXPECT_EQ(check_assignment(ts, m, 256), 2);
}

TEST(MemoryPlanner, RefusesIllegalInPlaceRequests) {
  // 1: bigger than its input. 3: its input (2) is still read after step 3. 5 and 6 both want
  // 4: only the first in time order gets it.
  std::vector<TensorLifetime> ts = {
      {512, 0, 1}, {1024, 1, 2, 0}, {512, 3, 5}, {512, 3, 4, 2}, {512, 6, 7}, {512, 7, 8, 4}, {512, 7, 8, 4},
  };
  MemoryAssignment m = plan_memory(ts, 256);
  EXPECT_EQ(m.inplace_reuses, 1);
  EXPECT_EQ(m.offsets[5], m.offsets[4]);
  EXPECT_NE(m.offsets[6], m.offsets[4]);
  EXPECT_NE(m.offsets[1], m.offsets[0]);
  EXPECT_NE(m.offsets[3], m.offsets[2]);
  EXPECT_EQ(check_assignment(ts, m, 256), 1);
  // Out-of-range and self references are ignored, not trusted.
  std::vector<TensorLifetime> bad = {{256, 0, 1, 7}, {256, 1, 2, 1}, {256, 1, 2, -5}};
  MemoryAssignment mb = plan_memory(bad, 256);
  EXPECT_EQ(mb.inplace_reuses, 0);
  EXPECT_EQ(mb.arena_bytes, 768u);
}

TEST(MemoryPlanner, AlignsEveryOffsetAndSkipsZeroByteTensors) {
  std::vector<TensorLifetime> ts = {{1, 0, 2}, {0, 0, 2}, {1, 0, 2}, {0, 1, 1}, {1, 1, 2}};
  MemoryAssignment m = plan_memory(ts, 256);
  EXPECT_EQ(m.arena_bytes, 768u);
  EXPECT_EQ(m.lower_bound_bytes, 768u);
  EXPECT_EQ(m.offsets[1], 0u);
  EXPECT_EQ(m.offsets[3], 0u);
  std::set<uint64_t> used = {m.offsets[0], m.offsets[2], m.offsets[4]};
  EXPECT_EQ(used, (std::set<uint64_t>{0, 256, 512}));
  check_assignment(ts, m, 256);

  MemoryAssignment empty = plan_memory({}, 256);
  EXPECT_EQ(empty.arena_bytes, 0u);
  EXPECT_EQ(empty.lower_bound_bytes, 0u);
}

// Random instances, with in-place requests made likely by pointing at inputs that die at the
// right step (and some that do not, or that are too small).
TEST(MemoryPlanner, RandomInstancesNeverShareLiveBytes) {
  std::mt19937 rng(20240611);
  int total_pairs = 0, total_reuses = 0;
  double worst_ratio = 1.0;
  for (int iter = 0; iter < 4000; ++iter) {
    const uint64_t alignment = uint64_t{1} << std::uniform_int_distribution<int>(0, 8)(rng);
    const int n = std::uniform_int_distribution<int>(0, 40)(rng);
    const int steps = std::uniform_int_distribution<int>(1, 30)(rng);
    std::vector<TensorLifetime> ts(n);
    for (auto& t : ts) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      t.bytes = kind == 0 ? 0 : std::uniform_int_distribution<uint64_t>(1, kind < 5 ? 600 : 5000)(rng);
      t.first = std::uniform_int_distribution<int>(0, steps - 1)(rng);
      t.last = t.first + std::uniform_int_distribution<int>(0, std::min(steps, kind == 9 ? steps : 5))(rng);
    }
    for (int i = 0; i < n; ++i) {
      const int roll = std::uniform_int_distribution<int>(0, 9)(rng);
      if (roll < 4) {
        std::vector<int> fits;
        for (int j = 0; j < n; ++j)
          if (j != i && ts[j].last == ts[i].first) fits.push_back(j);
        if (!fits.empty()) ts[i].inplace_of = fits[std::uniform_int_distribution<size_t>(0, fits.size() - 1)(rng)];
        if (ts[i].inplace_of >= 0 && roll < 3 && ts[i].bytes > ts[ts[i].inplace_of].bytes)
          ts[i].bytes = ts[ts[i].inplace_of].bytes;  // mostly make the size legal too
      } else if (roll == 4 && n > 0) {
        ts[i].inplace_of = std::uniform_int_distribution<int>(-2, n + 1)(rng);  // anything
      }
    }
    MemoryAssignment m = plan_memory(ts, alignment);
    const int pairs = check_assignment(ts, m, alignment);
    EXPECT_EQ(m.inplace_reuses, pairs) << "iteration " << iter;
    total_pairs += pairs;
    total_reuses += m.inplace_reuses;
    if (m.lower_bound_bytes > 0)
      worst_ratio = std::max(worst_ratio, static_cast<double>(m.arena_bytes) / m.lower_bound_bytes);
    MemoryAssignment again = plan_memory(ts, alignment);
    EXPECT_EQ(again.offsets, m.offsets) << "not deterministic at iteration " << iter;
    if (HasFailure()) {
      ADD_FAILURE() << "stopping at iteration " << iter;
      return;
    }
  }
  EXPECT_GT(total_reuses, 1000);  // the generator does exercise the in-place path
  std::printf("random: %d in-place pairs honoured; worst arena/lower bound %.3f\n", total_pairs, worst_ratio);
}

// Builds lifetimes one op (one step) at a time, like a topologically ordered graph.
class Program {
 public:
  int op(uint64_t bytes, std::initializer_list<int> inputs, int inplace_of = -1) {
    const int step = steps_++;
    for (int in : inputs) ts_[in].last = std::max(ts_[in].last, step);
    ts_.push_back({bytes, step, step, inplace_of});
    return static_cast<int>(ts_.size()) - 1;
  }
  // Pointwise op on one input that may overwrite it (the input dies here unless read later,
  // in which case the planner must refuse).
  int pointwise(int in) { return op(ts_[in].bytes, {in}, in); }
  const std::vector<TensorLifetime>& lifetimes() { return ts_; }

 private:
  std::vector<TensorLifetime> ts_;
  int steps_ = 0;
};

void report_and_check(const char* name, const std::vector<TensorLifetime>& ts) {
  MemoryAssignment m = plan_memory(ts, 256);
  check_assignment(ts, m, 256);
  const double ratio = static_cast<double>(m.arena_bytes) / m.lower_bound_bytes;
  std::printf("%s: %zu tensors, arena %llu bytes, lower bound %llu bytes, ratio %.4f, in-place %d\n", name, ts.size(),
              static_cast<unsigned long long>(m.arena_bytes), static_cast<unsigned long long>(m.lower_bound_bytes),
              ratio, m.inplace_reuses);
  EXPECT_LE(m.arena_bytes, m.lower_bound_bytes * 11 / 10) << name;
  EXPECT_GT(m.inplace_reuses, 0) << name;
}

// ResNet-50 at batch `n`, fp32, BN folded: bottlenecks whose input stays live across the block
// for the residual add; ReLUs and adds run in place.
std::vector<TensorLifetime> resnet50(uint64_t n) {
  Program p;
  const uint64_t f = 4 * n;
  int x = p.op(f * 64 * 112 * 112, {});  // conv1 (its input is a binding)
  x = p.pointwise(x);
  x = p.op(f * 64 * 56 * 56, {x});  // maxpool
  uint64_t hw = 56, cin = 64;
  struct Stage {
    uint64_t mid, out;
    int blocks, stride;
  };
  for (const Stage& s : {Stage{64, 256, 3, 1}, Stage{128, 512, 4, 2}, Stage{256, 1024, 6, 2}, Stage{512, 2048, 3, 2}}) {
    for (int b = 0; b < s.blocks; ++b) {
      const int stride = b == 0 ? s.stride : 1;
      const uint64_t ohw = hw / stride;
      int a = p.pointwise(p.op(f * s.mid * hw * hw, {x}));
      int c = p.pointwise(p.op(f * s.mid * ohw * ohw, {a}));
      int d = p.op(f * s.out * ohw * ohw, {c});
      int identity = b == 0 ? p.op(f * s.out * ohw * ohw, {x}) : x;  // projection shortcut
      int sum = p.op(f * s.out * ohw * ohw, {d, identity}, d);
      x = p.pointwise(sum);
      hw = ohw;
      cin = s.out;
    }
  }
  int pooled = p.op(f * cin, {x});
  p.op(f * 1000, {pooled});
  return p.lifetimes();
}

// Pre-LN transformer encoder layers (BERT-base sizes), fp16: separate Q/K/V projections,
// head transposes, S×S attention scores per head, residual adds in place.
std::vector<TensorLifetime> transformer(int layers, uint64_t batch, uint64_t seq) {
  Program p;
  const uint64_t e = 2, d = 768, heads = 12, ffn = 3072;
  const uint64_t act = e * batch * seq * d;
  int x = p.op(act, {});  // embeddings
  for (int l = 0; l < layers; ++l) {
    int ln1 = p.op(act, {x});
    int q = p.op(act, {ln1}), k = p.op(act, {ln1}), v = p.op(act, {ln1});
    int qt = p.op(act, {q}), kt = p.op(act, {k}), vt = p.op(act, {v});
    int scores = p.op(e * batch * heads * seq * seq, {qt, kt});
    int probs = p.pointwise(p.pointwise(scores));  // scale, softmax
    int ctx = p.op(act, {probs, vt});
    int merged = p.op(act, {ctx});
    int proj = p.op(act, {merged});
    int res1 = p.op(act, {proj, x}, proj);
    int ln2 = p.op(act, {res1});
    int up = p.pointwise(p.op(e * batch * seq * ffn, {ln2}));  // gelu in place
    int down = p.op(act, {up});
    x = p.op(act, {down, res1}, down);
  }
  p.op(act, {x});  // final layer norm
  return p.lifetimes();
}

// U-Net (256×256, fp32): every encoder level's output waits for its decoder level, so the
// long-lived skips nest around ever smaller activations.
std::vector<TensorLifetime> unet() {
  Program p;
  const uint64_t f = 4;
  std::vector<int> skips;
  uint64_t hw = 256;
  int x = -1;
  for (uint64_t c : {64, 128, 256, 512, 1024}) {
    x = x < 0 ? p.op(f * c * hw * hw, {}) : p.op(f * c * hw * hw, {x});
    x = p.pointwise(x);
    x = p.pointwise(p.op(f * c * hw * hw, {x}));
    if (c == 1024) break;
    skips.push_back(x);
    hw /= 2;
    x = p.op(f * c * hw * hw, {x});  // maxpool
  }
  for (uint64_t c : {512, 256, 128, 64}) {
    hw *= 2;
    int up = p.op(f * c * hw * hw, {x});
    int cat = p.op(f * 2 * c * hw * hw, {skips.back(), up});
    skips.pop_back();
    x = p.pointwise(p.op(f * c * hw * hw, {cat}));
    x = p.pointwise(p.op(f * c * hw * hw, {x}));
  }
  p.op(f * 2 * hw * hw, {x});
  return p.lifetimes();
}

TEST(MemoryPlanner, ResNet50LifetimesWithinTenPercentOfLowerBound) {
  report_and_check("resnet50 b1", resnet50(1));
  report_and_check("resnet50 b32", resnet50(32));
}

TEST(MemoryPlanner, TransformerLifetimesWithinTenPercentOfLowerBound) {
  report_and_check("bert-base 12 layers b1 s128", transformer(12, 1, 128));
  report_and_check("bert-base 12 layers b8 s512", transformer(12, 8, 512));
}

TEST(MemoryPlanner, UNetLifetimesWithinTenPercentOfLowerBound) { report_and_check("unet 256x256", unet()); }

TEST(MemoryPlanner, ThousandsOfTensorsPlanQuickly) {
  std::vector<TensorLifetime> ts;
  for (int i = 0; i < 16; ++i) {
    auto layer = transformer(12, 1, 128 + 32 * i);
    const int base = static_cast<int>(ts.size());
    const int shift = base == 0 ? 0 : ts.back().last + 1;
    for (auto t : layer) {
      t.first += shift;
      t.last += shift;
      if (t.inplace_of >= 0) t.inplace_of += base;
      ts.push_back(t);
    }
  }
  ASSERT_GT(ts.size(), 3000u);
  MemoryAssignment m = plan_memory(ts, 256);  // the test's timeout is the real check
  EXPECT_GE(m.arena_bytes, m.lower_bound_bytes);
  EXPECT_LE(m.arena_bytes, m.lower_bound_bytes * 11 / 10);
}

}  // namespace
}  // namespace ingot::builder
