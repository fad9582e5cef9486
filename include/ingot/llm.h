// Copyright ingot authors. Apache-2.0.
//
// Text generation with a Llama-family model (issue 22): load a GGUF file, generate from prompts.
// Today this runs the CPU reference decoder (fp32, paged KV cache, continuous batching of the
// prompts given together); the GPU runtime will sit behind the same calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/status.h"

namespace ingot {

struct GenerationParams {
  int64_t max_tokens = 32;    ///< tokens to generate per prompt, at least 1
  double temperature = 0.0;   ///< 0: greedy
  int64_t top_k = 0;          ///< 0: no top-k filter
  double top_p = 1.0;         ///< (0, 1]
  bool has_seed = false;      ///< reproducible sampling with `seed`
  uint64_t seed = 0;
  bool ignore_eos = false;    ///< keep going past the end-of-sequence token
  bool chat = false;          ///< wrap each prompt as one user turn of the ChatML template
  int64_t kv_blocks = 0;      ///< KV cache blocks of 16 positions; 0: enough for every prompt at once
};

struct GenerationResult {
  std::string text;                 ///< the generated text (without a final end-of-sequence token)
  std::vector<int32_t> prompt_ids;  ///< the prompt as the model saw it
  std::vector<int32_t> token_ids;   ///< generated ids, the end-of-sequence token included when it came
  std::string finish_reason;        ///< "length", "stop" or "model_length"
};

struct GenerationStats {
  double seconds = 0;       ///< wall time of the generation steps
  int64_t steps = 0;        ///< scheduler steps
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
};

class LlmModel {
 public:
  /// Loads a Llama-family GGUF file (weights, tokenizer, configuration).
  static Result<std::unique_ptr<LlmModel>> load_gguf(const std::string& path);
  ~LlmModel();
  LlmModel(const LlmModel&) = delete;
  LlmModel& operator=(const LlmModel&) = delete;

  /// One result per prompt, in order; the prompts run together (continuous batching).
  Result<std::vector<GenerationResult>> generate(const std::vector<std::string>& prompts,
                                                 const GenerationParams& params, GenerationStats* stats = nullptr);
  /// "llama, 30 layers, hidden 576, 9 heads (3 KV), vocab 49152".
  std::string describe() const;

 private:
  LlmModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot
