// Copyright ingot authors. Apache-2.0.
//
// Launchers for the LLM decoder runtime's device code (llm_kernels.cu, issue 22): the two kernels
// a Llama-family decode step needs beside the GEMMs and RMSNorm, over the paged KV cache that
// llm::KvBlockManager hands out. Plain C++ so host code compiles with the host compiler; every
// launcher enqueues on `stream`, never synchronizes, allocates nothing (CUDA-graph capturable)
// and returns cudaGetLastError() after its launches (cudaErrorInvalidValue, launching nothing,
// for parameters it does not serve).
//
// The cache of one layer is two tensors, K and V, each [num_blocks][block_size][num_kv_heads]
// [head_dim] of the activations' type (fp16 or bf16): the CPU decoder's KvStore layout
// (src/llm/cpu_decoder.h). Position p of a sequence lives in block table[p / block_size], slot
// p % block_size; its flat slot index is block_id * block_size + slot.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda {

/// Rotary embeddings plus the cache write for `num_tokens` new tokens (a flat batch of the tokens
/// of any number of sequences, prefill or decode). Token t: q [t][num_heads][head_dim] and
/// k [t][num_kv_heads][head_dim] are rotated in place on adjacent pairs (x[2i], x[2i+1]) by the
/// angle positions[t] * inv_freq[i], as the CPU decoder's rope() (GGUF's layout; Llama-3 or other
/// scaling lives in inv_freq, which the caller precomputes as LlamaCpuModel does):
///   x[2i]' = x[2i] cos - x[2i+1] sin,   x[2i+1]' = x[2i] sin + x[2i+1] cos.
/// The angle is formed and its cos/sin taken in fp64 (as the reference: an fp32 product is off by
/// ~1e-3 rad at position 1e5), the rotation in fp32, one rounding to `type` on store. The rotated
/// k and the unchanged v of token t are then written to k_cache / v_cache at flat slot
/// slot_mapping[t]; a negative slot (a padding token) skips the cache write.
struct RopeKvWriteParams {
  FloatType type = FloatType::kF16;  ///< kF16 or kBF16: q, k, v and both caches
  void* q = nullptr;                 ///< [num_tokens][num_heads][head_dim], rotated in place
  void* k = nullptr;                 ///< [num_tokens][num_kv_heads][head_dim], rotated in place
  const void* v = nullptr;           ///< [num_tokens][num_kv_heads][head_dim]
  void* k_cache = nullptr;           ///< [num_blocks][block_size][num_kv_heads][head_dim]
  void* v_cache = nullptr;           ///< same layout as k_cache
  const int32_t* positions = nullptr;     ///< [num_tokens] position of each token in its sequence
  const int64_t* slot_mapping = nullptr;  ///< [num_tokens] block_id * block_size + slot, or < 0
  const float* inv_freq = nullptr;        ///< [head_dim / 2] rotary inverse frequencies
  int64_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  ///< even, at most 1024; q/k/v/caches 4-byte aligned
  /// Elements from one token's q (and k, and v) row to the next: 0 for packed tensors as above;
  /// num_heads * head_dim + 2 * num_kv_heads * head_dim (even) when q, k and v are column slices
  /// of one fused QKV projection's [num_tokens][q | k | v] output.
  int64_t row_stride = 0;
  /// When set, the rotated q goes here, packed [num_tokens][num_heads][head_dim] (what the
  /// attention reads), and q is left as it was.
  void* q_out = nullptr;
  /// An fp8 KV cache (float8 e4m3, one byte an element, same layout): the cache holds the rotated
  /// k (rounded to `type` first) / k_scale and v / v_scale, nearest even, saturated at +-448.
  bool fp8_cache = false;
  float k_scale = 1.0f;  ///< > 0 (vLLM's default for an fp8 cache without calibrated scales: 1)
  float v_scale = 1.0f;
};

cudaError_t launch_rope_kv_write(const RopeKvWriteParams& p, cudaStream_t stream);

/// Decode attention over the paged cache: one query token per sequence, `batch` sequences.
/// Sequence b attends to its positions [0, context_lens[b]) (the new token's K/V already written,
/// e.g. by launch_rope_kv_write); query head h reads KV head h / (num_heads / num_kv_heads);
///   o[b][h] = softmax(scale * q[b][h] . K^T) V
/// in fp32 with a running-max (online) softmax, one rounding on store. A sequence of length 0
/// gets zeros.
///
/// Split-K: when max_context_len > partition_size (> 0), the context is cut into partitions of
/// partition_size positions; each partition writes its partial (max, sum, unnormalized output) to
/// the workspace and a second kernel combines them. Otherwise one pass per (sequence, head) writes
/// o directly and no workspace is used. The grid depends only on batch, num_heads and
/// max_context_len, so a graph captured with a fixed max_context_len serves any lengths below it.
struct PagedDecodeParams {
  FloatType type = FloatType::kF16;  ///< kF16 or kBF16: q, the caches and o
  const void* q = nullptr;           ///< [batch][num_heads][head_dim]
  const void* k_cache = nullptr;     ///< [num_blocks][block_size][num_kv_heads][head_dim], 16-byte aligned
  const void* v_cache = nullptr;     ///< same layout as k_cache, 16-byte aligned
  const int32_t* context_lens = nullptr;  ///< [batch], each in [0, max_context_len]
  const int32_t* block_tables = nullptr;  ///< [batch][max_blocks_per_seq] block ids
  void* o = nullptr;                      ///< [batch][num_heads][head_dim]
  int32_t batch = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;  ///< divides num_heads
  int32_t head_dim = 0;      ///< 64 or 128
  int32_t block_size = 0;    ///< > 0 (16 and 32 are the tested sizes)
  int32_t max_blocks_per_seq = 0;
  int32_t max_context_len = 0;    ///< host-known bound on every context_lens[b]: sizes the grid
  int32_t partition_size = 512;   ///< split-K partition in positions; 0 never splits
  float scale = 0.0f;             ///< 0: 1 / sqrt(head_dim)
  /// The caches in float8 e4m3 (as launch_rope_kv_write writes them with fp8_cache): element
  /// values are e4m3 * k_scale and e4m3 * v_scale; q and o keep `type`.
  bool fp8_cache = false;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  /// One block per (sequence, KV head, partition) computing the group's num_heads / num_kv_heads
  /// query heads (at most 8, else cudaErrorInvalidValue), each K/V row read once per group; false:
  /// one block per query head. The same results up to fp32 summation order; the same workspace.
  bool grouped = false;
};

/// Number of split-K partitions launch_paged_decode_attention uses: 1 (no split) when
/// partition_size <= 0 or max_context_len <= partition_size, else ceil(max_context_len /
/// partition_size).
int64_t paged_decode_attention_partitions(const PagedDecodeParams& p);
/// The split-K partition a decode step uses when none is configured: 512 positions (the fixed
/// default before) divided by the parts each (sequence, head) pair needs for about two blocks per
/// multiprocessor, rounded up to 16, at least 64. It does not depend on the context bound: a
/// CUDA-graph step is sized for graph_max_context (4096) while its sequences are often much
/// shorter, and the parts past a sequence's end return at once. At batch 1 a 32-head model gets
/// parts of 64: a 256-position context then runs on 128 blocks instead of 32 (session 37 measured
/// `--decode-partition 64` 7% faster a step at batch 1, int4 1B model, H100); from batch 9
/// (32 heads, 132 SMs) the pairs fill the GPU and the part stays 512.
int32_t auto_decode_partition(int64_t batch, int64_t num_heads, int sm_count);
/// Workspace bytes launch_paged_decode_attention needs: 0 without a split, else
/// batch * num_heads * partitions * (head_dim + 2) * sizeof(float) (the partial outputs, maxima
/// and sums).
size_t paged_decode_attention_workspace_bytes(const PagedDecodeParams& p);

/// `workspace` (device memory, 4-byte aligned) of at least
/// paged_decode_attention_workspace_bytes(p) bytes; may be null when that is 0.
cudaError_t launch_paged_decode_attention(const PagedDecodeParams& p, void* workspace, size_t workspace_bytes,
                                          cudaStream_t stream);

/// The gated MLP's activation over a fused gate/up projection: out[r][i] = silu(g) * u =
/// g / (1 + e^-g) * u with g = gate_up[r][i], u = gate_up[r][cols + i], for `rows` rows of 2 * cols
/// elements of type t (kF32, kF16 or kBF16), in fp32 with one rounding; out packed [rows][cols].
/// (Also the engine's ingot::SwiGLU: backend/cuda/pointwise/swiglu_tactics.cc.)
cudaError_t launch_silu_mul_packed(FloatType t, const void* gate_up, void* out, int64_t rows, int64_t cols,
                                   cudaStream_t stream);
