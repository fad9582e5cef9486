// Copyright ingot authors. Apache-2.0.
//
// The cuda data-movement family against the CPU reference (cpu::run_node on the same host
// inputs): the shape-only copies, Shape/Size, Concat, Split, Slice (negative steps, clamped
// ends), Gather and GatherElements (negative indices, int32 and int64), ScatterND, Expand, Tile,
// Pad (constant/reflect/edge/wrap, negative pads, axes), with Slice's and Pad's parameters as
// initializers or computed tensors, ConstantOfShape and Range, over
// floats, int64, bool and uint8 with odd sizes. Also which nodes the family refuses.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

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
