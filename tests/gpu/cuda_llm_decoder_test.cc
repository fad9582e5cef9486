// Copyright ingot authors. Apache-2.0.
//
// The GPU decoder (src/llm/gpu_decoder) against the CPU reference decoder (src/llm/cpu_decoder,
// fp32) on the same random weights (LlamaCpuModel::random): Llama-style (GQA 2, tied embeddings),
// Qwen2-style (q/k/v biases, GQA 4, head_dim 128, untied head) and Llama-3 rope scaling; fp16 and
// bf16. Three sequences of different lengths are prefilled in one mixed step, then decoded
// together for 12 steps (both decoders fed the CPU's greedy token); every step's logits must keep
// cosine >= 0.999 (fp16) / 0.995 (bf16) with the CPU's, and the greedy tokens must agree where
// the CPU's top two logits are apart by more than the precision's noise. Chunked prefill (a prompt
// in two steps, the second reading the first's K/V from scattered blocks) gives the one-step
// logits. Decode steps replayed from CUDA graphs (padded batches, recaptured when the step buffers
// grow) match the same steps launched kernel by kernel. Bad chunks are errors, not crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/llm/llm_kernels.h"
#include "gpu_test_util.h"
#include "llm/cpu_decoder.h"
#include "llm/gpu_decoder.h"
#include "llm/int4_weights.h"

namespace ingot::gpu_test {
namespace {

using llm::GpuChunk;
using llm::GpuDecoderOptions;
using llm::GpuDecoderStats;
using llm::StepResult;
using llm::KvStore;
using llm::LlamaConfig;
using llm::LlamaCpuModel;
using llm::LlamaGpuModel;

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb + 1e-300);
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

/// The gap between the largest and second largest logit, relative to the largest |logit|.
double top2_gap(const std::vector<float>& v) {
  std::vector<float> s = v;
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
  double scale = 0;
  for (float x : v) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  return (s[0] - s[1]) / std::max(scale, 1e-12);
}

LlamaConfig llama_like() {
  LlamaConfig c;
  c.architecture = "llama";
  c.vocab_size = 1000;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = true;
  return c;
}

LlamaConfig qwen2_like() {
  LlamaConfig c = llama_like();
  c.architecture = "qwen2";
  c.hidden_size = 512;
  c.intermediate_size = 1024;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 128;
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  c.rope_theta = 1000000.0;
  return c;
}

LlamaConfig llama3_like() {
  LlamaConfig c = llama_like();
  c.rope_theta = 500000.0;
  c.rope_scaling = "llama3";
  c.rope_factor = 8.0;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = 4.0;
  c.rope_original_max_positions = 64;  // short, so the scaled wavelengths matter at these lengths
  return c;
}

/// How a GPU decoder follows the CPU decoder through prefill and decode.
struct Following {
  double worst = 1.0;       ///< the lowest logit cosine against the CPU
  double worst_twin = 1.0;  ///< against `twin` (when given)
  int clear = 0;            ///< steps x sequences where the CPU's top two are more than `gap` apart
  int clear_agreed = 0;     ///< of those, where the greedy tokens agree
};

/// Sequences with prompts of `lens` random ids (sequence s owns blocks s * 8 ..), `steps` steps:
/// the prompts, then one token each, every step through `gpu` (and `twin`) and the CPU decoder,
/// all continuing with the CPU's greedy token. The GPU's device argmax is checked on the way.
Following follow_the_cpu(LlamaCpuModel& cpu, LlamaGpuModel& gpu, LlamaGpuModel* twin,
                         const std::vector<int64_t>& lens, int steps, uint32_t seed, double gap) {
  const LlamaConfig& c = cpu.config();
  KvStore kv(c, static_cast<int64_t>(lens.size()) * 8, 16);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size - 1));
  const size_t n = lens.size();
  std::vector<std::vector<int32_t>> tokens(n), tables(n);
  for (size_t s = 0; s < n; ++s) {
    for (int64_t i = 0; i < lens[s]; ++i) tokens[s].push_back(tok(rng));
    for (int64_t b = 0; b < 8; ++b) tables[s].push_back(static_cast<int32_t>(s * 8 + b));
  }
  std::vector<int64_t> done(n, 0);
  Following f;
  for (int step = 0; step < steps; ++step) {
    std::vector<GpuChunk> chunks;
    for (size_t s = 0; s < n; ++s)
      chunks.push_back(GpuChunk{&tokens[s], done[s], static_cast<int64_t>(tokens[s].size()) - done[s], &tables[s]});
    auto a = gpu.forward(chunks);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    if (!a.ok()) return f;
    Result<StepResult> b = StepResult();
    if (twin) {
      b = twin->forward(chunks);
      EXPECT_TRUE(b.ok()) << b.status().to_string();
      if (!b.ok()) return f;
    }
    for (size_t s = 0; s < n; ++s) {
      auto want = cpu.forward(tokens[s], chunks[s].start, chunks[s].count, tables[s], &kv);
      EXPECT_TRUE(want.ok());
      if (!want.ok()) return f;
      f.worst = std::min(f.worst, cosine(a->logits[s], *want));
      if (twin) f.worst_twin = std::min(f.worst_twin, cosine(a->logits[s], b->logits[s]));
      EXPECT_EQ(a->argmax[s], argmax(a->logits[s])) << "step " << step << ", sequence " << s;
      if (top2_gap(*want) > gap) {
        ++f.clear;
        f.clear_agreed += argmax(a->logits[s]) == argmax(*want);
      }
      done[s] = static_cast<int64_t>(tokens[s].size());
      tokens[s].push_back(argmax(*want));
    }
  }
  return f;
}

