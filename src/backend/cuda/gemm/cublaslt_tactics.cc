// Copyright ingot authors. Apache-2.0.
//
// cuBLASLt tactics for MatMul, Gemm and ingot::FusedGemm: each node is one cublasLtMatmul. A
// second family, "cuda.cublaslt.conv.<i>", runs a channels-last ingot::FusedConv with a 1x1 kernel,
// stride 1, no padding and one group the same way: X [N, H, W, C] is A [N·H·W, C] and W [K, 1, 1, C]
// is B stored [N, K] (Gemm's transB), so Y [N, H, W, K] = X·W^T + bias (+ R), then the activation.
// The 1x1 convs are most of a CNN's (ResNet-50's at batch 128: about 60% of the time, in cuDNN
// plans that reach 66-82% of the memory roofline on the 56x56 layers). Registered after cuDNN's
// families with one candidate, so cuDNN's plans keep the autotuner's width and this one is timed
// beside them (one candidate per family past the width): it is kept only where it measures faster.
//
// Row-major through a column-major library: a row-major [R,C] matrix is a column-major [C,R]
// one, so Y = op(A)·op(B) is computed as Y^T = op(B)^T·op(A)^T, with cuBLASLt's "A" our B and
// its "B" our A. Its D then has N rows, so the epilogue bias (one value per row of D) is our
// per-column bias of length N.
//
// What maps onto cuBLASLt's D = act(alpha·AB + beta·C + bias):
//  - MatMul batching: B without batch (or all-1 batch) folds the batch into M (one GEMM with
//    M' = batch·M); A without batch is a strided batch with A's stride 0; equal batches are a
//    plain strided batch. Partial broadcasts (e.g. [2,1,..]x[1,3,..]) are refused.
//  - Gemm's C: a vector over N ([N] or [1,N]) with beta = 1 is the epilogue bias; a full
//    [M,N] matrix is cuBLASLt's C scaled by beta. Other broadcasts (scalar, [M,1]) and a bias
//    vector with beta != 1 (the epilogue bias cannot be scaled) are refused.
//  - FusedGemm's residual R is cuBLASLt's C with beta = 1; cuBLASLt adds C before the bias
//    and the activation, which is residual_before_activation = 1 (or any order when there is
//    no activation). A residual next to a full C matrix is refused (one C slot).
//  - Activations: Relu and GeluTanh in the epilogue (cuBLASLt's GELU is the tanh
//    approximation). The others FusedGemm allows (exact Gelu -- it differs from the tanh form
//    by up to ~5e-4 absolute --, Tanh, Sigmoid, Silu, HardSwish, LeakyRelu, HardSigmoid, Clip)
//    run the bias epilogue and then our elementwise kernel in place on the output: one more
//    launch, no extra buffer.
//
// An N that is not a multiple of 16 bytes (GPT-2's LM head: N = 50257 fp16) makes cuBLASLt run
// at ~100 TFLOP/s: 3.06 ms for [4096 x 768] x [768 x 50257] on the H200, where N = 50264 takes
// 0.47 ms (bench/gemm_odd_n_probe.cu, 2026-12-02; PyTorch's x @ W.T takes the same 3.08 ms, and
// torch.compile pads the weight). Padding only D's row pitch does not help (3.04 ms): the
// extent is what matters. So for B stored [N,K] (Gemm transB=1, every exported Linear) two
// variants split N into a multiple of 16 bytes (the fast GEMM) and a tail of 1-7 columns (a
// second, small GEMM on the last rows of B):
//  - "split": both write straight into y (the row pitch stays N);
//  - "padded": both write into the workspace with the pitch rounded up to 16 bytes, and one
//    pitched cudaMemcpy2DAsync (a pass over D) moves the rows into y.
//  - "rows": no copy and no misaligned pitch: the rows r with r mod 8 = j (fp16) start at the
//    same offset within a 16-byte unit, so for each j one GEMM covers them (A's and D's pitch
//    8 rows: 16-byte multiples) over the columns that are 16-byte aligned there, and a small
//    kernel (gemm_edge_kernels.h) computes the 1-14 columns per row at the edges. It reads B
//    8 times, so it is offered only where that costs less than the padded copy's pass over D
//    (2·M ≥ 7·K: GPT-2's head at batch 32, M = 4096, K = 768), without bias or epilogue
//    activation (cuBLASLt's bias pointer would be misaligned as well), and A not transposed.
// The autotuner keeps whichever of these and the plain algorithms is fastest. Only for one
// non-batched GEMM without a C matrix or residual (those would need splitting too).
//
// Descriptors and the algorithm depend on the current shapes, so a tactic keeps a small
// cache of plans keyed by shapes and pointer alignments, filled on first use of a shape and
// read lock-free afterwards; the matmul descriptor (which holds the bias pointer) is built
// on the stack per launch with cublasLtMatmulDescInit, so enqueue allocates nothing once a
// shape has been seen.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/gemm/cublaslt_common.h"
#include "backend/cuda/gemm/gemm_edge_kernels.h"
#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "backend/cuda/core/plan_cache.h"
#include "backend/cuda/core/cuda_tactics.h"

