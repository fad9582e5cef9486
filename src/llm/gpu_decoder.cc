// Copyright ingot authors. Apache-2.0.
#include "llm/gpu_decoder.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <cstring>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#ifdef INGOT_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backend/cuda/attention/attention_kernels.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "backend/cuda/llm/llm_kernels.h"
#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "core/dtype.h"
#include "core/hash_uniform.h"
#include "core/parallel.h"
#include "llm/int4_weights.h"
#endif

namespace ingot::llm {

#ifndef INGOT_WITH_CUDA

struct LlamaGpuModel::Impl {};
LlamaGpuModel::LlamaGpuModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaGpuModel::~LlamaGpuModel() = default;
Result<std::unique_ptr<LlamaGpuModel>> LlamaGpuModel::create(const LlamaCpuModel&, const GpuDecoderOptions&) {
  return unsupported("the GPU decoder: this build of ingot has no CUDA");
}
Result<std::unique_ptr<LlamaGpuModel>> LlamaGpuModel::create_random(const LlamaCpuModel&, const GpuDecoderOptions&,
                                                                    uint64_t) {
  return unsupported("the GPU decoder: this build of ingot has no CUDA");
}
const LlamaConfig& LlamaGpuModel::config() const {
  static const LlamaConfig none;
  return none;
}
Result<StepResult> LlamaGpuModel::forward(const std::vector<GpuChunk>&) {
  return unsupported("the GPU decoder: this build of ingot has no CUDA");
}
Status LlamaGpuModel::warmup(int64_t, int64_t) { return unsupported("the GPU decoder: this build of ingot has no CUDA"); }
const GpuDecoderStats& LlamaGpuModel::stats() const {
  static const GpuDecoderStats none;
  return none;
}
Result<std::vector<std::pair<std::string, double>>> LlamaGpuModel::profile_decode(int64_t, int64_t, int) {
  return unsupported("the GPU decoder: this build of ingot has no CUDA");
}

#else

namespace {

using backend::cuda::FloatType;

#define INGOT_LT_OK(expr)                                                                           \
  do {                                                                                              \
    cublasStatus_t ingot_s_ = (expr);                                                               \
    if (ingot_s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      return internal_error("GPU decoder: ", #expr, ": ", cublasLtGetStatusString(ingot_s_));       \
  } while (0)

/// Memory that frees itself, grown on demand: device memory (cudaMalloc) or page-locked host memory
/// (cudaMallocHost: the step's uploads and downloads, async and at full PCIe speed).
template <cudaError_t (*Alloc)(void**, size_t), cudaError_t (*Free)(void*)>
class OwnedMem {
 public:
  OwnedMem() = default;
  OwnedMem(const OwnedMem&) = delete;
  OwnedMem& operator=(const OwnedMem&) = delete;
  ~OwnedMem() { Free(p_); }
  Status reserve(size_t bytes) {
    if (bytes <= bytes_) return Status::Ok();
    Free(p_);
    p_ = nullptr;
    bytes_ = 0;
    if (Alloc(&p_, bytes) != cudaSuccess) {
      cudaGetLastError();
      return make_status(StatusCode::kOutOfMemory, "GPU decoder: cannot allocate ", bytes, " bytes of ",
                         Free == &cudaFreeHost ? "pinned host" : "device", " memory");
    }
    bytes_ = bytes;
    return Status::Ok();
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bool empty() const { return p_ == nullptr; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
using DeviceMem = OwnedMem<&cudaMalloc, &cudaFree>;
using PinnedMem = OwnedMem<&cudaMallocHost, &cudaFreeHost>;

/// The rows of several (out x in) row-major weights stacked: one fused projection's weights.
std::vector<float> concat(const std::vector<const std::vector<float>*>& parts) {
  size_t n = 0;
  for (const auto* p : parts) n += p->size();
  std::vector<float> all;
  all.reserve(n);
  for (const auto* p : parts) all.insert(all.end(), p->begin(), p->end());
  return all;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One cached cuBLASLt problem: Y[T][out] (+)= X[T][in] W[out][in]^T, row-major, fp32 accumulation.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;  ///< the heuristic's candidates, best first
  size_t chosen = 0;                         ///< the first that ran (one may refuse the actual call)
  ~GemmPlan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

/// The layout of a step's packed int32 array: ids [T], positions [T], context lengths [T], last rows
/// [S], block tables [T][max_blocks]; slots (int64) apart.
struct StepShape {
  int64_t T = 0, S = 0, max_blocks = 1;
  int32_t max_ctx = 0;
  size_t ints() const { return static_cast<size_t>(3 * T + S + T * max_blocks); }
};

}  // namespace

struct LlamaGpuModel::Impl {
  LlamaConfig c;
  GpuDecoderOptions o;
  FloatType t = FloatType::kF16;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  static constexpr size_t kLtWorkspace = 32u << 20;
  static constexpr int kCandidates = 8;  ///< cuBLASLt heuristic results kept per GEMM shape
  DeviceMem lt_ws;

  struct Layer {
    // Q, K and V as one projection ([wq; wk; wv] rows, out x in) and gate and up as one ([w_gate;
    // w_up]): three GEMMs become one and two become one, each reading its weights in one pass.
    DeviceMem attn_norm, wqkv, bqkv, wo, ffn_norm, w_gate_up, w_down, k_cache, v_cache;
    /// fp8 weights: the four projections' scales (qkv, o, gate_up, down), fp32, 16 bytes apart
    /// (cuBLASLt's scale pointers, like its operands, are kept 16-byte aligned).
    DeviceMem w_scales;
    /// int4 weights: each projection's (scale, min) pairs (qkv, o, gate_up, down), [out][in / group][2] fp32.
    DeviceMem int4_scales[4];
    const float* scale(int i) const {
      if (!int4_scales[i].empty()) return int4_scales[i].as<float>();
      return w_scales.empty() ? nullptr : w_scales.as<float>() + 4 * i;
    }
  };
  std::vector<std::unique_ptr<Layer>> layers;
  DeviceMem embed, out_norm, lm_head, inv_freq;

  // Step buffers, grown on demand (`generation` counts the moves: a graph captured before one is stale).
  DeviceMem x, h, qkv, q, att, gu, g, ints, slots, attn_ws, last_x, last_h, logits, argmax;
  uint64_t generation = 0;
  PinnedMem host_ints, host_slots, host_argmax, host_logits;  ///< the step's uploads and downloads
  GpuDecoderStats stats;
  int sm_count = 0;
  /// Prompts that start at position 0 with at least o.flash_prefill_min_tokens tokens: their
  /// attention is causal over their own new rows alone, so the tensor-core flash kernel
  /// (backend/cuda/attention) runs it from the fused QKV output; the paged decode kernel skips
  /// their rows (context 0).
  std::vector<std::pair<int64_t, int64_t>> flash_rows;  ///< this step's (first row, rows) of such prompts
  /// profile_decode(): an event after each op of an eager step, with the op's name (null otherwise).
  std::vector<std::pair<const char*, cudaEvent_t>>* marks = nullptr;
  Status mark(const char* what) {
    if (!marks) return Status::Ok();
    cudaEvent_t e = nullptr;
    INGOT_CUDA_CHECK(cudaEventCreate(&e));
    marks->emplace_back(what, e);
    INGOT_CUDA_CHECK(cudaEventRecord(e, stream));
    return Status::Ok();
  }
  backend::cuda::PagedDecodeParams attn;  ///< the step's attention bounds (prepare())
  size_t attn_ws_bytes = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>, std::unique_ptr<GemmPlan>> plans;
  // W8A8 (options fp8_weights): the step's activations in float8 and their scale.
  DeviceMem xq, act_scale, amax;
  // W4A16 (options int4_weights): one projection's dequantized weights at a time, for cuBLASLt;
  // the groups' size (o.int4_group, or the one start() chose).
  DeviceMem wdq;
  // W4A16 steps of more than the GEMV's tokens: launch_int4_gemm's split-K workspace (zeroed when
  // allocated; every completed launch leaves it zeroed).
  DeviceMem int4_ws;
  size_t int4_ws_bytes = 0;
  int64_t int4_group = 0;
  static constexpr int64_t kMaxGraphBatch = 256;
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t generation = 0;
    ~Graph() {
      if (exec) cudaGraphExecDestroy(exec);
    }
  };
  std::map<int64_t, std::unique_ptr<Graph>> graphs;  ///< decode steps, by padded batch

  /// The step buffers for `sh` (and the attention's bounds and workspace).
  static Result<std::unique_ptr<Impl>> start(const LlamaConfig& c, const GpuDecoderOptions& o);
  Status add_layer(std::unique_ptr<Layer> g);
  Status finish(const std::vector<float>& inv_freq_host);
  Status prepare(const StepShape& sh);
  backend::cuda::PagedDecodeParams attention_params(const StepShape& sh) const;
  /// The step's kernels on `stream`, reading the uploaded index arrays.
  Status enqueue(const StepShape& sh);
  /// The step's index arrays for `chunks` laid out as `sh` (rows past the chunks are padding),
  /// checked and copied to the device.
  Status upload_indices(const std::vector<GpuChunk>& chunks, const StepShape& sh);
  /// enqueue() as a CUDA graph for sh.T, captured on first use (and after buffers moved), replayed.
  Status replay(const StepShape& sh);

  ~Impl() {
    graphs.clear();
    plans.clear();
    if (lt) cublasLtDestroy(lt);
    if (stream) cudaStreamDestroy(stream);
  }

  size_t elem() const { return 2; }

  /// `src` converted to the model's type, into `dst`.
  Status upload(const std::vector<float>& src, DeviceMem& dst) {
    if (src.empty()) return Status::Ok();
    std::vector<uint16_t> bits(src.size());
    parallel_ranges(static_cast<int64_t>(src.size()), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        bits[static_cast<size_t>(i)] = o.bf16 ? float_to_bfloat16_bits(src[static_cast<size_t>(i)])
                                              : float_to_half_bits(src[static_cast<size_t>(i)]);
    });
    INGOT_RETURN_IF_ERROR(dst.reserve(bits.size() * 2));
    INGOT_CUDA_CHECK(cudaMemcpy(dst.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    return Status::Ok();
  }

  /// A projection's weights, the rows of `parts` one after another (Q, K and V; gate and up),
  /// each part its fp32 rows of `in` and the 4-bit blocks the model holds for them (empty when
  /// none): as upload(), or with fp8_weights in float8 e4m3 scaled by amax / 448 (nearest even,
  /// saturating), the scale returned in *scale. With int4_weights, parts with blocks go up as they
  /// are (the others are quantized here on the host, as the device would); when no part has any,
  /// the device quantizes the floats. The parts' floats are joined only where they are uploaded.
  using Part = std::pair<const std::vector<float>*, const Int4Weights*>;
  Status upload_weight(std::initializer_list<Part> parts, DeviceMem& dst, float* scale, DeviceMem* int4_scales,
                       int64_t in) {
    bool any_packed = false;
    for (const auto& part : parts) any_packed = any_packed || !part.second->empty();
    if (o.int4_weights && int4_scales && any_packed) {
      std::vector<Int4Weights> made;
      made.reserve(parts.size());
      std::vector<const Int4Weights*> blocks;
      for (const auto& part : parts) {
        const std::vector<float>* f32 = part.first;
        const Int4Weights* p = part.second;
        if (p->empty()) {
          INGOT_ASSIGN_OR_RETURN(Int4Weights q, quantize_int4(f32->data(), static_cast<int64_t>(f32->size()) / in, in,
                                                               int4_group));
          made.push_back(std::move(q));
          p = &made.back();
        }
        if (p->group != int4_group || p->cols != in)
          return invalid_argument("GPU decoder: int4 blocks in groups of ", p->group, " along rows of ", p->cols,
                                  "; this decoder reads groups of ", int4_group, " along rows of ", in);
        blocks.push_back(p);
      }
      INGOT_ASSIGN_OR_RETURN(Int4Weights all, concat_int4_rows(blocks));
      INGOT_RETURN_IF_ERROR(dst.reserve(all.q.size()));
      INGOT_RETURN_IF_ERROR(int4_scales->reserve(all.scale_min.size() * sizeof(float)));
      INGOT_CUDA_CHECK(cudaMemcpy(dst.get(), all.q.data(), all.q.size(), cudaMemcpyHostToDevice));
      INGOT_CUDA_CHECK(cudaMemcpy(int4_scales->get(), all.scale_min.data(), all.scale_min.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
      return Status::Ok();
    }
    std::vector<const std::vector<float>*> floats;
    for (const auto& part : parts) floats.push_back(part.first);
    const std::vector<float> joined = floats.size() > 1 ? concat(floats) : std::vector<float>();
    const std::vector<float>& src = floats.size() == 1 ? *floats[0] : joined;
    if (o.int4_weights && int4_scales) {
      // Through an fp32 copy on the device and the device quantizer (create_random's path too). The
      // copy goes on the decoder's stream: `stream` does not wait for the legacy stream, and a
      // pageable cudaMemcpy may return before its DMA lands, so the quantizer could read part of
      // the old buffer (seen on the H100 in session 33: Qwen2's int4 logits at cosine 0.91).
      DeviceMem f32;
      INGOT_RETURN_IF_ERROR(f32.reserve(src.size() * sizeof(float)));
      INGOT_CUDA_CHECK(cudaMemcpyAsync(f32.get(), src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice,
                                       stream));
      return quantize_int4_on_device(f32.as<float>(), static_cast<int64_t>(src.size()), in, dst, *int4_scales);
    }
    if (!o.fp8_weights) return upload(src, dst);
    const int64_t n = static_cast<int64_t>(src.size());
    float amax = 0.f;
    std::mutex mu;
    parallel_ranges(n, [&](int64_t lo, int64_t hi) {
      float m = 0.f;
      for (int64_t i = lo; i < hi; ++i) m = std::max(m, std::fabs(src[static_cast<size_t>(i)]));
      std::lock_guard<std::mutex> lock(mu);
      amax = std::max(amax, m);
    });
    *scale = amax > 0.f ? amax / 448.f : 1.f;
    const float inv = 1.f / *scale;
    std::vector<uint8_t> bits(src.size());
    parallel_ranges(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        bits[static_cast<size_t>(i)] = float_to_small_float(src[static_cast<size_t>(i)] * inv, DataType::kFloat8E4M3FN);
    });
    INGOT_RETURN_IF_ERROR(dst.reserve(bits.size()));
    INGOT_CUDA_CHECK(cudaMemcpy(dst.get(), bits.data(), bits.size(), cudaMemcpyHostToDevice));
    return Status::Ok();
  }

  /// n fp32 weights on the device, rows of `in`, into dst (n / 2 bytes) and scales (2 n / int4_group floats).
  Status quantize_int4_on_device(const float* w, int64_t n, int64_t in, DeviceMem& dst, DeviceMem& scales) {
    if (in <= 0 || n % in != 0) return internal_error("GPU decoder: int4 weights of ", n, " values in rows of ", in);
    INGOT_RETURN_IF_ERROR(dst.reserve(static_cast<size_t>(n / 2)));
    INGOT_RETURN_IF_ERROR(scales.reserve(static_cast<size_t>(2 * n / int4_group) * sizeof(float)));
    INGOT_CUDA_CHECK(backend::cuda::launch_int4_quantize(w, n / in, in, int4_group, dst.as<uint8_t>(),
                                                         scales.as<float>(), stream));
    INGOT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the fp32 source may go when this returns
    return Status::Ok();
  }

  Result<GemmPlan*> plan(int64_t T, int64_t in, int64_t out, bool accumulate, bool f32_out, bool fp8 = false) {
    auto key = std::make_tuple(T, in, out, accumulate, f32_out, fp8);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second.get();
    auto p = std::make_unique<GemmPlan>();
    const cudaDataType_t act = o.bf16 ? CUDA_R_16BF : CUDA_R_16F, cd = f32_out ? CUDA_R_32F : act;
    const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : act;  // fp8: both operands (cuBLASLt's TN form)
    INGOT_LT_OK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    // Column-major views of the row-major operands: W is (in x out), X is (in x T), Y is (out x T).
    INGOT_LT_OK(cublasLtMatrixLayoutCreate(&p->a, ab, static_cast<uint64_t>(in), static_cast<uint64_t>(out), in));
    INGOT_LT_OK(cublasLtMatrixLayoutCreate(&p->b, ab, static_cast<uint64_t>(in), static_cast<uint64_t>(T), in));
    INGOT_LT_OK(cublasLtMatrixLayoutCreate(&p->c, cd, static_cast<uint64_t>(out), static_cast<uint64_t>(T), out));
    cublasLtMatmulPreference_t pref = nullptr;
    INGOT_LT_OK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kLtWorkspace;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (fp8) {
      // The heuristic sees the call as it will be made: per-tensor scale pointers set (the
      // activation scale stands in for both; project() points A at the layer's weight scale).
      const float* s = act_scale.as<float>();
      INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &s, sizeof(s)));
      INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &s, sizeof(s)));
    }
    cublasLtMatmulHeuristicResult_t r[kCandidates]{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a, p->b, p->c, p->c, pref, kCandidates, r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0)
      return internal_error("GPU decoder: cuBLASLt has no algorithm for a ", T, "x", out, "x", in,
                            fp8 ? " fp8" : "", " GEMM");
    for (int i = 0; i < found; ++i) p->algos.push_back(r[i].algo);
    GemmPlan* raw = p.get();
    plans.emplace(key, std::move(p));
    return raw;
  }

  /// y[T][out] = x[T][in] w[out][in]^T (+ y when accumulate); y fp32 when f32_out.
  Status gemm(const void* x_, const void* w, void* y, int64_t T, int64_t in, int64_t out, bool accumulate = false,
              bool f32_out = false) {
    INGOT_ASSIGN_OR_RETURN(GemmPlan * p, plan(T, in, out, accumulate, f32_out));
    return matmul(p, x_, w, y, accumulate);
  }

  /// A projection of the layer: y[T][out] (+)= x[T][in] w[out][in]^T. A step of at most
  /// gemv_max_tokens tokens runs one GEMV (fp8 weights dequantized as read, W8A16). Otherwise,
  /// with fp8 weights, x is first quantized (dynamic per-tensor scale) into xq and the GEMM runs in
  /// float8 with both scales (cuBLASLt's A and B scale pointers), fp32 accumulation, y in the
  /// model's type.
  /// Whether a step of T tokens runs a projection with input dim `in` as a GEMV (project's choice).
  bool gemv_step(int64_t T, int64_t in) const {
    const bool few = T <= std::min<int64_t>(o.gemv_max_tokens, backend::cuda::kGemvMaxTokens);
    return o.int4_weights ? few : few && in % 16 == 0;
  }

  /// `pro`: what the GEMV applies to x as it reads it (only where gemv_step: the caller runs the
  /// RMSNorm or the SiLU gate itself otherwise).
  Status project(const void* x_, const DeviceMem& w, const float* w_scale, void* y, int64_t T, int64_t in, int64_t out,
                 bool accumulate = false, const backend::cuda::GemvPrologue& pro = {}) {
    if (pro.kind != backend::cuda::GemvPrologue::kNone && !gemv_step(T, in))
      return internal_error("GPU decoder: a GEMV prologue on a step of ", T, " tokens, which runs a GEMM");
    if (o.int4_weights) {  // W4A16: w holds the nibbles, w_scale the groups' (scale, min) pairs
      if (gemv_step(T, in)) {
        INGOT_CUDA_CHECK(backend::cuda::launch_gemv_small_t_int4(t, x_, w.as<uint8_t>(), w_scale, y, T, in, out,
                                                                 int4_group, accumulate, stream, pro,
                                                                 T == 1 ? o.gemv_k_split : 0));
        return Status::Ok();
      }
      if (T <= o.int4_gemm_max_tokens) {
        INGOT_CUDA_CHECK(backend::cuda::launch_int4_gemm(t, x_, w.as<uint8_t>(), w_scale, y, T, in, out, int4_group,
                                                         accumulate, int4_ws.get(), int4_ws_bytes, sm_count, stream));
        return Status::Ok();
      }
      INGOT_CUDA_CHECK(backend::cuda::launch_int4_dequantize(t, w.as<uint8_t>(), w_scale, out, in, int4_group,
                                                             wdq.get(), stream));
      return gemm(x_, wdq.get(), y, T, in, out, accumulate);
    }
    if (gemv_step(T, in)) {
      INGOT_CUDA_CHECK(backend::cuda::launch_gemv_small_t(t, x_, w.get(), o.fp8_weights, w_scale, y, T, in, out,
                                                          accumulate, stream, pro, T == 1 ? o.gemv_k_split : 0));
      return Status::Ok();
    }
    if (!o.fp8_weights) return gemm(x_, w.get(), y, T, in, out, accumulate);
    INGOT_CUDA_CHECK(backend::cuda::launch_fp8_quantize_dynamic(t, x_, T * in, xq.get(), act_scale.as<float>(),
                                                                amax.as<unsigned>(), stream));
    INGOT_ASSIGN_OR_RETURN(GemmPlan * p, plan(T, in, out, accumulate, false, /*fp8=*/true));
    const float* x_scale = act_scale.as<float>();
    INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                               sizeof(w_scale)));
    INGOT_LT_OK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                               sizeof(x_scale)));
    return matmul(p, xq.get(), w.get(), y, accumulate);
  }

