// Copyright ingot authors. Apache-2.0.
#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <utility>

namespace ingot::llm {

Status validate(const SamplingParams& p, int64_t vocab_size) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature))
    return invalid_argument("sampling: temperature must be a finite number >= 0, got ", p.temperature);
  if (p.top_k < -1) return invalid_argument("sampling: top_k must be >= 1, or 0 / -1 for all tokens, got ", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return invalid_argument("sampling: top_p must be in (0, 1], got ", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return invalid_argument("sampling: min_p must be in [0, 1], got ", p.min_p);
  if (!(p.repetition_penalty > 0) || !std::isfinite(p.repetition_penalty))
    return invalid_argument("sampling: repetition_penalty must be a finite number > 0, got ", p.repetition_penalty);
  if (p.max_tokens < 1) return invalid_argument("sampling: max_tokens must be >= 1, got ", p.max_tokens);
  if (vocab_size < 1) return invalid_argument("sampling: the vocabulary is empty");
  for (int64_t t : p.stop_token_ids)
    if (t < 0 || t >= vocab_size)
      return invalid_argument("sampling: stop token id ", t, " is outside the vocabulary [0, ", vocab_size, ")");
  return Status::Ok();
}

Sampler::Sampler(SamplingParams params, uint64_t fallback_seed)
    : params_(std::move(params)), rng_(params_.has_seed ? params_.seed : fallback_seed) {}

Result<int64_t> Sampler::next(const float* logits, int64_t vocab_size, const std::vector<int64_t>& history) {
  INGOT_RETURN_IF_ERROR(validate(params_, vocab_size));
  work_.assign(logits, logits + vocab_size);
  for (int64_t i = 0; i < vocab_size; ++i)
    if (std::isnan(work_[static_cast<size_t>(i)]) || work_[static_cast<size_t>(i)] == INFINITY)
      return invalid_argument("sampling: logit ", i, " is ", work_[static_cast<size_t>(i)]);
  if (params_.repetition_penalty != 1.0) {
    std::unordered_set<int64_t> seen;
    for (int64_t t : history) {
      if (t < 0 || t >= vocab_size || !seen.insert(t).second) continue;
      float& l = work_[static_cast<size_t>(t)];
      l = l > 0 ? static_cast<float>(l / params_.repetition_penalty) : static_cast<float>(l * params_.repetition_penalty);
    }
  }
  // Greedy: the first of the largest (lowest id on ties).
  const auto best = std::max_element(work_.begin(), work_.end());
  if (*best == -INFINITY) return invalid_argument("sampling: every token is masked (all logits are -inf)");
  if (params_.temperature == 0) return static_cast<int64_t>(best - work_.begin());

  // Candidates best first; top-k bounds how many need ordering.
  const int64_t k = params_.top_k > 0 ? std::min(params_.top_k, vocab_size) : vocab_size;
  ranked_.clear();
  for (int64_t i = 0; i < vocab_size; ++i)
    if (work_[static_cast<size_t>(i)] != -INFINITY) ranked_.emplace_back(work_[static_cast<size_t>(i)], i);
  auto better = [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const size_t keep = std::min(static_cast<size_t>(k), ranked_.size());
  std::partial_sort(ranked_.begin(), ranked_.begin() + static_cast<long>(keep), ranked_.end(), better);
  ranked_.resize(keep);
  // Softmax of logit / T over the kept tokens (in double: a vocabulary's worth of small terms).
  probs_.resize(keep);
  const double top = ranked_[0].first / params_.temperature;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp(ranked_[i].first / params_.temperature - top);
    sum += probs_[i];
  }
  for (double& q : probs_) q /= sum;
  // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
  size_t n = keep;
  if (params_.top_p < 1) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs_[i];
      if (mass >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0)
    while (n > 1 && probs_[n - 1] < params_.min_p * probs_[0]) --n;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += probs_[i];
    if (u < acc) return ranked_[i].second;
  }
  return ranked_[n - 1].second;  // u within rounding of the total
}

Result<int64_t> Sampler::from_argmax(int32_t argmax, int64_t vocab_size) {
  if (argmax == -1) return invalid_argument("sampling: a logit is NaN or +inf");
  if (argmax == -2) return invalid_argument("sampling: every token is masked (all logits are -inf)");
  if (argmax < 0 || argmax >= vocab_size)
    return internal_error("sampling: the device argmax ", argmax, " is outside the vocabulary [0, ", vocab_size, ")");
  return static_cast<int64_t>(argmax);
}

FinishReason finish_reason(const SamplingParams& p, int64_t token, int64_t generated, int64_t eos_token_id) {
  if (token == eos_token_id && !p.ignore_eos) return FinishReason::kStop;
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end())
    return FinishReason::kStop;
  if (generated >= p.max_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return "";
  }
}

}  // namespace ingot::llm
