// Copyright ingot authors. Apache-2.0.
//
// A Llama-family decoder on the GPU (issue 22): the CPU decoder's math (llm/cpu_decoder.h) in
// fp16 or bf16 with fp32 accumulation, over a paged KV cache in device memory laid out as the CPU
// KvStore ([layer] K and V, each [block][slot][kv_head][head_dim]) and addressed through the same
// block tables (llm/kv_block_manager), so the scheduler drives either decoder.
//
// One forward() runs a flat batch of tokens of any number of sequences, prefill chunks and decode
// tokens mixed (in-flight batching): the embedding gather, then per layer RMSNorm, one fused Q/K/V
// projection (cuBLASLt, fp32 accumulation; Qwen2's biases), rotary embedding fused with the KV
// cache write (reading Q, K, V as column slices of that one output), attention, the output
// projection accumulated into the residual stream (cuBLASLt's beta = 1), RMSNorm, one fused
// gate/up projection, SiLU(gate) * up, the down projection into the residual; last, each
// sequence's final row through the final RMSNorm and the LM head (fp32 logits), and its argmax.
//
// Attention: over the paged cache (backend/cuda/llm), every token one query row reading its own
// sequence's positions [0, pos], so decode and continued prefill chunks are one kernel; a prompt
// computed from position 0 with flash_prefill_min_tokens or more tokens instead goes through the
// backend's tensor-core flash kernel (backend/cuda/attention), causal over its own rows of the
// fused QKV output.
//
// The step's small index arrays go up in one copy; what comes back is each sequence's argmax
// (greedy sampling on the device) and only the logits rows a caller asks for (sampling with a
// temperature on the host), through pinned memory; both copies are explicit in forward() (no
// hidden host round trip inside the step). Decode-only steps replay a CUDA graph captured per
// padded batch size. Options: fp8 (W8A8) or int4 (W4A16, round-to-nearest at load) projections and an
// fp8 KV cache. Not yet here: INT4 checkpoints' own layouts (AWQ/GPTQ, GGUF Q4 blocks: they load as
// floats and are re-quantized), a flash kernel for continued prefill chunks (they take the paged
// decode kernel).
//
// Built without CUDA, create() says so (kUnsupported).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "llm/cpu_decoder.h"
#include "llm/model_config.h"

