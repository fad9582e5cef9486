// Copyright ingot authors. Apache-2.0.
//
// The cuda data-movement family against the CPU reference (cpu::run_node on the same host
// inputs): the shape-only copies, Shape/Size, Concat, Split, Slice (negative steps, clamped
// ends), Gather and GatherElements (negative indices, int32 and int64), ScatterND, Expand, Tile,
// Pad (constant/reflect/edge/wrap, negative pads, axes), with Slice's and Pad's parameters as
// initializers or computed tensors, ConstantOfShape and Range, over
// floats, int64, bool and uint8 with odd sizes. The shared-memory paths have their own cases:
// last-axis Gathers (the channel shuffle), Concat/Split of a few narrow parts, and the launchers
// on misaligned buffers. Also which nodes the family refuses.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::data_movement_family;

// Every width the kernels move: 4, 2, 8 and 1 bytes (bf16 and bool ride the same paths).
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kBool,
                               DataType::kUInt8, DataType::kBFloat16};

class CudaDataMovementTest : public OpCaseTest {
 protected:
  void check_dm(int64_t opset, const std::vector<Operand>& ins, const std::string& call, const std::string& kind,
                int outputs = 1) {
    check(data_movement_family(), opset, ins, call, "cuda.data_movement." + kind, outputs, -100, 100);
  }

  /// Indices in [-n, n) (both signs) of the given type and shape.
  Tensor indices(DataType t, const Shape64& shape, int64_t n) {
    Tensor r = Tensor::zeros(t, shape).value();
    std::uniform_int_distribution<int64_t> d(-n, n - 1);
    for (int64_t i = 0; i < r.numel(); ++i) r.set_i64(i, d(rng_));
    return r;
  }

  /// PyTorch's channel shuffle of c channels in `groups` groups as Gather indices: output channel
  /// k reads input channel (k % groups) * (c / groups) + k / groups.
  static Tensor shuffle_indices(DataType t, int64_t c, int64_t groups) {
    Tensor r = Tensor::zeros(t, {c}).value();
    for (int64_t k = 0; k < c; ++k) r.set_i64(k, (k % groups) * (c / groups) + k / groups);
    return r;
  }

  /// A random permutation of [0, n), about half of it written as the negative equivalent.
  Tensor permutation(DataType t, int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    std::shuffle(v.begin(), v.end(), rng_);
    Tensor r = Tensor::zeros(t, {n}).value();
    for (int64_t k = 0; k < n; ++k) r.set_i64(k, v[static_cast<size_t>(k)] - (rng_() % 2 ? n : 0));
    return r;
  }
};

TEST_F(CudaDataMovementTest, ShapeOnlyCopies) {
  for (DataType t : kTypes) {
    check_dm(17, {input(t, {2, 3, 5}), initializer(i64s({5, -1}))}, "Reshape", "copy");
    check_dm(17, {input(t, {2, 3, 5, 7})}, "Flatten {axis=2}", "copy");
    check_dm(17, {input(t, {3, 1, 5, 1}), initializer(i64s({1, -1}))}, "Squeeze", "copy");
    check_dm(17, {input(t, {3, 5}), initializer(i64s({0, -1}))}, "Unsqueeze", "copy");
    check_dm(11, {input(t, {3, 1, 5})}, "Squeeze {axes=[1]}", "copy");
  }
}

TEST_F(CudaDataMovementTest, ShapeAndSize) {
  check_dm(17, {input(DataType::kFloat16, {2, 3, 5, 7})}, "Shape", "shape");
  check_dm(17, {input(DataType::kInt64, {})}, "Shape", "shape");
  check_dm(17, {input(DataType::kFloat32, {2, 3, 5, 7})}, "Shape {start=1, end=-1}", "shape");
  check_dm(17, {input(DataType::kFloat32, {2, 3, 5, 7})}, "Shape {start=-2}", "shape");
  check_dm(17, {input(DataType::kBool, {4, 0, 3})}, "Size", "size");
  check_dm(17, {input(DataType::kFloat32, {4, 9, 3})}, "Size", "size");
}

TEST_F(CudaDataMovementTest, ConcatAndSplit) {
  for (DataType t : kTypes) {
    check_dm(13, {input(t, {2, 3, 5}), input(t, {2, 1, 5}), input(t, {2, 4, 5})}, "Concat {axis=1}", "concat");
    check_dm(13, {input(t, {3, 7}), input(t, {3, 1})}, "Concat {axis=-1}", "concat");
    check_dm(13, {input(t, {1, 3}), input(t, {4, 3})}, "Concat {axis=0}", "concat");
    check_dm(13, {input(t, {2, 0, 3}), input(t, {2, 5, 3})}, "Concat {axis=1}", "concat");
    check_dm(18, {input(t, {2, 11, 3})}, "Split {axis=1, num_outputs=3}", "split", 3);
    check_dm(13, {input(t, {4, 9}), initializer(i64s({2, 0, 7}))}, "Split {axis=-1}", "split", 3);
    check_dm(13, {input(t, {6, 5})}, "Split", "split", 2);
  }
}

