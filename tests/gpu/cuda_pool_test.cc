// Copyright ingot authors. Apache-2.0.
//
// The cuda pooling family against the CPU reference (cpu::run_node on the same host inputs):
// MaxPool / AveragePool over 1-D, 2-D and 3-D windows with pads, strides, dilations, ceil_mode,
// auto_pad and count_include_pad, and the global forms, in f32/f16/bf16 on odd sizes; the same
// 2-D pools channels-last (ingot::Pool{channels_last=1}, the layout pass's form) on both the
// 16-byte and the one-channel path, NaNs, unaligned buffers and CUDA-graph capture. Also which
// nodes the family refuses (the host fallback takes them), and the channels-last pool's
// bandwidth on ResNet-50's stem at batch 128 (printed, never failing on speed).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <limits>
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

// Channels-last windows: X is [N, H, W, C]. C = 64 (ResNet-50's stem), 16, 24, 8 and 72 take 16-byte
// packs in every type, 12 and 4 in f32 only (f16/bf16 take one channel at a time), 3, 5 and 6
// the one-channel path in every type.
const Window kWindowsNhwc[] = {
    {{2, 112, 112, 64}, "kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]"},
    {{1, 7, 9, 3}, "kernel_shape=[2, 2]"},
    {{2, 11, 13, 5}, "kernel_shape=[3, 2], pads=[1, 0, 2, 1], strides=[2, 3]"},
    {{1, 10, 9, 16}, "kernel_shape=[3, 3], dilations=[2, 1], pads=[2, 1, 2, 1]"},
    {{3, 9, 10, 12}, "kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1"},
    {{1, 8, 7, 24}, "kernel_shape=[2, 3], strides=[2, 2], pads=[1, 1, 0, 1], ceil_mode=1"},
    {{1, 9, 9, 8}, "auto_pad=\"SAME_UPPER\", kernel_shape=[4, 4], strides=[2, 2]"},
    {{1, 9, 8, 6}, "auto_pad=\"SAME_LOWER\", kernel_shape=[3, 2]"},
    {{2, 6, 7, 4}, "auto_pad=\"VALID\", kernel_shape=[3, 3], strides=[1, 2]"},
    {{1, 4, 5, 8}, "kernel_shape=[2, 2], pads=[2, 2, 2, 2]"},  // corner windows see no input
    {{2, 13, 11, 72}, "kernel_shape=[3, 3], dilations=[2, 2], strides=[3, 2], pads=[0, 2, 1, 0], ceil_mode=1"},
};

TEST_F(CudaPoolTest, ChannelsLastMaxPool) {
  for (DataType t : kFloatTypes)
    for (const Window& w : kWindowsNhwc)
      check(pool_family(), 19, {input(t, w.x)}, "ingot::Pool {mode=\"max\", channels_last=1, " + w.attrs + "}",
            "cuda.pool.maxpool_nhwc");
}

TEST_F(CudaPoolTest, ChannelsLastAveragePool) {
  for (DataType t : kFloatTypes) {
    for (const Window& w : kWindowsNhwc) {
      for (const char* count_pad : {"0", "1"})
        check(pool_family(), 19, {input(t, w.x)},
              std::string("ingot::Pool {mode=\"average\", channels_last=1, count_include_pad=") + count_pad + ", " +
                  w.attrs + "}",
              "cuda.pool.averagepool_nhwc");
    }
  }
}

// NaN in the data: a max keeps it only when it is a window's first tap (as the reference does),
// an average always; on both the 16-byte (C = 16) and the one-channel (C = 5) path.
TEST_F(CudaPoolTest, ChannelsLastNanLikeTheReference) {
  for (DataType t : kFloatTypes) {
    for (const Shape64& s : {Shape64{2, 9, 10, 16}, Shape64{2, 9, 10, 5}}) {
      Tensor x = random_tensor(t, s, rng_, -3.0, 3.0);
      for (int64_t i = 3; i < x.numel(); i += 7) x.set_f64(i, std::numeric_limits<double>::quiet_NaN());
      const std::string window = "channels_last=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}";
      check(pool_family(), 19, {input(x)}, "ingot::Pool {mode=\"max\", " + window, "cuda.pool.maxpool_nhwc");
      check(pool_family(), 19, {input(x)}, "ingot::Pool {mode=\"average\", " + window, "cuda.pool.averagepool_nhwc");
    }
  }
}

