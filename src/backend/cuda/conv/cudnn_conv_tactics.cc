// Copyright ingot authors. Apache-2.0.
//
// cuDNN (legacy convolution API) tactics for Conv and ingot::FusedConv (transposed = 0), NCHW
// 1-D/2-D/3-D and channels-last 2-D (NHWC activations, KRSC filters: the layout cuDNN's
// tensor-core kernels read without transposing), fp32/fp16/bf16 with fp32 accumulation.
//
// Semantics (see ir/ops/fused_conv_gemm.cc): y = act(conv(x, w) + b + r), act "" or Relu, r the
// residual. Two launch shapes:
//  - fused: cudnnConvolutionBiasActivationForward, y = act(conv + alpha2·z + bias) with z = r
//    (alpha2 = 1) or z = y (alpha2 = 0, not read). It needs a bias, and with no activation
//    (IDENTITY) only the IMPLICIT_PRECOMP_GEMM algorithm, so it is used for Relu (any algo)
//    or for bias-only convs on that algo. When cuDNN answers NOT_SUPPORTED (dtype mixes the
//    fused entry point does not take), the plan falls back to the unfused path for good.
//  - unfused: y ← r (copy, skipped when y aliases r), cudnnConvolutionForward with beta = 1
//    (or 0 without residual: y is not read), cudnnAddTensor(bias), cudnnActivationForward(Relu)
//    in place.
// A residual after a Relu (residual_before_activation = 0) is refused: neither shape gives it
// without a second output buffer. Without an activation the order does not matter.
//
// Precision: fp32 runs with CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH allows TF32 on Ampere and
// later, which misses fp32 tolerances); fp16/bf16 use the heuristic's math type with a FLOAT
// compute type (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations).
//
// Algorithm choice: "cuda.cudnn.conv.<i>" is the i-th result of
// cudnnGetConvolutionForwardAlgorithm_v7 for the shape at hand, after dropping failed ones and
// those needing more than kWorkspaceBytes (the last usable one when fewer remain). Descriptors
// and the algorithm are cached per shape in the tactic (built on first use, read lock-free).
//
// Handles, node parsing and type checks: cudnn_conv_common.h (shared with the graph-API family,
// cudnn_graph_conv_tactics.cc, which the autotuner times against these).
#ifdef INGOT_WITH_CUDNN

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/core/plan_cache.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_conv_family();

namespace {

constexpr uint64_t kWorkspaceBytes = 64ull << 20;
constexpr int kMaxHeuristics = 4;
constexpr const char* kPrefix = "cuda.cudnn.conv.";

// The legacy API has no shape for a residual added after the Relu (it would need a second
// output buffer) and no activation but Relu here; the graph-API family takes both.
Status check_types(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  ConvSpec s;
  INGOT_RETURN_IF_ERROR(check_conv_types(node, in, &s));
  if (s.residual_after_activation) return unsupported(node.describe(), ": residual after the activation");
  if (!s.activation.empty() && !s.relu) return unsupported(node.describe(), ": activation ", s.activation);
  return Status::Ok();
}

cudnnDataType_t cudnn_type(DataType t) {
  switch (t) {
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (act) cudnnDestroyActivationDescriptor(act);
  }
};

struct Plan {
  ConvKey key;
  Descriptors d;
  std::array<int, kConvMaxNd> y{};
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  bool fused = false;                     // try cudnnConvolutionBiasActivationForward
  mutable std::atomic<bool> fused_failed{false};  // cuDNN refused it once: unfused from then on
};

// Descriptors for a key (the algorithm is chosen by the caller).
Status init_descriptors(const ir::Node& node, const ConvSpec& s, DataType dtype, const ConvKey& k, Plan* p) {
  Descriptors& d = p->d;
  cudnnDataType_t t = cudnn_type(dtype);
  const cudnnTensorFormat_t fmt = k.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x), node);
  INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y), node);
  INGOT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d.w), node);
  INGOT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d.conv), node);
  INGOT_CUDNN_CHECK(cudnnSetTensorNdDescriptorEx(d.x, fmt, t, k.nd, k.x.data()), node);
  INGOT_CUDNN_CHECK(cudnnSetFilterNdDescriptor(d.w, t, fmt, k.nd, k.w.data()), node);
  std::array<int, 3> pads{}, strides{}, dils{};
  const int sd = k.nd - 2;
  for (int i = 0; i < sd; ++i) {  // 1-D: the inserted H has pad 0, stride 1, dilation 1
    int j = s.spatial == 1 ? i - 1 : i;
    pads[i] = j < 0 ? 0 : s.pads[j];
    strides[i] = j < 0 ? 1 : s.strides[j];
    dils[i] = j < 0 ? 1 : s.dilations[j];
  }
  INGOT_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(d.conv, sd, pads.data(), strides.data(), dils.data(),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    node);
  INGOT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(s.group)), node);
  INGOT_CUDNN_CHECK(
      cudnnSetConvolutionMathType(d.conv, dtype == DataType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH), node);
  INGOT_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, k.nd, p->y.data()), node);
  for (int i = 0; i < k.nd; ++i)
    if (p->y[static_cast<size_t>(i)] <= 0) return invalid_argument(node.describe(), ": empty convolution output");
  INGOT_CUDNN_CHECK(cudnnSetTensorNdDescriptorEx(d.y, fmt, t, k.nd, p->y.data()), node);
  if (k.bias) {
    std::array<int, kConvMaxNd> bdims{};
    bdims.fill(1);
    bdims[1] = k.w[0];
    INGOT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.bias), node);
    INGOT_CUDNN_CHECK(cudnnSetTensorNdDescriptorEx(d.bias, CUDNN_TENSOR_NCHW, t, k.nd, bdims.data()), node);
  }
  INGOT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d.act), node);
  INGOT_CUDNN_CHECK(cudnnSetActivationDescriptor(d.act, s.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                                 CUDNN_PROPAGATE_NAN, 0.0),
                    node);
  return Status::Ok();
}