struct Case {
  const char* name;
  LlamaConfig config;
  bool bf16;
};

/// The decoder options these tests start from: the case's precision, `num_blocks` blocks of 16
/// positions, and prompts of 32+ tokens from position 0 on the flash kernel (so the tests' 37- to
/// 70-token prompts take it, and shorter ones the paged decode kernel).
GpuDecoderOptions test_options(const Case& k, int64_t num_blocks) {
  GpuDecoderOptions o;
  o.bf16 = k.bf16;
  o.num_blocks = num_blocks;
  o.block_size = 16;
  o.flash_prefill_min_tokens = 32;
  return o;
}

/// The current device's compute capability as 10 * major + minor (0 when it cannot be read).
int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
}

class CudaLlmDecoderTest : public CudaTest, public ::testing::WithParamInterface<int> {};

std::vector<Case> cases() {
  return {{"llama_fp16", llama_like(), false},   {"llama_bf16", llama_like(), true},
          {"qwen2_fp16", qwen2_like(), false},   {"qwen2_bf16", qwen2_like(), true},
          {"llama3_fp16", llama3_like(), false}};
}

TEST_P(CudaLlmDecoderTest, MatchesTheCpuDecoderThroughPrefillAndDecode) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  auto cpu = LlamaCpuModel::random(k.config, 20261206);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  const int32_t bs = 16;
  const int64_t num_blocks = 64;
  GpuDecoderOptions o = test_options(k, num_blocks);  // blocks of bs; the 37- and 70-token prompts take flash
  o.partition_size = 32;  // the split-K path runs from the first prompt on
  auto gpu = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  KvStore kv(k.config, num_blocks, bs);

  // Three sequences; blocks dealt out shuffled, none shared.
  std::mt19937 rng(7);
  std::vector<int32_t> blocks(static_cast<size_t>(num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const std::vector<int64_t> prompt_lens = {5, 37, 70};
  const int steps = 12;
  std::vector<std::vector<int32_t>> tokens(3), tables(3);
  size_t next_block = 0;
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(k.config.vocab_size - 1));
  for (size_t s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < prompt_lens[s]; ++i) tokens[s].push_back(tok(rng));
    const int64_t need = (prompt_lens[s] + steps + bs - 1) / bs;
    for (int64_t b = 0; b < need; ++b) tables[s].push_back(blocks[next_block++]);
  }
  const double min_cos = k.bf16 ? 0.995 : 0.999;
  const double noise = k.bf16 ? 0.05 : 0.01;  // top-2 gaps below this may flip with rounding
  int compared = 0, agreed = 0, clear = 0, clear_agreed = 0;
  double worst = 1.0;
  std::vector<int64_t> done(3, 0);  // positions already in the caches
  for (int step = 0; step <= steps; ++step) {
    std::vector<GpuChunk> chunks;
    for (size_t s = 0; s < 3; ++s)
      chunks.push_back(GpuChunk{&tokens[s], done[s], static_cast<int64_t>(tokens[s].size()) - done[s], &tables[s]});
    auto got = (*gpu)->forward(chunks);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->logits.size(), 3u);
    ASSERT_EQ(got->argmax.size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
      auto want = (*cpu)->forward(tokens[s], chunks[s].start, chunks[s].count, tables[s], &kv);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      // The device's argmax is the host's over the same logits.
      EXPECT_EQ(got->argmax[s], argmax(got->logits[s])) << "step " << step << ", sequence " << s;
      const double cs = cosine(got->logits[s], *want);
      worst = std::min(worst, cs);
      EXPECT_GE(cs, min_cos) << "step " << step << ", sequence " << s;
      ++compared;
      const bool same = argmax(got->logits[s]) == argmax(*want);
      agreed += same;
      if (top2_gap(*want) > noise) {
        ++clear;
        clear_agreed += same;
      }
      done[s] = static_cast<int64_t>(tokens[s].size());
      tokens[s].push_back(argmax(*want));  // both decoders continue with the CPU's greedy token
    }
  }
  EXPECT_EQ(clear_agreed, clear) << "greedy tokens differ where the CPU's top two logits are clearly apart";
  std::printf("[ gpu decoder ] %s: worst logit cosine %.6f over %d steps x sequences; greedy agreement %d/%d "
              "(%d/%d where the top two are clearly apart)\n",
              k.name, worst, compared, agreed, compared, clear_agreed, clear);
}

