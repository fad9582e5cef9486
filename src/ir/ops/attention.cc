// Copyright ingot authors. Apache-2.0.
//
// Attention family schemas and shape inference: Attention (23-25), RotaryEmbedding (23),
// SwiGLU (28), LinearAttention and CausalConvWithState (27), FlexAttention (ai.onnx.preview).
#include "ir/ops/all_ops.h"

namespace ingot::ir {

namespace {

Dim dim_mul(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return Dim(a.value() * b.value());
  if (a.is_known() && a.value() == 1) return b;
  if (b.is_known() && b.value() == 1) return a;
  return Dim::unknown();
}

Dim dim_add(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return Dim(a.value() + b.value());
  if (a.is_known() && a.value() == 0) return b;
  if (b.is_known() && b.value() == 0) return a;
  return Dim::unknown();
}

/// a / n for a known positive n; error text in `err` when a known `a` is not divisible.
Dim dim_div(const Dim& a, int64_t n, bool* bad) {
  if (n == 1) return a;
  if (!a.is_known() || n <= 0) return Dim::unknown();
  if (a.value() % n != 0) {
    *bad = true;
    return Dim::unknown();
  }
  return Dim(a.value() / n);
}

Dim dim_at(const Shape& s, size_t i) {
  if (!s.rank_known() || i >= s.rank()) return Dim::unknown();
  return s[i];
}

bool is_floating(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kFloat64 || t == DataType::kUndefined;
}

Status check_float_input(InferenceContext& c, size_t i, const char* name) {
  if (c.has_input(i) && !is_floating(c.input_dtype(i)))
    return c.error("input ", name, " must be a floating type");
  return Status::Ok();
}

Status infer_attention(InferenceContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    Status s = check_float_input(c, i, i == 0 ? "Q" : i == 1 ? "K" : "V");
    if (!s.ok()) return s;
  }
  const Shape& q = c.input_shape(0);
  const Shape& k = c.input_shape(1);
  const Shape& v = c.input_shape(2);
  DataType qt = c.input_dtype(0), kt = c.input_dtype(1), vt = c.input_dtype(2);
  bool has_past = c.has_input(4) || c.has_input(5);
  if (c.has_input(4) != c.has_input(5)) return c.error("past_key and past_value must be given together");
  if (c.has_input(6) && has_past) return c.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  int64_t lw = c.attrs().get_int("left_window_size", -1), rw = c.attrs().get_int("right_window_size", -1);
  if (lw < -1 || rw < -1) return c.error("window sizes must be -1 or nonnegative");
  int64_t mode = c.attrs().get_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return c.error("qk_matmul_output_mode must be in [0, 3], got ", mode);

  int64_t rank = q.rank_known() ? static_cast<int64_t>(q.rank())
                 : k.rank_known() ? static_cast<int64_t>(k.rank())
                 : v.rank_known() ? static_cast<int64_t>(v.rank())
                                  : -1;
  for (const Shape* s : {&q, &k, &v})
    if (s->rank_known() && static_cast<int64_t>(s->rank()) != rank)
      return c.error("Q, K and V must have the same rank (3 or 4)");
  if (rank != -1 && rank != 3 && rank != 4) return c.error("Q, K and V must be rank 3 or 4, got ", rank);

  auto set_all_unknown = [&]() {
    c.set_output(0, qt, Shape::unknown_rank());
    if (c.num_outputs() > 1) c.set_output(1, kt, Shape::unknown_rank());
    if (c.num_outputs() > 2) c.set_output(2, vt, Shape::unknown_rank());
    if (c.num_outputs() > 3) c.set_output(3, qt, Shape::unknown_rank());
    return Status::Ok();
  };
  if (rank == -1) return set_all_unknown();

  Dim batch = dim_at(q, 0);
  Dim hq, sq, hkv, skv, dk, dv;
  if (rank == 3) {
    if (!c.attrs().has("q_num_heads") || !c.attrs().has("kv_num_heads"))
      return c.error("3D inputs require q_num_heads and kv_num_heads");
    int64_t nq = c.attrs().get_int("q_num_heads", 0), nkv = c.attrs().get_int("kv_num_heads", 0);
    if (nq <= 0 || nkv <= 0) return c.error("q_num_heads and kv_num_heads must be positive");
    if (nq % nkv != 0) return c.error("q_num_heads (", nq, ") must be a multiple of kv_num_heads (", nkv, ")");
    bool bad = false;
    hq = Dim(nq);
    hkv = Dim(nkv);
    sq = dim_at(q, 1);
    skv = dim_at(k, 1);
    Dim dq = dim_div(dim_at(q, 2), nq, &bad);
    dk = dim_div(dim_at(k, 2), nkv, &bad);
    dv = dim_div(dim_at(v, 2), nkv, &bad);
    if (bad) return c.error("hidden sizes must be divisible by the number of heads");
    (void)dq;
  } else {
    hq = dim_at(q, 1);
    sq = dim_at(q, 2);
    hkv = dim_at(k, 1);
    skv = dim_at(k, 2);
    dk = dim_at(k, 3);
    dv = dim_at(v, 3);
    if (hq.is_known() && hkv.is_known() && hkv.value() > 0 && hq.value() % hkv.value() != 0)
      return c.error("q_num_heads (", hq.value(), ") must be a multiple of kv_num_heads (", hkv.value(), ")");
  }
  Dim past = has_past ? dim_at(c.input_shape(4), 2) : Dim(0);
  Dim total = dim_add(past, skv);

  if (rank == 3)
    c.set_output(0, qt, Shape({batch, sq, dim_mul(hq, dv)}));
  else
    c.set_output(0, qt, Shape({batch, hq, sq, dv}));
  if (c.num_outputs() > 1) c.set_output(1, kt, Shape({batch, hkv, total, dk}));
  if (c.num_outputs() > 2) c.set_output(2, vt, Shape({batch, hkv, total, dv}));
  if (c.num_outputs() > 3) c.set_output(3, qt, Shape({batch, hq, sq, total}));
  return Status::Ok();
}

Status infer_rotary(InferenceContext& c) {
  Status s = check_float_input(c, 0, "X");
  if (!s.ok()) return s;
  const Shape& x = c.input_shape(0);
  if (x.rank_known() && x.rank() != 3 && x.rank() != 4)
    return c.error("input must be rank 3 or 4, got rank ", x.rank());
  if (x.rank_known() && x.rank() == 3) {
    int64_t nh = c.attrs().get_int("num_heads", 0);
    if (nh <= 0) return c.error("num_heads is required and must be positive for 3D input");
    if (x[2].is_known() && x[2].value() % nh != 0)
      return c.error("hidden size ", x[2].value(), " not divisible by num_heads ", nh);
  }
  if (c.has_input(3) && c.input_dtype(3) != DataType::kInt64 && c.input_dtype(3) != DataType::kUndefined)
    return c.error("position_ids must be int64");
  return c.propagate_same(0, 0);
}

Status infer_swiglu(InferenceContext& c) {
  Status s = check_float_input(c, 0, "A");
  if (!s.ok()) return s;
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  if (a.rank_known() && b.rank_known()) {
    if (a.rank() != b.rank()) return c.error("A ", a.to_string(), " and B ", b.to_string(), " must have identical shapes");
    std::vector<Dim> dims = a.dims();
    for (size_t i = 0; i < a.rank(); ++i) {
      if (a[i].is_known() && b[i].is_known() && a[i].value() != b[i].value())
        return c.error("A ", a.to_string(), " and B ", b.to_string(), " must have identical shapes");
      if (!a[i].is_known() && b[i].is_known()) dims[i] = b[i];
    }
    c.set_output(0, c.input_dtype(0), Shape(dims));
    return Status::Ok();
  }
  c.set_output(0, c.input_dtype(0), a.rank_known() ? a : b);
  return Status::Ok();
}

Status infer_linear_attention(InferenceContext& c) {
  int64_t nq = c.attrs().get_int("q_num_heads", 0), nkv = c.attrs().get_int("kv_num_heads", 0);
  if (nq <= 0 || nkv <= 0 || nq % nkv != 0)
    return c.error("q_num_heads (", nq, ") must be a positive multiple of kv_num_heads (", nkv, ")");
  std::string rule = c.attrs().get_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return c.error("unsupported update_rule '", rule, "'");
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  if (gating != c.has_input(4)) return c.error("update_rule '", rule, gating ? "' requires" : "' forbids", " decay");
  if (delta != c.has_input(5)) return c.error("update_rule '", rule, delta ? "' requires" : "' forbids", " beta");
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = c.input_shape(i);
    if (s.rank_known() && s.rank() != 3) return c.error("query, key and value must be rank 3 (B, T, H*D)");
  }
  const Shape& q = c.input_shape(0);
  const Shape& v = c.input_shape(2);
  bool bad = false;
  Dim dk = dim_div(dim_at(q, 2), nq, &bad);
  Dim dv = dim_div(dim_at(v, 2), nkv, &bad);
  if (bad) return c.error("hidden sizes must be divisible by the number of heads");
  c.set_output(0, c.input_dtype(0), Shape({dim_at(q, 0), dim_at(q, 1), dim_mul(Dim(nq), dv)}));
  DataType st = c.has_input(3) ? c.input_dtype(3) : c.input_dtype(0);
  if (c.num_outputs() > 1) c.set_output(1, st, Shape({dim_at(q, 0), Dim(nkv), dk, dv}));
  return Status::Ok();
}

Status infer_causal_conv(InferenceContext& c) {
  std::string act = c.attrs().get_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") return c.error("unsupported activation '", act, "'");
  const Shape& x = c.input_shape(0);
  const Shape& w = c.input_shape(1);
  if (x.rank_known() && x.rank() != 3) return c.error("input must be rank 3 (batch, channels, length)");
  if (w.rank_known() && w.rank() != 3) return c.error("weight must be rank 3 (channels, 1, k)");
  c.set_output(0, c.input_dtype(0), x.rank_known() ? x : Shape({Dim(), Dim(), Dim()}));
  Dim kk = dim_at(w, 2);
  Dim state = kk.is_known() ? Dim(kk.value() - 1) : Dim::unknown();
  if (c.num_outputs() > 1) c.set_output(1, c.input_dtype(0), Shape({dim_at(x, 0), dim_at(x, 1), state}));
  return Status::Ok();
}

Status infer_flex_attention(InferenceContext& c) {
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = c.input_shape(i);
    if (s.rank_known() && s.rank() != 4) return c.error("Q, K and V must be rank 4");
    Status st = check_float_input(c, i, i == 0 ? "Q" : i == 1 ? "K" : "V");
    if (!st.ok()) return st;
  }
  const Shape& q = c.input_shape(0);
  const Shape& k = c.input_shape(1);
  const Shape& v = c.input_shape(2);
  Dim hq = dim_at(q, 1), hkv = dim_at(k, 1);
  if (hq.is_known() && hkv.is_known() && (hkv.value() <= 0 || hq.value() % hkv.value() != 0))
    return c.error("q_num_heads (", hq.value(), ") must be a multiple of kv_num_heads (", hkv.value(), ")");
  Dim e = dim_at(q, 3), ek = dim_at(k, 3);
  if (e.is_known() && ek.is_known() && e.value() != ek.value())
    return c.error("Q and K head sizes differ (", e.value(), " vs ", ek.value(), ")");
  c.set_output(0, c.input_dtype(0), Shape({dim_at(q, 0), hq, dim_at(q, 2), dim_at(v, 3)}));
  return Status::Ok();
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add("Attention").inputs(3, 7).outputs(1, 4).opsets(23)
      .attr("is_causal", AttrType::kInt)
      .attr("kv_num_heads", AttrType::kInt)
      .attr("q_num_heads", AttrType::kInt)
      .attr("qk_matmul_output_mode", AttrType::kInt)
      .attr("scale", AttrType::kFloat)
      .attr("softcap", AttrType::kFloat)
      .attr("softmax_precision", AttrType::kInt)
      .attr("left_window_size", AttrType::kInt)
      .attr("right_window_size", AttrType::kInt)
      .infer(infer_attention);

  r.add("RotaryEmbedding").inputs(3, 4).outputs(1, 1).opsets(23)
      .attr("interleaved", AttrType::kInt)
      .attr("num_heads", AttrType::kInt)
      .attr("rotary_embedding_dim", AttrType::kInt)
      .infer(infer_rotary);

  r.add("SwiGLU").inputs(2, 2).outputs(1, 1).opsets(28)
      .attr("alpha", AttrType::kFloat)
      .infer(infer_swiglu);

  r.add("LinearAttention").inputs(3, 6).outputs(1, 2).opsets(27)
      .attr("chunk_size", AttrType::kInt)
      .attr("kv_num_heads", AttrType::kInt, true)
      .attr("q_num_heads", AttrType::kInt, true)
      .attr("scale", AttrType::kFloat)
      .attr("update_rule", AttrType::kString)
      .infer(infer_linear_attention);

  r.add("CausalConvWithState").inputs(2, 4).outputs(1, 2).opsets(27)
      .attr("activation", AttrType::kString)
      .infer(infer_causal_conv);

  r.add("FlexAttention", "ai.onnx.preview").inputs(3, 3).outputs(1, 1).opsets(1)
      .attr("prob_mod", AttrType::kGraph)
      .attr("score_mod", AttrType::kGraph)
      .attr("scale", AttrType::kFloat)
      .attr("softmax_precision", AttrType::kInt)
      .infer(infer_flex_attention);
}

}  // namespace ingot::ir
