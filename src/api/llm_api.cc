// Copyright ingot authors. Apache-2.0.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "api/llm_model_impl.h"
#include "core/utf8.h"
#include "ingot/llm.h"
#include "llm/chat_template.h"
#include "llm/sampling.h"
#include "llm/scheduler.h"
#include "llm/tokenizer.h"

namespace ingot {

LlmModel::LlmModel() : impl_(std::make_unique<Impl>()) {}
LlmModel::~LlmModel() = default;

Result<std::unique_ptr<LlmModel>> LlmModel::load_gguf(const std::string& path) {
  return load_gguf(path, LlmLoadOptions());
}

Result<std::unique_ptr<LlmModel>> LlmModel::load_gguf(const std::string& path, const LlmLoadOptions& options) {
  std::unique_ptr<LlmModel> m(new LlmModel());
  INGOT_ASSIGN_OR_RETURN(m->impl_->file, llm::GgufFile::open(path));
  INGOT_ASSIGN_OR_RETURN(m->impl_->tokenizer, llm::BpeTokenizer::from_gguf(*m->impl_->file));
  INGOT_ASSIGN_OR_RETURN(m->impl_->model, llm::LlamaCpuModel::load(*m->impl_->file,
                                                                      options.int4_weights ||
                                                                          (options.checkpoint_int4 && !options.fp8_weights)));
  INGOT_RETURN_IF_ERROR(m->impl_->attach_gpu(options));
  // Parsed once; a template ingot cannot parse fails chats only, not the model's loading.
  auto tmpl = m->impl_->file->get_string("tokenizer.chat_template");
  m->impl_->chat_template = llm::ChatTemplate::parse(tmpl.ok() ? *tmpl : std::string());
  const llm::BpeTokenizer& tok = *m->impl_->tokenizer;
  if (tok.bos_id() >= 0) m->impl_->chat_tokens.bos_token = tok.token(tok.bos_id());
  if (tok.eos_id() >= 0) m->impl_->chat_tokens.eos_token = tok.token(tok.eos_id());
  return m;
}

Status LlmModel::Impl::attach_gpu(const LlmLoadOptions& options, const uint64_t* dummy_seed) {
  if (options.fp8_weights && options.int4_weights)
    return invalid_argument("LlmModel: fp8 and int4 weights are exclusive; choose one");
  if (options.int4_weights && options.int4_group != 0 && !llm::int4_group_supported(options.int4_group))
    return invalid_argument("LlmModel: int4_group must be 32, 64 or 128 (or 0: the model's), got ", options.int4_group);
  // int4: asked for, or a 4-bit checkpoint's own blocks (checkpoint_int4); else its blocks go and
  // its values run as floats.
  int4 = options.int4_weights || (options.checkpoint_int4 && !options.fp8_weights && model->all_int4());
  if (!int4) model->drop_int4();
  // int4: one group size for the whole model, the checkpoint's own blocks' where it has them.
  const int64_t held = model->int4_group(), group = options.int4_group != 0 ? options.int4_group : model->int4_group(true);
  if (int4 && held != 0 && group != held)
    return invalid_argument("LlmModel: the model's 4-bit blocks are in groups of ", held, ", not int4_group ", group);
  if (options.backend == "cpu") {
    if (options.fp8_weights || options.fp8_kv)
      return invalid_argument("LlmModel: fp8 weights and fp8 KV caches run on the GPU decoder (backend cuda); "
                              "the CPU decoder is the fp32 reference");
    if (int4) {
      if (group == 0)
        return unsupported("LlmModel: int4 weights need input dimensions that are multiples of 32");
      INGOT_RETURN_IF_ERROR(model->quantize_int4_in_place(group));
    }
    return Status::Ok();
  }
  if (options.backend != "cuda") return invalid_argument("LlmModel: backend must be cpu or cuda, got '", options.backend, "'");
  if (options.kv_blocks < 1) return invalid_argument("LlmModel: kv_blocks must be >= 1");
  llm::GpuDecoderOptions g;
  g.bf16 = options.bf16;
  g.fp8_weights = options.fp8_weights;
  g.int4_weights = int4;
  g.int4_group = int4 ? group : 0;
  g.fp8_kv = options.fp8_kv;
  if (options.gemv_max_tokens < 0 || options.gemv_max_tokens > 8)
    return invalid_argument("LlmModel: gemv_max_tokens must be in [0, 8], got ", options.gemv_max_tokens);
  g.gemv_max_tokens = options.gemv_max_tokens;
  if (options.gemv_prologue < -1 || options.gemv_prologue > 1)
    return invalid_argument("LlmModel: gemv_prologue must be -1 (automatic), 0 or 1, got ", options.gemv_prologue);
  g.gemv_prologue = options.gemv_prologue < 0 ? !(options.fp8_weights || int4) : options.gemv_prologue == 1;
  if (options.gemv_k_split != 0 && options.gemv_k_split != 1 && options.gemv_k_split != 2 && options.gemv_k_split != 4)
    return invalid_argument("LlmModel: gemv_k_split must be 0 (automatic), 1, 2 or 4, got ", options.gemv_k_split);
  g.gemv_k_split = options.gemv_k_split;
  if (options.grouped_decode_attention < -1 || options.grouped_decode_attention > 1)
    return invalid_argument("LlmModel: grouped_decode_attention must be -1 (automatic), 0 or 1, got ",
                            options.grouped_decode_attention);
  g.grouped_decode_attention = options.grouped_decode_attention == 1;
  if (options.int4_gemm_max_tokens < 0)
    return invalid_argument("LlmModel: int4_gemm_max_tokens must be >= 0, got ", options.int4_gemm_max_tokens);
  g.int4_gemm_max_tokens = options.int4_gemm_max_tokens;
  if (options.decode_partition < -1 || options.decode_partition > (1 << 24))
    return invalid_argument("LlmModel: decode_partition must be -1 (automatic), 0 (never split) or a number of "
                            "positions up to 2^24, got ", options.decode_partition);
  g.partition_size = options.decode_partition;
  g.num_blocks = options.kv_blocks;
  g.block_size = 16;
  if (dummy_seed) {
    INGOT_ASSIGN_OR_RETURN(gpu, llm::LlamaGpuModel::create_random(*model, g, *dummy_seed));
  } else {
    INGOT_ASSIGN_OR_RETURN(gpu, llm::LlamaGpuModel::create(*model, g));
  }
  // The GPU decoder holds its own copy: the host's fp32 weights (4 bytes a parameter) go.
  model->release_weights();
  gpu_kv_blocks = options.kv_blocks;
  return Status::Ok();
}

Result<llm::StepResult> LlmModel::Impl::step(const std::vector<llm::ScheduledSeq>& seqs,
                                                const std::vector<const llm::Sampler*>& samplers, llm::KvStore* kv) {
  if (gpu) {
    std::vector<llm::GpuChunk> chunks;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const llm::ScheduledSeq& q = seqs[i];
      // Logits come back for a sequence without a sampler, or one sampled on the host.
      const llm::Sampler* sm = i < samplers.size() ? samplers[i] : nullptr;
      const bool want = !sm || (q.sample && !sm->greedy());
      chunks.push_back(llm::GpuChunk{q.tokens, q.start, q.count, q.block_table, want});
    }
    return gpu->forward(chunks);
  }
  llm::StepResult out;
  for (const llm::ScheduledSeq& q : seqs) {
    INGOT_ASSIGN_OR_RETURN(std::vector<float> logits, model->forward(*q.tokens, q.start, q.count, *q.block_table, kv));
    out.logits.push_back(std::move(logits));
  }
  return out;
}

Result<int64_t> LlmModel::Impl::next_token(llm::Sampler& sampler, const llm::StepResult& step, size_t i,
                                           const std::vector<int32_t>& tokens, int64_t vocab_size) {
  if (i < step.logits.size() && !step.logits[i].empty()) {
    const std::vector<int64_t> history(tokens.begin(), tokens.end());
    return sampler.next(step.logits[i].data(), vocab_size, history);
  }
  if (i >= step.argmax.size()) return internal_error("LlmModel: no logits and no argmax for sequence ", i, " of a step");
  return llm::Sampler::from_argmax(step.argmax[i], vocab_size);
}

Status LlmModel::Impl::warmup(int64_t max_step_tokens, int64_t max_batch) {
  return gpu ? gpu->warmup(max_step_tokens, max_batch) : Status::Ok();
}

Status LlmModel::Impl::gpu_cache_fits(int64_t blocks) const {
  if (!gpu || blocks <= gpu_kv_blocks) return Status::Ok();
  return invalid_argument("the KV cache needs ", blocks, " blocks; the model was loaded with ", gpu_kv_blocks,
                          " on the GPU (LlmLoadOptions::kv_blocks, --kv-blocks)");
}

Result<std::unique_ptr<llm::KvStore>> LlmModel::Impl::host_kv(int64_t blocks, int32_t block_size) const {
  if (!gpu) return std::make_unique<llm::KvStore>(model->config(), blocks, block_size);
  INGOT_RETURN_IF_ERROR(gpu_cache_fits(blocks));
  return std::unique_ptr<llm::KvStore>();
}

