// Copyright ingot authors. Apache-2.0.
//
// The attention tactic family of the cuda backend (host side): fused scaled dot-product
// attention for ingot::Attention (what recognize_attention produces) and ai.onnx Attention
// (opset 23+), 4-D [B, H, S, D] or 3-D [B, S, H*D] with q_num_heads / kv_num_heads, GQA
// (q heads a multiple of kv heads), an optional boolean or additive mask broadcastable to
// [B, Hq, Sq, Sk] (a shorter last axis hides the keys past it), is_causal and scale (default
// 1/sqrt(D)), and ingot::Attention's strided views (ir/ops/attention_views.h: Q/K/V/Y read and
// written in place inside other tensors; the kernels take any strides). Two tactics:
//  - cuda.attention.flash: fp16/bf16, head sizes 32/64/80/96/128, tensor cores; at run time a
//    view the kernel cannot read (not 16-byte aligned) takes the generic kernel instead;
//  - cuda.attention.generic: fp32/fp16/bf16, any head size up to 128, CUDA cores.
// Refused (the host fallback runs them): past key/value, nonpad_kv_seqlen, the present and
// qk_matmul outputs, softcap, sliding windows, V head size unlike Q's, unknown head sizes.
// Tactics hold no per-node state (serialize() is empty): enqueue reads the node and the current
// shapes, and allocates nothing.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/attention/attention_params.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"
#include "ir/ops/attention_views.h"

namespace ingot::backend::cuda {
namespace {

constexpr char kShortName[] = "cuda.attention.flash_short";
constexpr char kFlashName[] = "cuda.attention.flash";
constexpr char kGenericName[] = "cuda.attention.generic";

bool is_attention(const ir::Node& n) {
  if (n.op_type() != "Attention") return false;
  if (n.domain() == "ingot") return true;
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  return n.owner() == nullptr || n.owner()->opset(n.domain()) >= 23;
}


bool has_input(const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && in[i].dtype != DataType::kUndefined;
}

bool known(const ir::Shape& s, size_t i) { return s.rank_known() && i < s.rank() && s[i].is_known(); }

/// The head size every tactic needs to know at build time (Q's, equal to K's and V's); 0 when
/// the node is not one this family runs.
int64_t static_head_size(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  const ir::Shape& q = in[0].shape;
  const ir::Shape& k = in[1].shape;
  const ir::Shape& v = in[2].shape;
  if (!q.rank_known() || !k.rank_known() || !v.rank_known()) return 0;
  const size_t rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank) return 0;
  if (rank == 4) {
    if (!known(q, 3) || !known(k, 3) || !known(v, 3)) return 0;
    const int64_t d = q[3].value();
    return k[3].value() == d && v[3].value() == d ? d : 0;
  }
  const int64_t hq = node.attrs().get_int("q_num_heads", 0), hkv = node.attrs().get_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0 || !known(q, 2) || !known(k, 2) || !known(v, 2)) return 0;
  if (q[2].value() % hq != 0) return 0;
  const int64_t d = q[2].value() / hq;
  return k[2].value() == hkv * d && v[2].value() == hkv * d ? d : 0;
}

}  // namespace

/// Everything but the kernel's own limits (type, head size).
bool attention_qkv_packed(const ir::Node& node) {
  return node.domain() == "ingot" && node.attrs().get_int("qkv_packed", 0) != 0;
}

std::vector<ir::TensorType> unpacked_attention_inputs(const ir::Node& node, const std::vector<ir::TensorType>& in) {
  if (node.domain() == "ingot" && ir::attention_has_views(node.attrs()) && in.size() >= 3) {
    // Strided views: the [B, H, S, D] tensors the views describe (invalid views: unknown shapes,
    // which no tactic takes).
    ir::AttentionViews v;
    std::vector<ir::TensorType> out = in;
    const bool ok = ir::parse_attention_views(node.attrs(), &v).empty();
    for (int i = 0; i < 3; ++i) {
      const int64_t heads = i == 0 ? v.q_heads : v.kv_heads, len = i == 0 ? v.q_len : v.kv_len;
      out[static_cast<size_t>(i)].shape =
          ok ? ir::Shape{ir::Dim(v.batch), ir::Dim(heads), ir::Dim(len), ir::Dim(v.head_size)} : ir::Shape::unknown_rank();
    }
    return out;
  }
  if (!attention_qkv_packed(node) || in.empty()) return in;
  std::vector<ir::TensorType> out = in;
  out.resize(std::max<size_t>(out.size(), 3));
  ir::TensorType third = in[0];
  const ir::Shape& s = in[0].shape;
  if (s.rank_known() && s.rank() == 3)
    third.shape[2] = s[2].is_known() && s[2].value() % 3 == 0 ? ir::Dim(s[2].value() / 3) : ir::Dim::unknown();
  out[0] = out[1] = out[2] = third;
  return out;
}

