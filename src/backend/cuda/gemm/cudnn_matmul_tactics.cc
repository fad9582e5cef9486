// Copyright ingot authors. Apache-2.0.
//
// cuDNN's graph API as a GEMM tactic for the epilogue cuBLASLt lacks: ingot::FusedGemm (kind
// "matmul") with exact (erf) Gelu. cuBLASLt's GELU epilogue is the tanh approximation (up to
// 4.7e-4 apart, 5 % of the value near x = -2.7), so the cuBLASLt tactics run the bias epilogue
// and then our Gelu kernel over the whole output: at BERT-base batch 64 that second pass over a
// 50 MB activation cost ~45 us of the FFN's ~115 us. Here matmul -> + bias -> GELU_FWD is one
// cuDNN operation graph (fp32 compute and intermediates), which cuDNN's runtime-fusion engines
// run as one kernel. The autotuner times it against the cuBLASLt candidates. At BERT b64 the first
// plan of heuristics mode A lost to cuBLASLt + the Gelu pass, so, as the graph-API conv family
// does, "cuda.cudnn.matmul.<i>" is the i-th plan of heuristics A + fallback that builds, for the
// first kMaxCandidates (few: cuBLASLt's own top candidates must stay inside the autotuner's width).
//
// Taken: fp16/bf16 A [..., M, K] (leading dims folded into M), a 2-D B [K, N] (the weights) of
// the same type, an optional bias [N], activation Gelu, alpha = 1, no residual. A tactic builds its
// plan per M on first use, cached in the tactic; execution passes pointers in ascending UID order
// (no host allocation).
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <cuda_runtime_api.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/plan_cache.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_matmul_family();

