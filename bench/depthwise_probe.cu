// Copyright ingot authors. Apache-2.0.
//
// How far is ingot's channels-last depthwise conv from its memory bound, and do the strip
// kernel (4 outputs along x per thread in 4-byte channel packs: depthwise_conv_kernels.cu) and the
// tiled one (session 20: each block's input window staged in shared memory once) close the gap? (Session 15 call 2 also
// timed a strip of 4 in the widest pack and one of 8 in 4-byte packs; bench/RESULTS.md has their numbers.) Session 14's
// profiles put the one-pixel kernel at ~13x its memory time (ShuffleNet b64 [64,28,28,58] 3x3: 35 us).
// For the census's depthwise layers at batch 64 (fp16, NHWC, bias + ReLU), times every variant
// and prints us and the best one's ratio to a 4.0 TB/s bound of reading x and writing y once;
// checks the strip and tiled kernels' outputs against the one-pixel kernel's (max |diff|).
// bench/depthwise_probe_torch.py times PyTorch's conv2d on the same shapes (`--list` prints them).
// Median of 5 trials of 20 back-to-back launches (CUDA events).
// Not built by CMake; on a 90a-capable nvcc, from the repository root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Isrc -Iinclude bench/depthwise_probe.cu \
//     -o build/probe/depthwise_probe
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/conv/depthwise_conv_kernels.cu"  // the kernels themselves, not a copy
#include "probe_check.cuh"