bool attention_supports_node(const ir::Node& node, const std::vector<ir::TensorType>& packed_in, int64_t* head_size,
                             FloatType* type) {
  const std::vector<ir::TensorType> in = unpacked_attention_inputs(node, packed_in);
  if (!is_attention(node) || in.size() < 3 || in.size() > 7) return false;
  for (size_t i = 0; i < 3; ++i)
    if (!has_input(in, i)) return false;
  for (size_t i = 4; i < in.size(); ++i)
    if (has_input(in, i)) return false;  // past_key, past_value, nonpad_kv_seqlen
  if (node.outputs().empty() || node.output(0) == nullptr) return false;
  for (size_t o = 1; o < node.outputs().size(); ++o)
    if (node.output(o) != nullptr) return false;  // present_key/value, qk_matmul_output
  const DataType dt = in[0].dtype;
  if (!to_float_type(dt, type) || in[1].dtype != dt || in[2].dtype != dt || node.output(0)->dtype() != dt) return false;
  const ir::Attributes& a = node.attrs();
  if (a.get_float("softcap", 0.0f) != 0.0f) return false;
  if (a.get_int("left_window_size", -1) != -1 || a.get_int("right_window_size", -1) != -1) return false;
  if (has_input(in, 3)) {
    FloatType mt;
    if (in[3].dtype != DataType::kBool && !to_float_type(in[3].dtype, &mt)) return false;
    if (!in[3].shape.rank_known() || in[3].shape.rank() < 1 || in[3].shape.rank() > 4) return false;
  }
  *head_size = static_head_size(node, in);
  return *head_size > 0;
}