namespace ingot::backend::cuda {

namespace {

constexpr uint64_t kWorkspaceBytes = 32ull << 20;  // cuBLASLt's recommendation for Hopper
constexpr int kMaxHeuristics = 4;
constexpr const char* kPrefix = "cuda.cublaslt.";
constexpr const char* kTf32Prefix = "cuda.cublaslt.tf32.";
constexpr const char* kPaddedPrefix = "cuda.cublaslt.padded.";
constexpr const char* kSplitPrefix = "cuda.cublaslt.split.";
constexpr const char* kRowsPrefix = "cuda.cublaslt.rows.";
constexpr const char* kConvPrefix = "cuda.cublaslt.conv.";

// How the "split", "padded" and "rows" variants (header comment) treat N; kNone: one GEMM as it is.
enum class OddN : uint8_t { kNone, kSplit, kPadded, kRows };

// Elements per 16-byte row unit, and N rounded up to it: the padded variant's D pitch.
int64_t padded_n(int64_t n, int64_t esize) {
  const int64_t unit = 16 / esize;
  return (n + unit - 1) / unit * unit;
}

// N rounded down to the 16-byte unit: the split variants' first GEMM.
int64_t aligned_n(int64_t n, int64_t esize) { return n / (16 / esize) * (16 / esize); }

// Whether a problem's N is a misaligned extent the split variants can take: B stored [N,K]
// (so its last rows are a GEMM of their own), N of at least one unit, one GEMM, no C matrix.
bool wants_split(int64_t n, int64_t batch, int64_t esize, bool trans_b, bool residual, bool c_matrix) {
  return (n * esize) % 16 != 0 && aligned_n(n, esize) > 0 && trans_b && batch == 1 && !residual && !c_matrix;
}

// Whether the "rows" variant applies (header comment): the split conditions, A not transposed
// with 16-byte rows, no bias, no activation in cuBLASLt's epilogue (kPost runs after, on all of
// y), and enough rows that re-reading B per row group costs less than the padded copy.
bool wants_rows(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t esize, bool trans_a, bool trans_b,
                bool residual, bool c_matrix, bool bias, bool epilogue_act) {
  const int64_t unit = 16 / esize;
  return wants_split(n, batch, esize, trans_b, residual, c_matrix) && !trans_a && (k * esize) % 16 == 0 && !bias &&
         !epilogue_act && m >= unit && 2 * m >= (unit - 1) * k;
}


// kPost: an activation cuBLASLt has no epilogue for, run by our unary kernel after the GEMM.
enum class Activation { kNone, kRelu, kGeluTanh, kPost };

// What the node asks for, before any shape is known.
struct GemmSpec {
  bool matmul_rules = false;  // MatMul's N-D broadcasting batch, else Gemm's 2-D with transposes
  bool conv = false;          // a 1x1 channels-last FusedConv (conv_is_gemm): A's leading dims fold into M, B is W [K, 1.., C]
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  Activation act = Activation::kNone;
  UnaryOp post_op = UnaryOp::kIdentity;  // with Activation::kPost
  UnaryParams post_params;
  int c_input = -1;         // Gemm's C / FusedGemm's bias (input 2), when it contributes
  int residual_input = -1;  // FusedGemm's residual (input 3)
};

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

bool handles_op(const ir::Node& n) {
  if (is_default_domain(n.domain())) return n.op_type() == "MatMul" || n.op_type() == "Gemm";
  return n.domain() == "ingot" && n.op_type() == "FusedGemm";
}

// FusedGemm's and FusedConv's epilogue: `activation` (+ params) and the residual (input 3).
Status parse_epilogue(const ir::Node& node, GemmSpec* s) {
  const ir::Attributes& at = node.attrs();
  std::string act = at.get_string("activation", "");
  if (act.empty()) s->act = Activation::kNone;
  else if (act == "Relu") s->act = Activation::kRelu;
  else if (act == "GeluTanh") s->act = Activation::kGeluTanh;
  else {
    const std::vector<float> ap = at.get_floats("activation_params");
    auto param = [&](size_t i) { return i < ap.size() ? ap[i] : 0.0f; };
    s->act = Activation::kPost;
    if (act == "Gelu") s->post_op = UnaryOp::kGelu;
    else if (act == "Tanh") s->post_op = UnaryOp::kTanh;
    else if (act == "Sigmoid") s->post_op = UnaryOp::kSigmoid;
    else if (act == "Silu") s->post_op = UnaryOp::kSilu;
    else if (act == "HardSwish") s->post_op = UnaryOp::kHardSwish;
    else if (act == "LeakyRelu") { s->post_op = UnaryOp::kLeakyRelu; s->post_params.alpha = param(0); }
    else if (act == "HardSigmoid") {
      s->post_op = UnaryOp::kHardSigmoid;
      s->post_params.alpha = param(0);
      s->post_params.beta = param(1);
    } else if (act == "Clip") {
      if (ap.size() < 2) return unsupported(node.describe(), ": Clip needs activation_params [min, max]");
      s->post_op = UnaryOp::kClip;
      s->post_params.lo = ap[0];
      s->post_params.hi = ap[1];
    } else {
      return unsupported(node.describe(), ": activation '", act, "'");
    }
  }
  if (node.input(3)) {
    s->residual_input = 3;
    bool before = at.get_int("residual_before_activation", 1) != 0;
    if (!before && s->act != Activation::kNone)
      return unsupported(node.describe(), ": residual after the activation");
  }
  return Status::Ok();
}

Result<GemmSpec> parse_spec(const ir::Node& node) {
  GemmSpec s;
  const ir::Attributes& at = node.attrs();
  if (node.op_type() == "FusedConv" && conv_is_gemm(node)) {
    s.conv = true;
    s.trans_b = true;
    if (node.input(2)) s.c_input = 2;
    INGOT_RETURN_IF_ERROR(parse_epilogue(node, &s));
    return s;
  }
  if (!handles_op(node)) return unsupported(node.describe(), ": not a GEMM");
  if (node.op_type() == "MatMul") {
    s.matmul_rules = true;
    return s;
  }
  s.trans_a = at.get_int("transA", 0) != 0;
  s.trans_b = at.get_int("transB", 0) != 0;
  s.alpha = at.get_float("alpha", 1.0f);
  s.beta = at.get_float("beta", 1.0f);
  if (node.input(2) && s.beta != 0.0f) s.c_input = 2;
  if (node.op_type() == "Gemm") return s;

  std::string kind = at.get_string("kind", "gemm");
  if (kind != "gemm" && kind != "matmul") return unsupported(node.describe(), ": kind '", kind, "'");
  s.matmul_rules = kind == "matmul";
  if (s.matmul_rules && (s.trans_a || s.trans_b))
    return unsupported(node.describe(), ": transA/transB with kind 'matmul'");
  INGOT_RETURN_IF_ERROR(parse_epilogue(node, &s));
  return s;
}

bool known_one(const ir::Dim& d) { return d.is_known() && d.value() == 1; }

bool is_supported_dtype(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// The role of C (Gemm's C or FusedGemm's bias) once shapes are known.
enum class CRole : uint8_t { kNone, kBias, kMatrix };

// The GEMM in cuBLASLt's terms, from concrete shapes.
struct Problem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements between batch members (0: shared)
  CRole c_role = CRole::kNone;
};

Result<Problem> plan_problem(const ir::Node& node, const GemmSpec& s, const Shape64& a_shape, const Shape64& b_shape,
                             const Shape64* c_shape) {
  Problem p;
  bool b_vector = false;
  if (s.conv) {
    INGOT_ASSIGN_OR_RETURN(ConvGemmSizes g, conv_gemm_sizes(node, a_shape, b_shape));
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    if (c_shape) {
      if (c_shape->size() != 1 || (*c_shape)[0] != p.n)
        return invalid_argument(node.describe(), ": bias ", shape_to_string(*c_shape), " is not [", p.n, "]");
      p.c_role = CRole::kBias;
    }
    return p;
  }
  if (!s.matmul_rules) {
    if (a_shape.size() != 2 || b_shape.size() != 2)
      return invalid_argument(node.describe(), ": A ", shape_to_string(a_shape), " and B ", shape_to_string(b_shape),
                              " must be 2-D");
    p.m = s.trans_a ? a_shape[1] : a_shape[0];
    p.k = s.trans_a ? a_shape[0] : a_shape[1];
    p.n = s.trans_b ? b_shape[0] : b_shape[1];
    int64_t kb = s.trans_b ? b_shape[1] : b_shape[0];
    if (kb != p.k)
      return invalid_argument(node.describe(), ": inner dimensions differ (", p.k, " vs ", kb, ")");
  } else {
    if (a_shape.empty() || b_shape.empty()) return invalid_argument(node.describe(), ": MatMul operands must have rank >= 1");
    // Index arithmetic only (no temporary shapes): enqueue runs this on every step and must not
    // allocate. A 1-D A is [1,K], a 1-D B is [K,1]; the dims before the last two are batch dims.
    const size_t ra = a_shape.size(), rb = b_shape.size();
    b_vector = rb == 1;
    p.m = ra == 1 ? 1 : a_shape[ra - 2];
    p.k = a_shape[ra - 1];
    p.n = rb == 1 ? 1 : b_shape[rb - 1];
    const int64_t kb = rb == 1 ? b_shape[0] : b_shape[rb - 2];
    if (kb != p.k) return invalid_argument(node.describe(), ": inner dimensions differ (", p.k, " vs ", kb, ")");
    const size_t batch_a = ra > 2 ? ra - 2 : 0, batch_b = rb > 2 ? rb - 2 : 0;
    int64_t na = 1, nb = 1;
    for (size_t i = 0; i < batch_a; ++i) na *= a_shape[i];
    for (size_t i = 0; i < batch_b; ++i) nb *= b_shape[i];
    if (nb == 1) {
      p.m *= na;  // rows of A are contiguous across its batch: one tall GEMM
    } else if (na == 1) {
      p.batch = nb;
      p.stride_b = p.k * p.n;
      p.stride_d = p.m * p.n;
    } else {
      const size_t r = std::max(batch_a, batch_b);
      for (size_t i = 0; i < r; ++i) {
        const int64_t da = i < r - batch_a ? 1 : a_shape[i - (r - batch_a)];
        const int64_t db = i < r - batch_b ? 1 : b_shape[i - (r - batch_b)];
        if (da != db)
          return unsupported(node.describe(), ": batch dims of ", shape_to_string(a_shape), " and ",
                             shape_to_string(b_shape), " broadcast partially");
      }
      p.batch = na;
      p.stride_a = p.m * p.k;
      p.stride_b = p.k * p.n;
      p.stride_d = p.m * p.n;
    }
  }
  if (p.batch > std::numeric_limits<int32_t>::max())
    return unsupported(node.describe(), ": batch count ", p.batch, " exceeds int32");
  if (c_shape) {
    const Shape64& c = *c_shape;
    // A vector over N: [N], [1,N], [1,1,N] (leading ones within Gemm's rank 2 for Gemm rules).
    bool vector_n = !c.empty() && c.back() == p.n && shape_numel(c) == p.n && !b_vector &&
                    (s.matmul_rules || c.size() <= 2);
    bool matrix = !s.matmul_rules && c.size() == 2 && c[0] == p.m && c[1] == p.n;
    if (vector_n && s.beta == 1.0f) p.c_role = CRole::kBias;
    else if (matrix && s.residual_input < 0) p.c_role = CRole::kMatrix;
    else
      return unsupported(node.describe(), ": C ", shape_to_string(c), " with beta ", s.beta,
                         " is neither a bias over N (beta 1) nor a full [M,N] matrix");
  }
  return p;
}

// supports(): the same decisions as plan_problem, over every binding of symbolic dims.
Status check_types(const ir::Node& node, const GemmSpec& s, const std::vector<ir::TensorType>& in) {
  if (in.size() < 2 || !node.output(0)) return unsupported(node.describe(), ": needs A, B and an output");
  DataType dt = in[0].dtype;
  if (!is_supported_dtype(dt)) return unsupported(node.describe(), ": dtype ", data_type_name(dt));
  for (size_t i = 0; i < in.size(); ++i)
    if (node.input(i) && in[i].dtype != dt) return unsupported(node.describe(), ": mixed dtypes");
  if (node.output(0)->dtype() != dt) return unsupported(node.describe(), ": output dtype differs from inputs");
  const ir::Shape& a = in[0].shape;
  const ir::Shape& b = in[1].shape;
  if (!a.rank_known() || !b.rank_known()) return unsupported(node.describe(), ": unknown rank");
  ir::Dim m, n;
  bool b_vector = false;
  if (s.conv) {
    // conv_is_gemm checked W's taps; the ranks, the channels and the bias [K] are checked here.
    if (a.rank() < 3 || b.rank() != a.rank())
      return unsupported(node.describe(), ": X ", a.to_string(), " and W ", b.to_string(), " are not a 1x1 convolution");
    if (!a[a.rank() - 1].provably_equal(b[b.rank() - 1]))
      return unsupported(node.describe(), ": X ", a.to_string(), " and W ", b.to_string(), " may differ in channels");
    if (s.c_input >= 0) {
      const ir::Shape& c = in[static_cast<size_t>(s.c_input)].shape;
      if (!c.rank_known() || c.rank() != 1 || !c[0].provably_equal(b[0]))
        return unsupported(node.describe(), ": bias ", c.to_string(), " is not [", b[0].to_string(), "]");
    }
  } else if (!s.matmul_rules) {
    if (a.rank() != 2 || b.rank() != 2) return unsupported(node.describe(), ": Gemm operands must be 2-D");
    m = s.trans_a ? a[1] : a[0];
    n = s.trans_b ? b[0] : b[1];
  } else {
    if (a.rank() == 0 || b.rank() == 0) return unsupported(node.describe(), ": rank-0 operand");
    b_vector = b.rank() == 1;
    m = a.rank() == 1 ? ir::Dim(1) : a[a.rank() - 2];
    n = b_vector ? ir::Dim(1) : b[b.rank() - 1];
    std::vector<ir::Dim> ab, bb;
    if (a.rank() > 2) ab.assign(a.dims().begin(), a.dims().end() - 2);
    if (b.rank() > 2) bb.assign(b.dims().begin(), b.dims().end() - 2);
    auto all_one = [](const std::vector<ir::Dim>& v) { return std::all_of(v.begin(), v.end(), known_one); };
    if (!all_one(ab) && !all_one(bb)) {
      size_t r = std::max(ab.size(), bb.size());
      ab.insert(ab.begin(), r - ab.size(), ir::Dim(1));
      bb.insert(bb.begin(), r - bb.size(), ir::Dim(1));
      for (size_t i = 0; i < r; ++i)
        if (!ab[i].provably_equal(bb[i]))
          return unsupported(node.describe(), ": batch dims ", a.to_string(), " x ", b.to_string(),
                             " may broadcast partially");
    }
  }
  if (s.c_input >= 0 && !s.conv) {
    const ir::Shape& c = in[static_cast<size_t>(s.c_input)].shape;
    if (!c.rank_known() || c.rank() == 0) return unsupported(node.describe(), ": C of unknown or zero rank");
    bool vector_n = !b_vector && c[c.rank() - 1].provably_equal(n) && (s.matmul_rules || c.rank() <= 2);
    for (size_t i = 0; i + 1 < c.rank(); ++i) vector_n &= known_one(c[i]);
    bool matrix = !s.matmul_rules && c.rank() == 2 && c[0].provably_equal(m) && c[1].provably_equal(n);
    if (!(vector_n && s.beta == 1.0f) && !(matrix && s.residual_input < 0))
      return unsupported(node.describe(), ": C ", c.to_string(), " with beta ", s.beta,
                         " is neither a bias over N (beta 1) nor a full [M,N] matrix");
  }
  if (s.residual_input >= 0) {
    const ir::Shape& r = in[static_cast<size_t>(s.residual_input)].shape;
    const ir::Shape& y = node.output(0)->shape();
    if (!r.rank_known() || !y.rank_known() || r.rank() != y.rank())
      return unsupported(node.describe(), ": residual ", r.to_string(), " vs output ", y.to_string());
    for (size_t i = 0; i < r.rank(); ++i)
      if (!r[i].provably_equal(y[i]))
        return unsupported(node.describe(), ": residual ", r.to_string(), " may differ from output ", y.to_string());
  }
  return Status::Ok();
}

cudaDataType_t cuda_type(DataType t) {
  switch (t) {
    case DataType::kFloat16: return CUDA_R_16F;
    case DataType::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t epilogue(Activation act, bool bias) {
  switch (act) {
    case Activation::kRelu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::kGeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}



// The per-shape part of a launch: immutable once built.
struct PlanKey {
  const ir::Node* node = nullptr;
  int64_t m = 0, n = 0, k = 0, batch = 0, stride_a = 0, stride_b = 0, stride_d = 0;
  int64_t ld_d = 0;  // D's pitch when it is not n (the split variants)
  int64_t ld_a = 0;  // our A's row pitch when it is not its row length (the rows variant)
  CRole c_role = CRole::kNone;
  std::array<uint32_t, 4> align{};  // cuBLASLt's A, B, C, D
  bool operator==(const PlanKey& o) const {
    return node == o.node && m == o.m && n == o.n && k == o.k && batch == o.batch && stride_a == o.stride_a &&
           stride_b == o.stride_b && stride_d == o.stride_d && ld_d == o.ld_d && ld_a == o.ld_a && c_role == o.c_role &&
           align == o.align;
  }
};

struct Plan {
  PlanKey key;
  cublasLtMatrixLayoutOpaque_t lt_a{}, lt_b{}, lt_d{};  // lt_d also describes C
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

// Settings shared by heuristic queries and launches.
struct LaunchConfig {
  DataType dtype = DataType::kFloat32;
  bool tf32 = false;
  const GemmSpec* spec = nullptr;
};

Status init_desc(const ir::Node& node, const LaunchConfig& cfg, CRole c_role, const void* bias,
                 cublasLtMatmulDescOpaque_t* desc) {
  cublasComputeType_t compute =
      cfg.dtype == DataType::kFloat32 && cfg.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescInit(desc, compute, CUDA_R_32F), node);
  // cuBLASLt's A is our B, its B our A (see the header comment).
  cublasOperation_t op_a = cfg.spec->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_b = cfg.spec->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), node);
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), node);
  bool has_bias = c_role == CRole::kBias;
  cublasLtEpilogue_t epi = epilogue(cfg.spec->act, has_bias);
  INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), node);
  if (has_bias && bias) {
    INGOT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                       node);
  }
  return Status::Ok();
}

Status init_layout(const ir::Node& node, cublasLtMatrixLayoutOpaque_t* l, cudaDataType_t t, int64_t rows, int64_t cols,
                   int64_t batch, int64_t stride, int64_t ld = 0) {
  INGOT_CUBLAS_CHECK(cublasLtMatrixLayoutInit(l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols),
                                              std::max<int64_t>(ld > 0 ? ld : rows, 1)),
                     node);
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    INGOT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                       node);
    INGOT_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)), node);
  }
  return Status::Ok();
}

// Layouts for a problem, and up to kMaxHeuristics algorithms for them (count in *found).
Status build_plan(const ir::Node& node, const LaunchConfig& cfg, cublasLtHandle_t handle, const PlanKey& key,
                  const void* bias, Plan* plan, std::array<cublasLtMatmulHeuristicResult_t, kMaxHeuristics>* results,
                  int* found) {
  plan->key = key;
  const GemmSpec& s = *cfg.spec;
  cudaDataType_t t = cuda_type(cfg.dtype);
  // Stored (pre-op) column-major shapes: our row-major B [K,N] is lt's [N,K]; transposed, [K,N].
  int64_t a_rows = s.trans_b ? key.k : key.n, a_cols = s.trans_b ? key.n : key.k;
  int64_t b_rows = s.trans_a ? key.m : key.k, b_cols = s.trans_a ? key.k : key.m;
  INGOT_RETURN_IF_ERROR(init_layout(node, &plan->lt_a, t, a_rows, a_cols, key.batch, key.stride_b));
  INGOT_RETURN_IF_ERROR(init_layout(node, &plan->lt_b, t, b_rows, b_cols, key.batch, key.stride_a, key.ld_a));
  INGOT_RETURN_IF_ERROR(init_layout(node, &plan->lt_d, t, key.n, key.m, key.batch, key.stride_d, key.ld_d));

  cublasLtMatmulDescOpaque_t desc;
  INGOT_RETURN_IF_ERROR(init_desc(node, cfg, key.c_role, bias, &desc));
  cublasLtMatmulPreferenceOpaque_t pref;
  INGOT_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(&pref), node);
  uint64_t ws = kWorkspaceBytes;
  INGOT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                     node);
  const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    uint32_t a = key.align[static_cast<size_t>(i)];
    INGOT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(&pref, align_attrs[i], &a, sizeof(a)), node);
  }
  *found = 0;
  INGOT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, &desc, &plan->lt_a, &plan->lt_b, &plan->lt_d, &plan->lt_d,
                                                    &pref, kMaxHeuristics, results->data(), found),
                     node);
  if (*found <= 0)
    return unsupported(node.describe(), ": cuBLASLt has no algorithm for M=", key.m, " N=", key.n, " K=", key.k,
                       " batch=", key.batch);
  return Status::Ok();
}

class CublasLtTactic : public Tactic {
 public:
  CublasLtTactic(int heuristic_index, bool tf32, OddN odd = OddN::kNone, bool conv = false)
      : index_(heuristic_index), tf32_(tf32), odd_(odd), conv_(conv) {}

  std::string name() const override {
    const char* prefix = conv_ ? kConvPrefix
                         : odd_ == OddN::kPadded ? kPaddedPrefix
                         : odd_ == OddN::kSplit ? kSplitPrefix
                         : odd_ == OddN::kRows  ? kRowsPrefix
                         : tf32_                ? kTf32Prefix
                                                : kPrefix;
    return prefix + std::to_string(index_);
  }
  bool uses_tf32() const override { return tf32_; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) const override {
    auto spec = parse_spec(node);
    if (!spec.ok() || spec->conv != conv_) return false;  // each family its own nodes
    if (tf32_ && !inputs.empty() && inputs[0].dtype != DataType::kFloat32) return false;
    return check_types(node, *spec, inputs).ok();
  }

  uint64_t workspace_bytes(const ir::Node& node, const std::vector<Shape64>& in) const override {
    if (odd_ != OddN::kPadded) return kWorkspaceBytes;
    // cuBLASLt's scratch, then the padded D at the largest shapes.
    auto spec = parse_spec(node);
    if (!spec.ok() || in.size() < 2 || node.outputs().empty() || !node.outputs()[0]) return kWorkspaceBytes;
    const Shape64* c = spec->c_input >= 0 && static_cast<size_t>(spec->c_input) < in.size() ? &in[spec->c_input] : nullptr;
    auto p = plan_problem(node, *spec, in[0], in[1], c);
    if (!p.ok()) return kWorkspaceBytes;
    const int64_t esize = static_cast<int64_t>(storage_bytes(node.outputs()[0]->dtype(), 1));
    return kWorkspaceBytes + static_cast<uint64_t>(p->m * padded_n(p->n, esize) * esize);
  }

  Status prepare(const ir::Node& node) override { return cublaslt_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    const ir::Node& node = *io.node;
    INGOT_ASSIGN_OR_RETURN(GemmSpec spec, parse_spec(node));
    auto input = [&](int i) -> const Tensor* {
      return i >= 0 && static_cast<size_t>(i) < io.inputs.size() ? io.inputs[static_cast<size_t>(i)] : nullptr;
    };
    const Tensor* a = input(0);
    const Tensor* b = input(1);
    const Tensor* c = input(spec.c_input);
    const Tensor* r = input(spec.residual_input);
    if (!a || !b || !io.outputs || io.outputs->empty()) return invalid_argument(node.describe(), ": missing A, B or output");
    if ((spec.c_input >= 0 && !c) || (spec.residual_input >= 0 && !r))
      return invalid_argument(node.describe(), ": missing C or residual tensor");
    Tensor& y = (*io.outputs)[0];
    INGOT_ASSIGN_OR_RETURN(Problem p, plan_problem(node, spec, a->shape(), b->shape(), c ? &c->shape() : nullptr));
    if (y.numel() != p.batch * p.m * p.n)
      return internal_error(node.describe(), ": output ", shape_to_string(y.shape()), " holds ", y.numel(),
                            " elements, the GEMM writes ", p.batch * p.m * p.n);
    if (r && r->shape() != y.shape())
      return invalid_argument(node.describe(), ": residual ", shape_to_string(r->shape()), " vs output ",
                              shape_to_string(y.shape()));
    for (const Tensor* t : {a, b, c, r})
      if (t && t->dtype() != y.dtype()) return invalid_argument(node.describe(), ": mixed dtypes");
    if (y.numel() == 0) return Status::Ok();
    if (p.k == 0) return unsupported(node.describe(), ": K = 0");
    if (!io.workspace) return internal_error(node.describe(), ": no workspace");

    INGOT_ASSIGN_OR_RETURN(cublasLtHandle_t handle, cublaslt_handle(node));
    LaunchConfig cfg{y.dtype(), tf32_, &spec};
    const int64_t esize = static_cast<int64_t>(storage_bytes(y.dtype(), 1));
    const cudaStream_t stream = static_cast<cudaStream_t>(io.stream);
    if (odd_ == OddN::kRows) {
      const bool epilogue_act = spec.act == Activation::kRelu || spec.act == Activation::kGeluTanh;
      if (!wants_rows(p.m, p.n, p.k, p.batch, esize, spec.trans_a, spec.trans_b, r != nullptr,
                      p.c_role == CRole::kMatrix, p.c_role == CRole::kBias, epilogue_act))
        return unsupported(node.describe(), ": ", name(),
                           " is for one GEMM of A [M,K] and B [N,K] with a misaligned N, no bias or C matrix and M >= ",
                           (16 / esize - 1) * p.k / 2);
      // Row group j: rows j, j + unit, ... over their 16-byte-aligned columns [c0, c0 + nj).
      const int64_t unit = 16 / esize;
      for (int64_t j = 0; j < unit && j < p.m; ++j) {
        int64_t c0 = 0, nj = 0;
        row_group_columns(j, p.n, unit, &c0, &nj);
        if (nj == 0) continue;
        Problem pj = p;
        pj.m = (p.m - j + unit - 1) / unit;
        const char* a_j = static_cast<const char*>(a->raw()) + j * p.k * esize;
        const char* b_j = static_cast<const char*>(b->raw()) + c0 * p.k * esize;
        char* d_j = static_cast<char*>(y.mutable_raw()) + (j * p.n + c0) * esize;
        INGOT_RETURN_IF_ERROR(launch(node, cfg, handle, pj, index_, nj, unit * p.n, a_j, b_j, d_j, nullptr, d_j, spec,
                                     false, io.workspace, stream, unit * p.k));
      }
      FloatType ft = FloatType::kF32;
      to_float_type(y.dtype(), &ft);  // a supported dtype (check_types)
      INGOT_CUDA_CHECK(launch_gemm_row_group_edges(ft, a->raw(), b->raw(), y.mutable_raw(), p.m, p.n, p.k, spec.alpha,
                                                   stream));
    } else if (odd_ == OddN::kNone) {
      const void* c_ptr = r ? r->raw() : p.c_role == CRole::kMatrix ? c->raw() : y.raw();
      INGOT_RETURN_IF_ERROR(launch(node, cfg, handle, p, index_, p.n, 0, a->raw(), b->raw(), c_ptr,
                                   p.c_role == CRole::kBias ? c->raw() : nullptr, y.mutable_raw(), spec, r != nullptr,
                                   io.workspace, stream));
    } else {
      if (!wants_split(p.n, p.batch, esize, spec.trans_b, r != nullptr, p.c_role == CRole::kMatrix))
        return unsupported(node.describe(), ": ", name(), " is for one GEMM of B [N,K] with a misaligned N and no C matrix");
      // The padded variant's D: the workspace after cuBLASLt's scratch (256-byte aligned).
      const bool padded = odd_ == OddN::kPadded;
      char* d = padded ? static_cast<char*>(io.workspace) + kWorkspaceBytes : static_cast<char*>(y.mutable_raw());
      const int64_t ld = padded ? padded_n(p.n, esize) : p.n;
      const int64_t n0 = aligned_n(p.n, esize);
      const char* bias = p.c_role == CRole::kBias ? static_cast<const char*>(c->raw()) : nullptr;
      // Columns [0, n0) with the tuned algorithm, then [n0, n) (rows n0.. of B) with the first.
      for (int part = 0; part < 2; ++part) {
        const int64_t off = part == 0 ? 0 : n0, n = part == 0 ? n0 : p.n - n0;
        const char* b_part = static_cast<const char*>(b->raw()) + off * p.k * esize;
        char* d_part = d + off * esize;
        INGOT_RETURN_IF_ERROR(launch(node, cfg, handle, p, part == 0 ? index_ : 0, n, ld, a->raw(), b_part,
                                     d_part, bias ? bias + off * esize : nullptr, d_part, spec, false, io.workspace,
                                     stream));
      }
      if (padded && esize == 2)  // rows of n elements from the padded pitch into y
        INGOT_CUDA_CHECK(launch_copy_rows_u16(d, ld, y.mutable_raw(), p.n, p.n, p.m, stream));
      else if (padded)
        INGOT_CUDA_CHECK(cudaMemcpy2DAsync(y.mutable_raw(), static_cast<size_t>(p.n * esize), d,
                                           static_cast<size_t>(ld * esize), static_cast<size_t>(p.n * esize),
                                           static_cast<size_t>(p.m), cudaMemcpyDeviceToDevice, stream));
    }
    if (spec.act == Activation::kPost) {  // the activation after the bias epilogue, in place
      FloatType ft = FloatType::kF32;
      to_float_type(y.dtype(), &ft);
      INGOT_CUDA_CHECK(launch_unary(spec.post_op, spec.post_params, ft, ft, y.raw(), y.mutable_raw(), y.numel(),
                                    static_cast<cudaStream_t>(io.stream)));
    }
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override {
    return {1, static_cast<uint8_t>(index_), static_cast<uint8_t>(tf32_ ? 1 : 0)};
  }

 private:
  // One cuBLASLt call: n columns of the problem p (all of it when n == p.n), B and D already
  // offset to them, D with pitch ld (0: n), A with row pitch ld_a (0: K), cuBLASLt's heuristic
  // algorithm `index`.
  Status launch(const ir::Node& node, const LaunchConfig& cfg, cublasLtHandle_t handle, const Problem& p, int index,
                int64_t n, int64_t ld, const void* a, const void* b, const void* c_ptr, const void* bias,
                void* d, const GemmSpec& spec, bool residual, void* workspace, cudaStream_t stream,
                int64_t ld_a = 0) const {
    const int64_t esize = static_cast<int64_t>(storage_bytes(cfg.dtype, 1));
    PlanKey key{&node, p.m, n, p.k, p.batch, p.stride_a, p.stride_b, p.stride_d, ld == n ? 0 : ld, ld_a, p.c_role, {}};
    key.align = {alignment_of(b, p.batch > 1 ? p.stride_b * esize : 0), alignment_of(a, p.batch > 1 ? p.stride_a * esize : 0),
                 alignment_of(c_ptr, p.batch > 1 ? p.stride_d * esize : 0),
                 alignment_of(d, p.batch > 1 ? p.stride_d * esize : 0)};
    const Plan* plan = cache_.find(key);
    std::unique_ptr<Plan> local;  // owned here only when the cache is full
    if (!plan) {
      local = std::make_unique<Plan>();
      std::array<cublasLtMatmulHeuristicResult_t, kMaxHeuristics> results{};
      int found = 0;
      INGOT_RETURN_IF_ERROR(build_plan(node, cfg, handle, key, bias, local.get(), &results, &found));
      // A shape may have fewer algorithms than the one this tactic was tuned on: take the last.
      const cublasLtMatmulHeuristicResult_t& h = results[static_cast<size_t>(std::min(index, found - 1))];
      local->algo = h.algo;
      local->workspace = h.workspaceSize;
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    cublasLtMatmulDescOpaque_t desc;
    INGOT_RETURN_IF_ERROR(init_desc(node, cfg, p.c_role, bias, &desc));
    float alpha = spec.alpha;
    float beta = residual ? 1.0f : p.c_role == CRole::kMatrix ? spec.beta : 0.0f;
    // cuBLASLt's API takes non-const layout handles; it does not write them.
    auto* lt_a = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_a);
    auto* lt_b = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_b);
    auto* lt_d = const_cast<cublasLtMatrixLayoutOpaque_t*>(&plan->lt_d);
    INGOT_CUBLAS_CHECK(cublasLtMatmul(handle, &desc, &alpha, b, lt_a, a, lt_b, &beta, c_ptr, lt_d, d, lt_d, &plan->algo,
                                      workspace, kWorkspaceBytes, stream),
                       node);
    return Status::Ok();
  }

  int index_;
  bool tf32_;
  OddN odd_;
  bool conv_;  // "cuda.cublaslt.conv.<i>": a 1x1 channels-last FusedConv (conv_is_gemm)
  mutable PlanCache<Plan> cache_;
};

// How many heuristic algorithms cuBLASLt offers for the node's shapes (symbolic dims taken as
// kGuessDim); 1 when that cannot be asked (no device, unknown shapes, any error). For the split
// (and padded) or rows variants: for their first GEMM, and 0 where they do not apply (unknown
// shapes too).
int heuristic_count(const ir::Node& node, const std::vector<ir::TensorType>& inputs, bool tf32,
                    OddN odd = OddN::kNone) {
  constexpr int64_t kGuessDim = 64;
  const bool split = odd != OddN::kNone;
  const int none = split ? 0 : 1;
  if (!cuda_device_present()) return none;
  auto spec = parse_spec(node);
  if (!spec.ok()) return none;
  auto concrete = [&](size_t i) -> Shape64 {
    Shape64 s;
    for (const ir::Dim& d : inputs[i].shape.dims()) s.push_back(d.is_known() ? d.value() : kGuessDim);
    return s;
  };
  Shape64 as = concrete(0), bs = concrete(1), cs;
  if (spec->c_input >= 0) cs = concrete(static_cast<size_t>(spec->c_input));
  auto p = plan_problem(node, *spec, as, bs, spec->c_input >= 0 ? &cs : nullptr);
  if (!p.ok() || p->m == 0 || p->n == 0 || p->k == 0) return none;
  const int64_t esize = static_cast<int64_t>(storage_bytes(inputs[0].dtype, 1));
  int64_t m = p->m, n = p->n, ld = 0, ld_a = 0;
  if (split) {
    for (size_t i = 0; i < 2; ++i)
      for (const ir::Dim& d : inputs[i].shape.dims())
        if (!d.is_known()) return 0;
    if (!wants_split(p->n, p->batch, esize, spec->trans_b, spec->residual_input >= 0, p->c_role == CRole::kMatrix))
      return 0;
    n = aligned_n(p->n, esize);
    ld = padded_n(p->n, esize);
    if (odd == OddN::kRows) {
      const bool epilogue_act = spec->act == Activation::kRelu || spec->act == Activation::kGeluTanh;
      if (!wants_rows(p->m, p->n, p->k, p->batch, esize, spec->trans_a, spec->trans_b, spec->residual_input >= 0,
                      p->c_role == CRole::kMatrix, p->c_role == CRole::kBias, epilogue_act))
        return 0;
      const int64_t unit = 16 / esize;  // row group 0: every unit-th row, columns [0, n rounded down)
      m = (p->m + unit - 1) / unit;
      ld = unit * p->n;
      ld_a = unit * p->k;
    }
  }
  auto handle = cublaslt_handle(node);
  if (!handle.ok()) return none;
  LaunchConfig cfg{inputs[0].dtype, tf32, &*spec};
  PlanKey key{&node, m, n, p->k, p->batch, p->stride_a, p->stride_b, p->stride_d, ld, ld_a, p->c_role, {256, 256, 256, 256}};
  Plan plan;
  std::array<cublasLtMatmulHeuristicResult_t, kMaxHeuristics> results{};
  int found = 0;
  if (!build_plan(node, cfg, *handle, key, nullptr, &plan, &results, &found).ok()) return none;
  return std::max(1, std::min(found, kMaxHeuristics));
}

std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (!handles_op(node) || inputs.size() < 2) return out;
  int n = heuristic_count(node, inputs, false);
  // A misaligned N: the split variants first, interleaved, so the autotuner's first few (4 at
  // the default level) include them; appended after the four plain ones they were never timed
  // (GPT-2's LM head kept cuda.cublaslt.0 at 3.1 ms in the census of 2026-12-02).
  const bool half = inputs[0].dtype != DataType::kFloat32;
  const int ns = half ? heuristic_count(node, inputs, false, OddN::kSplit) : 0;
  const int nr = half ? heuristic_count(node, inputs, false, OddN::kRows) : 0;
  for (int i = 0; i < std::max({n, ns, nr}); ++i) {
    if (i < nr) out.push_back(std::make_unique<CublasLtTactic>(i, false, OddN::kRows));
    if (i < ns) out.push_back(std::make_unique<CublasLtTactic>(i, false, OddN::kSplit));
    if (i < ns) out.push_back(std::make_unique<CublasLtTactic>(i, false, OddN::kPadded));
    if (i < n) out.push_back(std::make_unique<CublasLtTactic>(i, false));
  }
  // TF32 variants come after the exact ones: the builder keeps them only when TF32 is allowed.
  if (inputs[0].dtype == DataType::kFloat32) {
    int nt = heuristic_count(node, inputs, true);
    for (int i = 0; i < nt; ++i) out.push_back(std::make_unique<CublasLtTactic>(i, true));
  }
  return out;
}

// The conv family's one candidate: cuBLASLt's first heuristic algorithm for a 1x1 channels-last
// FusedConv, exact (no TF32 variant: an fp32 conv stays with cuDNN, which the TF32 setting governs).
std::vector<std::unique_ptr<Tactic>> conv_candidates(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (node.op_type() != "FusedConv" || !conv_is_gemm(node) || inputs.size() < 2 || inputs[0].dtype == DataType::kFloat32) return out;
  auto t = std::make_unique<CublasLtTactic>(0, false, OddN::kNone, true);
  if (t->supports(node, inputs) && heuristic_count(node, inputs, false) >= 1) out.push_back(std::move(t));
  return out;
}

// The index after `prefix` in `name`: 0 <= i < kMaxHeuristics, else -1.
int name_index(const std::string& name, const char* prefix) {
  std::string digits = name.substr(std::strlen(prefix));
  if (digits.size() != 1 || digits[0] < '0' || digits[0] >= '0' + kMaxHeuristics) return -1;
  return digits[0] - '0';
}

// "cuda.cublaslt.conv.<i>" with 0 <= i < kMaxHeuristics, params as the GEMM tactics'.
std::unique_ptr<Tactic> create_conv(const std::string& name, const std::vector<uint8_t>& params) {
  if (name.rfind(kConvPrefix, 0) != 0) return nullptr;
  const int index = name_index(name, kConvPrefix);
  if (index < 0) return nullptr;
  if (!params.empty() && (params.size() != 3 || params[0] != 1 || params[1] != index || params[2] != 0)) return nullptr;
  return std::make_unique<CublasLtTactic>(index, false, OddN::kNone, true);
}

// "cuda.cublaslt.<i>" / ".tf32.<i>" / ".padded.<i>" / ".split.<i>" / ".rows.<i>" with 0 <= i < kMaxHeuristics.
std::unique_ptr<Tactic> create(const std::string& name, const std::vector<uint8_t>& params) {
  if (name.rfind(kConvPrefix, 0) == 0) return nullptr;  // the conv family's
  const char* prefix = nullptr;
  for (const char* pre : {kTf32Prefix, kPaddedPrefix, kSplitPrefix, kRowsPrefix, kPrefix})
    if (name.rfind(pre, 0) == 0) {
      prefix = pre;
      break;
    }
  if (!prefix) return nullptr;
  const bool tf32 = prefix == kTf32Prefix;
  const OddN odd = prefix == kPaddedPrefix ? OddN::kPadded
                   : prefix == kSplitPrefix ? OddN::kSplit
                   : prefix == kRowsPrefix  ? OddN::kRows
                                            : OddN::kNone;
  const int index = name_index(name, prefix);
  if (index < 0) return nullptr;
  if (!params.empty() && (params.size() != 3 || params[0] != 1 || params[1] != index || params[2] != (tf32 ? 1 : 0)))
    return nullptr;
  return std::make_unique<CublasLtTactic>(index, tf32, odd);
}

}  // namespace

TacticFamily cublaslt_family() { return TacticFamily{"cublaslt", candidates, create}; }
TacticFamily cublaslt_conv_family() { return TacticFamily{"cublaslt.conv", conv_candidates, create_conv}; }

}  // namespace ingot::backend::cuda