// The one-launch join (launch_join_rows): channel Concats of channels-last tensors as DenseNet's
// dense blocks make them (64 + 32 k channels: 16-byte words), more inputs than one launch takes
// (70: two launches of 64 and 6), parts whose widths allow only 2-byte words (a 3-channel part),
// zero-width parts between others, and ShuffleNet's channel Split (116 -> 58 + 58: 4-byte words)
// and a Split into 70 outputs.
TEST_F(CudaDataMovementTest, ManyPartConcatAndSplit) {
  for (DataType t : {DataType::kFloat16, DataType::kFloat32}) {
    std::vector<Operand> dense = {input(t, {2, 5, 3, 64})};
    for (int k = 0; k < 6; ++k) dense.push_back(input(t, {2, 5, 3, 32}));
    check_dm(13, dense, "Concat {axis=3}", "concat");
    std::vector<Operand> many;
    for (int k = 0; k < 70; ++k) many.push_back(input(t, {3, 2, k % 3 == 0 ? 8 : 16}));
    check_dm(13, many, "Concat {axis=-1}", "concat");
    check_dm(13, {input(t, {2, 4, 4, 16}), input(t, {2, 4, 4, 3}), input(t, {2, 4, 4, 0}), input(t, {2, 4, 4, 24})},
             "Concat {axis=3}", "concat");
    check_dm(18, {input(t, {2, 7, 7, 116})}, "Split {axis=3, num_outputs=2}", "split", 2);
    check_dm(18, {input(t, {3, 70 * 8})}, "Split {axis=1, num_outputs=70}", "split", 70);
  }
}

// Concat and Split of up to four parts whose rows are not whole 16-byte words take the staged
// join (launch_join_staged): ShuffleNet's halves (58 + 58 fp16 channels: 4-byte units; 116 + 116:
// 8-byte units), odd widths (29, 3, 5, 7 channels: 1- and 2-byte units), three and four parts, a
// zero-width part among them, a Concat along a middle axis, and enough rows that blocks walk
// several chunks. Five parts, or rows in whole 16-byte words, keep the general join.
TEST_F(CudaDataMovementTest, NarrowRowConcatAndSplit) {
  for (DataType t : kTypes) {
    SCOPED_TRACE(data_type_name(t));
    for (int64_t c : {58, 116, 29, 3}) {
      check_dm(13, {input(t, {2, 5, 7, c}), input(t, {2, 5, 7, c})}, "Concat {axis=3}", "concat");
      check_dm(18, {input(t, {2, 5, 7, 2 * c})}, "Split {axis=-1, num_outputs=2}", "split", 2);
    }
    check_dm(13, {input(t, {3, 5, 7, 29}), input(t, {3, 5, 7, 0}), input(t, {3, 5, 7, 31})}, "Concat {axis=-1}",
             "concat");
    check_dm(13, {input(t, {4, 9, 3}), input(t, {4, 9, 5}), input(t, {4, 9, 7})}, "Concat {axis=2}", "concat");
    check_dm(13, {input(t, {33, 1}), input(t, {33, 2}), input(t, {33, 3}), input(t, {33, 4})}, "Concat {axis=1}",
             "concat");
    check_dm(13, {input(t, {4, 3, 5}), input(t, {4, 2, 5})}, "Concat {axis=1}", "concat");
    check_dm(13, {input(t, {1, 3}), input(t, {1, 2})}, "Concat {axis=1}", "concat");
    check_dm(13, {input(t, {3, 5, 7, 15}), initializer(i64s({4, 5, 6}))}, "Split {axis=3}", "split", 3);
    check_dm(13, {input(t, {31, 10}), initializer(i64s({1, 2, 3, 4}))}, "Split {axis=1}", "split", 4);
    check_dm(13, {input(t, {31, 15}), initializer(i64s({1, 2, 3, 4, 5}))}, "Split {axis=1}", "split", 5);
    check_dm(13, {input(t, {4, 9, 5}), initializer(i64s({2, 0, 7}))}, "Split {axis=1}", "split", 3);
    check_dm(13,
             {input(t, {5, 1, 7}), input(t, {5, 1, 7}), input(t, {5, 1, 7}), input(t, {5, 1, 7}), input(t, {5, 1, 7})},
             "Concat {axis=1}", "concat");
  }
  for (DataType t : {DataType::kFloat16, DataType::kUInt8}) {
    check_dm(13, {input(t, {8, 130, 130, 58}), input(t, {8, 130, 130, 58})}, "Concat {axis=3}", "concat");
    check_dm(18, {input(t, {8, 130, 130, 116})}, "Split {axis=3, num_outputs=2}", "split", 2);
  }
}

// The launchers on buffers that are not 16-byte aligned (a tensor at any element offset): the
// column gather stages rows element by element and keeps narrow rows narrow, the join falls back
// to its general kernel. 2-byte elements against the same loops on the host, bit for bit.
TEST_F(CudaDataMovementTest, LaunchersOnMisalignedBuffers) {
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  std::uniform_int_distribution<int> bits(1, 0xFFFE);  // never zero, never the poison
  auto random_bits = [&](int64_t n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (uint16_t& e : v) e = static_cast<uint16_t>(bits(rng_));
    return v;
  };
  // A device buffer holding `v` from element `shift` on; `v` empty: room for n elements, poisoned.
  auto device = [](const std::vector<uint16_t>& v, int64_t n, int64_t shift) {
    DeviceBuffer b(static_cast<size_t>(n + shift) * 2);
    EXPECT_TRUE(b.valid());
    EXPECT_EQ(cudaMemset(b.get(), 0xFF, b.bytes()), cudaSuccess);
    if (!v.empty())
      EXPECT_EQ(cudaMemcpy(static_cast<uint16_t*>(b.get()) + shift, v.data(), v.size() * 2, cudaMemcpyHostToDevice),
                cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return b;
  };
  auto host = [](const DeviceBuffer& b, int64_t n, int64_t shift) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), static_cast<const uint16_t*>(b.get()) + shift, v.size() * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  };
  struct GatherCase {
    int64_t outer, axis, inner, count, x_shift, y_shift;
  };
  for (const GatherCase& c :
       {GatherCase{70, 116, 1, 116, 0, 0}, GatherCase{70, 116, 1, 116, 1, 0}, GatherCase{70, 116, 1, 116, 0, 1},
        GatherCase{70, 116, 1, 116, 3, 5}, GatherCase{70, 9, 4, 5, 0, 0}, GatherCase{70, 9, 4, 5, 1, 1},
        GatherCase{70, 9, 4, 5, 2, 0}, GatherCase{33, 900, 1, 7, 1, 3}}) {
    SCOPED_TRACE("gather outer " + std::to_string(c.outer) + " axis " + std::to_string(c.axis) + " inner " +
                 std::to_string(c.inner) + " count " + std::to_string(c.count) + " shifts " +
                 std::to_string(c.x_shift) + "/" + std::to_string(c.y_shift));
    const std::vector<uint16_t> x = random_bits(c.outer * c.axis * c.inner);
    std::vector<int32_t> idx(static_cast<size_t>(c.count));
    std::uniform_int_distribution<int32_t> pick(static_cast<int32_t>(-c.axis), static_cast<int32_t>(c.axis - 1));
    for (int32_t& i : idx) i = pick(rng_);
    std::vector<uint16_t> want(static_cast<size_t>(c.outer * c.count * c.inner));
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t k = 0; k < c.count; ++k) {
        const int64_t j =
            idx[static_cast<size_t>(k)] < 0 ? idx[static_cast<size_t>(k)] + c.axis : idx[static_cast<size_t>(k)];
        for (int64_t i = 0; i < c.inner; ++i)
          want[static_cast<size_t>((o * c.count + k) * c.inner + i)] =
              x[static_cast<size_t>((o * c.axis + j) * c.inner + i)];
      }
    DeviceBuffer dx = device(x, static_cast<int64_t>(x.size()), c.x_shift);
    DeviceBuffer dy = device({}, static_cast<int64_t>(want.size()), c.y_shift);
    DeviceBuffer di(idx.size() * 4);
    ASSERT_EQ(cudaMemcpy(di.get(), idx.data(), idx.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(backend::cuda::launch_gather(2, static_cast<uint16_t*>(dx.get()) + c.x_shift, di.get(), false,
                                           static_cast<uint16_t*>(dy.get()) + c.y_shift, c.outer, c.axis, c.inner,
                                           c.count, nullptr),
              cudaSuccess);
    EXPECT_EQ(host(dy, static_cast<int64_t>(want.size()), c.y_shift), want);
  }
  // Concat and Split of 58 + 58 2-byte columns on 70 rows, one buffer at a time shifted.
  const int64_t rows = 70, half = 58;
  for (int64_t moved = 0; moved < 4; ++moved) {
    for (bool concat : {true, false}) {
      SCOPED_TRACE(std::string(concat ? "concat" : "split") + ", shifted buffer " + std::to_string(moved));
      const int64_t shift[3] = {moved == 1 ? 1 : 0, moved == 2 ? 3 : 0, moved == 3 ? 2 : 0};  // part 0, 1, joined
      std::vector<uint16_t> part[2] = {random_bits(rows * half), random_bits(rows * half)};
      std::vector<uint16_t> joined = random_bits(rows * 2 * half);
      if (concat) {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < 2 * half; ++c)
            joined[static_cast<size_t>(r * 2 * half + c)] = part[c / half][static_cast<size_t>(r * half + c % half)];
      } else {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < 2 * half; ++c)
            part[c / half][static_cast<size_t>(r * half + c % half)] = joined[static_cast<size_t>(r * 2 * half + c)];
      }
      DeviceBuffer dp[2] = {device(concat ? part[0] : std::vector<uint16_t>{}, rows * half, shift[0]),
                            device(concat ? part[1] : std::vector<uint16_t>{}, rows * half, shift[1])};
      DeviceBuffer dj = device(concat ? std::vector<uint16_t>{} : joined, rows * 2 * half, shift[2]);
      backend::cuda::RowSegment segs[2] = {{static_cast<uint16_t*>(dp[0].get()) + shift[0], 0, half},
                                           {static_cast<uint16_t*>(dp[1].get()) + shift[1], half, half}};
      ASSERT_EQ(backend::cuda::launch_join_rows(2, concat, static_cast<uint16_t*>(dj.get()) + shift[2], 2 * half, rows,
                                                segs, 2, nullptr),
                cudaSuccess);
      if (concat) {
        EXPECT_EQ(host(dj, rows * 2 * half, shift[2]), joined);
      } else {
        EXPECT_EQ(host(dp[0], rows * half, shift[0]), part[0]);
        EXPECT_EQ(host(dp[1], rows * half, shift[1]), part[1]);
      }
    }
  }
}