TEST_P(CudaLlmDecoderTest, ChunkedPrefillGivesTheOneStepLogits) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  auto cpu = LlamaCpuModel::random(k.config, 99);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  GpuDecoderOptions o = test_options(k, 16);
  auto gpu = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(k.config.vocab_size - 1));
  std::vector<int32_t> prompt(45);
  for (int32_t& t : prompt) t = tok(rng);
  const std::vector<int32_t> whole = {0, 1, 2}, split = {9, 4, 12};
  auto one = (*gpu)->forward({GpuChunk{&prompt, 0, 45, &whole}});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  auto first = (*gpu)->forward({GpuChunk{&prompt, 0, 20, &split}});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = (*gpu)->forward({GpuChunk{&prompt, 20, 25, &split}});
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_GE(cosine(second->logits[0], one->logits[0]), k.bf16 ? 0.999 : 0.99999);
}

// Two decoders of one random model, options `a` and `b` (test_options otherwise): two sequences
// prefilled (9 and 21 tokens), then eight steps of two tokens, each step's logits compared; the
// worst cosine. Each step's token is b's greedy choice, fed to both.
double worst_step_cosine(const Case& k, void (*a)(GpuDecoderOptions&), void (*b)(GpuDecoderOptions&),
                         double bar) {
  auto cpu = LlamaCpuModel::random(k.config, 424);
  EXPECT_TRUE(cpu.ok()) << cpu.status().to_string();
  if (!cpu.ok()) return 0.0;
  std::vector<std::unique_ptr<LlamaGpuModel>> gpus;
  for (auto set : {a, b}) {
    GpuDecoderOptions o = test_options(k, 16);
    set(o);
    auto gpu = LlamaGpuModel::create(**cpu, o);
    EXPECT_TRUE(gpu.ok()) << gpu.status().to_string();
    if (!gpu.ok()) return 0.0;
    gpus.push_back(std::move(*gpu));
  }
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(k.config.vocab_size - 1));
  std::vector<std::vector<int32_t>> tokens = {std::vector<int32_t>(9), std::vector<int32_t>(21)};
  for (auto& seq : tokens)
    for (int32_t& t : seq) t = tok(rng);
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {5, 3, 7}};
  std::vector<int64_t> done(2, 0);
  double worst = 1.0;
  for (int step = 0; step <= 8; ++step) {
    std::vector<GpuChunk> chunks;
    for (size_t s = 0; s < 2; ++s)
      chunks.push_back(GpuChunk{&tokens[s], done[s], static_cast<int64_t>(tokens[s].size()) - done[s], &tables[s]});
    auto ra = gpus[0]->forward(chunks);
    auto rb = gpus[1]->forward(chunks);
    EXPECT_TRUE(ra.ok() && rb.ok()) << (ra.ok() ? rb.status().to_string() : ra.status().to_string());
    if (!ra.ok() || !rb.ok()) return 0.0;
    for (size_t s = 0; s < 2; ++s) {
      const double cs = cosine(ra->logits[s], rb->logits[s]);
      worst = std::min(worst, cs);
      EXPECT_GE(cs, bar) << "step " << step << ", sequence " << s;
      done[s] = static_cast<int64_t>(tokens[s].size());
      tokens[s].push_back(rb->argmax[s]);
    }
  }
  return worst;
}

