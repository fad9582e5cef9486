// Copyright ingot authors. Apache-2.0.
//
// Choosing the next token from one sequence's logits, as the LLM runtime's decode loop does, with
// the request options OpenAI-style servers take (vLLM's SamplingParams, Hugging Face generate):
// greedy (temperature 0), temperature, top-k, top-p (nucleus), min-p, the repetition penalty,
// a per-request seed, stop tokens and a token limit. This is the host reference: every GPU
// sampling kernel is tested against it.
//
// Order of operations (Hugging Face's logits processors and vLLM agree): repetition penalty on
// the raw logits, then temperature, then top-k, top-p and min-p on the softmax of what is left,
// renormalized, then one draw. -inf logits are masked tokens; NaN or +inf logits are errors.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"

namespace ingot::llm {

struct SamplingParams {
  double temperature = 1.0;         ///< >= 0; 0 is greedy (the other filters do not matter then)
  int64_t top_k = 0;                ///< keep the k most likely tokens; 0 or -1: all
  double top_p = 1.0;               ///< (0, 1]: the smallest set of most likely tokens whose mass reaches p
  double min_p = 0.0;               ///< [0, 1]: drop tokens less likely than min_p times the most likely
  double repetition_penalty = 1.0;  ///< > 0; seen tokens' logits: positive / penalty, negative * penalty
  bool has_seed = false;            ///< a request seed makes its draws reproducible
  uint64_t seed = 0;
  int64_t max_tokens = 16;                ///< >= 1: generated tokens at most
  std::vector<int64_t> stop_token_ids;    ///< end the sequence (besides the model's end-of-sequence token)
  bool ignore_eos = false;                ///< keep going past the end-of-sequence token
};

/// An error naming the first option out of range (vocab_size: the model's, to check stop tokens).
Status validate(const SamplingParams& p, int64_t vocab_size);

/// One sequence's sampler: its options and its random stream (the request seed, else one drawn
/// by the caller for this sequence).
class Sampler {
 public:
  Sampler(SamplingParams params, uint64_t fallback_seed);

  /// The next token from `logits` (vocab_size fp32 values); `history` holds the prompt and the
  /// tokens generated so far (the repetition penalty reads it).
  Result<int64_t> next(const float* logits, int64_t vocab_size, const std::vector<int64_t>& history);

  const SamplingParams& params() const { return params_; }
  /// Whether next() is the logits' first argmax alone (temperature 0, no repetition penalty): a
  /// decoder may then compute it on the device and keep the logits there (from_argmax).
  bool greedy() const { return params_.temperature == 0 && params_.repetition_penalty == 1.0; }
  /// The token of a device-computed argmax, or the error next() gives for such logits: `argmax`
  /// is a token id, -1 (a NaN or +inf logit) or -2 (every logit -inf).
  static Result<int64_t> from_argmax(int32_t argmax, int64_t vocab_size);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;                          // the penalized logits
  std::vector<std::pair<float, int64_t>> ranked_;    // (logit, token) of the candidates, best first
  std::vector<double> probs_;
};

enum class FinishReason { kNone, kStop, kLength };

/// Why a sequence ends after emitting `token` as its `generated`-th token (1-based), or kNone.
FinishReason finish_reason(const SamplingParams& p, int64_t token, int64_t generated, int64_t eos_token_id);

/// "stop" / "length" / "" as OpenAI's finish_reason.
const char* finish_reason_name(FinishReason r);

}  // namespace ingot::llm
