// Copyright ingot authors. Apache-2.0.
//
// The LLM runtime's host sampler (src/llm/sampling.h) against the distributions its options
// define: frequencies of 40000 draws within 4 standard deviations of the exact probabilities.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace ingot::llm {
namespace {

constexpr int kDraws = 40000;

// Logits whose softmax is `p`.
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> l;
  for (double q : p) l.push_back(q > 0 ? static_cast<float>(std::log(q)) : -INFINITY);
  return l;
}

std::vector<double> frequencies(SamplingParams params, const std::vector<float>& logits, uint64_t seed = 7) {
  Sampler s(params, seed);
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    auto t = s.next(logits.data(), static_cast<int64_t>(logits.size()), {});
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (!t.ok()) break;
    f[static_cast<size_t>(*t)] += 1.0 / kDraws;
  }
  return f;
}

void expect_distribution(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double sigma = std::sqrt(want[i] * (1 - want[i]) / kDraws);
    if (want[i] == 0)
      EXPECT_EQ(got[i], 0) << "token " << i << " is filtered out";
    else
      EXPECT_NEAR(got[i], want[i], 4 * sigma + 1e-9) << "token " << i;
  }
}

TEST(Sampling, GreedyIsTheArgmaxAndIgnoresTheFilters) {
  SamplingParams p;
  p.temperature = 0;
  p.top_k = 3;
  p.top_p = 0.1;
  Sampler s(p, 1);
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*s.next(l.data(), 5, {}), 1) << "ties go to the lowest id";
}

// A decoder computes greedy tokens on the device only for samplers that are pure argmax; the
// device's codes for rows the host sampler would refuse give the same errors.
TEST(Sampling, WhichSamplersAreGreedyAndTheDeviceArgmaxCodes) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_TRUE(Sampler(p, 1).greedy());
  p.top_k = 3;  // the filters do not matter to greedy (see above)
  EXPECT_TRUE(Sampler(p, 1).greedy());
  p.repetition_penalty = 1.2;  // the penalty changes which logit is largest
  EXPECT_FALSE(Sampler(p, 1).greedy());
  EXPECT_FALSE(Sampler(SamplingParams{}, 1).greedy());  // temperature 1
  EXPECT_EQ(*Sampler::from_argmax(7, 10), 7);
  const std::vector<float> nan_row = {0.0f, NAN}, masked = {-INFINITY, -INFINITY};
  Sampler g(SamplingParams{}, 1);
  auto host_nan = g.next(nan_row.data(), 2, {});
  auto dev_nan = Sampler::from_argmax(-1, 2);
  ASSERT_FALSE(host_nan.ok() || dev_nan.ok());
  EXPECT_EQ(dev_nan.status().code(), host_nan.status().code());
  EXPECT_NE(dev_nan.status().message().find("NaN"), std::string::npos) << dev_nan.status().message();
  auto host_masked = g.next(masked.data(), 2, {});
  auto dev_masked = Sampler::from_argmax(-2, 2);
  ASSERT_FALSE(host_masked.ok() || dev_masked.ok());
  EXPECT_EQ(dev_masked.status().message(), host_masked.status().message());
  EXPECT_EQ(Sampler::from_argmax(10, 10).status().code(), StatusCode::kInternal);
  EXPECT_EQ(Sampler::from_argmax(-3, 10).status().code(), StatusCode::kInternal);
}

TEST(Sampling, TemperatureOneDrawsTheSoftmax) {
  SamplingParams p;
  expect_distribution(frequencies(p, logits_of({0.5, 0.3, 0.15, 0.05})), {0.5, 0.3, 0.15, 0.05});
}

TEST(Sampling, TemperatureFlattensAndSharpens) {
  SamplingParams p;
  p.temperature = 2;  // softmax(log p / 2): p^(1/2), normalized
  const std::vector<double> base = {0.5, 0.3, 0.2};
  std::vector<double> want;
  double z = 0;
  for (double q : base) z += std::sqrt(q);
  for (double q : base) want.push_back(std::sqrt(q) / z);
  expect_distribution(frequencies(p, logits_of(base)), want);
  p.temperature = 0.5;  // p^2, normalized
  want.clear();
  z = 0;
  for (double q : base) z += q * q;
  for (double q : base) want.push_back(q * q / z);
  expect_distribution(frequencies(p, logits_of(base)), want);
}

