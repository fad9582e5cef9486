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
#include "llm/int4_weights.h"
#include "llm/model_config.h"
#include "llm/safetensors.h"

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
  /// The weights of a Llama-family GGUF (llama, qwen2, ... with llama's tensor names). With
  /// keep_int4, projections stored as Q4_0, Q4_1 or Q4_K also keep their 4-bit blocks
  /// (Layer::int4) for a GPU decoder with int4 weights to upload as they are.
  static Result<std::unique_ptr<LlamaCpuModel>> load(const GgufFile& file, bool keep_int4 = false);
  /// The weights of a Hugging Face model folder: `config` (its config.json) and its safetensors
  /// (model.safetensors or the shards of model.safetensors.index.json; F32/F16/BF16/FP8 read as
  /// floats). Hugging Face's Q/K rows pair dimension i with i + head_dim/2 (rotate-half); they are
  /// permuted once here into the adjacent pairs this decoder (and GGUF) rotates.
  static Result<std::unique_ptr<LlamaCpuModel>> load_hf(const LlamaConfig& config, const SafetensorsModel& weights);

  /// Random weights of `config`'s shapes (benchmarks of real model sizes, and the GPU decoder's
  /// tests): projections uniform with std 0.02 (as Hugging Face initializes them), norm gains
  /// 1 +- 0.1, Qwen2's biases (config.attention_bias) +-0.02; the same seed gives the same weights.
  static Result<std::unique_ptr<LlamaCpuModel>> random(const LlamaConfig& config, uint64_t seed);
  /// `config` and its rotary frequencies, no weights: the shapes a GPU decoder filled on the device
  /// needs (LlamaGpuModel::create_random). forward() refuses (kInvalidArgument).
  static Result<std::unique_ptr<LlamaCpuModel>> without_weights(const LlamaConfig& config);
  /// Rounds every projection to int4 groups of `group` (symmetric round-to-nearest,
  /// quantize_int4) and keeps both: the packed weights in Layer::int4 and their float values in
  /// place, so that forward() computes what a W4A16 decoder computes (the CPU reference of
  /// `--quantization int4`, and a model of a 4-bit checkpoint for tests). Projections that already
  /// hold 4-bit blocks (a Q4 GGUF) keep them. kInvalidArgument when a projection's input dim is not
  /// whole groups.
  Status quantize_int4_in_place(int64_t group);
  /// The group size of the 4-bit blocks the layers hold (0: none); the largest group the model's
  /// input dims allow (int4_group_for) when `fallback` and none are held.
  int64_t int4_group(bool fallback = false) const;
  /// Whether every projection of every layer holds 4-bit blocks: a checkpoint stored in 4 bits
  /// throughout (AWQ, GPTQ, compressed-tensors W4A16, a GGUF of Q4 projections only).
  bool all_int4() const;
  /// Frees the 4-bit blocks (the floats stay): a 4-bit checkpoint run as fp16/bf16 weights.
  void drop_int4();

  /// Frees the weights once a GPU decoder holds its copy (an 8B model's fp32 weights are 32 GB of
  /// host memory); the config and rotary frequencies stay; forward() refuses afterwards.
  void release_weights();
  bool has_weights() const { return !layers_.empty(); }

  const LlamaConfig& config() const { return config_; }
  /// Computes tokens[start, start + count) of one sequence at positions start.., writing their K/V
  /// into `kv` through `block_table` (which must cover start + count positions) and reading the
  /// K/V of positions < start from it. Returns the logits of the last computed position
  /// (vocab_size floats).
  Result<std::vector<float>> forward(const std::vector<int32_t>& tokens, int64_t start, int64_t count,
                                     const std::vector<int32_t>& block_table, KvStore* kv) const;

  /// One layer's weights, fp32, each projection row-major [out][in] (a row is one output's
  /// weights: y[o] = sum_i w[o * in + i] x[i]); biases empty where the model has none.
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, w_gate, w_up, w_down;
    /// The projections' 4-bit blocks, when the model holds them (load's keep_int4,
    /// quantize_int4_in_place): the same values as the floats above. Empty otherwise.
    struct Int4 {
      Int4Weights wq, wk, wv, wo, w_gate, w_up, w_down;
    } int4;
  };
  /// The weights, for the GPU decoder to upload: embed [vocab][hidden]; lm_head empty when tied
  /// to embed; inv_freq the head_dim / 2 rotary frequencies (Llama-3 scaling applied).
  const std::vector<Layer>& layers() const { return layers_; }
  const std::vector<float>& embed() const { return embed_; }
  const std::vector<float>& out_norm() const { return out_norm_; }
  const std::vector<float>& lm_head() const { return lm_head_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  Status init_rope();
  LlamaConfig config_;
  std::vector<float> embed_, out_norm_, lm_head_;  ///< lm_head_ empty: tied to embed_
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;  ///< head_dim / 2 rotary frequencies
};

}  // namespace ingot::llm
