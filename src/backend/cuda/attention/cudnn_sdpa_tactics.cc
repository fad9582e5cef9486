// Copyright ingot authors. Apache-2.0.
//
// cuDNN's fused scaled dot-product attention (graph API through cudnn-frontend) as a tactic for
// the attention nodes our own kernels also take (attention_tactics.cc): the autotuner times it
// against them. fp16/bf16 Q/K/V/Y in [B, H, S, D] or [B, S, H*D] (given to cuDNN as strides),
// GQA, head sizes up to 128 (multiples of 8), an optional additive float mask broadcastable to
// [B, Hq, Sq, Sk] (cuDNN's bias input), is_causal (top-left aligned) and the scale. Refused: bool
// masks and masks with fewer keys than K (the reference hides the rest), fp32.
//
// "cuda.cudnn.sdpa" builds one operation graph per call shape on first use (the first plan of
// heuristics mode A that builds), cached in the tactic and read lock-free; execution passes
// device pointers in ascending tensor-UID order (cudnn-frontend's variant-pack template), so a
// steady-state call allocates nothing on the host.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/attention/attention_params.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/plan_cache.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_sdpa_family();

namespace {

namespace fe = cudnn_frontend;

constexpr const char* kName = "cuda.cudnn.sdpa";
constexpr int64_t kWorkspaceBytes = 64ll << 20;
enum : int64_t { kUidQ = 1, kUidK = 2, kUidV = 3, kUidBias = 4, kUidO = 5 };

// Everything a plan depends on.
struct SdpaKey {
  const ir::Node* node = nullptr;
  FloatType type = FloatType::kF16, mask_type = FloatType::kF32;
  int64_t dims[6] = {};  // batch, q_heads, kv_heads, q_len, kv_len, head_size
  int64_t strides[12] = {};
  bool mask = false;
  int64_t mask_dims[4] = {}, mask_strides[4] = {};
  float scale = 1.0f;
  bool causal = false;
  bool operator==(const SdpaKey& o) const {
    return node == o.node && type == o.type && mask_type == o.mask_type && std::equal(dims, dims + 6, o.dims) &&
           std::equal(strides, strides + 12, o.strides) && mask == o.mask &&
           std::equal(mask_dims, mask_dims + 4, o.mask_dims) && std::equal(mask_strides, mask_strides + 4, o.mask_strides) &&
           scale == o.scale && causal == o.causal;
  }
};

Result<SdpaKey> make_key(const ir::Node& node, const AttentionParams& p, const Tensor* mask) {
  if (p.type != FloatType::kF16 && p.type != FloatType::kBF16)
    return unsupported(node.describe(), ": cuDNN SDPA runs fp16/bf16 here");
  if (p.head_size > 128 || p.head_size % 8 != 0)
    return unsupported(node.describe(), ": head size ", p.head_size, " (cuDNN SDPA: multiples of 8 up to 128)");
  SdpaKey k;
  k.node = &node;
  k.type = p.type;
  const int64_t dims[6] = {p.batch, p.q_heads, p.kv_heads, p.q_len, p.kv_len, p.head_size};
  std::copy(dims, dims + 6, k.dims);
  for (int i = 0; i < 3; ++i) {
    k.strides[i] = p.q_stride[i];
    k.strides[3 + i] = p.k_stride[i];
    k.strides[6 + i] = p.v_stride[i];
    k.strides[9 + i] = p.y_stride[i];
  }
  k.scale = p.scale;
  k.causal = p.causal;
  if (p.mask_kind == AttentionMask::kBool) return unsupported(node.describe(), ": bool mask (cuDNN SDPA takes a bias)");
  if (p.mask_kind == AttentionMask::kAdditive) {
    if (!mask || p.mask_kv_len != p.kv_len)
      return unsupported(node.describe(), ": a mask with fewer keys than K");
    if (p.mask_batch_period > 0 && p.mask_batch_period != p.batch && mask->rank() == 4 && mask->dim(0) != 1)
      return unsupported(node.describe(), ": a mask repeating every ", p.mask_batch_period,
                         " batch entries (mask_batch_period; cuDNN's bias broadcasts only)");
    k.mask = true;
    k.mask_type = p.mask_type;
    const size_t mr = mask->rank();
    for (size_t i = 0; i < 4; ++i) k.mask_dims[i] = i < 4 - mr ? 1 : mask->dim(i - (4 - mr));
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      k.mask_strides[i] = stride;
      stride *= k.mask_dims[i];
    }
  }
  return k;
}

