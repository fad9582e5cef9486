// Copyright ingot authors. Apache-2.0.
//
// CUTLASS 3.x Hopper GEMMs with the bias and exact Gelu in the epilogue, behind a plain C++
// interface: no CUTLASS type crosses this header, so only the cutlass_gemm_kernels_*.cu files
// pay for CUTLASS's templates (the kernel template is cutlass_gemm_kernels.cuh).
//
//   D[M,N] = act(A[M,K] · B[K,N] + bias[N])      fp16 or bf16 A, B, bias, D; fp32 accumulate and epilogue
//   D[M,N] = A[M,K] · B[K,N] + bias[N] + C[M,N]  (kBiasResidual: C a residual of D's type, no activation)
//
// A, B and D are row-major (B is a weight as ONNX stores it, [K,N], so CUTLASS reads it N-major);
// bias may be null (no bias: CUTLASS's row broadcast then reads zeros, not memory). Every kernel
// is sm90a only (TMA, warp-specialized, persistent): the tactics offer them on compute capability
// 9.0 devices only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ingot::backend::cuda {

/// One compiled tile configuration.
struct CutlassGemmConfig {
  const char* name;  ///< as tactic names use it, e.g. "128x256x64_coop_c1x1"
  int tile_m, tile_n, tile_k;
  int cluster_m, cluster_n;
  bool cooperative;  ///< cooperative (both consumer warp groups on one tile) or ping-pong
  /// Throughput per unit of (waves x tile area) relative to 128x256x64_coop_c1x1, without and
  /// with Gelu, fitted to H200 timings at BERT-base shapes: the tactics rank configs by it.
  float speed_bias, speed_gelu;
};

/// The configurations compiled in, in a fixed order (an index is valid for one build only;
/// the name is what engines record).
int cutlass_gemm_config_count();
/// nullptr when `index` is out of range.
const CutlassGemmConfig* cutlass_gemm_config(int index);
/// The index of the config named `name`, or -1.
int cutlass_gemm_config_index(const char* name);

enum class CutlassEpilogue : uint8_t {
  kBias = 0,      ///< D = acc + bias
  kBiasGelu = 1,  ///< D = Gelu(acc + bias), the exact form 0.5·x·(1 + erf(x/√2)) in fp32
  /// D = (acc + bias) + C with C the residual [M,N] (CUTLASS's source operand, beta 1), all in
  /// fp32 and rounded once. Compiled for a few configs only (cutlass_gemm_has_kernel).
  kBiasResidual = 2,
};

/// The element type of A, B, bias, C and D (one for all).
enum class CutlassGemmType : uint8_t { kFloat16 = 0, kBFloat16 = 1 };

/// One GEMM. Leading dimensions count elements; pointers are device pointers, 16-byte aligned,
/// and lda, ldb, ldc, ldd multiples of 8.
struct CutlassGemmProblem {
  CutlassGemmType type = CutlassGemmType::kFloat16;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;     ///< [M,K], row stride lda
  const void* b = nullptr;     ///< [K,N], row stride ldb
  const void* bias = nullptr;  ///< [N], or nullptr for none
  const void* c = nullptr;     ///< [M,N], row stride ldc: the residual, read by kBiasResidual only
  void* d = nullptr;           ///< [M,N], row stride ldd
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int sm_count = 0;  ///< SMs the persistent grid spans; 0: CUTLASS asks the current device
};

enum class CutlassGemmStatus : uint8_t {
  kOk = 0,
  kUnknownKernel,      ///< config index out of range
  kCannotImplement,    ///< CUTLASS's can_implement refused the problem (alignment, sizes)
  kWorkspaceTooSmall,  ///< the kernel needs more scratch than was given
  kInitializeFailed,   ///< workspace set-up or the kernel's shared-memory attribute failed
  kLaunchFailed,       ///< the launch failed (cudaGetLastError has the reason)
};
const char* cutlass_gemm_status_name(CutlassGemmStatus status);

/// Whether `config` has a kernel compiled for `epilogue` and `type` (host only, no device query;
/// kBiasResidual exists for a few configs only).
bool cutlass_gemm_has_kernel(int config, CutlassEpilogue epilogue, CutlassGemmType type);

/// Whether CUTLASS's can_implement takes the problem (sizes and alignments; no device work).
bool cutlass_gemm_can_implement(int config, CutlassEpilogue epilogue, const CutlassGemmProblem& p);

/// Scratch bytes the kernel needs for `p` (0 for the persistent data-parallel schedule used).
size_t cutlass_gemm_workspace_bytes(int config, CutlassEpilogue epilogue, const CutlassGemmProblem& p);

/// Enqueues the GEMM on `stream`: no allocation, no synchronization (the kernel's parameters,
/// TMA descriptors included, are built on the host; the dynamic shared-memory attribute is set
/// on every call, which CUDA graph capture allows).
CutlassGemmStatus launch_cutlass_gemm(int config, CutlassEpilogue epilogue, const CutlassGemmProblem& p,
                                      void* workspace, size_t workspace_bytes, cudaStream_t stream);

namespace cutlass_detail {

/// The entry points of one compiled kernel (function pointers: no CUTLASS types).
struct KernelEntry {
  bool (*can_implement)(const CutlassGemmProblem&) = nullptr;
  size_t (*workspace_bytes)(const CutlassGemmProblem&) = nullptr;
  CutlassGemmStatus (*run)(const CutlassGemmProblem&, void*, size_t, cudaStream_t) = nullptr;
};

// Every type and epilogue of each config, defined by the .cu file that instantiates it (the
// files compile in parallel); the table in cutlass_gemm_kernels.cu lists them.
KernelEntry entry_128x256x64_coop_c1x1(CutlassGemmType type, CutlassEpilogue epilogue);      // _coop.cu
KernelEntry entry_256x128x64_coop_c2x1(CutlassGemmType type, CutlassEpilogue epilogue);      // _coop.cu
KernelEntry entry_128x128x64_pingpong_c1x1(CutlassGemmType type, CutlassEpilogue epilogue);  // _pingpong.cu
KernelEntry entry_64x128x64_pingpong_c1x1(CutlassGemmType type, CutlassEpilogue epilogue);   // _pingpong.cu
KernelEntry entry_128x192x64_pingpong_c1x1(CutlassGemmType type, CutlassEpilogue epilogue);  // _pingpong192.cu, bias only
// The kBiasResidual kernels, only for the configs that have one (_residual.cu).
KernelEntry residual_entry_128x256x64_coop_c1x1(CutlassGemmType type);
KernelEntry residual_entry_128x128x64_pingpong_c1x1(CutlassGemmType type);
KernelEntry residual_entry_128x192x64_pingpong_c1x1(CutlassGemmType type);  // _pingpong192.cu

}  // namespace cutlass_detail

}  // namespace ingot::backend::cuda
