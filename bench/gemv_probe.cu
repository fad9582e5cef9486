// Copyright ingot authors. Apache-2.0.
//
// The LLM decoder's one-token projections (launch_gemv_small_t) on Llama-3.2-1B's shapes, bf16 and
// fp8 weights, with K split over 1, 2 or 4 warps a column (k_split) and with the prologues the
// decoder can fuse (RMSNorm before QKV and gate/up, SiLU gate before down). Session 40's b1 profile
// (H100) had the output projection at 0.86 TB/s and the down projection at 0.94 against gate/up's
// 2.2. Each row: 16 launches on 16 different weight matrices (one per layer, more bytes than L2
// holds) captured in a CUDA graph, replayed 20 times, median of 5 trials; us a launch and the
// weight bytes' rate. The split forms' outputs must equal within fp32 summation order the
// unsplit's (checked: max relative difference printed).
//
// Not built by CMake; here (sm_90a, against the CUDA build's static library):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src -I include bench/gemv_probe.cu \
//     build/libingot.a -lcuda -o build/gemv_probe
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/llm/llm_kernels.h"
#include "probe_check.cuh"

using ingot::backend::cuda::FloatType;
namespace cu = ingot::backend::cuda;

namespace {

struct Shape {
  const char* what;
  int64_t K, N;
  cu::GemvPrologue::Kind pro;
};

// Llama-3.2-1B: hidden 2048, 32 q heads and 8 kv heads of 64, intermediate 8192.
const Shape kShapes[] = {
    {"qkv (rmsnorm in)", 2048, 3072, cu::GemvPrologue::kRmsNorm},
    {"o (+residual)", 2048, 2048, cu::GemvPrologue::kNone},
    {"gate/up (rmsnorm in)", 2048, 16384, cu::GemvPrologue::kRmsNorm},
    {"down (silu in)", 8192, 2048, cu::GemvPrologue::kSiluMul},
};
constexpr int kLayers = 16;

std::vector<__nv_bfloat16> host_random(size_t n, std::mt19937& rng, float a) {
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<__nv_bfloat16> v(n);
  for (auto& e : v) e = __float2bfloat16(u(rng));
  return v;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gemv_probe: %s, %d SMs; us a launch (16 layers' weights in turn, CUDA graph), weight TB/s\n",
              prop.name, prop.multiProcessorCount);
  std::printf("%-22s %-5s %-9s %-8s %9s %8s %10s\n", "projection", "w", "prologue", "k_split", "us", "TB/s",
              "max rel d");
  std::mt19937 rng(7);
  for (const Shape& sh : kShapes)
    for (bool fp8 : {false, true}) {
      const size_t w_bytes = static_cast<size_t>(sh.K * sh.N) * (fp8 ? 1 : 2);
      std::vector<void*> w(kLayers);
      for (auto& p : w) {
        CK(cudaMalloc(&p, w_bytes));
        if (fp8) {
          std::vector<unsigned char> h(w_bytes);
          std::uniform_int_distribution<int> b(0, 255);
          for (auto& e : h) e = static_cast<unsigned char>(b(rng) & 0xBF);  // exponent field <= 7: |w| < 2, no NaN
          CK(cudaMemcpy(p, h.data(), w_bytes, cudaMemcpyHostToDevice));
        } else {
          const auto h = host_random(static_cast<size_t>(sh.K * sh.N), rng, 0.05f);
          CK(cudaMemcpy(p, h.data(), w_bytes, cudaMemcpyHostToDevice));
        }
      }
      const int64_t pitch = sh.pro == cu::GemvPrologue::kSiluMul ? 2 * sh.K : sh.K;
      const auto hx = host_random(static_cast<size_t>(pitch), rng, 1.0f);
      const auto hg = host_random(static_cast<size_t>(sh.K), rng, 1.0f);
      void *x, *gamma, *y;
      float* scale;
      CK(cudaMalloc(&x, hx.size() * 2));
      CK(cudaMalloc(&gamma, hg.size() * 2));
      CK(cudaMalloc(&y, static_cast<size_t>(sh.N) * 2));
      CK(cudaMalloc(&scale, sizeof(float)));
      const float one = 0.01f;
      CK(cudaMemcpy(scale, &one, sizeof(float), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(gamma, hg.data(), hg.size() * 2, cudaMemcpyHostToDevice));
      for (bool with_pro : {false, true}) {
        if (with_pro && sh.pro == cu::GemvPrologue::kNone) continue;
        cu::GemvPrologue pro;
        if (with_pro) {
          pro.kind = sh.pro;
          pro.norm_weight = gamma;
          pro.eps = 1e-5f;
        }
        std::vector<float> base;
        for (int split : {1, 2, 4}) {
          const bool acc = sh.pro == cu::GemvPrologue::kNone;  // the o projection adds the residual
          auto run = [&](cudaStream_t s) {
            for (int l = 0; l < kLayers; ++l)
              CK(cu::launch_gemv_small_t(FloatType::kBF16, x, w[l], fp8, fp8 ? scale : nullptr, y, 1, sh.K, sh.N,
                                         acc, s, pro, split));
          };
          const float us = probe_graph_us(run, kLayers);
          // Agreement: one launch on layer 0's weights, against the unsplit form's.
          CK(cu::launch_gemv_small_t(FloatType::kBF16, x, w[0], fp8, fp8 ? scale : nullptr, y, 1, sh.K, sh.N, false,
                                     nullptr, pro, split));
          std::vector<__nv_bfloat16> hy(static_cast<size_t>(sh.N));
          CK(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost));
          std::vector<float> got(hy.size());
          for (size_t i = 0; i < hy.size(); ++i) got[i] = __bfloat162float(hy[i]);
          if (split == 1) base = got;
          double worst = 0;
          for (size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - base[i]) /
                                        std::max(1e-3, std::fabs(static_cast<double>(base[i]))));
          std::printf("%-22s %-5s %-9s %-8d %9.2f %8.2f %10.2e\n", sh.what, fp8 ? "fp8" : "bf16",
                      with_pro ? "fused" : "none", split, us, static_cast<double>(w_bytes) / (us * 1e-6) / 1e12,
                      worst);
        }
      }
      for (auto p : w) CK(cudaFree(p));
      CK(cudaFree(x));
      CK(cudaFree(gamma));
      CK(cudaFree(y));
      CK(cudaFree(scale));
    }
  return 0;
}
