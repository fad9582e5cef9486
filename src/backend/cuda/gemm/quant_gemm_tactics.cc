// Copyright ingot authors. Apache-2.0.
//
// cuBLASLt tactics for ingot::QuantGemm (Y = act(x_scale * w_scale[n] * X.W^T + B[n]), X
// [..., K] and W [N, K] both int8 or both float8e4m3fn): one cublasLtMatmul each, in the TN form
// IMMA and FP8 kernels require. Row-major through the column-major library: cuBLASLt's D (N x M)
// = op(A) op(B) with A our W ([N,K] row-major = column-major K x N, lda = K, transa = T) and B
// our X (column-major K x M, ldb = K, transb = N); D is our Y (ldd = N), so the epilogue bias
// (one value per row of D) is our per-N bias. The leading dims of X fold into M.
//
//  - "cuda.quant_gemm.cublaslt_fp8": compute 32F, scale type 32F, C and D of Y's type; w_scale
//    and x_scale are cuBLASLt's A_SCALE_POINTER and B_SCALE_POINTER (device scalars, so per-tensor
//    only), D = scale_A scale_B (A B) + C + bias with the residual R as C (beta 1) when there is one. The bias rides in the epilogue when it has Y's type
//    and Y is fp16/bf16 (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: the bias has D's type
//    except for fp8 kernels with an fp32 D, which the cuBLAS docs' fp8 table settles; PyTorch's
//    _scaled_mm allows exactly these two and no bias for an fp32 D); Relu and GeluTanh
//    (cuBLASLt's GELU is the tanh form) ride with it when cuBLASLt has an algorithm for that.
//    Anything else -- an fp32 Y with a bias, a bias of another type, the other activations --
//    runs after the GEMM in our epilogue kernel, in place on Y (bias, then the activation): one
//    more pass over Y, no buffer. cuBLASLt's fp8 kernels
//    want 16-byte aligned pointers and leading dims (K % 16, N * sizeof(Y) % 16, checked in
//    supports(); pointers at enqueue) and sm_89+; FAST_ACCUM stays off (the exact fp32 sum).
//  - "cuda.quant_gemm.cublaslt_int8": compute 32I, scale type 32I (alpha 1, beta 0), D int32 in
//    the workspace after cuBLASLt's scratch (M * N * 4 bytes more), then our epilogue kernel
//    writes Y = act(acc * x_scale * w_scale[n or 0] + B[n] + R) in Y's type: per-tensor or
//    per-channel w_scale, any bias type, every activation. K % 4 == 0 (IMMA's leading dims).
//
// With y_scale (the next layer's QuantizeLinear taken in) Y is int8 or fp8: the int8 kind's
// epilogue quantizes from the accumulators, the fp8 kind's from an fp16 D in the workspace.
//
// Refused in supports() (another tactic or the host fallback runs them): fp8 with a per-channel
// w_scale, shapes that break the alignment rules above, W without a known [N, K], a bias that
// is not [N], missing activation_params (Clip, LeakyRelu, HardSigmoid). When a device is present,
// candidates() also asks cuBLASLt for an algorithm at the node's shapes (unknown dims as 64),
// so a combination the library lacks on this GPU is not offered; at enqueue, a shape without an
// algorithm or a misaligned pointer is a kUnsupported Status naming the node, never a crash.
//
// Descriptors and the algorithm depend on the shapes, so each tactic keeps a small cache of
// plans keyed by shapes and pointer alignments; the matmul descriptor (which holds the bias and
// scale pointers) is built on the stack per launch, so enqueue allocates nothing once a shape
// has been seen (as cublaslt_tactics.cc does).
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/env_switch.h"
#include "backend/cuda/gemm/cublaslt_common.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/plan_cache.h"
#include "backend/cuda/quant/quant_kernels.h"
#ifdef INGOT_WITH_CUTLASS
#include "backend/cuda/gemm/cutlass_int8_gemm.h"
#endif