  Status matmul(GemmPlan* p, const void* x_, const void* w, void* y, bool accumulate) {
    const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
    // A candidate the heuristic offered may still refuse the call itself (NOT_SUPPORTED: cuBLASLt
    // checks some limits only here); the next one is tried, and the one that ran is kept.
    for (; p->chosen < p->algos.size(); ++p->chosen) {
      const cublasStatus_t s = cublasLtMatmul(lt, p->desc, &alpha, w, p->a, x_, p->b, &beta, y, p->c, y, p->c,
                                              &p->algos[p->chosen], lt_ws.get(), kLtWorkspace, stream);
      if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
      if (s != CUBLAS_STATUS_NOT_SUPPORTED)
        return internal_error("GPU decoder: cublasLtMatmul: ", cublasLtGetStatusString(s));
    }
    return internal_error("GPU decoder: none of cuBLASLt's ", p->algos.size(),
                          " candidate algorithms runs this GEMM (beta ", beta, ")");
  }
};

LlamaGpuModel::LlamaGpuModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaGpuModel::~LlamaGpuModel() = default;
const LlamaConfig& LlamaGpuModel::config() const { return impl_->c; }

/// Checks `c` and `o` against what the decoder serves, and makes the stream, cuBLASLt handle and
/// workspace (create and create_random).
Result<std::unique_ptr<LlamaGpuModel::Impl>> LlamaGpuModel::Impl::start(const LlamaConfig& c, const GpuDecoderOptions& o) {
  if (o.num_blocks <= 0 || o.block_size <= 0) return invalid_argument("GPU decoder: num_blocks and block_size must be > 0");
  if (c.head_dim != 64 && c.head_dim != 128)
    return unsupported("GPU decoder: head_dim ", c.head_dim, " (the attention kernels serve 64 and 128)");
  if (!backend::cuda::cuda_device_present()) {
    cudaGetLastError();
    return unsupported("GPU decoder: no CUDA device");
  }
  auto m = std::make_unique<Impl>();
  m->c = c;
  m->o = o;
  m->t = o.bf16 ? FloatType::kBF16 : FloatType::kF16;
  const backend::cuda::DeviceInfo dev = backend::cuda::current_device_info();
  m->sm_count = dev.sm_count;
  if (o.int4_weights) {
    if (o.fp8_weights) return invalid_argument("GPU decoder: int4 and fp8 weights are exclusive; choose one");
    const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, ff = c.intermediate_size;
    m->int4_group = o.int4_group != 0 ? o.int4_group : int4_group_for({d, nq, ff});
    if (m->int4_group == 0)
      return unsupported("GPU decoder: int4 weights need input dimensions that are multiples of 32; got ", d, ", ", nq,
                         " and ", ff);
    for (int64_t k : {d, nq, ff})  // the projections' input dims: whole groups
      if (!int4_group_supported(m->int4_group) || k % m->int4_group != 0)
        return unsupported("GPU decoder: int4 groups of ", m->int4_group, " (32, 64 or 128 that divide every input ",
                           "dimension) do not fit an input dimension of ", k);
  }
  if (o.fp8_weights) {
    if (dev.cc < 89)
      return unsupported("GPU decoder: fp8 weights need compute capability 8.9 or newer (Ada, Hopper); this GPU is ",
                         dev.cc / 10, ".", dev.cc % 10);
    const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, nkv = c.num_kv_heads * c.head_dim;
    const int64_t ff = c.intermediate_size;
    for (int64_t k : {d, nq, ff, nq + 2 * nkv})  // cuBLASLt's fp8 kernels: 16-byte rows of every operand
      if (k % 16 != 0) return unsupported("GPU decoder: fp8 GEMMs need dimensions that are multiples of 16, got ", k);
  }
  INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  INGOT_LT_OK(cublasLtCreate(&m->lt));
  INGOT_RETURN_IF_ERROR(m->lt_ws.reserve(Impl::kLtWorkspace));
  return m;
}

