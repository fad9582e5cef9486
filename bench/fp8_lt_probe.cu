// Copyright ingot authors. Apache-2.0.
//
// Why did the GPU decoder's fp8 projections fail with CUBLAS_STATUS_NOT_SUPPORTED on the H100
// (session 30: every Fp8WeightsFollowTheCpuDecoder case, at the first prefill GEMM)? This probe
// runs the decoder's fp8 GEMM form -- y[T][out] (+)= x[T][in] w[out][in]^T with A = w (e4m3,
// transposed), B = x (e4m3), C = D = y (bf16), fp32 compute, per-tensor A/B scale pointers --
// in the variations that could matter, and prints each cublasLtMatmul status:
//   when      the scale pointers set before the heuristic query, or only after it (as ingot did)
//   salign    the scale pointers' alignment: 16 bytes, or 4 (w_scales + 1 float)
//   beta      0, or 1 (the output projection accumulates into the residual)
//   T         tokens: 115 (odd, the test's prefill), 3, 64
// Not built by CMake; on a 90a-capable nvcc:
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/fp8_lt_probe.cu -lcublasLt -o build/fp8_lt_probe
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

int main() {
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  const int in = 256, out = 512, Tmax = 128;
  void *w, *x, *y, *ws;
  float* scales;
  CU(cudaMalloc(&w, in * out));
  CU(cudaMalloc(&x, in * Tmax));
  CU(cudaMalloc(&y, 2 * out * Tmax));
  CU(cudaMalloc(&ws, 32 << 20));
  CU(cudaMalloc(&scales, 64));
  CU(cudaMemset(w, 0x30, in * out));  // small e4m3 values (0x30 = 0.5)
  CU(cudaMemset(x, 0x30, in * Tmax));
  CU(cudaMemset(y, 0, 2 * out * Tmax));
  std::vector<float> ones(16, 1.f);
  CU(cudaMemcpy(scales, ones.data(), 64, cudaMemcpyHostToDevice));
  for (int before = 1; before >= 0; --before)
    for (int salign : {16, 4})
      for (int beta_i : {0, 1})
        for (int T : {115, 3, 64}) {
          cublasLtMatmulDesc_t desc;
          cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
          const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
          const float* sa = salign == 16 ? scales : scales + 1;
          const float* sb = salign == 16 ? scales + 4 : scales + 5;
          auto set_scales = [&] {
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
          };
          if (before) set_scales();
          cublasLtMatrixLayout_t a, b, c;
          cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, in, out, in);
          cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, in, T, in);
          cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, out, T, out);
          cublasLtMatmulPreference_t pref;
          cublasLtMatmulPreferenceCreate(&pref);
          size_t wsz = 32 << 20;
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof(wsz));
          cublasLtMatmulHeuristicResult_t r[8];
          int found = 0;
          cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 8, r, &found);
          if (!before) set_scales();
          const float alpha = 1.f, beta = static_cast<float>(beta_i);
          cublasStatus_t ms = CUBLAS_STATUS_NOT_INITIALIZED, ns = CUBLAS_STATUS_NOT_INITIALIZED;
          if (hs == CUBLAS_STATUS_SUCCESS && found > 0)
            ms = cublasLtMatmul(lt, desc, &alpha, w, a, x, b, &beta, y, c, y, c, &r[0].algo, ws, wsz, 0);
          ns = cublasLtMatmul(lt, desc, &alpha, w, a, x, b, &beta, y, c, y, c, nullptr, ws, wsz, 0);
          cudaError_t ce = cudaDeviceSynchronize();
          std::printf("scales %-6s salign %2d beta %d T %3d: heuristic %d (found %d), matmul(algo) %d, matmul(null algo) %d, %s\n",
                      before ? "before" : "after", salign, beta_i, T, static_cast<int>(hs), found, static_cast<int>(ms),
                      static_cast<int>(ns), cudaGetErrorString(ce));
          cublasLtMatmulPreferenceDestroy(pref);
          cublasLtMatrixLayoutDestroy(c);
          cublasLtMatrixLayoutDestroy(b);
          cublasLtMatrixLayoutDestroy(a);
          cublasLtMatmulDescDestroy(desc);
        }
  return 0;
}