TEST(Sampling, TopKTopPAndMinPKeepTheMostLikely) {
  const auto l = logits_of({0.5, 0.3, 0.2});
  SamplingParams k2;
  k2.top_k = 2;
  expect_distribution(frequencies(k2, l), {0.625, 0.375, 0});
  SamplingParams p07;  // 0.5 < 0.7 <= 0.5 + 0.3: the first two
  p07.top_p = 0.7;
  expect_distribution(frequencies(p07, l), {0.625, 0.375, 0});
  SamplingParams p05;  // the mass of the first reaches 0.45: it alone
  p05.top_p = 0.45;
  expect_distribution(frequencies(p05, l), {1, 0, 0});
  SamplingParams m;  // 0.2 < 0.5 * 0.5 <= 0.3
  m.min_p = 0.5;
  expect_distribution(frequencies(m, l), {0.625, 0.375, 0});
  SamplingParams k1;  // top-k 1 is greedy at any temperature
  k1.top_k = 1;
  k1.temperature = 5;
  expect_distribution(frequencies(k1, l), {1, 0, 0});
}

TEST(Sampling, MaskedTokensAreNeverDrawn) {
  SamplingParams p;
  expect_distribution(frequencies(p, logits_of({0.6, 0, 0.4})), {0.6, 0, 0.4});
}

TEST(Sampling, ASeedReproducesTheDraws) {
  SamplingParams p;
  p.has_seed = true;
  p.seed = 1234;
  const auto l = logits_of({0.25, 0.25, 0.25, 0.25});
  Sampler a(p, 1), b(p, 2);  // the request seed wins over the per-sequence fallback
  std::vector<int64_t> ta, tb;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(*a.next(l.data(), 4, {}));
    tb.push_back(*b.next(l.data(), 4, {}));
  }
  EXPECT_EQ(ta, tb);
  p.seed = 1235;
  Sampler c(p, 1);
  std::vector<int64_t> tc;
  for (int i = 0; i < 64; ++i) tc.push_back(*c.next(l.data(), 4, {}));
  EXPECT_NE(ta, tc) << "another seed, another stream (64 draws of 4 tokens)";
}

TEST(Sampling, RepetitionPenaltyAsHuggingFace) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.2;
  Sampler s(p, 1);
  const std::vector<float> pos = {2.0f, 1.9f};  // 2.0 / 1.2 = 1.67 < 1.9
  EXPECT_EQ(*s.next(pos.data(), 2, {0}), 1);
  EXPECT_EQ(*s.next(pos.data(), 2, {}), 0);
  const std::vector<float> neg = {-1.0f, -1.1f};  // -1.0 * 1.2 = -1.2 < -1.1
  EXPECT_EQ(*s.next(neg.data(), 2, {0, 0, 0}), 1) << "once per distinct token";
}

TEST(Sampling, BadOptionsAndLogitsAreClearErrors) {
  const std::vector<float> l = {0.0f, 1.0f};
  auto error = [&](SamplingParams p, const std::vector<float>& logits, const char* words) {
    Sampler s(p, 1);
    auto t = s.next(logits.data(), static_cast<int64_t>(logits.size()), {});
    ASSERT_FALSE(t.ok()) << words;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(words), std::string::npos) << t.status().message();
  };
  SamplingParams p;
  p.temperature = -1;
  error(p, l, "temperature");
  p = {};
  p.top_p = 0;
  error(p, l, "top_p");
  p = {};
  p.top_p = 1.5;
  error(p, l, "top_p");
  p = {};
  p.top_k = -2;
  error(p, l, "top_k");
  p = {};
  p.min_p = 2;
  error(p, l, "min_p");
  p = {};
  p.repetition_penalty = 0;
  error(p, l, "repetition_penalty");
  p = {};
  p.max_tokens = 0;
  error(p, l, "max_tokens");
  p = {};
  p.stop_token_ids = {5};
  error(p, l, "stop token id 5");
  error({}, {0.0f, NAN}, "logit 1 is nan");
  error({}, {INFINITY, 0.0f}, "logit 0 is inf");
  error({}, {-INFINITY, -INFINITY}, "every token is masked");
}

TEST(Sampling, FinishReasons) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop_token_ids = {7};
  EXPECT_EQ(finish_reason(p, 2, 1, 0), FinishReason::kNone);
  EXPECT_EQ(finish_reason(p, 0, 1, 0), FinishReason::kStop);  // end of sequence
  EXPECT_EQ(finish_reason(p, 7, 2, 0), FinishReason::kStop);  // a stop token
  EXPECT_EQ(finish_reason(p, 2, 3, 0), FinishReason::kLength);
  p.ignore_eos = true;
  EXPECT_EQ(finish_reason(p, 0, 1, 0), FinishReason::kNone);
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
}

}  // namespace
}  // namespace ingot::llm