namespace {

using ingot::backend::cuda::DepthwiseConvDesc;

struct Layer {
  const char* model;
  int n, h, w, c, k, s;
};

// Census depthwise layers (input dims), batch 64.
const Layer kLayers[] = {
    {"mobilenet_v2", 64, 112, 112, 32, 3, 1},  {"mobilenet_v2", 64, 112, 112, 96, 3, 2},
    {"mobilenet_v2", 64, 56, 56, 144, 3, 1},   {"mobilenet_v2", 64, 56, 56, 144, 3, 2},
    {"mobilenet_v2", 64, 28, 28, 192, 3, 1},   {"mobilenet_v2", 64, 14, 14, 384, 3, 1},
    {"mobilenet_v2", 64, 14, 14, 576, 3, 1},   {"mobilenet_v2", 64, 7, 7, 960, 3, 1},
    {"shufflenet", 64, 56, 56, 58, 3, 2},      {"shufflenet", 64, 28, 28, 58, 3, 1},
    {"shufflenet", 64, 14, 14, 116, 3, 1},     {"shufflenet", 64, 7, 7, 232, 3, 1},
    {"efficientnet_b0", 64, 56, 56, 144, 5, 2}, {"efficientnet_b0", 64, 28, 28, 240, 5, 1},
    {"efficientnet_b0", 64, 14, 14, 672, 5, 1}, {"mobilenet_v3", 64, 56, 56, 72, 5, 2},
    {"convnext_tiny", 64, 56, 56, 96, 7, 1},   {"convnext_tiny", 64, 28, 28, 192, 7, 1},
    {"convnext_tiny", 64, 14, 14, 384, 7, 1},  {"convnext_tiny", 64, 7, 7, 768, 7, 1},
};

__global__ void fill(__half* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t v = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    v ^= v >> 13;
    v *= 0x5bd1e995u;
    v ^= v >> 15;
    p[i] = __float2half((static_cast<float>(v & 0xffff) / 65535.0f - 0.5f) * 2.0f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--list") == 0) {
    for (const Layer& l : kLayers) std::printf("%s %d %d %d %d %d %d\n", l.model, l.n, l.h, l.w, l.c, l.k, l.s);
    return 0;
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct Variant {
    const char* name;
    int strip;
    bool tiled;
  };
  const Variant variants[] = {
      {"plain", 1, false}, {"strip", ingot::backend::cuda::kDepthwiseStrip, false}, {"tiled", 1, true}};
  constexpr int kV = 3;
  std::printf("%-16s %-18s %2s %2s", "model", "input NHWC", "k", "s");
  for (const Variant& v : variants) std::printf(" %9s", v.name);
  std::printf(" %9s %8s %9s\n", "best", "best x", "max|diff|");
  for (const Layer& l : kLayers) {
    DepthwiseConvDesc d;
    d.channels_last = true;
    d.n = l.n, d.h = l.h, d.w = l.w, d.c = l.c, d.kh = d.kw = l.k;
    d.stride_h = d.stride_w = l.s;
    d.pad_h = d.pad_w = l.k / 2;
    d.oh = (l.h + 2 * d.pad_h - l.k) / l.s + 1;
    d.ow = (l.w + 2 * d.pad_w - l.k) / l.s + 1;
    d.act = ingot::backend::cuda::UnaryOp::kRelu;
    const int64_t nx = d.n * d.h * d.w * d.c, ny = d.n * d.oh * d.ow * d.c, nw = d.c * l.k * l.k;
    __half *x, *w, *b, *y0, *y1;  // y0: the plain kernel's output, y1: each strip variant's
    CK(cudaMalloc(&x, nx * 2));
    CK(cudaMalloc(&w, nw * 2));
    CK(cudaMalloc(&b, d.c * 2));
    CK(cudaMalloc(&y0, ny * 2));
    CK(cudaMalloc(&y1, ny * 2));
    fill<<<1024, 256>>>(x, nx, 1);
    fill<<<64, 256>>>(w, nw, 2);
    fill<<<1, 256>>>(b, d.c, 3);
    CK(cudaMemset(y1, 0xff, ny * 2));
    double us[kV];
    double diff = 0;
    std::vector<__half> h0(ny), h1(ny);
    for (int variant = 0; variant < kV; ++variant) {
      DepthwiseConvDesc dv = d;
      dv.strip = variants[variant].strip;
      dv.tiled = variants[variant].tiled;
      __half* y = variant ? y1 : y0;
      auto launch = [&] {
        CK(ingot::backend::cuda::launch_depthwise_conv(ingot::backend::cuda::FloatType::kF16, x, w, b, nullptr, y, dv,
                                                       sms, nullptr));
      };
      for (int i = 0; i < 3; ++i) launch();
      std::vector<float> trials;
      for (int t = 0; t < 5; ++t) {
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 20; ++i) launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        trials.push_back(ms * 1000.0f / 20.0f);
      }
      std::sort(trials.begin(), trials.end());
      us[variant] = trials[2];
      if (variant == 0) {
        CK(cudaMemcpy(h0.data(), y0, ny * 2, cudaMemcpyDeviceToHost));
      } else {
        CK(cudaMemcpy(h1.data(), y1, ny * 2, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < ny; ++i) {
          const double e = std::fabs(double(__half2float(h0[i])) - double(__half2float(h1[i])));
          diff = std::isnan(e) ? INFINITY : std::max(diff, e);
        }
        CK(cudaMemset(y1, 0xff, ny * 2));  // NaN for the next variant: one that skips an output shows
      }
    }
    const double bound_us = double(nx + ny) * 2 / 4.0e12 * 1e6;
    char dims[64];
    std::snprintf(dims, sizeof dims, "%dx%dx%dx%d", l.n, l.h, l.w, l.c);
    int best = 0;
    for (int v = 1; v < kV; ++v)
      if (us[v] < us[best]) best = v;
    std::printf("%-16s %-18s %2d %2d", l.model, dims, l.k, l.s);
    for (int v = 0; v < kV; ++v) std::printf(" %9.2f", us[v]);
    std::printf(" %9s %8.1f %9.3g\n", variants[best].name, us[best] / bound_us, diff);
    CK(cudaFree(x));
    CK(cudaFree(w));
    CK(cudaFree(b));
    CK(cudaFree(y0));
    CK(cudaFree(y1));
  }
  std::printf("(us per launch; best x: the best variant's time over the 4.0 TB/s bound of reading x and writing y\n"
              " once; max|diff|: the strip variants' outputs against the plain kernel's, inf where one was skipped)\n");
  return 0;
}
