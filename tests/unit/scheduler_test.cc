// Copyright ingot authors. Apache-2.0.
//
// The LLM scheduler over the paged KV cache, driven by a stand-in model whose next token is the
// last one plus one: continuous batching, chunked prefill under one token budget, prefix reuse,
// preemption by recompute when blocks run out (outputs unchanged by it), stop tokens, limits,
// abort, and no KV block left held at the end.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <vector>

#include "llm/scheduler.h"

namespace ingot::llm {
namespace {

Scheduler make(SchedulerConfig sc, int64_t blocks, int32_t block_size = 4) {
  auto s = Scheduler::create(sc, {blocks, block_size, true});
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

std::vector<int32_t> prompt(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

GenerationRequest request(int64_t id, std::vector<int32_t> p, int64_t max_tokens) {
  GenerationRequest r;
  r.id = id;
  r.prompt = std::move(p);
  r.max_tokens = max_tokens;
  return r;
}

/// Runs steps until nothing is left (at most `max_steps`); every sampled token is the sequence's
/// last token + 1. Checks each step's plan against the budget and the sequences' positions.
std::map<int64_t, FinishedSequence> run_all(Scheduler& s, int64_t budget, std::vector<StepPlan>* plans = nullptr,
                                            int max_steps = 1000) {
  std::map<int64_t, FinishedSequence> done;
  for (int step = 0; step < max_steps && (s.num_running() + s.num_waiting()) > 0; ++step) {
    StepPlan plan = s.schedule();
    EXPECT_LE(plan.num_tokens, budget);
    int64_t sum = 0;
    std::map<int64_t, int32_t> sampled;
    for (const ScheduledSeq& q : plan.seqs) {
      sum += q.count;
      EXPECT_GT(q.count, 0);
      EXPECT_LE(q.start + q.count, static_cast<int64_t>(q.tokens->size()));
      // Enough KV blocks for every position computed so far.
      EXPECT_GE(static_cast<int64_t>(q.block_table->size()) * s.cache().block_size(), q.start + q.count);
      if (q.sample) sampled[q.id] = q.tokens->back() + 1;
    }
    EXPECT_EQ(sum, plan.num_tokens);
    auto fin = s.finish_step(plan, sampled);
    EXPECT_TRUE(fin.ok()) << fin.status().to_string();
    if (!fin.ok()) break;
    for (FinishedSequence& f : *fin) done[f.id] = std::move(f);
    if (plans) plans->push_back(std::move(plan));
  }
  return done;
}

TEST(Scheduler, ContinuousBatchingGeneratesEveryRequestToItsLimit) {
  Scheduler s = make({8, 64, 128, true}, 64);
  ASSERT_TRUE(s.add_request(request(1, prompt(10, 5), 3)).ok());
  ASSERT_TRUE(s.add_request(request(2, prompt(50, 7), 5)).ok());
  std::vector<StepPlan> plans;
  auto done = run_all(s, 64, &plans);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].output, (std::vector<int32_t>{15, 16, 17}));
  EXPECT_EQ(done[2].output, (std::vector<int32_t>{57, 58, 59, 60, 61}));
  EXPECT_EQ(done[1].reason, SequenceEnd::kLength);
  // Step 1 prefills both prompts together; later steps decode one token each.
  ASSERT_GE(plans.size(), 2u);
  EXPECT_EQ(plans[0].num_tokens, 12);
  EXPECT_TRUE(plans[0].seqs[0].prefill && plans[0].seqs[1].prefill);
  EXPECT_EQ(plans[1].num_tokens, 2);
  EXPECT_FALSE(plans[1].seqs[0].prefill);
  EXPECT_EQ(s.cache().stats().blocks_in_use, 0);
}

TEST(Scheduler, ChunkedPrefillSharesTheTokenBudgetWithDecodes) {
  Scheduler s = make({8, 16, 256, true}, 64);
  ASSERT_TRUE(s.add_request(request(1, prompt(0, 3), 40)).ok());
  std::vector<StepPlan> plans;
  // Start request 1, then a 40-token prompt arrives: it is prefilled 15 tokens a step beside
  // request 1's decode, and samples only at its last chunk.
  StepPlan p1 = s.schedule();
  ASSERT_TRUE(s.finish_step(p1, {{1, 3}}).ok());
  ASSERT_TRUE(s.add_request(request(2, prompt(100, 40), 2)).ok());
  auto done = run_all(s, 16, &plans);
  ASSERT_GE(plans.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(plans[static_cast<size_t>(k)].seqs.size(), 2u);
    EXPECT_EQ(plans[static_cast<size_t>(k)].seqs[0].count, 1);  // the decode first
    const ScheduledSeq& chunk = plans[static_cast<size_t>(k)].seqs[1];
    EXPECT_TRUE(chunk.prefill);
    EXPECT_EQ(chunk.start, 15 * k);
    EXPECT_EQ(chunk.count, k < 2 ? 15 : 10);
    EXPECT_EQ(chunk.sample, k == 2);
  }
  EXPECT_EQ(done[2].output, (std::vector<int32_t>{140, 141}));
  // Without chunking a prompt over the budget waits for a step with room (here: never).
  Scheduler whole = make({8, 16, 256, false}, 64);
  ASSERT_TRUE(whole.add_request(request(1, prompt(0, 20), 2)).ok());
  EXPECT_TRUE(whole.schedule().seqs.empty());
}

TEST(Scheduler, PromptsSharingAPrefixComputeOnlyTheirOwnTokens) {
  Scheduler s = make({8, 64, 256, true}, 64);
  std::vector<int32_t> system = prompt(500, 16);
  std::vector<int32_t> a = system, b = system;
  a.push_back(1);
  b.push_back(2);
  ASSERT_TRUE(s.add_request(request(1, a, 1)).ok());
  run_all(s, 64);
  ASSERT_TRUE(s.add_request(request(2, b, 1)).ok());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].start, 16);  // the system prompt's 4 blocks come from the cache
  EXPECT_EQ(p.seqs[0].count, 1);
}

