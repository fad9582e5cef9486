// Copyright ingot authors. Apache-2.0.
#include "llm/kv_block_manager.h"

#include <algorithm>

namespace ingot::llm {

KvBlockManager::KvBlockManager(const KvCacheConfig& c) : config_(c), blocks_(static_cast<size_t>(c.num_blocks)) {
  // Handed out lowest id first (free_ is used as a stack from its back).
  for (int64_t b = c.num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  stats_.blocks_total = c.num_blocks;
}

Result<KvBlockManager> KvBlockManager::create(const KvCacheConfig& config) {
  if (config.num_blocks < 1 || config.num_blocks > (int64_t{1} << 31) - 1)
    return invalid_argument("KV cache: num_blocks must be in [1, 2^31), got ", config.num_blocks);
  if (config.block_size < 1) return invalid_argument("KV cache: block_size must be positive, got ", config.block_size);
  return KvBlockManager(config);
}

uint64_t KvBlockManager::block_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  // FNV-1a over the parent hash and the tokens; never 0 (0 means "no parent").
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(parent);
  for (int32_t i = 0; i < n; ++i) mix(static_cast<uint32_t>(tokens[i]));
  return h == 0 ? 1 : h;
}

std::vector<int32_t> KvBlockManager::cached_prefix(const std::vector<int32_t>& prompt) const {
  std::vector<int32_t> hit;
  if (!config_.prefix_caching) return hit;
  const int32_t bs = config_.block_size;
  uint64_t h = 0;
  for (size_t start = 0; start + static_cast<size_t>(bs) <= prompt.size(); start += static_cast<size_t>(bs)) {
    h = block_hash(h, prompt.data() + start, bs);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    hit.push_back(it->second);
  }
  return hit;
}

int64_t KvBlockManager::blocks_needed(const std::vector<int32_t>& prompt) const {
  const int64_t bs = config_.block_size;
  const int64_t total = (static_cast<int64_t>(prompt.size()) + bs - 1) / bs;
  return total - static_cast<int64_t>(cached_prefix(prompt).size());
}

void KvBlockManager::hold(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.refs == 0 && blk.cached) {
    idle_.erase(blk.idle_pos);
    --stats_.blocks_cached_idle;
  }
  if (blk.refs++ == 0) ++stats_.blocks_in_use;
}

void KvBlockManager::release(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (--blk.refs > 0) return;
  --stats_.blocks_in_use;
  if (blk.cached) {
    blk.idle_pos = idle_.insert(idle_.end(), b);  // most recently used last
    ++stats_.blocks_cached_idle;
  } else {
    free_.push_back(b);
  }
}

int32_t KvBlockManager::take_block() {
  if (!free_.empty()) {
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  // Evict the least recently used cached block nobody holds (callers checked there is one).
  const int32_t b = idle_.front();
  idle_.pop_front();
  --stats_.blocks_cached_idle;
  Block& blk = blocks_[static_cast<size_t>(b)];
  by_hash_.erase(blk.hash);
  blk.cached = false;
  blk.hash = 0;
  ++stats_.evictions;
  return b;
}

void KvBlockManager::cache_full_block(int32_t b, uint64_t hash) {
  if (!config_.prefix_caching || by_hash_.count(hash)) return;  // an equal block is cached already
  Block& blk = blocks_[static_cast<size_t>(b)];
  blk.cached = true;
  blk.hash = hash;
  by_hash_.emplace(hash, b);
}

Status KvBlockManager::add_sequence(int64_t id, const std::vector<int32_t>& prompt, int64_t* cached_tokens) {
  if (seqs_.count(id)) return invalid_argument("KV cache: sequence ", id, " exists already");
  if (prompt.empty()) return invalid_argument("KV cache: sequence ", id, " has an empty prompt");
  const std::vector<int32_t> hit = cached_prefix(prompt);
  const int64_t bs = config_.block_size;
  const int64_t total = (static_cast<int64_t>(prompt.size()) + bs - 1) / bs;
  const int64_t fresh = total - static_cast<int64_t>(hit.size());
  // The hit blocks that are idle now stop being available once held.
  int64_t idle_hits = 0;
  for (int32_t b : hit) idle_hits += blocks_[static_cast<size_t>(b)].refs == 0;
  if (fresh > num_available_blocks() - idle_hits)
    return make_status(StatusCode::kOutOfMemory, "KV cache: sequence ", id, " needs ", fresh, " free blocks for ",
                       prompt.size(), " prompt tokens, ", num_available_blocks() - idle_hits, " available");
  Sequence s;
  s.tokens = prompt;
  for (int32_t b : hit) {
    hold(b);
    s.table.push_back(b);
  }
  uint64_t h = 0;
  for (size_t i = 0; i < hit.size(); ++i) h = block_hash(h, prompt.data() + i * static_cast<size_t>(bs), static_cast<int32_t>(bs));
  s.last_full_hash = h;
  s.hashed_blocks = static_cast<int64_t>(hit.size());
  for (int64_t i = static_cast<int64_t>(hit.size()); i < total; ++i) {
    const int32_t b = take_block();
    hold(b);
    s.table.push_back(b);
  }
  const int64_t hit_tokens = static_cast<int64_t>(hit.size()) * bs;
  *cached_tokens = std::min<int64_t>(hit_tokens, static_cast<int64_t>(prompt.size()) - 1);
  stats_.prefix_hit_tokens += *cached_tokens;
  stats_.prompt_tokens += static_cast<int64_t>(prompt.size());
  seqs_.emplace(id, std::move(s));
  return Status::Ok();
}

bool KvBlockManager::can_append(int64_t id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  const bool full = static_cast<int64_t>(it->second.tokens.size()) % config_.block_size == 0;
  return !full || num_available_blocks() > 0;
}

Status KvBlockManager::append_token(int64_t id, int32_t token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return invalid_argument("KV cache: no sequence ", id);
  Sequence& s = it->second;
  const int64_t bs = config_.block_size;
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  if (len % bs == 0) {
    if (num_available_blocks() == 0)
      return make_status(StatusCode::kOutOfMemory, "KV cache: no free block for sequence ", id, "'s token ", len);
    const int32_t b = take_block();
    hold(b);
    s.table.push_back(b);
  }
  s.tokens.push_back(token);
  return Status::Ok();
}

Status KvBlockManager::mark_computed(int64_t id, int64_t tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return invalid_argument("KV cache: no sequence ", id);
  Sequence& s = it->second;
  if (tokens < 0 || tokens > static_cast<int64_t>(s.tokens.size()))
    return invalid_argument("KV cache: sequence ", id, " has ", s.tokens.size(), " tokens, not ", tokens);
  const int64_t bs = config_.block_size;
  while ((s.hashed_blocks + 1) * bs <= tokens) {
    s.last_full_hash = block_hash(s.last_full_hash, s.tokens.data() + s.hashed_blocks * bs, static_cast<int32_t>(bs));
    cache_full_block(s.table[static_cast<size_t>(s.hashed_blocks)], s.last_full_hash);
    ++s.hashed_blocks;
  }
  return Status::Ok();
}

void KvBlockManager::free_sequence(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  // Last block first: the prefix's blocks end up most recently used, so they are evicted last.
  for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b) release(*b);
  seqs_.erase(it);
}

const std::vector<int32_t>& KvBlockManager::block_table(int64_t id) const {
  static const std::vector<int32_t> kNone;
  auto it = seqs_.find(id);
  return it == seqs_.end() ? kNone : it->second.table;
}

int64_t KvBlockManager::sequence_length(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.tokens.size());
}

}  // namespace ingot::llm
