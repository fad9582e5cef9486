// Copyright ingot authors. Apache-2.0.
//
// The cuda reduction family against the CPU reference (cpu::run_node on the same host inputs):
// every Reduce* op over inner, outer, middle, split and all axes (attribute form and initializer
// input form, keepdims both ways, negative axes, noop_with_empty_axes), shapes that take the
// thread-, warp- and block-per-output paths, and ArgMax/ArgMin with ties and select_last_index,
// in f32/f16/bf16. Also which nodes the family refuses.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/reduce/reduce_kernels.h"
#include "core/dtype.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::reduce_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

class CudaReduceTest : public OpCaseTest {};

struct Axes {
  Shape64 x;
  std::vector<int64_t> axes;  // empty: all
};

const Axes kAxes[] = {
    {{4, 128, 768}, {-1}},     // BERT's LayerNorm mean (warp per output)
    {{2, 64, 7, 7}, {2, 3}},   // spatial mean
    {{3, 37, 11}, {1}},        // middle axis (thread per output)
    {{5, 9, 6}, {0, 2}},       // split axes
    {{7, 13}, {}},             // all
    {{3, 20000}, {1}},         // long rows (block per output)
    {{1, 1, 5}, {0}},          // unit dims only
    {{6, 1, 17}, {-3, 1}},     // negative axes and a unit reduced dim
    {{2, 3, 4, 5, 6}, {1, 3}},
};

std::string axes_attr(const std::vector<int64_t>& axes) {
  std::string s = "axes=[";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

// Sums of positive data keep the relative error of an fp32 accumulation small; Prod runs on
// values near 1 so long products neither overflow nor vanish.
struct OpRange {
  const char* op;
  const char* tactic;
  double lo, hi;
};
const OpRange kOps[] = {
    {"ReduceSum", "reducesum", 0.5, 2.0},         {"ReduceMean", "reducemean", -2.0, 2.0},
    {"ReduceMax", "reducemax", -3.0, 3.0},        {"ReduceMin", "reducemin", -3.0, 3.0},
    {"ReduceProd", "reduceprod", 0.999, 1.001},   {"ReduceSumSquare", "reducesumsquare", 0.5, 2.0},
    {"ReduceL1", "reducel1", -2.0, 2.0},          {"ReduceL2", "reducel2", -2.0, 2.0},
    {"ReduceLogSum", "reducelogsum", 0.5, 2.0},   {"ReduceLogSumExp", "reducelogsumexp", -3.0, 3.0},
};

// fp32 accumulation over 20000 elements rounds 20000 times: about 5e-6 relative (one sigma)
// against the reference's double accumulation, so fp32 gets 5e-5 here.
Tolerance reduce_tolerance(DataType t) {
  if (t == DataType::kFloat32) return {5e-5, 1e-5};
  return tolerance_for(t);
}

TEST_F(CudaReduceTest, AxesAsInput) {
  for (const OpRange& op : kOps) {
    for (DataType t : kFloatTypes) {
      const Tolerance tol = reduce_tolerance(t);
      for (const Axes& a : kAxes) {
        // ReduceMean over the mixed-sign data is near zero: compare it absolutely.
        Tolerance use = tol;
        if (std::string(op.op) == "ReduceMean") use.abs = t == DataType::kFloat32 ? 1e-5 : 1e-2;
        for (int keep : {1, 0}) {
          std::vector<Operand> ins = {input(t, a.x)};
          if (!a.axes.empty()) ins.push_back(initializer(i64s(a.axes)));
          check(reduce_family(), 18, ins, std::string(op.op) + " {keepdims=" + std::to_string(keep) + "}",
                std::string("cuda.reduce.") + op.tactic, 1, op.lo, op.hi, &use);
        }
      }
    }
  }
}

TEST_F(CudaReduceTest, AxesAsAttributeBeforeOpset18) {
  for (DataType t : kFloatTypes) {
    const Tolerance tol = reduce_tolerance(t);
    check(reduce_family(), 13, {input(t, {3, 37, 11})}, "ReduceMax {axes=[-2], keepdims=0}", "cuda.reduce.reducemax",
          1, -3, 3, &tol);
    check(reduce_family(), 17, {input(t, {4, 9, 130})}, "ReduceMean {" + axes_attr({-1}) + "}",
          "cuda.reduce.reducemean", 1, 0.5, 2, &tol);
    check(reduce_family(), 11, {input(t, {2, 5, 6})}, "ReduceSum {axes=[0, 2]}", "cuda.reduce.reducesum", 1, 0.5, 2,
          &tol);
    check(reduce_family(), 17, {input(t, {5, 7})}, "ReduceL2", "cuda.reduce.reducel2", 1, -2, 2, &tol);
  }
}

// Strided reductions (reduced axes not innermost): global pooling of NHWC activations, as the
// layout pass makes it, and a middle axis with more outputs than one block takes.
TEST_F(CudaReduceTest, StridedChannelsLastPooling) {
  for (DataType t : kFloatTypes) {
    const Tolerance tol = reduce_tolerance(t);
    Tolerance mean = tol;
    mean.abs = t == DataType::kFloat32 ? 1e-5 : 1e-2;
    check(reduce_family(), 18, {input(t, {1, 7, 7, 2048}), initializer(i64s({1, 2}))}, "ReduceMean {keepdims=1}",
          "cuda.reduce.reducemean", 1, -1, 1, &mean);
    check(reduce_family(), 18, {input(t, {3, 5, 9, 37}), initializer(i64s({1, 2}))}, "ReduceMax {keepdims=0}",
          "cuda.reduce.reducemax", 1, -3, 3, &tol);
    check(reduce_family(), 18, {input(t, {2, 61, 45}), initializer(i64s({1}))}, "ReduceSum {keepdims=1}",
          "cuda.reduce.reducesum", 1, 0.5, 2, &tol);
    check(reduce_family(), 18, {input(t, {4, 300, 3}), initializer(i64s({1}))}, "ReduceL2 {keepdims=0}",
          "cuda.reduce.reducel2", 1, -2, 2, &tol);
  }
}

// Squeeze-excite pooling at batch 1 and 2 (EfficientNet-B0's, channels-last): few outputs of
// thousands of elements each, which the launcher splits over more blocks (partials in the
// workspace, then combined in order); Max/Min/L2 check the un-finalized partials' combine.
TEST_F(CudaReduceTest, SplitStridedPooling) {
  for (DataType t : kFloatTypes) {
    const Tolerance tol = reduce_tolerance(t);
    Tolerance mean = tol;
    mean.abs = t == DataType::kFloat32 ? 1e-5 : 1e-2;
    check(reduce_family(), 18, {input(t, {1, 112, 112, 32}), initializer(i64s({1, 2}))}, "ReduceMean {keepdims=1}",
          "cuda.reduce.reducemean", 1, -1, 1, &mean);
    check(reduce_family(), 18, {input(t, {2, 56, 56, 144}), initializer(i64s({1, 2}))}, "ReduceMax {keepdims=1}",
          "cuda.reduce.reducemax", 1, -3, 3, &tol);
    check(reduce_family(), 18, {input(t, {1, 28, 28, 40}), initializer(i64s({1, 2}))}, "ReduceMin {keepdims=0}",
          "cuda.reduce.reducemin", 1, -3, 3, &tol);
    check(reduce_family(), 18, {input(t, {1, 3000, 5}), initializer(i64s({1}))}, "ReduceL2 {keepdims=0}",
          "cuda.reduce.reducel2", 1, -2, 2, &tol);
  }
}

// Strided reductions in 16-byte packs (reduce_strided_packed_kernel, tactic cuda.reduce.<op>.packed):
// squeeze-excite pooling of NHWC with C a whole number of packs (8 fp16/bf16, 4 fp32 channels) at
// batch 8 (packed tiles of 256 fp16 outputs across images, split over chunks) and batch 1; C = 8
// (one pack: a tile mostly past the end); C = 20 (packs in fp32 only: fp16/bf16 are not offered the
// packed variant); a middle-axis reduction [2, 300, 64] -> [2, 64]. Both variants, against the
// reference.
TEST_F(CudaReduceTest, PackedStridedPooling) {
  struct Case {
    Shape64 shape;
    std::vector<int64_t> axes;
    std::string call, tactic;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {{8, 28, 28, 144}, {1, 2}, "ReduceMean {keepdims=1}", "cuda.reduce.reducemean", -1, 1},
      {{1, 56, 56, 96}, {1, 2}, "ReduceMean {keepdims=1}", "cuda.reduce.reducemean", -1, 1},
      {{3, 9, 9, 8}, {1, 2}, "ReduceMax {keepdims=0}", "cuda.reduce.reducemax", -3, 3},
      {{2, 17, 13, 20}, {1, 2}, "ReduceSum {keepdims=1}", "cuda.reduce.reducesum", 0.5, 2},
      {{2, 300, 64}, {1}, "ReduceL2 {keepdims=0}", "cuda.reduce.reducel2", -2, 2},
  };
  for (DataType t : kFloatTypes) {
    const Tolerance tol = reduce_tolerance(t);
    Tolerance mean = tol;
    mean.abs = t == DataType::kFloat32 ? 1e-5 : 1e-2;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.call + " " + shape_to_string(c.shape) + " " + data_type_name(t));
      const std::vector<Operand> ins = {input(t, c.shape), initializer(i64s(c.axes))};
      const Tolerance* use = c.tactic == "cuda.reduce.reducemean" ? &mean : &tol;
      const auto names = candidate_names(reduce_family(), 18, ins, c.call);
      const bool offered = std::find(names.begin(), names.end(), c.tactic + ".packed") != names.end();
      const int64_t pack = 16 / (data_type_bits(t) / 8);
      EXPECT_EQ(offered, c.shape.back() % pack == 0) << "packed variant offered where it can (never) pack";
      check(reduce_family(), 18, ins, c.call, c.tactic, 1, c.lo, c.hi, use);
      if (offered) check(reduce_family(), 18, ins, c.call, c.tactic + ".packed", 1, c.lo, c.hi, use);
    }
  }
}

// Which views split, host-side: few outputs of long strided ranges do; many outputs, short
// ranges and contiguous (row) reductions do not; the partials always fit the workspace.
TEST(CudaReduceSplit, ChunksFollowTheShape) {
  using backend::cuda::kReduceWorkspaceBytes;
  using backend::cuda::ReduceDesc;
  using backend::cuda::reduce_split_chunks;
  auto strided = [](int64_t outputs, int64_t count) {
    ReduceDesc d;
    d.kept_rank = 1;
    d.kept_dims[0] = outputs;
    d.kept_strides[0] = 1;
    d.red_rank = 1;
    d.red_dims[0] = count;
    d.red_strides[0] = outputs;
    d.outputs = outputs;
    d.count = count;
    return d;
  };
  EXPECT_GT(reduce_split_chunks(strided(32, 112 * 112)), 1);
  EXPECT_GT(reduce_split_chunks(strided(1152, 7 * 7 * 16)), 1);
  EXPECT_EQ(reduce_split_chunks(strided(64 * 1152, 56 * 56)), 1);  // batch 64: blocks enough
  EXPECT_EQ(reduce_split_chunks(strided(2048, 49)), 1);            // short ranges
  ReduceDesc rows = strided(32, 12544);
  rows.red_strides[0] = 1;
  rows.kept_strides[0] = 12544;
  EXPECT_EQ(reduce_split_chunks(rows), 1);
  // Packed tiles hold 32 * 8 fp16 outputs: EfficientNet's batch-64 SE pooling (64 x 144 outputs of
  // 56 x 56) splits once packed, not unpacked.
  EXPECT_EQ(backend::cuda::reduce_pack_width(strided(64 * 144, 56 * 56), 2), 8);
  EXPECT_EQ(backend::cuda::reduce_pack_width(strided(64 * 144, 56 * 56), 4), 4);
  EXPECT_EQ(backend::cuda::reduce_pack_width(strided(20, 100), 2), 1);
  EXPECT_EQ(reduce_split_chunks(strided(64 * 144, 56 * 56)), 4);
  EXPECT_GT(reduce_split_chunks(strided(64 * 144, 56 * 56), 2), 4);
  for (int element_bytes : {0, 2, 4})
    for (int64_t outputs : {1, 7, 31, 32, 33, 100, 1000, 8000, 8447, 8448, 64 * 1152})
      for (int64_t count : {256, 1000, 12544, 1 << 20}) {
        const ReduceDesc d = strided(outputs, count);
        EXPECT_LE(static_cast<uint64_t>(reduce_split_chunks(d, element_bytes)) * static_cast<uint64_t>(outputs) *
                      sizeof(float),
                  kReduceWorkspaceBytes)
            << outputs << " outputs of " << count << ", " << element_bytes << "-byte elements";
      }
}

