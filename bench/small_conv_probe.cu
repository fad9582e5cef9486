// Copyright ingot authors. Apache-2.0.
//
// How far is the small-channel (stem) convolution (small_channel_conv_kernels.cu) from its bounds?
// For the census's stems (fp16, NHWC, their activations), prints us per launch beside the time to
// read x and write y once at 4.0 TB/s and the fp32 FMA time at 33.5 TFMA/s (H200). Session 16:
// in the engine, MobileNetV2's batch-64 stem took 0.225 ms (run-time tap loops) against ~20 us
// of FMA. Median of 5 trials of 20 back-to-back launches (CUDA events).
// Not built by CMake; on a 90a-capable nvcc, from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Isrc -Iinclude bench/small_conv_probe.cu \
//     -o build/probe/small_conv_probe
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cuda/conv/small_channel_conv_kernels.cu"  // the kernels themselves, not a copy
#include "probe_check.cuh"

namespace {

using ingot::backend::cuda::SmallConvDesc;
using ingot::backend::cuda::UnaryOp;

struct Stem {
  const char* model;
  int n, h, w, k, ks, s, pad;
  UnaryOp act;
};

const Stem kStems[] = {
    {"mobilenet_v2 b64 (ReLU6)", 64, 224, 224, 32, 3, 2, 1, UnaryOp::kClip},
    {"mobilenet_v2 b1", 1, 224, 224, 32, 3, 2, 1, UnaryOp::kClip},
    {"efficientnet_b0 b64 (SiLU)", 64, 224, 224, 32, 3, 2, 1, UnaryOp::kSilu},
    {"mobilenet_v3 b64 (HardSwish)", 64, 224, 224, 16, 3, 2, 1, UnaryOp::kHardSwish},
    {"shufflenet b64 (ReLU)", 64, 224, 224, 24, 3, 2, 1, UnaryOp::kRelu},
    {"resnet50 b64 7x7 (ReLU)", 64, 224, 224, 64, 7, 2, 3, UnaryOp::kRelu},
    {"convnext b64 4x4/4", 64, 224, 224, 96, 4, 4, 0, UnaryOp::kIdentity},
};

}  // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::printf("%-30s %10s %10s %10s %8s\n", "stem", "us", "mem us", "fma us", "x fma");
  for (const Stem& st : kStems) {
    SmallConvDesc d;
    d.n = st.n;
    d.h = st.h;
    d.w = st.w;
    d.c = 3;
    d.k = st.k;
    d.kh = d.kw = st.ks;
    d.stride_h = d.stride_w = st.s;
    d.pad_h = d.pad_w = st.pad;
    d.oh = (d.h + 2 * d.pad_h - d.kh) / d.stride_h + 1;
    d.ow = (d.w + 2 * d.pad_w - d.kw) / d.stride_w + 1;
    d.act = st.act;
    d.act_params.lo = 0;
    d.act_params.hi = 6;
    const size_t nx = d.n * d.h * d.w * 3, ny = d.n * d.oh * d.ow * d.k, nw = d.k * d.kh * d.kw * 3;
    std::vector<__half> hx(nx), hw(nw), hb(d.k);
    for (auto& v : hx) v = __float2half(u(rng));
    for (auto& v : hw) v = __float2half(u(rng) * 0.2f);
    for (auto& v : hb) v = __float2half(u(rng) * 0.1f);
    __half *x, *w, *b, *y;
    CK(cudaMalloc(&x, nx * 2));
    CK(cudaMalloc(&w, nw * 2));
    CK(cudaMalloc(&b, d.k * 2));
    CK(cudaMalloc(&y, ny * 2));
    CK(cudaMemcpy(x, hx.data(), nx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, hw.data(), nw * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), d.k * 2, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> trials;
    for (int t = 0; t < 6; ++t) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < 20; ++i)
        CK(ingot::backend::cuda::launch_small_channel_conv(ingot::backend::cuda::FloatType::kF16, x, w, b, nullptr, y,
                                                           d, sms, nullptr));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (t > 0) trials.push_back(ms * 1000.f / 20.f);
    }
    std::sort(trials.begin(), trials.end());
    const double us = trials[trials.size() / 2];
    const double mem_us = (nx + ny) * 2.0 / 4.0e12 * 1e6;
    const double fma_us = double(ny) * d.kh * d.kw * 3 / 33.5e12 * 1e6;
    std::printf("%-30s %10.1f %10.1f %10.1f %8.1f\n", st.model, us, mem_us, fma_us, us / fma_us);
    cudaFree(x);
    cudaFree(w);
    cudaFree(b);
    cudaFree(y);
  }
  return 0;
}