namespace {

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_status(StatusCode::kNotFound, "cannot open '", path, "'");
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

/// tokenizer_config.json's bos_token / eos_token: a string, or an object with "content".
std::string special_token(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return "";
  const nlohmann::json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

Result<std::unique_ptr<LlmModel>> LlmModel::load_hf(const std::string& folder, const LlmLoadOptions& options) {
  std::unique_ptr<LlmModel> m(new LlmModel());
  INGOT_ASSIGN_OR_RETURN(std::string config_text, read_text(folder + "/config.json"));
  INGOT_ASSIGN_OR_RETURN(llm::LlamaConfig cfg, llm::llama_config_from_json(config_text, folder + "/config.json"));
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<llm::SafetensorsModel> weights, llm::SafetensorsModel::open(folder));
  INGOT_ASSIGN_OR_RETURN(m->impl_->model, llm::LlamaCpuModel::load_hf(cfg, *weights));
  nlohmann::json tc = nlohmann::json::object();
  if (auto text = read_text(folder + "/tokenizer_config.json"); text.ok()) {
    tc = nlohmann::json::parse(*text, nullptr, false);
    if (tc.is_discarded() || !tc.is_object()) return invalid_model(folder, "/tokenizer_config.json: not a JSON object");
  }
  const std::string bos = special_token(tc, "bos_token"), eos = special_token(tc, "eos_token");
  INGOT_ASSIGN_OR_RETURN(std::string tok_text, read_text(folder + "/tokenizer.json"));
  INGOT_ASSIGN_OR_RETURN(m->impl_->tokenizer, llm::BpeTokenizer::from_tokenizer_json(tok_text, bos, eos));
  const std::string tmpl = tc.contains("chat_template") && tc["chat_template"].is_string()
                               ? tc["chat_template"].get<std::string>()
                               : std::string();
  m->impl_->chat_template = llm::ChatTemplate::parse(tmpl);
  const llm::BpeTokenizer& tok = *m->impl_->tokenizer;
  if (tok.bos_id() >= 0) m->impl_->chat_tokens.bos_token = tok.token(tok.bos_id());
  if (tok.eos_id() >= 0) m->impl_->chat_tokens.eos_token = tok.token(tok.eos_id());
  INGOT_RETURN_IF_ERROR(m->impl_->attach_gpu(options));
  return m;
}

Result<std::unique_ptr<LlmModel>> LlmModel::load(const std::string& path, const LlmLoadOptions& options) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? load_hf(path, options) : load_gguf(path, options);
}

