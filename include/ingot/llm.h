// Copyright ingot authors. Apache-2.0.
//
// Text generation with a Llama-family model (issue 22): load a GGUF file, generate from prompts.
// Today this runs the CPU reference decoder (fp32, paged KV cache, continuous batching of the
// prompts given together); the GPU runtime will sit behind the same calls.
#pragma once

#include <cstdint>
#include <functional>
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
  /// Stop strings (LlmEngine): generation ends before the first one in the text, which is cut there.
  std::vector<std::string> stop;
};

/// One turn of a chat (role "system", "user" or "assistant").
struct ChatMessage {
  std::string role;
  std::string content;
};

struct GenerationResult {
  std::string text;                 ///< the generated text (without a final end-of-sequence token)
  std::vector<int32_t> prompt_ids;  ///< the prompt as the model saw it
  std::vector<int32_t> token_ids;   ///< generated ids, the end-of-sequence token included when it came
  std::string finish_reason;        ///< "length", "stop" or "model_length"
};

struct GenerationStats {
  double seconds = 0;       ///< wall time of the generation steps
  double warmup_seconds = 0;   ///< before them, untimed: the GPU decoder's warmup (buffers, CUDA graphs)
  double forward_seconds = 0;  ///< of `seconds`: in the decoder (GPU: launch, run, copies back)
  double sample_seconds = 0;   ///< of `seconds`: choosing the next tokens on the host
  int64_t steps = 0;        ///< scheduler steps
  int64_t graph_steps = 0;  ///< of steps: replayed from a CUDA graph (the GPU decoder's decode steps)
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
};

class LlmEngine;

/// Where an LlmModel runs.
struct LlmLoadOptions {
  std::string backend = "cpu";  ///< "cpu": the fp32 reference decoder; "cuda": the GPU decoder
  bool bf16 = false;            ///< cuda: weights, activations and KV cache in bf16 (else fp16)
  int64_t kv_blocks = 4096;     ///< cuda: KV cache blocks of 16 positions, allocated on the device at load
  /// cuda: fp8 projections (float8 e4m3 weights, per-tensor scales) on compute capability 8.9+:
  /// W8A8 (activations quantized per step) above gemv_max_tokens tokens a step, W8A16 GEMVs at or
  /// below it; the embeddings, LM head and KV cache stay fp16/bf16.
  bool fp8_weights = false;
  /// INT4 weight-only projections (W4A16, `--quantization int4`): 4-bit weights in groups along the
  /// input dim with a (scale, min) per group. A GGUF's Q4_0, Q4_1 and Q4_K projections keep their
  /// own blocks (the weights llama.cpp runs); the others are rounded symmetric to nearest per group.
  /// cuda: GEMVs that dequantize as they read at or below gemv_max_tokens tokens a step, dense
  /// weights dequantized per projection for cuBLASLt above that (or, opt-in, a tensor-core GEMM that
  /// dequantizes in registers up to int4_gemm_max_tokens). cpu: the fp32 decoder on the 4-bit
  /// weights' values (the reference of the GPU's numerics). Not with fp8_weights.
  bool int4_weights = false;
  /// A checkpoint stored in 4 bits throughout (every projection: AutoAWQ, GPTQ, compressed-tensors
  /// W4A16, a GGUF of Q4_0/Q4_1/Q4_K projections) runs as int4 weights as it is stored, as vLLM runs
  /// a quantized checkpoint unless told otherwise. false (`--quantization none`): its values as
  /// fp16/bf16 weights. A checkpoint with other projections too (a Q4_K_M GGUF's Q6_K) runs as
  /// fp16/bf16 unless int4_weights. No effect with fp8_weights.
  bool checkpoint_int4 = true;
  /// int4: elements per group (32, 64 or 128); 0: a Q4 GGUF's own (32), else the largest that
  /// divides every projection's input dim.
  int64_t int4_group = 0;
  /// cuda: the KV cache in float8 e4m3 (vLLM's kv_cache_dtype="fp8", scales 1): twice the positions.
  bool fp8_kv = false;
  /// cuda: steps of at most this many tokens (<= 8) run the projections as GEMVs that read each
  /// weight once; 0: cuBLASLt always (`ingot generate --gemv-max-tokens`).
  int gemv_max_tokens = 8;
  /// cuda: in GEMV steps the RMSNorms and the SiLU gate run inside the projections that read their
  /// results (three launches a layer fewer): 1 on, 0 off (`ingot generate --gemv-prologue` /
  /// `--no-gemv-prologue`), -1 (default) on for fp16/bf16 weights and off for fp8 and int4 ones. As
  /// measured on an H100 (2026-12-08, Llama-3.2-1B shapes, bench/RESULTS.md session 43): bf16 batch 1
  /// 630 tok/s with them against 581 without (128 in / 128 out); with fp8 weights the GEMVs that apply a
  /// prologue ran 1.4-1.7x slower than plain ones (16 activations from shared memory per 16-byte
  /// load), which costs more than the launches save.
  int gemv_prologue = -1;
  /// cuda: at one token, how many warps share each GEMV output column's K (1, 2 or 4; 0: the
  /// launcher's choice by shape; `ingot generate --gemv-k-split`).
  int gemv_k_split = 0;
  /// cuda: decode attention with one block per KV head that computes its whole group of query heads,
  /// reading each cached K/V row once per group instead of once per query head (Llama-3: 4 heads a
  /// group): 1 on, 0 off (`ingot generate --decode-attention grouped|per-head`), -1 (default) the
  /// per-head kernel until the grouped one has been measured on a GPU.
  int grouped_decode_attention = -1;
  /// cuda, int4 weights: steps of more than gemv_max_tokens and at most this many tokens run the
  /// W4A16 tensor-core GEMM (4 bits a weight read); longer ones dequantize each projection for
  /// cuBLASLt. 0 (default): cuBLASLt above the GEMVs (`ingot generate --int4-gemm-max-tokens`); the
  /// GEMM measured slower than it at batch 64 on the H100 (bench/RESULTS.md, session 37).
  int int4_gemm_max_tokens = 0;
  /// cuda: the decode attention splits each context into parts of this many positions (one block
  /// each, then a combining kernel) when the step's context bound is longer; 0: never splits;
  /// -1 (default): chosen per step so that small batches still fill the GPU (parts of 64 to 512
  /// positions; `ingot generate --decode-partition`). CUDA-graph steps use the graph's context bound.
  int decode_partition = -1;
};

