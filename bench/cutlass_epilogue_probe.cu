// Copyright ingot authors. Apache-2.0.
//
// What the Gelu in the CUTLASS GEMM epilogue costs, and which tiles suit BERT-base's GEMMs at
// batch 64 (fp16, + bias): FFN1 ([8192,768] x [768,3072]) with CUTLASS's GELU (CUDA's erff) and
// ingot's ExactGelu (exact_gelu.h) against bias only, and the attention output projection and
// FFN2 (N = 768) bias only, through the library's configs and a few others (128x192 tiles, a
// Gelu kernel without bias). (Session 6's first probes also timed GELU_taylor, the tanh form, as
// a cheap activation, and CUTLASS's own epilogue subtiles: see bench/RESULTS.md.) Prints
// us per GEMM (median of 7 trials of 20 back-to-back launches, CUDA events) and, for each Gelu
// variant, the largest difference from the erff kernel's output in fp16 units of the last place.
// (-DNDEBUG matters: CUTLASS's device asserts are calls, and a call serializes the wgmma pipeline.)
// Usage: cutlass_epilogue_probe [launches per trial, default 20]. With many (e.g. 2000: ~1 s per
// variant) the GEMMs run long enough to reach the GPU's sustained power-capped clocks; each row
// ends with its UTC start and end time, to line up with an `nvidia-smi --query-gpu=timestamp,
// clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 50` log of the same run.
// Not built by CMake (it instantiates ten kernels only to measure them); on a 90a-capable nvcc:
//   nvcc -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -Isrc \
//     -I$(python3 -c 'import cutlass_library,os;print(os.path.dirname(cutlass_library.__file__))')/source/include \
//     bench/cutlass_epilogue_probe.cu -o build/cutlass_epilogue_probe
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"
#include "probe_check.cuh"

using namespace ingot::backend::cuda;
using namespace ingot::backend::cuda::cutlass_detail;
using cute::Int;
using cute::Shape;
using F16 = cutlass::half_t;
template <template <class> class Act>
using GeluOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, F16, float, F16>;
using Coop = Shape<Int<128>, Int<256>, Int<64>>;
using PP = Shape<Int<128>, Int<128>, Int<64>>;
using C1 = Shape<Int<1>, Int<1>, Int<1>>;
constexpr CutlassEpilogue kB = CutlassEpilogue::kBias, kG = CutlassEpilogue::kBiasGelu;

// The synthetic activations: a dependent chain the compiler cannot shorten (fma does not
// reassociate), and the Gelu's two MUFU ops without its polynomial.
template <class T>
struct FmaChain8;
template <class T>
struct FmaChain16;
template <class T>
struct TwoMufu;
template <int kN, class T>
struct FmaChainArray;
template <int kN, class T, int N>
struct FmaChainArray<kN, cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      float v = static_cast<float>(x[i]);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kN; ++k) v = fmaf(v, 0.9990234375f, 0.0009765625f);
      y[i] = T(v);
    }
    return y;
  }
};
template <class T, int N>
struct FmaChain8<cutlass::Array<T, N>> : FmaChainArray<8, cutlass::Array<T, N>> {};
template <class T, int N>
struct FmaChain16<cutlass::Array<T, N>> : FmaChainArray<16, cutlass::Array<T, N>> {};
template <class T, int N>
struct TwoMufu<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      const float v = static_cast<float>(x[i]);
      const float t = exact_gelu_detail::approx_rcp(fmaf(fabsf(v), 0.35355339f, 1.0f));
      y[i] = T(exact_gelu_detail::approx_exp2(-t));
    }
    return y;
  }
};

struct Variant {
  const char* config;
  const char* what;
  KernelEntry e;
  bool gelu;
  bool no_bias = false;
  bool checked = true;  // compared with the erff kernel's output (not the synthetic activations)
};

struct Problem {
  const char* label;
  int m, n, k;
  bool gelu;
};