/// A layer's KV cache, and the rotary frequencies once every layer is in (create and create_random).
Status LlamaGpuModel::Impl::add_layer(std::unique_ptr<Layer> g) {
  const size_t cache_bytes = static_cast<size_t>(o.num_blocks) * static_cast<size_t>(o.block_size) *
                             static_cast<size_t>(c.num_kv_heads * c.head_dim) * (o.fp8_kv ? 1 : 2);
  INGOT_RETURN_IF_ERROR(g->k_cache.reserve(cache_bytes));
  INGOT_RETURN_IF_ERROR(g->v_cache.reserve(cache_bytes));
  layers.push_back(std::move(g));
  return Status::Ok();
}

Status LlamaGpuModel::Impl::finish(const std::vector<float>& f) {
  INGOT_RETURN_IF_ERROR(inv_freq.reserve(f.size() * sizeof(float)));
  INGOT_CUDA_CHECK(cudaMemcpy(inv_freq.get(), f.data(), f.size() * sizeof(float), cudaMemcpyHostToDevice));
  return Status::Ok();
}

Result<std::unique_ptr<LlamaGpuModel>> LlamaGpuModel::create(const LlamaCpuModel& w, const GpuDecoderOptions& options) {
  const LlamaConfig& c = w.config();
  if (!w.has_weights()) return invalid_argument("GPU decoder: the model has no weights to upload (create_random makes them)");
  GpuDecoderOptions o = options;
  if (o.int4_weights && o.int4_group == 0) o.int4_group = w.int4_group(/*fallback=*/true);  // the model's blocks'
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, Impl::start(c, o));
  INGOT_RETURN_IF_ERROR(m->upload(w.embed(), m->embed));
  INGOT_RETURN_IF_ERROR(m->upload(w.out_norm(), m->out_norm));
  INGOT_RETURN_IF_ERROR(m->upload(w.lm_head(), m->lm_head));
  for (const LlamaCpuModel::Layer& L : w.layers()) {
    auto g = std::make_unique<Impl::Layer>();
    INGOT_RETURN_IF_ERROR(m->upload(L.attn_norm, g->attn_norm));
    float scales[4] = {1.f, 1.f, 1.f, 1.f};
    const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, ff = c.intermediate_size;
    const LlamaCpuModel::Layer::Int4& q4 = L.int4;
    INGOT_RETURN_IF_ERROR(m->upload_weight({{&L.wq, &q4.wq}, {&L.wk, &q4.wk}, {&L.wv, &q4.wv}}, g->wqkv, &scales[0],
                                           &g->int4_scales[0], d));
    if (!L.bq.empty() || !L.bk.empty() || !L.bv.empty()) {  // Qwen2: a bias for each (zeros where one is absent)
      std::vector<float> bq = L.bq, bk = L.bk, bv = L.bv;
      bq.resize(static_cast<size_t>(c.num_heads * c.head_dim), 0.f);
      bk.resize(static_cast<size_t>(c.num_kv_heads * c.head_dim), 0.f);
      bv.resize(static_cast<size_t>(c.num_kv_heads * c.head_dim), 0.f);
      INGOT_RETURN_IF_ERROR(m->upload(concat({&bq, &bk, &bv}), g->bqkv));
    }
    INGOT_RETURN_IF_ERROR(m->upload_weight({{&L.wo, &q4.wo}}, g->wo, &scales[1], &g->int4_scales[1], nq));
    INGOT_RETURN_IF_ERROR(m->upload(L.ffn_norm, g->ffn_norm));
    INGOT_RETURN_IF_ERROR(m->upload_weight({{&L.w_gate, &q4.w_gate}, {&L.w_up, &q4.w_up}}, g->w_gate_up, &scales[2],
                                           &g->int4_scales[2], d));
    INGOT_RETURN_IF_ERROR(m->upload_weight({{&L.w_down, &q4.w_down}}, g->w_down, &scales[3], &g->int4_scales[3], ff));
    if (o.fp8_weights) {
      float spaced[16] = {};
      for (int i = 0; i < 4; ++i) spaced[4 * i] = scales[i];
      INGOT_RETURN_IF_ERROR(g->w_scales.reserve(sizeof(spaced)));
      INGOT_CUDA_CHECK(cudaMemcpy(g->w_scales.get(), spaced, sizeof(spaced), cudaMemcpyHostToDevice));
    }
    INGOT_RETURN_IF_ERROR(m->add_layer(std::move(g)));
  }
  INGOT_RETURN_IF_ERROR(m->finish(w.inv_freq()));
  // Every upload above (legacy-stream copies from pageable memory) has landed before the decoder's
  // own stream reads the weights.
  INGOT_CUDA_CHECK(cudaDeviceSynchronize());
  return std::unique_ptr<LlamaGpuModel>(new LlamaGpuModel(std::move(m)));
}

Result<std::unique_ptr<LlamaGpuModel>> LlamaGpuModel::create_random(const LlamaCpuModel& shapes,
                                                                    const GpuDecoderOptions& o, uint64_t seed) {
  const LlamaConfig& c = shapes.config();
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, Impl::start(c, o));
  const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, nkv = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  // LlamaCpuModel::random's tensors in its order (their numbers pick the hash), each part of a
  // concatenation at its offset; fp8 weights through an fp32 buffer and the device quantizer,
  // which writes the scale into the layer's slot (what upload_weight computes on the host).
  uint64_t tensor = 0;
  const float a = 0.02f * std::sqrt(3.0f);
  struct Part {
    int64_t n;
    float center, amp;
  };
  DeviceMem f32, amax_ws;
  INGOT_RETURN_IF_ERROR(amax_ws.reserve(4));
  // int4: in = the rows' length, int4_scales = the projection's group scales.
  auto put = [&](DeviceMem& dst, std::initializer_list<Part> parts, bool weight, float* scale_slot,
                 DeviceMem* int4_scales = nullptr, int64_t in = 0) -> Status {
    int64_t total = 0;
    for (const Part& p : parts) total += p.n;
    const bool int4 = weight && o.int4_weights;
    const bool fp8 = (weight && o.fp8_weights) || int4;  // both start from fp32 values
    if (!int4) INGOT_RETURN_IF_ERROR(dst.reserve(static_cast<size_t>(total) * (fp8 ? 1 : 2)));
    if (fp8) INGOT_RETURN_IF_ERROR(f32.reserve(static_cast<size_t>(total) * sizeof(float)));
    char* base = static_cast<char*>(fp8 ? f32.get() : dst.get());
    const size_t es = fp8 ? sizeof(float) : 2;
    int64_t off = 0;
    for (const Part& p : parts) {
      INGOT_CUDA_CHECK(backend::cuda::launch_fill_hash_uniform(fp8 ? FloatType::kF32 : m->t, base + off * es, p.n,
                                                               hash_uniform_base(seed, ++tensor), p.center, p.amp,
                                                               m->stream));
      off += p.n;
    }
    if (int4) return m->quantize_int4_on_device(f32.as<float>(), total, in, dst, *int4_scales);
    if (fp8)
      INGOT_CUDA_CHECK(backend::cuda::launch_fp8_quantize_dynamic(FloatType::kF32, f32.get(), total, dst.get(),
                                                                  scale_slot, amax_ws.as<unsigned>(), m->stream));
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(put(m->embed, {{c.vocab_size * d, 0.f, a}}, false, nullptr));
  INGOT_RETURN_IF_ERROR(put(m->out_norm, {{d, 1.f, 0.1f}}, false, nullptr));
  if (!c.tie_word_embeddings) INGOT_RETURN_IF_ERROR(put(m->lm_head, {{c.vocab_size * d, 0.f, a}}, false, nullptr));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto g = std::make_unique<Impl::Layer>();
    float* scales = nullptr;
    if (o.fp8_weights) {
      INGOT_RETURN_IF_ERROR(g->w_scales.reserve(16 * sizeof(float)));
      INGOT_CUDA_CHECK(cudaMemsetAsync(g->w_scales.get(), 0, 16 * sizeof(float), m->stream));
      scales = g->w_scales.as<float>();
    }
    auto slot = [&](int i) { return scales ? scales + 4 * i : nullptr; };
    INGOT_RETURN_IF_ERROR(put(g->attn_norm, {{d, 1.f, 0.1f}}, false, nullptr));
    INGOT_RETURN_IF_ERROR(
        put(g->wqkv, {{nq * d, 0.f, a}, {nkv * d, 0.f, a}, {nkv * d, 0.f, a}}, true, slot(0), &g->int4_scales[0], d));
    if (c.attention_bias) INGOT_RETURN_IF_ERROR(put(g->bqkv, {{nq, 0.f, a}, {nkv, 0.f, a}, {nkv, 0.f, a}}, false, nullptr));
    INGOT_RETURN_IF_ERROR(put(g->wo, {{d * nq, 0.f, a}}, true, slot(1), &g->int4_scales[1], nq));
    INGOT_RETURN_IF_ERROR(put(g->ffn_norm, {{d, 1.f, 0.1f}}, false, nullptr));
    INGOT_RETURN_IF_ERROR(put(g->w_gate_up, {{ff * d, 0.f, a}, {ff * d, 0.f, a}}, true, slot(2), &g->int4_scales[2], d));
    INGOT_RETURN_IF_ERROR(put(g->w_down, {{d * ff, 0.f, a}}, true, slot(3), &g->int4_scales[3], ff));
    INGOT_RETURN_IF_ERROR(m->add_layer(std::move(g)));
  }
  INGOT_CUDA_CHECK(cudaStreamSynchronize(m->stream));  // f32 and amax_ws go out of scope
  INGOT_RETURN_IF_ERROR(m->finish(shapes.inv_freq()));
  return std::unique_ptr<LlamaGpuModel>(new LlamaGpuModel(std::move(m)));
}

Status LlamaGpuModel::Impl::prepare(const StepShape& sh) {
  const LlamaConfig& k = c;
  const size_t e = elem(), Tz = static_cast<size_t>(sh.T), Sz = static_cast<size_t>(sh.S);
  const size_t d = static_cast<size_t>(k.hidden_size), nq = static_cast<size_t>(k.num_heads * k.head_dim);
  const size_t nkv = static_cast<size_t>(k.num_kv_heads * k.head_dim), ff = static_cast<size_t>(k.intermediate_size);
  attn = attention_params(sh);
  attn_ws_bytes = std::max<size_t>(backend::cuda::paged_decode_attention_workspace_bytes(attn), 4);
  const bool past_gemv = sh.T > std::min<int64_t>(o.gemv_max_tokens, backend::cuda::kGemvMaxTokens);
  const bool int4_gemm = o.int4_weights && past_gemv && sh.T <= o.int4_gemm_max_tokens;
  const bool int4_dense = o.int4_weights && past_gemv && sh.T > o.int4_gemm_max_tokens;
  for (auto [buf, bytes] : std::initializer_list<std::pair<DeviceMem*, size_t>>{
           {&x, Tz * d * e}, {&h, Tz * d * e}, {&qkv, Tz * (nq + 2 * nkv) * e}, {&q, Tz * nq * e},
           {&att, Tz * nq * e}, {&gu, Tz * 2 * ff * e}, {&g, Tz * ff * e}, {&ints, sh.ints() * sizeof(int32_t)},
           {&slots, Tz * sizeof(int64_t)}, {&attn_ws, attn_ws_bytes}, {&last_x, Sz * d * e}, {&last_h, Sz * d * e},
           {&logits, Sz * static_cast<size_t>(k.vocab_size) * sizeof(float)}, {&argmax, Sz * sizeof(int32_t)},
           {&xq, o.fp8_weights ? Tz * std::max({d, nq, ff}) : 0}, {&act_scale, o.fp8_weights ? 4 : 0},
           {&amax, o.fp8_weights ? 4 : 0},
           {&wdq, int4_dense ? std::max({(nq + 2 * nkv) * d, d * nq, 2 * ff * d}) * e : 0}}) {
    const void* before = buf->get();
    INGOT_RETURN_IF_ERROR(buf->reserve(bytes));
    if (buf->get() != before) ++generation;  // captured graphs point at the old buffer
  }
  // The int4 GEMM's workspace must be zeros when it grows: a new allocation, even one at the freed
  // buffer's address (which cudaMalloc may return, so the address alone does not tell), is memset.
  const size_t ws_need =
      int4_gemm ? backend::cuda::int4_gemm_workspace_bound(sh.T, static_cast<int64_t>(std::max({nq + 2 * nkv, d, 2 * ff})))
                : 0;
  if (ws_need > int4_ws_bytes) {
    const void* before = int4_ws.get();
    INGOT_RETURN_IF_ERROR(int4_ws.reserve(ws_need));
    if (int4_ws.get() != before) ++generation;
    INGOT_CUDA_CHECK(cudaMemsetAsync(int4_ws.get(), 0, ws_need, stream));
    int4_ws_bytes = ws_need;
  }
  INGOT_RETURN_IF_ERROR(host_ints.reserve(sh.ints() * sizeof(int32_t)));
  INGOT_RETURN_IF_ERROR(host_slots.reserve(Tz * sizeof(int64_t)));
  return host_argmax.reserve(Sz * sizeof(int32_t));
}