TEST(Scheduler, RunningOutOfBlocksPreemptsTheNewestAndOutputsDoNotChange) {
  // 6 blocks of 4 slots; two requests of 8-token prompts generating 12 tokens each need 5 blocks
  // each at the end: they cannot both stay.
  SchedulerConfig sc{8, 64, 256, true};
  Scheduler s = make(sc, 6);
  ASSERT_TRUE(s.add_request(request(1, prompt(0, 8), 12)).ok());
  ASSERT_TRUE(s.add_request(request(2, prompt(100, 8), 12)).ok());
  std::vector<StepPlan> plans;
  auto done = run_all(s, 64, &plans);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_GT(s.num_preemptions(), 0);
  bool preempted_2 = false;
  for (const StepPlan& p : plans)
    for (int64_t id : p.preempted) preempted_2 |= id == 2;
  EXPECT_TRUE(preempted_2) << "the most recently admitted goes first";
  EXPECT_EQ(done[1].output, prompt(8, 12));
  EXPECT_EQ(done[2].output, prompt(108, 12));  // recomputed, the same tokens
  EXPECT_EQ(s.cache().stats().blocks_in_use, 0);
  EXPECT_EQ(s.cache().num_available_blocks(), 6);
}

TEST(Scheduler, StopTokensLimitsAndAbort) {
  Scheduler s = make({1, 64, 12, true}, 64);
  GenerationRequest r = request(1, prompt(0, 4), 100);
  r.stop_tokens = {6};
  ASSERT_TRUE(s.add_request(r).ok());
  ASSERT_TRUE(s.add_request(request(2, prompt(20, 4), 100)).ok());
  std::vector<StepPlan> plans;
  auto done = run_all(s, 64, &plans);
  EXPECT_EQ(done[1].output, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(done[1].reason, SequenceEnd::kStop);
  EXPECT_EQ(done[2].reason, SequenceEnd::kModelLength);  // 4 + 8 = max_model_len 12
  EXPECT_EQ(done[2].output.size(), 8u);
  for (const StepPlan& p : plans) EXPECT_LE(p.seqs.size(), 1u);  // max_num_seqs 1
  // Bad requests.
  EXPECT_EQ(s.add_request(request(3, {}, 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(request(3, prompt(0, 12), 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(request(3, prompt(0, 2), 0)).code(), StatusCode::kInvalidArgument);
  Scheduler tiny = make({4, 64, 1024, true}, 2);
  EXPECT_EQ(tiny.add_request(request(1, prompt(0, 9), 1)).code(), StatusCode::kOutOfMemory);
  // Abort, running or queued, frees everything.
  Scheduler a = make({1, 64, 256, true}, 64);
  ASSERT_TRUE(a.add_request(request(1, prompt(0, 5), 50)).ok());
  ASSERT_TRUE(a.add_request(request(2, prompt(0, 5), 50)).ok());
  StepPlan p = a.schedule();
  ASSERT_TRUE(a.finish_step(p, {{1, 5}}).ok());
  FinishedSequence f;
  EXPECT_TRUE(a.abort(1, &f));
  EXPECT_EQ(f.reason, SequenceEnd::kAborted);
  EXPECT_EQ(f.output, (std::vector<int32_t>{5}));
  EXPECT_TRUE(a.abort(2));
  EXPECT_FALSE(a.abort(2));
  EXPECT_EQ(a.num_running() + a.num_waiting(), 0);
  EXPECT_EQ(a.cache().stats().blocks_in_use, 0);
}

}  // namespace
}  // namespace ingot::llm