namespace {

namespace fe = cudnn_frontend;

constexpr const char* kPrefix = "cuda.cudnn.matmul.";
constexpr int kMaxCandidates = 2;
constexpr int64_t kWorkspaceBytes = 32ll << 20;
enum : int64_t { kUidA = 1, kUidB = 2, kUidBias = 3, kUidY = 4 };

struct MatmulKey {
  const ir::Node* node = nullptr;
  DataType type = DataType::kFloat16;
  int64_t m = 0, n = 0, k = 0;
  bool bias = false;
  bool operator==(const MatmulKey& o) const {
    return node == o.node && type == o.type && m == o.m && n == o.n && k == o.k && bias == o.bias;
  }
};

struct MatmulPlan {
  MatmulKey key;
  std::shared_ptr<SharedGraph> shared;  // keeps the process's graph alive
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan_index = 0;
};

// What make_graph builds from (not the node) and the device.
std::string graph_signature(const MatmulKey& k) {
  return device_tag() + "matmul t" + std::to_string(static_cast<int>(k.type)) + " " + std::to_string(k.m) + "x" +
         std::to_string(k.k) + "x" + std::to_string(k.n) + " b" + std::to_string(k.bias);
}

/// What the node must be for this tactic (types and shapes from the builder).
bool takes(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  if (node.domain() != "ingot" || node.op_type() != "FusedGemm") return false;
  const ir::Attributes& a = node.attrs();
  if (a.get_string("kind", "gemm") != "matmul" || a.get_string("activation", "") != "Gelu") return false;
  if (a.get_float("alpha", 1.0f) != 1.0f || a.get_int("transA", 0) != 0 || a.get_int("transB", 0) != 0) return false;
  if (in.size() < 2 || in.size() > 3) return false;  // no residual
  const DataType t = in[0].dtype;
  if (t != DataType::kFloat16 && t != DataType::kBFloat16) return false;
  if (in[1].dtype != t || !node.output(0) || node.output(0)->dtype() != t) return false;
  const ir::Shape& x = in[0].shape;
  const ir::Shape& w = in[1].shape;
  if (!x.rank_known() || x.rank() < 2 || !w.is_concrete() || w.rank() != 2) return false;
  if (!x[x.rank() - 1].is_known() || x[x.rank() - 1].value() != w[0].value()) return false;
  if (in.size() == 3 && in[2].dtype != DataType::kUndefined) {
    if (in[2].dtype != t || !in[2].shape.is_concrete() || shape_numel(in[2].shape.concrete()) != w[1].value()) return false;
  }
  // K and N multiples of 8 keep every row 16-byte aligned, as cuDNN's tensor-core engines want.
  return w[0].value() % 8 == 0 && w[1].value() % 8 == 0;
}

/// The operation graph with its execution plans listed (none built yet).
Result<std::shared_ptr<fe::graph::Graph>> make_graph(const ir::Node& node, const MatmulKey& k, cudnnHandle_t handle) {
  auto g = std::make_shared<fe::graph::Graph>();
  const fe::DataType_t io = fe_type(k.type);
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  auto A = g->tensor(fe::graph::Tensor_attributes().set_name("a").set_uid(kUidA).set_dim({1, k.m, k.k})
                         .set_stride({k.m * k.k, k.k, 1}).set_data_type(io));
  auto B = g->tensor(fe::graph::Tensor_attributes().set_name("b").set_uid(kUidB).set_dim({1, k.k, k.n})
                         .set_stride({k.k * k.n, k.n, 1}).set_data_type(io));
  auto C = g->matmul(A, B, fe::graph::Matmul_attributes().set_name("mm").set_compute_data_type(fe::DataType_t::FLOAT));
  C->set_data_type(fe::DataType_t::FLOAT);
  auto x = C;
  if (k.bias) {
    auto bias = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kUidBias).set_dim({1, 1, k.n})
                              .set_stride({k.n, k.n, 1}).set_data_type(io));
    x = g->pointwise(x, bias, fe::graph::Pointwise_attributes().set_name("bias").set_mode(fe::PointwiseMode_t::ADD)
                                  .set_compute_data_type(fe::DataType_t::FLOAT));
    x->set_data_type(fe::DataType_t::FLOAT);
  }
  auto Y = g->pointwise(x, fe::graph::Pointwise_attributes().set_name("gelu").set_mode(fe::PointwiseMode_t::GELU_FWD)
                               .set_compute_data_type(fe::DataType_t::FLOAT));
  Y->set_output(true).set_uid(kUidY).set_dim({1, k.m, k.n}).set_stride({k.m * k.n, k.n, 1}).set_data_type(io);
  INGOT_FE_CHECK(g->validate(), node, "matmul validate");
  INGOT_FE_CHECK(g->build_operation_graph(handle), node, "matmul operation graph");
  INGOT_FE_CHECK(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), node, "matmul heuristics");
  g->deselect_workspace_greater_than(kWorkspaceBytes);
  INGOT_FE_CHECK(g->check_support(handle), node, "matmul support");
  return g;
}

/// The plan for `k` that is the index-th to build among the heuristics' list; the graph and its
/// plans are the process's (SharedGraph): candidate lists asked by the split, precision and tactic
/// phases built and compiled them again each time (BERT-base b32: 9.4 of 16.6 s of its build in
/// the precision phase, census 2026-12-02).
Status build_plan(const ir::Node& node, const MatmulKey& k, int index, cudnnHandle_t handle, MatmulPlan* plan) {
  plan->key = k;
  plan->shared = shared_graph(graph_signature(k));
  SharedGraph& sg = *plan->shared;
  std::lock_guard<std::mutex> lock(sg.mu);
  INGOT_RETURN_IF_ERROR(ensure_graph(sg, [&] { return make_graph(node, k, handle); }));
  plan->graph = sg.graph;
  const int64_t count = static_cast<int64_t>(sg.built.size());
  int built = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!plan_builds(sg, handle, i)) continue;
    int64_t ws = 0;
    if (!plan->graph->get_workspace_size_plan_at_index(i, ws).is_good() || ws > kWorkspaceBytes) continue;
    if (built++ < index) continue;
    plan->plan_index = i;
    return Status::Ok();
  }
  return unsupported(node.describe(), ": cuDNN matmul has ", built, " buildable plans of ", count, ", no plan number ",
                     index);
}

class CudnnMatmulTactic final : public Tactic {
 public:
  explicit CudnnMatmulTactic(int index) : index_(index) {}
  std::string name() const override { return kPrefix + std::to_string(index_); }
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override { return takes(node, in); }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return kWorkspaceBytes; }
  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    if (io.inputs.size() < 2 || !io.inputs[0] || !io.inputs[1] || !io.outputs || io.outputs->empty())
      return internal_error(node.describe(), ": A, B and Y must be given");
    const Tensor& a = *io.inputs[0];
    const Tensor& b = *io.inputs[1];
    const Tensor* bias = io.inputs.size() > 2 ? io.inputs[2] : nullptr;
    Tensor& y = (*io.outputs)[0];
    if (a.rank() < 2 || b.rank() != 2 || a.dim(a.rank() - 1) != b.dim(0) || a.dtype() != b.dtype() ||
        y.dtype() != a.dtype() || (bias && (bias->numel() != b.dim(1) || bias->dtype() != a.dtype())))
      return invalid_argument(node.describe(), ": A ", shape_to_string(a.shape()), " and B ",
                              shape_to_string(b.shape()), " do not make a matmul this tactic runs");
    MatmulKey key;
    key.node = &node;
    key.type = a.dtype();
    key.k = b.dim(0);
    key.n = b.dim(1);
    key.m = key.k ? a.numel() / key.k : 0;
    key.bias = bias != nullptr;
    if (y.numel() != key.m * key.n)
      return invalid_argument(node.describe(), ": Y ", shape_to_string(y.shape()), " is not [", key.m, ", ", key.n, "]");
    if (key.m == 0 || key.n == 0) return Status::Ok();
    if (!io.workspace) return internal_error(node.describe(), ": no workspace");
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const MatmulPlan* plan = cache_.find(key);
    std::unique_ptr<MatmulPlan> local;
    if (!plan) {
      local = std::make_unique<MatmulPlan>();
      INGOT_RETURN_IF_ERROR(build_plan(node, key, index_, handle, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
    std::array<void*, 4> ptrs{};  // ascending UIDs: a, b, [bias], y
    int n = 0;
    ptrs[n++] = const_cast<void*>(a.raw());
    ptrs[n++] = const_cast<void*>(b.raw());
    if (bias) ptrs[n++] = const_cast<void*>(bias->raw());
    ptrs[n++] = y.mutable_raw();
    fe::error_t st = plan->graph->execute_plan_at_index(handle, ptrs.data(), n, io.workspace, plan->plan_index);
    if (!st.is_good()) return internal_error(node.describe(), ": cuDNN matmul execute failed: ", st.get_message());
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override { return {1, static_cast<uint8_t>(index_)}; }

 private:
  int index_;
  mutable PlanCache<MatmulPlan> cache_;
};

// How many plans to offer: those that build at the node's shapes (an unknown M guessed as 128), up
// to kMaxCandidates; none when cuDNN takes no plan.
int offered(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  if (!cuda_device_present() || !takes(node, in)) return 0;
  const ir::Shape& x = in[0].shape;
  MatmulKey key;
  key.node = &node;
  key.type = in[0].dtype;
  key.k = in[1].shape[0].value();
  key.n = in[1].shape[1].value();
  key.m = 1;
  for (size_t i = 0; i + 1 < x.rank(); ++i) key.m *= x[i].is_known() ? x[i].value() : 128;
  key.bias = in.size() == 3 && in[2].dtype != DataType::kUndefined;
  auto handle = cudnn_thread_handle(node);
  if (!handle.ok()) return 0;
  int n = 0;
  for (; n < kMaxCandidates; ++n) {
    MatmulPlan plan;
    if (!build_plan(node, key, n, *handle, &plan).ok()) break;
  }
  return n;
}

}  // namespace

TacticFamily cudnn_matmul_family() {
  TacticFamily f;
  f.name = "cudnn.matmul";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    const int n = offered(node, inputs);
    for (int i = 0; i < n; ++i) out.push_back(std::make_unique<CudnnMatmulTactic>(i));
    return out;
  };
  // "cuda.cudnn.matmul.<i>" with 0 <= i < kMaxCandidates; params empty or {1, i}.
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    const int index = conv_tactic_index(name, kPrefix, kMaxCandidates, params);
    return index < 0 ? nullptr : std::make_unique<CudnnMatmulTactic>(index);
  };
  return f;
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
