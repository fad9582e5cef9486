// Copyright ingot authors. Apache-2.0.
//
// The paged KV cache's bookkeeping (issue 22, item 2): which cache blocks each sequence's tokens
// live in, as vLLM's block manager keeps it. The cache is `num_blocks` blocks of `block_size`
// token slots (the device tensors are the runtime's; this class hands out block ids). A sequence
// owns a block table: slot s of the sequence is slot s % block_size of block table[s / block_size].
//
// Prefix caching: a block whose slots are all filled and computed (the caller says so with
// mark_computed after the forward step that wrote them) is immutable and is registered under a
// hash of its tokens chained with its predecessor's hash (so equal tokens after different
// prefixes never match); blocks still being computed are never shared. A new sequence whose prompt starts with cached blocks shares them (reference
// counts) and only computes the rest. A freed sequence's full blocks stay cached, least recently
// used first in line for reuse; its partial last block is freed. Allocation takes a free block
// first, else evicts the least recently used cached block nobody holds.
//
// Failure leaves everything as it was: a prompt that does not fit allocates nothing (the
// scheduler preempts or waits), an append that needs a block when none is left changes nothing.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace ingot::llm {

struct KvCacheConfig {
  int64_t num_blocks = 0;
  int32_t block_size = 16;
  bool prefix_caching = true;
};

struct KvCacheStats {
  int64_t blocks_total = 0;
  int64_t blocks_in_use = 0;      ///< held by at least one sequence
  int64_t blocks_cached_idle = 0; ///< cached full blocks nobody holds (reusable, evictable)
  int64_t prefix_hit_tokens = 0;  ///< prompt tokens served from cached blocks, since creation
  int64_t prompt_tokens = 0;      ///< prompt tokens added, since creation
  int64_t evictions = 0;          ///< cached blocks reused for other tokens
};

class KvBlockManager {
 public:
  /// Errors on num_blocks < 1 or block_size < 1.
  static Result<KvBlockManager> create(const KvCacheConfig& config);

  /// Blocks a prompt of `prompt_len` tokens needs beyond the cached prefix of `prompt`.
  int64_t blocks_needed(const std::vector<int32_t>& prompt) const;
  /// Starts sequence `id` with its prompt: cached full blocks of its prefix are shared, the rest
  /// allocated. `*cached_tokens` gets how many leading tokens need no computing (at most
  /// prompt.size() - 1: the last token is always computed, for its logits). kOutOfMemory,
  /// with nothing allocated, when the blocks do not fit; kInvalidArgument for a known id or an
  /// empty prompt.
  Status add_sequence(int64_t id, const std::vector<int32_t>& prompt, int64_t* cached_tokens);
  /// Whether one more token of `id` fits (its last block has a free slot, or a block is free).
  bool can_append(int64_t id) const;
  /// Adds one token to `id` (a generated one, its KV written by the next step): a new block when
  /// the last is full. kOutOfMemory (nothing changed) when no block is left.
  Status append_token(int64_t id, int32_t token);
  /// The KV of `id`'s first `tokens` tokens is written: its full blocks among them join the prefix
  /// cache. kInvalidArgument past the sequence's length.
  Status mark_computed(int64_t id, int64_t tokens);
  /// Ends `id`: its full blocks stay cached (when prefix caching is on), the rest are freed.
  /// Unknown ids are ignored.
  void free_sequence(int64_t id);

  /// The block table of `id` (empty for an unknown id).
  const std::vector<int32_t>& block_table(int64_t id) const;
  /// Tokens of `id` so far.
  int64_t sequence_length(int64_t id) const;
  /// Blocks an allocation can take now: free ones plus cached ones nobody holds.
  int64_t num_available_blocks() const { return static_cast<int64_t>(free_.size() + idle_.size()); }
  const KvCacheStats& stats() const { return stats_; }
  int32_t block_size() const { return config_.block_size; }

 private:
  explicit KvBlockManager(const KvCacheConfig& c);

  struct Block {
    int32_t refs = 0;
    bool cached = false;  ///< registered under `hash`
    uint64_t hash = 0;
    std::list<int32_t>::iterator idle_pos;  ///< in idle_ while cached with refs == 0
  };
  struct Sequence {
    std::vector<int32_t> table;
    std::vector<int32_t> tokens;
    uint64_t last_full_hash = 0;  ///< chained hash of block hashed_blocks - 1 (0: none yet)
    int64_t hashed_blocks = 0;    ///< leading blocks registered in (or found in) the prefix cache
  };

  static uint64_t block_hash(uint64_t parent, const int32_t* tokens, int32_t n);
  /// The cached blocks holding `prompt`'s leading full blocks, in order.
  std::vector<int32_t> cached_prefix(const std::vector<int32_t>& prompt) const;
  /// A block for new tokens: a free one, else the least recently used idle cached one.
  int32_t take_block();
  void hold(int32_t b);
  void release(int32_t b);
  /// Registers `b` (just filled) under `hash`, unless another block already holds that hash.
  void cache_full_block(int32_t b, uint64_t hash);

  KvCacheConfig config_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;
  std::list<int32_t> idle_;  ///< cached, unheld; front = least recently used
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::map<int64_t, Sequence> seqs_;
  KvCacheStats stats_;
};

}  // namespace ingot::llm
