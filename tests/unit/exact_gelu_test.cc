// Copyright ingot authors. Apache-2.0.
//
// The branch-free exact Gelu of the GEMM epilogues (backend/cuda/exact_gelu.h), host form,
// against 0.5·x·erfc(−x/√2) in double (std::erfc: the exact Gelu, without 1 + erf's cancellation
// in the negative tail): every fp32 value on a fine grid and every finite fp16 value. The device
// form (hardware rcp/exp2 approximations) is checked by the GPU test CutlassGemm.GeluIsTheErfForm.
#include "backend/cuda/gemm/exact_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

namespace ingot {
namespace {

using backend::cuda::exact_gelu;

double gelu_double(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

// fp16 bits -> float (normals, subnormals, zeros; no inf/NaN asked for here).
float half_to_float(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return static_cast<float>(sign ? -mag : mag);
}

// The worst error seen for |x| <= 6 (Gelu down to -6e-9, past anything fp16 tells from 0; ~9e-6
// there: the fit's 7.7e-6 and fp32 rounding, against fp16's half ulp of 4.9e-4) and beyond, where
// the exp argument passes 50 and its fp32 rounding alone is ~1e-5 relative.
struct Worst {
  double rel = 0, x = 0, far_rel = 0, far_x = 0;
  void add(float x_in, double err) {
    double& r = std::fabs(x_in) <= 6.0f ? rel : far_rel;
    double& at = std::fabs(x_in) <= 6.0f ? x : far_x;
    if (err > r) {
      r = err;
      at = x_in;
    }
  }
  void expect() const {
    EXPECT_LT(rel, 1.5e-5) << "worst relative error for |x| <= 6 at x = " << x;
    EXPECT_LT(far_rel, 5e-5) << "worst relative error for |x| > 6 at x = " << far_x;
    std::printf("worst relative error: %.3g at x = %g (|x| <= 6), %.3g at x = %g (beyond)\n", rel, x, far_rel,
                far_x);
  }
};

// Relative error where Gelu(x) is a normal float, else absolute error against the smallest normal.
double error_of(float x) {
  const double want = gelu_double(x), got = exact_gelu(x);
  const double scale = std::max(std::fabs(want), static_cast<double>(std::numeric_limits<float>::min()));
  return std::fabs(got - want) / scale;
}

TEST(ExactGelu, CloseToTheExactGeluOnAFineGrid) {
  Worst worst;
  const int kSteps = 2'000'000;
  for (int i = 0; i <= kSteps; ++i) {
    const float x = -14.0f + 28.0f * static_cast<float>(i) / kSteps;
    worst.add(x, error_of(x));
  }
  worst.expect();
}

TEST(ExactGelu, CloseToTheExactGeluAtEveryFiniteHalf) {
  Worst worst;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if (((bits >> 10) & 0x1f) == 0x1f) continue;  // inf and NaN
    const float x = half_to_float(static_cast<uint16_t>(bits));
    worst.add(x, error_of(x));
  }
  worst.expect();
}

TEST(ExactGelu, TailsAndSpecialValues) {
  EXPECT_EQ(exact_gelu(0.0f), 0.0f);
  EXPECT_NEAR(exact_gelu(1.0f), 0.841344746, 0.841344746 * 1.5e-5);
  EXPECT_NEAR(exact_gelu(-1.0f), -0.158655254, 0.158655254 * 1.5e-5);
  EXPECT_EQ(exact_gelu(30.0f), 30.0f);          // Φ(30) is 1 in fp32
  EXPECT_EQ(exact_gelu(-30.0f), 0.0f);          // Φ(-30) underflows: -0
  EXPECT_LT(exact_gelu(-5.0f), 0.0f);           // -1.43e-6: the tail keeps its sign and size
  EXPECT_NEAR(exact_gelu(-5.0f) / gelu_double(-5.0), 1.0, 1.5e-5);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exact_gelu(inf), inf);
  EXPECT_EQ(exact_gelu(-inf), 0.0f);            // the limit (0.5·x·(1 + erf(x/√2)) gives -inf·0 there)
  EXPECT_TRUE(std::isnan(exact_gelu(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace ingot