class LlmModel {
 public:
  /// Loads a Llama-family GGUF file (weights, tokenizer, configuration) for the CPU decoder.
  static Result<std::unique_ptr<LlmModel>> load_gguf(const std::string& path);
  /// The same, for `options.backend`: "cuda" uploads the weights (fp16 or bf16) and the KV cache
  /// to the current GPU (kUnsupported without one, naming why).
  static Result<std::unique_ptr<LlmModel>> load_gguf(const std::string& path, const LlmLoadOptions& options);
  /// Loads a Hugging Face model folder: config.json, the safetensors (one file or the shards of
  /// model.safetensors.index.json), tokenizer.json, and tokenizer_config.json's BOS/EOS tokens and
  /// chat template where present.
  static Result<std::unique_ptr<LlmModel>> load_hf(const std::string& folder, const LlmLoadOptions& options);
  /// load_hf for a folder, load_gguf otherwise (what `ingot generate` and `ingot serve` take).
  static Result<std::unique_ptr<LlmModel>> load(const std::string& path, const LlmLoadOptions& options);
  /// A model of a Hugging Face config.json's shapes with random weights and no tokenizer (vLLM's
  /// --load-format dummy): for timing real model sizes. generate_ids() works; what needs text
  /// (encode_prompt, chats, generate()) is kInvalidArgument; results carry ids, no text.
  static Result<std::unique_ptr<LlmModel>> load_dummy(const std::string& config_json_path, const LlmLoadOptions& options,
                                                      uint64_t seed = 0);
  ~LlmModel();
  LlmModel(const LlmModel&) = delete;
  LlmModel& operator=(const LlmModel&) = delete;

