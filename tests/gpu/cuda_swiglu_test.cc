// Copyright ingot authors. Apache-2.0.
//
// The cuda SwiGLU tactic (ingot::SwiGLU, fuse_gated_mlp's activation over a packed gate/up
// projection) against the CPU reference on the same host inputs: ranks 1 to 4, odd and wide
// halves, f32/f16/bf16 with random never-zero data; one run captured into a CUDA graph. Which
// nodes the family refuses needs no device.
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::swiglu_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kCall = "ingot::SwiGLU";

class CudaSwiGluTest : public OpCaseTest {};

TEST_F(CudaSwiGluTest, MatchesReference) {
  const Shape64 cases[] = {
      {1, 16, 2 * 1408},  // a Llama-shaped MLP row block (ff 1408)
      {2, 7, 2 * 5},      // odd halves
      {3, 2 * 64},        // rank 2
      {2 * 3},            // rank 1: one row
      {2, 3, 4, 2 * 96},  // rank 4
  };
  for (DataType t : kFloatTypes)
    for (const Shape64& x : cases) check(swiglu_family(), 19, {input(t, x)}, kCall, "cuda.swiglu");
}

TEST_F(CudaSwiGluTest, CapturedIntoACudaGraph) {
  check_captured(swiglu_family(), 19, {input(DataType::kFloat16, {4, 8, 2 * 256})}, kCall);
}

// Needs no device: the family decides from the node and its input types alone.
TEST(CudaSwiGluFamily, RefusesWhatItDoesNotRun) {
  auto g = parse_graph(R"(graph main {
  opset "" 17
  opset "ingot" 1
  input %x: f32[b,s,16]
  %y = ingot::SwiGLU(%x) @act
  output %y
})");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& act = *(*g)->nodes()[0];
  auto family = swiglu_family();
  const DataType f32 = DataType::kFloat32;
  EXPECT_EQ(family.candidates(act, {{f32, ir::Shape{2, 16}}}).size(), 1u);
  EXPECT_TRUE(family.candidates(act, {{f32, ir::Shape{2, 15}}}).empty()) << "odd last dim";
  EXPECT_TRUE(family.candidates(act, {{DataType::kFloat16, ir::Shape{2, 16}}}).empty()) << "output type differs";
  EXPECT_EQ(family.create("cuda.swiglu", {})->name(), "cuda.swiglu");
  EXPECT_EQ(family.create("cuda.rotary", {}), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
