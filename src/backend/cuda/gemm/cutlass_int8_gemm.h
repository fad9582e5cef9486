// Copyright ingot authors. Apache-2.0.
//
// A CUTLASS 3.x Hopper int8 GEMM with ingot::QuantGemm's whole epilogue in the kernel, behind a plain
// C++ interface (no CUTLASS type crosses it; the kernels are in cutlass_gemm_kernels_int8.cu):
//
//   kBias:          D fp16 [M,N] = acc · x_scale · w_scale[n] + bias[n]
//   kBiasResidual:  D fp16 [M,N] = acc · x_scale · w_scale[n] + bias[n] + C[M,N]
//   kBiasGeluQuant: D int8 [M,N] = sat(rne(Gelu(acc · x_scale · w_scale[n] + bias[n]) / y_scale))
//
// and the forms of a ResNet block's 1x1 convolutions (ingot::QuantConv, channels-last, as a GEMM over
// the pixels), all with Relu:
//   kBiasReluQuant:          D int8 = q(Relu(s + bias))                 (the block's first conv)
//   kBiasResidualReluQuant:  D int8 = q(Relu(s + bias + C))             (C fp16: a downsample's output)
//   kBiasResidual8ReluQuant: D int8 = q(Relu(s + bias + r_scale · C))   (C int8: the previous block's)
//   kBiasResidual8Relu:      D fp16 = Relu(s + bias + r_scale · C)      (the last block, to the pool)
// with s = acc · x_scale · w_scale[n] and q(v) = sat(rne(v / y_scale)).
//
// acc the exact int32 sum of A[M,K] (int8, row-major) times B[N,K] (int8, row-major: the weight as
// QuantGemm stores it, K-major as Hopper's int8 tensor cores read both operands); the epilogue in
// fp32, rounded once (Gelu is the exact erf form; the int8 store rounds half to even and saturates,
// as QuantizeLinear does). The scales are device pointers (x_scale and y_scale one value, w_scale
// [N]); a null bias reads as zeros. Why: the cuBLASLt int8 tactic writes the int32 sums to memory
// and runs the epilogue as a second pass (BERT-base b64's QKV projection 99.9 us against fp16's 45.2
// in session 25's profile); here the sums never leave the registers. sm90a only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemm/cutlass_gemm_kernels.h"

namespace ingot::backend::cuda {

enum class CutlassInt8Epilogue : uint8_t {
  kBias = 0,
  kBiasResidual = 1,
  kBiasGeluQuant = 2,
  kBiasReluQuant = 3,
  kBiasResidualReluQuant = 4,
  kBiasResidual8ReluQuant = 5,
  kBiasResidual8Relu = 6,
};

/// One int8 GEMM. Leading dimensions count elements; pointers are device pointers, 16-byte aligned;
/// K and N multiples of 16.
struct CutlassInt8GemmProblem {
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;          ///< int8 [M,K], row stride lda
  const void* b = nullptr;          ///< int8 [N,K], row stride ldb
  const float* x_scale = nullptr;   ///< one value
  const float* w_scale = nullptr;   ///< [N]
  const void* bias = nullptr;       ///< [N], or nullptr for none: fp16 where D is fp16, float32 where D is int8
  const void* c = nullptr;          ///< [M,N] residual, row stride ldc: fp16, or int8 for the *Residual8* forms
  const float* r_scale = nullptr;   ///< one value: the int8 residual's scale (*Residual8* forms)
  const float* y_scale = nullptr;   ///< one value (the *Quant forms)
  void* d = nullptr;                ///< fp16 [M,N] or int8 (the *Quant forms), row stride ldd
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int sm_count = 0;  ///< SMs the persistent grid spans; 0: CUTLASS asks the current device
};

/// The kernel schedule: kCooperative, both consumer warp groups on one 128x128 tile, then its
/// epilogue; kPingpong, each warp group on a tile of its own, one's epilogue overlapping the other's
/// main loop. The int8 main loop is short next to an epilogue that dequantizes, applies the Gelu and
/// requantizes every element (BERT-base's FFN1 at batch 64: 86 us cooperative against 36 us for
/// FFN2, the same FLOPs with a quarter of the outputs; H100, 2026-12-07), so ping-pong is offered
/// beside it for the GEMM forms (kBias, kBiasResidual, kBiasGeluQuant); the conv forms are
/// cooperative only (a ping-pong request for one is kCannotImplement).
enum class CutlassInt8Schedule : uint8_t { kCooperative = 0, kPingpong = 1 };

/// The GEMM forms (QuantGemm's: kBias, kBiasResidual, kBiasGeluQuant), the ones built in both schedules;
/// the rest are the conv forms.
constexpr bool cutlass_int8_gemm_form(CutlassInt8Epilogue e) {
  return e == CutlassInt8Epilogue::kBias || e == CutlassInt8Epilogue::kBiasResidual ||
         e == CutlassInt8Epilogue::kBiasGeluQuant;
}

/// Whether the kernel takes the problem (sizes, alignments; host only).
bool cutlass_int8_gemm_can_implement(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                     CutlassInt8Schedule schedule = CutlassInt8Schedule::kCooperative);
/// Scratch bytes the kernel needs (0 for its persistent data-parallel schedule).
size_t cutlass_int8_gemm_workspace_bytes(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                         CutlassInt8Schedule schedule = CutlassInt8Schedule::kCooperative);
/// Enqueues the GEMM on `stream`: no allocation, no synchronization (graph-capturable).
CutlassGemmStatus launch_cutlass_int8_gemm(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                           void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                           CutlassInt8Schedule schedule = CutlassInt8Schedule::kCooperative);

}  // namespace ingot::backend::cuda
