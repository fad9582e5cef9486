// Copyright ingot authors. Apache-2.0.
//
// A Llama-family decoder on the CPU in fp32 (issue 22): the reference the GPU runtime is checked
// against, and what `ingot generate` runs where there is no GPU. Weights come from a GGUF file
// (dequantized once at load), the KV cache is paged: per layer, blocks of `block_size` positions
// addressed through a sequence's block table (llm/kv_block_manager), so the same bookkeeping
// serves this decoder and the GPU one.
//
// The math is the Llama architecture as llama.cpp stores it in GGUF: RMSNorm, Q/K/V projections
// (Qwen2's biases when present), rotary embeddings on adjacent pairs (GGUF's converter permutes
// Hugging Face's rotate-half Q/K rows into that order; Llama-3 frequency scaling supported),
// grouped-query causal attention over the cache, the output projection, SwiGLU MLP, the final
// RMSNorm and the LM head (the token embedding when the file has no output.weight).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "llm/gguf.h"
#include "llm/model_config.h"

namespace ingot::llm {

/// K and V of every layer, in blocks: [layer][block][slot][kv_head][head_dim], fp32.
class KvStore {
 public:
  KvStore(const LlamaConfig& c, int64_t num_blocks, int32_t block_size);
  float* k(int64_t layer, int64_t block, int64_t slot);
  float* v(int64_t layer, int64_t block, int64_t slot);
  int32_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }

 private:
  int64_t num_blocks_;
  int32_t block_size_;
  int64_t row_;  ///< kv_heads * head_dim
  int64_t layer_stride_;
  std::vector<float> k_, v_;
};

class LlamaCpuModel {
 public:
  /// The weights of a Llama-family GGUF (llama, qwen2, ... with llama's tensor names).
  static Result<std::unique_ptr<LlamaCpuModel>> load(const GgufFile& file);

  const LlamaConfig& config() const { return config_; }
  /// Computes tokens[start, start + count) of one sequence at positions start.., writing their K/V
  /// into `kv` through `block_table` (which must cover start + count positions) and reading the
  /// K/V of positions < start from it. Returns the logits of the last computed position
  /// (vocab_size floats).
  Result<std::vector<float>> forward(const std::vector<int32_t>& tokens, int64_t start, int64_t count,
                                     const std::vector<int32_t>& block_table, KvStore* kv) const;

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
  };
  LlamaConfig config_;
  std::vector<float> embed_, out_norm_, lm_head_;  ///< lm_head_ empty: tied to embed_
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;  ///< head_dim / 2 rotary frequencies
};

}  // namespace ingot::llm