Result<std::unique_ptr<LlmModel>> LlmModel::load_dummy(const std::string& config_json_path,
                                                       const LlmLoadOptions& options, uint64_t seed) {
  INGOT_ASSIGN_OR_RETURN(std::string text, read_text(config_json_path));
  INGOT_ASSIGN_OR_RETURN(llm::LlamaConfig cfg, llm::llama_config_from_json(text, config_json_path));
  std::unique_ptr<LlmModel> m(new LlmModel());
  if (options.backend == "cuda") {  // made on the device: no host copy of the weights at all
    INGOT_ASSIGN_OR_RETURN(m->impl_->model, llm::LlamaCpuModel::without_weights(cfg));
    INGOT_RETURN_IF_ERROR(m->impl_->attach_gpu(options, &seed));
    return m;
  }
  INGOT_ASSIGN_OR_RETURN(m->impl_->model, llm::LlamaCpuModel::random(cfg, seed));
  INGOT_RETURN_IF_ERROR(m->impl_->attach_gpu(options));
  return m;
}

bool LlmModel::int4_weights() const { return impl_->int4; }

std::string LlmModel::describe() const {
  const llm::LlamaConfig& c = impl_->model->config();
  return c.architecture + ", " + std::to_string(c.num_layers) + " layers, hidden " + std::to_string(c.hidden_size) +
         ", " + std::to_string(c.num_heads) + " heads (" + std::to_string(c.num_kv_heads) + " KV), vocab " +
         std::to_string(c.vocab_size) + (impl_->gpu ? ", on the GPU" : ", on the CPU");
}

Status LlmModel::Impl::needs_tokenizer() const {
  if (tokenizer) return Status::Ok();
  return make_status(StatusCode::kInvalidArgument,
                     "this model has dummy weights and no tokenizer (load_dummy, --load-format dummy): give token ids");
}

Result<std::vector<int32_t>> LlmModel::encode_prompt(const std::string& prompt) const {
  INGOT_RETURN_IF_ERROR(impl_->needs_tokenizer());
  const llm::BpeTokenizer& tok = *impl_->tokenizer;
  INGOT_ASSIGN_OR_RETURN(std::vector<int32_t> enc, tok.encode(prompt));
  std::vector<int32_t> v;
  if (tok.add_bos()) v.push_back(tok.bos_id());
  v.insert(v.end(), enc.begin(), enc.end());
  return v;
}

Result<std::string> LlmModel::render_chat(const std::vector<ChatMessage>& messages) const {
  INGOT_RETURN_IF_ERROR(impl_->needs_tokenizer());
  if (!impl_->chat_template.ok()) return impl_->chat_template.status();
  std::vector<llm::ChatTurn> turns;
  for (const ChatMessage& m : messages) turns.push_back({m.role, m.content});
  return impl_->chat_template->render(turns, impl_->chat_tokens);
}

Result<std::vector<int32_t>> LlmModel::encode_chat(const std::vector<ChatMessage>& messages) const {
  INGOT_ASSIGN_OR_RETURN(std::string text, render_chat(messages));
  return impl_->tokenizer->encode(text);
}

Result<std::vector<GenerationResult>> LlmModel::generate(const std::vector<std::string>& prompts,
                                                         const GenerationParams& params, GenerationStats* stats) {
  if (prompts.empty()) return invalid_argument("generate: no prompt");
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& p : prompts) {
    std::vector<int32_t> v;
    if (params.chat) {
      INGOT_ASSIGN_OR_RETURN(v, encode_chat({ChatMessage{"user", p}}));
    } else {
      INGOT_ASSIGN_OR_RETURN(v, encode_prompt(p));
    }
    ids.push_back(std::move(v));
  }
  return generate_ids(ids, params, stats);
}

