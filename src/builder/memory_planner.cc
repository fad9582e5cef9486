// Copyright ingot authors. Apache-2.0.
//
// Offset assignment is 2D strip packing (time × bytes), NP-hard in general; we use the greedy
// heuristics that work well on DNN lifetimes (Pisarchyk & Lee, "Efficient Memory Management for
// Deep Neural Net Inference", 2020): place buffers in a fixed order, each at the gap that fits
// it best among already-placed buffers whose lifetimes overlap. No single order wins on every
// graph, so a few orders (and best fit / first fit) are tried and the smallest arena is kept.
// Everything is deterministic: orders break ties by index, gaps by offset.
//
// Honoured in-place requests merge tensors into one "block" (a chain A -> B -> C all sharing
// one offset); the packer only ever sees blocks.
#include "builder/memory_planner.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace ingot::builder {
namespace {

uint64_t normalize_alignment(uint64_t alignment) {
  if (alignment <= 1) return 1;
  uint64_t a = 1;
  while (a < alignment && a < (uint64_t{1} << 63)) a <<= 1;
  return a;
}

uint64_t align_up(uint64_t bytes, uint64_t alignment) {
  const uint64_t mask = alignment - 1;
  if (bytes > UINT64_MAX - mask) return UINT64_MAX & ~mask;  // saturate rather than wrap
  return (bytes + mask) & ~mask;
}

bool lifetimes_overlap(int a_first, int a_last, int b_first, int b_last) {
  return a_first <= b_last && b_first <= a_last;
}

// A set of tensors sharing one offset: one tensor, or an in-place chain.
struct Block {
  std::vector<int> members;  // in chain order
  uint64_t bytes = 0;        // aligned, the largest member
  int first = 0;
  int last = 0;
};

struct Planner {
  std::vector<TensorLifetime> t;  // normalized copy (last >= first)
  std::vector<uint64_t> aligned;
  std::vector<int> block_of;        // tensor -> index into blocks (-1: zero bytes)
  std::vector<int> overwritten_by;  // tensor -> tensor that took it in place, or -1
  std::vector<Block> blocks;
  int inplace_reuses = 0;

  // Merges t's block into i's when the request is legal. Both blocks are chains; i must be
  // the tail of its chain and t the head of its own, and apart from the (i, t) pair itself no
  // two tensors of the merged chain may be live at once (they would share bytes).
  bool try_inplace(int ti, int ii) {
    const TensorLifetime& a = t[ii];
    const TensorLifetime& b = t[ti];
    if (b.bytes == 0 || a.bytes == 0 || b.bytes > a.bytes || a.last != b.first) return false;
    if (overwritten_by[ii] != -1) return false;
    const int bi = block_of[ii], bt = block_of[ti];
    if (bi == bt) return false;
    if (blocks[bt].members.front() != ti || blocks[bi].members.back() != ii) return false;
    for (int x : blocks[bi].members)
      for (int y : blocks[bt].members) {
        if (x == ii && y == ti) continue;
        if (lifetimes_overlap(t[x].first, t[x].last, t[y].first, t[y].last)) return false;
      }
    Block& into = blocks[bi];
    Block& from = blocks[bt];
    for (int y : from.members) {
      into.members.push_back(y);
      block_of[y] = bi;
    }
    into.bytes = std::max(into.bytes, from.bytes);
    into.first = std::min(into.first, from.first);
    into.last = std::max(into.last, from.last);
    from.members.clear();
    overwritten_by[ii] = ti;
    ++inplace_reuses;
    return true;
  }

