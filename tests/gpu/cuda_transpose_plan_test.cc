// Copyright ingot authors. Apache-2.0.
//
// launch_transpose's general forms (transpose_plan.h) without a device: each plan's addressing,
// replayed on the host with the kernels' own index arithmetic (transpose_group_offsets) in the
// order the kernels walk it, must move every output element from the input element the
// permutation names, exactly once. CudaElementwiseTest.Transpose runs the kernels themselves
// against the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/pointwise/transpose_plan.h"

namespace ingot::backend::cuda {
namespace {

struct Perm {
  std::vector<int64_t> in_shape;
  std::vector<int> perm;
};

// launch_transpose's arguments for x of in_shape transposed by perm (as the elementwise tactic
// builds them): output dims, and each output dim's element stride in the contiguous input.
void transpose_args(const Perm& p, std::vector<int64_t>* out_dims, std::vector<int64_t>* in_strides) {
  const size_t r = p.in_shape.size();
  std::vector<int64_t> row_major(r);
  int64_t running = 1;
  for (size_t d = r; d-- > 0;) {
    row_major[d] = running;
    running *= p.in_shape[d];
  }
  out_dims->resize(r);
  in_strides->resize(r);
  for (size_t d = 0; d < r; ++d) {
    (*out_dims)[d] = p.in_shape[static_cast<size_t>(p.perm[d])];
    (*in_strides)[d] = row_major[static_cast<size_t>(p.perm[d])];
  }
}

// The input element that output element e reads, straight from the permutation.
int64_t source_of(const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_strides, int64_t e) {
  int64_t off = 0;
  for (size_t d = out_dims.size(); d-- > 0;) {
    off += (e % out_dims[d]) * in_strides[d];
    e /= out_dims[d];
  }
  return off;
}

template <class Idx>
void replay(const TransposePlan& plan, int32_t eb, const std::vector<int64_t>& out_dims,
            const std::vector<int64_t>& in_strides, int64_t n, const std::string& what) {
  std::vector<int> written(static_cast<size_t>(n * eb), 0);
  int64_t wrong = 0;
  if (plan.form == TransposeForm::kRuns) {
    const int64_t u = plan.unit_bytes;
    ASSERT_EQ(plan.outer.size * plan.run * u, n * eb) << what;
    for (int64_t q = 0; q < plan.outer.size * plan.run; ++q) {
      const int64_t r = q / plan.run, w = q - r * plan.run;
      int64_t in = 0, out = 0;
      transpose_group_offsets<Idx>(plan.outer, static_cast<Idx>(r), &in, &out);
      for (int64_t b = 0; b < u; ++b) {
        const int64_t ob = q * u + b, ib = (in + w) * u + b;
        ++written[static_cast<size_t>(ob)];
        if (ib != source_of(out_dims, in_strides, ob / eb) * eb + ob % eb) ++wrong;
      }
    }
  } else {
    const int64_t t_n = plan.batch.size * plan.tiles_j * plan.tiles_k, kt = plan.tile;
    for (int64_t t = 0; t < t_n; ++t) {
      const int64_t tk = t % plan.tiles_k, rest = t / plan.tiles_k;
      const int64_t tj = rest % plan.tiles_j, bi = rest / plan.tiles_j;
      const int64_t j0 = tj * kt, k0 = tk * kt;
      int64_t b_in = 0, b_out = 0;
      transpose_group_offsets<Idx>(plan.batch, static_cast<Idx>(bi), &b_in, &b_out);
      for (int64_t jj = 0; jj < std::min(kt, plan.j.size - j0); ++jj)
        for (int64_t kk = 0; kk < std::min(kt, plan.k.size - k0); ++kk) {
          int64_t j_in = 0, j_out = 0, k_in = 0, k_out = 0;
          transpose_group_offsets<Idx>(plan.j, static_cast<Idx>(j0 + jj), &j_in, &j_out);
          transpose_group_offsets<Idx>(plan.k, static_cast<Idx>(k0 + kk), &k_in, &k_out);
          ASSERT_EQ(j_out, j0 + jj) << what << ": the trailing output dims are not contiguous";
          const int64_t out = b_out + k_out + j0 + jj, in = b_in + j_in + k_in;
          ASSERT_TRUE(out >= 0 && out < n) << what;
          for (int64_t b = 0; b < eb; ++b) ++written[static_cast<size_t>(out * eb + b)];
          if (in != source_of(out_dims, in_strides, out)) ++wrong;
        }
    }
  }
  EXPECT_EQ(wrong, 0) << what;
  EXPECT_TRUE(std::all_of(written.begin(), written.end(), [](int c) { return c == 1; }))
      << what << ": some output byte written other than once";
}

void check_plan(const Perm& p, int32_t eb, uintptr_t x_addr, uintptr_t y_addr) {
  std::vector<int64_t> dims, strides;
  transpose_args(p, &dims, &strides);
  std::string what = "shape [";
  for (int64_t d : p.in_shape) what += std::to_string(d) + " ";
  what += "] perm [";
  for (int d : p.perm) what += std::to_string(d) + " ";
  what += "] element bytes " + std::to_string(eb) + " x%16 " + std::to_string(x_addr % 16) + " y%16 " +
          std::to_string(y_addr % 16);
  const int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
  TransposePlan plan;
  const bool planned = plan_transpose(eb, static_cast<int32_t>(dims.size()), dims.data(), strides.data(),
                                      reinterpret_cast<const void*>(x_addr), reinterpret_cast<const void*>(y_addr), &plan);
  // Every permutation of a contiguous tensor plans, whatever its size (no loop fallback).
  ASSERT_TRUE(planned) << what << ": not planned";
  if (plan.form == TransposeForm::kRuns) {
    EXPECT_EQ(x_addr % static_cast<uintptr_t>(plan.unit_bytes), 0u) << what;
    EXPECT_EQ(y_addr % static_cast<uintptr_t>(plan.unit_bytes), 0u) << what;
  }
  EXPECT_GE(transpose_plan_blocks(plan), 1);
  if (plan.index32) replay<uint32_t>(plan, eb, dims, strides, n, what);
  replay<int64_t>(plan, eb, dims, strides, n, what);
}

TEST(TransposePlanNoDevice, RandomPermutationsReplayExactly) {
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    Perm p;
    const int r = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int d = 0; d < r; ++d) p.in_shape.push_back(std::uniform_int_distribution<int>(1, 9)(rng));
    // Every other case is grown to about 1 MB along a random dim: many tiles, 64-wide ones, long runs.
    int64_t elems = 1;
    for (int64_t d : p.in_shape) elems *= d;
    constexpr int64_t kLarge = int64_t{1} << 20;
    if (i % 2 == 1) p.in_shape[std::uniform_int_distribution<size_t>(0, p.in_shape.size() - 1)(rng)] *=
                    (kLarge + elems - 1) / elems;
    p.perm.resize(static_cast<size_t>(r));
    std::iota(p.perm.begin(), p.perm.end(), 0);
    std::shuffle(p.perm.begin(), p.perm.end(), rng);
    const int32_t eb = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
    const uintptr_t x = 0x10000 + static_cast<uintptr_t>(eb) * std::uniform_int_distribution<int>(0, 3)(rng);
    const uintptr_t y = 0x90000 + static_cast<uintptr_t>(eb) * std::uniform_int_distribution<int>(0, 3)(rng);
    check_plan(p, eb, x, y);
  }
}