// The padded GEMM's odd-N copy: rows of 2-byte elements between pitches of any alignment
// (GPT-2's 50257 logits from a 50264 pitch), against a host copy; bytes around y stay poisoned.
TEST_F(CudaDataMovementTest, PitchedRowCopyOfTwoByteElements) {
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  std::uniform_int_distribution<int> bits(1, 0xFFFE);
  struct Case {
    int64_t rows, elems, x_pitch, y_pitch, x_shift, y_shift;
  };
  for (const Case& c : {Case{37, 50257, 50264, 50257, 0, 0}, Case{9, 17, 24, 17, 1, 3}, Case{70, 5, 8, 5, 0, 1},
                        Case{3, 1, 1, 1, 0, 0}, Case{5, 4099, 4099, 4101, 7, 2}, Case{2, 8, 8, 8, 0, 0}}) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " elems " + std::to_string(c.elems) + " pitches " +
                 std::to_string(c.x_pitch) + "/" + std::to_string(c.y_pitch) + " shifts " + std::to_string(c.x_shift) +
                 "/" + std::to_string(c.y_shift));
    const int64_t nx = c.rows * c.x_pitch + c.x_shift, ny = c.rows * c.y_pitch + c.y_shift + 8;
    std::vector<uint16_t> x(static_cast<size_t>(nx)), want(static_cast<size_t>(ny), 0xFFFF);
    for (uint16_t& e : x) e = static_cast<uint16_t>(bits(rng_));
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t i = 0; i < c.elems; ++i)
        want[static_cast<size_t>(c.y_shift + r * c.y_pitch + i)] = x[static_cast<size_t>(c.x_shift + r * c.x_pitch + i)];
    DeviceBuffer dx(x.size() * 2), dy(want.size() * 2);
    ASSERT_EQ(cudaMemcpy(dx.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, dy.bytes()), cudaSuccess);
    ASSERT_EQ(backend::cuda::launch_copy_rows_u16(static_cast<uint16_t*>(dx.get()) + c.x_shift, c.x_pitch,
                                                  static_cast<uint16_t*>(dy.get()) + c.y_shift, c.y_pitch, c.elems,
                                                  c.rows, nullptr),
              cudaSuccess);
    std::vector<uint16_t> got(want.size());
    ASSERT_EQ(cudaMemcpy(got.data(), dy.get(), got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, want);
  }
}

TEST_F(CudaDataMovementTest, Slice) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (DataType t : kTypes) {
    check_dm(13, {input(t, {7, 9}), initializer(i64s({1, -8})), initializer(i64s({kMax, 7}))}, "Slice", "slice");
    check_dm(13,
             {input(t, {5, 8, 6}), initializer(i64s({-1, 1})), initializer(i64s({-kMax, 7})),
              initializer(i64s({-1, 0})), initializer(i64s({-2, 3}))},
             "Slice", "slice");
    check_dm(13,
             {input(t, {4, 10, 3}), initializer(i64s({8})), initializer(i64s({0})), initializer(i64s({1})),
              initializer(i64s({-3}))},
             "Slice", "slice");
    check_dm(13, {input(t, {4, 5}), initializer(i64s({3})), initializer(i64s({1})), initializer(i64s({0}))}, "Slice",
             "slice");  // empty result
    check_dm(9, {input(t, {6, 7})}, "Slice {starts=[1, -3], ends=[5, 100], axes=[0, 1]}", "slice");
  }
}