struct SdpaPlan {
  SdpaKey key;
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

Status build_plan(const ir::Node& node, const SdpaKey& k, cudnnHandle_t handle, SdpaPlan* plan) {
  plan->key = k;
  const fe::DataType_t io = fe_type(k.type);
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t B = k.dims[0], Hq = k.dims[1], Hk = k.dims[2], Sq = k.dims[3], Sk = k.dims[4], D = k.dims[5];
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dims, const int64_t* s) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(std::move(dims))
                         .set_stride({s[0], s[1], s[2], 1})
                         .set_data_type(io));
  };
  auto Q = tensor("q", kUidQ, {B, Hq, Sq, D}, k.strides);
  auto K = tensor("k", kUidK, {B, Hk, Sk, D}, k.strides + 3);
  auto V = tensor("v", kUidV, {B, Hk, Sk, D}, k.strides + 6);
  auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(k.scale);
  if (k.causal) options.set_causal_mask(true);
  if (k.mask) {
    auto bias = g->tensor(fe::graph::Tensor_attributes()
                              .set_name("bias")
                              .set_uid(kUidBias)
                              .set_dim({k.mask_dims[0], k.mask_dims[1], k.mask_dims[2], k.mask_dims[3]})
                              .set_stride({k.mask_strides[0], k.mask_strides[1], k.mask_strides[2], k.mask_strides[3]})
                              .set_data_type(fe_type(k.mask_type)));
    options.set_bias(bias);
  }
  auto [O, stats] = g->sdpa(Q, K, V, options);
  (void)stats;
  O->set_output(true).set_uid(kUidO).set_dim({B, Hq, Sq, D}).set_stride({k.strides[9], k.strides[10], k.strides[11], 1});
  INGOT_FE_CHECK(g->validate(), node, "SDPA validate");
  INGOT_FE_CHECK(g->build_operation_graph(handle), node, "SDPA operation graph");
  INGOT_FE_CHECK(g->create_execution_plans({fe::HeurMode_t::A}), node, "SDPA heuristics");
  g->deselect_workspace_greater_than(kWorkspaceBytes);
  INGOT_FE_CHECK(g->check_support(handle), node, "SDPA support");
  INGOT_FE_CHECK(g->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), node, "SDPA plan");
  int64_t ws = 0;
  INGOT_FE_CHECK(g->get_workspace_size(ws), node, "SDPA workspace");
  if (ws > kWorkspaceBytes) return unsupported(node.describe(), ": cuDNN SDPA wants ", ws, " workspace bytes");
  plan->workspace = ws;
  plan->graph = std::move(g);
  return Status::Ok();
}

class CudnnSdpaTactic : public Tactic {
 public:
  std::string name() const override { return kName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    int64_t d = 0;
    FloatType t;
    if (!attention_supports_node(node, in, &d, &t)) return false;
    if (t != FloatType::kF16 && t != FloatType::kBF16) return false;
    if (d > 128 || d % 8 != 0) return false;
    return !(in.size() > 3 && in[3].dtype == DataType::kBool);
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return kWorkspaceBytes; }

  Status prepare(const ir::Node& node) override { return cudnn_thread_handle(node).status(); }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr) return internal_error(kName, ": step without a node");
    const ir::Node& node = *io.node;
    AttentionParams p;
    INGOT_RETURN_IF_ERROR(make_attention_params(node, io, &p));
    if ((*io.outputs)[0].numel() == 0) return Status::Ok();
    const Tensor* mask = io.inputs.size() > 3 ? io.inputs[3] : nullptr;
    INGOT_ASSIGN_OR_RETURN(SdpaKey key, make_key(node, p, mask));
    if (!io.workspace) return internal_error(node.describe(), ": no workspace");
    INGOT_ASSIGN_OR_RETURN(cudnnHandle_t handle, cudnn_thread_handle(node));
    const SdpaPlan* plan = cache_.find(key);
    std::unique_ptr<SdpaPlan> local;
    if (!plan) {
      local = std::make_unique<SdpaPlan>();
      INGOT_RETURN_IF_ERROR(build_plan(node, key, handle, local.get()));
      plan = cache_.insert(local);
      if (!plan) plan = local.get();
    }
    INGOT_CUDNN_CHECK(cudnnSetStream(handle, static_cast<cudaStream_t>(io.stream)), node);
    std::array<void*, 5> ptrs{};  // ascending UIDs: q, k, v, [bias], o
    int n = 0;
    ptrs[n++] = const_cast<void*>(p.q);
    ptrs[n++] = const_cast<void*>(p.k);
    ptrs[n++] = const_cast<void*>(p.v);
    if (key.mask) ptrs[n++] = const_cast<void*>(p.mask);
    ptrs[n++] = p.y;
    fe::error_t st = plan->graph->execute(handle, ptrs.data(), n, io.workspace);
    if (!st.is_good()) return internal_error(node.describe(), ": cuDNN SDPA execute failed: ", st.get_message());
    INGOT_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  }

 private:
  mutable PlanCache<SdpaPlan> cache_;
};

// Offered when cuDNN builds a plan at the node's shapes (symbolic dims guessed: batch 1, 128).
bool offered(const ir::Node& node, const std::vector<ir::TensorType>& packed_in) {
  if (!cuda_device_present()) return false;
  int64_t d = 0;
  FloatType t;
  if (!attention_supports_node(node, packed_in, &d, &t)) return false;
  const std::vector<ir::TensorType> in = unpacked_attention_inputs(node, packed_in);
  // Packed Q/K/V rows are three heads-widths apart (the plan is built for the real strides).
  const int64_t qkv_rows = attention_qkv_packed(node) ? 3 : 1;
  const ir::Shape& q = in[0].shape;
  const ir::Shape& kk = in[1].shape;
  auto dim = [](const ir::Shape& s, size_t i, int64_t guess) { return s[i].is_known() ? s[i].value() : guess; };
  AttentionParams p;
  p.type = t;
  p.head_size = d;
  p.batch = dim(q, 0, 1);
  if (q.rank() == 4) {
    p.q_heads = dim(q, 1, 1);
    p.kv_heads = dim(kk, 1, 1);
    p.q_len = dim(q, 2, 128);
    p.kv_len = dim(kk, 2, 128);
  } else {
    p.q_heads = node.attrs().get_int("q_num_heads", 1);
    p.kv_heads = node.attrs().get_int("kv_num_heads", 1);
    p.q_len = dim(q, 1, 128);
    p.kv_len = dim(kk, 1, 128);
  }
  auto dense = [&](int64_t heads, int64_t len, int64_t rows, int64_t (&s)[3]) {
    if (q.rank() == 4) {
      s[0] = heads * len * d;
      s[1] = len * d;
      s[2] = d;
    } else {
      s[0] = len * rows * heads * d;
      s[1] = d;
      s[2] = rows * heads * d;
    }
  };
  dense(p.q_heads, p.q_len, qkv_rows, p.q_stride);
  dense(p.kv_heads, p.kv_len, qkv_rows, p.k_stride);
  dense(p.kv_heads, p.kv_len, qkv_rows, p.v_stride);
  dense(p.q_heads, p.q_len, 1, p.y_stride);
  const ir::Attributes& a = node.attrs();
  p.scale = a.has("scale") ? a.get_float("scale", 1.0f) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  p.causal = a.get_int("is_causal", 0) != 0;
  Tensor mask;
  if (in.size() > 3 && in[3].dtype != DataType::kUndefined) {
    FloatType mt;
    if (in[3].dtype == DataType::kFloat32) mt = FloatType::kF32;
    else if (in[3].dtype == DataType::kFloat16) mt = FloatType::kF16;
    else if (in[3].dtype == DataType::kBFloat16) mt = FloatType::kBF16;
    else return false;
    const ir::Shape& ms = in[3].shape;
    Shape64 mdims;
    const int64_t full[4] = {p.batch, p.q_heads, p.q_len, p.kv_len};
    for (size_t i = 0; i < ms.rank(); ++i) mdims.push_back(dim(ms, i, full[4 - ms.rank() + i]));
    auto m = Tensor::zeros(in[3].dtype, mdims);  // host: only its dims are read
    if (!m.ok()) return false;
    mask = std::move(*m);
    p.mask_kind = AttentionMask::kAdditive;
    p.mask_type = mt;
    p.mask_kv_len = mdims.empty() ? 1 : mdims.back();
  }
  auto key = make_key(node, p, mask.defined() ? &mask : nullptr);
  if (!key.ok()) return false;
  auto handle = cudnn_thread_handle(node);
  if (!handle.ok()) return false;
  SdpaPlan plan;
  return build_plan(node, *key, *handle, &plan).ok();
}

}  // namespace

TacticFamily cudnn_sdpa_family() {
  TacticFamily f;
  f.name = "cudnn.sdpa";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    auto t = std::make_unique<CudnnSdpaTactic>();
    if (t->supports(node, inputs) && offered(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    if (name == kName) return std::make_unique<CudnnSdpaTactic>();
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