// "HH:MM:SS.mmm" UTC, as nvidia-smi's timestamp column writes it.
static std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const Problem problems[] = {{"FFN1 b64", 8192, 3072, 768, true},
                              {"Oproj b64", 8192, 768, 768, false},
                              {"FFN2 b64", 8192, 768, 3072, false}};
  const int kMaxM = 8192, kMaxN = 3072, kMaxK = 3072;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__half> a(size_t(kMaxM) * kMaxK), b(size_t(kMaxK) * kMaxN), bias(kMaxN);
  for (auto& v : a) v = __float2half(u(rng));
  for (auto& v : bias) v = __float2half(u(rng));
  void *da, *db, *dbias, *dd, *dref, *ws;
  CK(cudaMalloc(&da, a.size() * 2));
  CK(cudaMalloc(&db, b.size() * 2));
  CK(cudaMalloc(&dbias, bias.size() * 2));
  CK(cudaMalloc(&dd, size_t(kMaxM) * kMaxN * 2));
  CK(cudaMalloc(&dref, size_t(kMaxM) * kMaxN * 2));
  CK(cudaMalloc(&ws, 1 << 20));
  CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dbias, bias.data(), bias.size() * 2, cudaMemcpyHostToDevice));
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  using PP192 = Shape<Int<128>, Int<192>, Int<64>>;
  // Synthetic activations (session 7, for why the ping-pong kernel hides so little of the Gelu):
  // 8 or 16 dependent multiply-adds per element, or one multiply-add and two MUFU ops (the Gelu's
  // reciprocal and exp2) per element, all after acc + bias.
  using Fma8 = ActOfAccPlusBias<FmaChain8, F16, PP>;
  using Fma16 = ActOfAccPlusBias<FmaChain16, F16, PP>;
  using Mufu2 = ActOfAccPlusBias<TwoMufu, F16, PP>;
  // "LinComb": CUTLASS's LinCombPerColBias(EltAct) fusions, the library's epilogue until session 7;
  // the defaults are now its own visitor trees (acc + bias, then the Gelu: no alpha/beta terms).
  using BiasLinComb = cutlass::epilogue::fusion::LinCombPerColBias<F16, float, F16>;
  const Variant vs[] = {
      {"128x256 coop", "bias only", GemmKernel<Coop, C1, Cooperative, F16, kB>::entry(), false},
      {"128x256 coop", "GELU (erff)", GemmKernel<Coop, C1, Cooperative, F16, kG, GeluOp<cutlass::epilogue::thread::GELU>>::entry(), true},
      {"128x256 coop", "ExactGelu (128x64 epi)", GemmKernel<Coop, C1, Cooperative, F16, kG>::entry(), true},
      {"128x128 pingpong", "bias only", GemmKernel<PP, C1, Pingpong, F16, kB>::entry(), false},
      {"128x128 pingpong", "bias only, LinComb", GemmKernel<PP, C1, Pingpong, F16, kB, BiasLinComb>::entry(), false},
      // Bias only at FFN1's shape (listed with the Gelu rows, not compared with the erff output):
      // the baseline the activations' cost is read against, in the same run.
      {"128x128 pingpong", "bias only (FFN1)", GemmKernel<PP, C1, Pingpong, F16, kB>::entry(), true, false, false},
      {"128x128 pingpong", "ExactGelu (64x128 epi)", GemmKernel<PP, C1, Pingpong, F16, kG>::entry(), true},
      {"128x128 pingpong", "ExactGelu, LinComb", GemmKernel<PP, C1, Pingpong, F16, kG, GeluOp<ExactGelu>>::entry(), true},
      {"128x128 pingpong", "ExactGelu, no bias", GemmKernel<PP, C1, Pingpong, F16, kG>::entry(), true, true},
      {"128x128 pingpong", "8 FFMA (no Gelu)", GemmKernel<PP, C1, Pingpong, F16, kG, Fma8>::entry(), true, false, false},
      {"128x128 pingpong", "16 FFMA (no Gelu)", GemmKernel<PP, C1, Pingpong, F16, kG, Fma16>::entry(), true, false, false},
      {"128x128 pingpong", "FFMA + 2 MUFU (no Gelu)", GemmKernel<PP, C1, Pingpong, F16, kG, Mufu2>::entry(), true, false, false},
      {"128x192 pingpong", "bias only", GemmKernel<PP192, C1, Pingpong, F16, kB>::entry(), false},
  };
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<__half> ref(size_t(kMaxM) * kMaxN), got(size_t(kMaxM) * kMaxN);
  std::printf("launches per trial: %d (7 trials, median)\n", launches);
  std::printf("%-10s %-18s %-24s %9s %9s %14s  %s\n", "shape", "config", "epilogue", "us", "TFLOP/s", "max diff (ulp)",
              "UTC start-end");
  for (const Problem& pr : problems) {
    const int m = pr.m, n = pr.n, k = pr.k;
    const float s = 1.f / std::sqrt(float(k));
    for (size_t i = 0; i < size_t(k) * n; ++i) b[i] = __float2half(u(rng) * s * 2.f);  // outputs ~ N(0, ~0.7)
    CK(cudaMemcpy(db, b.data(), size_t(k) * n * 2, cudaMemcpyHostToDevice));
    CutlassGemmProblem p;
    p.m = m, p.n = n, p.k = k, p.a = da, p.b = db, p.lda = k, p.ldb = n, p.ldd = n, p.sm_count = sms;
    const double tflop = 2.0 * m * n * k / 1e12;
    for (const Variant& v : vs) {
      if (v.gelu != pr.gelu) continue;
      const bool is_ref = v.gelu && std::string(v.what) == "GELU (erff)";
      p.d = is_ref ? dref : dd;
      p.bias = v.no_bias ? nullptr : dbias;
      if (!v.e.can_implement(p)) {
        std::printf("%-10s %-18s %-24s cannot implement\n", pr.label, v.config, v.what);
        continue;
      }
      bool ok = true;
      for (int i = 0; i < 10 && ok; ++i) ok = v.e.run(p, ws, 1 << 20, st) == CutlassGemmStatus::kOk;
      if (!ok) {
        std::printf("%-10s %-18s %-24s run failed\n", pr.label, v.config, v.what);
        continue;
      }
      std::vector<float> trials;
      const std::string started = utc_now();
      for (int t = 0; t < 7; ++t) {
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < launches; ++i) v.e.run(p, ws, 1 << 20, st);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        trials.push_back(ms * 1000.f / float(launches));
      }
      const std::string ended = utc_now();
      std::sort(trials.begin(), trials.end());
      const float us = trials[3];
      char diff[32] = "-";
      if (v.gelu && !is_ref && !v.no_bias && v.checked) {
        CK(cudaMemcpy(ref.data(), dref, size_t(m) * n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(got.data(), dd, size_t(m) * n * 2, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (size_t i = 0; i < size_t(m) * n; ++i) {
          const float r = __half2float(ref[i]), g = __half2float(got[i]);
          const float ulp = std::max(std::ldexp(1.0f, std::ilogb(std::max(std::fabs(r), 6.1e-5f)) - 10), 5.96e-8f);
          worst = std::max(worst, double(std::fabs(g - r) / ulp));
        }
        std::snprintf(diff, sizeof diff, "%.1f", worst);
      }
      std::printf("%-10s %-18s %-24s %9.1f %9.0f %14s  %s-%s\n", pr.label, v.config, v.what, us, tflop / (us * 1e-6),
                  diff, started.c_str(), ended.c_str());
    }
  }
  return 0;
}