// starts/ends/axes/steps computed at run time: a kernel reads them on the device.
TEST_F(CudaDataMovementTest, SliceWithComputedParameters) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto as = [](DataType t, const std::vector<int64_t>& v) {
    Tensor r = Tensor::zeros(t, {static_cast<int64_t>(v.size())}).value();
    for (size_t i = 0; i < v.size(); ++i) r.set_i64(static_cast<int64_t>(i), v[i]);
    return r;
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kBool}) {
    for (DataType it : {DataType::kInt64, DataType::kInt32}) {
      const int64_t big = it == DataType::kInt64 ? kMax : 1000;
      check_dm(13,
               {input(t, {5, 8, 6}), input(as(it, {-1, 1})), input(as(it, {-big, 7})), input(as(it, {-1, 0})),
                input(as(it, {-2, 3}))},
               "Slice", "slice");
      check_dm(13, {input(t, {7, 9}), input(as(it, {1, -8})), input(as(it, {big, 7}))}, "Slice", "slice");
      check_dm(13, {input(t, {4, 10, 3}), input(as(it, {8})), input(as(it, {0})), omitted(), input(as(it, {-3}))},
               "Slice", "slice");
    }
  }
}

TEST_F(CudaDataMovementTest, PadWithComputedPads) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kUInt8}) {
    for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
      const std::string call = std::string("Pad {mode=\"") + mode + "\"}";
      check_dm(18, {input(t, {3, 4, 5}), input(i64s({0, 1, 2, 1, 0, 2}))}, call, "pad");
      check_dm(18, {input(t, {5, 6}), input(i64s({-1, 2, 1, -2}))}, call, "pad");
      check_dm(18, {input(t, {2, 3, 7}), input(i64s({3, 1})), omitted(), input(i64s({-1}))}, call, "pad");
    }
    check_dm(18, {input(t, {3, 4}), input(i64s({1, 2, 0, 1})), input(t, {})}, "Pad", "pad");
  }
}

TEST_F(CudaDataMovementTest, Gather) {
  for (DataType t : kTypes) {
    for (DataType it : {DataType::kInt64, DataType::kInt32}) {
      check_dm(13, {input(t, {50, 16}), input(indices(it, {2, 7}, 50))}, "Gather", "gather");  // embedding
      check_dm(13, {input(t, {3, 9, 5}), input(indices(it, {4}, 9))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {3, 4, 5}), input(indices(it, {2, 3}, 5))}, "Gather {axis=-1}", "gather");
      check_dm(13, {input(t, {3, 9, 5}), input(indices(it, {}, 9))}, "Gather {axis=1}", "gather");  // scalar index
      // Rows of 64 bytes or more take the row kernel, in words of 16, 8, 4, 2 or 1 bytes as the
      // row's byte count allows (which width depends on the type: each shape covers several).
      check_dm(13, {input(t, {40, 96}), input(indices(it, {3, 11}, 40))}, "Gather", "gather");
      check_dm(13, {input(t, {20, 100}), input(indices(it, {9}, 20))}, "Gather", "gather");
      check_dm(13, {input(t, {30, 37}), input(indices(it, {2, 5}, 30))}, "Gather", "gather");
      check_dm(13, {input(t, {3, 9, 65}), input(indices(it, {4}, 9))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {300, 768}), input(indices(it, {4, 128}, 300))}, "Gather", "gather");  // BERT's rows
    }
  }
}

// Gathers of rows narrower than 64 bytes take the column-table kernel (launch_gather_columns)
// from 16 rows on: staged through shared memory where the gather reads most of each row, straight
// from global memory where it reads few columns of wide rows. The channel shuffle of NHWC
// tensors (a last-axis Gather, inner 1) with ShuffleNet's widths and odd ones; random indices of
// both signs with repeats; whole-axis permutations; fewer and more indices than the axis holds;
// 1-row and 16-row inputs (the element kernel, then the column kernel's smallest).
TEST_F(CudaDataMovementTest, LastAxisGather) {
  const DataType types[] = {DataType::kFloat16, DataType::kFloat32, DataType::kBFloat16, DataType::kInt64,
                            DataType::kUInt8};
  for (DataType t : types) {
    for (DataType it : {DataType::kInt32, DataType::kInt64}) {
      SCOPED_TRACE(std::string(data_type_name(t)) + " indices " + data_type_name(it));
      for (int64_t c : {116, 58, 29, 3}) {
        const Shape64 x = {2, 5, 7, c};
        if (c % 2 == 0)
          check_dm(13, {input(t, x), initializer(shuffle_indices(it, c, 2))}, "Gather {axis=3}", "gather");
        check_dm(13, {input(t, x), input(shuffle_indices(it, c, c % 2 == 0 ? c / 2 : 1))}, "Gather {axis=-1}",
                 "gather");
        check_dm(13, {input(t, x), input(permutation(it, c))}, "Gather {axis=-1}", "gather");
        check_dm(13, {input(t, x), input(indices(it, {c}, c))}, "Gather {axis=-1}", "gather");
        check_dm(13, {input(t, x), input(indices(it, {c / 2 + 1}, c))}, "Gather {axis=-1}", "gather");
        check_dm(13, {input(t, x), input(indices(it, {2, c + 3}, c))}, "Gather {axis=-1}", "gather");
      }
      check_dm(13, {input(t, {4, 5, 232}), input(shuffle_indices(it, 232, 4))}, "Gather {axis=2}", "gather");
      check_dm(13, {input(t, {16, 13}), input(indices(it, {13}, 13))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {17, 1}), input(indices(it, {5}, 1))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {1, 9}), input(indices(it, {9}, 9))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {2, 5, 7, 116}), input(indices(it, {}, 116))}, "Gather {axis=3}", "gather");  // scalar
      // Few columns of wide rows: gathered from global memory, not staged.
      check_dm(13, {input(t, {20, 3000}), input(indices(it, {7}, 3000))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {40, 700}), input(indices(it, {3, 5}, 700))}, "Gather {axis=-1}", "gather");
      // Narrow rows of several elements (inner > 1; 2 or 4 of them move as one wider element).
      check_dm(13, {input(t, {40, 9, 3}), input(indices(it, {4}, 9))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {6, 5, 11, 4}), input(indices(it, {2, 7}, 11))}, "Gather {axis=2}", "gather");
      check_dm(13, {input(t, {30, 6, 2}), input(permutation(it, 6))}, "Gather {axis=1}", "gather");
      check_dm(13, {input(t, {18, 300, 2}), input(indices(it, {9}, 300))}, "Gather {axis=1}", "gather");
    }
  }
  // As many columns as the table takes, and one more (the element kernel).
  check_dm(13, {input(DataType::kFloat16, {20, 4096}), input(permutation(DataType::kInt64, 4096))}, "Gather {axis=1}",
           "gather");
  check_dm(13, {input(DataType::kFloat16, {20, 4097}), input(permutation(DataType::kInt64, 4097))}, "Gather {axis=1}",
           "gather");
  // More chunks than blocks (each block walks several) and a partial last chunk: 70000 rows.
  check_dm(13, {input(DataType::kFloat32, {7, 100, 100, 116}), initializer(shuffle_indices(DataType::kInt64, 116, 2))},
           "Gather {axis=3}", "gather");
  check_dm(13, {input(DataType::kFloat16, {64, 7, 7, 464}), initializer(shuffle_indices(DataType::kInt64, 464, 2))},
           "Gather {axis=3}", "gather");
}

TEST_F(CudaDataMovementTest, GatherElements) {
  for (DataType t : kTypes) {
    for (DataType it : {DataType::kInt64, DataType::kInt32}) {
      check_dm(13, {input(t, {4, 5}), input(indices(it, {6, 5}, 4))}, "GatherElements {axis=0}", "gather_elements");
      check_dm(13, {input(t, {3, 7, 5}), input(indices(it, {3, 2, 4}, 7))}, "GatherElements {axis=1}",
               "gather_elements");
      check_dm(13, {input(t, {2, 3, 9}), input(indices(it, {2, 3, 11}, 9))}, "GatherElements {axis=-1}",
               "gather_elements");
    }
  }
}

