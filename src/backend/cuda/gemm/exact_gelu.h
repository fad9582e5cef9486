// Copyright ingot authors. Apache-2.0.
//
// The exact Gelu, x·Φ(x) = ½·x·(1 + erf(x/√2)), as straight-line float code for GEMM epilogues
// (cutlass_gemm_kernels.cuh), where CUDA's erff costs ~25 instructions per element, half of them
// coefficient selects between its two polynomial branches.
//
// Φ(x) = ½·erfc(−x/√2), and for u = |x|/√2, erfc(u) = t·exp(−u² + P(t)) with t = 1/(1 + u/2)
// (the form of Numerical Recipes' erfcc, Press et al., "Numerical Recipes in C", 2nd ed., §6.2).
// Here P is our own degree-5 minimax fit, made for t in [0.179, 1] (|x| up to 13; beyond,
// Φ(−|x|) < 1e-38 flushes to zero anyway) and folded into base 2:
//   h = Φ(−|x|) = t · 2^(A(t) − (log2(e)/2)·x²),   A(t) = log2(e)·P(t) − 1,
// with A's fit error under 1.1e-5 in log2, i.e. under 7.7e-6 relative in h (fitted in double
// with mpmath's erfc, Remez exchange). Then Gelu(x) = max(x, 0) − |x|·h: x·h for x ≤ 0 and
// x − x·h for x > 0, relative accuracy in the negative tail too, where 1 + erf(z) would cancel.
// Per element: one reciprocal, one exp2, 9 fp32 multiply-adds or multiplies and 2 min/max, no
// branch, no select (CUDA's erff: ~25 instructions, half of them selects between its two
// polynomial branches; in a GEMM epilogue each instruction per element costs ~0.75 us at BERT's
// FFN1, bench/RESULTS.md).
//
// On the device the reciprocal and exp2 are the approximate hardware ops (rcp.approx, ex2.approx:
// ~1-2 ulp); on the host, 1/x and exp2f. Either way the result is within ~1.5e-5 relative of the
// exact Gelu for |x| up to 6 (down to Gelu(-6) = -6e-9, past anything fp16 resolves) and ~5e-5
// beyond, far inside fp16's (4.9e-4) and bf16's (3.9e-3) half ulp: tests/unit/exact_gelu_test.cc
// measures the host form against std::erfc in double, the GPU test CutlassGemm.GeluIsTheErfForm
// the device form. Gelu(NaN) is NaN and Gelu(+inf) = +inf; Gelu(-inf) is 0, the limit (the
// formula 0.5·x·(1 + erf(x/√2)) evaluates to -inf·0 = NaN there): |x| is capped at 20 where it
// multiplies h, which is exactly 0 from |x| ≈ 13.2 on.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define INGOT_GELU_INLINE __host__ __device__ __forceinline__
#else
#define INGOT_GELU_INLINE inline
#endif

namespace ingot::backend::cuda {

namespace exact_gelu_detail {

INGOT_GELU_INLINE float approx_rcp(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / x;
#endif
}

INGOT_GELU_INLINE float approx_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return std::exp2(x);
#endif
}

}  // namespace exact_gelu_detail

/// ½·x·(1 + erf(x/√2)) in fp32, branch-free (see the file comment for the method and accuracy).
INGOT_GELU_INLINE float exact_gelu(float x) {
  using exact_gelu_detail::approx_exp2;
  using exact_gelu_detail::approx_rcp;
  const float ax = std::fabs(x);
  const float t = approx_rcp(std::fma(ax, 0.35355339059327376f, 1.0f));  // 1/(1 + |x|/(2√2))
  float a = 3.300746152e-01f;
  a = std::fma(a, t, -1.023146003e+00f);
  a = std::fma(a, t, 6.845487337e-01f);
  a = std::fma(a, t, 3.670841056e-01f);
  a = std::fma(a, t, 1.468683044e+00f);
  a = std::fma(a, t, -2.827233510e+00f);
  const float h = t * approx_exp2(std::fma(x * x, -0.72134752044448170f, a));  // Φ(−|x|)
  return std::fma(-std::fmin(ax, 20.0f), h, std::fmax(x, 0.0f));
}

}  // namespace ingot::backend::cuda

#undef INGOT_GELU_INLINE