  /// One result per prompt, in order; the prompts run together (continuous batching).
  Result<std::vector<GenerationResult>> generate(const std::vector<std::string>& prompts,
                                                 const GenerationParams& params, GenerationStats* stats = nullptr);
  /// generate() from prompts given as token ids (encode_prompt / encode_chat); params.chat unused.
  Result<std::vector<GenerationResult>> generate_ids(const std::vector<std::vector<int32_t>>& prompts,
                                                     const GenerationParams& params, GenerationStats* stats = nullptr);
  /// The fp32 logits after each prompt's last token (vocab_size floats per prompt, in order), as
  /// the decoder computes them for the first generated token: for comparing ingot with another
  /// implementation (transformers, llama.cpp) on the same weights.
  Result<std::vector<std::vector<float>>> last_logits(const std::vector<std::vector<int32_t>>& prompts);
  /// GPU decoder only: where one decode step's time goes for `batch` sequences at `context`
  /// positions, as (name, milliseconds) rows: the step as served (CUDA graph, host included), the
  /// eager step's GPU time, then each op summed over the layers (llm::LlamaGpuModel::profile_decode).
  Result<std::vector<std::pair<std::string, double>>> profile_decode(int64_t batch, int64_t context);
  /// "llama, 30 layers, hidden 576, 9 heads (3 KV), vocab 49152".
  std::string describe() const;
  /// Whether the projections run as int4 weights (int4_weights, or a 4-bit checkpoint's own
  /// blocks under checkpoint_int4).
  bool int4_weights() const;
  /// The prompt's token ids as generate() feeds them (a BOS first where the model asks for one:
  /// GGUF tokenizer.ggml.add_bos_token).
  Result<std::vector<int32_t>> encode_prompt(const std::string& prompt) const;
  /// The chat as the model's chat template (its Jinja program, run as transformers runs it, with
  /// the model's BOS/EOS text) renders it, ending with the assistant's turn opened; plain ChatML
  /// for a model without a template. kInvalidArgument for an empty chat, a role other than system,
  /// user and assistant, or an error the template raises; kInvalidModel for a template ingot
  /// cannot parse.
  Result<std::string> render_chat(const std::vector<ChatMessage>& messages) const;
  /// render_chat's text as token ids.
  Result<std::vector<int32_t>> encode_chat(const std::vector<ChatMessage>& messages) const;

 private:
  friend class LlmEngine;
  LlmModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What an LlmEngine request reports, on the engine's thread, in order: text as it is decoded
/// (complete UTF-8 characters only; a possible start of a stop string is held back), then one
/// event with `finished` set (its `text` may hold the last piece).
struct StreamEvent {
  std::string text;
  bool finished = false;
  std::string finish_reason;  ///< with finished: "stop", "length", "model_length", "abort" or "error"
  std::string error;          ///< finish_reason "error": why
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  ///< generated so far (the end-of-sequence token counted)
};

struct EngineOptions {
  int64_t kv_blocks = 512;               ///< KV cache blocks of 16 positions shared by all requests
  int64_t max_num_seqs = 32;             ///< sequences in one step
  int64_t max_num_batched_tokens = 256;  ///< tokens computed in one step (decodes + prefill chunks)
  int64_t max_queued = 64;               ///< requests waiting to start; more are refused (kUnavailable)
};

struct EngineStats {
  int64_t running = 0, waiting = 0;  ///< sequences now
  int64_t requests_total = 0, requests_refused = 0;
  int64_t prompt_tokens_total = 0, generated_tokens_total = 0, preemptions_total = 0;
  int64_t kv_blocks_total = 0, kv_blocks_free = 0;
};

/// An engine loop over one model (vLLM's AsyncLLMEngine): requests join the running batch at the
/// next step (continuous batching, chunked prefill, paged KV cache with prefix caching, recompute
/// preemption) and stream their text as it is generated. Thread-safe; callbacks run on the
/// engine's thread and must return quickly.
class LlmEngine {
 public:
  static Result<std::unique_ptr<LlmEngine>> start(std::shared_ptr<LlmModel> model, const EngineOptions& options);
  /// Stops the loop; requests still running end with finish_reason "abort".
  ~LlmEngine();
  LlmEngine(const LlmEngine&) = delete;
  LlmEngine& operator=(const LlmEngine&) = delete;

  /// Queues a request of prompt token ids (LlmModel::encode_prompt / encode_chat); returns its id.
  /// kInvalidArgument for bad parameters or a prompt that cannot fit the model; kUnavailable when
  /// max_queued requests wait already (a server answers 503) or the engine is stopping.
  Result<int64_t> submit(std::vector<int32_t> prompt, const GenerationParams& params,
                         std::function<void(const StreamEvent&)> on_event);
  /// Ends a request (its callback gets finish_reason "abort"); false when it is unknown or over.
  bool abort(int64_t id);
  EngineStats stats() const;
  const LlmModel& model() const;

 private:
  LlmEngine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot
