// Copyright ingot authors. Apache-2.0.
//
// The cuda rotary family (ingot::RotaryEmbedding) against the CPU reference on the same host
// inputs: ranks 2 to 5, D in {32, 64, 128}, cos/sin tables [1, 1, S, D], [S, D], [B, 1, S, D]
// (and cos and sin of different shapes), f32/f16/bf16 with random never-zero data; packed QKV rows
// (the heads form); one run
// captured into a CUDA graph. Which nodes the family refuses needs no device.
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::rotary_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr const char* kCall = "ingot::RotaryEmbedding";

class CudaRotaryTest : public OpCaseTest {};

struct Case {
  Shape64 x, cos, sin;
};

TEST_F(CudaRotaryTest, MatchesReference) {
  const Case cases[] = {
      {{2, 4, 6, 64}, {1, 1, 6, 64}, {1, 1, 6, 64}},        // Llama: [1, 1, S, D] tables
      {{4, 8, 128, 64}, {1, 1, 128, 64}, {1, 1, 128, 64}},  // the decoder's shape, batch 4
      {{3, 5, 128}, {5, 128}, {5, 128}},                    // [S, D] tables on rank 3
      {{7, 32}, {7, 32}, {7, 32}},                          // rank 2
      {{2, 3, 7, 32}, {2, 1, 7, 32}, {2, 1, 7, 32}},        // [B, 1, S, D]: positions per batch row
      {{2, 2, 3, 5, 128}, {1, 1, 1, 5, 128}, {5, 128}},     // rank 5, cos and sin shaped apart
      {{3, 2, 9, 64}, {1, 1, 9, 64}, {3, 1, 9, 64}},        // one table per batch row, one shared
      {{1, 1, 1, 32}, {1, 32}, {1, 1, 1, 32}},              // one row
      {{4, 128, 8, 64}, {1, 128, 1, 64}, {1, 128, 1, 64}},  // before the head transpose: [B, S, H, D]
      {{2, 5, 3, 12}, {1, 5, 1, 12}, {1, 5, 1, 12}},        // D/2 = 6: one pair a thread in fp16
      {{3, 4, 10}, {4, 10}, {4, 10}},                       // D/2 = 5: one pair a thread in every type
  };
  for (DataType t : kFloatTypes)
    for (const Case& c : cases)
      check(rotary_family(), 17, {input(t, c.x), input(t, c.cos), input(t, c.sin)}, kCall, "cuda.rotary");
}

// pack_rotary_qkv's form: X a packed QKV projection [B, S, (Hq + 2 Hkv) D], the first Hq + Hkv heads
// of each row rotated into a contiguous [B, S, Hq + Hkv, D]; V's columns are left alone.
TEST_F(CudaRotaryTest, HeadsAtTheStartOfPackedRows) {
  struct Packed {
    Shape64 x, table;
    int heads, head_size;
  };
  const Packed cases[] = {
      {{2, 16, (32 + 2 * 8) * 64}, {1, 16, 1, 64}, 32 + 8, 64},  // Llama-3.2-1B's heads: 16-byte packs
      {{1, 5, (4 + 2 * 2) * 32}, {1, 5, 1, 32}, 4 + 2, 32},
      {{3, 7, (2 + 2 * 1) * 12}, {1, 7, 1, 12}, 2 + 1, 12},        // D/2 = 6: one pair a thread in fp16
      {{2, 3, (3 + 2 * 1) * 10}, {3, 1, 10}, 3 + 1, 10},            // rows of 50 elements: unaligned packs
  };
  for (DataType t : kFloatTypes)
    for (const Packed& c : cases)
      check(rotary_family(), 17, {input(t, c.x), input(t, c.table), input(t, c.table)},
            "ingot::RotaryEmbedding {heads=" + std::to_string(c.heads) + ", head_size=" + std::to_string(c.head_size) +
                "}",
            "cuda.rotary");
}

TEST_F(CudaRotaryTest, CapturedIntoACudaGraph) {
  check_captured(rotary_family(), 17,
                 {input(DataType::kFloat16, {2, 8, 16, 64}), input(DataType::kFloat16, {1, 1, 16, 64}),
                  input(DataType::kFloat16, {1, 1, 16, 64})},
                 kCall);
}

// Needs no device: the family decides from the node and its input types alone.
TEST(CudaRotaryFamily, RefusesWhatItDoesNotRun) {
  auto g = parse_graph(R"(graph main {
  opset "" 17
  opset "ingot" 1
  input %x: f32[b,h,s,d]
  input %cos: f32[1,1,s,d]
  input %sin: f32[1,1,s,d]
  %y = ingot::RotaryEmbedding(%x, %cos, %sin) @rope
  %z = ingot::RotaryEmbedding {interleaved=1}(%x, %cos, %sin) @rope_interleaved
  output %y
  output %z
})");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& rope = *(*g)->nodes()[0];
  const ir::Node& interleaved = *(*g)->nodes()[1];
  auto types = [](DataType x, const ir::Shape& xs, DataType p, const ir::Shape& cs, const ir::Shape& ss) {
    return std::vector<ir::TensorType>{{x, xs}, {p, cs}, {p, ss}};
  };
  const DataType f32 = DataType::kFloat32;
  const ir::Shape x{2, 4, 6, 64}, table{1, 1, 6, 64};
  auto family = rotary_family();
  // The node's output is f32 (inferred from the f32 inputs), so the accepted case is f32.
  EXPECT_EQ(family.candidates(rope, types(f32, x, f32, table, table)).size(), 1u);
  EXPECT_TRUE(family.candidates(interleaved, types(f32, x, f32, table, table)).empty()) << "interleaved = 1";
  EXPECT_TRUE(family.candidates(rope, types(f32, {2, 4, 6, 63}, f32, {1, 1, 6, 63}, {1, 1, 6, 63})).empty()) << "odd D";
  EXPECT_TRUE(family.candidates(rope, types(f32, {2, 4, 6, ir::Dim::symbol("d")}, f32, table, table)).empty())
      << "D unknown";
  EXPECT_TRUE(family.candidates(rope, types(f32, x, DataType::kFloat16, table, table)).empty()) << "mixed types";
  EXPECT_TRUE(family.candidates(rope, types(f32, x, f32, {1, 1, 6, 1}, table)).empty()) << "cos broadcast along D";
  EXPECT_TRUE(family
                  .candidates(rope, types(f32, {2, 4, ir::Dim::symbol("s"), 64}, f32, {1, 1, ir::Dim::symbol("t"), 64},
                                          {1, 1, ir::Dim::symbol("t"), 64}))
                  .empty())
      << "a table dim not provably x's";
  EXPECT_EQ(family.create("cuda.rotary", {})->name(), "cuda.rotary");
  EXPECT_EQ(family.create("cuda.norm.rmsnorm", {}), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