// Decode steps with the RMSNorms and the SiLU gate inside the GEMVs (gemv_prologue) and
// with each its own kernel: the same logits up to the rounding of the normalized and gated
// activations to the model's type, which only the unfused path does. The prefill runs GEMMs and
// separate norms either way, the decode steps GEMVs.
TEST_P(CudaLlmDecoderTest, GemvProloguesKeepTheDecodeLogits) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  const double worst = worst_step_cosine(
      k, [](GpuDecoderOptions& o) { o.gemv_prologue = true; }, [](GpuDecoderOptions& o) { o.gemv_prologue = false; },
      k.bf16 ? 0.999 : 0.9999);
  std::printf("[ gpu decoder ] %s: GEMV prologues on vs off, worst logit cosine %.7f\n", k.name, worst);
}

// The grouped decode attention (a block per KV head's query group) against the per-head kernel in
// the whole decoder: the same logits up to fp32 summation order (every config here has a GQA group
// of 2-8 or none: a model without one keeps the per-head kernel either way).
TEST_P(CudaLlmDecoderTest, GroupedDecodeAttentionKeepsTheDecodeLogits) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  const double worst = worst_step_cosine(
      k, [](GpuDecoderOptions& o) { o.grouped_decode_attention = true; },
      [](GpuDecoderOptions& o) { o.grouped_decode_attention = false; }, k.bf16 ? 0.9999 : 0.99999);
  std::printf("[ gpu decoder ] %s: grouped vs per-head decode attention, worst logit cosine %.7f\n", k.name, worst);
}

// Decode steps replayed from CUDA graphs (padded batches 4, 2, 1; recaptured after a longer prefill
// moves the step buffers) against the same steps launched kernel by kernel.
TEST_P(CudaLlmDecoderTest, DecodeGraphsMatchEagerSteps) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  auto cpu = LlamaCpuModel::random(k.config, 5);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  GpuDecoderOptions o = test_options(k, 64);  // sequence s holds blocks from s * 12 on: 2, 4, 6 and 14 of them
  o.graph_max_context = 512;
  o.cuda_graphs = false;
  auto eager = LlamaGpuModel::create(**cpu, o);
  o.cuda_graphs = true;
  auto graphs = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(eager.ok() && graphs.ok());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(k.config.vocab_size - 1));
  std::vector<std::vector<int32_t>> tokens(4), tables(4);
  const std::vector<int64_t> lens = {5, 37, 70, 200};
  for (size_t s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < lens[s]; ++i) tokens[s].push_back(tok(rng));
    for (int64_t b = 0; b < (lens[s] + 24 + 15) / 16; ++b) tables[s].push_back(static_cast<int32_t>(s * 12 + b));
  }
  std::vector<int64_t> done(4, 0);
  double worst = 1.0;
  auto step = [&](const std::vector<size_t>& seqs) {
    std::vector<GpuChunk> chunks;
    for (size_t s : seqs)
      chunks.push_back(GpuChunk{&tokens[s], done[s], static_cast<int64_t>(tokens[s].size()) - done[s], &tables[s]});
    auto a = (*eager)->forward(chunks);
    auto b = (*graphs)->forward(chunks);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << " / " << b.status().to_string();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const double cs = cosine(a->logits[i], b->logits[i]);
      worst = std::min(worst, cs);
      EXPECT_GE(cs, k.bf16 ? 0.9999 : 0.99999) << "sequence " << seqs[i];
      done[seqs[i]] = static_cast<int64_t>(tokens[seqs[i]].size());
      tokens[seqs[i]].push_back(argmax(a->logits[i]));
    }
  };
  step({0, 1, 2});                                      // prefill (not a graph step)
  for (int i = 0; i < 6; ++i) step({0, 1, 2});          // padded batch 4
  for (int i = 0; i < 4; ++i) step({1, 2});             // batch 2
  step({3});                                            // a 200-token prefill: the step buffers grow
  for (int i = 0; i < 4; ++i) step({0, 1, 2, 3});       // batch 4, recaptured
  for (int i = 0; i < 4; ++i) step({3});                // batch 1
  std::printf("[ gpu decoder ] %s: decode graphs against eager steps, worst logit cosine %.7f\n", k.name, worst);
}

