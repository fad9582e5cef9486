// Copyright ingot authors. Apache-2.0.
//
// The cuda pooling family against the CPU reference (cpu::run_node on the same host inputs):
// MaxPool / AveragePool over 1-D, 2-D and 3-D windows with pads, strides, dilations, ceil_mode,
// auto_pad and count_include_pad, and the global forms, in f32/f16/bf16 on odd sizes. Also which
// nodes the family refuses (the host fallback takes them).
#include <string>
#include <vector>

#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::pool_family;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

class CudaPoolTest : public OpCaseTest {};

struct Window {
  Shape64 x;
  std::string attrs;  // without braces
};

// ResNet-50's stem pool first, then odd sizes, asymmetric pads, dilations and ceil_mode.
const Window kWindows2d[] = {
    {{2, 8, 112, 112}, "kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]"},
    {{1, 3, 7, 9}, "kernel_shape=[2, 2]"},
    {{2, 5, 11, 13}, "kernel_shape=[3, 2], pads=[1, 0, 2, 1], strides=[2, 3]"},
    {{1, 4, 10, 9}, "kernel_shape=[3, 3], dilations=[2, 1], pads=[2, 1, 2, 1]"},
    {{3, 2, 9, 10}, "kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1"},
    {{1, 3, 8, 7}, "kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 0, 1], ceil_mode=1"},
    {{1, 3, 9, 9}, "auto_pad=\"SAME_UPPER\", kernel_shape=[4, 4], strides=[2, 2]"},
    {{1, 3, 9, 8}, "auto_pad=\"SAME_LOWER\", kernel_shape=[3, 2]"},
    {{2, 3, 6, 7}, "auto_pad=\"VALID\", kernel_shape=[3, 3], strides=[1, 2]"},
};

TEST_F(CudaPoolTest, MaxPool2d) {
  for (DataType t : kFloatTypes)
    for (const Window& w : kWindows2d)
      check(pool_family(), 18, {input(t, w.x)}, "MaxPool {" + w.attrs + "}", "cuda.pool.maxpool");
}

TEST_F(CudaPoolTest, AveragePool2d) {
  for (DataType t : kFloatTypes) {
    for (const Window& w : kWindows2d) {
      check(pool_family(), 19, {input(t, w.x)}, "AveragePool {" + w.attrs + "}", "cuda.pool.averagepool");
      check(pool_family(), 19, {input(t, w.x)}, "AveragePool {count_include_pad=1, " + w.attrs + "}",
            "cuda.pool.averagepool");
    }
  }
}

TEST_F(CudaPoolTest, OneAndThreeSpatialDims) {
  for (DataType t : kFloatTypes) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      const std::string want = std::string("cuda.pool.") + (op[0] == 'M' ? "maxpool" : "averagepool");
      check(pool_family(), 19, {input(t, {2, 3, 17})},
            std::string(op) + " {kernel_shape=[3], pads=[1, 2], strides=[2]}", want);
      check(pool_family(), 19, {input(t, {1, 2, 5, 6, 7})},
            std::string(op) + " {kernel_shape=[2, 3, 2], pads=[1, 1, 0, 0, 1, 1], strides=[2, 1, 2]}", want);
      check(pool_family(), 19, {input(t, {1, 2, 5, 6, 7})},
            std::string(op) + " {kernel_shape=[3, 3, 3], strides=[2, 2, 2], ceil_mode=1}", want);
    }
  }
}

TEST_F(CudaPoolTest, AveragePool3dCeilModeCountingPads) {
  for (DataType t : kFloatTypes)
    check(pool_family(), 19, {input(t, {1, 2, 5, 6, 7})},
          "AveragePool {kernel_shape=[3, 3, 3], pads=[1, 0, 1, 1, 0, 0], strides=[2, 2, 2], ceil_mode=1, "
          "count_include_pad=1}",
          "cuda.pool.averagepool");
}

TEST_F(CudaPoolTest, GlobalPools) {
  const std::vector<Shape64> shapes = {{2, 2048, 7, 7}, {1, 3, 1, 1}, {3, 5, 13}, {1, 2, 3, 4, 5}, {2, 7, 33, 35}};
  for (DataType t : kFloatTypes) {
    for (const Shape64& s : shapes) {
      check(pool_family(), 17, {input(t, s)}, "GlobalAveragePool", "cuda.pool.globalaveragepool");
      check(pool_family(), 17, {input(t, s)}, "GlobalMaxPool", "cuda.pool.globalmaxpool");
    }
  }
}

TEST_F(CudaPoolTest, RefusesWhatItDoesNotHandle) {
  // MaxPool's Indices output, integer MaxPool, four spatial dims, LpPool.
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 2, 6, 6})}, "MaxPool {kernel_shape=[2, 2]}", 2);
  refuses(pool_family(), 18, {input(DataType::kUInt8, {1, 2, 6, 6})}, "MaxPool {kernel_shape=[2, 2]}");
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 1, 3, 3, 3, 3})}, "MaxPool {kernel_shape=[2, 2, 2, 2]}");
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 2, 6, 6})}, "LpPool {kernel_shape=[2, 2]}");
}

}  // namespace
}  // namespace ingot::gpu_test
