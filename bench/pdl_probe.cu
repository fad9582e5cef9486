// Copyright ingot authors. Apache-2.0.
//
// Does programmatic dependent launch (PDL, compute capability 9.0+) shorten a CUDA graph of small
// dependent kernels, as ingot's batch-1 engines are? At batch 1 a census engine is 35-400 steps of a
// few microseconds each, and the gap between two kernels in a graph is a large part of each step.
// With PDL the next kernel's blocks are scheduled while the previous kernel drains; each kernel
// waits (griddepcontrol.wait) before it touches memory, so the order of reads and writes is the
// same as without it.
//
// Variants, each a chain of KERNELS dependent kernels captured into one graph and replayed:
//   plain     <<<>>> launches
//   pdl       cudaLaunchKernelEx with programmaticStreamSerializationAllowed; the kernel waits first
//   pdl+trig  the same, and each kernel also signals launch_dependents right after its wait
//   cublas    every third kernel is a cuBLAS GEMM (not ours: launched without PDL), the rest as pdl+trig
// Sizes: 16K elements (one wave, ~2 us kernels) and 2M elements (bandwidth-bound, ~10 us).
// The chain adds 1 to every element in each of our kernels; the result is checked exactly.
//
// Not built by CMake; on a 90a-capable nvcc:
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a bench/pdl_probe.cu -lcublas -o build/pdl_probe
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,               \
                   cudaGetErrorString(e_));                                         \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

template <bool kWait, bool kTrigger>
__global__ void add_one(float* __restrict__ x, int n) {
  if (kWait) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (kTrigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = x[i] + 1.0f;
}

enum Variant { kPlain, kPdl, kPdlTrigger, kCublas };
static const char* kNames[] = {"plain", "pdl", "pdl+trig", "cublas mix"};

template <bool kWait, bool kTrigger>
static void launch(bool pdl, dim3 grid, dim3 block, cudaStream_t s, float* x, int n) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CU(cudaLaunchKernelEx(&cfg, add_one<kWait, kTrigger>, x, n));
}

int main() {
  const int kKernels = 120, kReplays = 200;
  cudaStream_t s;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(blas, s);
  const int m = 64;  // a small GEMM: 64x64x64 on a separate buffer
  float *a, *c;
  CU(cudaMalloc(&a, m * m * sizeof(float)));
  CU(cudaMalloc(&c, m * m * sizeof(float)));
  CU(cudaMemset(a, 0, m * m * sizeof(float)));
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  std::printf("%-12s %9s %10s %12s %8s\n", "variant", "elements", "us/kernel", "vs plain", "check");
  for (int n : {16384, 1 << 21}) {
    float* x;
    CU(cudaMalloc(&x, n * sizeof(float)));
    const dim3 block(256);
    const dim3 grid((n + 255) / 256 > 1056 ? 1056 : (n + 255) / 256);
    double plain_us = 0;
    for (int v = kPlain; v <= kCublas; ++v) {
      CU(cudaMemsetAsync(x, 0, n * sizeof(float), s));
      cudaGraph_t g;
      CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      int ours = 0;
      for (int k = 0; k < kKernels; ++k) {
        if (v == kCublas && k % 3 == 2) {
          const float one = 1.0f, zero = 0.0f;
          cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, a, m, &zero, c, m);
          continue;
        }
        ++ours;
        if (v == kPlain) add_one<false, false><<<grid, block, 0, s>>>(x, n);
        else if (v == kPdl) launch<true, false>(true, grid, block, s, x, n);
        else launch<true, true>(true, grid, block, s, x, n);
      }
      CU(cudaStreamEndCapture(s, &g));
      cudaGraphExec_t ge;
      CU(cudaGraphInstantiate(&ge, g, 0));
      CU(cudaGraphLaunch(ge, s));  // warm
      CU(cudaStreamSynchronize(s));
      CU(cudaMemsetAsync(x, 0, n * sizeof(float), s));
      CU(cudaEventRecord(e0, s));
      for (int r = 0; r < kReplays; ++r) CU(cudaGraphLaunch(ge, s));
      CU(cudaEventRecord(e1, s));
      CU(cudaStreamSynchronize(s));
      float ms = 0;
      CU(cudaEventElapsedTime(&ms, e0, e1));
      const double us = 1000.0 * ms / (double(kReplays) * kKernels);
      if (v == kPlain) plain_us = us;
      std::vector<float> h(n);
      CU(cudaMemcpy(h.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
      const float want = float(ours) * kReplays;
      int bad = 0;
      for (int i = 0; i < n; ++i) bad += h[i] != want;
      std::printf("%-12s %9d %10.3f %11.2fx %8s\n", kNames[v], n, us, plain_us / us,
                  bad ? "WRONG" : "ok");
      CU(cudaGraphExecDestroy(ge));
      CU(cudaGraphDestroy(g));
    }
    CU(cudaFree(x));
  }
  return 0;
}