// The usable heuristic results for the plan's descriptors, best first (count in *found).
Status query_algos(const ir::Node& node, cudnnHandle_t handle, const Plan& p,
                   std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>* out, int* found) {
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> all{};
  int returned = 0;
  INGOT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, p.d.x, p.d.w, p.d.conv, p.d.y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, all.data()),
                    node);
  *found = 0;
  for (int i = 0; i < returned; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& r = all[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kWorkspaceBytes) continue;
    (*out)[static_cast<size_t>((*found)++)] = r;
  }
  if (*found == 0) return unsupported(node.describe(), ": cuDNN offers no algorithm within ", kWorkspaceBytes, " bytes");
  return Status::Ok();
}

// Builds the full plan for `key` with heuristic result `index` (clamped to the last usable).
Status build_plan(const ir::Node& node, const ConvSpec& s, DataType dtype, cudnnHandle_t handle, const ConvKey& key,
                  int index, Plan* p) {
  p->key = key;
  INGOT_RETURN_IF_ERROR(init_descriptors(node, s, dtype, key, p));
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> algos{};
  int found = 0;
  INGOT_RETURN_IF_ERROR(query_algos(node, handle, *p, &algos, &found));
  const cudnnConvolutionFwdAlgoPerf_t& r = algos[static_cast<size_t>(std::min(index, found - 1))];
  p->algo = r.algo;
  // fp32 stays on FMA math (no TF32); half types take the math type the heuristic ranked.
  if (dtype != DataType::kFloat32) INGOT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->d.conv, r.mathType), node);
  INGOT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, p->d.x, p->d.w, p->d.conv, p->d.y, p->algo,
                                                            &p->workspace),
                    node);
  if (p->workspace > kWorkspaceBytes)
    return unsupported(node.describe(), ": algorithm ", static_cast<int>(p->algo), " needs ", p->workspace,
                       " workspace bytes");
  p->fused = key.bias && (s.relu || p->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  return Status::Ok();
}

class CudnnConvTactic : public Tactic {
 public:
  explicit CudnnConvTactic(int heuristic_index) : index_(heuristic_index) {}