namespace ingot::backend::cuda {

namespace {

constexpr uint64_t kLtWorkspaceBytes = 32ull << 20;  // cuBLASLt's recommendation for Hopper
constexpr const char* kFp8Name = "cuda.quant_gemm.cublaslt_fp8";
constexpr const char* kInt8Name = "cuda.quant_gemm.cublaslt_int8";
constexpr const char* kCutlassInt8Name = "cuda.quant_gemm.cutlass_int8";
constexpr const char* kCutlassConvName = "cuda.quant_conv.cutlass_int8_1x1";
constexpr const char* kCutlassInt8PingpongName = "cuda.quant_gemm.cutlass_int8_pingpong";
constexpr uint8_t kParamsVersion = 1;


enum class Kind : uint8_t { kFp8, kInt8 };

DataType quantized_type(Kind k) { return k == Kind::kFp8 ? DataType::kFloat8E4M3FN : DataType::kInt8; }

// What the node asks for, before any shape is known.
struct Spec {
  UnaryOp act = UnaryOp::kIdentity;
  UnaryParams act_params;
  bool has_bias = false;
  bool has_residual = false;
  bool has_y_scale = false;  // a quantized Y (int8 / fp8): the next layer's QuantizeLinear taken in
};

Result<Spec> parse_spec(const ir::Node& node) {
  if (node.domain() != "ingot" || node.op_type() != "QuantGemm") return unsupported(node.describe(), ": not a QuantGemm");
  Spec s;
  s.has_bias = node.input(4) != nullptr;
  s.has_residual = node.inputs().size() > 5 && node.input(5) != nullptr;
  s.has_y_scale = node.inputs().size() > 6 && node.input(6) != nullptr;
  const ir::Attributes& at = node.attrs();
  const std::string act = at.get_string("activation", "");
  const std::vector<float> ap = at.get_floats("activation_params");
  auto need = [&](size_t n) -> Status {
    if (ap.size() < n)
      return unsupported(node.describe(), ": activation ", act, " needs ", n, " activation_params, got ", ap.size());
    return Status::Ok();
  };
  if (act.empty()) s.act = UnaryOp::kIdentity;
  else if (act == "Relu") s.act = UnaryOp::kRelu;
  else if (act == "GeluTanh") s.act = UnaryOp::kGeluTanh;
  else if (act == "Gelu") s.act = UnaryOp::kGelu;
  else if (act == "Tanh") s.act = UnaryOp::kTanh;
  else if (act == "Sigmoid") s.act = UnaryOp::kSigmoid;
  else if (act == "Silu") s.act = UnaryOp::kSilu;
  else if (act == "HardSwish") s.act = UnaryOp::kHardSwish;
  else if (act == "LeakyRelu") {
    INGOT_RETURN_IF_ERROR(need(1));
    s.act = UnaryOp::kLeakyRelu;
    s.act_params.alpha = ap[0];
  } else if (act == "HardSigmoid") {
    INGOT_RETURN_IF_ERROR(need(2));
    s.act = UnaryOp::kHardSigmoid;
    s.act_params.alpha = ap[0];
    s.act_params.beta = ap[1];
  } else if (act == "Clip") {
    INGOT_RETURN_IF_ERROR(need(2));
    s.act = UnaryOp::kClip;
    s.act_params.lo = ap[0];
    s.act_params.hi = ap[1];
  } else {
    return unsupported(node.describe(), ": activation '", act, "'");
  }
  return s;
}

// Activations cuBLASLt's epilogue has: Relu, and GeluTanh (its GELU is the tanh approximation).
bool lt_has_act(UnaryOp a) { return a == UnaryOp::kRelu || a == UnaryOp::kGeluTanh; }

cublasLtEpilogue_t lt_epilogue(UnaryOp act, bool bias) {
  switch (act) {
    case UnaryOp::kRelu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case UnaryOp::kGeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

cudaDataType_t float_cuda_type(DataType t) {
  switch (t) {
    case DataType::kFloat16: return CUDA_R_16F;
    case DataType::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

bool is_quantized_out(DataType t) { return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN; }

// What cuBLASLt writes for a Y of type y: Y itself, or for a quantized Y an fp16 temporary (the
// fp8 kind; the int8 kind writes int32 accumulators either way) that our epilogue quantizes.
DataType gemm_out_type(DataType y) { return is_quantized_out(y) ? DataType::kFloat16 : y; }

bool is_float_out(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Whether the fp8 GEMM takes the bias in its epilogue: of Y's type, Y fp16 or bf16.
bool fp8_bias_in_epilogue(DataType y, DataType bias) { return bias == y && y != DataType::kFloat32; }



// The GEMM in our terms: X [M, K] (leading dims folded), W [N, K], Y [M, N].
struct Problem {
  int64_t m = 0, n = 0, k = 0;
};

Result<Problem> plan_problem(const ir::Node& node, const Shape64& x, const Shape64& w) {
  if (w.size() != 2 || x.empty())
    return invalid_argument(node.describe(), ": X ", shape_to_string(x), " and W ", shape_to_string(w),
                            " are not [..., K] and [N, K]");
  if (x.back() != w[1])
    return invalid_argument(node.describe(), ": X has K = ", x.back(), ", W ", shape_to_string(w), " has ", w[1]);
  Problem p;
  p.n = w[0];
  p.k = w[1];
  p.m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) p.m *= x[i];
  return p;
}

// The per-shape part of a launch: immutable once built.
struct PlanKey {
  const ir::Node* node = nullptr;
  int64_t m = 0, n = 0, k = 0;
  DataType y = DataType::kFloat32;
  DataType bias = DataType::kUndefined;  // kUndefined: no bias in the epilogue
  bool post_bias = false;                // a bias our kernel adds after the GEMM (so no fused activation)
  std::array<uint32_t, 4> align{};       // W, X, D (and C: the residual's when there is one), bias
  bool operator==(const PlanKey& o) const {
    return node == o.node && m == o.m && n == o.n && k == o.k && y == o.y && bias == o.bias &&
           post_bias == o.post_bias && align == o.align;
  }
};

struct Plan {
  PlanKey key;
  cublasLtMatrixLayoutOpaque_t lt_a{}, lt_b{}, lt_d{};  // lt_d also describes C
  cublasLtMatmulAlgo_t algo{};
  bool bias_fused = false;  // the bias rides in cuBLASLt's epilogue
  bool act_fused = false;   // so does the activation
};

// The matmul descriptor: types, TN, and for fp8 the epilogue and the scale pointers.
Status init_desc(const ir::Node& node, Kind kind, const Spec& spec, bool bias_fused, bool act_fused,
                 DataType bias_type, const void* bias, const void* w_scale, const void* x_scale,
                 cublasLtMatmulDescOpaque_t* desc) {
  if (kind == Kind::kFp8) {
    INGOT_CUBLAS_CHECK(cublasLtMatmulDescInit(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), node);
  } else {
    INGOT_CUBLAS_CHECK(cublasLtMatmulDescInit(desc, CUBLAS_COMPUTE_32I, CUDA_R_32I), node);
  }
  const cublasOperation_t op_a = CUBLAS_OP_T, op_b = CUBLAS_OP_N;
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), node);
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), node);
  if (kind == Kind::kInt8) return Status::Ok();
  const cublasLtEpilogue_t epi = lt_epilogue(act_fused ? spec.act : UnaryOp::kIdentity, bias_fused);
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), node);
  if (bias_fused) {
    const int32_t bt = static_cast<int32_t>(float_cuda_type(bias_type));
    INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)),
                       node);
    if (bias)
      INGOT_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), node);
  }
  // cuBLASLt's A is our W, its B our X (the header comment).
  if (w_scale)
    INGOT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)), node);
  if (x_scale)
    INGOT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)), node);
  return Status::Ok();
}

// Layouts and an algorithm for key. fp8: the fused bias and activation if cuBLASLt has an
// algorithm with them, else without the activation, else with neither (our kernel does the rest).
// The pointers (bias, scales) may be null for a query ahead of any data.
Status build_plan(const ir::Node& node, Kind kind, const Spec& spec, cublasLtHandle_t handle, const PlanKey& key,
                  const void* bias, const void* w_scale, const void* x_scale, Plan* plan) {
  plan->key = key;
  const cudaDataType_t q = kind == Kind::kFp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
  const cudaDataType_t d = kind == Kind::kFp8 ? float_cuda_type(key.y) : CUDA_R_32I;
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  INGOT_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan->lt_a, q, u(key.k), u(key.n), key.k), node);
  INGOT_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan->lt_b, q, u(key.k), u(key.m), key.k), node);
  INGOT_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan->lt_d, d, u(key.n), u(key.m), key.n), node);

  cublasLtMatmulPreferenceOpaque_t pref;
  INGOT_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(&pref), node);
  uint64_t ws = kLtWorkspaceBytes;
  INGOT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), node);
  const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  const uint32_t aligns[4] = {key.align[0], key.align[1], key.align[2], key.align[2]};
  for (int i = 0; i < 4; ++i)
    INGOT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, align_attrs[i], &aligns[i], sizeof(aligns[i])),
                       node);

  const bool bias_wanted = key.bias != DataType::kUndefined;
  const bool act_wanted = lt_has_act(spec.act) && !key.post_bias;  // the activation comes after the bias
  // (bias fused, activation fused) to try in order; int8 fuses nothing.
  std::array<std::array<bool, 2>, 3> tries = {{{bias_wanted, act_wanted}, {bias_wanted, false}, {false, false}}};
  Status last = Status::Ok();
  for (const auto& t : tries) {
    if (kind == Kind::kInt8 && (t[0] || t[1])) continue;
    if (bias_wanted && !t[0] && t[1]) continue;  // the activation comes after the bias
    cublasLtMatmulDescOpaque_t desc;
    INGOT_RETURN_IF_ERROR(init_desc(node, kind, spec, t[0], t[1], key.bias, bias, w_scale, x_scale, &desc));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, &desc, &plan->lt_a, &plan->lt_b, &plan->lt_d,
                                                             &plan->lt_d, &pref, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      plan->algo = result.algo;
      plan->bias_fused = t[0];
      plan->act_fused = t[1];
      return Status::Ok();
    }
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
      last = internal_error(node.describe(), ": cublasLtMatmulAlgoGetHeuristic failed: ", cublasLtGetStatusString(st));
  }
  if (!last.ok()) return last;
  return unsupported(node.describe(), ": cuBLASLt has no ", kind == Kind::kFp8 ? "fp8 (sm_89+)" : "int8",
                     " algorithm for M=", key.m, " N=", key.n, " K=", key.k, " with ", data_type_name(key.y),
                     " output and alignments W ", key.align[0], ", X ", key.align[1], ", D ", key.align[2]);
}

// What supports() checks: types, known [N, K], scales and bias shapes, the kind's alignment rules.
Status check_node(const ir::Node& node, Kind kind, const std::vector<ir::TensorType>& in) {
  INGOT_ASSIGN_OR_RETURN(Spec spec, parse_spec(node));
  const char* what = kind == Kind::kFp8 ? "fp8" : "int8";
  if (in.size() < 4 || !node.output(0)) return unsupported(node.describe(), ": needs X, W, x_scale, w_scale and Y");
  const DataType q = quantized_type(kind);
  if (in[0].dtype != q || in[1].dtype != q)
    return unsupported(node.describe(), ": the ", what, " tactic takes X and W of ", data_type_name(q), ", got ",
                       data_type_name(in[0].dtype), " and ", data_type_name(in[1].dtype));
  if (in[2].dtype != DataType::kFloat32 || in[3].dtype != DataType::kFloat32)
    return unsupported(node.describe(), ": x_scale and w_scale must be float32");
  const DataType y = node.output(0)->dtype();
  if (spec.has_y_scale ? !is_quantized_out(y) : !is_float_out(y))
    return unsupported(node.describe(), ": output ", data_type_name(y));
  if (spec.has_y_scale && (in.size() < 7 || in[6].dtype != DataType::kFloat32 ||
                           !(in[6].shape.rank_known() && in[6].shape.rank() <= 1)))
    return unsupported(node.describe(), ": y_scale must be one float32 value");
  const bool bias = spec.has_bias && in.size() > 4 && in[4].dtype != DataType::kUndefined;
  if (bias && !is_float_out(in[4].dtype)) return unsupported(node.describe(), ": bias ", data_type_name(in[4].dtype));
  if (spec.has_residual && (in.size() < 6 || in[5].dtype != y))
    return unsupported(node.describe(), ": the residual must have the output's type ", data_type_name(y));
  const ir::Shape& w = in[1].shape;
  if (!w.rank_known() || w.rank() != 2 || !w[0].is_known() || !w[1].is_known() || w[0].value() <= 0 ||
      w[1].value() <= 0)
    return unsupported(node.describe(), ": W must be [N, K] with known N, K > 0, got ", w.to_string());
  const int64_t n = w[0].value(), k = w[1].value();
  const ir::Shape& x = in[0].shape;
  if (!x.rank_known() || x.rank() < 1) return unsupported(node.describe(), ": X of unknown rank");
  if (x[x.rank() - 1].is_known() && x[x.rank() - 1].value() != k)
    return unsupported(node.describe(), ": X ", x.to_string(), " vs W ", w.to_string());
  auto numel_is = [](const ir::Shape& s, int64_t v) {
    if (!s.rank_known() || s.rank() > 1) return false;
    return s.rank() == 0 ? v == 1 : s[0].is_known() && s[0].value() == v;
  };
  if (!numel_is(in[2].shape, 1)) return unsupported(node.describe(), ": x_scale must be one value");
  if (!numel_is(in[3].shape, 1) && (kind == Kind::kFp8 || !numel_is(in[3].shape, n)))
    return unsupported(node.describe(), ": w_scale ", in[3].shape.to_string(),
                       kind == Kind::kFp8 ? " is not one value (cuBLASLt's fp8 scales are per tensor)"
                                          : " is neither one value nor [N]");
  if (bias && !(in[4].shape.rank_known() && in[4].shape.rank() == 1 && numel_is(in[4].shape, n)))
    return unsupported(node.describe(), ": bias ", in[4].shape.to_string(), " is not [", n, "]");
  if (kind == Kind::kFp8) {
    const int64_t esize = static_cast<int64_t>(storage_bytes(gemm_out_type(y), 1));
    if (k % 16 != 0 || (n * esize) % 16 != 0)
      return unsupported(node.describe(), ": fp8 GEMMs need K % 16 == 0 and N * ", esize,
                         " bytes % 16 == 0 (cuBLASLt's 16-byte alignment), got K = ", k, ", N = ", n);
    const DeviceInfo dev = current_device_info();
    if (dev.cc != 0 && dev.cc < 89)
      return unsupported(node.describe(), ": fp8 GEMMs need sm_89 or newer, the device is sm_", dev.cc);
  } else if (k % 4 != 0) {
    return unsupported(node.describe(), ": int8 GEMMs need K % 4 == 0, got K = ", k);
  }
  return Status::Ok();
}

class QuantGemmTactic final : public Tactic {
 public:
  explicit QuantGemmTactic(Kind kind) : kind_(kind) {}

  std::string name() const override { return kind_ == Kind::kFp8 ? kFp8Name : kInt8Name; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    return check_node(node, kind_, inputs).ok();
  }

  uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& in) const override {
    const bool quantized_y = node.inputs().size() > 6 && node.input(6) != nullptr;
    if ((kind_ == Kind::kFp8 && !quantized_y) || in.size() < 2) return kLtWorkspaceBytes;
    auto p = plan_problem(node, in[0], in[1]);
    if (!p.ok()) return kLtWorkspaceBytes;
    // cuBLASLt's scratch, then the int32 accumulators or (fp8, quantized Y) the fp16 temporary.
    const uint64_t elem = kind_ == Kind::kInt8 ? sizeof(int32_t) : 2;
    return kLtWorkspaceBytes + static_cast<uint64_t>(p->m * p->n) * elem;
  }

  Status prepare(const ir::Node& node) override { return cublaslt_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    if (!io.node) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(Spec spec, parse_spec(node));
    auto input = [&](size_t i) -> const Tensor* { return i < io.inputs.size() ? io.inputs[i] : nullptr; };
    const Tensor* x = input(0);
    const Tensor* w = input(1);
    const Tensor* xs = input(2);
    const Tensor* ws = input(3);
    const Tensor* b = input(4);
    const Tensor* r = spec.has_residual ? input(5) : nullptr;
    const Tensor* ysc = spec.has_y_scale ? input(6) : nullptr;
    if (!x || !w || !xs || !ws || !io.outputs || io.outputs->empty())
      return invalid_argument(node.describe(), ": missing X, W, x_scale, w_scale or Y");
    Tensor& y = (*io.outputs)[0];
    const DataType q = quantized_type(kind_);
    const DataType yd = gemm_out_type(y.dtype());  // what cuBLASLt's D holds (fp8 kind)
    FloatType yt, bt = FloatType::kF32;
    if (x->dtype() != q || w->dtype() != q || xs->dtype() != DataType::kFloat32 ||
        ws->dtype() != DataType::kFloat32 || !to_float_type(yd, &yt) || (b && !to_float_type(b->dtype(), &bt)) ||
        (spec.has_y_scale != is_quantized_out(y.dtype())) ||
        (ysc && (ysc->dtype() != DataType::kFloat32 || ysc->numel() != 1)))
      return internal_error(node.describe(), ": types do not match the tactic ", name());
    INGOT_ASSIGN_OR_RETURN(Problem p, plan_problem(node, x->shape(), w->shape()));
    if (y.numel() != p.m * p.n)
      return internal_error(node.describe(), ": output ", shape_to_string(y.shape()), " holds ", y.numel(),
                            " elements, the GEMM writes ", p.m * p.n);
    const bool per_channel = ws->numel() != 1;
    if (xs->numel() != 1 || (per_channel && (kind_ == Kind::kFp8 || ws->numel() != p.n)))
      return invalid_argument(node.describe(), ": x_scale has ", xs->numel(), " values (1 wanted), w_scale ",
                              ws->numel(), kind_ == Kind::kFp8 ? " (1 wanted: fp8 scales are per tensor)" : " (1 or N wanted)");
    if (b && b->numel() != p.n) return invalid_argument(node.describe(), ": bias has ", b->numel(), " values, N is ", p.n);
    if (spec.has_residual && (!r || r->dtype() != y.dtype() || r->numel() != y.numel()))
      return invalid_argument(node.describe(), ": the residual must be a tensor of Y's type and size");
    if (y.numel() == 0) return Status::Ok();
    if (p.k == 0) return unsupported(node.describe(), ": K = 0");
    if (!io.workspace) return internal_error(node.describe(), ": no workspace");

    INGOT_ASSIGN_OR_RETURN(cublasLtHandle_t handle, cublaslt_handle(node));
    const cudaStream_t stream = static_cast<cudaStream_t>(io.stream);
    void* d = kind_ == Kind::kFp8 && !ysc ? y.mutable_raw() : static_cast<char*>(io.workspace) + kLtWorkspaceBytes;
    PlanKey key{&node, p.m, p.n, p.k, yd, DataType::kUndefined, false, {}};
    if (kind_ == Kind::kFp8 && b && fp8_bias_in_epilogue(yd, b->dtype())) key.bias = b->dtype();
    key.post_bias = b && key.bias == DataType::kUndefined;
    const void* bias_ptr = key.bias != DataType::kUndefined ? b->raw() : nullptr;
    // fp8: the residual is cuBLASLt's C (beta 1), laid out as D; int8 adds it in our epilogue.
    const void* c = kind_ == Kind::kFp8 && r ? r->raw() : d;
    key.align = {alignment_of(w->raw()), alignment_of(x->raw()), std::min(alignment_of(d), alignment_of(c)),
                 bias_ptr ? alignment_of(bias_ptr) : 256u};
    if (kind_ == Kind::kFp8 && (key.align[0] < 16 || key.align[1] < 16 || key.align[2] < 16))
      return unsupported(node.describe(), ": fp8 GEMMs need 16-byte aligned W, X and Y, got alignments ",
                         key.align[0], ", ", key.align[1], ", ", key.align[2]);

    const Plan* plan = cache_.find(key);
    std::unique_ptr<Plan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<Plan>();
      INGOT_RETURN_IF_ERROR(build_plan(node, kind_, spec, handle, key, bias_ptr, ws->raw(), xs->raw(), local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    cublasLtMatmulDescOpaque_t desc;
    INGOT_RETURN_IF_ERROR(init_desc(node, kind_, spec, plan->bias_fused, plan->act_fused, key.bias, bias_ptr,
                                    ws->raw(), xs->raw(), &desc));
    // cuBLASLt's API takes non-const layout handles; it does not write them.
    auto* lt_a = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_a);
    auto* lt_b = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_b);
    auto* lt_d = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_d);
    const float alpha_f = 1.0f, beta_f = c != d ? 1.0f : 0.0f;
    const int32_t alpha_i = 1, beta_i = 0;
    const void* alpha = kind_ == Kind::kFp8 ? static_cast<const void*>(&alpha_f) : &alpha_i;
    const void* beta = kind_ == Kind::kFp8 ? static_cast<const void*>(&beta_f) : &beta_i;
    INGOT_CUBLAS_CHECK(cublasLtMatmul(handle, &desc, alpha, w->raw(), lt_a, x->raw(), lt_b, beta, c, lt_d, d, lt_d,
                                      &plan->algo, io.workspace, kLtWorkspaceBytes, stream),
                       node);

    // The rest of the epilogue in our kernel: int8 all of it, from the accumulators; fp8 what
    // cuBLASLt's did not take, in place on Y.
    QuantGemmEpilogue e;
    e.rows = p.m;
    e.cols = p.n;
    if (kind_ == Kind::kInt8) {
      e.x_scale = static_cast<const float*>(xs->raw());
      e.w_scale = static_cast<const float*>(ws->raw());
      e.w_per_channel = per_channel;
    }
    if (kind_ == Kind::kInt8 && r) e.residual = r->raw();
    if (b && !plan->bias_fused) {
      e.bias = b->raw();
      e.bias_type = bt;
    }
    if (!plan->act_fused) {
      e.act = spec.act;
      e.act_params = spec.act_params;
    }
    if (ysc) {  // the next layer's QuantizeLinear: from D (int32 or the fp16 temporary) to Y
      e.y_scale = static_cast<const float*>(ysc->raw());
      INGOT_CUDA_CHECK(launch_quant_gemm_epilogue_quantized(
          d, kind_ == Kind::kInt8, yt, y.dtype() == DataType::kInt8 ? QuantType::kInt8 : QuantType::kFloat8E4M3FN,
          y.mutable_raw(), e, stream));
    } else if (kind_ == Kind::kInt8 || e.bias || e.act != UnaryOp::kIdentity) {
      INGOT_CUDA_CHECK(launch_quant_gemm_epilogue(d, kind_ == Kind::kInt8, yt, y.mutable_raw(), e, stream));
    }
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {kParamsVersion}; }

 private:
  Kind kind_;
  mutable PlanCache<Plan> cache_;
};

// Whether cuBLASLt has an algorithm for the node at its shapes (unknown dims as 64, aligned
// pointers); true when that cannot be asked (no device): the first guess is offered then.
bool has_algorithm(const ir::Node& node, Kind kind, const std::vector<ir::TensorType>& in) {
  constexpr int64_t kGuessDim = 64;
  if (!cuda_device_present()) return true;
  auto spec = parse_spec(node);
  auto handle = cublaslt_handle(node);
  if (!spec.ok() || !handle.ok()) return false;
  Shape64 xs;
  for (const ir::Dim& dim : in[0].shape.dims()) xs.push_back(dim.is_known() ? dim.value() : kGuessDim);
  const Shape64 ws = {in[1].shape[0].value(), in[1].shape[1].value()};
  auto p = plan_problem(node, xs, ws);
  if (!p.ok()) return false;
  const DataType y = gemm_out_type(node.output(0)->dtype());
  PlanKey key{&node, std::max<int64_t>(p->m, 1), p->n, p->k, y, DataType::kUndefined, false, {256, 256, 256, 256}};
  const bool bias = spec->has_bias && in.size() > 4 && in[4].dtype != DataType::kUndefined;
  if (kind == Kind::kFp8 && bias && fp8_bias_in_epilogue(y, in[4].dtype)) key.bias = in[4].dtype;
  key.post_bias = bias && key.bias == DataType::kUndefined;
  Plan plan;
  return build_plan(node, kind, *spec, *handle, key, nullptr, nullptr, nullptr, &plan).ok();
}

#ifdef INGOT_WITH_CUTLASS
// The checks both CUTLASS int8 layers share: N and K multiples of 16, a per-channel w_scale [N] (a
// per-tensor one stays with cuBLASLt / cuDNN), the bias fp16 beside an fp16 Y and float32 beside an
// int8 one (as the precision pass leaves them), and a compute capability 9.0 device (sm90a
// kernels), or none when building for one.
bool cutlass_int8_shared(const std::vector<ir::TensorType>& in, int64_t n, int64_t k, bool has_bias, bool quant_y) {
  if (n % 16 != 0 || k % 16 != 0 || n <= 1) return false;
  const ir::Shape& ws = in[3].shape;
  if (!(ws.rank_known() && ws.rank() == 1 && ws[0].is_known() && ws[0].value() == n)) return false;
  if (has_bias && (in.size() <= 4 || in[4].dtype != (quant_y ? DataType::kFloat32 : DataType::kFloat16))) return false;
  const DeviceInfo dev = current_device_info();
  return dev.cc == 0 || dev.cc == 90;
}

// "cuda.quant_gemm.cutlass_int8": the int8 GEMM with the whole epilogue in the kernel
// (cutlass_int8_gemm.h), for the three forms BERT-like layers take: Y fp16 = scaled sums + bias
// (the QKV projection), + bias + residual (the output projection, FFN2), and int8 = Gelu(scaled
// sums + bias) / y_scale (FFN1, quantized for FFN2). Per-channel w_scale [N] only (a per-tensor
// scale stays with the cuBLASLt tactic), an fp16 residual, and the shared checks above; the
// autotuner times it against cuBLASLt's.
bool cutlass_int8_form(const ir::Node& node, const std::vector<ir::TensorType>& in, CutlassInt8Epilogue* form) {
  if (!check_node(node, Kind::kInt8, in).ok()) return false;
  auto spec = parse_spec(node);
  if (!spec.ok()) return false;
  const DataType y = node.output(0)->dtype();
  const int64_t n = in[1].shape[0].value(), k = in[1].shape[1].value();
  if (!cutlass_int8_shared(in, n, k, spec->has_bias, spec->has_y_scale)) return false;
  if (spec->has_y_scale) {
    if (y != DataType::kInt8 || spec->act != UnaryOp::kGelu || spec->has_residual) return false;
    *form = CutlassInt8Epilogue::kBiasGeluQuant;
    return true;
  }
  if (y != DataType::kFloat16 || spec->act != UnaryOp::kIdentity) return false;
  *form = spec->has_residual ? CutlassInt8Epilogue::kBiasResidual : CutlassInt8Epilogue::kBias;
  return true;
}

