// Copyright ingot authors. Apache-2.0.
//
// LlmEngine: one thread runs the scheduler over the model (vLLM's engine loop). submit() and
// abort() only queue work under a mutex; the loop takes it at the top of each step, so a new
// request joins the running batch at the next step. Per step: admit queued requests and aborts,
// schedule (continuous batching, chunked prefill, preemption), run each scheduled sequence
// through the decoder, sample, report to the scheduler, then stream every sampled sequence's new
// text. A request's text grows by each new token's bytes and the part beyond what was sent goes
// out, less any incomplete UTF-8 character and any tail that could begin a stop string (both are
// sent once settled); what goes out is valid UTF-8 (ill-formed bytes, which random or byte-level
// tokens can make, become U+FFFD as Hugging Face's decode does).
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "api/llm_model_impl.h"
#include "core/utf8.h"
#include "llm/sampling.h"
#include "llm/scheduler.h"

namespace ingot {

namespace {

constexpr int32_t kBlockSize = 16;

// The longest suffix of `text` that is a proper prefix of a stop string (held back while running).
size_t stop_prefix_tail(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& st : stops)
    for (size_t k = std::min(st.size() - 1, text.size()); k > hold; --k)
      if (text.compare(text.size() - k, k, st, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

}  // namespace

struct LlmEngine::Impl {
  struct Request {
    int64_t id = 0;
    std::vector<int32_t> prompt;
    GenerationParams params;
    std::function<void(const StreamEvent&)> on_event;
  };
  struct Live {  // engine thread only
    Request req;
    llm::Sampler sampler;
    std::vector<int32_t> generated;
    std::string text;  ///< the generated tokens' text, a final end-of-sequence token left out
    size_t sent = 0;   ///< bytes of `text` already streamed
  };

  std::shared_ptr<LlmModel> model;
  EngineOptions options;
  std::thread loop;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Request> incoming;
  std::vector<int64_t> aborts;
  bool stopping = false;
  int64_t next_id = 1;
  std::set<int64_t> active_ids;  ///< submitted and not yet finished
  EngineStats stats;

  void run();
  void finish(Live& l, const std::string& reason, const std::string& tail, const std::string& error = "");
  /// Streams l's new text; true when a stop string ended it (then it has been finished).
  bool stream(Live& l, bool last);
};

LlmEngine::LlmEngine() : impl_(std::make_unique<Impl>()) {}

LlmEngine::~LlmEngine() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->loop.joinable()) impl_->loop.join();
}

Result<std::unique_ptr<LlmEngine>> LlmEngine::start(std::shared_ptr<LlmModel> model, const EngineOptions& options) {
  if (!model) return invalid_argument("LlmEngine: no model");
  if (options.kv_blocks < 1 || options.max_num_seqs < 1 || options.max_num_batched_tokens < 1 ||
      options.max_queued < 1)
    return invalid_argument("LlmEngine: kv_blocks, max_num_seqs, max_num_batched_tokens and max_queued must be >= 1");
  if (!model->impl_->tokenizer)
    return invalid_argument("LlmEngine: the model has dummy weights and no tokenizer; the engine streams text");
  // The GPU decoder's KV cache was sized at load: the engine's must fit it.
  INGOT_RETURN_IF_ERROR(model->impl_->gpu_cache_fits(options.kv_blocks));
  // Before the first request, as vLLM's start-up: the GPU decoder's buffers and decode graphs.
  INGOT_RETURN_IF_ERROR(model->impl_->warmup(options.max_num_batched_tokens, options.max_num_seqs));
  std::unique_ptr<LlmEngine> e(new LlmEngine());
  e->impl_->model = std::move(model);
  e->impl_->options = options;
  e->impl_->stats.kv_blocks_total = options.kv_blocks;
  e->impl_->stats.kv_blocks_free = options.kv_blocks;
  Impl* impl = e->impl_.get();
  e->impl_->loop = std::thread([impl] { impl->run(); });
  return e;
}

const LlmModel& LlmEngine::model() const { return *impl_->model; }

Result<int64_t> LlmEngine::submit(std::vector<int32_t> prompt, const GenerationParams& params,
                                  std::function<void(const StreamEvent&)> on_event) {
  const llm::LlamaConfig& cfg = impl_->model->impl_->model->config();
  if (prompt.empty()) return invalid_argument("the prompt has no tokens");
  for (int32_t t : prompt)
    if (t < 0 || t >= cfg.vocab_size) return invalid_argument("prompt token id ", t, " is outside the vocabulary");
  const int64_t max_len = std::max<int64_t>(cfg.max_position_embeddings, 2);
  if (static_cast<int64_t>(prompt.size()) >= max_len)
    return invalid_argument("the prompt's ", prompt.size(), " tokens leave no room in the model's ", max_len,
                            " positions");
  if ((static_cast<int64_t>(prompt.size()) + kBlockSize - 1) / kBlockSize > impl_->options.kv_blocks)
    return invalid_argument("the prompt's ", prompt.size(), " tokens need more than the KV cache's ",
                            impl_->options.kv_blocks, " blocks of ", kBlockSize);
  const llm::SamplingParams sp = sampling_params(params);
  INGOT_RETURN_IF_ERROR(llm::validate(sp, cfg.vocab_size));
  for (const std::string& s : params.stop)
    if (s.empty()) return invalid_argument("an empty stop string");
  if (!on_event) return invalid_argument("no event callback");
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopping) return make_status(StatusCode::kUnavailable, "the engine is stopping");
  if (static_cast<int64_t>(impl_->incoming.size()) + impl_->stats.waiting >= impl_->options.max_queued) {
    ++impl_->stats.requests_refused;
    return make_status(StatusCode::kUnavailable, "the engine has ", impl_->options.max_queued,
                       " requests waiting already");
  }
  Impl::Request r;
  r.id = impl_->next_id++;
  r.prompt = std::move(prompt);
  r.params = params;
  r.on_event = std::move(on_event);
  const int64_t id = r.id;
  impl_->active_ids.insert(id);
  impl_->incoming.push_back(std::move(r));
  ++impl_->stats.requests_total;
  impl_->cv.notify_all();
  return id;
}

bool LlmEngine::abort(int64_t id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->active_ids.count(id)) return false;
  impl_->aborts.push_back(id);
  impl_->cv.notify_all();
  return true;
}

EngineStats LlmEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void LlmEngine::Impl::finish(Live& l, const std::string& reason, const std::string& tail, const std::string& error) {
  StreamEvent ev;
  ev.text = utf8_sanitize(tail);
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = static_cast<int64_t>(l.req.prompt.size());
  ev.completion_tokens = static_cast<int64_t>(l.generated.size());
  l.req.on_event(ev);
  std::lock_guard<std::mutex> lock(mu);
  active_ids.erase(l.req.id);
}

bool LlmEngine::Impl::stream(Live& l, bool last) {
  const std::string& t = l.text;
  // A stop string anywhere past what could not have contained it before.
  size_t cut = std::string::npos;
  for (const std::string& st : l.req.params.stop) {
    const size_t from = l.sent >= st.size() ? l.sent - st.size() + 1 : 0;
    const size_t at = t.find(st, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    finish(l, "stop", cut > l.sent ? t.substr(l.sent, cut - l.sent) : "");
    return true;
  }
  if (last) return false;  // the caller sends the rest with the final event
  size_t end = t.size() - std::max(utf8_incomplete_tail(t), stop_prefix_tail(t, l.req.params.stop));
  if (end > l.sent) {
    StreamEvent ev;
    ev.text = utf8_sanitize(std::string_view(t).substr(l.sent, end - l.sent));
    ev.prompt_tokens = static_cast<int64_t>(l.req.prompt.size());
    ev.completion_tokens = static_cast<int64_t>(l.generated.size());
    l.sent = end;
    l.req.on_event(ev);
  }
  return false;
}

void LlmEngine::Impl::run() {
  LlmModel::Impl& m = *model->impl_;
  const llm::LlamaConfig& cfg = m.model->config();
  llm::SchedulerConfig sc;
  sc.max_num_seqs = options.max_num_seqs;
  sc.max_num_batched_tokens = options.max_num_batched_tokens;
  sc.max_model_len = std::max<int64_t>(cfg.max_position_embeddings, 2);
  auto created = llm::Scheduler::create(sc, {options.kv_blocks, kBlockSize, true});
  auto kv = m.host_kv(options.kv_blocks, kBlockSize);
  std::map<int64_t, Live> live;
  if (!created.ok() || !kv.ok()) {  // options were checked in start(): not expected
    std::unique_lock<std::mutex> lock(mu);
    stopping = true;
    return;
  }
  llm::Scheduler& sched = *created;
  std::vector<const llm::Sampler*> step_samplers;
  // The scheduler's state into stats (read by other threads), with a step's token counts.
  auto publish_stats = [&](int64_t prompt_tokens, int64_t generated) {
    std::lock_guard<std::mutex> lock(mu);
    stats.running = sched.num_running();
    stats.waiting = sched.num_waiting();
    stats.prompt_tokens_total += prompt_tokens;
    stats.generated_tokens_total += generated;
    stats.preemptions_total = sched.num_preemptions();
    const llm::KvCacheStats cs = sched.cache().stats();
    stats.kv_blocks_free = cs.blocks_total - cs.blocks_in_use;
  };
  auto fail_all = [&](const std::string& why) {
    for (auto& [id, l] : live) {
      sched.abort(id);
      finish(l, "error", "", why);
    }
    live.clear();
    publish_stats(0, 0);
  };
  for (;;) {
    std::deque<Request> admit;
    std::vector<int64_t> drop;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stopping || !incoming.empty() || !aborts.empty() || !live.empty(); });
      stop = stopping;
      admit.swap(incoming);
      drop.swap(aborts);
    }
    for (Request& r : admit) {
      const llm::SamplingParams sp = sampling_params(r.params);
      llm::GenerationRequest g;
      g.id = r.id;
      g.prompt = r.prompt;
      g.max_tokens = r.params.max_tokens;
      if (!r.params.ignore_eos && m.tokenizer->eos_id() >= 0) g.stop_tokens.insert(m.tokenizer->eos_id());
      const int64_t id = r.id;
      Live l{std::move(r), llm::Sampler(sp, 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(id)), {}, {}, 0};
      Status st = sched.add_request(std::move(g));
      if (!st.ok()) {
        finish(l, "error", "", st.message());
        continue;
      }
      live.emplace(id, std::move(l));
    }
    for (int64_t id : drop) {
      auto it = live.find(id);
      if (it == live.end()) continue;
      sched.abort(id);
      finish(it->second, "abort", "");
      live.erase(it);
    }
    if (!drop.empty()) publish_stats(0, 0);  // the aborted are out of the batch now (and the loop may idle)
    if (stop) {
      for (auto& [id, l] : live) {
        sched.abort(id);
        finish(l, "abort", "");
      }
      return;
    }
    if (live.empty()) continue;
    llm::StepPlan plan = sched.schedule();
    if (plan.seqs.empty()) {  // nothing runs and the first waiting prompt does not fit: not expected
      fail_all("the KV cache cannot hold the next prompt");
      continue;
    }
    std::map<int64_t, int32_t> sampled;
    int64_t prompt_tokens = 0;
    step_samplers.clear();
    for (const llm::ScheduledSeq& q : plan.seqs) step_samplers.push_back(&live.at(q.id).sampler);
    auto all = m.step(plan.seqs, step_samplers, kv->get());
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const llm::ScheduledSeq& q = plan.seqs[i];
      Live& l = live.at(q.id);
      if (!all.ok()) {  // not expected: the scheduler hands valid ranges and tables
        sched.abort(q.id);
        finish(l, "error", "", all.status().message());
        live.erase(q.id);
        continue;
      }
      if (q.prefill) prompt_tokens += q.count;
      if (!q.sample) continue;
      auto next = LlmModel::Impl::next_token(l.sampler, *all, i, *q.tokens, cfg.vocab_size);
      if (!next.ok()) {
        sched.abort(q.id);
        finish(l, "error", "", next.status().message());
        live.erase(q.id);
        continue;
      }
      sampled[q.id] = static_cast<int32_t>(*next);
    }
    // Sequences that erred above are gone from the scheduler; report the rest.
    llm::StepPlan ran = plan;
    ran.seqs.erase(std::remove_if(ran.seqs.begin(), ran.seqs.end(),
                                  [&](const llm::ScheduledSeq& q) { return !live.count(q.id); }),
                   ran.seqs.end());
    auto fin = sched.finish_step(ran, sampled);
    if (!fin.ok()) {
      fail_all(fin.status().message());
      continue;
    }
    std::map<int64_t, llm::SequenceEnd> ended;
    for (const llm::FinishedSequence& f : *fin) ended[f.id] = f.reason;
    for (const auto& [id, token] : sampled) {
      auto it = live.find(id);
      if (it == live.end()) continue;
      Live& l = it->second;
      l.generated.push_back(token);
      // The text grows by this token's piece (its bytes as llama.cpp's token_to_piece gives them:
      // for byte-level BPE its decode, for SentencePiece "▁" as a space and nothing stripped,
      // which a whole-list decode would strip at the start). The end-of-sequence token ends the
      // sequence and is not shown.
      if (token != m.tokenizer->eos_id() || l.req.params.ignore_eos) {
        auto piece = m.tokenizer->piece(token);
        if (piece.ok()) l.text += *piece;  // ids come from the model's vocabulary: not expected otherwise
      }
      const bool last = ended.count(id) > 0;
      if (stream(l, last)) {  // a stop string: finished
        if (!last) sched.abort(id);
        live.erase(it);
        continue;
      }
      if (last) {
        const llm::SequenceEnd why = ended[id];
        finish(l, why == llm::SequenceEnd::kStop          ? "stop"
                  : why == llm::SequenceEnd::kModelLength ? "model_length"
                                                          : "length",
               l.text.size() > l.sent ? l.text.substr(l.sent) : "");
        live.erase(it);
      }
    }
    publish_stats(prompt_tokens, static_cast<int64_t>(sampled.size()));
  }
}

}  // namespace ingot