  std::string name() const override { return kPrefix + std::to_string(index_); }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    return conv_handles_op(node) && check_types(node, inputs).ok();
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return kWorkspaceBytes; }

  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(ConvCall c, read_conv_call(io));
    if (c.empty) return Status::Ok();
    const ConvSpec& spec = c.spec;
    const Tensor *x = c.x, *w = c.w, *b = c.b, *r = c.r;
    Tensor& y = *c.y;
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const Plan* plan = cache_.find(c.key);
    std::unique_ptr<Plan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<Plan>();
      INGOT_RETURN_IF_ERROR(build_plan(node, spec, y.dtype(), handle, c.key, index_, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_RETURN_IF_ERROR(check_conv_output(c, plan->y));

    INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
    const float one = 1.0f, zero = 0.0f;
    const Descriptors& d = plan->d;
    if (plan->fused && !plan->fused_failed.load(std::memory_order_relaxed)) {
      // z = residual (alpha2 = 1), or y itself with alpha2 = 0 (cuDNN allows z to alias y).
      const void* z = r ? r->raw() : y.raw();
      const float alpha2 = r ? 1.0f : 0.0f;
      cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
          handle, &one, d.x, x->raw(), d.w, w->raw(), d.conv, plan->algo, io.workspace, kWorkspaceBytes, &alpha2, d.y,
          z, d.bias, b->raw(), d.act, d.y, y.mutable_raw());
      if (st == CUDNN_STATUS_SUCCESS) {
        INGOT_CUDA_CHECK(cudaGetLastError());
        return Status::Ok();
      }
      if (st != CUDNN_STATUS_NOT_SUPPORTED)
        return internal_error(node.describe(), ": cudnnConvolutionBiasActivationForward failed: ",
                              cudnnGetErrorString(st));
      plan->fused_failed.store(true, std::memory_order_relaxed);  // checked before launching: nothing ran
    }
    // Unfused: y = conv + beta·y with y pre-filled with the residual, then bias, then Relu.
    if (r && r->raw() != y.raw())
      INGOT_CUDA_CHECK(cudaMemcpyAsync(y.mutable_raw(), r->raw(), y.nbytes(), cudaMemcpyDeviceToDevice,
                                       static_cast<cudaStream_t>(io.stream)));
    const float beta = r ? 1.0f : 0.0f;
    INGOT_CUDNN_CHECK(cudnnConvolutionForward(handle, &one, d.x, x->raw(), d.w, w->raw(), d.conv, plan->algo,
                                              io.workspace, kWorkspaceBytes, &beta, d.y, y.mutable_raw()),
                      node);
    if (b) INGOT_CUDNN_CHECK(cudnnAddTensor(handle, &one, d.bias, b->raw(), &one, d.y, y.mutable_raw()), node);
    if (spec.relu)
      INGOT_CUDNN_CHECK(cudnnActivationForward(handle, d.act, &one, d.y, y.raw(), &zero, d.y, y.mutable_raw()), node);
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {1, static_cast<uint8_t>(index_)}; }

 private:
  int index_;
  mutable PlanCache<Plan> cache_;
};

// How many usable heuristic algorithms cuDNN offers at the node's shapes (symbolic dims guessed,
// see guessed_conv_key); 1 when that cannot be asked.
int heuristic_count(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  if (!cuda_device_present() || inputs.size() < 2 || !is_conv_dtype(inputs[0].dtype)) return 1;
  ConvSpec spec;
  auto key = guessed_conv_key(node, inputs, &spec);
  if (!key.ok()) return 1;
  auto handle = cudnn_thread_handle(node);
  if (!handle.ok()) return 1;
  Plan p;
  if (!init_descriptors(node, spec, inputs[0].dtype, *key, &p).ok()) return 1;
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> algos{};
  int found = 0;
  if (!query_algos(node, *handle, p, &algos, &found).ok()) return 1;
  return std::max(1, std::min(found, kMaxHeuristics));
}

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (!conv_handles_op(node) || !check_types(node, inputs).ok()) return out;
  int n = heuristic_count(node, inputs);
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<CudnnConvTactic>(i));
  return out;
}

// "cuda.cudnn.conv.<i>" with 0 <= i < kMaxHeuristics; params empty or {1, i}.
std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  const int index = conv_tactic_index(name, kPrefix, kMaxHeuristics, params);
  return index < 0 ? nullptr : std::make_unique<CudnnConvTactic>(index);
}

}  // namespace

TacticFamily cudnn_conv_family() { return TacticFamily{"cudnn.conv", candidates, create}; }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN
