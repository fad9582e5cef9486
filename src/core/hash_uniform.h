// Copyright ingot authors. Apache-2.0.
//
// The random weights of `--load-format dummy` models (llm::LlamaCpuModel::random, and the GPU
// decoder's fill on the device): element i of tensor k is a splitmix64 hash of (seed, k, i) mapped
// to [center - a, center + a) with 24 random bits. The same float on the host and the device: the
// device's arithmetic is spelled with round-to-nearest intrinsics, so it is never contracted into
// a fused multiply-add (the host build is ISO C++, -ffp-contract=off, no FMA).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define INGOT_HASH_HD __host__ __device__ __forceinline__
#else
#define INGOT_HASH_HD inline
#endif

namespace ingot {

/// The base of tensor number `tensor` (1, 2, ... in fill order) under `seed`.
INGOT_HASH_HD uint64_t hash_uniform_base(uint64_t seed, uint64_t tensor) {
  return seed * 0x9e3779b97f4a7c15ull + (tensor << 40);
}

/// Element i of the tensor with base `base`: center + a * (2u - 1), u in [0, 1).
INGOT_HASH_HD float hash_uniform(uint64_t base, uint64_t i, float center, float a) {
  uint64_t z = base + i * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(center, __fmul_rn(a, __fsub_rn(__fmul_rn(2.0f, u), 1.0f)));
#else
  return center + a * (2.0f * u - 1.0f);
#endif
}

}  // namespace ingot