namespace {

/// Per-(b, h, s) element strides of a Q/K/V/Y tensor.
void head_strides(const Tensor& t, int64_t heads, int64_t head_size, int64_t (&s)[3]) {
  if (t.rank() == 4) {
    s[0] = t.dim(1) * t.dim(2) * t.dim(3);
    s[1] = t.dim(2) * t.dim(3);
    s[2] = t.dim(3);
  } else {  // [B, S, H*D]
    s[0] = t.dim(1) * t.dim(2);
    s[1] = head_size;
    s[2] = heads * head_size;
  }
}

/// qkv_packed = 1: Q, K and V are the thirds of input 0's last axis [B, S, 3*H*D] (the output of
/// fuse_qkv_projection's GEMM), read in place through their strides.
Status make_packed_qkv_params(const ir::Node& node, const StepIO& io, AttentionParams* p) {
  if (io.inputs.empty() || io.inputs[0] == nullptr || io.outputs == nullptr || io.outputs->empty() ||
      !(*io.outputs)[0].defined())
    return internal_error(node.describe(), ": packed QKV and output Y must be given");
  const Tensor& qkv = *io.inputs[0];
  const Tensor& y = (*io.outputs)[0];
  if (!to_float_type(qkv.dtype(), &p->type) || y.dtype() != qkv.dtype())
    return invalid_argument(node.describe(), ": packed QKV and Y must share one float type, got ",
                            data_type_name(qkv.dtype()), "/", data_type_name(y.dtype()));
  const int64_t h = node.attrs().get_int("q_num_heads", 0);
  if (qkv.rank() != 3 || y.rank() != 3 || h <= 0 || qkv.dim(2) % (3 * h) != 0)
    return invalid_argument(node.describe(), ": packed QKV ", shape_to_string(qkv.shape()),
                            " must be [batch, seq, 3 * heads * head_size] with q_num_heads = ", h);
  const int64_t d = qkv.dim(2) / (3 * h);
  if (y.dim(0) != qkv.dim(0) || y.dim(1) != qkv.dim(1) || y.dim(2) != h * d)
    return invalid_argument(node.describe(), ": Y ", shape_to_string(y.shape()), " must be [", qkv.dim(0), ",",
                            qkv.dim(1), ",", h * d, "] for packed QKV ", shape_to_string(qkv.shape()));
  p->batch = qkv.dim(0);
  p->q_heads = p->kv_heads = h;
  p->q_len = p->kv_len = qkv.dim(1);
  p->head_size = d;
  const size_t elem = storage_bytes(qkv.dtype(), 1);
  const auto* base = static_cast<const uint8_t*>(qkv.raw());
  p->q = base;
  p->k = base + h * d * elem;
  p->v = base + 2 * h * d * elem;
  p->y = (*io.outputs)[0].mutable_raw();
  const int64_t row = 3 * h * d;
  for (int64_t (*st)[3] : {&p->q_stride, &p->k_stride, &p->v_stride}) {
    (*st)[0] = qkv.dim(1) * row;
    (*st)[1] = d;
    (*st)[2] = row;
  }
  p->y_stride[0] = qkv.dim(1) * h * d;
  p->y_stride[1] = d;
  p->y_stride[2] = h * d;
  return Status::Ok();
}

/// Strided views (ir/ops/attention_views.h): Q/K/V/Y at their offsets inside the roots, with
/// the views' strides; each view is checked against its tensor's size.
Status make_view_params(const ir::Node& node, const StepIO& io, AttentionParams* p) {
  if (io.inputs.size() < 3 || io.inputs[0] == nullptr || io.inputs[1] == nullptr || io.inputs[2] == nullptr ||
      io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined())
    return internal_error(node.describe(), ": Q, K, V and output Y must all be given");
  ir::AttentionViews v;
  const std::string why = ir::parse_attention_views(node.attrs(), &v);
  if (!why.empty()) return invalid_argument(node.describe(), ": ", why);
  Tensor& y = (*io.outputs)[0];
  if (!to_float_type(io.inputs[0]->dtype(), &p->type) || io.inputs[1]->dtype() != io.inputs[0]->dtype() ||
      io.inputs[2]->dtype() != io.inputs[0]->dtype() || y.dtype() != io.inputs[0]->dtype())
    return invalid_argument(node.describe(), ": Q, K, V and Y must share one float type");
  const Tensor* t[4] = {io.inputs[0], io.inputs[1], io.inputs[2], &y};
  for (int i = 0; i < 4; ++i)
    if (v.extent(i) > t[i]->numel())
      return invalid_argument(node.describe(), ": the ", "QKVY"[i], " view reaches element ", v.extent(i), " of ",
                              shape_to_string(t[i]->shape()));
  if (y.numel() != v.y_numel())
    return invalid_argument(node.describe(), ": Y ", shape_to_string(y.shape()), " is not y_shape");
  p->batch = v.batch;
  p->q_heads = v.q_heads;
  p->kv_heads = v.kv_heads;
  p->q_len = v.q_len;
  p->kv_len = v.kv_len;
  p->head_size = v.head_size;
  const size_t elem = storage_bytes(y.dtype(), 1);
  p->q = static_cast<const uint8_t*>(t[0]->raw()) + v.view[0][0] * elem;
  p->k = static_cast<const uint8_t*>(t[1]->raw()) + v.view[1][0] * elem;
  p->v = static_cast<const uint8_t*>(t[2]->raw()) + v.view[2][0] * elem;
  p->y = static_cast<uint8_t*>(y.mutable_raw()) + v.view[3][0] * elem;
  int64_t(*st[4])[3] = {&p->q_stride, &p->k_stride, &p->v_stride, &p->y_stride};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) (*st[i])[j] = v.view[i][j + 1];
  return Status::Ok();
}

