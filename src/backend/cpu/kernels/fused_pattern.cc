// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for the ops the pattern-recognition passes (and fuse_norm_quantize) create
// (see src/ir/ops/fused_pattern.cc). The ingot twins of ai.onnx ops run the ai.onnx
// reference kernel on the same context: their inputs and attributes are laid
// out identically, so there is one implementation to trust.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/ops/attention_views.h"
#include "ir/shape.h"

namespace ingot::cpu {

namespace {

KernelFn same_as_onnx(const char *op) {
  return [op](KernelContext &k) -> Status {
    const KernelFn *fn = KernelRegistry::global().find(op);
    if (fn == nullptr)
      return k.error("no ai.onnx ", op, " kernel");
    return (*fn)(k);
  };
}

Status silu(KernelContext &k) {
  const Tensor &x = *k.input(0);
  if (!is_float(x.dtype()))
    return k.unsupported_case("Silu needs a floating input");
  Tensor &y = k.output(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.get_f64(i);
    y.set_f64(i, v / (1.0 + std::exp(-v)));
  }
  return Status::Ok();
}

// ingot::SwiGLU: X [..., 2N] holds gate then up on the last axis; Y [..., N] = silu(gate) * up.
Status swiglu_packed(KernelContext &k) {
  const Tensor &x = *k.input(0);
  if (!is_float(x.dtype()))
    return k.unsupported_case("SwiGLU needs a floating input");
  if (x.rank() < 1 || x.dim(x.rank() - 1) % 2 != 0)
    return k.error("X must have an even last dim (gate then up), got ", shape_to_string(x.shape()));
  const int64_t n = x.dim(x.rank() - 1) / 2, rows = n > 0 ? x.numel() / (2 * n) : 0;
  Tensor &y = k.output(0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const double g = x.get_f64(r * 2 * n + i), u = x.get_f64(r * 2 * n + n + i);
      y.set_f64(r * n + i, g / (1.0 + std::exp(-g)) * u);
    }
  return Status::Ok();
}

// qkv_packed = 1: input 0 is [B, S, 3*H*D]; Q, K and V are its thirds on the last axis, copied
// out and given to the ai.onnx kernel as three inputs.
Status attention_packed(KernelContext &k) {
  const Tensor &qkv = *k.input(0);
  if (qkv.rank() != 3 || qkv.dim(2) % 3 != 0)
    return k.error("qkv_packed input must be 3-D [batch, seq, 3 * heads * head_size]");
  const int64_t rows = qkv.dim(0) * qkv.dim(1), width = qkv.dim(2) / 3;
  const size_t elem = storage_bytes(qkv.dtype(), 1);
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < 3; ++p) {
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(qkv.dtype(), {qkv.dim(0), qkv.dim(1), width}));
    const auto *src = static_cast<const uint8_t *>(qkv.raw());
    auto *dst = static_cast<uint8_t *>(t.mutable_raw());
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * width * elem, src + (r * 3 * width + p * width) * elem, width * elem);
    parts.push_back(std::move(t));
  }
  std::vector<const Tensor *> ins = {&parts[0], &parts[1], &parts[2]};
  for (size_t i = 3; i < k.num_inputs(); ++i)
    ins.push_back(k.input(i));
  KernelContext inner(k.node(), k.opset(), std::move(ins), std::move(k.outputs()), nullptr);
  const KernelFn *fn = KernelRegistry::global().find("Attention");
  if (fn == nullptr)
    return k.error("no ai.onnx Attention kernel");
  Status st = (*fn)(inner);
  k.outputs() = std::move(inner.outputs());
  return st;
}

