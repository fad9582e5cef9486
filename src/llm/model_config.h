// Copyright ingot authors. Apache-2.0.
//
// A Llama-family decoder's hyperparameters (Llama 2/3, Qwen2, SmolLM, Mistral without sliding
// windows): from a Hugging Face config.json or from a GGUF file's "<arch>." metadata, into one
// struct the runtime builds from. Missing required fields and values that cannot be right (heads
// not dividing the width, kv heads not dividing heads, an unknown rope scaling) are errors naming
// the field.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "llm/gguf.h"

namespace ingot::llm {

struct LlamaConfig {
  std::string architecture;  ///< "llama", "qwen2", ... (GGUF general.architecture / HF model_type)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  ///< hidden_size / num_heads unless given
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  ///< Qwen2: q/k/v projections carry biases
  /// Llama 3's rope scaling ("llama3"), or "none".
  std::string rope_scaling = "none";
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_positions = 8192;
  /// A quantized Hugging Face checkpoint's config.json "quantization_config": quant_method ("awq",
  /// "gptq", "compressed-tensors", "fp8", ...; empty: none), bits, group_size, zero_point and
  /// version (AWQ's "gemm" / "gemv" packing); GPTQ's desc_act and checkpoint_format; for compressed-tensors its format ("pack-quantized",
  /// ...) and its one config group's weights (type, symmetric, strategy, actorder) and whether it
  /// quantizes activations too; groups counts its config_groups.
  struct Quantization {
    std::string method;
    int64_t bits = 0;
    int64_t group_size = 0;
    bool zero_point = false;
    std::string version;
    std::string format, type, strategy, actorder;
    bool desc_act = false;           ///< GPTQ: act-order (groups follow g_idx)
    std::string checkpoint_format;   ///< GPTQ: "gptq" (zeros stored - 1, the default) or "gptq_v2"
    bool symmetric = true;
    bool activations = false;
    int64_t groups = 0;
  } quantization;
};

/// From the text of a Hugging Face config.json.
Result<LlamaConfig> llama_config_from_json(const std::string& json_text, const std::string& what = "config.json");
/// From a GGUF file's metadata (general.architecture, then "<arch>.block_count", ...).
Result<LlamaConfig> llama_config_from_gguf(const GgufFile& file);

}  // namespace ingot::llm