  // Max over steps of the bytes that must exist at once. Inside a block only one member's
  // bytes count per step (an in-place pair shares them), the largest live one.
  uint64_t lower_bound() const {
    std::vector<int> steps;
    for (const Block& b : blocks)
      for (int m : b.members) steps.push_back(t[m].first);  // the peak is at some producing step
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    uint64_t best = 0;
    for (int s : steps) {
      uint64_t sum = 0;
      for (const Block& b : blocks) {
        if (b.members.empty() || s < b.first || s > b.last) continue;
        uint64_t live = 0;
        for (int m : b.members)
          if (t[m].first <= s && s <= t[m].last) live = std::max(live, aligned[m]);
        sum += live;
      }
      best = std::max(best, sum);
    }
    return best;
  }
};

// Places blocks in `order`; each goes into the gap between overlapping, already-placed blocks
// that wastes least (best fit) or comes first (first fit), else on top of them.
uint64_t pack(const std::vector<Block>& blocks, const std::vector<int>& order, bool best_fit,
              std::vector<uint64_t>* offsets) {
  offsets->assign(blocks.size(), 0);
  std::vector<int> placed;
  placed.reserve(order.size());
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of overlapping placed blocks
  uint64_t arena = 0;
  for (int bi : order) {
    const Block& b = blocks[bi];
    busy.clear();
    for (int pi : placed) {
      const Block& p = blocks[pi];
      if (lifetimes_overlap(b.first, b.last, p.first, p.last))
        busy.emplace_back((*offsets)[pi], (*offsets)[pi] + p.bytes);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t chosen = 0, chosen_gap = UINT64_MAX;
    bool found = false;
    uint64_t cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor) {
        const uint64_t gap = begin - cursor;
        if (gap >= b.bytes && (!found || (best_fit && gap < chosen_gap))) {
          chosen = cursor;
          chosen_gap = gap;
          found = true;
          if (!best_fit) break;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (!found) chosen = cursor;
    (*offsets)[bi] = chosen;
    arena = std::max(arena, chosen + b.bytes);
    placed.push_back(bi);
  }
  return arena;
}

// The orders the packer tries. No one order wins everywhere: biggest-first is best on CNNs
// (a few huge early activations), time order on transformers (equal-sized tensors where the
// only question is which slot a long-lived residual lands in).
std::vector<std::vector<int>> candidate_orders(const std::vector<Block>& B, const std::vector<int>& live) {
  auto length = [&](int b) { return B[b].last - B[b].first; };
  // Biggest first: large buffers are the hardest to fit into gaps later.
  std::vector<int> by_size = live;
  std::sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    if (B[a].bytes != B[b].bytes) return B[a].bytes > B[b].bytes;
    if (length(a) != length(b)) return length(a) > length(b);
    if (B[a].first != B[b].first) return B[a].first < B[b].first;
    return a < b;
  });
  // Longest-lived first: they constrain every step they span.
  std::vector<int> by_length = live;
  std::sort(by_length.begin(), by_length.end(), [&](int a, int b) {
    if (length(a) != length(b)) return length(a) > length(b);
    if (B[a].bytes != B[b].bytes) return B[a].bytes > B[b].bytes;
    if (B[a].first != B[b].first) return B[a].first < B[b].first;
    return a < b;
  });
  // Greedy by breadth: the busiest steps set the arena, so their tensors go first, biggest
  // first within a step. The busiest steps are among the producing steps.
  std::vector<int> steps;
  for (int b : live) steps.push_back(B[b].first);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<std::pair<uint64_t, int>> breadth;  // (live bytes, step)
  for (int s : steps) {
    uint64_t sum = 0;
    for (int b : live)
      if (B[b].first <= s && s <= B[b].last) sum += B[b].bytes;
    breadth.emplace_back(sum, s);
  }
  std::stable_sort(breadth.begin(), breadth.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<int> by_breadth;
  std::vector<char> taken(B.size(), 0);
  for (const auto& entry : breadth)
    for (int b : by_size)
      if (!taken[b] && B[b].first <= entry.second && entry.second <= B[b].last) {
        taken[b] = 1;
        by_breadth.push_back(b);
      }
  // Time order, as a linear-scan allocator would see them.
  std::vector<int> by_first = live;
  std::stable_sort(by_first.begin(), by_first.end(), [&](int a, int b) { return B[a].first < B[b].first; });
  return {by_size, by_length, by_breadth, by_first};
}

}  // namespace

MemoryAssignment plan_memory(const std::vector<TensorLifetime>& tensors, uint64_t alignment) {
  const uint64_t align = normalize_alignment(alignment);
  const int n = static_cast<int>(tensors.size());
  Planner p;
  p.t = tensors;
  p.aligned.resize(n);
  p.block_of.assign(n, -1);
  p.overwritten_by.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    TensorLifetime& x = p.t[i];
    x.last = std::max(x.last, x.first);
    p.aligned[i] = align_up(x.bytes, align);
    if (x.bytes == 0) continue;
    p.block_of[i] = static_cast<int>(p.blocks.size());
    p.blocks.push_back(Block{{i}, p.aligned[i], x.first, x.last});
  }

  // Requests in time order, so a chain grows from its head.
  std::vector<int> requests;
  for (int i = 0; i < n; ++i) {
    const int src = p.t[i].inplace_of;
    if (src >= 0 && src < n && src != i && p.t[i].bytes > 0) requests.push_back(i);
  }
  std::stable_sort(requests.begin(), requests.end(), [&](int a, int b) { return p.t[a].first < p.t[b].first; });
  for (int i : requests) p.try_inplace(i, p.t[i].inplace_of);

  std::vector<int> live_blocks;
  for (int b = 0; b < static_cast<int>(p.blocks.size()); ++b)
    if (!p.blocks[b].members.empty()) live_blocks.push_back(b);

  std::vector<uint64_t> best_offsets, offsets;
  uint64_t best_arena = UINT64_MAX;
  for (const std::vector<int>& order : candidate_orders(p.blocks, live_blocks)) {
    for (bool best_fit : {true, false}) {
      const uint64_t arena = pack(p.blocks, order, best_fit, &offsets);
      if (arena < best_arena) {
        best_arena = arena;
        best_offsets = offsets;
      }
    }
  }
  // When no fixed order reaches the lower bound, a bounded, seeded local search perturbs the
  // best order (swapping nearby blocks) and keeps improvements. Small graphs, where one badly
  // placed tensor is a large share of the arena, gain the most; the budget keeps big graphs fast.
  const uint64_t bound = p.lower_bound();
  if (best_arena > bound && live_blocks.size() > 2) {
    const size_t m = live_blocks.size();
    const size_t budget = std::min<size_t>(400, 4000000 / (m * m + 1));
    std::vector<int> order = candidate_orders(p.blocks, live_blocks)[0];
    std::mt19937 rng(12345);
    std::vector<int> best_order = order;
    for (size_t it = 0; it < budget && best_arena > bound; ++it) {
      order = best_order;
      const int swaps = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < swaps; ++k) {
        size_t a = rng() % m, b = std::min(m - 1, a + 1 + rng() % 4);
        std::swap(order[a], order[b]);
      }
      for (bool best_fit : {true, false}) {
        const uint64_t arena = pack(p.blocks, order, best_fit, &offsets);
        if (arena < best_arena) {
          best_arena = arena;
          best_offsets = offsets;
          best_order = order;
        }
      }
    }
  }
  MemoryAssignment out;
  out.offsets.assign(n, 0);
  for (int i = 0; i < n; ++i)
    if (p.block_of[i] >= 0) out.offsets[i] = best_offsets[p.block_of[i]];
  out.arena_bytes = live_blocks.empty() ? 0 : best_arena;
  out.lower_bound_bytes = p.lower_bound();
  out.inplace_reuses = p.inplace_reuses;
  return out;
}

}  // namespace ingot::builder