backend::cuda::PagedDecodeParams LlamaGpuModel::Impl::attention_params(const StepShape& sh) const {
  backend::cuda::PagedDecodeParams ap;
  ap.type = t;
  ap.batch = static_cast<int32_t>(sh.T);
  ap.num_heads = static_cast<int32_t>(c.num_heads);
  ap.num_kv_heads = static_cast<int32_t>(c.num_kv_heads);
  ap.head_dim = static_cast<int32_t>(c.head_dim);
  ap.block_size = o.block_size;
  ap.max_blocks_per_seq = static_cast<int32_t>(sh.max_blocks);
  ap.max_context_len = sh.max_ctx;
  // One block per KV head's query group where asked and the group is 2-8 heads (the parts sized for
  // the KV heads' blocks then).
  const int64_t group = c.num_heads / std::max<int64_t>(1, c.num_kv_heads);
  ap.grouped = o.grouped_decode_attention && group >= 2 && group <= 8;
  ap.partition_size = o.partition_size >= 0
                          ? o.partition_size
                          : backend::cuda::auto_decode_partition(sh.T, ap.grouped ? c.num_kv_heads : c.num_heads,
                                                                 sm_count);
  ap.fp8_cache = o.fp8_kv;  // scales 1 (vLLM's default without calibrated ones)
  return ap;
}

Status LlamaGpuModel::Impl::enqueue(const StepShape& sh) {
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t nq = H * hd, nkv = Hkv * hd, ff = c.intermediate_size, V = c.vocab_size, T = sh.T, S = sh.S;
  cudaStream_t st = stream;
  const int32_t* d_ids = ints.as<int32_t>();
  const int32_t* d_pos = d_ids + T;
  const int32_t* d_ctx = d_pos + T;
  const int32_t* d_last = d_ctx + T;
  const int32_t* d_tables = d_last + S;
  INGOT_CUDA_CHECK(backend::cuda::launch_gather(2, embed.get(), d_ids, false, x.get(), 1, V, d, T, st));
  INGOT_RETURN_IF_ERROR(mark("embedding"));
  const float eps = static_cast<float>(c.rms_norm_eps);
  // GEMV steps take the RMSNorms and the SiLU gate into their projections (GpuDecoderOptions::gemv_prologue).
  const bool fuse_norm = o.gemv_prologue && gemv_step(T, d);
  const bool fuse_gate = o.gemv_prologue && gemv_step(T, ff);
  auto rms_prologue = [eps](const void* norm_weight) {
    backend::cuda::GemvPrologue p;
    p.kind = backend::cuda::GemvPrologue::kRmsNorm;
    p.norm_weight = norm_weight;
    p.eps = eps;
    return p;
  };
  backend::cuda::PagedDecodeParams ap = attn;
  for (const auto& Lp : layers) {
    Layer& L = *Lp;
    const int64_t nqkv = nq + 2 * nkv;
    if (fuse_norm) {  // the QKV GEMV normalizes x as it reads it
      INGOT_RETURN_IF_ERROR(project(x.get(), L.wqkv, L.scale(0), qkv.get(), T, d, nqkv, false,
                                    rms_prologue(L.attn_norm.get())));
    } else {
      INGOT_CUDA_CHECK(backend::cuda::launch_layernorm(t, x.get(), L.attn_norm.get(), nullptr, h.get(), T, d, eps, st,
                                                    /*rms=*/true));
      INGOT_RETURN_IF_ERROR(mark("rmsnorm"));
      INGOT_RETURN_IF_ERROR(project(h.get(), L.wqkv, L.scale(0), qkv.get(), T, d, nqkv));
    }
    if (!L.bqkv.empty()) INGOT_CUDA_CHECK(backend::cuda::launch_add_bias_rows(t, qkv.get(), L.bqkv.get(), T, nqkv, st));
    INGOT_RETURN_IF_ERROR(mark("qkv projection"));
    // Q, K, V are column slices of qkv; the rotated Q goes to q, packed for the attention.
    backend::cuda::RopeKvWriteParams rp;
    rp.type = t;
    rp.q = qkv.get();
    rp.k = static_cast<char*>(qkv.get()) + nq * elem();
    rp.v = static_cast<char*>(qkv.get()) + (nq + nkv) * elem();
    rp.row_stride = nqkv;
    rp.q_out = q.get();
    rp.k_cache = L.k_cache.get();
    rp.v_cache = L.v_cache.get();
    rp.positions = d_pos;
    rp.slot_mapping = slots.as<int64_t>();
    rp.inv_freq = inv_freq.as<float>();
    rp.num_tokens = T;
    rp.num_heads = static_cast<int32_t>(H);
    rp.num_kv_heads = static_cast<int32_t>(Hkv);
    rp.head_dim = static_cast<int32_t>(hd);
    rp.fp8_cache = o.fp8_kv;
    INGOT_CUDA_CHECK(backend::cuda::launch_rope_kv_write(rp, st));
    INGOT_RETURN_IF_ERROR(mark("rope + kv write"));
    ap.q = q.get();
    ap.k_cache = L.k_cache.get();
    ap.v_cache = L.v_cache.get();
    ap.context_lens = d_ctx;
    ap.block_tables = d_tables;
    ap.o = att.get();
    INGOT_CUDA_CHECK(backend::cuda::launch_paged_decode_attention(ap, attn_ws.get(), attn_ws_bytes, st));
    for (const auto& [r0, n] : flash_rows) {  // whole prompts: causal flash attention over their own rows
      backend::cuda::AttentionParams fp;
      fp.type = t;
      fp.q = static_cast<const char*>(q.get()) + r0 * nq * elem();
      fp.k = static_cast<const char*>(qkv.get()) + (r0 * nqkv + nq) * elem();
      fp.v = static_cast<const char*>(qkv.get()) + (r0 * nqkv + nq + nkv) * elem();
      fp.y = static_cast<char*>(att.get()) + r0 * nq * elem();
      fp.batch = 1;
      fp.q_heads = H;
      fp.kv_heads = Hkv;
      fp.q_len = fp.kv_len = n;
      fp.head_size = hd;
      // (batch, head, row) strides in elements: q and y packed rows of nq, k and v slices of qkv rows.
      auto strides = [hd](int64_t* to, int64_t row) {
        to[0] = 0;
        to[1] = hd;
        to[2] = row;
      };
      strides(fp.q_stride, nq);
      strides(fp.y_stride, nq);
      strides(fp.k_stride, nqkv);
      strides(fp.v_stride, nqkv);
      fp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
      fp.causal = true;
      INGOT_CUDA_CHECK(backend::cuda::launch_attention_flash(fp, sm_count, st));
    }
    INGOT_RETURN_IF_ERROR(mark("attention"));
    INGOT_RETURN_IF_ERROR(project(att.get(), L.wo, L.scale(1), x.get(), T, nq, d, /*accumulate=*/true));
    INGOT_RETURN_IF_ERROR(mark("output projection"));
    if (fuse_norm) {
      INGOT_RETURN_IF_ERROR(project(x.get(), L.w_gate_up, L.scale(2), gu.get(), T, d, 2 * ff, false,
                                    rms_prologue(L.ffn_norm.get())));
    } else {
      INGOT_CUDA_CHECK(backend::cuda::launch_layernorm(t, x.get(), L.ffn_norm.get(), nullptr, h.get(), T, d, eps, st,
                                                    /*rms=*/true));
      INGOT_RETURN_IF_ERROR(mark("rmsnorm"));
      INGOT_RETURN_IF_ERROR(project(h.get(), L.w_gate_up, L.scale(2), gu.get(), T, d, 2 * ff));
    }
    INGOT_RETURN_IF_ERROR(mark("gate/up projection"));
    if (fuse_gate) {  // the down GEMV reads silu(gate) * up from the packed rows
      backend::cuda::GemvPrologue silu;
      silu.kind = backend::cuda::GemvPrologue::kSiluMul;
      INGOT_RETURN_IF_ERROR(project(gu.get(), L.w_down, L.scale(3), x.get(), T, ff, d, /*accumulate=*/true, silu));
    } else {
      INGOT_CUDA_CHECK(backend::cuda::launch_silu_mul_packed(t, gu.get(), g.get(), T, ff, st));
      INGOT_RETURN_IF_ERROR(mark("silu * up"));
      INGOT_RETURN_IF_ERROR(project(g.get(), L.w_down, L.scale(3), x.get(), T, ff, d, /*accumulate=*/true));
    }
    INGOT_RETURN_IF_ERROR(mark("down projection"));
  }
  INGOT_CUDA_CHECK(backend::cuda::launch_gather(2, x.get(), d_last, false, last_x.get(), 1, T, d, S, st));
  INGOT_CUDA_CHECK(backend::cuda::launch_layernorm(t, last_x.get(), out_norm.get(), nullptr, last_h.get(), S, d, eps, st,
                                                /*rms=*/true));
  const void* head = lm_head.empty() ? embed.get() : lm_head.get();
  INGOT_RETURN_IF_ERROR(mark("final norm"));
  INGOT_RETURN_IF_ERROR(gemm(last_h.get(), head, logits.get(), S, d, V, false, /*f32_out=*/true));
  INGOT_RETURN_IF_ERROR(mark("lm head"));
  INGOT_CUDA_CHECK(backend::cuda::launch_logits_argmax(logits.as<float>(), S, V, argmax.as<int32_t>(), st));
  INGOT_RETURN_IF_ERROR(mark("argmax"));
  return Status::Ok();
}