/// y[r][c] += bias[c] for `rows` contiguous rows of `cols` elements (type t, kF16 or kBF16), in
/// fp32 with one rounding: Qwen2's q/k/v projection biases.
cudaError_t launch_add_bias_rows(FloatType t, void* y, const void* bias, int64_t rows, int64_t cols,
                                 cudaStream_t stream);

/// FP8 activations for the decoder's W8A8 GEMMs (dynamic per-tensor scaling), and fp8 weights
/// filled on the device (kF32 x): with amax = max |x[i]| over the n elements of x (type t),
/// *scale = max(amax, 1e-12) / 448
/// and y[i] = the nearest-even float8 e4m3fn of x[i] / *scale (saturated at +-448). Three launches
/// on `stream` (a memset of `amax_ws` and two kernels), no allocation, graph-capturable; scale and
/// amax_ws are device scalars. NaN stays NaN.
cudaError_t launch_fp8_quantize_dynamic(FloatType t, const void* x, int64_t n, void* y, float* scale,
                                        unsigned* amax_ws, cudaStream_t stream);

/// The decode step's projections at a few tokens: y[t][n] (+)= scale * sum_k x[t][k] * w[n][k] for
/// t < T <= kGemvMaxTokens, x [T][K] and y [T][N] row-major of type t (kF16 or kBF16), w [N][K] of
/// type t, or float8 e4m3fn (w_fp8) with the per-tensor *w_scale (a device scalar; null: 1). fp32
/// accumulation, one rounding on store; `accumulate` adds y's old value (the residual) in fp32.
/// A warp per output column reads its weight row once, 16 bytes per lane per load, for all T
/// tokens: at T = 1 cuBLASLt ran these at 35-75% of the memory bandwidth (session 30, H100), and an
/// fp8 weight is read as half the bytes with no activation quantization (W8A16). Needs K a
/// multiple of 8 (16 for fp8), x and w 16-byte aligned; returns cudaErrorInvalidValue otherwise.
constexpr int64_t kGemvMaxTokens = 8;
/// What the decode GEMV applies to its activations as it reads them, in fp32 and unrounded, so the
/// step before it needs no launch of its own:
///  - kRmsNorm: x [T][K] is the residual stream; the GEMV reads x[t][k] * norm_weight[k] /
///    sqrt(mean_k(x[t][k]^2) + eps) (the decoder's RMSNorm before the QKV and gate/up projections;
///    norm_weight [K] of x's type, 16-byte aligned). Each block computes the rows' RMS itself.
///  - kSiluMul: x [T][2K] is a packed gate/up row; the GEMV reads silu(x[t][k]) * x[t][K + k] (the
///    gated MLP's activation before the down projection, launch_silu_mul_packed's values unrounded).
struct GemvPrologue {
  enum Kind { kNone, kRmsNorm, kSiluMul } kind = kNone;
  const void* norm_weight = nullptr;
  float eps = 0.0f;
};
/// k_split: how many warps share an output column's K (each a contiguous share, summed in shared
/// memory in order): 1, or 2 or 4 at T = 1 only; 0 lets the launcher choose by shape, as
/// bench/gemv_probe.cu measured (2 or 4 for plain GEMVs of at most 2048 columns, else 1). Anything
/// else is cudaErrorInvalidValue.
cudaError_t launch_gemv_small_t(FloatType t, const void* x, const void* w, bool w_fp8, const float* w_scale, void* y,
                                int64_t T, int64_t K, int64_t N, bool accumulate, cudaStream_t stream,
                                const GemvPrologue& prologue = {}, int k_split = 0);

/// INT4 weight-only projections (W4A16), group-wise along K (llm/int4_weights.h states the same
/// layout on the host): w [N][K] as nibbles q [N][K / 2], element k in the low nibble of byte k / 2
/// when k is even, the high nibble when odd, each unsigned 0..15; per group of `group` consecutive
/// elements of a row a (scale, min) pair of floats, scale_min [N][K / group][2]: w = q * scale + min.
/// group is 32, 64 or 128 and divides K; anything else is cudaErrorInvalidValue.
inline bool int4_group_ok(int64_t group) { return group == 32 || group == 64 || group == 128; }
/// From fp32 weights on the device (load time: one thread per group), symmetric round-to-nearest:
/// scale = amax / 7, q = clamp(rint(w * 7 / amax), -8, 7) + 8 (nearest even), min = -8 scale; a
/// group of zeros has scale and min 0. The same bytes as llm::quantize_int4 on the host.
cudaError_t launch_int4_quantize(const float* w, int64_t N, int64_t K, int64_t group, uint8_t* q, float* scale_min,
                                 cudaStream_t stream);
