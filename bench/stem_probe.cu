// Copyright ingot authors. Apache-2.0.
//
// The tensor-core stem kernel (stem_pool_conv_kernels.cu) on the census's stems, fp16 NHWC: us per
// launch beside the time to read x and write y once at 3.35 TB/s (H100). Session 40's profile of
// ResNet-50 b64 had its stem conv at 163 us (cuDNN) + MaxPool 61 us; bench/small_conv_probe.cu's
// rows are the CUDA-core kernel's on the mobile stems (MobileNetV2 b64 91 us, session 20).
// Median of 5 trials of 20 back-to-back launches (CUDA events), PDL on as in engines.
// Not built by CMake; on a 90a-capable nvcc, from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Isrc -Iinclude bench/stem_probe.cu \
//     -o build/stem_probe
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/conv/stem_pool_conv_kernels.cu"  // the kernels themselves, not a copy
#include "probe_check.cuh"

namespace ingot::backend::cuda {
bool pdl_enabled() { return true; }  // device_info.cc's, which this probe does not link
}  // namespace ingot::backend::cuda

namespace {

using ingot::backend::cuda::StemPoolDesc;
using ingot::backend::cuda::UnaryOp;

struct Stem {
  const char* model;
  int n, k, ks, pad, pool;  // 224x224 RGB in, stride 2; pool 3/2 pad 1 or none (0)
  UnaryOp act;
};

const Stem kStems[] = {
    {"resnet50 b64 7x7 + pool", 64, 64, 7, 3, 1, UnaryOp::kRelu},
    {"resnet50 b1 7x7 + pool", 1, 64, 7, 3, 1, UnaryOp::kRelu},
    {"shufflenet b64 3x3 + pool", 64, 24, 3, 1, 1, UnaryOp::kRelu},
    {"mobilenet_v2 b64 (ReLU6)", 64, 32, 3, 1, 0, UnaryOp::kClip},
    {"mobilenet_v2 b1", 1, 32, 3, 1, 0, UnaryOp::kClip},
    {"efficientnet_b0 b64 (SiLU)", 64, 32, 3, 1, 0, UnaryOp::kSilu},
    {"mobilenet_v3 b64 (HardSwish)", 64, 16, 3, 1, 0, UnaryOp::kHardSwish},
};

}  // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::printf("%-30s %10s %10s\n", "stem", "us", "mem us");
  for (const Stem& st : kStems) {
    StemPoolDesc d;
    d.n = st.n;
    d.h = d.w = 224;
    d.c = 3;
    d.k = st.k;
    d.kh = d.kw = st.ks;
    d.stride_h = d.stride_w = 2;
    d.pad_h = d.pad_w = st.pad;
    d.oh = (d.h + 2 * d.pad_h - d.kh) / 2 + 1;
    d.ow = (d.w + 2 * d.pad_w - d.kw) / 2 + 1;
    d.pool_kh = d.pool_kw = st.pool ? 3 : 1;
    d.pool_stride_h = d.pool_stride_w = st.pool ? 2 : 1;
    d.pool_pad_h = d.pool_pad_w = st.pool ? 1 : 0;
    d.ph = (d.oh + 2 * d.pool_pad_h - d.pool_kh) / d.pool_stride_h + 1;
    d.pw = (d.ow + 2 * d.pool_pad_w - d.pool_kw) / d.pool_stride_w + 1;
    d.act = st.act;
    d.act_params.lo = 0;
    d.act_params.hi = 6;
    const size_t nx = d.n * d.h * d.w * 3, ny = d.n * d.ph * d.pw * d.k, nw = d.k * d.kh * d.kw * 3;
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
        CK(ingot::backend::cuda::launch_stem_pool_conv(ingot::backend::cuda::FloatType::kF16, x, w, b, y, d, sms,
                                                       nullptr));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (t > 0) trials.push_back(ms * 1000.f / 20.f);
    }
    std::sort(trials.begin(), trials.end());
    const double us = trials[trials.size() / 2];
    const double mem_us = (nx + ny) * 2.0 / 3.35e12 * 1e6;
    std::printf("%-30s %10.1f %10.1f\n", st.model, us, mem_us);
    cudaFree(x);
    cudaFree(w);
    cudaFree(b);
    cudaFree(y);
  }
  return 0;
}