// C * element size a multiple of 16 but the buffers one element past a 16-byte boundary: the
// kernel must take the one-channel path (a 16-byte load there faults with a misaligned address).
TEST_F(CudaPoolTest, ChannelsLastUnalignedBuffers) {
  for (DataType t : kFloatTypes) {
    const Shape64 shape = {2, 9, 9, 64};
    const std::string text =
        op_graph(19, {input(t, shape)},
                 "ingot::Pool {mode=\"max\", channels_last=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}");
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto cands = pool_family().candidates(node, input_types(node));
    ASSERT_EQ(cands.size(), 1u);
    Tensor host = random_tensor(t, shape, rng_, -3.0, 3.0);
    auto ref = run_reference(node, {host});
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    if (!no_device_.empty()) GTEST_SKIP() << no_device_;
    const size_t elem = storage_bytes(t, 1);
    DeviceBuffer xb(host.nbytes() + 16), yb((*ref)[0].nbytes() + 16);
    ASSERT_TRUE(xb.valid() && yb.valid());
    char* xp = static_cast<char*>(xb.get()) + elem;
    char* yp = static_cast<char*>(yb.get()) + elem;
    ASSERT_EQ(cudaMemcpy(xp, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(yp, 0xFF, (*ref)[0].nbytes()), cudaSuccess);
    const Tensor dx = Tensor::borrow(t, shape, xp, nullptr);
    std::vector<Tensor> dy = {Tensor::borrow(t, (*ref)[0].shape(), yp, nullptr)};
    backend::StepIO io;
    io.node = &node;
    io.inputs = {&dx};
    io.outputs = &dy;
    io.stream = nullptr;
    Status st = cands[0]->enqueue(io);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    Tensor got = Tensor::zeros(t, (*ref)[0].shape()).value();
    ASSERT_EQ(cudaMemcpy(got.mutable_raw(), yp, got.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(all_close(got, (*ref)[0]));
  }
}

TEST_F(CudaPoolTest, ChannelsLastCapturedInACudaGraph) {
  check_captured(pool_family(), 19, {input(DataType::kFloat16, {4, 56, 56, 64})},
                 "ingot::Pool {mode=\"max\", channels_last=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]}");
  check_captured(pool_family(), 19, {input(DataType::kFloat32, {3, 17, 15, 7})},
                 "ingot::Pool {mode=\"average\", channels_last=1, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1}");
}

// ingot::Pool with channels_last = 0 is MaxPool / AveragePool and runs on the channels-first kernel.
TEST_F(CudaPoolTest, IngotPoolChannelsFirst) {
  for (DataType t : kFloatTypes) {
    check(pool_family(), 19, {input(t, {2, 5, 11, 13})},
          "ingot::Pool {mode=\"max\", kernel_shape=[3, 2], pads=[1, 0, 2, 1], strides=[2, 3]}", "cuda.pool.maxpool");
    check(pool_family(), 19, {input(t, {2, 5, 11, 13})},
          "ingot::Pool {mode=\"average\", channels_last=0, count_include_pad=1, kernel_shape=[3, 2], "
          "pads=[1, 0, 2, 1], strides=[2, 3]}",
          "cuda.pool.averagepool");
  }
}

// Explicitly quantized models' max pool between two quantized layers (fuse_quant_gemm moves it onto
// the int8 numbers): every window above in both layouts, over the whole int8 range, exact; no
// other int8 pool.
TEST_F(CudaPoolTest, Int8MaxPool) {
  std::mt19937 rng(8);
  auto int8 = [&](const Shape64& s) { return input(random_tensor(DataType::kInt8, s, rng, -128.0, 127.0, false)); };
  for (const Window& w : kWindows2d)
    check(pool_family(), 18, {int8(w.x)}, "MaxPool {" + w.attrs + "}", "cuda.pool.maxpool");
  for (const Window& w : kWindowsNhwc)
    check(pool_family(), 19, {int8(w.x)}, "ingot::Pool {mode=\"max\", channels_last=1, " + w.attrs + "}",
          "cuda.pool.maxpool_nhwc");
  refuses(pool_family(), 19, {input(DataType::kInt8, {1, 2, 6, 6})}, "AveragePool {kernel_shape=[2, 2]}");
  refuses(pool_family(), 18, {input(DataType::kInt8, {1, 2, 6, 6})}, "GlobalMaxPool");
}

TEST_F(CudaPoolTest, RefusesWhatItDoesNotHandle) {
  // MaxPool's Indices output, uint8 MaxPool, four spatial dims, LpPool.
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 2, 6, 6})}, "MaxPool {kernel_shape=[2, 2]}", 2);
  refuses(pool_family(), 18, {input(DataType::kUInt8, {1, 2, 6, 6})}, "MaxPool {kernel_shape=[2, 2]}");
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 1, 3, 3, 3, 3})}, "MaxPool {kernel_shape=[2, 2, 2, 2]}");
  refuses(pool_family(), 18, {input(DataType::kFloat32, {1, 2, 6, 6})}, "LpPool {kernel_shape=[2, 2]}");
  // Channels-last: other than two spatial dims, uint8 data.
  refuses(pool_family(), 19, {input(DataType::kFloat32, {1, 4, 6, 6, 3})},
          "ingot::Pool {mode=\"max\", channels_last=1, kernel_shape=[2, 2, 2]}");
  refuses(pool_family(), 19, {input(DataType::kFloat32, {1, 6, 3})},
          "ingot::Pool {mode=\"max\", channels_last=1, kernel_shape=[2]}");
  refuses(pool_family(), 19, {input(DataType::kUInt8, {1, 6, 6, 3})},
          "ingot::Pool {mode=\"max\", channels_last=1, kernel_shape=[2, 2]}");
}