/// The dense weights of type t (kF16 or kBF16) [N][K], for steps cuBLASLt runs (prefill).
cudaError_t launch_int4_dequantize(FloatType t, const uint8_t* q, const float* scale_min, int64_t N, int64_t K,
                                   int64_t group, void* y, cudaStream_t stream);
/// launch_gemv_small_t with int4 weights: y[t][n] (+)= sum_k x[t][k] * (q[n][k] * scale + min) of
/// k's group, fp32 accumulation: per 32-element chunk, sum x q and sum x, then scale * the first +
/// min * the second; 4 bits a weight read (a quarter of fp16's bytes). Needs q 16-byte aligned.
cudaError_t launch_gemv_small_t_int4(FloatType t, const void* x, const uint8_t* q, const float* scale_min, void* y,
                                     int64_t T, int64_t K, int64_t N, int64_t group, bool accumulate,
                                     cudaStream_t stream, const GemvPrologue& prologue = {}, int k_split = 0);

/// launch_gemv_small_t_int4's product for any number of tokens, on tensor cores (int4_gemm.cu):
/// y[t][n] (+)= sum_k x[t][k] * (q[n][k] * scale + min), each weight dequantized in fp32 and rounded
/// once to t as launch_int4_dequantize writes it, fp32 accumulation. For the steps of more than
/// kGemvMaxTokens tokens that otherwise dequantize the whole projection for cuBLASLt. When the
/// output tiles are fewer than sm_count, K is split and the partial sums meet in `workspace`
/// (int4_gemm_workspace_bytes; 256-byte aligned, zeroed once when allocated, left zeroed by every
/// launch that completes; one launch at a time may use it). Needs x and q 16-byte aligned, K a
/// multiple of group; cudaErrorInvalidValue otherwise, or when a split launch lacks the workspace.
cudaError_t launch_int4_gemm(FloatType t, const void* x, const uint8_t* q, const float* scale_min, void* y, int64_t T,
                             int64_t K, int64_t N, int64_t group, bool accumulate, void* workspace,
                             size_t workspace_bytes, int sm_count, cudaStream_t stream);
/// The workspace launch_int4_gemm needs for this shape on a GPU of sm_count multiprocessors: 0 when
/// it does not split K, else int4_gemm_workspace_bound(T, N).
size_t int4_gemm_workspace_bytes(int64_t T, int64_t K, int64_t N, int64_t group, int sm_count);
/// A workspace for every shape of at most T tokens and N outputs (grows with both).
size_t int4_gemm_workspace_bound(int64_t T, int64_t N);

/// y[i] = hash_uniform(base, i, center, a) (core/hash_uniform.h) for i < n, stored as type t
/// (kF32, kF16 or kBF16; rounded to nearest even): a dummy model's weights made on the device,
/// equal to llm::LlamaCpuModel::random's for the same base.
cudaError_t launch_fill_hash_uniform(FloatType t, void* y, int64_t n, uint64_t base, float center, float a,
                                     cudaStream_t stream);

/// Holds `stream` for about `ns` nanoseconds (one thread sleeping): what lets a profiler enqueue a
/// whole step before the GPU starts it, so that events between kernels time the kernels, not the
/// host's launches.
cudaError_t launch_gpu_sleep(uint64_t ns, cudaStream_t stream);

/// What launch_logits_argmax writes for a row it cannot answer.
constexpr int32_t kArgmaxNonFinite = -1;  ///< the row holds a NaN or +inf
constexpr int32_t kArgmaxAllMasked = -2;  ///< every logit of the row is -inf
/// Greedy sampling on the device: out[r] = the first index of the largest of logits[r][0, vocab)
/// (fp32, rows contiguous), or one of the codes above. One CTA per row; vocab in [1, 2^31).
cudaError_t launch_logits_argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream);

}  // namespace ingot::backend::cuda