Result<std::vector<std::vector<float>>> LlmModel::last_logits(const std::vector<std::vector<int32_t>>& prompts) {
  const llm::LlamaConfig& cfg = impl_->model->config();
  constexpr int32_t kBlock = 16;
  constexpr int64_t kStepTokens = 8192;  // tokens per decoder step (prompts go in groups)
  const int64_t capacity = impl_->gpu ? impl_->gpu_kv_blocks : std::numeric_limits<int64_t>::max();
  for (size_t r = 0; r < prompts.size(); ++r) {
    if (prompts[r].empty()) return invalid_argument("last_logits: prompt ", r, " has no tokens");
    for (int32_t t : prompts[r])
      if (t < 0 || t >= cfg.vocab_size)
        return invalid_argument("last_logits: prompt ", r, " has token id ", t, " outside the vocabulary");
    if (static_cast<int64_t>(prompts[r].size()) > std::max<int64_t>(cfg.max_position_embeddings, 2))
      return invalid_argument("last_logits: prompt ", r, " has ", prompts[r].size(), " tokens, more than the model's ",
                              cfg.max_position_embeddings, " positions");
  }
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < prompts.size();) {
    // A group of whole prompts whose blocks fit the cache and whose tokens fit one step.
    size_t j = i;
    int64_t blocks = 0, tokens = 0;
    std::vector<std::vector<int32_t>> tables;
    while (j < prompts.size()) {
      const int64_t n = static_cast<int64_t>(prompts[j].size()), b = (n + kBlock - 1) / kBlock;
      if (j > i && (blocks + b > capacity || tokens + n > kStepTokens)) break;
      if (b > capacity)
        return invalid_argument("last_logits: prompt ", j, " needs ", b, " KV blocks; the model was loaded with ", capacity);
      std::vector<int32_t> t(static_cast<size_t>(b));
      for (int64_t k = 0; k < b; ++k) t[static_cast<size_t>(k)] = static_cast<int32_t>(blocks + k);
      tables.push_back(std::move(t));
      blocks += b;
      tokens += n;
      ++j;
    }
    std::vector<llm::ScheduledSeq> seqs;
    for (size_t k = i; k < j; ++k) {
      llm::ScheduledSeq q;
      q.id = static_cast<int64_t>(k);
      q.count = static_cast<int64_t>(prompts[k].size());
      q.prefill = true;
      q.tokens = &prompts[k];
      q.block_table = &tables[k - i];
      seqs.push_back(q);
    }
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<llm::KvStore> kv, impl_->host_kv(blocks, kBlock));
    INGOT_ASSIGN_OR_RETURN(llm::StepResult r, impl_->step(seqs, {}, kv.get()));
    for (auto& l : r.logits) out.push_back(std::move(l));
    i = j;
  }
  return out;
}

Result<std::vector<std::pair<std::string, double>>> LlmModel::profile_decode(int64_t batch, int64_t context) {
  if (!impl_->gpu) return invalid_argument("profile_decode: the model runs on the CPU (load it with backend cuda)");
  return impl_->gpu->profile_decode(batch, context);
}

