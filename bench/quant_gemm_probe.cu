// Copyright ingot authors. Apache-2.0.
//
// Where INT8 BERT-base's GEMM time goes (issue 20): the CUTLASS int8 GEMM (cutlass_int8_gemm.h) on
// BERT-base s128's four projections at batch 1 (M 128) and batch 64 (M 8192), in each epilogue a
// layer can have and both schedules. Session 43's b64 profile had FFN1 (Gelu, int8 out) at 86.6 us
// against FFN2's 34.6 for the same FLOPs; FFN1's shape with the plain kBias epilogue (fp16 out, no
// Gelu, no requantization) separates its epilogue's cost from its main loop's. At M 128 every int8
// GEMM was slower than fp16's (18-72 tiles of 128x128 on 132 SMs).
// Each row: 12 launches on 12 different weight matrices (BERT's layers) captured in a CUDA graph,
// replayed 20 times, median of 5 trials; us a launch and int8 TOPS.
//
// Not built by CMake; here (sm_90a, against the CUDA build's static library):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src -I include bench/quant_gemm_probe.cu \
//     build/libingot.a -lcuda -o build/quant_gemm_probe
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/gemm/cutlass_int8_gemm.h"
#include "probe_check.cuh"

namespace cu = ingot::backend::cuda;
using E = cu::CutlassInt8Epilogue;
using S = cu::CutlassInt8Schedule;

namespace {

struct Shape {
  const char* what;
  int n, k;
  E epilogue;
};

// BERT-base: hidden 768, FFN 3072; QKV packed.
const Shape kShapes[] = {
    {"qkv", 2304, 768, E::kBias},
    {"attention-out (+res)", 768, 768, E::kBiasResidual},
    {"ffn1 (gelu, int8 out)", 3072, 768, E::kBiasGeluQuant},
    {"ffn1 shape, kBias", 3072, 768, E::kBias},
    {"ffn2 (+res)", 768, 3072, E::kBiasResidual},
};
constexpr int kLayers = 12;

void* device_random(size_t bytes, std::mt19937& rng) {
  std::vector<unsigned char> h(bytes);
  std::uniform_int_distribution<int> b(0, 255);
  for (auto& e : h) e = static_cast<unsigned char>(b(rng));
  void* p;
  CK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
  CK(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice));
  return p;
}

void* device_floats(size_t n, float lo, float hi, std::mt19937& rng) {
  std::vector<float> h(n);
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& e : h) e = u(rng);
  void* p;
  CK(cudaMalloc(&p, n * sizeof(float)));
  CK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

void* device_halves(size_t n, std::mt19937& rng) {  // fp16 values of magnitude below 1, either sign
  std::vector<unsigned short> h(n);
  std::uniform_int_distribution<int> m(0, 0x3BFF);
  for (auto& e : h) e = static_cast<unsigned short>(m(rng) | (rng() & 1 ? 0x8000 : 0));
  void* p;
  CK(cudaMalloc(&p, n * 2));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  return p;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("quant_gemm_probe: %s, %d SMs; us a launch (12 layers' weights in turn, CUDA graph), int8 TOPS\n",
              prop.name, prop.multiProcessorCount);
  std::printf("%-24s %6s %-12s %9s %8s\n", "projection", "M", "schedule", "us", "TOPS");
  std::mt19937 rng(11);
  for (int m : {128, 8192})
    for (const Shape& sh : kShapes) {
      void* a = device_random(static_cast<size_t>(m) * sh.k, rng);
      std::vector<void*> w(kLayers), ws(kLayers), bias(kLayers);
      const bool int8_out = sh.epilogue == E::kBiasGeluQuant;
      for (int l = 0; l < kLayers; ++l) {
        w[l] = device_random(static_cast<size_t>(sh.n) * sh.k, rng);
        ws[l] = device_floats(static_cast<size_t>(sh.n), 1e-4f, 2e-4f, rng);
        bias[l] = int8_out ? device_floats(static_cast<size_t>(sh.n), -0.1f, 0.1f, rng)
                           : device_halves(static_cast<size_t>(sh.n), rng);
      }
      void* xs = device_floats(1, 0.02f, 0.02f, rng);
      void* ys = device_floats(1, 0.05f, 0.05f, rng);
      void* c = device_halves(static_cast<size_t>(m) * sh.n, rng);
      void* d;
      CK(cudaMalloc(&d, static_cast<size_t>(m) * sh.n * 2));
      for (S s : {S::kCooperative, S::kPingpong}) {
        auto problem = [&](int l) {
          cu::CutlassInt8GemmProblem p;
          p.m = m;
          p.n = sh.n;
          p.k = sh.k;
          p.a = a;
          p.b = w[l];
          p.x_scale = static_cast<const float*>(xs);
          p.w_scale = static_cast<const float*>(ws[l]);
          p.bias = bias[l];
          if (sh.epilogue == E::kBiasResidual) {
            p.c = c;
            p.ldc = sh.n;
          }
          if (int8_out) p.y_scale = static_cast<const float*>(ys);
          p.d = d;
          p.lda = sh.k;
          p.ldb = sh.k;
          p.ldd = sh.n;
          p.sm_count = prop.multiProcessorCount;
          return p;
        };
        if (!cu::cutlass_int8_gemm_can_implement(sh.epilogue, problem(0), s)) {
          std::printf("%-24s %6d %-12s %9s\n", sh.what, m, s == S::kPingpong ? "ping-pong" : "cooperative",
                      "cannot");
          continue;
        }
        bool launched = true;
        const float us = probe_graph_us(
            [&](cudaStream_t st) {
              for (int l = 0; l < kLayers; ++l)
                launched = launched && cu::launch_cutlass_int8_gemm(sh.epilogue, problem(l), nullptr, 0, st, s) ==
                                           cu::CutlassGemmStatus::kOk;
            },
            kLayers);
        if (!launched) {
          std::fprintf(stderr, "launch failed: %s M %d\n", sh.what, m);
          return 1;
        }
        const double ops = 2.0 * m * sh.n * sh.k;
        std::printf("%-24s %6d %-12s %9.2f %8.0f\n", sh.what, m, s == S::kPingpong ? "ping-pong" : "cooperative", us,
                    ops / (us * 1e-6) / 1e12);
      }
      for (int l = 0; l < kLayers; ++l) {
        CK(cudaFree(w[l]));
        CK(cudaFree(ws[l]));
        CK(cudaFree(bias[l]));
      }
      CK(cudaFree(a));
      CK(cudaFree(xs));
      CK(cudaFree(ys));
      CK(cudaFree(c));
      CK(cudaFree(d));
    }
  return 0;
}