// What a server's start-up and a greedy batch do: warmup() captures the decode graphs of padded
// batches 1, 2 and 4 once (no step after it captures again: its buffers were sized for the
// largest step), and steps that ask for no logits return only the device argmax, which is the
// argmax of the logits an eager twin returns for the same tokens wherever the top two are clearly
// apart.
TEST_P(CudaLlmDecoderTest, WarmupThenArgmaxOnlySteps) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  auto cpu = LlamaCpuModel::random(k.config, 17);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  GpuDecoderOptions o = test_options(k, 48);
  o.graph_max_context = 256;
  auto served = LlamaGpuModel::create(**cpu, o);
  o.cuda_graphs = false;
  auto twin = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(served.ok() && twin.ok());
  ASSERT_TRUE((*served)->warmup(/*max_step_tokens=*/128, /*max_batch=*/3).ok());
  EXPECT_EQ((*served)->stats().graph_captures, 3);  // padded batches 1, 2, 4
  EXPECT_GT((*served)->stats().warmup_seconds, 0.0);
  EXPECT_FALSE((*served)->warmup(0, 1).ok());
  std::mt19937 rng(23);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(k.config.vocab_size - 1));
  std::vector<std::vector<int32_t>> tokens(3), tables(3);
  const std::vector<int64_t> lens = {9, 40, 66};  // 115 prompt tokens: within warmup's 128
  for (size_t s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < lens[s]; ++i) tokens[s].push_back(tok(rng));
    for (int64_t b = 0; b < 16; ++b) tables[s].push_back(static_cast<int32_t>(s * 16 + b));
  }
  std::vector<int64_t> done(3, 0);
  const double noise = k.bf16 ? 0.05 : 0.01;
  int clear = 0, clear_agreed = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<GpuChunk> ask, greedy;
    for (size_t s = 0; s < 3; ++s) {
      GpuChunk ch{&tokens[s], done[s], static_cast<int64_t>(tokens[s].size()) - done[s], &tables[s]};
      ask.push_back(ch);
      ch.need_logits = s == 1 && step % 2 == 0;  // one sequence sometimes samples on the host
      greedy.push_back(ch);
    }
    auto a = (*twin)->forward(ask);
    auto b = (*served)->forward(greedy);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << " / " << b.status().to_string();
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(b->logits[s].empty(), !greedy[s].need_logits) << "step " << step << ", sequence " << s;
      if (top2_gap(a->logits[s]) > noise) {
        ++clear;
        clear_agreed += b->argmax[s] == argmax(a->logits[s]);
      }
      done[s] = static_cast<int64_t>(tokens[s].size());
      tokens[s].push_back(argmax(a->logits[s]));
    }
  }
  EXPECT_EQ(clear_agreed, clear);
  EXPECT_GT(clear, 0);
  const GpuDecoderStats& st = (*served)->stats();
  EXPECT_EQ(st.graph_captures, 3) << "a step after warmup captured again";
  EXPECT_EQ(st.graph_steps, 7);  // every step but the prefill
  EXPECT_EQ(st.eager_steps, 1);
  EXPECT_EQ(st.logits_rows_copied, 4);
}

// What a quantized decoder's following of the CPU decoder came to (the test log's line).
void print_following(const Case& k, const char* what, const Following& f) {
  std::printf("[ gpu decoder ] %s %s: worst logit cosine %.5f against the CPU, %.5f against the %s decoder; "
              "greedy %d/%d where the CPU's top two are far apart\n",
              k.name, what, f.worst, f.worst_twin, k.bf16 ? "bf16" : "fp16", f.clear_agreed, f.clear);
}

// The int4 group a config's projections take (32, 64 or 128; 0: none divides every input dim).
int64_t int4_group_of(const LlamaConfig& c) {
  return llm::int4_group_for({c.hidden_size, c.intermediate_size, c.num_heads * c.head_dim});
}