namespace ingot::llm {

struct GpuDecoderOptions {
  bool bf16 = false;          ///< weights, activations and the KV cache in bf16 (else fp16)
  int64_t num_blocks = 0;     ///< KV cache blocks (per layer); > 0
  int32_t block_size = 16;    ///< positions per block
  /// decode attention's split-K partition (positions); 0 never splits; -1 (default):
  /// backend::cuda::auto_decode_partition for each step's batch
  int32_t partition_size = -1;
  /// Decode-only steps (one token per sequence, at most 256 sequences, contexts within
  /// graph_max_context) replay a CUDA graph per padded batch size (1, 2, 4, ...) instead of
  /// launching each kernel: what keeps small models from being bound by kernel launches.
  bool cuda_graphs = true;
  int32_t graph_max_context = 4096;
  /// W8A8 on Hopper (sm_89 and newer; kUnsupported before): the four projections of each layer
  /// (fused QKV, output, fused gate/up, down) hold float8 e4m3 weights with one scale per tensor
  /// (amax / 448, set at load); their inputs are quantized per step with a dynamic per-tensor
  /// scale; cuBLASLt multiplies in fp8 with fp32 accumulation into the model's type (bf16/fp16).
  /// Embeddings, norms, the LM head and the KV cache keep that type.
  bool fp8_weights = false;
  /// W4A16: the four projections' weights in 4 bits, group-wise along the input dim with a (scale,
  /// min) per group (llm/int4_weights.h). A model holding 4-bit blocks (a Q4_0/Q4_1/Q4_K GGUF loaded
  /// with keep_int4, LlamaCpuModel::quantize_int4_in_place) is uploaded as it is; other projections
  /// are quantized symmetric round-to-nearest on the device at load. Steps of at most
  /// gemv_max_tokens tokens read them in launch_gemv_small_t_int4, steps of up to
  /// int4_gemm_max_tokens in launch_int4_gemm (tensor cores, dequantized in registers); longer ones
  /// dequantize each projection into a scratch matrix for cuBLASLt. Not with fp8_weights.
  bool int4_weights = false;
  /// int4: elements per group (32, 64 or 128; every projection's input dim a multiple of it). 0:
  /// the model's own blocks' group, else the largest that divides every input dim.
  int64_t int4_group = 0;
  /// Steps of at most this many tokens (<= backend::cuda::kGemvMaxTokens, 8) run the four
  /// projections as GEMVs that read each weight row once (launch_gemv_small_t): fp8 weights then
  /// stay W8A16 (half the bytes, no activation quantization). 0: cuBLASLt for every step.
  int32_t gemv_max_tokens = 8;
  /// In steps that run the projections as GEMVs, the RMSNorm before the QKV and gate/up projections
  /// and the SiLU gate before the down projection are applied by the GEMV as it reads its input
  /// (backend::cuda::GemvPrologue): three launches a layer fewer, and the normalized and gated
  /// activations are not rounded to the model's type in between. false (default): each its own
  /// kernel (LlmLoadOptions::gemv_prologue says which is faster where).
  bool gemv_prologue = false;
  /// One-token GEMV steps: warps per output column (launch_gemv_small_t's k_split; 0 its choice).
  int32_t gemv_k_split = 0;
  /// Decode attention with one block per KV head computing its group of query heads (each K/V row
  /// read once per group: PagedDecodeParams::grouped) where the group is 2-8 heads; false: a block
  /// per query head.
  bool grouped_decode_attention = false;
  /// int4: steps of more than gemv_max_tokens and at most this many tokens run launch_int4_gemm;
  /// 0 (the default): dequantize + cuBLASLt above the GEMVs. On the H100 (2026-12-07, bench/RESULTS.md
  /// session 37) the W4A16 GEMM made Llama-3.2-1B-shaped batch-64 decode 5.47 ms a step (11.3k tok/s)
  /// where dequantize + cuBLASLt had run 4.1 ms (15.6k, session 33), so it is opt-in until it wins.
  int32_t int4_gemm_max_tokens = 0;
  /// The KV cache in float8 e4m3 (half the bytes: twice the positions per GiB), scales 1 as
  /// vLLM's kv_cache_dtype="fp8" without calibrated scales; attention dequantizes as it reads.
  bool fp8_kv = false;
  /// A prompt computed from position 0 with at least this many tokens takes the flash kernel (one
  /// launch per such prompt per layer); shorter ones stay on the paged decode kernel. 0: never.
  int64_t flash_prefill_min_tokens = 128;
};

/// One sequence's part of a step: tokens (*tokens)[start, start + count) at positions start..,
/// its K/V written through *block_table, which must cover start + count positions (the K/V of
/// positions < start are read from the cache).
struct GpuChunk {
  const std::vector<int32_t>* tokens = nullptr;
  int64_t start = 0;
  int64_t count = 0;
  const std::vector<int32_t>* block_table = nullptr;
  /// false: only the device's argmax of this chunk comes back (greedy sampling), not its
  /// vocab_size logits: what keeps a large batch from copying a vocabulary per sequence per step.
  bool need_logits = true;
};

/// One decoder step's answer, per sequence in order. The GPU decoder fills both; the CPU decoder's
/// steps (LlmModel) carry logits only, for every sequence.
struct StepResult {
  /// The first largest logit of each chunk's last position (computed on the device), or
  /// backend::cuda's kArgmaxNonFinite (-1: a NaN or +inf) / kArgmaxAllMasked (-2: all -inf).
  std::vector<int32_t> argmax;
  /// vocab_size fp32 logits of each chunk with need_logits; empty for the others.
  std::vector<std::vector<float>> logits;
};

/// Where the decoder's time went since create() (host wall clock; forward_seconds includes the
/// wait for the GPU, so it is the steps' time as the caller sees it).
struct GpuDecoderStats {
  int64_t graph_steps = 0;     ///< decode steps replayed from a CUDA graph
  int64_t eager_steps = 0;     ///< steps launched kernel by kernel (prefill, mixed, or beyond the graphs' bounds)
  int64_t graph_captures = 0;  ///< graphs captured (warmup's and any recaptured after buffers grew)
  double capture_seconds = 0;  ///< capturing and instantiating them
  double forward_seconds = 0;  ///< inside forward(), captures excluded
  double warmup_seconds = 0;   ///< inside warmup()
  int64_t logits_rows_copied = 0;  ///< chunks whose logits came back to the host
};

class LlamaGpuModel {
 public:
  /// Uploads `weights` (converted to fp16 / bf16) and allocates the KV cache on the current device.
  static Result<std::unique_ptr<LlamaGpuModel>> create(const LlamaCpuModel& weights, const GpuDecoderOptions& options);
  /// The weights LlamaCpuModel::random(shapes.config(), seed) would hold, made on the device (no
  /// host copy: an 8B model's dummy weights are 32 GB of floats there), converted as create()
  /// converts them, bit for bit. `shapes` gives the config and rotary frequencies (weights or not).
  static Result<std::unique_ptr<LlamaGpuModel>> create_random(const LlamaCpuModel& shapes,
                                                              const GpuDecoderOptions& options, uint64_t seed);
  ~LlamaGpuModel();
  LlamaGpuModel(const LlamaGpuModel&) = delete;
  LlamaGpuModel& operator=(const LlamaGpuModel&) = delete;

  const LlamaConfig& config() const;
  /// Runs every chunk's tokens as one batch; returns each chunk's argmax, and its last-position
  /// logits where the chunk asks for them.
  Result<StepResult> forward(const std::vector<GpuChunk>& chunks);
  /// What a server does before its first request (vLLM captures at start-up too): sizes the step
  /// buffers for steps of up to `max_step_tokens` tokens and `max_batch` sequences, then captures
  /// and replays (on padding rows, writing no cache slot) the decode graphs of every padded batch
  /// up to max_batch (at most 256), so that no later step pays a capture or a buffer move.
  Status warmup(int64_t max_step_tokens, int64_t max_batch);
  const GpuDecoderStats& stats() const;
  /// Where a decode step's time goes, for `batch` sequences at `context` positions (the cache's
  /// contents are whatever it holds: timing only): first "step (as served)", the mean wall time of
  /// forward() as generate runs it (a CUDA graph where it applies, host included); then "eager step
  /// (GPU)" and each op's GPU time summed over the layers, in milliseconds, from events between
  /// the ops of an eager step that the host enqueued whole before the GPU began it. Needs
  /// batch * ceil(context / block_size) cache blocks.
  Result<std::vector<std::pair<std::string, double>>> profile_decode(int64_t batch, int64_t context,
                                                                     int iterations = 20);

  struct Impl;

 private:
  explicit LlamaGpuModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingot::llm
