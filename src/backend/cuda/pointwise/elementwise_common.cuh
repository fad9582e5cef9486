// Copyright ingot authors. Apache-2.0.
//
// Device helpers shared by the elementwise family's .cu files (and other families' epilogues):
// fp32 <-> storage conversions, the unary ops, 16-byte packs, launch geometry and the float-type
// dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda::ew {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(int8_t v) { return static_cast<float>(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
/// int8: nearest even, saturated to [-128, 127] (-inf, a max pool's empty window, gives -128).
template <>
__device__ __forceinline__ int8_t from_f32<int8_t>(float v) {
  return static_cast<int8_t>(__float2int_rn(fminf(fmaxf(v, -128.0f), 127.0f)));
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// A unary op on one fp32 value: the elementwise kernels and the epilogues of other families'
/// kernels (the depthwise convolution) share it, so every op means the same everywhere.
__device__ __forceinline__ float apply_unary(UnaryOp op, float x, float alpha, float beta, float lo, float hi) {
  switch (op) {
    case UnaryOp::kIdentity: return x;
    case UnaryOp::kRelu: return isnan(x) ? x : fmaxf(x, 0.0f);
    case UnaryOp::kSigmoid: return sigmoid(x);
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kReciprocal: return 1.0f / x;
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case UnaryOp::kGeluTanh: {
      const float c = 0.79788456080286535588f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    }
    case UnaryOp::kLeakyRelu: return x < 0.0f ? alpha * x : x;
    case UnaryOp::kHardSigmoid: return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case UnaryOp::kHardSwish: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case UnaryOp::kSoftplus: return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case UnaryOp::kClip: return isnan(x) ? x : fminf(fmaxf(x, lo), hi);
    case UnaryOp::kSilu: return x * sigmoid(x);
  }
  return x;
}

/// N elements moved as one or two 16-byte accesses (the pointer must be 16-byte aligned).
template <class T, int N>
struct alignas(16) Pack {
  T v[N];
};

constexpr int kThreads = 256;
/// Grid-stride loops cover the rest: enough blocks to fill an H200 (132 SMs x 8 resident).
constexpr int64_t kMaxBlocks = 4096;

inline unsigned grid_for(int64_t work, int threads = kThreads) {
  int64_t b = (work + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return static_cast<unsigned>(b);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<storage type>) for a FloatType.
template <class F>
inline void dispatch_float(FloatType t, F&& f) {
  switch (t) {
    case FloatType::kF32: f(Tag<float>{}); break;
    case FloatType::kF16: f(Tag<__half>{}); break;
    case FloatType::kBF16: f(Tag<__nv_bfloat16>{}); break;
  }
}

/// Element offsets of output index i in each operand of a broadcast.
template <int kOperands>
__device__ __forceinline__ void broadcast_offsets(const BroadcastDesc& d, int64_t i, int64_t (&off)[kOperands]) {
  for (int k = 0; k < kOperands; ++k) off[k] = 0;
  for (int dim = d.rank - 1; dim >= 0; --dim) {
    const int64_t size = d.dims[dim];
    const int64_t idx = i % size;
    i /= size;
#pragma unroll
    for (int k = 0; k < kOperands; ++k) off[k] += idx * d.strides[k][dim];
  }
}

}  // namespace ingot::backend::cuda::ew
