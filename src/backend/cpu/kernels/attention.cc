// Copyright ingot authors. Apache-2.0.
//
// Attention family reference kernels: Attention (opset 23-25) and FlexAttention
// (ai.onnx.preview). The math runs in double; intermediate values are rounded to the
// operator's element type where the ONNX reference computes in that type (scaled Q/K, the
// QK product, the softmax output), so fp16/bf16 results track the reference closely.
// RotaryEmbedding, SwiGLU, LinearAttention and CausalConvWithState live in
// attention_misc.cc.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_attention_misc_kernels(KernelRegistry& r);  // attention_misc.cc

namespace {

// Rounds `v` to the precision of a float element type (identity for double).
double round_to(DataType t, double v) {
  switch (t) {
    case DataType::kFloat32: return static_cast<double>(static_cast<float>(v));
    case DataType::kFloat16: return static_cast<double>(static_cast<float>(Float16(static_cast<float>(v))));
    case DataType::kBFloat16: return static_cast<double>(static_cast<float>(BFloat16(static_cast<float>(v))));
    default: return v;
  }
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Softmax over `x` (n values) in place with NaN propagation like numpy: a row whose max is
// -inf (fully masked) becomes all zeros instead of NaN when `guard_neg_inf` is set.
void softmax_row(std::vector<double>& x, bool guard_neg_inf) {
  double m = kNegInf;
  bool has_nan = false;
  for (double v : x) {
    if (std::isnan(v)) has_nan = true;
    else if (v > m) m = v;
  }
  if (has_nan) {
    for (double& v : x) v = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (std::isinf(m) && m < 0) {
    if (guard_neg_inf) {
      for (double& v : x) v = 0.0;
    } else {
      for (double& v : x) v = std::numeric_limits<double>::quiet_NaN();
    }
    return;
  }
  double sum = 0.0;
  for (double& v : x) {
    v = std::exp(v - m);
    sum += v;
  }
  if (sum == 0.0) sum = 1.0;
  for (double& v : x) v /= sum;
}

// Layout helper for Q/K/V given as 4D (B, H, S, D) or 3D (B, S, H*D).
struct HeadLayout {
  bool packed = false;  // 3D
  int64_t heads = 0, seq = 0, dim = 0;
  int64_t index(int64_t b, int64_t h, int64_t s, int64_t d) const {
    if (packed) return (b * seq + s) * (heads * dim) + h * dim + d;
    return ((b * heads + h) * seq + s) * dim + d;
  }
};

Status attention_kernel(KernelContext& k) {
  const Tensor& Q = *k.input(0);
  const Tensor& K = *k.input(1);
  const Tensor& V = *k.input(2);
  const Tensor* mask = k.input(3);
  const Tensor* past_k = k.input(4);
  const Tensor* past_v = k.input(5);
  const Tensor* nonpad = k.input(6);
  const auto& attrs = k.attrs();
  const DataType qt = Q.dtype();

  if ((past_k == nullptr) != (past_v == nullptr)) return k.error("past_key and past_value must be given together");
  if (nonpad != nullptr && past_k != nullptr)
    return k.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  const size_t rank = Q.rank();
  if ((rank != 3 && rank != 4) || K.rank() != rank || V.rank() != rank)
    return k.error("Q, K and V must all be rank 3 or all rank 4");

  const int64_t B = Q.dim(0);
  HeadLayout ql, kl, vl;
  ql.packed = kl.packed = vl.packed = rank == 3;
  if (rank == 3) {
    int64_t hq = attrs.get_int("q_num_heads", 0), hkv = attrs.get_int("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0) return k.error("3D inputs require positive q_num_heads and kv_num_heads");
    if (Q.dim(2) % hq != 0 || K.dim(2) % hkv != 0 || V.dim(2) % hkv != 0)
      return k.error("hidden sizes must be divisible by the number of heads");
    ql = {true, hq, Q.dim(1), Q.dim(2) / hq};
    kl = {true, hkv, K.dim(1), K.dim(2) / hkv};
    vl = {true, hkv, V.dim(1), V.dim(2) / hkv};
  } else {
    ql = {false, Q.dim(1), Q.dim(2), Q.dim(3)};
    kl = {false, K.dim(1), K.dim(2), K.dim(3)};
    vl = {false, V.dim(1), V.dim(2), V.dim(3)};
  }
  const int64_t Hq = ql.heads, Sq = ql.seq, D = ql.dim;
  const int64_t Hkv = kl.heads, Skv = kl.seq, Dv = vl.dim;
  if (K.dim(0) != B || V.dim(0) != B) return k.error("Q, K and V batch sizes differ");
  if (kl.dim != D) return k.error("Q head size ", D, " differs from K head size ", kl.dim);
  if (vl.heads != Hkv || vl.seq != Skv) return k.error("K and V disagree on heads or sequence length");
  if (Hkv <= 0 || Hq % Hkv != 0) return k.error("q heads (", Hq, ") must be a multiple of kv heads (", Hkv, ")");
  const int64_t group = Hq / Hkv;

  int64_t P = 0;
  if (past_k != nullptr) {
    if (past_k->rank() != 4 || past_v->rank() != 4) return k.error("past_key/past_value must be rank 4");
    P = past_k->dim(2);
    if (past_k->dim(0) != B || past_k->dim(1) != Hkv || past_k->dim(3) != D || past_v->dim(0) != B ||
        past_v->dim(1) != Hkv || past_v->dim(2) != P || past_v->dim(3) != Dv)
      return k.error("past_key ", shape_to_string(past_k->shape()), " / past_value ",
                     shape_to_string(past_v->shape()), " do not match K/V");
  }
  const int64_t T = P + Skv;

  // Full key/value caches (B, Hkv, T, *) in double.
  std::vector<double> kf(static_cast<size_t>(B * Hkv * T * D)), vf(static_cast<size_t>(B * Hkv * T * Dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t d = 0; d < D; ++d)
          kf[((b * Hkv + h) * T + t) * D + d] =
              t < P ? past_k->get_f64(((b * Hkv + h) * P + t) * D + d) : K.get_f64(kl.index(b, h, t - P, d));
        for (int64_t d = 0; d < Dv; ++d)
          vf[((b * Hkv + h) * T + t) * Dv + d] =
              t < P ? past_v->get_f64(((b * Hkv + h) * P + t) * Dv + d) : V.get_f64(vl.index(b, h, t - P, d));
      }
  for (size_t o = 1; o <= 2; ++o) {
    if (!k.has_output(o)) continue;
    Tensor& pres = k.output(o);
    const std::vector<double>& src = o == 1 ? kf : vf;
    if (!pres.defined() || pres.numel() != static_cast<int64_t>(src.size()))
      return k.error("present output ", o, " was not sized by inference");
    for (size_t i = 0; i < src.size(); ++i) pres.set_f64(static_cast<int64_t>(i), src[i]);
  }

  // Mask broadcasting (right-aligned against (B, Hq, Sq, T)); a shorter kv axis is padded
  // with "masked".
  Shape64 mshape(4, 1), mstride(4, 0);
  int64_t mlast = T;
  const bool bool_mask = mask != nullptr && mask->dtype() == DataType::kBool;
  if (mask != nullptr) {
    if (mask->rank() < 1 || mask->rank() > 4) return k.error("attn_mask must have rank 1 to 4");
    for (size_t i = 0; i < mask->rank(); ++i) mshape[4 - mask->rank() + i] = mask->dim(i);
    // ingot::Attention's mask_batch_period P: the mask holds P batch entries and batch b reads
    // entry b % P (Swin's shifted-window mask over batch x window, flattened into the batch).
    const int64_t period = attrs.get_int("mask_batch_period", 0);
    if (period < 0 || (period > 0 && (B % period != 0 || (mshape[0] != period && mshape[0] != 1))))
      return k.error("mask_batch_period ", period, " does not divide batch ", B, " or match attn_mask ",
                     shape_to_string(mask->shape()));
    const int64_t want[4] = {period > 0 ? period : B, Hq, Sq, T};
    mlast = mshape[3];
    if (mlast > T) return k.error("attn_mask kv length ", mlast, " exceeds total kv length ", T);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      if (i < 3 && mshape[i] != 1 && mshape[i] != want[i])
        return k.error("attn_mask ", shape_to_string(mask->shape()), " does not broadcast to (", B, ",", Hq, ",",
                       Sq, ",", T, ")");
      mstride[i] = mshape[i] == 1 && i < 3 ? 0 : stride;
      stride *= mshape[i];
    }
  }
  std::vector<int64_t> nonpad_len;
  if (nonpad != nullptr) {
    if (nonpad->numel() != B) return k.error("nonpad_kv_seqlen must have batch_size (", B, ") elements");
    for (int64_t b = 0; b < B; ++b) {
      int64_t n = nonpad->get_i64(b);
      if (n < 0 || n > T) return k.error("nonpad_kv_seqlen[", b, "] = ", n, " outside [0, ", T, "]");
      nonpad_len.push_back(n);
    }
  }
  const bool causal = attrs.get_int("is_causal", 0) != 0;
  const int64_t lw = attrs.get_int("left_window_size", -1), rw = attrs.get_int("right_window_size", -1);
  auto offset_of = [&](int64_t b) -> int64_t {
    if (past_k != nullptr) return P;
    if (nonpad != nullptr) return nonpad_len[static_cast<size_t>(b)] - Sq;
    return 0;
  };
  const int64_t mask_period = mask != nullptr ? attrs.get_int("mask_batch_period", 0) : 0;
  auto bias_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> double {
    double bias = 0.0;
    if (mask != nullptr) {
      if (j >= mlast) return kNegInf;
      const int64_t mb = mask_period > 0 ? b % mask_period : b;
      int64_t idx = mb * mstride[0] + h * mstride[1] + i * mstride[2] + j * mstride[3];
      if (bool_mask) {
        if (mask->get_i64(idx) == 0) return kNegInf;
      } else {
        bias = mask->get_f64(idx);
      }
    }
    const int64_t p = i + offset_of(b);
    if (causal && j > p) bias += kNegInf;
    if (lw >= 0 && p - j > lw) bias += kNegInf;
    if (rw >= 0 && j - p > rw) bias += kNegInf;
    if (nonpad != nullptr && j >= nonpad_len[static_cast<size_t>(b)]) bias += kNegInf;
    return bias;
  };

  const double scale = attrs.has("scale") ? static_cast<double>(attrs.get_float("scale", 1.0f))
                                          : 1.0 / std::sqrt(static_cast<double>(D));
  const double sqs = round_to(qt, std::sqrt(scale));
  const double softcap = attrs.get_float("softcap", 0.0f);
  const int64_t mode = attrs.get_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return k.error("qk_matmul_output_mode must be in [0, 3]");
  DataType st = qt;
  // ingot::Attention (the fused node of reduced-precision engines) adds the mask and takes the
  // softmax in fp32, as the CUDA kernels do: an fp32 mask built from finfo(float32).min must not
  // become -inf through fp16 rounding (a fully masked row would turn to zeros, not the fp32
  // model's uniform row).
  const bool fused = k.node().domain() == "ingot";
  DataType sum_t = qt;
  if (fused && data_type_bits(qt) < 32) {
    st = DataType::kFloat32;
    if (mask != nullptr && !bool_mask && data_type_bits(mask->dtype()) > data_type_bits(qt)) sum_t = mask->dtype();
  }
  if (attrs.has("softmax_precision")) {
    st = static_cast<DataType>(attrs.get_int("softmax_precision", 1));
    if (st != DataType::kFloat32 && st != DataType::kFloat16 && st != DataType::kBFloat16 &&
        st != DataType::kFloat64)
      return k.error("unsupported softmax_precision ", attrs.get_int("softmax_precision", 1));
  }
  Tensor* qk_out = k.has_output(3) ? &k.output(3) : nullptr;
  if (qk_out != nullptr && qk_out->numel() != B * Hq * Sq * T) return k.error("qk_matmul_output was not sized");
  Tensor& Y = k.output(0);
  if (Y.numel() != B * Hq * Sq * Dv) return k.error("output Y was not sized by inference");

  std::vector<double> qs(static_cast<size_t>(D)), raw(static_cast<size_t>(T)), wb(static_cast<size_t>(T));
  std::vector<double> ks(kf.size());
  for (size_t i = 0; i < kf.size(); ++i) ks[i] = round_to(qt, kf[i] * sqs);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < Sq; ++i) {
        for (int64_t d = 0; d < D; ++d) qs[d] = round_to(qt, Q.get_f64(ql.index(b, h, i, d)) * sqs);
        bool all_masked = true;
        for (int64_t j = 0; j < T; ++j) {
          const double* kr = &ks[((b * Hkv + kh) * T + j) * D];
          double s = 0.0;
          for (int64_t d = 0; d < D; ++d) s += qs[d] * kr[d];
          s = round_to(qt, s);
          if (softcap > 0) s = round_to(qt, std::tanh(s / softcap) * softcap);
          raw[j] = s;
          double bias = bias_at(b, h, i, j);
          if (!(std::isinf(bias) && bias < 0)) all_masked = false;
          wb[j] = round_to(st, round_to(sum_t, s + bias));
        }
        const int64_t qk_base = ((b * Hq + h) * Sq + i) * T;
        if (qk_out != nullptr && mode <= 2)
          for (int64_t j = 0; j < T; ++j) qk_out->set_f64(qk_base + j, mode == 2 ? wb[j] : raw[j]);
        softmax_row(wb, true);
        for (int64_t j = 0; j < T; ++j) wb[j] = all_masked ? 0.0 : round_to(st, wb[j]);
        if (qk_out != nullptr && mode == 3)
          for (int64_t j = 0; j < T; ++j) qk_out->set_f64(qk_base + j, wb[j]);
        for (int64_t j = 0; j < T; ++j) wb[j] = round_to(qt, wb[j]);
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < T; ++j) acc += wb[j] * vf[((b * Hkv + kh) * T + j) * Dv + d];
          int64_t yi = rank == 3 ? (b * Sq + i) * (Hq * Dv) + h * Dv + d : ((b * Hq + h) * Sq + i) * Dv + d;
          Y.set_f64(yi, acc);
        }
      }
    }
  return Status::Ok();
}

Status flex_attention_kernel(KernelContext& k) {
  const Tensor& Q = *k.input(0);
  const Tensor& K = *k.input(1);
  const Tensor& V = *k.input(2);
  if (Q.rank() != 4 || K.rank() != 4 || V.rank() != 4) return k.error("Q, K and V must be rank 4");
  const int64_t B = Q.dim(0), Hq = Q.dim(1), L = Q.dim(2), E = Q.dim(3);
  const int64_t Hkv = K.dim(1), S = K.dim(2), Ev = V.dim(3);
  if (K.dim(0) != B || V.dim(0) != B) return k.error("batch sizes differ");
  if (K.dim(3) != E) return k.error("Q and K head sizes differ");
  if (V.dim(1) != Hkv || V.dim(2) != S) return k.error("K and V disagree on heads or sequence length");
  if (Hkv <= 0 || Hq % Hkv != 0) return k.error("q heads (", Hq, ") must be a multiple of kv heads (", Hkv, ")");
  const int64_t group = Hq / Hkv;
  const DataType qt = Q.dtype();
  const auto& attrs = k.attrs();
  const float scale = attrs.has("scale") ? attrs.get_float("scale", 1.0f)
                                         : static_cast<float>(1.0 / std::sqrt(static_cast<double>(E)));
  const double sqs = round_to(qt, static_cast<double>(std::sqrt(scale)));
  DataType ct = qt == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32;
  if (attrs.has("softmax_precision")) {
    ct = static_cast<DataType>(attrs.get_int("softmax_precision", 1));
    if (ct != DataType::kFloat32 && ct != DataType::kFloat16 && ct != DataType::kBFloat16 &&
        ct != DataType::kFloat64)
      return k.error("unsupported softmax_precision ", attrs.get_int("softmax_precision", 1));
  }
  auto sc = Tensor::zeros(ct, {B, Hq, L, S});
  if (!sc.ok()) return sc.status();
  Tensor scores = std::move(sc).value();
  std::vector<double> ks(static_cast<size_t>(K.numel()));
  for (int64_t i = 0; i < K.numel(); ++i) ks[static_cast<size_t>(i)] = round_to(qt, K.get_f64(i) * sqs);
  std::vector<double> qs(static_cast<size_t>(E));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t e = 0; e < E; ++e) qs[e] = round_to(qt, Q.get_f64(((b * Hq + h) * L + i) * E + e) * sqs);
        for (int64_t j = 0; j < S; ++j) {
          const double* kr = &ks[static_cast<size_t>(((b * Hkv + h / group) * S + j) * E)];
          double s = 0.0;
          for (int64_t e = 0; e < E; ++e) s += qs[e] * kr[e];
          scores.set_f64(((b * Hq + h) * L + i) * S + j, round_to(qt, s));
        }
      }
  auto apply_mod = [&](const char* name, Tensor& t) -> Status {
    const ir::Graph* g = attrs.get_graph(name);
    if (g == nullptr) return Status::Ok();
    auto outs = k.run_subgraph(*g, {t});
    if (!outs.ok()) return outs.status();
    const std::vector<Tensor>& o = outs.value();
    if (o.size() != 1) return k.error(name, " must produce exactly one output");
    if (o[0].numel() != t.numel()) return k.error(name, " output has ", o[0].numel(), " elements, expected ", t.numel());
    Tensor res = Tensor::zeros(ct, t.shape()).value();
    for (int64_t i = 0; i < t.numel(); ++i) res.set_f64(i, o[0].get_f64(i));
    t = std::move(res);
    return Status::Ok();
  };
  Status s = apply_mod("score_mod", scores);
  if (!s.ok()) return s;
  std::vector<double> row(static_cast<size_t>(S));
  for (int64_t r = 0; r < B * Hq * L; ++r) {
    for (int64_t j = 0; j < S; ++j) row[j] = scores.get_f64(r * S + j);
    softmax_row(row, false);
    for (int64_t j = 0; j < S; ++j) scores.set_f64(r * S + j, row[j]);
  }
  s = apply_mod("prob_mod", scores);
  if (!s.ok()) return s;
  Tensor& Y = k.output(0);
  if (Y.numel() != B * Hq * L * Ev) return k.error("output Y was not sized by inference");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t e = 0; e < Ev; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j < S; ++j)
            acc += scores.get_f64(((b * Hq + h) * L + i) * S + j) *
                   round_to(ct, V.get_f64(((b * Hkv + h / group) * S + j) * Ev + e));
          Y.set_f64(((b * Hq + h) * L + i) * Ev + e, round_to(ct, acc));
        }
  return Status::Ok();
}

}  // namespace

void register_attention_kernels(KernelRegistry& r) {
  r.add("Attention", attention_kernel);
  r.add("FlexAttention", flex_attention_kernel, "ai.onnx.preview");
  register_attention_misc_kernels(r);
}

}  // namespace ingot::cpu