// ResNet-50's stem pool at batch 128 in fp16 (3x3, stride 2, pad 1; 205 MB in, 51 MB out), in
// both layouts: CUDA events around 20 back-to-back enqueues after 3 warm-up calls; prints time
// and GB/s (bytes read once + written), never fails on speed.
TEST_F(CudaPoolTest, TimingResNet50StemMaxPool) {
  const std::string window = "kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]";
  struct Layout {
    const char* label;
    Shape64 x;
    std::string call;
  };
  const Layout layouts[] = {
      {"NHWC ingot::Pool", {128, 112, 112, 64}, "ingot::Pool {mode=\"max\", channels_last=1, " + window + "}"},
      {"NCHW MaxPool", {128, 64, 112, 112}, "MaxPool {" + window + "}"},
  };
  for (const Layout& l : layouts) {
    auto g = parse_graph(op_graph(19, {input(DataType::kFloat16, l.x)}, l.call));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto cands = pool_family().candidates(node, input_types(node));
    ASSERT_EQ(cands.size(), 1u);
    if (!no_device_.empty()) GTEST_SKIP() << no_device_;
    auto x = device_alloc(DataType::kFloat16, l.x);
    ASSERT_TRUE(x.ok());
    ASSERT_EQ(cudaMemset(x->mutable_raw(), 0x3c, x->nbytes()), cudaSuccess);  // 0x3c3c: 1.06 in fp16
    auto y = device_alloc(DataType::kFloat16, node.output(0)->shape().concrete());
    ASSERT_TRUE(y.ok());
    std::vector<Tensor> outs = {*y};
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    backend::StepIO io;
    io.node = &node;
    io.inputs = {&*x};
    io.outputs = &outs;
    io.stream = stream;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(cands[0]->enqueue(io).ok());
    cudaEvent_t start, stop;
    ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
    const int iters = 20;
    ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
    for (int i = 0; i < iters; ++i) ASSERT_TRUE(cands[0]->enqueue(io).ok());
    ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    const double per_call_ms = static_cast<double>(ms) / iters;
    const double bytes = static_cast<double>(x->nbytes() + outs[0].nbytes());
    std::printf("[timing] %-24s %-16s fp16 N128 C64 112x112, 3x3/2 pad 1: %8.1f us  %7.1f GB/s\n",
                cands[0]->name().c_str(), l.label, 1e3 * per_call_ms, bytes / (per_call_ms * 1e-3) / 1e9);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace ingot::gpu_test