// Strided views (ir/ops/attention_views.h): Q, K and V are copied out of their roots into
// [B, H, S, D] tensors, the ai.onnx kernel runs on them, and its Y is scattered into the y_shape
// output through y_view. The views are checked against the inputs' sizes, and Y's view must
// write every output element exactly once.
Status attention_views(KernelContext &k) {
  ir::AttentionViews v;
  const std::string why = ir::parse_attention_views(k.attrs(), &v);
  if (!why.empty())
    return k.error(why);
  if (k.num_inputs() < 3 || !k.input(0) || !k.input(1) || !k.input(2))
    return k.error("Q, K and V roots are required with view_dims");
  const DataType dt = k.input(0)->dtype();
  std::vector<Tensor> parts;
  for (int i = 0; i < 3; ++i) {
    const Tensor &root = *k.input(static_cast<size_t>(i));
    if (root.dtype() != dt)
      return k.error("Q, K and V roots must share one dtype");
    if (v.extent(i) > root.numel())
      return k.error("the ", "QKV"[i], " view reaches element ", v.extent(i), " of a ", root.numel(),
                     "-element input");
    const int64_t heads = i == 0 ? v.q_heads : v.kv_heads, len = i == 0 ? v.q_len : v.kv_len;
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dt, {v.batch, heads, len, v.head_size}));
    const int64_t *w = v.view[i];
    int64_t o = 0;
    for (int64_t b = 0; b < v.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < len; ++s)
          for (int64_t d = 0; d < v.head_size; ++d)
            t.set_f64(o++, root.get_f64(w[0] + b * w[1] + h * w[2] + s * w[3] + d));
    parts.push_back(std::move(t));
  }
  std::vector<const Tensor *> ins = {&parts[0], &parts[1], &parts[2]};
  for (size_t i = 3; i < k.num_inputs(); ++i)
    ins.push_back(k.input(i));
  std::vector<Tensor> outs(1);
  INGOT_ASSIGN_OR_RETURN(outs[0], Tensor::zeros(dt, {v.batch, v.q_heads, v.q_len, v.head_size}));
  // The ai.onnx kernel reads scale and is_causal; no head counts, so the 4-D path.
  KernelContext inner(k.node(), k.opset(), std::move(ins), std::move(outs), nullptr);
  const KernelFn *fn = KernelRegistry::global().find("Attention");
  if (fn == nullptr)
    return k.error("no ai.onnx Attention kernel");
  INGOT_RETURN_IF_ERROR((*fn)(inner));
  const Tensor &y4 = inner.outputs()[0];
  INGOT_ASSIGN_OR_RETURN(Tensor *y, k.allocate_output(0, dt, Shape64(v.y_shape.begin(), v.y_shape.end())));
  std::vector<uint8_t> written(static_cast<size_t>(y->numel()), 0);
  const int64_t *w = v.view[3];
  int64_t o = 0;
  for (int64_t b = 0; b < v.batch; ++b)
    for (int64_t h = 0; h < v.q_heads; ++h)
      for (int64_t s = 0; s < v.q_len; ++s)
        for (int64_t d = 0; d < v.head_size; ++d) {
          const int64_t at = w[0] + b * w[1] + h * w[2] + s * w[3] + d;
          if (written[static_cast<size_t>(at)]++)
            return k.error("y_view writes output element ", at, " twice");
          y->set_f64(at, y4.get_f64(o++));
        }
  return Status::Ok();
}

Status attention_4d(KernelContext &k) {
  if (ir::attention_has_views(k.attrs()))
    return attention_views(k);
  if (k.attrs().get_int("qkv_packed", 0) != 0)
    return attention_packed(k);
  const bool heads = k.attrs().has("q_num_heads") && k.attrs().has("kv_num_heads");
  for (size_t i = 0; i < 3; ++i)
    if (k.input(i)->rank() != 4 && !(k.input(i)->rank() == 3 && heads))
      return k.error("Q, K and V must be 4-D [batch, heads, seq, head_size], or 3-D with "
                     "q_num_heads and kv_num_heads");
  return same_as_onnx("Attention")(k);
}

// Y[i] = X[i] * cos[i] + R[i] * sin[i] along the last axis, R = concat(-X[h:], X[:h]), h = D/2;
// cos and sin read through numpy broadcasting.
Status rotary_embedding(KernelContext &k) {
  if (k.attrs().get_int("interleaved", 0) != 0)
    return k.unsupported_case("interleaved = 1 (pairs 2i, 2i+1) is not implemented");
  const Tensor &x_in = *k.input(0);
  const Tensor &cos_t = *k.input(1);
  const Tensor &sin_t = *k.input(2);
  // heads/head_size: the first heads * head_size elements of each row of X, as [..., heads, head_size].
  const int64_t heads = k.attrs().get_int("heads", 0), head_size = k.attrs().get_int("head_size", 0);
  Tensor gathered;
  if (heads > 0) {
    const int64_t r = x_in.rank() >= 1 ? x_in.dim(x_in.rank() - 1) : 0, w = heads * head_size;
    if (!is_float(x_in.dtype()) || r < w || head_size <= 0)
      return k.error("X ", shape_to_string(x_in.shape()), " must be floating with rows of at least heads * head_size = ", w);
    Shape64 shape(x_in.shape().begin(), x_in.shape().end() - 1);
    shape.push_back(heads);
    shape.push_back(head_size);
    auto t = Tensor::zeros(x_in.dtype(), shape);
    if (!t.ok()) return t.status();
    gathered = std::move(*t);
    const size_t es = storage_bytes(x_in.dtype(), 1);
    for (int64_t row = 0; row < x_in.numel() / std::max<int64_t>(r, 1); ++row)
      std::memcpy(static_cast<char *>(gathered.mutable_raw()) + row * w * es,
                  static_cast<const char *>(x_in.raw()) + row * r * es, static_cast<size_t>(w) * es);
  }
  const Tensor &x = heads > 0 ? gathered : x_in;
  if (!is_float(x.dtype()) || x.rank() < 2 || x.dim(x.rank() - 1) % 2 != 0)
    return k.error("X must be floating, of rank >= 2, with an even last dim; got ", data_type_name(x.dtype()),
                   shape_to_string(x.shape()));
  const int64_t d = x.dim(x.rank() - 1), half = d / 2;
  for (const Tensor *p : {&cos_t, &sin_t}) {
    auto b = ir::broadcast_shapes(x.shape(), p->shape());
    if (p->rank() < 1 || p->dim(p->rank() - 1) != d || !b.ok() || *b != x.shape())
      return k.error("cos/sin ", shape_to_string(p->shape()), " must have last dim ", d, " and broadcast to X ",
                     shape_to_string(x.shape()));
  }
  const BroadcastIndexer cos_at(x.shape(), cos_t.shape()), sin_at(x.shape(), sin_t.shape());
  Tensor &y = k.output(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double rotated = i % d < half ? -x.get_f64(i + half) : x.get_f64(i - half);
    y.set_f64(i, x.get_f64(i) * cos_t.get_f64(cos_at(i)) + rotated * sin_t.get_f64(sin_at(i)));
  }
  return Status::Ok();
}

// ingot::LayerNormQuantize: the norm's own reference kernel (ingot's twin, which every opset has),
// then QuantizeLinear's on Y as stored, so the fused node gives what the two nodes gave, bit for bit.
Status layer_norm_quantize(KernelContext &k) {
  if (!k.has_input(3) || !k.has_input(4))
    return k.error("y_scale and y_zero_point (inputs 3 and 4) are required");
  const bool rms = k.attrs().get_int("rms", 0) != 0;
  ir::Attributes norm;
  for (const char *name : {"axis", "epsilon"})
    if (const ir::Attribute *a = k.attrs().find(name))
      norm.set(name, *a);
  std::vector<const Tensor *> ins = {k.input(0), k.input(1)};
  if (!rms)
    ins.push_back(k.input(2));
  INGOT_ASSIGN_OR_RETURN(
      Tensor y, run_inner_op(k, rms ? "RMSNormalization" : "LayerNormalization", std::move(norm), ins, "ingot"));
  // One scale and zero point, as scalars: QuantizeLinear's per-tensor form at any opset.
  INGOT_ASSIGN_OR_RETURN(Tensor scale, k.input(3)->reshaped({}));
  INGOT_ASSIGN_OR_RETURN(Tensor zero, k.input(4)->reshaped({}));
  ir::Attributes quantize;
  quantize.set_int("saturate", k.attrs().get_int("saturate", 1));
  INGOT_ASSIGN_OR_RETURN(k.output(1), run_inner_op(k, "QuantizeLinear", std::move(quantize), {&y, &scale, &zero}));
  if (k.has_output(0))
    k.output(0) = std::move(y);
  return Status::Ok();
}

} // namespace

void register_fused_pattern_kernels(KernelRegistry &r) {
  r.add("LayerNormalization", same_as_onnx("LayerNormalization"), "ingot");
  r.add("RMSNormalization", same_as_onnx("RMSNormalization"), "ingot");
  r.add("Gelu", same_as_onnx("Gelu"), "ingot");
  r.add("Silu", silu, "ingot");
  r.add("SwiGLU", swiglu_packed, "ingot");
  r.add("Attention", attention_4d, "ingot");
  r.add("RotaryEmbedding", rotary_embedding, "ingot");
  r.add("LayerNormQuantize", layer_norm_quantize, "ingot");
}

} // namespace ingot::cpu