/// Q/K/V/Y of an unpacked node: 3-D or 4-D, checked against each other.
Status make_qkv_params(const ir::Node& node, const StepIO& io, AttentionParams* p) {
  if (io.inputs.size() < 3 || io.inputs[0] == nullptr || io.inputs[1] == nullptr || io.inputs[2] == nullptr ||
      io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined())
    return internal_error(node.describe(), ": Q, K, V and output Y must all be given");
  const Tensor& q = *io.inputs[0];
  const Tensor& k = *io.inputs[1];
  const Tensor& v = *io.inputs[2];
  Tensor& y = (*io.outputs)[0];
  if (!to_float_type(q.dtype(), &p->type) || k.dtype() != q.dtype() || v.dtype() != q.dtype() ||
      y.dtype() != q.dtype())
    return invalid_argument(node.describe(), ": Q, K, V and Y must share one float type, got ",
                            data_type_name(q.dtype()), "/", data_type_name(k.dtype()), "/",
                            data_type_name(v.dtype()), "/", data_type_name(y.dtype()));
  const size_t rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank || y.rank() != rank)
    return invalid_argument(node.describe(), ": Q ", shape_to_string(q.shape()), ", K ", shape_to_string(k.shape()),
                            ", V ", shape_to_string(v.shape()), " and Y must all be 3-D or all 4-D");
  p->batch = q.dim(0);
  if (rank == 4) {
    p->q_heads = q.dim(1);
    p->kv_heads = k.dim(1);
    p->q_len = q.dim(2);
    p->kv_len = k.dim(2);
    p->head_size = q.dim(3);
  } else {
    p->q_heads = node.attrs().get_int("q_num_heads", 0);
    p->kv_heads = node.attrs().get_int("kv_num_heads", 0);
    if (p->q_heads <= 0 || p->kv_heads <= 0 || q.dim(2) % p->q_heads != 0)
      return invalid_argument(node.describe(), ": 3-D Q ", shape_to_string(q.shape()),
                              " needs q_num_heads dividing its last dim and positive kv_num_heads");
    p->q_len = q.dim(1);
    p->kv_len = k.dim(1);
    p->head_size = q.dim(2) / p->q_heads;
  }
  const int64_t D = p->head_size;
  if (p->kv_heads <= 0 || p->q_heads % p->kv_heads != 0)
    return invalid_argument(node.describe(), ": q heads (", p->q_heads, ") must be a multiple of kv heads (",
                            p->kv_heads, ")");
  // [B, H, S, D] or [B, S, H*D]; compared dim by dim (enqueue allocates nothing).
  const int64_t kv_want[4] = {p->batch, rank == 4 ? p->kv_heads : p->kv_len,
                              rank == 4 ? p->kv_len : p->kv_heads * D, D};
  const int64_t y_want[4] = {p->batch, rank == 4 ? p->q_heads : p->q_len, rank == 4 ? p->q_len : p->q_heads * D, D};
  auto has_dims = [rank](const Tensor& x, const int64_t (&want)[4]) {
    for (size_t i = 0; i < rank; ++i)
      if (x.dim(i) != want[i]) return false;
    return true;
  };
  if (!has_dims(k, kv_want) || !has_dims(v, kv_want) || !has_dims(y, y_want)) {
    const Shape64 kv_shape(kv_want, kv_want + rank), y_shape(y_want, y_want + rank);
    return invalid_argument(node.describe(), ": K ", shape_to_string(k.shape()), " and V ",
                            shape_to_string(v.shape()), " must be ", shape_to_string(kv_shape), " and Y ",
                            shape_to_string(y.shape()), " must be ", shape_to_string(y_shape), " for Q ",
                            shape_to_string(q.shape()));
  }
  p->q = q.raw();
  p->k = k.raw();
  p->v = v.raw();
  p->y = y.mutable_raw();
  head_strides(q, p->q_heads, D, p->q_stride);
  head_strides(k, p->kv_heads, D, p->k_stride);
  head_strides(v, p->kv_heads, D, p->v_stride);
  head_strides(y, p->q_heads, D, p->y_stride);
  return Status::Ok();
}

}  // namespace

/// The kernel parameters for the current tensors, checking what shapes could get wrong.
Status make_attention_params(const ir::Node& node, const StepIO& io, AttentionParams* p) {
  if (node.domain() == "ingot" && ir::attention_has_views(node.attrs())) {
    INGOT_RETURN_IF_ERROR(make_view_params(node, io, p));
  } else {
    INGOT_RETURN_IF_ERROR(attention_qkv_packed(node) ? make_packed_qkv_params(node, io, p)
                                                     : make_qkv_params(node, io, p));
  }
  const int64_t D = p->head_size;
  const Tensor* mask = io.inputs.size() > 3 ? io.inputs[3] : nullptr;
  p->mask_kind = AttentionMask::kNone;
  if (mask != nullptr) {
    if (mask->dtype() == DataType::kBool) {
      p->mask_kind = AttentionMask::kBool;
    } else if (to_float_type(mask->dtype(), &p->mask_type)) {
      p->mask_kind = AttentionMask::kAdditive;
    } else {
      return invalid_argument(node.describe(), ": attn_mask must be bool or float, got ",
                              data_type_name(mask->dtype()));
    }
    const size_t mr = mask->rank();
    if (mr < 1 || mr > 4)
      return invalid_argument(node.describe(), ": attn_mask ", shape_to_string(mask->shape()),
                              " must have rank 1 to 4");
    int64_t ms[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < mr; ++i) ms[4 - mr + i] = mask->dim(i);
    p->mask_batch_period = node.attrs().get_int("mask_batch_period", 0);
    if (p->mask_batch_period < 0 || (p->mask_batch_period > 0 && p->batch % p->mask_batch_period != 0))
      return invalid_argument(node.describe(), ": mask_batch_period ", p->mask_batch_period,
                              " does not divide the batch ", p->batch);
    const int64_t want[4] = {p->mask_batch_period > 0 ? p->mask_batch_period : p->batch, p->q_heads, p->q_len,
                             p->kv_len};
    if (ms[3] > p->kv_len)
      return invalid_argument(node.describe(), ": attn_mask ", shape_to_string(mask->shape()), " has ", ms[3],
                              " keys, more than K's ", p->kv_len);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      if (i < 3 && ms[i] != 1 && ms[i] != want[i])
        return invalid_argument(node.describe(), ": attn_mask ", shape_to_string(mask->shape()),
                                " does not broadcast to [", want[0], ",", want[1], ",", want[2], ",", want[3], "]");
      p->mask_stride[i] = ms[i] == 1 && i < 3 ? 0 : stride;
      stride *= ms[i];
    }
    p->mask_kv_len = ms[3];
    p->mask = mask->raw();
  }
  const ir::Attributes& a = node.attrs();
  p->scale = a.has("scale") ? a.get_float("scale", 1.0f) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  p->causal = a.get_int("is_causal", 0) != 0;
  return Status::Ok();
}