TEST_F(CudaDataMovementTest, ScatterND) {
  auto unique_tuples = [&](const Shape64& dims, int64_t k, int64_t count) {
    int64_t space = 1;
    for (int64_t i = 0; i < k; ++i) space *= dims[static_cast<size_t>(i)];
    std::vector<int64_t> flat(static_cast<size_t>(space));
    std::iota(flat.begin(), flat.end(), 0);
    std::shuffle(flat.begin(), flat.end(), rng_);
    std::vector<int64_t> v;
    for (int64_t c = 0; c < count; ++c) {
      int64_t f = flat[static_cast<size_t>(c)];
      std::vector<int64_t> tuple(static_cast<size_t>(k));
      for (int64_t j = k; j-- > 0;) {
        const int64_t d = dims[static_cast<size_t>(j)];
        tuple[static_cast<size_t>(j)] = f % d - (c % 2 ? d : 0);  // every other tuple negative
        f /= d;
      }
      v.insert(v.end(), tuple.begin(), tuple.end());
    }
    return Tensor::from_vector(DataType::kInt64, {count, k}, v);
  };
  for (DataType t : kTypes) {
    const Shape64 dims = {4, 5, 6};
    check_dm(18, {input(t, dims), input(unique_tuples(dims, 1, 3)), input(t, {3, 5, 6})}, "ScatterND", "scatter_nd");
    check_dm(18, {input(t, dims), input(unique_tuples(dims, 2, 7)), input(t, {7, 6})}, "ScatterND", "scatter_nd");
    check_dm(18, {input(t, dims), input(unique_tuples(dims, 3, 11)), input(t, {11})}, "ScatterND", "scatter_nd");
  }
}

// GatherND (batch_dims 0): index tuples of 1..rank coordinates, negative ones, repeated tuples,
// batched index shapes; the dynamo exporter gathers a bool attention mask this way.
TEST_F(CudaDataMovementTest, GatherND) {
  auto tuples = [&](const Shape64& dims, Shape64 prefix, int64_t k) {
    std::vector<int64_t> v;
    int64_t count = 1;
    for (int64_t p : prefix) count *= p;
    for (int64_t c = 0; c < count; ++c)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t d = dims[static_cast<size_t>(j)];
        const int64_t i = std::uniform_int_distribution<int64_t>(0, d - 1)(rng_);
        v.push_back((c + j) % 3 == 0 ? i - d : i);  // some negative
      }
    prefix.push_back(k);
    return Tensor::from_vector(DataType::kInt64, prefix, v);
  };
  const Shape64 dims = {4, 5, 6};
  for (DataType t : kTypes) {
    check_dm(13, {input(t, dims), input(tuples(dims, {3}, 1))}, "GatherND", "gather_nd");
    check_dm(13, {input(t, dims), input(tuples(dims, {2, 4}, 2))}, "GatherND", "gather_nd");
    check_dm(13, {input(t, dims), input(tuples(dims, {7}, 3))}, "GatherND", "gather_nd");
    check_dm(13, {input(t, {9}), input(tuples({9}, {2, 3}, 1))}, "GatherND", "gather_nd");
  }
  const Shape64 mask = {2, 11};  // bool mask [B, S] gathered to [B, 1, S]
  check_dm(13, {input(DataType::kBool, mask), input(tuples(mask, {2, 1, 11}, 2))}, "GatherND", "gather_nd");
}

TEST_F(CudaDataMovementTest, ExpandAndTile) {
  for (DataType t : kTypes) {
    check_dm(13, {input(t, {3, 1}), initializer(i64s({2, 3, 4}))}, "Expand", "expand");
    check_dm(13, {input(t, {1}), initializer(i64s({5}))}, "Expand", "expand");
    check_dm(13, {input(t, {2, 1, 5}), initializer(i64s({3, 1, 1, 1}))}, "Expand", "expand");
    check_dm(13, {input(t, {3, 5}), initializer(i64s({2, 3}))}, "Tile", "tile");
    check_dm(13, {input(t, {2, 1, 3}), initializer(i64s({1, 4, 1}))}, "Tile", "tile");
  }
}

TEST_F(CudaDataMovementTest, Pad) {
  for (DataType t : kTypes) {
    for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
      const std::string call = std::string("Pad {mode=\"") + mode + "\"}";
      check_dm(18, {input(t, {3, 4, 5}), initializer(i64s({0, 1, 2, 1, 0, 2}))}, call, "pad");
      check_dm(18, {input(t, {5, 6}), initializer(i64s({-1, 2, 1, -2}))}, call, "pad");  // crop and pad
      check_dm(18, {input(t, {2, 3, 7}), initializer(i64s({3, 1})), omitted(), initializer(i64s({-1}))}, call, "pad");
    }
    check_dm(18, {input(t, {3, 4}), initializer(i64s({1, 2, 0, 1})), input(t, {})}, "Pad", "pad");  // constant_value
    check_dm(2, {input(t, {3, 4})}, "Pad {pads=[1, 0, 2, 1]}", "pad");
  }
}

TEST_F(CudaDataMovementTest, DepthToSpaceAndSpaceToDepth) {
  for (DataType t : kTypes) {
    for (const char* mode : {"DCR", "CRD"}) {
      const std::string attrs = std::string(" {mode=\"") + mode + "\", blocksize=";
      check_dm(13, {input(t, {2, 12, 3, 5})}, "DepthToSpace" + attrs + "2}", "depth_to_space");
      check_dm(13, {input(t, {1, 18, 2, 3})}, "DepthToSpace" + attrs + "3}", "depth_to_space");
      check_dm(13, {input(t, {2, 3, 6, 4})}, "SpaceToDepth" + attrs + "2}", "space_to_depth");
      check_dm(13, {input(t, {1, 2, 9, 6})}, "SpaceToDepth" + attrs + "3}", "space_to_depth");
    }
  }
}

TEST_F(CudaDataMovementTest, ConstantOfShapeAndRange) {
  check_dm(17, {initializer(i64s({2, 3, 5}))}, "ConstantOfShape", "constant_of_shape");
  for (DataType t : {DataType::kInt64, DataType::kFloat16, DataType::kBool, DataType::kFloat32}) {
    Tensor value = Tensor::zeros(t, {1}).value();
    value.set_f64(0, 7);
    check(data_movement_family(), 17, {initializer(i64s({4, 7}))}, "ConstantOfShape",
          "cuda.data_movement.constant_of_shape", 1, -1, 1, nullptr,
          [&](ir::Node& n) {
            n.mutable_attrs().set_tensor("value", value);
            n.output(0)->set_dtype(DataType::kUndefined);  // re-inferred from the value
          });
  }
  auto scalar = [](DataType t, double v) {
    Tensor s = Tensor::zeros(t, {}).value();
    s.set_f64(0, v);
    return s;
  };
  for (DataType t : {DataType::kFloat32, DataType::kInt64, DataType::kInt32}) {
    // Initializers so that the output length is known; the kernel still reads start and delta
    // from the device copies.
    check_dm(17, {initializer(scalar(t, 2)), initializer(scalar(t, 37)), initializer(scalar(t, 3))}, "Range", "range");
    check_dm(17, {initializer(scalar(t, 10)), initializer(scalar(t, -7)), initializer(scalar(t, -2))}, "Range",
             "range");
  }
}

// Shape and Size write host-known values by kernel argument, Slice/Pad read computed
// parameters on the device: all of it must record into a CUDA graph and replay right.
TEST_F(CudaDataMovementTest, CapturesIntoACudaGraph) {
  const auto f = data_movement_family();
  check_captured(f, 17, {input(DataType::kFloat16, {2, 3, 5, 7})}, "Shape");
  check_captured(f, 17, {input(DataType::kFloat32, {4, 9, 3})}, "Size");
  check_captured(f, 17, {input(DataType::kInt64, {2, 3, 5}), initializer(i64s({5, -1}))}, "Reshape", -100, 100);
  check_captured(f, 13, {input(DataType::kFloat32, {2, 3}), input(DataType::kFloat32, {2, 4})}, "Concat {axis=1}");
  check_captured(f, 13,
                 {input(DataType::kFloat32, {5, 8, 6}), input(i64s({-1, 1})), input(i64s({-100, 7})),
                  input(i64s({-1, 0})), input(i64s({-2, 3}))},
                 "Slice");
  check_captured(f, 18, {input(DataType::kFloat16, {3, 4, 5}), input(i64s({0, 1, 2, 1, 0, 2}))},
                 "Pad {mode=\"reflect\"}");
  check_captured(f, 17, {initializer(i64s({2, 3, 5}))}, "ConstantOfShape");
  check_captured(f, 13, {input(DataType::kFloat32, {50, 16}), input(indices(DataType::kInt64, {2, 7}, 50))},
                 "Gather");
  check_captured(f, 13, {input(DataType::kFloat16, {2, 5, 7, 116}), input(shuffle_indices(DataType::kInt64, 116, 2))},
                 "Gather {axis=3}");
  check_captured(f, 13, {input(DataType::kFloat16, {2, 5, 7, 58}), input(DataType::kFloat16, {2, 5, 7, 58})},
                 "Concat {axis=3}");
}

TEST_F(CudaDataMovementTest, RefusesWhatItDoesNotHandle) {
  // Rank above 6, a non-zero Pad value attribute (opset < 11), strings, ScatterND with a reduction.
  refuses(data_movement_family(), 13,
          {input(DataType::kFloat32, {2, 1, 2, 1, 2, 1, 2}), initializer(i64s({0})), initializer(i64s({1}))}, "Slice");
  refuses(data_movement_family(), 2, {input(DataType::kFloat32, {4, 5})}, "Pad {pads=[1, 1, 1, 1], value=1.5}");
  refuses(data_movement_family(), 13, {input(DataType::kString, {4}), input(DataType::kString, {2})},
          "Concat {axis=0}");
  refuses(data_movement_family(), 18,
          {input(DataType::kFloat32, {4}), input(DataType::kInt64, {2, 1}), input(DataType::kFloat32, {2})},
          "ScatterND {reduction=\"add\"}");
}

}  // namespace
}  // namespace ingot::gpu_test
