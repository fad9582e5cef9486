// Copyright ingot authors. Apache-2.0.
//
// The LLM runtime's scheduler (issue 22, item 2): in-flight (continuous) batching over the paged
// KV cache, as vLLM's scheduler does it. Every step gets one token budget
// (max_num_batched_tokens) shared by all sequences:
//   1. running sequences first, in admission order: a decoding one computes its one new token, a
//      prefilling one the next chunk of its prompt (chunked prefill: at most what the budget has
//      left); a decoding sequence whose new token needs a KV block when none is left preempts the
//      most recently admitted running sequence (recompute: its blocks are freed, it goes back to
//      the front of the queue with its prompt and the tokens it generated, which the prefix cache
//      mostly serves again);
//   2. then waiting requests first come first served, while the budget, max_num_seqs and the KV
//      cache allow: a request whose prompt blocks do not fit waits (and those after it: order is
//      kept). Prompt tokens already in the prefix cache are not computed again.
// The caller runs the step's sequences (ScheduledSeq: which tokens, from which position), then
// reports the sampled tokens with finish_step(); sequences end at max_tokens, a stop token or
// max_model_len, or by abort().
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "llm/kv_block_manager.h"

namespace ingot::llm {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;             ///< sequences in one step
  int64_t max_num_batched_tokens = 2048;  ///< tokens computed in one step (decodes + prefill chunks)
  int64_t max_model_len = 4096;           ///< prompt + generated tokens of one sequence
  bool chunked_prefill = true;            ///< false: a prompt is computed whole in one step or waits
};

struct GenerationRequest {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  std::set<int32_t> stop_tokens;  ///< generation ends after one of these (it is kept in the output)
};

/// One sequence's work in a step: compute tokens [start, start + count) of its token list
/// (`tokens`, prompt then generated), reading the KV of positions < start from `block_table`.
/// `sample`: the step ends this sequence's known tokens, so the caller samples its next token.
struct ScheduledSeq {
  int64_t id = 0;
  int64_t start = 0;
  int64_t count = 0;
  bool prefill = false;  ///< computing prompt (or recomputed) tokens rather than one new token
  bool sample = false;
  const std::vector<int32_t>* tokens = nullptr;
  const std::vector<int32_t>* block_table = nullptr;
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  int64_t num_tokens = 0;
  std::vector<int64_t> preempted;  ///< sent back to the queue by this step (recomputed later)
};

enum class SequenceEnd { kNone, kLength, kStop, kModelLength, kAborted };

struct FinishedSequence {
  int64_t id = 0;
  std::vector<int32_t> output;  ///< generated tokens
  SequenceEnd reason = SequenceEnd::kNone;
};

class Scheduler {
 public:
  /// Errors on non-positive limits.
  static Result<Scheduler> create(const SchedulerConfig& config, const KvCacheConfig& cache);

  /// Queues a request. kInvalidArgument for a known id, an empty prompt, max_tokens < 1, or a
  /// prompt of max_model_len tokens or more; kOutOfMemory when the prompt could never fit the
  /// whole cache.
  Status add_request(GenerationRequest request);
  /// The next step's work (empty when nothing can run).
  StepPlan schedule();
  /// Reports the step `plan` ran: `sampled` holds the next token of every sequence the plan
  /// marked `sample`. Returns the sequences that ended.
  Result<std::vector<FinishedSequence>> finish_step(const StepPlan& plan, const std::map<int64_t, int32_t>& sampled);
  /// Ends a request wherever it is (queued or running), freeing its blocks. False when unknown.
  bool abort(int64_t id, FinishedSequence* finished = nullptr);

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  const KvBlockManager& cache() const { return cache_; }

 private:
  Scheduler(const SchedulerConfig& c, KvBlockManager cache) : config_(c), cache_(std::move(cache)) {}

  struct Seq {
    GenerationRequest request;
    std::vector<int32_t> tokens;  ///< prompt, then generated
    std::vector<int32_t> output;
    int64_t computed = 0;         ///< leading tokens whose KV is in the cache
    int64_t prefill_end = 0;      ///< tokens at admission: computing below it is prefill
    bool in_cache = false;        ///< registered with the block manager
    bool token_pending = false;   ///< tokens.back() awaits a KV slot (append_token failed)
  };

  /// Gives `s` a KV slot for its last token; preempts the most recently admitted other running
  /// sequences until one is free. False (nothing preempted beyond what was) when `s` itself is
  /// the only one left: then `s` is preempted by the caller.
  bool slot_for_new_token(Seq& s, StepPlan* plan);
  void preempt(int64_t id, StepPlan* plan);
  FinishedSequence finish(int64_t id, SequenceEnd why);

  SchedulerConfig config_;
  KvBlockManager cache_;
  std::map<int64_t, Seq> seqs_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;  ///< admission order
  int64_t preemptions_ = 0;
};

}  // namespace ingot::llm