// W8A8 fp8 projections (Hopper) against the fp32 CPU decoder through prefill and decode: float8
// carries 3 mantissa bits, so the bar is looser than fp16's (cosine 0.98; the greedy token where the
// CPU's top two are far apart), and the fp8 decoder must sit near its own fp16/bf16 twin.
TEST_P(CudaLlmDecoderTest, Fp8WeightsFollowTheCpuDecoder) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  const int cc = compute_capability();
  ASSERT_GT(cc, 0);
  auto cpu = LlamaCpuModel::random(k.config, 31);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  GpuDecoderOptions o = test_options(k, 32);
  o.fp8_weights = true;
  auto fp8 = LlamaGpuModel::create(**cpu, o);
  if (cc < 89) {
    ASSERT_FALSE(fp8.ok());
    EXPECT_EQ(fp8.status().code(), StatusCode::kUnsupported);
    GTEST_SKIP() << "fp8 weights need compute capability 8.9+ (this GPU: " << cc / 10 << "." << cc % 10
                 << "); the refusal was checked";
  }
  ASSERT_TRUE(fp8.ok()) << fp8.status().to_string();
  o.fp8_weights = false;
  auto twin = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(twin.ok());
  const Following f = follow_the_cpu(**cpu, **fp8, twin->get(), {11, 50}, 8, 37, 0.1);
  EXPECT_GE(f.worst, 0.98);
  EXPECT_GE(f.worst_twin, 0.98);
  EXPECT_EQ(f.clear_agreed, f.clear);
  print_following(k, "fp8 weights", f);
}

// INT4 weight-only projections (W4A16) through prefill (dequantized weights through cuBLASLt) and
// decode (the int4 GEMV), against the CPU decoder on the same 4-bit weights' values
// (quantize_int4_in_place: the CPU reference of the int4 numerics), so the bar is fp16's:
//   - rounded on the device at load from the fp32 weights (the device quantizer equals the host's);
//   - uploaded as the model holds them (a 4-bit checkpoint's path: a Q4 GGUF), in groups of 32 and
//     of the config's largest group.
// How far 4 bits move the logits from the unquantized model is printed, not asserted. Configs whose
// input dims are not whole groups of 32 are refused with kUnsupported; the test then goes on with
// the config's intermediate size rounded up to whole groups of 128 (so every config runs int4).
TEST_P(CudaLlmDecoderTest, Int4WeightsFollowTheCpuDecoder) {
  Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  GpuDecoderOptions o = test_options(k, 32);
  o.int4_weights = true;
  if (int4_group_of(k.config) == 0) {
    auto odd = LlamaCpuModel::random(k.config, 33);
    ASSERT_TRUE(odd.ok()) << odd.status().to_string();
    auto refused = LlamaGpuModel::create(**odd, o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
    k.config.intermediate_size = (k.config.intermediate_size + 127) / 128 * 128;
  }
  const int64_t group = int4_group_of(k.config);
  ASSERT_NE(group, 0);
  auto cpu = LlamaCpuModel::random(k.config, 33);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto int4 = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(int4.ok()) << int4.status().to_string();
  const double bar = k.bf16 ? 0.999 : 0.9999;
  {
    auto ref = LlamaCpuModel::random(k.config, 33);
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE((*ref)->quantize_int4_in_place(group).ok());
    const Following f = follow_the_cpu(**ref, **int4, nullptr, {11, 50}, 8, 37, 0.1);
    EXPECT_GE(f.worst, bar);
    EXPECT_EQ(f.clear_agreed, f.clear);
    print_following(k, "int4 weights rounded on the device", f);
    // A longer prefill on the same decoder: the int4 GEMM's split-K workspace grows (and must be
    // zeros again: session 34's b64 run failed here when cudaMalloc returned the freed address).
    const Following longer = follow_the_cpu(**ref, **int4, nullptr, {40, 50, 60}, 4, 38, 0.1);
    EXPECT_GE(longer.worst, bar);
    EXPECT_EQ(longer.clear_agreed, longer.clear);
    const Following q = follow_the_cpu(**cpu, **int4, nullptr, {11, 50}, 8, 37, 0.1);
    std::printf("[ gpu decoder ] %s int4 (groups of %lld) against the unquantized CPU decoder: worst logit cosine "
                "%.5f, greedy %d/%d\n", k.name, static_cast<long long>(group), q.worst, q.clear_agreed, q.clear);
  }
  for (int64_t g : {int64_t{32}, group}) {
    SCOPED_TRACE("uploaded 4-bit blocks, groups of " + std::to_string(g));
    auto ref = LlamaCpuModel::random(k.config, 35);
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE((*ref)->quantize_int4_in_place(g).ok());
    ASSERT_EQ((*ref)->int4_group(), g);
    GpuDecoderOptions og = o;
    og.int4_group = 0;  // the model's own blocks' group
    auto packed = LlamaGpuModel::create(**ref, og);
    ASSERT_TRUE(packed.ok()) << packed.status().to_string();
    const Following f = follow_the_cpu(**ref, **packed, nullptr, {11, 50}, 8, 39, 0.1);
    EXPECT_GE(f.worst, bar);
    EXPECT_EQ(f.clear_agreed, f.clear);
    print_following(k, g == 32 ? "int4 blocks uploaded, groups of 32" : "int4 blocks uploaded, the config's group", f);
    og.int4_group = g == 32 ? group : 32;  // blocks of one size, a decoder of another: refused
    if (og.int4_group != g) {
      auto mismatch = LlamaGpuModel::create(**ref, og);
      ASSERT_FALSE(mismatch.ok());
      EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
    }
  }
  o.fp8_weights = true;
  auto both = LlamaGpuModel::create(**cpu, o);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
}

// An fp8 KV cache (scales 1) through prefill and decode (split-K attention too) against the CPU
// decoder.
TEST_P(CudaLlmDecoderTest, Fp8KvCacheFollowsTheCpuDecoder) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  auto cpu = LlamaCpuModel::random(k.config, 41);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  GpuDecoderOptions o = test_options(k, 32);
  o.partition_size = 32;  // the split path too
  o.fp8_kv = true;
  auto gpu = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const Following f = follow_the_cpu(**cpu, **gpu, nullptr, {20, 70}, 8, 43, 0.1);
  EXPECT_GE(f.worst, 0.99);
  EXPECT_EQ(f.clear_agreed, f.clear);
  std::printf("[ gpu decoder ] %s fp8 KV cache: worst logit cosine %.5f against the CPU; greedy %d/%d where the "
              "CPU's top two are far apart\n", k.name, f.worst, f.clear_agreed, f.clear);
}

