// Copyright ingot authors. Apache-2.0.
//
// The paged KV cache's block manager: block tables as tokens arrive, prefix sharing of computed
// full blocks only, least-recently-used eviction of idle cached blocks, failures that change
// nothing, and the counters the server's metrics read.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "llm/kv_block_manager.h"

namespace ingot::llm {
namespace {

KvBlockManager manager(int64_t blocks, int32_t block_size = 4, bool prefix = true) {
  auto m = KvBlockManager::create({blocks, block_size, prefix});
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

std::vector<int32_t> tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(KvBlockManager, BadConfigsAreErrors) {
  EXPECT_FALSE(KvBlockManager::create({0, 16, true}).ok());
  EXPECT_FALSE(KvBlockManager::create({8, 0, true}).ok());
}

TEST(KvBlockManager, BlockTablesGrowAsTokensArrive) {
  KvBlockManager m = manager(8);
  int64_t cached = -1;
  ASSERT_TRUE(m.add_sequence(1, tokens(100, 6), &cached).ok());  // 6 tokens: 2 blocks of 4
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(m.block_table(1).size(), 2u);
  EXPECT_EQ(m.num_available_blocks(), 6);
  EXPECT_EQ(m.stats().blocks_in_use, 2);
  ASSERT_TRUE(m.append_token(1, 7).ok());
  ASSERT_TRUE(m.append_token(1, 8).ok());  // 8 tokens: the second block is full
  EXPECT_EQ(m.block_table(1).size(), 2u);
  ASSERT_TRUE(m.append_token(1, 9).ok());  // the 9th starts a third block
  EXPECT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.sequence_length(1), 9);
  const std::set<int32_t> distinct(m.block_table(1).begin(), m.block_table(1).end());
  EXPECT_EQ(distinct.size(), 3u);
  m.free_sequence(1);
  EXPECT_EQ(m.num_available_blocks(), 8);
  EXPECT_EQ(m.stats().blocks_in_use, 0);
  EXPECT_TRUE(m.block_table(1).empty());
  EXPECT_FALSE(m.can_append(1));
  EXPECT_FALSE(m.append_token(1, 5).ok());
  // Ids are unique, prompts not empty.
  ASSERT_TRUE(m.add_sequence(2, tokens(0, 3), &cached).ok());
  EXPECT_EQ(m.add_sequence(2, tokens(0, 3), &cached).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.add_sequence(3, {}, &cached).code(), StatusCode::kInvalidArgument);
}

TEST(KvBlockManager, ComputedFullBlocksAreSharedByTheNextPrompt) {
  KvBlockManager m = manager(16);
  const std::vector<int32_t> system = tokens(1000, 8);  // two full blocks of a shared system prompt
  std::vector<int32_t> a = system, b = system;
  a.insert(a.end(), {1, 2, 3});
  b.insert(b.end(), {4, 5});
  int64_t cached = -1;
  ASSERT_TRUE(m.add_sequence(1, a, &cached).ok());
  EXPECT_EQ(cached, 0);
  // Not computed yet: a second prompt with the same prefix shares nothing.
  EXPECT_EQ(m.blocks_needed(b), 3);
  ASSERT_TRUE(m.mark_computed(1, static_cast<int64_t>(a.size())).ok());
  EXPECT_EQ(m.blocks_needed(b), 1);
  ASSERT_TRUE(m.add_sequence(2, b, &cached).ok());
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(m.block_table(2)[0], m.block_table(1)[0]);
  EXPECT_EQ(m.block_table(2)[1], m.block_table(1)[1]);
  EXPECT_NE(m.block_table(2)[2], m.block_table(1)[2]);
  EXPECT_EQ(m.stats().blocks_in_use, 4);  // 2 shared + one tail each
  EXPECT_EQ(m.stats().prefix_hit_tokens, 8);
  // The same tokens after another prefix are another block: no false sharing.
  std::vector<int32_t> c = tokens(7, 4);
  c.insert(c.end(), system.begin() + 4, system.end());
  EXPECT_EQ(m.blocks_needed(c), 2);
  // A prompt that is all cached still computes its last token (for its logits).
  ASSERT_TRUE(m.add_sequence(3, system, &cached).ok());
  EXPECT_EQ(cached, 7);
  // Freeing one sharer keeps the shared blocks held by the other.
  m.free_sequence(1);
  EXPECT_EQ(m.stats().blocks_in_use, 3);
  m.free_sequence(2);
  m.free_sequence(3);
  EXPECT_EQ(m.stats().blocks_in_use, 0);
  EXPECT_EQ(m.stats().blocks_cached_idle, 2);  // the system prompt's blocks stay cached
  EXPECT_EQ(m.num_available_blocks(), 16);
  ASSERT_TRUE(m.add_sequence(4, b, &cached).ok());
  EXPECT_EQ(cached, 8);  // served from the idle cache
}

TEST(KvBlockManager, GeneratedTokensFillBlocksThatJoinTheCache) {
  KvBlockManager m = manager(8);
  int64_t cached = -1;
  ASSERT_TRUE(m.add_sequence(1, tokens(50, 3), &cached).ok());
  ASSERT_TRUE(m.append_token(1, 53).ok());
  ASSERT_TRUE(m.append_token(1, 54).ok());
  ASSERT_TRUE(m.mark_computed(1, 5).ok());
  EXPECT_EQ(m.blocks_needed(tokens(50, 5)), 1);  // the first block (50..53) is cached
  EXPECT_FALSE(m.mark_computed(1, 6).ok());      // past the sequence
}

TEST(KvBlockManager, ExhaustionChangesNothingAndIdleCachedBlocksAreEvictedLeastRecentFirst) {
  KvBlockManager m = manager(4);
  int64_t cached = -1;
  ASSERT_TRUE(m.add_sequence(1, tokens(0, 8), &cached).ok());  // 2 blocks
  ASSERT_TRUE(m.mark_computed(1, 8).ok());
  ASSERT_TRUE(m.add_sequence(2, tokens(100, 8), &cached).ok());  // 2 more: the cache is full
  ASSERT_TRUE(m.mark_computed(2, 8).ok());
  const Status full = m.add_sequence(3, tokens(200, 2), &cached);
  EXPECT_EQ(full.code(), StatusCode::kOutOfMemory) << full.to_string();
  EXPECT_TRUE(m.block_table(3).empty());
  EXPECT_FALSE(m.can_append(1));
  EXPECT_EQ(m.append_token(1, 9).code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(m.sequence_length(1), 8);
  m.free_sequence(1);  // its blocks stay cached, idle
  m.free_sequence(2);
  EXPECT_EQ(m.stats().blocks_cached_idle, 4);
  // A new prompt evicts the least recently used idle blocks: sequence 1's, freed first.
  ASSERT_TRUE(m.add_sequence(3, tokens(200, 8), &cached).ok());
  EXPECT_EQ(m.stats().evictions, 2);
  EXPECT_EQ(m.blocks_needed(tokens(0, 8)), 2);    // gone
  EXPECT_EQ(m.blocks_needed(tokens(100, 8)), 0);  // still cached
  // Without prefix caching nothing is shared or kept.
  KvBlockManager plain = manager(4, 4, false);
  ASSERT_TRUE(plain.add_sequence(1, tokens(0, 8), &cached).ok());
  ASSERT_TRUE(plain.mark_computed(1, 8).ok());
  EXPECT_EQ(plain.blocks_needed(tokens(0, 8)), 2);
  plain.free_sequence(1);
  EXPECT_EQ(plain.stats().blocks_cached_idle, 0);
}

}  // namespace
}  // namespace ingot::llm
