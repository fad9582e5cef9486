// Copyright ingot authors. Apache-2.0.
//
// The columns a "rows" cuBLASLt GEMM leaves out (cublaslt_tactics.cc): D [M,N] = alpha · A [M,K] ·
// B [N,K]^T with N·esize not a multiple of 16 bytes runs as `unit` GEMMs (unit = 16 / esize), one
// per row residue j = r mod unit, each over the columns whose address is 16-byte aligned in those
// rows: from c0_j = (unit - (j·N) mod unit) mod unit, n_j = (N - c0_j) rounded down to a unit.
// This kernel computes the rest: columns [0, c0_j) and [c0_j + n_j, N) of every row (at most
// 2·unit - 2 of them), in fp32, rounded once.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

#ifdef __CUDACC__
#define INGOT_EDGE_HD __host__ __device__ __forceinline__
#else
#define INGOT_EDGE_HD inline
#endif

namespace ingot::backend::cuda {

/// The aligned column range of row-group j (j < unit) for rows of n elements: [*c0, *c0 + *nj).
INGOT_EDGE_HD void row_group_columns(int64_t j, int64_t n, int64_t unit, int64_t* c0, int64_t* nj) {
  *c0 = (unit - (j * n) % unit) % unit;
  *nj = n > *c0 ? (n - *c0) / unit * unit : 0;
}

/// Fills the columns of y [m, n] (row pitch n) outside each row's aligned range (above) with
/// alpha · a[r, :] · b[c, :]; a [m, k] (pitch k), b [n, k] (pitch k). fp16 or bf16 (kF32: unit 4).
cudaError_t launch_gemm_row_group_edges(FloatType t, const void* a, const void* b, void* y, int64_t m, int64_t n,
                                        int64_t k, float alpha, cudaStream_t stream);

}  // namespace ingot::backend::cuda
