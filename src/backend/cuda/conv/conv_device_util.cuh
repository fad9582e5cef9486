// Copyright ingot authors. Apache-2.0.
//
// Device helpers the convolution kernels that run their own epilogue share (depthwise, grouped,
// small-channel): packed loads and stores of V consecutive elements as one access, and the fused
// epilogue y = act(acc [+ r]) [+ r] read from any of their descriptors (act, act_params,
// residual_after_activation).
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda::conv_util {

/// V consecutive elements as one access of V * sizeof(T) bytes (p aligned to it).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ void load(const T* p, T (&out)[V]) {
  if constexpr (V == 1) {
    out[0] = *p;
  } else {
    const Vec<T, V> pk = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = pk.v[v];
  }
}

/// load, converted to fp32.
template <class T, int V>
__device__ __forceinline__ void load_f32(const T* p, float (&out)[V]) {
  T in[V];
  load<T, V>(p, in);
#pragma unroll
  for (int v = 0; v < V; ++v) out[v] = ew::to_f32(in[v]);
}

template <class T, int V>
__device__ __forceinline__ void store(T* p, const T (&in)[V]) {
  if constexpr (V == 1) {
    *p = in[0];
  } else {
    Vec<T, V> pk;
#pragma unroll
    for (int v = 0; v < V; ++v) pk.v[v] = in[v];
    *reinterpret_cast<Vec<T, V>*>(p) = pk;
  }
}

/// act(acc + r) or act(acc) + r (d.residual_after_activation), or act(acc) without a residual.
template <class Desc>
__device__ __forceinline__ float epilogue(float acc, float residual, bool has_residual, const Desc& d) {
  if (has_residual && !d.residual_after_activation) acc += residual;
  if (d.act != UnaryOp::kIdentity)
    acc = ew::apply_unary(d.act, acc, d.act_params.alpha, d.act_params.beta, d.act_params.lo, d.act_params.hi);
  if (has_residual && d.residual_after_activation) acc += residual;
  return acc;
}

/// kOp over v[0 .. N), its switch folded away (kOp is a constant).
template <UnaryOp kOp, int N>
__device__ __forceinline__ void activate_all(float (&v)[N], const UnaryParams& p) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = ew::apply_unary(kOp, v[i], p.alpha, p.beta, p.lo, p.hi);
}

/// apply_unary behind a call: the ops FusedConv never carries, kept out of the unrolled code.
__device__ __noinline__ inline float apply_unary_call(UnaryOp op, float x, UnaryParams p) {
  return ew::apply_unary(op, x, p.alpha, p.beta, p.lo, p.hi);
}

/// epilogue over N values at once: acc[i] = act(acc[i] + r[i]) or act(acc[i]) + r[i] (or act(acc[i])
/// without a residual), with one switch on the activation around straight-line code for all N.
/// Why: epilogue() inlined per output puts apply_unary's whole switch (19 ops, erf, tanh, exp, log
/// among them) into the unrolled loop N times; session 20's ncu of the small-channel stem kernel
/// (32 outputs a thread) found warps stalled on instruction fetch half of the time.
/// FusedConv's activations get a case each; any other op is a call per value (a loop that is not
/// unrolled would index acc at run time and put it in local memory).
template <int N, class Desc>
__device__ __forceinline__ void epilogue_n(float (&acc)[N], const float (&res)[N], bool has_residual, const Desc& d) {
  if (has_residual && !d.residual_after_activation)
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] += res[i];
  const UnaryParams& p = d.act_params;
  switch (d.act) {
    case UnaryOp::kIdentity: break;
    case UnaryOp::kRelu: activate_all<UnaryOp::kRelu>(acc, p); break;
    case UnaryOp::kClip: activate_all<UnaryOp::kClip>(acc, p); break;
    case UnaryOp::kSilu: activate_all<UnaryOp::kSilu>(acc, p); break;
    case UnaryOp::kSigmoid: activate_all<UnaryOp::kSigmoid>(acc, p); break;
    case UnaryOp::kHardSwish: activate_all<UnaryOp::kHardSwish>(acc, p); break;
    case UnaryOp::kHardSigmoid: activate_all<UnaryOp::kHardSigmoid>(acc, p); break;
    case UnaryOp::kLeakyRelu: activate_all<UnaryOp::kLeakyRelu>(acc, p); break;
    case UnaryOp::kTanh: activate_all<UnaryOp::kTanh>(acc, p); break;
    case UnaryOp::kGelu: activate_all<UnaryOp::kGelu>(acc, p); break;
    case UnaryOp::kGeluTanh: activate_all<UnaryOp::kGeluTanh>(acc, p); break;
    default:
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] = apply_unary_call(d.act, acc[i], p);
  }
  if (has_residual && d.residual_after_activation)
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] += res[i];
}

}  // namespace ingot::backend::cuda::conv_util
