// Copyright ingot authors. Apache-2.0.
//
// Launchers for the attention family's device code (attention_kernels.cu): fused scaled
// dot-product attention Y = softmax(scale * Q K^T + mask) V with ONNX Attention (opset 23)
// semantics, never materializing the [Sq, Sk] scores. Plain C++ so attention_tactics.cc
// compiles with the host compiler; every launcher enqueues on `stream`, never synchronizes, and
// returns cudaGetLastError() after its launch.
//
// Three kernels:
//  - short (kv_len <= 128, head sizes 32/64): the flash kernel's layout with every key at once;
//  - flash: fp16/bf16, head sizes 32/64/80/96/128; one CTA per (batch, head, 16- or 64-query
//    tile), K/V tiles of 64 keys staged in shared memory with cp.async, Q K^T and P V on tensor
//    cores (mma.sync m16n8k16, fp32 accumulation), online softmax in fp32 registers;
//  - generic: any float type, head size up to 128, CUDA cores in fp32 (one warp per query row,
//    32-key tiles in shared memory). It serves fp32, other head sizes and views the flash
//    kernel cannot read (pointers not 16-byte aligned).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType

namespace ingot::backend::cuda {

enum class AttentionMask : int32_t {
  kNone = 0,
  kBool,      ///< one byte per element; 0 hides the key
  kAdditive,  ///< added to the scaled scores (any FloatType, see mask_type)
};

/// One attention call. Q/K/V/Y element (b, h, s, d) lives at base + b*stride[0] + h*stride[1] +
/// s*stride[2] + d: 4-D [B, H, S, D] and 3-D [B, S, H*D] differ only in the strides.
struct AttentionParams {
  FloatType type = FloatType::kF32;  ///< of Q, K, V and Y
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* y = nullptr;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;  ///< q_heads is a multiple of kv_heads (GQA)
  int64_t q_len = 0, kv_len = 0, head_size = 0;  ///< head_size is Q's, K's and V's
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, y_stride[3] = {};
  AttentionMask mask_kind = AttentionMask::kNone;
  FloatType mask_type = FloatType::kF32;  ///< when kAdditive
  const void* mask = nullptr;
  /// Element (b, h, i, j) of the mask at mask + sum(index * stride); 0 on broadcast dims.
  int64_t mask_stride[4] = {};
  /// > 0: batch b reads mask batch entry b % mask_batch_period (ingot::Attention's attribute).
  int64_t mask_batch_period = 0;
  /// Keys j >= mask_kv_len are hidden (ONNX pads a short mask's last axis with -inf).
  int64_t mask_kv_len = 0;
  float scale = 1.0f;
  bool causal = false;  ///< hide keys j > i (top-left aligned, as the reference)
};

/// Whether the flash kernel serves this type and head size (any alignment).
bool attention_flash_supports(FloatType type, int64_t head_size);
/// Whether the flash kernel can run these exact tensors: supported type and head size, 16-byte
/// aligned Q/K/V/Y and sequence strides that keep every row 16-byte aligned.
bool attention_flash_can_run(const AttentionParams& p);
/// Generic kernel limit on the head size.
constexpr int64_t kAttentionGenericMaxHeadSize = 128;

/// The flash kernel; `sm_count` picks the query tile (64 rows when that fills the GPU, else 16).
/// Requires attention_flash_can_run(p).
cudaError_t launch_attention_flash(const AttentionParams& p, int sm_count, cudaStream_t stream);
/// Whether the short-sequence kernel can run these tensors: what the flash kernel can, with head
/// size 32 or 64 and at most 128 keys (all of them staged at once).
bool attention_short_can_run(const AttentionParams& p);
/// The short-sequence kernel (one pass over all keys; row-independent masks staged once per CTA).
/// Requires attention_short_can_run(p).
cudaError_t launch_attention_short(const AttentionParams& p, int sm_count, cudaStream_t stream);

/// The generic kernel; requires head_size <= kAttentionGenericMaxHeadSize.
cudaError_t launch_attention_generic(const AttentionParams& p, cudaStream_t stream);

}  // namespace ingot::backend::cuda