Result<std::vector<GenerationResult>> LlmModel::generate_ids(const std::vector<std::vector<int32_t>>& ids,
                                                             const GenerationParams& params, GenerationStats* stats) {
  const llm::LlamaConfig& cfg = impl_->model->config();
  const llm::BpeTokenizer* tok = impl_->tokenizer.get();  // null for dummy weights: ids only
  if (ids.empty()) return invalid_argument("generate: no prompt");
  const llm::SamplingParams sp = sampling_params(params);
  INGOT_RETURN_IF_ERROR(llm::validate(sp, cfg.vocab_size));
  constexpr int32_t kBlock = 16;
  int64_t positions = 0, prompt_tokens = 0;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r].empty()) return invalid_argument("generate: prompt ", r, " has no tokens");
    for (int32_t t : ids[r])
      if (t < 0 || t >= cfg.vocab_size) return invalid_argument("generate: prompt ", r, " has token id ", t,
                                                                " outside the vocabulary");
    positions += static_cast<int64_t>(ids[r].size()) + params.max_tokens;
    prompt_tokens += static_cast<int64_t>(ids[r].size());
  }
  const int64_t blocks =
      params.kv_blocks > 0 ? params.kv_blocks : (positions + kBlock - 1) / kBlock + static_cast<int64_t>(ids.size());
  llm::SchedulerConfig sc;
  sc.max_model_len = std::max<int64_t>(cfg.max_position_embeddings, 2);
  INGOT_ASSIGN_OR_RETURN(llm::Scheduler sched, llm::Scheduler::create(sc, {blocks, kBlock, true}));
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<llm::KvStore> kv, impl_->host_kv(blocks, kBlock));
  std::map<int64_t, llm::Sampler> samplers;
  for (size_t r = 0; r < ids.size(); ++r) {
    llm::GenerationRequest req;
    req.id = static_cast<int64_t>(r);
    req.prompt = ids[r];
    req.max_tokens = params.max_tokens;
    if (!params.ignore_eos && tok && tok->eos_id() >= 0) req.stop_tokens.insert(tok->eos_id());
    INGOT_RETURN_IF_ERROR(sched.add_request(std::move(req)));
    samplers.emplace(static_cast<int64_t>(r), llm::Sampler(sp, 0x9e3779b97f4a7c15ull + r));
  }
  std::map<int64_t, llm::FinishedSequence> done;
  GenerationStats st;
  st.prompt_tokens = prompt_tokens;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // As vLLM's engine start-up: the decode graphs of every batch this run can reach, untimed.
  const auto tw = Clock::now();
  INGOT_RETURN_IF_ERROR(
      impl_->warmup(sc.max_num_batched_tokens, std::min<int64_t>(static_cast<int64_t>(ids.size()), sc.max_num_seqs)));
  st.warmup_seconds = since(tw);
  const int64_t graph_steps_before = impl_->gpu ? impl_->gpu->stats().graph_steps : 0;
  const auto t0 = Clock::now();
  std::vector<const llm::Sampler*> step_samplers;
  while (sched.num_running() + sched.num_waiting() > 0) {
    llm::StepPlan plan = sched.schedule();
    if (plan.seqs.empty())
      return make_status(StatusCode::kOutOfMemory, "generate: the KV cache (", blocks,
                         " blocks) cannot hold the next prompt; give more kv_blocks");
    ++st.steps;
    std::map<int64_t, int32_t> sampled;
    step_samplers.clear();
    for (const llm::ScheduledSeq& q : plan.seqs) step_samplers.push_back(&samplers.at(q.id));
    const auto tf = Clock::now();
    INGOT_ASSIGN_OR_RETURN(llm::StepResult all, impl_->step(plan.seqs, step_samplers, kv.get()));
    st.forward_seconds += since(tf);
    const auto ts = Clock::now();
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const llm::ScheduledSeq& q = plan.seqs[i];
      if (!q.sample) continue;
      INGOT_ASSIGN_OR_RETURN(int64_t next, Impl::next_token(samplers.at(q.id), all, i, *q.tokens, cfg.vocab_size));
      sampled[q.id] = static_cast<int32_t>(next);
      ++st.generated_tokens;
    }
    st.sample_seconds += since(ts);
    INGOT_ASSIGN_OR_RETURN(std::vector<llm::FinishedSequence> fin, sched.finish_step(plan, sampled));
    for (llm::FinishedSequence& f : fin) done[f.id] = std::move(f);
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.preemptions = sched.num_preemptions();
  if (impl_->gpu) st.graph_steps = impl_->gpu->stats().graph_steps - graph_steps_before;
  std::vector<GenerationResult> out;
  for (size_t r = 0; r < ids.size(); ++r) {
    llm::FinishedSequence& f = done.at(static_cast<int64_t>(r));
    GenerationResult g;
    g.prompt_ids = ids[r];
    g.token_ids = f.output;
    std::vector<int32_t> shown = f.output;
    if (tok) {
      if (f.reason == llm::SequenceEnd::kStop && !shown.empty() && shown.back() == tok->eos_id()) shown.pop_back();
      INGOT_ASSIGN_OR_RETURN(std::string decoded, tok->decode(shown));
      g.text = utf8_sanitize(decoded);  // as Hugging Face's decode: ill-formed bytes become U+FFFD
    }
    g.finish_reason = f.reason == llm::SequenceEnd::kStop          ? "stop"
                      : f.reason == llm::SequenceEnd::kModelLength ? "model_length"
                                                                   : "length";
    out.push_back(std::move(g));
  }
  if (stats) *stats = st;
  return out;
}

}  // namespace ingot