Status LlamaGpuModel::Impl::replay(const StepShape& sh) {
  auto& slot = graphs[sh.T];
  if (!slot || slot->generation != generation) {
    slot.reset();
    const auto t0 = std::chrono::steady_clock::now();
    // The GEMMs' cuBLASLt plans (descriptors, heuristic queries) made before the capture, not in it.
    const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, nkv = c.num_kv_heads * c.head_dim;
    const int64_t ff = c.intermediate_size;
    for (auto [in, out, acc] : {std::tuple<int64_t, int64_t, bool>{d, nq + 2 * nkv, false}, {nq, d, true},
                                {d, 2 * ff, false}, {ff, d, true}})
      INGOT_RETURN_IF_ERROR(plan(sh.T, in, out, acc, false, o.fp8_weights).status());
    INGOT_RETURN_IF_ERROR(plan(sh.S, d, c.vocab_size, false, true).status());
    cudaGraph_t graph = nullptr;
    INGOT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status s = enqueue(sh);
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (!s.ok()) {
      if (graph) cudaGraphDestroy(graph);
      return s;
    }
    INGOT_CUDA_CHECK(end);
    auto fresh = std::make_unique<Graph>();
    const cudaError_t inst = cudaGraphInstantiate(&fresh->exec, graph, 0);
    cudaGraphDestroy(graph);
    INGOT_CUDA_CHECK(inst);
    fresh->generation = generation;
    slot = std::move(fresh);
    ++stats.graph_captures;
    stats.capture_seconds += seconds_since(t0);
  }
  INGOT_CUDA_CHECK(cudaGraphLaunch(slot->exec, stream));
  return Status::Ok();
}

namespace {

/// The padded batch a decode graph serves for `batch` sequences.
int64_t graph_batch(int64_t batch) {
  int64_t b = 1;
  while (b < batch) b *= 2;
  return b;
}

}  // namespace

