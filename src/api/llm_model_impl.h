// Copyright ingot authors. Apache-2.0.
//
// LlmModel's insides, shared by its calls (llm_api.cc) and the engine loop (llm_engine.cc).
#pragma once

#include <memory>

#include "ingot/llm.h"
#include "llm/chat_template.h"
#include "llm/cpu_decoder.h"
#include "llm/gguf.h"
#include "llm/gpu_decoder.h"
#include "llm/sampling.h"
#include "llm/scheduler.h"
#include "llm/tokenizer.h"

namespace ingot {

struct LlmModel::Impl {
  std::unique_ptr<llm::GgufFile> file;
  std::unique_ptr<llm::BpeTokenizer> tokenizer;
  std::unique_ptr<llm::LlamaCpuModel> model;  ///< the weights (and the CPU decoder)
  std::unique_ptr<llm::LlamaGpuModel> gpu;    ///< the GPU decoder, when loaded for "cuda"
  int64_t gpu_kv_blocks = 0;                  ///< its KV cache's blocks
  bool int4 = false;                          ///< projections as int4 weights (LlmModel::int4_weights)
  Result<llm::ChatTemplate> chat_template = invalid_model("no chat template loaded");  ///< the GGUF's, parsed
  llm::ChatTemplateTokens chat_tokens;  ///< BOS/EOS text for the template

  /// One scheduler step (the last position of each scheduled sequence, in order): the GPU decoder
  /// runs them as one batch and returns every argmax plus the logits of the sequences whose
  /// sampler is not greedy or that have no sampler (samplers[i] null or past the end); the CPU
  /// decoder runs one sequence after another into `kv` (unused, and may be null, on the GPU) and
  /// returns every sequence's logits. next_token() reads either.
  Result<llm::StepResult> step(const std::vector<llm::ScheduledSeq>& seqs,
                                  const std::vector<const llm::Sampler*>& samplers, llm::KvStore* kv);
  /// The next token of the i-th sequence of `step`'s answer: `sampler` over its logits when they
  /// came back, else its device argmax.
  static Result<int64_t> next_token(llm::Sampler& sampler, const llm::StepResult& step, size_t i,
                                    const std::vector<int32_t>& tokens, int64_t vocab_size);
  /// For the GPU decoder: warmup() for steps of `max_step_tokens` and `max_batch` sequences
  /// (nothing on the CPU).
  Status warmup(int64_t max_step_tokens, int64_t max_batch);
  /// kInvalidArgument when the GPU decoder's cache (sized at load) holds fewer than `blocks`.
  Status gpu_cache_fits(int64_t blocks) const;
  /// The KV store the CPU decoder needs for `blocks` blocks of `block_size`; null on the GPU,
  /// whose cache lives on the device (gpu_cache_fits' error when `blocks` exceeds it).
  Result<std::unique_ptr<llm::KvStore>> host_kv(int64_t blocks, int32_t block_size) const;
  /// For backend "cuda": the GPU decoder over `model`'s weights (kInvalidArgument for another
  /// backend name or kv_blocks < 1; "cpu": nothing to do).
  /// With a dummy_seed, the GPU decoder makes LlamaCpuModel::random's weights itself (model
  /// holds shapes only). Either way the host's weights are released once the GPU holds them.
  Status attach_gpu(const LlmLoadOptions& options, const uint64_t* dummy_seed = nullptr);
  /// kInvalidArgument for a model without a tokenizer (dummy weights).
  Status needs_tokenizer() const;
};

/// The sampler's parameters of a request.
inline llm::SamplingParams sampling_params(const GenerationParams& p) {
  llm::SamplingParams sp;
  sp.max_tokens = p.max_tokens;
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.has_seed = p.has_seed;
  sp.seed = p.seed;
  sp.ignore_eos = p.ignore_eos;
  return sp;
}

}  // namespace ingot