// Weights made on the device (create_random, what --load-format dummy uses on the GPU) are
// LlamaCpuModel::random's bit for bit: a prompt each for two sequences, then decode steps, give
// the same logits as the decoder uploaded from the CPU model, exactly; fp8 weights too (the
// device quantizer against the host's, same scale and rounding), and int4 weights (both paths
// quantize the same fp32 values on the device).
TEST_P(CudaLlmDecoderTest, WeightsMadeOnTheDeviceEqualTheUploadedOnes) {
  const Case k = cases()[static_cast<size_t>(GetParam())];
  SCOPED_TRACE(k.name);
  const int cc = compute_capability();
  ASSERT_GT(cc, 0);
  const uint64_t seed = 77;
  auto cpu = LlamaCpuModel::random(k.config, seed);
  auto shapes = LlamaCpuModel::without_weights(k.config);
  ASSERT_TRUE(cpu.ok() && shapes.ok());
  const bool whole_groups = int4_group_of(k.config) != 0;
  for (int mode : {0, 1, 2}) {  // the model's type, fp8 weights, int4 weights
    if ((mode == 1 && cc < 89) || (mode == 2 && !whole_groups)) continue;
    SCOPED_TRACE(mode == 1 ? "fp8 weights" : mode == 2 ? "int4 weights" : "model type");
    GpuDecoderOptions o = test_options(k, 16);
    o.fp8_weights = mode == 1;
    o.int4_weights = mode == 2;
    auto uploaded = LlamaGpuModel::create(**cpu, o);
    auto made = LlamaGpuModel::create_random(**shapes, o, seed);
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    std::vector<std::vector<int32_t>> tokens = {{5, 9, 2, 7, 1, 3, 8}, {4, 4, 6}};
    const std::vector<std::vector<int32_t>> tables = {{0, 1}, {2, 3}};
    std::vector<int64_t> done = {0, 0};
    for (int step = 0; step < 4; ++step) {
      std::vector<GpuChunk> chunks;
      for (size_t q = 0; q < tokens.size(); ++q)
        chunks.push_back(GpuChunk{&tokens[q], done[q], static_cast<int64_t>(tokens[q].size()) - done[q], &tables[q]});
      auto a = (*uploaded)->forward(chunks);
      auto b = (*made)->forward(chunks);
      ASSERT_TRUE(a.ok() && b.ok());
      for (size_t q = 0; q < tokens.size(); ++q) {
        ASSERT_EQ(a->logits[q].size(), static_cast<size_t>(k.config.vocab_size));
        EXPECT_TRUE(a->logits[q] == b->logits[q]) << "step " << step << ", sequence " << q;
        done[q] = static_cast<int64_t>(tokens[q].size());
        tokens[q].push_back(a->argmax[q]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, CudaLlmDecoderTest, ::testing::Range(0, 5),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(cases()[static_cast<size_t>(i.param)].name);
                         });

// The decode profile names every op of a layer, its ops add up to the eager step, and a request the
// cache cannot hold is refused. With the GEMV prologues (the default) the RMSNorms and the SiLU gate
// are inside the projections and have no rows of their own; without them they do.
TEST_F(CudaTest, LlmDecoderProfilesADecodeStep) {
  auto cpu = LlamaCpuModel::random(qwen2_like(), 3);
  ASSERT_TRUE(cpu.ok());
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "GEMV prologues" : "separate norm and gate kernels");
    GpuDecoderOptions o;
    o.num_blocks = 64;
    o.gemv_prologue = fused;
    auto gpu = LlamaGpuModel::create(**cpu, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    auto rows = (*gpu)->profile_decode(/*batch=*/4, /*context=*/100, /*iterations=*/3);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    std::map<std::string, double> ms(rows->begin(), rows->end());
    std::vector<const char*> ops_named = {"step (as served)", "eager step (GPU)", "embedding", "qkv projection",
                                          "rope + kv write", "attention", "output projection", "gate/up projection",
                                          "down projection", "final norm", "lm head", "argmax"};
    for (const char* op : {"rmsnorm", "silu * up"}) {
      if (fused)
        EXPECT_EQ(ms.count(op), 0u) << op << " has a row of its own";
      else
        ops_named.push_back(op);
    }
    for (const char* op : ops_named) {
      ASSERT_TRUE(ms.count(op)) << op;
      EXPECT_GT(ms[op], 0.0) << op;
    }
    double ops = 0;
    for (size_t i = 2; i < rows->size(); ++i) ops += (*rows)[i].second;
    EXPECT_NEAR(ops, ms["eager step (GPU)"], 1e-3 * ms["eager step (GPU)"] + 1e-6);
    std::printf("[ gpu decoder ] profile of a qwen2-like decode step, 4 x 100, %s: as served %.4f ms, eager GPU %.4f ms\n",
                fused ? "GEMV prologues" : "separate kernels", ms["step (as served)"], ms["eager step (GPU)"]);
    EXPECT_EQ((*gpu)->profile_decode(8, 200).status().code(), StatusCode::kInvalidArgument);  // 8 x 13 blocks > 64
  }
}

TEST_F(CudaTest, LlmDecoderRefusesBadChunks) {
  auto cpu = LlamaCpuModel::random(llama_like(), 1);
  ASSERT_TRUE(cpu.ok());
  GpuDecoderOptions o;
  o.num_blocks = 4;
  auto gpu = LlamaGpuModel::create(**cpu, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  std::vector<int32_t> toks = {1, 2, 3}, bad_tok = {1, 5000}, table = {0}, outside = {7};
  std::vector<int32_t> long_toks(40, 1);
  struct Bad {
    GpuChunk chunk;
    const char* says;
  };
  for (const Bad& b : {Bad{GpuChunk{&toks, 0, 4, &table}, "outside its sequence"},
                       Bad{GpuChunk{&long_toks, 0, 40, &table}, "positions"},
                       Bad{GpuChunk{&toks, 0, 3, &outside}, "outside the KV cache"},
                       Bad{GpuChunk{&bad_tok, 0, 2, &table}, "outside the vocabulary"},
                       Bad{GpuChunk{nullptr, 0, 1, &table}, "outside its sequence"}}) {
    auto r = (*gpu)->forward({b.chunk});
    ASSERT_FALSE(r.ok()) << b.says;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().to_string().find(b.says), std::string::npos) << r.status().to_string();
  }
  o.num_blocks = 0;
  EXPECT_EQ(LlamaGpuModel::create(**cpu, o).status().code(), StatusCode::kInvalidArgument);
  LlamaConfig odd = llama_like();
  odd.head_dim = 32;
  odd.num_heads = 8;
  auto small = LlamaCpuModel::random(odd, 1);
  ASSERT_TRUE(small.ok());
  o.num_blocks = 4;
  EXPECT_EQ(LlamaGpuModel::create(**small, o).status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace ingot::gpu_test
