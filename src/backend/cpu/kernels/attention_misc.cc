// Copyright ingot authors. Apache-2.0.
//
// Attention-family helpers: RotaryEmbedding (23), SwiGLU (28), LinearAttention (27) and
// CausalConvWithState (27). Math in double.
#include <cmath>
#include <vector>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_attention_misc_kernels(KernelRegistry& r);

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Status rotary_embedding_kernel(KernelContext& k) {
  const Tensor& X = *k.input(0);
  const Tensor& cosc = *k.input(1);
  const Tensor& sinc = *k.input(2);
  const Tensor* pos = k.input(3);
  Tensor& Y = k.output(0);
  const auto& attrs = k.attrs();
  int64_t B, H, S, D;
  bool packed = X.rank() == 3;
  if (X.rank() == 4) {
    B = X.dim(0); H = X.dim(1); S = X.dim(2); D = X.dim(3);
  } else if (packed) {
    H = attrs.get_int("num_heads", 0);
    if (H <= 0) return k.error("num_heads is required for 3D input");
    B = X.dim(0); S = X.dim(1);
    if (X.dim(2) % H != 0) return k.error("hidden size ", X.dim(2), " not divisible by num_heads ", H);
    D = X.dim(2) / H;
  } else {
    return k.error("input must be rank 3 or 4");
  }
  int64_t rd = attrs.get_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = D;
  if (rd < 0 || rd > D || rd % 2 != 0) return k.error("rotary_embedding_dim ", rd, " invalid for head size ", D);
  const int64_t half = rd / 2;
  if (cosc.shape() != sinc.shape()) return k.error("cos_cache and sin_cache shapes differ");
  if (cosc.rank() < 1 || cosc.dim(cosc.rank() - 1) != half)
    return k.error("last dim of cos_cache (", shape_to_string(cosc.shape()), ") must be rotary_embedding_dim/2 = ", half);
  // Row of the caches for (b, s).
  std::vector<int64_t> rows(static_cast<size_t>(B * S));
  if (pos != nullptr) {
    if (pos->numel() != B * S) return k.error("position_ids must have shape (batch, sequence)");
    if (cosc.rank() != 2) return k.error("cos_cache must be rank 2 with position_ids");
    for (int64_t i = 0; i < B * S; ++i) {
      int64_t p = pos->get_i64(i);
      if (p < 0 || p >= cosc.dim(0)) return k.error("position id ", p, " out of range [0, ", cosc.dim(0), ")");
      rows[static_cast<size_t>(i)] = p;
    }
  } else if (cosc.rank() == 3) {
    if (cosc.dim(0) != B || cosc.dim(1) != S) return k.error("cos_cache must have shape (batch, sequence, rotary_dim/2)");
    for (int64_t i = 0; i < B * S; ++i) rows[static_cast<size_t>(i)] = i;
  } else if (cosc.rank() == 2) {
    if (cosc.dim(0) < S) return k.error("cos_cache has fewer rows than the sequence length");
    for (int64_t i = 0; i < B * S; ++i) rows[static_cast<size_t>(i)] = i % S;
  } else {
    return k.error("cos_cache must be rank 2 or 3");
  }
  const bool interleaved = attrs.get_int("interleaved", 0) != 0;
  std::vector<double> x(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t base = packed ? (b * S + s) * H * D + h * D : ((b * H + h) * S + s) * D;
        for (int64_t d = 0; d < D; ++d) x[d] = X.get_f64(base + d);
        const int64_t row = rows[static_cast<size_t>(b * S + s)];
        for (int64_t i = 0; i < half; ++i) {
          double c = cosc.get_f64(row * half + i), sn = sinc.get_f64(row * half + i);
          int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          Y.set_f64(base + i1, c * x[i1] - sn * x[i2]);
          Y.set_f64(base + i2, sn * x[i1] + c * x[i2]);
        }
        for (int64_t d = rd; d < D; ++d) Y.set_f64(base + d, x[d]);
      }
  return Status::Ok();
}

Status swiglu_kernel(KernelContext& k) {
  const Tensor& A = *k.input(0);
  const Tensor& Bt = *k.input(1);
  if (A.shape() != Bt.shape()) return k.error("A and B must have identical shapes");
  Tensor& Y = k.output(0);
  const double alpha = k.attrs().get_float("alpha", 1.0f);
  for (int64_t i = 0; i < A.numel(); ++i) {
    double a = A.get_f64(i);
    Y.set_f64(i, a * sigmoid(alpha * a) * Bt.get_f64(i));
  }
  return Status::Ok();
}

Status linear_attention_kernel(KernelContext& k) {
  const Tensor& q = *k.input(0);
  const Tensor& key = *k.input(1);
  const Tensor& v = *k.input(2);
  const Tensor* past = k.input(3);
  const Tensor* decay = k.input(4);
  const Tensor* beta = k.input(5);
  const auto& attrs = k.attrs();
  const int64_t hq = attrs.get_int("q_num_heads", 0), hkv = attrs.get_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0) return k.error("q_num_heads must be a positive multiple of kv_num_heads");
  const std::string rule = attrs.get_string("update_rule", "gated_delta");
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  if (!gating && !delta && rule != "linear") return k.error("unsupported update_rule '", rule, "'");
  if (gating != (decay != nullptr)) return k.error("update_rule '", rule, "' ", gating ? "requires" : "forbids", " decay");
  if (delta != (beta != nullptr)) return k.error("update_rule '", rule, "' ", delta ? "requires" : "forbids", " beta");
  if (q.rank() != 3 || key.rank() != 3 || v.rank() != 3) return k.error("query, key and value must be rank 3");
  const int64_t B = q.dim(0), T = q.dim(1);
  if (q.dim(2) % hq != 0 || v.dim(2) % hkv != 0) return k.error("hidden sizes must be divisible by the head counts");
  const int64_t dk = q.dim(2) / hq, dv = v.dim(2) / hkv, group = hq / hkv;
  if (key.dim(0) != B || key.dim(1) != T || key.dim(2) != hkv * dk || v.dim(0) != B || v.dim(1) != T)
    return k.error("key ", shape_to_string(key.shape()), " / value ", shape_to_string(v.shape()),
                   " do not match query ", shape_to_string(q.shape()));
  int64_t decay_last = 0, beta_last = 0;
  if (decay != nullptr) {
    if (decay->rank() != 3 || decay->dim(0) != B || decay->dim(1) != T) return k.error("decay must be (B, T, *)");
    decay_last = decay->dim(2);
    if (decay_last != hkv && decay_last != hkv * dk) return k.error("decay last dim must be kv_num_heads or kv_num_heads*d_k");
  }
  if (beta != nullptr) {
    if (beta->rank() != 3 || beta->dim(0) != B || beta->dim(1) != T) return k.error("beta must be (B, T, *)");
    beta_last = beta->dim(2);
    if (beta_last != hkv && beta_last != 1) return k.error("beta last dim must be kv_num_heads or 1");
  }
  std::vector<double> state(static_cast<size_t>(B * hkv * dk * dv), 0.0);
  if (past != nullptr) {
    if (past->shape() != Shape64{B, hkv, dk, dv})
      return k.error("past_state ", shape_to_string(past->shape()), " does not match (", B, ",", hkv, ",", dk, ",", dv, ")");
    for (int64_t i = 0; i < past->numel(); ++i) state[static_cast<size_t>(i)] = past->get_f64(i);
  }
  double scale = attrs.get_float("scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(dk));
  Tensor& out = k.output(0);
  std::vector<double> kt(static_cast<size_t>(dk)), vt(static_cast<size_t>(dv)), retrieved(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < hkv; ++h) {
        double* S = &state[static_cast<size_t>((b * hkv + h) * dk * dv)];
        const int64_t row = b * T + t;
        for (int64_t d = 0; d < dk; ++d) kt[d] = key.get_f64(row * hkv * dk + h * dk + d);
        for (int64_t m = 0; m < dv; ++m) vt[m] = v.get_f64(row * hkv * dv + h * dv + m);
        if (gating) {
          for (int64_t d = 0; d < dk; ++d) {
            double g = decay_last == hkv ? decay->get_f64(row * hkv + h) : decay->get_f64(row * hkv * dk + h * dk + d);
            double f = std::exp(g);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= f;
          }
        }
        if (delta) {
          double bt = beta->get_f64(row * beta_last + (beta_last == 1 ? 0 : h));
          for (int64_t m = 0; m < dv; ++m) {
            double r = 0.0;
            for (int64_t d = 0; d < dk; ++d) r += S[d * dv + m] * kt[d];
            retrieved[m] = r;
          }
          for (int64_t m = 0; m < dv; ++m) vt[m] = bt * (vt[m] - retrieved[m]);
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) S[d * dv + m] += kt[d] * vt[m];
        for (int64_t g = 0; g < group; ++g) {
          const int64_t qh = h * group + g;
          for (int64_t m = 0; m < dv; ++m) {
            double acc = 0.0;
            for (int64_t d = 0; d < dk; ++d) acc += q.get_f64(row * hq * dk + qh * dk + d) * S[d * dv + m];
            out.set_f64(row * hq * dv + qh * dv + m, scale * acc);
          }
        }
      }
  if (k.has_output(1)) {
    Tensor& ps = k.output(1);
    if (ps.numel() != static_cast<int64_t>(state.size())) return k.error("present_state was not sized by inference");
    for (size_t i = 0; i < state.size(); ++i) ps.set_f64(static_cast<int64_t>(i), state[i]);
  }
  return Status::Ok();
}

Status causal_conv_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  const Tensor* bias = k.input(2);
  const Tensor* past = k.input(3);
  const std::string act = k.attrs().get_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") return k.error("unsupported activation '", act, "'");
  if (x.rank() != 3) return k.error("input must be rank 3 (batch, channels, length)");
  if (w.rank() != 3) return k.error("weight must be rank 3 (channels, 1, k)");
  const int64_t B = x.dim(0), C = x.dim(1), L = x.dim(2), K = w.dim(2);
  if (w.dim(0) != C || w.dim(1) != 1 || K < 1) return k.error("weight ", shape_to_string(w.shape()), " must be (", C, ", 1, k)");
  if (bias != nullptr && bias->numel() != C) return k.error("bias must have ", C, " elements");
  if (past != nullptr && past->shape() != Shape64{B, C, K - 1})
    return k.error("past_state ", shape_to_string(past->shape()), " must be (", B, ", ", C, ", ", K - 1, ")");
  Tensor& y = k.output(0);
  std::vector<double> padded(static_cast<size_t>(L + K - 1));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t t = 0; t < K - 1; ++t) padded[t] = past != nullptr ? past->get_f64((b * C + c) * (K - 1) + t) : 0.0;
      for (int64_t t = 0; t < L; ++t) padded[K - 1 + t] = x.get_f64((b * C + c) * L + t);
      for (int64_t t = 0; t < L; ++t) {
        double acc = bias != nullptr ? bias->get_f64(c) : 0.0;
        for (int64_t m = 0; m < K; ++m) acc += w.get_f64(c * K + m) * padded[t + m];
        if (act != "none") acc = acc * sigmoid(acc);
        y.set_f64((b * C + c) * L + t, acc);
      }
      if (k.has_output(1) && K > 1) {
        Tensor& ps = k.output(1);
        for (int64_t t = 0; t < K - 1; ++t) ps.set_f64((b * C + c) * (K - 1) + t, padded[L + t]);
      }
    }
  return Status::Ok();
}

}  // namespace

void register_attention_misc_kernels(KernelRegistry& r) {
  r.add("RotaryEmbedding", rotary_embedding_kernel);
  r.add("SwiGLU", swiglu_kernel);
  r.add("LinearAttention", linear_attention_kernel);
  r.add("CausalConvWithState", causal_conv_kernel);
}

}  // namespace ingot::cpu