// "cuda.quant_conv.cutlass_int8_1x1": a channels-last int8 ingot::QuantConv that is one GEMM
// (conv_is_gemm: a 1x1 kernel, stride 1, no padding, one group; a ResNet bottleneck's first and last
// convs) as the CUTLASS int8 GEMM over its pixels: X [N, H, W, C] is A [N·H·W, C], W [M, 1, 1, C]
// is B [M, C]. Relu, a
// per-channel w_scale [M] and an fp16 bias (or none), in the forms a block has (cutlass_int8_gemm.h):
// quantized for the next conv with no residual, with an fp16 residual (a downsample's output) or an
// int8 one with r_scale (the previous block's output); or fp16 out of an int8 residual (the last
// block). The other QuantConvs stay with cuDNN, which the autotuner times it against.
bool cutlass_conv_form(const ir::Node& node, const std::vector<ir::TensorType>& in, CutlassInt8Epilogue* form) {
  if (node.op_type() != "QuantConv" || !conv_is_gemm(node) || !node.output(0) || in.size() < 4) return false;
  if (node.attrs().get_string("activation", "") != "Relu") return false;
  if (in[0].dtype != DataType::kInt8 || in[1].dtype != DataType::kInt8 || in[2].dtype != DataType::kFloat32 ||
      in[3].dtype != DataType::kFloat32)
    return false;
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;
  const ir::Dim& c = w[w.rank() - 1];
  if (!w[0].is_known() || !c.is_known() || !x[x.rank() - 1].provably_equal(c)) return false;
  if (!(in[2].shape.rank_known() && in[2].shape.rank() <= 1)) return false;
  const bool quant = node.inputs().size() > 6 && node.input(6);
  if (!cutlass_int8_shared(in, w[0].value(), c.value(), node.input(4) != nullptr, quant)) return false;
  const bool res = node.inputs().size() > 5 && node.input(5);
  const bool res8 = res && node.inputs().size() > 7 && node.input(7) && in.size() > 5 && in[5].dtype == DataType::kInt8;
  const DataType y = node.output(0)->dtype();
  if (res && !res8 && (in.size() <= 5 || in[5].dtype != DataType::kFloat16)) return false;
  if (quant) {
    if (y != DataType::kInt8) return false;
    *form = !res ? CutlassInt8Epilogue::kBiasReluQuant
            : res8 ? CutlassInt8Epilogue::kBiasResidual8ReluQuant
                   : CutlassInt8Epilogue::kBiasResidualReluQuant;
    return true;
  }
  if (y != DataType::kFloat16 || !res8) return false;
  *form = CutlassInt8Epilogue::kBiasResidual8Relu;
  return true;
}

// The GEMM of the layers the two CUTLASS tactics take: QuantGemm's X [..., K] and W [N, K]; a 1x1
// QuantConv's X [N, spatial..., C] and W [M, 1, ..., 1, C], over its pixels (conv_gemm_sizes).
struct CutlassGemmLayer {
  static constexpr const char* kName = kCutlassInt8Name;
  static bool form(const ir::Node& n, const std::vector<ir::TensorType>& in, CutlassInt8Epilogue* f) {
    return cutlass_int8_form(n, in, f);
  }
  static Result<Problem> sizes(const ir::Node& n, const Shape64& x, const Shape64& w) { return plan_problem(n, x, w); }
};
struct CutlassConvLayer {
  static constexpr const char* kName = kCutlassConvName;
  static bool form(const ir::Node& n, const std::vector<ir::TensorType>& in, CutlassInt8Epilogue* f) {
    return cutlass_conv_form(n, in, f);
  }
  static Result<Problem> sizes(const ir::Node& n, const Shape64& x, const Shape64& w) {
    INGOT_ASSIGN_OR_RETURN(ConvGemmSizes g, conv_gemm_sizes(n, x, w));
    return Problem{g.m, g.n, g.k};
  }
};

// Whether the ping-pong int8 GEMM is a candidate: yes, unless INGOT_CUTLASS_INT8_PINGPONG=0 (to compare
// or rule it out). It was offered only with =1 until its GPU test (CudaQuantGemmTest.
// CutlassInt8FormsMatchReference) ran on a device: it passed on an H100 in session 41 (2026-12-07).
// Read at each call; engines that chose it load either way (create() knows the name).
bool int8_pingpong_offered() { return !env_is("INGOT_CUTLASS_INT8_PINGPONG", "0"); }

// A CUTLASS int8 GEMM tactic for the layers `Layer` takes (the forms of cutlass_int8_gemm.h): the
// inputs are QuantGemm's and QuantConv's alike (X, W, x_scale, w_scale, [B], [R], [y_scale], [r_scale]).
// The ping-pong schedule (QuantGemm only: "cuda.quant_gemm.cutlass_int8_pingpong") is a second
// candidate beside the cooperative one; the autotuner keeps the faster.
template <class Layer>
class CutlassInt8Tactic final : public Tactic {
 public:
  explicit CutlassInt8Tactic(CutlassInt8Schedule schedule = CutlassInt8Schedule::kCooperative)
      : schedule_(schedule) {}
  std::string name() const override {
    return schedule_ == CutlassInt8Schedule::kPingpong ? kCutlassInt8PingpongName : Layer::kName;
  }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    CutlassInt8Epilogue form;
    if (!Layer::form(node, inputs, &form)) return false;
    return schedule_ == CutlassInt8Schedule::kCooperative || cutlass_int8_gemm_form(form);
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (!io.node) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    CutlassInt8Epilogue form;
    if (!Layer::form(node, node_input_types(node), &form))
      return internal_error(node.describe(), ": not a form of ", name());
    auto input = [&](size_t i) -> const Tensor* { return i < io.inputs.size() ? io.inputs[i] : nullptr; };
    const Tensor* x = input(0);
    const Tensor* w = input(1);
    if (!x || !w || !input(2) || !input(3) || !io.outputs || io.outputs->empty())
      return invalid_argument(node.describe(), ": missing X, W, x_scale, w_scale or Y");
    Tensor& y = (*io.outputs)[0];
    INGOT_ASSIGN_OR_RETURN(Problem p, Layer::sizes(node, x->shape(), w->shape()));
    if (y.numel() != p.m * p.n || input(3)->numel() != p.n)
      return internal_error(node.describe(), ": output or w_scale sizes do not match the GEMM");
    if (y.numel() == 0) return Status::Ok();
    if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX)
      return unsupported(node.describe(), ": a dimension exceeds int32");
    CutlassInt8GemmProblem cp;
    cp.m = static_cast<int>(p.m);
    cp.n = static_cast<int>(p.n);
    cp.k = static_cast<int>(p.k);
    cp.a = x->raw();
    cp.b = w->raw();
    cp.x_scale = static_cast<const float*>(input(2)->raw());
    cp.w_scale = static_cast<const float*>(input(3)->raw());
    cp.bias = input(4) ? input(4)->raw() : nullptr;
    if (const Tensor* r = input(5)) {
      if (r->numel() != y.numel()) return invalid_argument(node.describe(), ": the residual's size differs from Y's");
      cp.c = r->raw();
      cp.ldc = p.n;
    }
    if (const Tensor* ys = input(6)) cp.y_scale = static_cast<const float*>(ys->raw());
    if (const Tensor* rs = input(7)) cp.r_scale = static_cast<const float*>(rs->raw());
    cp.d = y.mutable_raw();
    cp.lda = p.k;
    cp.ldb = p.k;
    cp.ldd = p.n;
    cp.sm_count = current_device_info().sm_count;
    const CutlassGemmStatus st =
        launch_cutlass_int8_gemm(form, cp, nullptr, 0, static_cast<cudaStream_t>(io.stream), schedule_);
    if (st == CutlassGemmStatus::kCannotImplement)
      return unsupported(node.describe(), ": ", name(), " cannot take M=", p.m, " N=", p.n, " K=", p.k,
                         " (pointers must be 16-byte aligned)");
    if (st != CutlassGemmStatus::kOk)
      return internal_error(node.describe(), ": ", name(), ": ", cutlass_gemm_status_name(st));
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {kParamsVersion}; }

 private:
  CutlassInt8Schedule schedule_;
};
#endif

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
#ifdef INGOT_WITH_CUTLASS
  if (node.domain() == "ingot" && node.op_type() == "QuantConv") {
    if (auto t = std::make_unique<CutlassInt8Tactic<CutlassConvLayer>>(); t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  }
#endif
  if (node.domain() != "ingot" || node.op_type() != "QuantGemm") return out;
  for (Kind kind : {Kind::kFp8, Kind::kInt8}) {
    auto t = std::make_unique<QuantGemmTactic>(kind);
    if (t->supports(node, inputs) && has_algorithm(node, kind, inputs)) out.push_back(std::move(t));
  }
#ifdef INGOT_WITH_CUTLASS
  for (CutlassInt8Schedule s : {CutlassInt8Schedule::kCooperative, CutlassInt8Schedule::kPingpong}) {
    if (s == CutlassInt8Schedule::kPingpong && !int8_pingpong_offered()) continue;
    if (auto t = std::make_unique<CutlassInt8Tactic<CutlassGemmLayer>>(s); t->supports(node, inputs))
      out.push_back(std::move(t));
  }
#endif
  return out;
}

std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  if (!params.empty() && (params.size() != 1 || params[0] != kParamsVersion)) return nullptr;
  if (name == kFp8Name) return std::make_unique<QuantGemmTactic>(Kind::kFp8);
  if (name == kInt8Name) return std::make_unique<QuantGemmTactic>(Kind::kInt8);
#ifdef INGOT_WITH_CUTLASS
  if (name == kCutlassInt8Name) return std::make_unique<CutlassInt8Tactic<CutlassGemmLayer>>();
  if (name == kCutlassInt8PingpongName)
    return std::make_unique<CutlassInt8Tactic<CutlassGemmLayer>>(CutlassInt8Schedule::kPingpong);
  if (name == kCutlassConvName) return std::make_unique<CutlassInt8Tactic<CutlassConvLayer>>();
#endif
  return nullptr;
}

}  // namespace

TacticFamily quant_gemm_family() { return TacticFamily{"quant_gemm", candidates, create}; }

}  // namespace ingot::backend::cuda