namespace {

// kShort runs the short-sequence kernel where K has at most 128 keys (else the flash kernel);
// kFlash the flash kernel; both the generic one where the tensors' alignment rules them out.
enum class AttentionKind { kShort, kFlash, kGeneric };

class AttentionTactic final : public Tactic {
 public:
  explicit AttentionTactic(AttentionKind kind) : kind_(kind) {}

  std::string name() const override {
    return kind_ == AttentionKind::kShort ? kShortName : kind_ == AttentionKind::kFlash ? kFlashName : kGenericName;
  }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    int64_t d = 0;
    FloatType t;
    if (!attention_supports_node(node, in, &d, &t)) return false;
    switch (kind_) {
      case AttentionKind::kShort: {
        if (!attention_flash_supports(t, d) || (d != 32 && d != 64)) return false;
        // Offered unless K is known to be longer than the kernel takes.
        const std::vector<ir::TensorType> u = unpacked_attention_inputs(node, in);
        if (u.size() < 2 || !u[1].shape.rank_known() || u[1].shape.rank() < 2) return true;
        const ir::Dim& keys = u[1].shape[u[1].shape.rank() - 2];
        return !keys.is_known() || keys.value() <= 128;
      }
      case AttentionKind::kFlash: return attention_flash_supports(t, d);
      case AttentionKind::kGeneric: return d <= kAttentionGenericMaxHeadSize;
    }
    return false;
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr) return internal_error(name(), ": step without a node");
    const ir::Node& node = *io.node;
    AttentionParams p;
    INGOT_RETURN_IF_ERROR(make_attention_params(node, io, &p));
    if ((*io.outputs)[0].numel() == 0) return Status::Ok();
    auto stream = static_cast<cudaStream_t>(io.stream);
    cudaError_t err;
    if (kind_ != AttentionKind::kGeneric && attention_flash_can_run(p)) {
      const int sms = current_device_info().sm_count;  // cached per device, not asked per enqueue
      if (sms <= 0) return internal_error(node.describe(), ": ", name(), ": no usable CUDA device");
      err = kind_ == AttentionKind::kShort && attention_short_can_run(p) ? launch_attention_short(p, sms, stream)
                                                                          : launch_attention_flash(p, sms, stream);
    } else {
      if (p.head_size > kAttentionGenericMaxHeadSize)
        return invalid_argument(node.describe(), ": head size ", p.head_size, " above ",
                                kAttentionGenericMaxHeadSize, " (", name(), ")");
      err = launch_attention_generic(p, stream);
    }
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", name(), " launch failed for batch ", p.batch, ", ", p.q_heads,
                            " heads, ", p.q_len, " queries, ", p.kv_len, " keys: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  AttentionKind kind_;
};

}  // namespace

TacticFamily attention_family() {
  TacticFamily f;
  f.name = "attention";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    if (!is_attention(node)) return out;
    // Best first: the builder keeps the first supported one when it does not time them.
    for (AttentionKind kind : {AttentionKind::kShort, AttentionKind::kFlash, AttentionKind::kGeneric}) {
      auto t = std::make_unique<AttentionTactic>(kind);
      if (t->supports(node, inputs)) out.push_back(std::move(t));
    }
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>&) -> std::unique_ptr<Tactic> {
    if (name == kShortName) return std::make_unique<AttentionTactic>(AttentionKind::kShort);
    if (name == kFlashName) return std::make_unique<AttentionTactic>(AttentionKind::kFlash);
    if (name == kGenericName) return std::make_unique<AttentionTactic>(AttentionKind::kGeneric);
    return nullptr;
  };
  return f;
}

}  // namespace ingot::backend::cuda
