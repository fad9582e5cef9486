// Copyright ingot authors. Apache-2.0.
//
// The cuda normalization family against the CPU reference (cpu::run_node on the same host
// inputs): RMSNormalization (opset 23 and ingot's form) over one or several trailing axes, and
// GroupNormalization with per-group (opset 18) and per-channel (opset 21) scale/bias and
// InstanceNormalization, in
// f32/f16/bf16 on odd sizes and rows longer than a block (RMSNormalization through the LayerNorm
// row kernels' RMS mode: warp-per-row and block-per-row). Also which nodes the family refuses.
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::norm_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

class CudaNormTest : public OpCaseTest {};

TEST_F(CudaNormTest, RmsNormalization) {
  struct Case {
    Shape64 x, scale;
    int64_t axis;
  };
  const Case cases[] = {{{2, 7, 768}, {768}, -1}, {{3, 5, 6}, {5, 6}, 1}, {{4, 1027}, {1, 1027}, -1},
                        {{2, 3, 1, 9}, {9}, 2},   {{5, 33}, {33}, 1},
                        // The warp-per-row kernel (Llama's 512 over many rows, its widest 2048 fp16
                        // rows) and the block kernel past it (4096).
                        {{96, 512}, {512}, -1},   {{8, 2048}, {2048}, -1}, {{3, 4096}, {4096}, -1}};
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      const std::string attrs = " {axis=" + std::to_string(c.axis) + ", epsilon=0.001}";
      check(norm_family(), 23, {input(t, c.x), input(t, c.scale)}, "RMSNormalization" + attrs, "cuda.norm.rmsnorm");
      check(norm_family(), 17, {input(t, c.x), input(t, c.scale)}, "ingot::RMSNormalization" + attrs,
            "cuda.norm.rmsnorm");
    }
  }
}

TEST_F(CudaNormTest, GroupNormalization) {
  struct Case {
    Shape64 x;
    int64_t groups;
  };
  const Case cases[] = {{{2, 64, 9, 9}, 32}, {{1, 6, 5}, 3}, {{3, 4, 2, 3, 5}, 2}, {{2, 8, 70, 70}, 4}, {{2, 5, 7}, 5}};
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      const std::string call = "GroupNormalization {epsilon=0.0001, num_groups=" + std::to_string(c.groups) + "}";
      check(norm_family(), 21, {input(t, c.x), input(t, {c.x[1]}), input(t, {c.x[1]})}, call, "cuda.norm.groupnorm");
      check(norm_family(), 18, {input(t, c.x), input(t, {c.groups}), input(t, {c.groups})}, call,
            "cuda.norm.groupnorm");
    }
  }
}

TEST_F(CudaNormTest, InstanceNormalization) {
  const Shape64 cases[] = {{2, 64, 9, 9}, {1, 6, 5}, {3, 4, 2, 3, 5}, {2, 8, 70, 70}, {2, 3, 1, 1}};
  for (DataType t : kFloatTypes)
    for (const Shape64& x : cases)
      check(norm_family(), 17, {input(t, x), input(t, {x[1]}), input(t, {x[1]})},
            "InstanceNormalization {epsilon=0.0001}", "cuda.norm.instancenorm");
}

TEST_F(CudaNormTest, RefusesWhatItDoesNotHandle) {
  // A scale broadcast inside the normalized dims, stash_type other than fp32, mixed types.
  refuses(norm_family(), 23, {input(DataType::kFloat32, {2, 3, 4}), input(DataType::kFloat32, {1, 4})},
          "RMSNormalization {axis=1}");
  refuses(norm_family(), 23, {input(DataType::kFloat16, {2, 4}), input(DataType::kFloat16, {4})},
          "RMSNormalization {stash_type=10}");
  refuses(norm_family(), 21,
          {input(DataType::kFloat16, {2, 4, 3}), input(DataType::kFloat32, {4}), input(DataType::kFloat32, {4})},
          "GroupNormalization {num_groups=2}");
}

}  // namespace
}  // namespace ingot::gpu_test