// MaxViT-T's window transposes at stage 1 (56 x 56, 7 x 7 windows, 64 channels; batch 2 here).
TEST(TransposePlanNoDevice, MaxVitWindowTransposesTakeTheFastForms) {
  // Window partition with channels innermost: [B, 8, 7, 8, 7, C] -> [B, 8, 8, 7, 7, C]. A window row
  // (7 pixels x 64 fp16 channels, 896 bytes) is contiguous in both and goes as 56 units of 16 bytes.
  const Perm partition{{2, 8, 7, 8, 7, 64}, {0, 1, 3, 2, 4, 5}};
  std::vector<int64_t> dims, strides;
  transpose_args(partition, &dims, &strides);
  TransposePlan plan;
  ASSERT_TRUE(plan_transpose(2, 6, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.form, TransposeForm::kRuns);
  EXPECT_EQ(plan.unit_bytes, 16);
  EXPECT_EQ(plan.run, 7 * 64 * 2 / 16);
  EXPECT_EQ(plan.outer.size, 2 * 8 * 8 * 7);
  check_plan(partition, 2, 0x1000, 0x2000);

  // Un-partition to NCHW: [B, 8, 8, 7, 7, C] -> [B, C, 8, 7, 8, 7]. The output's innermost dims (7,
  // 8, 7 wide) fill a 64-wide tile row only together: J = 7 x 8 x 7, K = C, batch = B x 8. Batch 8
  // (3.2 MB) gives 64 x 7 tiles of 64 x 64.
  const Perm departition{{8, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}};
  transpose_args(departition, &dims, &strides);
  ASSERT_TRUE(plan_transpose(2, 6, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.form, TransposeForm::kTiled);
  EXPECT_EQ(plan.tile, 64);
  EXPECT_EQ(plan.j.size, 7 * 8 * 7);
  EXPECT_EQ(plan.k.size, 64);
  EXPECT_EQ(plan.batch.size, 8 * 8);
  check_plan(departition, 2, 0x1000, 0x2000);

  // Batch 4 (1.6 MB): 64-wide tiles would be 224 blocks, under two waves of 132; 32-wide ones are
  // four times as many.
  const Perm departition4{{4, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}};
  transpose_args(departition4, &dims, &strides);
  ASSERT_TRUE(plan_transpose(2, 6, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.tile, 32);
  EXPECT_EQ(plan.tiles_j, (7 * 8 * 7 + 31) / 32);
  EXPECT_EQ(plan.tiles_k, 2);
  check_plan(departition4, 2, 0x1000, 0x2000);

  // Batch 1 (0.4 MB): tiled too (the probe of session 38: 3.2 us against the old loop's 3.8), in
  // 32-wide tiles: 8 x 13 x 2 of them.
  const Perm departition1{{1, 8, 8, 7, 7, 64}, {0, 5, 1, 3, 2, 4}};
  transpose_args(departition1, &dims, &strides);
  ASSERT_TRUE(plan_transpose(2, 6, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.form, TransposeForm::kTiled);
  EXPECT_EQ(plan.tile, 32);
  EXPECT_EQ(plan.batch.size * plan.tiles_j * plan.tiles_k, 8 * ((7 * 8 * 7 + 31) / 32) * 2);
  check_plan(departition1, 2, 0x1000, 0x2000);

  // NCHW -> NHWC of [32, 64, 56, 56] (a batched 2-D transpose; launch_transpose plans it since session
  // 38): J = C = 64, K = H x W, batch = N.
  const Perm to_nhwc{{32, 64, 56, 56}, {0, 2, 3, 1}};
  transpose_args(to_nhwc, &dims, &strides);
  ASSERT_TRUE(plan_transpose(2, 4, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.form, TransposeForm::kTiled);
  EXPECT_EQ(plan.tile, 64);
  EXPECT_EQ(plan.j.size, 64);
  EXPECT_EQ(plan.k.size, 56 * 56);
  EXPECT_EQ(plan.batch.size, 32);
  check_plan(to_nhwc, 2, 0x1000, 0x2000);

  // An input whose stride-1 dim is short (3 wide): K grows into the input dim that continues it
  // (5, stride 3), which is not among the output's trailing dims. [4, 6, 5, 3] -> [5, 4, 3, 6] with
  // the 4 grown to 4096 (1.4 MB of f32).
  const Perm short_inner{{4096, 6, 5, 3}, {2, 0, 3, 1}};
  transpose_args(short_inner, &dims, &strides);
  ASSERT_TRUE(plan_transpose(4, 4, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.form, TransposeForm::kTiled);
  EXPECT_EQ(plan.j.size, 6);
  EXPECT_EQ(plan.k.size, 5 * 3);
  EXPECT_EQ(plan.batch.size, 4096);
  check_plan(short_inner, 4, 0x1000, 0x2000);
}

TEST(TransposePlanNoDevice, UnitsNarrowToWhatAlignmentAllows) {
  const Perm p{{3, 5, 4, 10}, {0, 2, 1, 3}};  // runs of 10 elements
  std::vector<int64_t> dims, strides;
  transpose_args(p, &dims, &strides);
  TransposePlan plan;
  ASSERT_TRUE(plan_transpose(4, 4, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1000),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.unit_bytes, 8) << "40-byte runs: 8-byte units";
  ASSERT_TRUE(plan_transpose(4, 4, dims.data(), strides.data(), reinterpret_cast<const void*>(0x1004),
                             reinterpret_cast<const void*>(0x2000), &plan));
  EXPECT_EQ(plan.unit_bytes, 4) << "an input 4 bytes past an 8-byte boundary";
  check_plan(p, 4, 0x1004, 0x2000);
  check_plan(p, 2, 0x1002, 0x2006);
  check_plan(p, 1, 0x1001, 0x2003);
  // Merging: [2, 1, 3, 4] out of strides [12, 99, 4, 1] is one contiguous run of 24.
  const int64_t mdims[4] = {2, 1, 3, 4}, mstrides[4] = {12, 99, 4, 1};
  int64_t md[kTransposeGroupDims], ms[kTransposeGroupDims];
  ASSERT_EQ(merge_transpose_dims(4, mdims, mstrides, md, ms), 1);
  EXPECT_EQ(md[0], 24);
  EXPECT_EQ(ms[0], 1);
  // Bad arguments plan nothing.
  const int64_t bad_dims[1] = {-1}, one[1] = {1};
  EXPECT_FALSE(plan_transpose(2, 1, bad_dims, one, nullptr, nullptr, &plan));
  EXPECT_FALSE(plan_transpose(0, 1, one, one, nullptr, nullptr, &plan));
  EXPECT_FALSE(plan_transpose(2, kTransposeGroupDims + 1, one, one, nullptr, nullptr, &plan));
}

}  // namespace
}  // namespace ingot::backend::cuda