TEST_F(CudaReduceTest, NoopWithEmptyAxes) {
  for (DataType t : kFloatTypes) {
    const Tolerance tol = reduce_tolerance(t);
    check(reduce_family(), 18, {input(t, {3, 5})}, "ReduceSumSquare {noop_with_empty_axes=1}",
          "cuda.reduce.reducesumsquare", 1, -2, 2, &tol);
    check(reduce_family(), 18, {input(t, {3, 5}), omitted()}, "ReduceMax {noop_with_empty_axes=1}",
          "cuda.reduce.reducemax", 1, -2, 2, &tol);
  }
}

TEST_F(CudaReduceTest, ArgMaxArgMin) {
  const std::vector<std::pair<Shape64, int64_t>> cases = {
      {{4, 30522}, -1}, {{3, 7, 5}, 1}, {{6, 33}, 1}, {{6, 33}, 0}, {{2, 3, 4, 5}, -2}, {{9}, 0}};
  for (DataType t : kFloatTypes) {
    for (const auto& [shape, axis] : cases) {
      for (const char* op : {"ArgMax", "ArgMin"}) {
        const std::string want = std::string("cuda.reduce.") + (op[3] == 'M' && op[4] == 'a' ? "argmax" : "argmin");
        for (int keep : {1, 0}) {
          for (int last : {0, 1}) {
            const std::string attrs = " {axis=" + std::to_string(axis) + ", keepdims=" + std::to_string(keep) +
                                      ", select_last_index=" + std::to_string(last) + "}";
            check(reduce_family(), 13, {input(t, shape)}, op + attrs, want);
            // Few distinct values: many ties, so the tie rule decides.
            Tensor x = random_tensor(t, shape, rng_, -3, 3);
            for (int64_t i = 0; i < x.numel(); ++i)
              x.set_f64(i, static_cast<double>(static_cast<int64_t>(x.get_f64(i))));
            check(reduce_family(), 13, {input(x)}, op + attrs, want);
          }
        }
      }
    }
  }
}

// CumSum (RoBERTa's position ids: the int64 mask summed along the sequence): every type, axis
// position, exclusive and reverse; the axis must be an initializer.
TEST_F(CudaReduceTest, CumSum) {
  struct Case {
    Shape64 x;
    int64_t axis;
  };
  const Case cases[] = {{{1, 128}, 1}, {{3, 5, 7}, 1}, {{4, 6}, 0}, {{2, 3, 40}, -1}, {{9}, 0}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32, DataType::kInt64}) {
    const bool ints = t == DataType::kInt32 || t == DataType::kInt64;
    const Tolerance tol = ints ? Tolerance{0, 0} : reduce_tolerance(t);
    for (const Case& c : cases)
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1})
          check(reduce_family(), 14, {input(t, c.x), initializer(i64s({c.axis}, true))},
                "CumSum {exclusive=" + std::to_string(exclusive) + ", reverse=" + std::to_string(reverse) + "}",
                "cuda.reduce.cumsum", 1, ints ? -50.0 : 0.5, ints ? 50.0 : 2.0, &tol);
  }
}

TEST_F(CudaReduceTest, RefusesWhatItDoesNotHandle) {
  // Integer input, axes from a computed tensor, rank above 6.
  refuses(reduce_family(), 18, {input(DataType::kInt64, {3, 4}), initializer(i64s({1}))}, "ReduceSum");
  refuses(reduce_family(), 18, {input(DataType::kFloat32, {3, 4}), input(DataType::kInt64, {1})}, "ReduceSum");
  refuses(reduce_family(), 18, {input(DataType::kFloat32, {1, 2, 1, 2, 1, 2, 3})}, "ReduceMax");
  refuses(reduce_family(), 13, {input(DataType::kInt32, {3, 4})}, "ArgMax");
}

}  // namespace
}  // namespace ingot::gpu_test
