// Copyright ingot authors. Apache-2.0.
//
// LlmModel's insides, shared by its calls (llm_api.cc) and the engine loop (llm_engine.cc).
#pragma once

#include <memory>

#include "ingot/llm.h"
#include "llm/chat_template.h"
#include "llm/cpu_decoder.h"
#include "llm/gguf.h"
#include "llm/sampling.h"
#include "llm/tokenizer.h"

namespace ingot {

struct LlmModel::Impl {
  std::unique_ptr<llm::GgufFile> file;
  std::unique_ptr<llm::BpeTokenizer> tokenizer;
  std::unique_ptr<llm::LlamaCpuModel> model;
  Result<llm::ChatTemplate> chat_template = invalid_model("no chat template loaded");  ///< the GGUF's, parsed
  llm::ChatTemplateTokens chat_tokens;  ///< BOS/EOS text for the template
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