Status LlamaGpuModel::Impl::upload_indices(const std::vector<GpuChunk>& chunks, const StepShape& sh) {
  const int64_t bs = o.block_size;
  int32_t* ids = host_ints.as<int32_t>();
  int32_t* pos = ids + sh.T;
  int32_t* ctx = pos + sh.T;
  int32_t* last = ctx + sh.T;
  int32_t* tables = last + sh.S;
  int64_t* slot = host_slots.as<int64_t>();
  std::fill(ids, ids + sh.ints(), 0);
  std::fill(slot, slot + sh.T, int64_t{-1});
  int64_t r = 0;
  flash_rows.clear();
  for (size_t s = 0; s < chunks.size(); ++s) {
    const GpuChunk& ch = chunks[s];
    const bool flash = o.flash_prefill_min_tokens > 0 && ch.start == 0 && ch.count >= o.flash_prefill_min_tokens;
    if (flash) flash_rows.emplace_back(r, ch.count);
    for (int64_t i = 0; i < ch.count; ++i, ++r) {
      const int64_t p = ch.start + i;
      const int32_t id = (*ch.tokens)[static_cast<size_t>(p)];
      if (id < 0 || id >= c.vocab_size) return invalid_argument("GPU decoder: token id ", id, " outside the vocabulary");
      ids[r] = id;
      pos[r] = static_cast<int32_t>(p);
      ctx[r] = flash ? 0 : static_cast<int32_t>(p + 1);  // 0: the decode kernel writes zeros, flash the rows
      std::copy(ch.block_table->begin(), ch.block_table->end(), tables + r * sh.max_blocks);
      slot[r] = static_cast<int64_t>((*ch.block_table)[static_cast<size_t>(p / bs)]) * bs + p % bs;
    }
    last[s] = static_cast<int32_t>(r - 1);
  }
  for (; r < sh.T; ++r) ctx[r] = 1;  // padding rows (graph steps): one position, block 0, no cache write
  for (int64_t s = static_cast<int64_t>(chunks.size()); s < sh.S; ++s) last[s] = static_cast<int32_t>(s);
  // The step's one upload (two copies: the int32 arrays, the int64 slots).
  INGOT_CUDA_CHECK(cudaMemcpyAsync(ints.get(), ids, sh.ints() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  INGOT_CUDA_CHECK(cudaMemcpyAsync(slots.get(), slot, static_cast<size_t>(sh.T) * sizeof(int64_t),
                                   cudaMemcpyHostToDevice, stream));
  return Status::Ok();
}

Result<StepResult> LlamaGpuModel::forward(const std::vector<GpuChunk>& chunks) {
  Impl& m = *impl_;
  const LlamaConfig& c = m.c;
  const int64_t V = c.vocab_size;
  const int64_t bs = m.o.block_size;
  if (chunks.empty()) return StepResult();
  const auto t0 = std::chrono::steady_clock::now();
  const double captured_before = m.stats.capture_seconds;
  // The step's index arrays, checked here (the kernels trust them).
  int64_t T = 0, max_blocks = 1, max_ctx = 0, logits_rows = 0;
  bool decode_only = true;
  for (const GpuChunk& ch : chunks) {
    if (!ch.tokens || !ch.block_table || ch.start < 0 || ch.count < 1 ||
        ch.start + ch.count > static_cast<int64_t>(ch.tokens->size()))
      return invalid_argument("GPU decoder: a chunk's tokens [", ch.start, ", ", ch.start + ch.count,
                              ") are outside its sequence");
    if (static_cast<int64_t>(ch.block_table->size()) * bs < ch.start + ch.count)
      return invalid_argument("GPU decoder: a block table holds ", ch.block_table->size() * static_cast<size_t>(bs),
                              " positions, ", ch.start + ch.count, " needed");
    for (int32_t b : *ch.block_table)
      if (b < 0 || b >= m.o.num_blocks) return invalid_argument("GPU decoder: block ", b, " outside the KV cache");
    T += ch.count;
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(ch.block_table->size()));
    max_ctx = std::max(max_ctx, ch.start + ch.count);
    decode_only = decode_only && ch.count == 1;
    logits_rows += ch.need_logits ? 1 : 0;
  }
  const int64_t S = static_cast<int64_t>(chunks.size());
  if (T > 65535) return invalid_argument("GPU decoder: ", T, " tokens in one step (at most 65535)");
  // Decode steps replay a CUDA graph captured per padded batch (1, 2, 4, ... kMaxGraphBatch) with
  // fixed bounds (graph_max_context positions, its blocks per sequence): the padding rows read
  // block 0 and write no cache slot; their logits are dropped.
  const int64_t graph_blocks = (m.o.graph_max_context + bs - 1) / bs;
  const bool graph = m.o.cuda_graphs && decode_only && S <= Impl::kMaxGraphBatch && max_ctx <= m.o.graph_max_context &&
                     max_blocks <= graph_blocks;
  StepShape sh;
  if (graph) {
    sh.T = sh.S = graph_batch(S);
    sh.max_blocks = graph_blocks;
    sh.max_ctx = m.o.graph_max_context;
  } else {
    sh.T = T;
    sh.S = S;
    sh.max_blocks = max_blocks;
    sh.max_ctx = static_cast<int32_t>(max_ctx);
  }
  INGOT_RETURN_IF_ERROR(m.prepare(sh));
  INGOT_RETURN_IF_ERROR(m.upload_indices(chunks, sh));
  cudaStream_t st = m.stream;
  INGOT_RETURN_IF_ERROR(graph ? m.replay(sh) : m.enqueue(sh));
  // The step's downloads: every argmax, and the logits rows asked for (runs of adjacent rows in one copy).
  INGOT_CUDA_CHECK(cudaMemcpyAsync(m.host_argmax.as<void>(), m.argmax.get(), static_cast<size_t>(S) * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, st));
  const size_t row_bytes = static_cast<size_t>(V) * sizeof(float);
  if (logits_rows > 0) INGOT_RETURN_IF_ERROR(m.host_logits.reserve(static_cast<size_t>(S) * row_bytes));
  for (int64_t s = 0; s < S;) {
    if (!chunks[static_cast<size_t>(s)].need_logits) {
      ++s;
      continue;
    }
    int64_t e = s + 1;
    while (e < S && chunks[static_cast<size_t>(e)].need_logits) ++e;
    INGOT_CUDA_CHECK(cudaMemcpyAsync(m.host_logits.as<char>() + static_cast<size_t>(s) * row_bytes,
                                     m.logits.as<char>() + static_cast<size_t>(s) * row_bytes,
                                     static_cast<size_t>(e - s) * row_bytes, cudaMemcpyDeviceToHost, st));
    s = e;
  }
  INGOT_CUDA_CHECK(cudaStreamSynchronize(st));
  StepResult out;
  out.argmax.assign(m.host_argmax.as<int32_t>(), m.host_argmax.as<int32_t>() + S);
  out.logits.resize(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    if (!chunks[static_cast<size_t>(s)].need_logits) continue;
    const float* row = m.host_logits.as<float>() + s * V;
    out.logits[static_cast<size_t>(s)].assign(row, row + V);
  }
  ++(graph ? m.stats.graph_steps : m.stats.eager_steps);
  m.stats.logits_rows_copied += logits_rows;
  m.stats.forward_seconds += seconds_since(t0) - (m.stats.capture_seconds - captured_before);
  return out;
}

Status LlamaGpuModel::warmup(int64_t max_step_tokens, int64_t max_batch) {
  Impl& m = *impl_;
  if (max_step_tokens < 1 || max_batch < 1)
    return invalid_argument("GPU decoder: warmup needs max_step_tokens and max_batch >= 1");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t bs = m.o.block_size;
  const int64_t batches = std::min(graph_batch(max_batch), Impl::kMaxGraphBatch);
  // The largest step's buffers first: a buffer that moves later stales every graph captured before.
  StepShape big;
  big.S = std::max(batches, std::min(max_batch, int64_t{65535}));
  big.T = std::max(std::min(max_step_tokens, int64_t{65535}), big.S);
  big.max_blocks = (m.o.graph_max_context + bs - 1) / bs;
  big.max_ctx = m.o.graph_max_context;
  INGOT_RETURN_IF_ERROR(m.prepare(big));
  if (m.o.cuda_graphs) {
    for (int64_t b = 1; b <= batches; b *= 2) {
      StepShape sh;
      sh.T = sh.S = b;
      sh.max_blocks = big.max_blocks;
      sh.max_ctx = m.o.graph_max_context;
      INGOT_RETURN_IF_ERROR(m.prepare(sh));
      INGOT_RETURN_IF_ERROR(m.upload_indices({}, sh));  // padding rows only: no cache slot is written
      INGOT_RETURN_IF_ERROR(m.replay(sh));
      INGOT_CUDA_CHECK(cudaStreamSynchronize(m.stream));  // before the next upload reuses the pinned arrays
    }
  }
  INGOT_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.stats.warmup_seconds += seconds_since(t0);
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, double>>> LlamaGpuModel::profile_decode(int64_t batch, int64_t context,
                                                                                  int iterations) {
  Impl& m = *impl_;
  const int64_t bs = m.o.block_size, per_seq = (context + bs - 1) / bs;
  if (batch < 1 || context < 1 || iterations < 1)
    return invalid_argument("profile_decode: batch, context and iterations must be >= 1");
  if (batch * per_seq > m.o.num_blocks)
    return invalid_argument("profile_decode: ", batch, " sequences of ", context, " positions need ", batch * per_seq,
                            " cache blocks; the decoder has ", m.o.num_blocks);
  if (batch > 65535) return invalid_argument("profile_decode: at most 65535 sequences");
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch), std::vector<int32_t>(static_cast<size_t>(context), 1));
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
  std::vector<GpuChunk> chunks;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < per_seq; ++k) tables[static_cast<size_t>(b)].push_back(static_cast<int32_t>(b * per_seq + k));
    chunks.push_back(GpuChunk{&tokens[static_cast<size_t>(b)], context - 1, 1, &tables[static_cast<size_t>(b)], false});
  }
  std::vector<std::pair<std::string, double>> rows;
  // As served: forward() (graph replay where it applies), warmed first.
  for (int i = 0; i < 3; ++i) INGOT_RETURN_IF_ERROR(forward(chunks).status());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) INGOT_RETURN_IF_ERROR(forward(chunks).status());
  rows.emplace_back("step (as served)", 1e3 * seconds_since(t0) / iterations);
  // Eager, op by op: the GPU held while the host enqueues the whole step.
  StepShape sh;
  sh.T = sh.S = batch;
  sh.max_blocks = per_seq;
  sh.max_ctx = static_cast<int32_t>(context);
  INGOT_RETURN_IF_ERROR(m.prepare(sh));
  std::vector<std::pair<std::string, double>> ops;
  double total = 0;
  for (int it = 0; it < iterations; ++it) {
    INGOT_RETURN_IF_ERROR(m.upload_indices(chunks, sh));
    INGOT_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    INGOT_CUDA_CHECK(backend::cuda::launch_gpu_sleep(20'000'000, m.stream));  // 20 ms: the host enqueues meanwhile
    std::vector<std::pair<const char*, cudaEvent_t>> marks;
    m.marks = &marks;
    Status s = m.mark("start");
    if (s.ok()) s = m.enqueue(sh);
    m.marks = nullptr;
    const cudaError_t sync = cudaStreamSynchronize(m.stream);
    for (size_t i = 1; s.ok() && sync == cudaSuccess && i < marks.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, marks[i - 1].second, marks[i].second);
      total += ms;
      auto at = std::find_if(ops.begin(), ops.end(), [&](const auto& r) { return r.first == marks[i].first; });
      if (at == ops.end()) ops.emplace_back(marks[i].first, ms);
      else at->second += ms;
    }
    for (auto& [name, e] : marks) cudaEventDestroy(e);
    INGOT_RETURN_IF_ERROR(s);
    INGOT_CUDA_CHECK(sync);
  }
  rows.emplace_back("eager step (GPU)", total / iterations);
  for (auto& [name, ms] : ops) rows.emplace_back(name, ms / iterations);
  return rows;
}

const GpuDecoderStats& LlamaGpuModel::stats() const { return impl_->stats; }

#endif  // INGOT_WITH_CUDA

}  // namespace ingot::llm
