// Copyright ingot authors. Apache-2.0.
//
// CUTLASS Hopper GEMMs as ingot::FusedGemm tactics: the GEMM, the bias and the exact (erf) Gelu in
// one kernel (cutlass_gemm_kernels.h). cuBLASLt's GELU epilogue is the tanh approximation, so the
// cuBLASLt tactics run exact Gelu as a second pass over the output (at BERT-base batch 64, FFN1
// M 8192 N 3072 K 768: ~74 us GEMM + ~45 us Gelu); here the epilogue computes
// 0.5·x·(1 + erf(x/√2)) in fp32 on the accumulator before the one fp16/bf16 store (96 us there on
// an H200, against 117-122 us for cuBLASLt + Gelu pass and 106-119 us for cuDNN's fused plans). The
// bias-only kernels (activation "") are offered too, for the autotuner to time against cuBLASLt,
// and, for three configs (128x256x64_coop_c1x1, 128x128x64_pingpong_c1x1 and
// 128x192x64_pingpong_c1x1, which has no Gelu kernel), bias + residual without an activation
// (BERT's attention-output projection and FFN2): the residual is CUTLASS's C operand with beta 1,
// D = (acc + bias) + R in fp32, rounded once, as the reference's act(y + bias + R) with no
// activation.
//
// "cuda.cutlass.gemm.<config>" runs one tile configuration (cutlass_gemm_config names it, e.g.
// 128x256x64_coop_c1x1) with the epilogue the node asks for: the name and the params do not
// name the epilogue, so engines written before the residual kernels existed load as they were.
// The family offers at most kMaxCandidates of them per node, ranked by a wave-count estimate at
// the node's shapes (unknown dims taken as kGuessDim) and each config's measured speed, so that
// cuDNN's and cuBLASLt's candidates stay inside the autotuner's width.
//
// Taken: domain ingot, FusedGemm, kind "matmul", alpha 1, no transA/transB, activation "" or
// "Gelu" (the erf form; "GeluTanh" and the others are refused); fp16 or bf16 A [..., M, K]
// (leading dims folded into M), a concrete 2-D B [K, N], an optional bias of N values (beta 1),
// an optional residual (input 3) and Y, all of A's type. The residual is taken only with
// activation "" (with Gelu it is refused, in either order), only of Y's shape [..., M, N] (each
// leading dim the same known size or symbol as A's, then N: contiguous, row stride N, no
// broadcast) and only by the configs that compile that epilogue (see above); Gelu likewise. K
// and N multiples of 8 (16-byte rows, as TMA needs), M, N, K within int32; and a compute
// capability 9.0 device (the kernels are sm90a). Pointers (the residual's
// too) must be 16-byte aligned: enqueue checks and refuses others (the memory planner aligns to
// 256 bytes; a view into the middle of a buffer might not be).
#ifdef INGOT_WITH_CUTLASS

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/gemm/cutlass_gemm_kernels.h"
#include "backend/cuda/core/device_info.h"

namespace ingot::backend::cuda {

TacticFamily cutlass_gemm_family();

namespace {

constexpr const char* kPrefix = "cuda.cutlass.gemm.";
constexpr int kMaxCandidates = 2;
constexpr int64_t kGuessDim = 128;
constexpr uint8_t kParamsVersion = 1;

// The epilogue the node's activation and residual (input 3) map to; false for every activation
// but none and exact Gelu, and for a residual with an activation.
bool epilogue_of(const ir::Node& node, CutlassEpilogue* epilogue) {
  const std::string act = node.attrs().get_string("activation", "");
  const bool residual = node.input(3) != nullptr;
  if (act.empty())
    *epilogue = residual ? CutlassEpilogue::kBiasResidual : CutlassEpilogue::kBias;
  else if (act == "Gelu" && !residual)
    *epilogue = CutlassEpilogue::kBiasGelu;  // "GeluTanh" is the tanh form: refused
  else
    return false;
  return true;
}

// The kernels' element type for `t`; false for every type but fp16 and bf16.
bool gemm_type(DataType t, CutlassGemmType* type) {
  CutlassGemmType g;
  if (t == DataType::kFloat16)
    g = CutlassGemmType::kFloat16;
  else if (t == DataType::kBFloat16)
    g = CutlassGemmType::kBFloat16;
  else
    return false;
  if (type) *type = g;
  return true;
}

bool has_input(const ir::Node& node, const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && node.input(i) != nullptr && in[i].dtype != DataType::kUndefined;
}

// Equal over every binding: the same known size or the same symbol (two unknowns may differ).

/// What the node must be for these tactics (types and shapes from the builder; any device).
bool takes(const ir::Node& node, const std::vector<ir::TensorType>& in, CutlassEpilogue* epilogue) {
  if (node.domain() != "ingot" || node.op_type() != "FusedGemm") return false;
  const ir::Attributes& a = node.attrs();
  if (a.get_string("kind", "gemm") != "matmul" || !epilogue_of(node, epilogue)) return false;
  if (a.get_float("alpha", 1.0f) != 1.0f || a.get_int("transA", 0) != 0 || a.get_int("transB", 0) != 0) return false;
  if (in.size() < 2 || in.size() > 4) return false;
  const bool bias = has_input(node, in, 2);
  const bool residual = *epilogue == CutlassEpilogue::kBiasResidual;
  if (residual != has_input(node, in, 3)) return false;  // a residual without its type
  if (bias && a.get_float("beta", 1.0f) != 1.0f) return false;
  const ir::Value* y = node.output(0);
  const DataType t = in[0].dtype;
  if (!gemm_type(t, nullptr) || in[1].dtype != t || !y || y->dtype() != t) return false;
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;
  if (!x.rank_known() || x.rank() < 1 || !w.is_concrete() || w.rank() != 2) return false;
  const int64_t k = w[0].value(), n = w[1].value();
  if (!x[x.rank() - 1].is_known() || x[x.rank() - 1].value() != k) return false;
  if (k <= 0 || n <= 0 || k % 8 != 0 || n % 8 != 0 || k > INT_MAX || n > INT_MAX) return false;
  if (bias) {
    const ir::TensorType& c = in[2];
    if (c.dtype != t || !c.shape.is_concrete() || c.shape.rank() == 0 || c.shape[c.shape.rank() - 1].value() != n ||
        shape_numel(c.shape.concrete()) != n)
      return false;
  }
  if (residual) {  // Y's shape: A's leading dims, then N (row-major [M, N], ldc N)
    const ir::TensorType& r = in[3];
    if (r.dtype != t || !r.shape.rank_known() || r.shape.rank() != x.rank()) return false;
    for (size_t i = 0; i + 1 < x.rank(); ++i)
      if (!r.shape[i].provably_equal(x[i])) return false;
    const ir::Dim& rn = r.shape[r.shape.rank() - 1];
    if (!rn.is_known() || rn.value() != n) return false;
    const ir::Shape& ys = y->shape();
    if (ys.rank_known()) {  // as inferred (the same, unless a pass left Y's shape stale)
      if (ys.rank() != r.shape.rank()) return false;
      for (size_t i = 0; i < ys.rank(); ++i)
        if (ys[i].is_known() && r.shape[i].is_known() && ys[i].value() != r.shape[i].value()) return false;
    }
  }
  return true;
}

constexpr int64_t kMinRows = 1024;

bool all_leading_dims_known(const ir::Shape& x) {
  for (size_t i = 0; i + 1 < x.rank(); ++i)
    if (!x[i].is_known()) return false;
  return true;
}

// M for ranking and can_implement: the product of A's leading dims, unknown ones as kGuessDim.
int64_t guessed_m(const ir::Shape& x) {
  int64_t m = 1;
  for (size_t i = 0; i + 1 < x.rank(); ++i) {
    const int64_t d = x[i].is_known() ? x[i].value() : kGuessDim;
    m = d > 0 && m > INT_MAX / d ? INT_MAX : m * d;  // saturates: only a guess
  }
  return m;
}

CutlassGemmProblem problem_of(CutlassGemmType type, int64_t m, int64_t n, int64_t k, int sm_count) {
  CutlassGemmProblem p;
  p.type = type;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.lda = k;
  p.ldb = n;
  p.ldc = n;  // the residual, where there is one: Y's shape, contiguous
  p.ldd = n;
  p.sm_count = sm_count;
  return p;
}

// A time estimate in arbitrary units for ranking configs: the waves of tiles the persistent grid
// runs (whole clusters of SMs) times the tile area, over the config's measured speed with this
// epilogue (the Gelu epilogue favours the large cooperative tiles, bias-only the ping-pong ones).
double estimated_cost(const CutlassGemmConfig& c, CutlassEpilogue epilogue, int64_t m, int64_t n, int sm_count) {
  const int64_t tiles = ((m + c.tile_m - 1) / c.tile_m) * ((n + c.tile_n - 1) / c.tile_n);
  const int cluster = c.cluster_m * c.cluster_n;
  const int64_t slots = std::max<int64_t>(cluster, (std::max(sm_count, 1) / cluster) * cluster);
  const int64_t waves = (tiles + slots - 1) / slots;
  const double speed = epilogue == CutlassEpilogue::kBiasGelu ? c.speed_gelu : c.speed_bias;
  return static_cast<double>(waves) * c.tile_m * c.tile_n / speed;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

class CutlassGemmTactic final : public Tactic {
 public:
  explicit CutlassGemmTactic(int config) : config_(config) {}

  std::string name() const override { return std::string(kPrefix) + cutlass_gemm_config(config_)->name; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    CutlassEpilogue epilogue = CutlassEpilogue::kBias;
    if (!takes(node, in, &epilogue)) return false;
    CutlassGemmType type = CutlassGemmType::kFloat16;
    gemm_type(in[0].dtype, &type);
    if (!cutlass_gemm_has_kernel(config_, epilogue, type)) return false;  // residual, Gelu: not every config
    const DeviceInfo dev = current_device_info();
    if (dev.cc != 90) return false;
    const CutlassGemmProblem p =
        problem_of(type, guessed_m(in[0].shape), in[1].shape[1].value(), in[1].shape[0].value(), dev.sm_count);
    return cutlass_gemm_can_implement(config_, epilogue, p);
  }

  // The persistent data-parallel kernels need no scratch; asked anyway, at the max shapes.
  uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& shapes) const override {
    CutlassEpilogue epilogue = CutlassEpilogue::kBias;
    CutlassGemmType type = CutlassGemmType::kFloat16;
    if (!epilogue_of(node, &epilogue) || !node.input(0) || !gemm_type(node.input(0)->dtype(), &type) ||
        shapes.size() < 2 || shapes[0].empty() || shapes[1].size() != 2)
      return 0;
    const int64_t k = shapes[1][0], n = shapes[1][1];
    if (k <= 0 || n <= 0 || k > INT_MAX || n > INT_MAX) return 0;
    const int64_t m = std::min<int64_t>(shape_numel(shapes[0]) / k, INT_MAX);
    return cutlass_gemm_workspace_bytes(config_, epilogue, problem_of(type, m, n, k, current_device_info().sm_count));
  }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    CutlassEpilogue epilogue = CutlassEpilogue::kBias;
    if (!epilogue_of(node, &epilogue))
      return invalid_argument(node.describe(), ": activation '", node.attrs().get_string("activation", ""), "'",
                              node.input(3) ? " with a residual" : "", " is not one ", name(), " runs");
    if (io.inputs.size() < 2 || !io.inputs[0] || !io.inputs[1] || !io.outputs || io.outputs->empty())
      return internal_error(node.describe(), ": A, B and Y must be given");
    const bool has_residual = epilogue == CutlassEpilogue::kBiasResidual;
    const Tensor* residual = io.inputs.size() > 3 ? io.inputs[3] : nullptr;
    if (has_residual != (residual != nullptr))
      return internal_error(node.describe(), ": the residual ", has_residual ? "is missing" : "is not in the node");
    const Tensor& a = *io.inputs[0];
    const Tensor& b = *io.inputs[1];
    const Tensor* bias = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
    Tensor& y = (*io.outputs)[0];
    CutlassGemmType type = CutlassGemmType::kFloat16;
    if (a.rank() < 1 || b.rank() != 2 || a.dim(a.rank() - 1) != b.dim(0) || !gemm_type(a.dtype(), &type) ||
        b.dtype() != a.dtype() || y.dtype() != a.dtype() ||
        (bias && (bias->numel() != b.dim(1) || bias->dtype() != a.dtype())))
      return invalid_argument(node.describe(), ": A ", data_type_name(a.dtype()), shape_to_string(a.shape()), " and B ",
                              data_type_name(b.dtype()), shape_to_string(b.shape()),
                              " do not make an fp16/bf16 matmul ", name(), " runs");
    const int64_t k = b.dim(0), n = b.dim(1);
    const int64_t m = k > 0 ? a.numel() / k : 0;
    if (y.numel() != m * n)
      return invalid_argument(node.describe(), ": Y ", shape_to_string(y.shape()), " is not [", m, ", ", n, "]");
    if (residual && (residual->dtype() != a.dtype() || residual->shape() != y.shape()))
      return invalid_argument(node.describe(), ": residual ", data_type_name(residual->dtype()),
                              shape_to_string(residual->shape()), " is not Y's ", data_type_name(y.dtype()),
                              shape_to_string(y.shape()), ", which ", name(), " needs");
    if (m == 0 || n == 0) return Status::Ok();
    if (k % 8 != 0 || n % 8 != 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX)
      return unsupported(node.describe(), ": ", name(), " needs K and N multiples of 8 and M, N, K within int32 (M ", m,
                         ", N ", n, ", K ", k, ")");
    const std::array<std::pair<const char*, const void*>, 5> ptrs = {
        {{"A", a.raw()},
         {"B", b.raw()},
         {"bias", bias ? bias->raw() : nullptr},
         {"residual", residual ? residual->raw() : nullptr},
         {"Y", y.raw()}}};
    for (const auto& [what, p] : ptrs)
      if (!aligned16(p))
        return invalid_argument(node.describe(), ": ", what, " at ", p, " is not 16-byte aligned, which ", name(),
                                " (TMA) needs");
    CutlassGemmProblem p = problem_of(type, m, n, k, current_device_info().sm_count);
    p.a = a.raw();
    p.b = b.raw();
    p.bias = bias ? bias->raw() : nullptr;
    p.c = residual ? residual->raw() : nullptr;
    p.d = y.mutable_raw();
    const size_t ws = cutlass_gemm_workspace_bytes(config_, epilogue, p);
    if (ws > 0 && !io.workspace)
      return internal_error(node.describe(), ": ", name(), " needs ", ws, " bytes of workspace, none given");
    const CutlassGemmStatus st =
        launch_cutlass_gemm(config_, epilogue, p, io.workspace, ws, static_cast<cudaStream_t>(io.stream));
    if (st != CutlassGemmStatus::kOk) {
      const cudaError_t e = cudaGetLastError();
      return internal_error(node.describe(), ": ", name(), " M=", m, " N=", n, " K=", k, ": ",
                            cutlass_gemm_status_name(st), e != cudaSuccess ? " (" : "",
                            e != cudaSuccess ? cudaGetErrorString(e) : "", e != cudaSuccess ? ")" : "");
    }
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {kParamsVersion, static_cast<uint8_t>(config_)}; }

 private:
  int config_;
};

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  std::vector<std::unique_ptr<Tactic>> out;
  CutlassEpilogue epilogue = CutlassEpilogue::kBias;
  if (!takes(node, in, &epilogue)) return out;  // then only the configs with that epilogue can_implement
  const DeviceInfo dev = current_device_info();
  if (dev.cc != 90) return out;
  const int64_t m = guessed_m(in[0].shape), n = in[1].shape[1].value(), k = in[1].shape[0].value();
  // Few rows: a handful of persistent CTAs stream the whole weight (M 128, N 2304 -> 18 tiles of
  // 128x128 on 132 SMs). At BERT-base batch 1 cuBLASLt (12 us bias-only) and cuDNN beat every
  // config here (15-20 us), yet the autotuner took the ping-pong config for the QKV GEMMs and the
  // engine went from 0.527 to 0.636 ms (H200, session 5): its isolated timing, with the weight
  // warm in L2, favours it. So a known M under kMinRows gets no cutlass candidates.
  if (all_leading_dims_known(in[0].shape) && m < kMinRows) return out;
  CutlassGemmType type = CutlassGemmType::kFloat16;
  gemm_type(in[0].dtype, &type);
  const CutlassGemmProblem p = problem_of(type, m, n, k, dev.sm_count);
  std::vector<std::pair<double, int>> ranked;
  for (int i = 0; i < cutlass_gemm_config_count(); ++i)
    if (cutlass_gemm_can_implement(i, epilogue, p))
      ranked.emplace_back(estimated_cost(*cutlass_gemm_config(i), epilogue, m, n, dev.sm_count), i);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(kMaxCandidates); ++i)
    out.push_back(std::make_unique<CutlassGemmTactic>(ranked[i].second));
  return out;
}

// "cuda.cutlass.gemm.<config>"; params empty or {1, config index}.
std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  if (name.rfind(kPrefix, 0) != 0) return nullptr;
  const int config = cutlass_gemm_config_index(name.c_str() + std::strlen(kPrefix));
  if (config < 0) return nullptr;
  if (!params.empty() && (params.size() != 2 || params[0] != kParamsVersion || params[1] != config)) return nullptr;
  return std::make_unique<CutlassGemmTactic>(config);
}

}  // namespace

TacticFamily cutlass_gemm_family() { return TacticFamily{"cutlass", candidates, create}; }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUTLASS
