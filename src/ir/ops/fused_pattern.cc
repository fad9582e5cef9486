// Copyright ingot authors. Apache-2.0.
//
// Ops produced by the pattern-recognition passes (recognize_layernorm, recognize_gelu_silu,
// recognize_attention) in domain "ingot" (opset 1). LayerNormalization, RMSNormalization and
// Gelu exist in ai.onnx only from opsets 17, 23 and 20; the ingot twins carry the same
// attributes and semantics so models with older opsets can be fused too, and they reuse the
// ai.onnx inference (looked up at call time: one shape path). Attention is ONNX Attention
// (opset 23) restricted to 4-D Q/K/V [B, H, S, D], or 3-D [B, S, H*D] with q_num_heads /
// kv_num_heads (head split/merge absorbed), with an optional mask, no KV cache. With
// qkv_packed = 1 (fuse_qkv_projection) input 0 is [B, S, 3*H*D]: Q, K and V side by side on the
// last axis (the output of one projection GEMM), inputs 1 and 2 are omitted. With view_dims
// (attention_strided_views) Q/K/V/Y are strided views inside other tensors: attention_views.h.
// Silu has no ai.onnx op before Swish (opset 24). RotaryEmbedding (recognize_rotary) is the
// Llama/Qwen2 "rotate_half" form, which ai.onnx RotaryEmbedding (opset 23) cannot state: its cos
// and sin caches hold half a head and are indexed by position, while exported models multiply by
// full-width [.., S, D] tensors that broadcast over X.
//
// LayerNormQuantize (fuse_norm_quantize) is a LayerNormalization (rms = 0) or RMSNormalization
// (rms = 1) and the per-tensor QuantizeLinear that reads its result, in one node:
//   LayerNormQuantize(X, scale, [B], y_scale, y_zero_point) -> [Y], Yq
// X float32/float16/bfloat16; scale and B (absent with rms = 1) of X's type; y_scale one float
// value; y_zero_point one int8 or float8e4m3fn value, 0, which gives Yq its type. Y is the norm
// over the axes from `axis` on (epsilon, as the norm node computed it) in X's type, absent when
// nothing but the quantization read it; Yq = QuantizeLinear(Y as stored, y_scale, y_zero_point)
// with `saturate` (fp8). One kernel writes both: the int8 copy the next QuantGemm reads no longer
// costs a pass over Y.
#include "ir/ops/all_ops.h"
#include "ir/ops/attention_views.h"
#include "ir/ops/rotary.h"

namespace ingot::ir {

namespace {

InferFn same_as_onnx(const char* op) {
  return [op](InferenceContext& c) -> Status {
    const OpSchema* s = OpRegistry::global().find(op);
    if (s == nullptr || !s->inference()) return c.error("no ai.onnx ", op, " to infer with");
    return s->inference()(c);
  };
}

// Y = X * cos + rotate_half(X) * sin over X's last axis (D, even); cos and sin have last dim D
// and broadcast to X without enlarging it. Symbolic dims that may match are let through: the
// kernels check the concrete shapes.
//
// With heads = H and head_size = D (pack_rotary_qkv's form), X is a packed projection [..., R]
// whose rows begin with H heads of D (R >= H * D: Q and K, then V that the rotation leaves), and
// Y is [..., H, D]: the rotated heads, contiguous. cos and sin broadcast to Y.
Status infer_rotary_embedding(InferenceContext& c) {
  const int64_t interleaved = c.attrs().get_int("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return c.error("interleaved must be 0 or 1, got ", interleaved);
  const int64_t heads = c.attrs().get_int("heads", 0), head_size = c.attrs().get_int("head_size", 0);
  if (heads != 0 || head_size != 0) {
    if (heads <= 0 || head_size <= 0 || head_size % 2 != 0)
      return c.error("heads and head_size must be positive, head_size even; got ", heads, " and ", head_size);
    const Shape& x = c.input_shape(0);
    if (!x.rank_known()) return Status::Ok();
    if (x.rank() < 1) return c.error("X must have rank >= 1 with heads");
    const Dim& r = x[x.rank() - 1];
    if (r.is_known() && r.value() < heads * head_size)
      return c.error("X's rows of ", r.value(), " hold fewer than heads * head_size = ", heads * head_size);
    std::vector<Dim> dims(x.dims().begin(), x.dims().end() - 1);
    dims.push_back(Dim(heads));
    dims.push_back(Dim(head_size));
    const Shape y(dims);
    for (size_t i = 1; i < 3; ++i)
      if (!rotary_param_fits(y, c.input_shape(i), /*provably=*/false))
        return c.error(i == 1 ? "cos " : "sin ", c.input_shape(i).to_string(), " must have head_size and broadcast to Y ",
                       y.to_string());
    c.set_output(0, c.input_dtype(0), y);
    return Status::Ok();
  }
  const DataType t = c.input_dtype(0);
  if (t != DataType::kUndefined && !is_float(t)) return c.error("X must be a floating type, got ", data_type_name(t));
  const char* names[] = {"X", "cos", "sin"};
  for (size_t i = 1; i < 3; ++i) {
    const DataType p = c.input_dtype(i);
    if (t != DataType::kUndefined && p != DataType::kUndefined && p != t)
      return c.error(names[i], " is ", data_type_name(p), " but X is ", data_type_name(t));
  }
  const Shape& x = c.input_shape(0);
  if (x.rank_known()) {
    if (x.rank() < 2) return c.error("X must have rank >= 2, got ", x.to_string());
    const Dim& d = x[x.rank() - 1];
    if (d.is_known() && d.value() % 2 != 0)
      return c.error("X's last dim ", d.value(), " is odd: rotate_half pairs element i with i + D/2");
    for (size_t i = 1; i < 3; ++i)
      if (!rotary_param_fits(x, c.input_shape(i), /*provably=*/false))
        return c.error(names[i], " ", c.input_shape(i).to_string(), " must have X's last dim and broadcast to X ",
                       x.to_string());
  }
  return c.propagate_same(0, 0);
}

Status infer_layer_norm_quantize(InferenceContext& c) {
  const DataType t = c.input_dtype(0);
  if (t != DataType::kUndefined && t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return c.error("X must be float32, float16 or bfloat16, got ", data_type_name(t));
  const int64_t rms = c.attrs().get_int("rms", 0), saturate = c.attrs().get_int("saturate", 1);
  if (rms != 0 && rms != 1) return c.error("rms must be 0 or 1, got ", rms);
  if (saturate != 0 && saturate != 1) return c.error("saturate must be 0 or 1, got ", saturate);
  if (rms && c.has_input(2)) return c.error("rms = 1 (RMSNormalization) takes no B");
  const char* names[] = {"X", "scale", "B", "y_scale", "y_zero_point"};
  for (size_t i = 1; i < 3; ++i) {
    const DataType p = c.input_dtype(i);
    if (c.has_input(i) && t != DataType::kUndefined && p != DataType::kUndefined && p != t)
      return c.error(names[i], " is ", data_type_name(p), " but X is ", data_type_name(t));
  }
  if (!c.has_input(3) || !c.has_input(4)) return c.error("y_scale and y_zero_point (inputs 3 and 4) are required");
  const DataType st = c.input_dtype(3), q = c.input_dtype(4);
  if (st != DataType::kUndefined && !is_float(st)) return c.error("y_scale must be float, got ", data_type_name(st));
  if (q != DataType::kUndefined && q != DataType::kInt8 && q != DataType::kFloat8E4M3FN)
    return c.error("y_zero_point must be int8 or float8e4m3fn, got ", data_type_name(q));
  for (size_t i = 3; i < 5; ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.rank_known()) continue;
    int64_t n = 1;
    for (size_t d = 0; d < s.rank(); ++d) n = s[d].is_known() ? n * s[d].value() : -1;
    if (n >= 0 && n != 1) return c.error(names[i], " must hold one element, got shape ", s.to_string());
  }
  if (const Tensor* z = c.input_value(4))
    if (z->numel() == 1 && z->get_f64(0) != 0.0) return c.error("y_zero_point must be 0, got ", z->get_f64(0));
  const Shape& x = c.input_shape(0);
  const int64_t axis = c.attrs().get_int("axis", -1);
  if (x.rank_known() && !normalize_axis(axis, static_cast<int64_t>(x.rank())).ok())
    return c.error("axis ", axis, " out of range for rank ", x.rank());
  if (c.has_output(0)) c.set_output(0, t, x);
  c.set_output(1, q, x);
  return Status::Ok();
}

}  // namespace

void register_fused_pattern_ops(OpRegistry& r) {
  r.add("LayerNormalization", "ingot").inputs(2, 3).outputs(1, 1).opsets(1)
      .attr("axis", AttrType::kInt)
      .attr("epsilon", AttrType::kFloat)
      .attr("stash_type", AttrType::kInt)
      .infer(same_as_onnx("LayerNormalization"))
      .doc("ai.onnx LayerNormalization (Y only) for models below opset 17");
  r.add("RMSNormalization", "ingot").inputs(2, 2).outputs(1, 1).opsets(1)
      .attr("axis", AttrType::kInt)
      .attr("epsilon", AttrType::kFloat)
      .attr("stash_type", AttrType::kInt)
      .infer(same_as_onnx("RMSNormalization"))
      .doc("ai.onnx RMSNormalization for models below opset 23");
  // B (input 2) may be absent between scale and y_scale, so only X and scale count as required.
  r.add("LayerNormQuantize", "ingot").inputs(2, 5).outputs(2, 2).opsets(1)
      .attr("axis", AttrType::kInt)
      .attr("epsilon", AttrType::kFloat)
      .attr("rms", AttrType::kInt)
      .attr("saturate", AttrType::kInt)
      .infer(infer_layer_norm_quantize)
      .doc("LayerNormalization (rms=0) or RMSNormalization (rms=1) over the axes from `axis` on, then the "
           "per-tensor QuantizeLinear of its result: Y (optional) in X's type, Yq = QuantizeLinear(Y, y_scale, "
           "y_zero_point = 0) in y_zero_point's type (int8 or float8e4m3fn)");
  r.add("Gelu", "ingot").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("approximate", AttrType::kString)
      .infer(same_as_onnx("Gelu"))
      .doc("ai.onnx Gelu for models below opset 20");
  r.add("Silu", "ingot").inputs(1, 1).outputs(1, 1).opsets(1)
      .infer([](InferenceContext& c) { return c.propagate_same(0, 0); })
      .doc("x * sigmoid(x)");
  r.add("SwiGLU", "ingot").inputs(1, 1).outputs(1, 1).opsets(1)
      .infer([](InferenceContext& c) -> Status {
        const DataType t = c.input_dtype(0);
        if (t != DataType::kUndefined && !is_float(t)) return c.error("X must be a floating type, got ", data_type_name(t));
        Shape y = c.input_shape(0);
        if (y.rank_known()) {
          if (y.rank() < 1) return c.error("X must have rank >= 1");
          Dim& last = y[y.rank() - 1];
          if (last.is_known() && last.value() % 2 != 0)
            return c.error("X's last dim ", last.value(), " is odd: it holds gate then up, N each");
          last = last.is_known() ? Dim(last.value() / 2) : Dim::unknown();
        }
        c.set_output(0, t, y);
        return Status::Ok();
      })
      .doc("a gated MLP's activation over its fused gate/up projection (fuse_gated_mlp): X [..., 2N] "
           "holds gate then up on the last axis; Y [..., N] = silu(gate) * up");
  r.add("Attention", "ingot").inputs(1, 4).outputs(1, 1).opsets(1)
      .attr("scale", AttrType::kFloat)
      .attr("is_causal", AttrType::kInt)
      .attr("q_num_heads", AttrType::kInt)
      .attr("kv_num_heads", AttrType::kInt)
      .attr("qkv_packed", AttrType::kInt)
      .attr("view_dims", AttrType::kInts)
      .attr("q_view", AttrType::kInts)
      .attr("k_view", AttrType::kInts)
      .attr("v_view", AttrType::kInts)
      .attr("y_view", AttrType::kInts)
      .attr("y_shape", AttrType::kInts)
      .attr("mask_batch_period", AttrType::kInt)
      .infer([](InferenceContext& c) -> Status {
        if (attention_has_views(c.attrs())) {
          // Strided views (attention_views.h): Q/K/V inside inputs 0-2, Y inside a y_shape tensor.
          AttentionViews v;
          const std::string why = parse_attention_views(c.attrs(), &v);
          if (!why.empty()) return c.error(why);
          if (!c.has_input(1) || !c.has_input(2)) return c.error("K and V are required with view_dims");
          for (int i = 0; i < 3; ++i) {
            const Shape& s = c.input_shape(static_cast<size_t>(i));
            if (!s.rank_known()) continue;
            int64_t n = 1;
            bool known = true;
            for (size_t j = 0; j < s.rank(); ++j) {
              if (!s[j].is_known()) known = false;
              else n *= s[j].value();
            }
            if (known && v.extent(i) > n)
              return c.error("the ", "QKV"[i], " view reaches element ", v.extent(i), " of a ", n, "-element input");
          }
          std::vector<Dim> dims;
          for (int64_t d : v.y_shape) dims.emplace_back(d);
          c.set_output(0, c.input_dtype(0), Shape(dims));
          return Status::Ok();
        }
        // 3-D [batch, seq, heads * head_size] needs the head counts; 4-D carries them.
        const bool heads = c.attrs().has("q_num_heads") && c.attrs().has("kv_num_heads");
        const int64_t packed = c.attrs().get_int("qkv_packed", 0);
        if (packed != 0 && packed != 1) return c.error("qkv_packed must be 0 or 1, got ", packed);
        if (packed) {
          // One [batch, seq, 3 * heads * head_size] input: Q, K and V side by side on the last axis.
          const int64_t hq = c.attrs().get_int("q_num_heads", 0), hk = c.attrs().get_int("kv_num_heads", 0);
          if (!heads || hq <= 0 || hq != hk)
            return c.error("qkv_packed needs q_num_heads = kv_num_heads > 0");
          if (c.has_input(1) || c.has_input(2)) return c.error("qkv_packed takes Q, K and V in input 0 alone");
          const Shape& s = c.input_shape(0);
          if (!s.rank_known()) {
            c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
            return Status::Ok();
          }
          if (s.rank() != 3) return c.error("qkv_packed input must be 3-D [batch, seq, 3 * heads * head_size]");
          Dim last = Dim::unknown();
          if (s[2].is_known()) {
            if (s[2].value() % (3 * hq) != 0)
              return c.error("qkv_packed input's last dim ", s[2].value(), " is not 3 * ", hq, " heads * head_size");
            last = Dim(s[2].value() / 3);
          }
          c.set_output(0, c.input_dtype(0), Shape{s[0], s[1], last});
          return Status::Ok();
        }
        if (!c.has_input(1) || !c.has_input(2)) return c.error("K and V are required (unless qkv_packed = 1)");
        for (size_t i = 0; i < 3; ++i) {
          const Shape& s = c.input_shape(i);
          if (s.rank_known() && s.rank() != 4 && !(s.rank() == 3 && heads))
            return c.error("Q, K and V must be 4-D [batch, heads, seq, head_size], or 3-D "
                           "[batch, seq, heads * head_size] with q_num_heads and kv_num_heads");
        }
        return same_as_onnx("Attention")(c);
      })
      .doc("ai.onnx Attention (opset 23) on 4-D Q/K/V, or 3-D with q_num_heads/kv_num_heads, "
           "with an optional mask; qkv_packed=1: Q, K, V side by side in input 0; mask_batch_period=P: the "
           "mask has P batch entries and batch b reads entry b mod P");
  r.add("RotaryEmbedding", "ingot").inputs(3, 3).outputs(1, 1).opsets(1)
      .attr("interleaved", AttrType::kInt)
      .attr("heads", AttrType::kInt)
      .attr("head_size", AttrType::kInt)
      .infer(infer_rotary_embedding)
      .doc("Y = X * cos + rotate_half(X) * sin on the last axis (interleaved=0: rotate_half(X) = "
           "concat(-X[..., D/2:], X[..., :D/2])); cos, sin: last dim D, broadcast to X. heads = H, head_size = D: "
           "X [..., R] holds H heads of D at the start of each row, Y is [..., H, D]");
}

}  // namespace ingot::ir
