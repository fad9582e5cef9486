// Copyright ingot authors. Apache-2.0.
#include "llm/scheduler.h"

#include <algorithm>

namespace ingot::llm {

Result<Scheduler> Scheduler::create(const SchedulerConfig& config, const KvCacheConfig& cache) {
  if (config.max_num_seqs < 1 || config.max_num_batched_tokens < 1 || config.max_model_len < 2)
    return invalid_argument("scheduler: max_num_seqs and max_num_batched_tokens must be positive and max_model_len "
                            "at least 2");
  INGOT_ASSIGN_OR_RETURN(KvBlockManager m, KvBlockManager::create(cache));
  return Scheduler(config, std::move(m));
}

Status Scheduler::add_request(GenerationRequest request) {
  const int64_t id = request.id;
  if (seqs_.count(id)) return invalid_argument("request ", id, " exists already");
  if (request.prompt.empty()) return invalid_argument("request ", id, " has an empty prompt");
  if (request.max_tokens < 1) return invalid_argument("request ", id, ": max_tokens must be at least 1");
  const int64_t len = static_cast<int64_t>(request.prompt.size());
  if (len >= config_.max_model_len)
    return invalid_argument("request ", id, ": a prompt of ", len, " tokens leaves no room under max_model_len ",
                            config_.max_model_len);
  const int64_t bs = cache_.block_size();
  if ((len + bs - 1) / bs > cache_.stats().blocks_total)
    return make_status(StatusCode::kOutOfMemory, "request ", id, ": its ", len, " prompt tokens need more than the ",
                       cache_.stats().blocks_total, " KV blocks of the whole cache");
  Seq s;
  s.tokens = request.prompt;
  s.request = std::move(request);
  seqs_.emplace(id, std::move(s));
  waiting_.push_back(id);
  return Status::Ok();
}

void Scheduler::preempt(int64_t id, StepPlan* plan) {
  Seq& s = seqs_.at(id);
  cache_.free_sequence(id);  // its computed full blocks stay in the prefix cache
  s.in_cache = false;
  s.computed = 0;
  s.token_pending = false;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  plan->preempted.push_back(id);
  ++preemptions_;
}

bool Scheduler::slot_for_new_token(Seq& s, StepPlan* plan) {
  const int64_t id = s.request.id;
  for (;;) {
    if (cache_.append_token(id, s.tokens.back()).ok()) {
      s.token_pending = false;
      return true;
    }
    if (running_.empty() || running_.back() == id) return false;
    preempt(running_.back(), plan);
  }
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t budget = config_.max_num_batched_tokens;
  // 1. Running sequences, in admission order.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const int64_t id = running_[i];
    Seq& s = seqs_.at(id);
    if (s.token_pending && !slot_for_new_token(s, &plan)) {
      preempt(id, &plan);  // the last one: nobody after it to take a block from
      continue;            // running_[i] is the next sequence now (or the loop ends)
    }
    const int64_t size = static_cast<int64_t>(s.tokens.size());
    const bool prefill = s.computed < s.prefill_end;
    int64_t n = size - s.computed;
    if (n > budget) {
      if (!config_.chunked_prefill) {
        ++i;
        continue;
      }
      n = budget;
    }
    if (n > 0) {
      plan.seqs.push_back({id, s.computed, n, prefill, s.computed + n == size, &s.tokens, &cache_.block_table(id)});
      budget -= n;
    }
    ++i;
  }
  // 2. Waiting requests, first come first served.
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    const int64_t id = waiting_.front();
    Seq& s = seqs_.at(id);
    int64_t cached = 0;
    if (!cache_.add_sequence(id, s.tokens, &cached).ok()) break;  // no blocks: it and those after it wait
    const int64_t size = static_cast<int64_t>(s.tokens.size());
    int64_t n = size - cached;
    if (n > budget) {
      if (!config_.chunked_prefill) {
        cache_.free_sequence(id);
        break;
      }
      n = budget;
    }
    s.in_cache = true;
    s.computed = cached;
    s.prefill_end = size;
    waiting_.pop_front();
    running_.push_back(id);
    plan.seqs.push_back({id, cached, n, true, cached + n == size, &s.tokens, &cache_.block_table(id)});
    budget -= n;
  }
  plan.num_tokens = config_.max_num_batched_tokens - budget;
  return plan;
}

FinishedSequence Scheduler::finish(int64_t id, SequenceEnd why) {
  Seq& s = seqs_.at(id);
  FinishedSequence f{id, std::move(s.output), why};
  if (s.in_cache) cache_.free_sequence(id);
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  seqs_.erase(id);
  return f;
}

Result<std::vector<FinishedSequence>> Scheduler::finish_step(const StepPlan& plan,
                                                             const std::map<int64_t, int32_t>& sampled) {
  std::vector<FinishedSequence> done;
  for (const ScheduledSeq& ss : plan.seqs) {
    auto it = seqs_.find(ss.id);
    if (it == seqs_.end() || !it->second.in_cache) continue;  // aborted or preempted since
    Seq& s = it->second;
    if (ss.start != s.computed)
      return invalid_argument("sequence ", ss.id, ": the step computed from token ", ss.start, ", the scheduler has ",
                              s.computed);
    s.computed = ss.start + ss.count;
    INGOT_RETURN_IF_ERROR(cache_.mark_computed(ss.id, s.computed));
    if (!ss.sample) continue;
    auto t = sampled.find(ss.id);
    if (t == sampled.end()) return invalid_argument("sequence ", ss.id, " was to be sampled, and no token came");
    const int32_t tok = t->second;
    s.tokens.push_back(tok);
    s.output.push_back(tok);
    SequenceEnd why = SequenceEnd::kNone;
    if (s.request.stop_tokens.count(tok)) why = SequenceEnd::kStop;
    else if (static_cast<int64_t>(s.output.size()) >= s.request.max_tokens) why = SequenceEnd::kLength;
    else if (static_cast<int64_t>(s.tokens.size()) >= config_.max_model_len) why = SequenceEnd::kModelLength;
    if (why != SequenceEnd::kNone) {
      done.push_back(finish(ss.id, why));
      continue;
    }
    s.token_pending = !cache_.append_token(ss.id, tok).ok();  // a block for it next step, or preemption
  }
  return done;
}

bool Scheduler::abort(int64_t id, FinishedSequence* finished) {
  if (!seqs_.count(id)) return false;
  FinishedSequence f = finish(id, SequenceEnd::kAborted);
  if (finished) *finished = std::move(f);
  return true;
}

}  // namespace ingot::llm
