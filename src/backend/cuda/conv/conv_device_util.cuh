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

}  // namespace ingot::backend::cuda::conv_util
