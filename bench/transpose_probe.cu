// Copyright ingot authors. Apache-2.0.
//
// How fast does launch_transpose move the census's permutations? For each case: launch_transpose
// as the elementwise tactic calls it (whichever kernel it picks), the planned kernel
// (transpose_plan.h) run directly (also on shapes that launch_transpose sends elsewhere: a batched
// 2-D transpose with a dim of at most 8), and a device-to-device cudaMemcpyAsync of the same bytes as the ceiling. Each
// timed as 50 launches between two events after a warm-up, median of 5; GB/s counts the bytes read
// and written. The two kernels' outputs must be byte-identical and equal to a host permutation.
//
// Not built by CMake; here (sm_90a, against the CUDA build's static library):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src bench/transpose_probe.cu \
//     build/libingot.a -o build/transpose_probe
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "backend/cuda/pointwise/transpose_plan.h"

using namespace ingot::backend::cuda;

#define CU(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

struct Case {
  const char* what;
  std::vector<int64_t> in_shape;
  std::vector<int> perm;
};

template <class F>
float time_ms(F&& f) {
  cudaEvent_t a, b;
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int trial = 0; trial < 5; ++trial) {
    CU(cudaEventRecord(a));
    for (int i = 0; i < 50; ++i) f();
    CU(cudaEventRecord(b));
    CU(cudaEventSynchronize(b));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 50);
  }
  std::sort(t.begin(), t.end());
  CU(cudaEventDestroy(a));
  CU(cudaEventDestroy(b));
  return t[2];
}

int main() {
  const int eb = 2;  // fp16, as the census engines run
  const std::vector<Case> cases = {
      {"maxvit s1 partition  [32,8,7,8,7,64]", {32, 8, 7, 8, 7, 64}, {0, 1, 3, 2, 4, 5}},
      {"maxvit s1 to NCHW    [32,8,8,7,7,64]", {32, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}},
      {"maxvit s1 from NCHW  [32,64,7,8,7,8]", {32, 64, 7, 8, 7, 8}, {0, 2, 4, 3, 5, 1}},
      {"maxvit s3 to NCHW    [32,2,2,7,7,256]", {32, 2, 2, 7, 7, 256}, {0, 5, 1, 3, 2, 4}},
      {"swin window          [32,8,7,8,7,96]", {32, 8, 7, 8, 7, 96}, {0, 1, 3, 2, 4, 5}},
      {"NCHW->NHWC           [32,64,56,56]", {32, 64, 3136}, {0, 2, 1}},
      {"NHWC->NCHW           [32,56,56,64]", {32, 3136, 64}, {0, 2, 1}},
      {"heads [B,S,H,D]->[B,H,S,D] [32,197,6,64]", {32, 197, 6, 64}, {0, 2, 1, 3}},
      {"channel shuffle      [64,2,58,28,28]", {64, 2, 58, 784}, {0, 2, 1, 3}},
      // Batch 1 and 4: where launch_transpose leaves the tiled form to the per-element loop (< 1 MB)
      // and where the tiles narrow to 32 x 32 (fewer than two waves of 64 x 64).
      {"maxvit s1 to NCHW b1 [1,8,8,7,7,64]", {1, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}},
      {"maxvit s1 from NCHW b1 [1,64,7,8,7,8]", {1, 64, 7, 8, 7, 8}, {0, 2, 4, 3, 5, 1}},
      {"maxvit s1 to NCHW b4 [4,8,8,7,7,64]", {4, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}},
  };
  std::printf("%-44s %10s %10s %10s %10s %10s %10s %8s\n", "case", "MB", "launch us", "GB/s", "plan us", "GB/s",
              "memcpy us", "form");
  for (const Case& c : cases) {
    const size_t r = c.in_shape.size();
    std::vector<int64_t> row(r), dims(r), strides(r);
    int64_t n = 1;
    for (size_t d = r; d-- > 0;) {
      row[d] = n;
      n *= c.in_shape[d];
    }
    for (size_t d = 0; d < r; ++d) {
      dims[d] = c.in_shape[static_cast<size_t>(c.perm[d])];
      strides[d] = row[static_cast<size_t>(c.perm[d])];
    }
    const size_t bytes = static_cast<size_t>(n) * eb;
    std::vector<uint16_t> hx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) hx[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 2654435761u >> 7);
    void *x, *y1, *y2;
    CU(cudaMalloc(&x, bytes));
    CU(cudaMalloc(&y1, bytes));
    CU(cudaMalloc(&y2, bytes));
    CU(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
    TransposePlan plan;
    const bool planned = plan_transpose(eb, static_cast<int32_t>(r), dims.data(), strides.data(), x, y2, &plan);
    if (!planned) {
      std::printf("%-44s no plan\n", c.what);
      CU(cudaFree(x));
      CU(cudaFree(y1));
      CU(cudaFree(y2));
      continue;
    }
    const float t_launch = time_ms([&] {
      CU(launch_transpose(eb, x, y1, static_cast<int32_t>(r), dims.data(), strides.data(), n, nullptr));
    });
    const float t_plan = time_ms([&] { CU(launch_transpose_plan(eb, plan, x, y2, nullptr)); });
    const float t_copy = time_ms([&] { CU(cudaMemcpyAsync(y2, x, bytes, cudaMemcpyDeviceToDevice, nullptr)); });
    CU(launch_transpose(eb, x, y1, static_cast<int32_t>(r), dims.data(), strides.data(), n, nullptr));
    CU(launch_transpose_plan(eb, plan, x, y2, nullptr));
    CU(cudaDeviceSynchronize());
    std::vector<uint16_t> h1(static_cast<size_t>(n)), h2(static_cast<size_t>(n));
    CU(cudaMemcpy(h1.data(), y1, bytes, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(h2.data(), y2, bytes, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int64_t e = 0; e < n; ++e) {
      int64_t off = 0, q = e;
      for (size_t d = r; d-- > 0;) {
        off += (q % dims[d]) * strides[d];
        q /= dims[d];
      }
      const uint16_t want = hx[static_cast<size_t>(off)];
      bad += h1[static_cast<size_t>(e)] != want || h2[static_cast<size_t>(e)] != want;
    }
    const double gb = 2.0 * static_cast<double>(bytes) / 1e9;
    std::printf("%-44s %10.2f %10.1f %10.0f %10.1f %10.0f %10.1f %8s%s\n", c.what, bytes / 1e6, t_launch * 1e3,
                gb / (t_launch * 1e-3), t_plan * 1e3, gb / (t_plan * 1e-3), t_copy * 1e3,
                plan.form == TransposeForm::kRuns ? "runs" : "tiles", bad ? "  WRONG" : "");
    if (bad) std::printf("  %lld elements differ from the permutation\n", static_cast<long long>(bad));
    CU(cudaFree(x));
    CU(cudaFree(y1));
    CU(cudaFree(y2));
  }
  return 0;
}
