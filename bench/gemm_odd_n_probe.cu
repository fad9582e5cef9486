// Copyright ingot authors. Apache-2.0.
//
// Why is GPT-2's LM head slow? [M x 768] x [768 x 50257] in fp16 (fp32 accumulate) ran at ~100
// TFLOP/s through cuBLASLt's first four heuristics (3.05 ms at M = 4096 on the H200), and writing
// D with its rows padded to 16 bytes did not help (3.41 ms). This probe times the same product
// in the layouts a fix could use, each with up to 8 of cuBLASLt's heuristic algorithms (best
// one printed, and the heuristic's first):
//   plain      N = 50257, ld(D) = 50257 (what ingot runs)
//   ld-pad     N = 50257, ld(D) = 50264 (ingot's "padded" variant, before its copy)
//   n-pad8     N = 50264 (the weight padded with zero rows to a multiple of 8), ld(D) = 50264
//   n-pad64    N = 50304 (a multiple of 64), ld(D) = 50304
//   gemmex     cublasGemmEx, CUBLAS_GEMM_DEFAULT, ld(D) = 50257 (PyTorch's path for x @ W.T)
// Median of 5 trials of 10 back-to-back launches (CUDA events), in us and TFLOP/s.
// Not built by CMake; on a 90a-capable nvcc:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/gemm_odd_n_probe.cu -lcublasLt -lcublas \
//     -o build/gemm_odd_n_probe
// Usage: gemm_odd_n_probe [M ...]   (default: 128 4096)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "probe_check.cuh"

#define CB(x)                                                                   \
  do {                                                                          \
    cublasStatus_t s_ = (x);                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s: status %d\n", #x, static_cast<int>(s_));        \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

namespace {

constexpr int kK = 768;
constexpr int kVocab = 50257;

double time_us(const std::function<void()>& launch, cudaStream_t s) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<double> t;
  for (int trial = 0; trial < 5; ++trial) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 10; ++i) launch();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 100.0);  // us per launch
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

__global__ void fill(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u + seed;
    h ^= h >> 13;
    p[i] = __float2half((static_cast<int>(h % 2001) - 1000) * 1e-4f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ms;
  for (int i = 1; i < argc; ++i) ms.push_back(std::atoi(argv[i]));
  if (ms.empty()) ms = {128, 4096};
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  cublasHandle_t bl;
  CB(cublasCreate(&bl));
  CB(cublasSetStream(bl, s));
  const int max_m = *std::max_element(ms.begin(), ms.end());
  const int max_n = 50304;
  __half *x, *w, *d;
  void* ws;
  const size_t ws_bytes = 32u << 20;
  CK(cudaMalloc(&x, size_t(max_m) * kK * 2));
  CK(cudaMalloc(&w, size_t(max_n) * kK * 2));
  CK(cudaMalloc(&d, size_t(max_m) * max_n * 2));
  CK(cudaMalloc(&ws, ws_bytes));
  fill<<<1024, 256, 0, s>>>(x, size_t(max_m) * kK, 1);
  fill<<<1024, 256, 0, s>>>(w, size_t(max_n) * kK, 2);
  CK(cudaStreamSynchronize(s));
  std::printf("%-6s %-9s %6s %6s %10s %8s %10s  %s\n", "M", "variant", "N", "ld_d", "best us", "TFLOP/s", "first us",
              "algos");
  for (int m : ms) {
    struct V {
      const char* name;
      int n, ld;
    } vars[] = {{"plain", kVocab, kVocab}, {"ld-pad", kVocab, 50264}, {"n-pad8", 50264, 50264}, {"n-pad64", 50304, 50304}};
    for (const V& v : vars) {
      // Row-major Y[M,N] = X[M,K] W[N,K]^T as column-major Y^T[N,M] = op_T(W^T[K,N]) X^T[K,M].
      cublasLtMatmulDesc_t desc;
      CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      cublasLtMatrixLayout_t la, lb, ld;
      CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, kK, v.n, kK));
      CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, kK, m, kK));
      CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, v.n, m, v.ld));
      cublasLtMatmulPreference_t pref;
      CB(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t wsb = ws_bytes;
      CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
      cublasLtMatmulHeuristicResult_t res[8];
      int found = 0;
      CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 8, res, &found));
      const float alpha = 1, beta = 0;
      double best = 1e30, first = 0;
      for (int i = 0; i < found; ++i) {
        double us = time_us(
            [&] {
              CB(cublasLtMatmul(lt, desc, &alpha, w, la, x, lb, &beta, d, ld, d, ld, &res[i].algo, ws, ws_bytes, s));
            },
            s);
        if (i == 0) first = us;
        best = std::min(best, us);
      }
      const double tf = 2.0 * m * double(kVocab) * kK / (best * 1e-6) / 1e12;
      std::printf("%-6d %-9s %6d %6d %10.1f %8.1f %10.1f  %d\n", m, v.name, v.n, v.ld, best, tf, first, found);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(ld);
      cublasLtMatmulDescDestroy(desc);
    }
    const float alpha = 1, beta = 0;
    double us = time_us(
        [&] {
          CB(cublasGemmEx(bl, CUBLAS_OP_T, CUBLAS_OP_N, kVocab, m, kK, &alpha, w, CUDA_R_16F, kK, x, CUDA_R_16F, kK,
                          &beta, d, CUDA_R_16F, kVocab, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        s);
    const double tf = 2.0 * m * double(kVocab) * kK / (us * 1e-6) / 1e12;
    std::printf("%-6d %-9s %6d %6d %10.1f %8.1f %10s  %s\n", m, "gemmex", kVocab, kVocab, us, tf, "-", "default");
  }
  return 0;
}
