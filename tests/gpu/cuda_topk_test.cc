// Copyright ingot authors. Apache-2.0.
//
// The cuda topk family against the CPU reference (cpu::run_node on the same host inputs): any
// axis, largest and smallest, sorted 1 and 0, K = 1 .. axis length, K as an initializer, as a
// computed input and as opset 1's attribute, in f32/f16/bf16/int32/int64, on rows that fit the
// shared-memory bitonic sort and on longer rows (the segmented radix sort), with many duplicate
// values (ties go to the lower index) and NaNs.
//
// An engine test runs Resize then TopK through the public API: both steps on their cuda
// tactics (the TopK rows long enough to need the builder-planned workspace), outputs equal to
// the CPU interpreter's.
//
// Every case also replays the kernels' ordering on the host (topk_math, __host__ __device__:
// the keys, and the bitonic network for short rows), which needs no GPU; the device run is
// skipped, saying why, without one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/topk/topk_kernels.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"
#include "onnx/onnx.pb.h"
#include "op_case_util.h"
#include "quiet_logger.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::topk_family;
using backend::cuda::TopKDesc;
using backend::cuda::TopKParams;
namespace tm = backend::cuda::topk_math;

constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32,
                               DataType::kInt64};

/// Values drawn from a few levels, so rows hold many ties (exact in every type).
Tensor tied_tensor(DataType t, const Shape64& shape, std::mt19937& rng, int levels = 7) {
  Tensor x = Tensor::zeros(t, shape).value();
  std::uniform_int_distribution<int> d(1, levels);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int v = d(rng);
    x.set_f64(i, (v % 2 ? -1.0 : 1.0) * v * (is_float(t) ? 0.5 : 1.0));
  }
  return x;
}

/// The order key of element i as the kernels compute it.
uint64_t order_of(const Tensor& x, int64_t i) {
  switch (x.dtype()) {
    case DataType::kInt32:
      return tm::int32_order(static_cast<int32_t>(x.get_i64(i)));
    case DataType::kInt64:
      return tm::int64_order(x.get_i64(i));
    default: {
      const float f = static_cast<float>(x.get_f64(i));
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      return tm::float_order(bits);
    }
  }
}

Operand k_init(int64_t k) { return initializer(i64s({k})); }

class CudaTopKTest : public OpCaseTest {
 protected:
  void run_case(int64_t opset, const Tensor& x, const Operand& k, const std::string& call) {
    std::vector<Operand> ins = {input(x)};
    if (k.dtype != DataType::kUndefined) ins.push_back(k);
    replay_on_host(opset, ins, call);
    check(topk_family(), opset, ins, call, "cuda.topk", 2);
  }

  /// The kernels' ordering on the host: every row's keys sorted by the bitonic network (rows
  /// that fit it) or by a stable sort of the same keys (the radix sort path), first k taken.
  void replay_on_host(int64_t opset, const std::vector<Operand>& ins, const std::string& call) {
    const std::string text = op_graph(opset, ins, call, 2);
    SCOPED_TRACE("host replay of " + text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    TopKParams p;
    Status st = backend::cuda::topk_params_for(node, input_types(node), &p);
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::vector<Tensor> data;
    for (const Operand& o : ins) data.push_back(o.data);
    auto ref = run_reference(node, data);
    ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
    const Tensor& x = data[0];
    TopKDesc d;
    st = backend::cuda::topk_desc_for(p, x.shape(), (*ref)[0].shape(), &d);
    ASSERT_TRUE(st.ok()) << st.to_string();
    Tensor values = Tensor::zeros(x.dtype(), (*ref)[0].shape()).value();
    Tensor indices = Tensor::zeros(DataType::kInt64, (*ref)[0].shape()).value();
    const bool wide = x.dtype() == DataType::kInt64;
    for (int64_t o = 0; o < d.outer; ++o) {
      for (int64_t in = 0; in < d.inner; ++in) {
        const int64_t base = o * d.n * d.inner + in;
        std::vector<uint64_t> rank;
        std::vector<uint32_t> idx;
        if (d.n <= backend::cuda::kTopKBitonicMax) {
          const int64_t len = tm::bitonic_length(d.n);
          rank.assign(len, ~0ull);
          idx.assign(len, ~0u);
          for (int64_t i = 0; i < d.n; ++i) {
            rank[i] = tm::rank_of(order_of(x, base + i * d.inner), d.largest, wide);
            idx[i] = static_cast<uint32_t>(i);
          }
          for (int64_t size = 2; size <= len; size <<= 1)
            for (int64_t stride = size >> 1; stride > 0; stride >>= 1)
              for (int64_t i = 0; i < len; ++i) tm::bitonic_step(rank.data(), idx.data(), size, stride, i);
        } else {
          std::vector<std::pair<uint64_t, uint32_t>> keys;
          for (int64_t i = 0; i < d.n; ++i) {
            const uint64_t r = tm::rank_of(order_of(x, base + i * d.inner), d.largest, wide);
            keys.emplace_back(wide ? r : ((r << 32) | static_cast<uint64_t>(i)), static_cast<uint32_t>(i));
          }
          std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
          for (const auto& kv : keys) idx.push_back(kv.second);
        }
        for (int64_t t = 0; t < d.k; ++t) {
          const int64_t dst = (o * d.k + t) * d.inner + in;
          if (is_float(x.dtype()))
            values.set_f64(dst, x.get_f64(base + idx[t] * d.inner));
          else
            values.set_i64(dst, x.get_i64(base + idx[t] * d.inner));
          indices.set_i64(dst, idx[t]);
        }
      }
    }
    EXPECT_TRUE(all_close(values, (*ref)[0])) << "values";
    EXPECT_TRUE(all_close(indices, (*ref)[1])) << "indices";
  }

  std::string refusal(int64_t opset, const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(opset, ins, call, 2));
    if (!g.ok()) return "parse: " + g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    TopKParams p;
    Status st = backend::cuda::topk_params_for(node, input_types(node), &p);
    return st.ok() ? "" : st.message();
  }
};

TEST_F(CudaTopKTest, EveryAxisLargestSmallestWithTies) {
  const Shape64 shape = {3, 17, 5};
  for (DataType t : kTypes) {
    for (int64_t axis : {0, 1, 2, -1, -2}) {
      const int64_t n = shape[axis < 0 ? axis + 3 : axis];
      for (int64_t k : {int64_t{1}, (n + 1) / 2, n}) {
        for (int largest : {1, 0}) {
          for (int sorted : {1, 0}) {
            const Tensor x = tied_tensor(t, shape, rng_);
            run_case(11, x, k_init(k),
                     "TopK {axis=" + std::to_string(axis) + ", largest=" + std::to_string(largest) +
                         ", sorted=" + std::to_string(sorted) + "}");
          }
        }
      }
    }
  }
}

TEST_F(CudaTopKTest, DistinctValuesOddRowLengths) {
  for (DataType t : kTypes) {
    for (const Shape64& s :
         std::vector<Shape64>{{1, 1}, {7, 3}, {2, 33}, {4, 257}, {3, 1000}, {2, 2048}, {5, 2, 129}}) {
      Tensor x = is_float(t) ? random_tensor(t, s, rng_, -100.0, 100.0) : tied_tensor(t, s, rng_, 1000000);
      const int64_t n = s.back();
      for (int64_t k : {int64_t{1}, std::min<int64_t>(n, 5), n}) {
        run_case(11, x, k_init(k), "TopK");
        run_case(11, x, k_init(k), "TopK {largest=0}");
      }
    }
  }
}

TEST_F(CudaTopKTest, LongRowsUseTheRadixSort) {
  for (DataType t : kTypes) {
    for (const Shape64& s : std::vector<Shape64>{{2, 2049}, {3, 5000}, {1, 20000}, {3, 4100, 2}}) {
      const Tensor x = tied_tensor(t, s, rng_, 50);
      const int64_t axis = s.size() == 3 ? 1 : -1;
      const int64_t n = s[axis < 0 ? s.size() - 1 : axis];
      for (int64_t k : {int64_t{1}, int64_t{100}, n}) {
        for (int largest : {1, 0}) {
          run_case(11, x, k_init(k),
                   "TopK {axis=" + std::to_string(axis) + ", largest=" + std::to_string(largest) + "}");
        }
      }
    }
  }
}

TEST_F(CudaTopKTest, NaNsSortAboveEverything) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (const Shape64& s : std::vector<Shape64>{{4, 37}, {2, 3000}}) {
      Tensor x = tied_tensor(t, s, rng_, 9);
      for (int64_t i = 0; i < x.numel(); i += 7) x.set_f64(i, std::numeric_limits<double>::quiet_NaN());
      x.set_f64(1, std::numeric_limits<double>::infinity());
      x.set_f64(2, -std::numeric_limits<double>::infinity());
      for (int largest : {1, 0})
        for (int64_t k : {int64_t{3}, s.back()})
          run_case(11, x, k_init(k), "TopK {largest=" + std::to_string(largest) + "}");
    }
  }
}

TEST_F(CudaTopKTest, KAsAttributeAndAsComputedInput) {
  for (DataType t : kTypes) {
    const Tensor x = tied_tensor(t, {4, 23}, rng_);
    // Opset 1: the k attribute.
    run_case(1, x, omitted(), "TopK {k=6, axis=1}");
    // K computed at run time (a graph input): the runtime's propagated output shape carries it.
    run_case(11, x, input(i64s({9})), "TopK");
  }
}

TEST_F(CudaTopKTest, CapturesIntoACudaGraph) {
  // The radix-sort path (several launches and CUB) and the bitonic one.
  // Values and Indices (2 outputs), the graph replayed twice before comparing.
  check_captured(topk_family(), 11, {input(tied_tensor(DataType::kFloat32, {3, 5000}, rng_)), k_init(64)}, "TopK",
                 -3.0, 3.0, 2);
  check_captured(topk_family(), 11, {input(tied_tensor(DataType::kFloat16, {8, 300}, rng_)), k_init(7)}, "TopK",
                 -3.0, 3.0, 2);
}

// values, indices = TopK(Resize(x, linear, scales [1, 1, 61]), K = 37, axis -1), x: f32[2, 3, 40].
std::string resize_topk_model() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("resize_topk");
  auto io = [](::onnx::ValueInfoProto* vi, const char* name, int elem, std::vector<int64_t> dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  io(g->add_input(), "x", ::onnx::TensorProto::FLOAT, {2, 3, 40});
  io(g->add_output(), "values", ::onnx::TensorProto::FLOAT, {2, 3, 37});
  io(g->add_output(), "indices", ::onnx::TensorProto::INT64, {2, 3, 37});
  auto* scales = g->add_initializer();
  scales->set_name("scales");
  scales->set_data_type(::onnx::TensorProto::FLOAT);
  scales->add_dims(3);
  for (float f : {1.f, 1.f, 61.f}) scales->add_float_data(f);
  auto* k = g->add_initializer();
  k->set_name("k");
  k->set_data_type(::onnx::TensorProto::INT64);
  k->add_dims(1);
  k->add_int64_data(37);
  auto* resize = g->add_node();
  resize->set_op_type("Resize");
  for (const char* i : {"x", "", "scales"}) resize->add_input(i);
  resize->add_output("r");
  auto* mode = resize->add_attribute();
  mode->set_name("mode");
  mode->set_type(::onnx::AttributeProto::STRING);
  mode->set_s("linear");
  auto* topk = g->add_node();
  topk->set_op_type("TopK");
  topk->add_input("r");
  topk->add_input("k");
  topk->add_output("values");
  topk->add_output("indices");
  return m.SerializeAsString();
}

using test::Quiet;

TEST_F(CudaTopKTest, ResizeThenTopKEngineRunsOnTheCudaTactics) {
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  const std::string bytes = resize_topk_model();
  Quiet quiet;
  BuilderConfig cfg;
  cfg.backend = BackendKind::kCuda;
  auto eng_bytes = Builder(quiet).build_serialized_from_bytes(bytes.data(), bytes.size(), cfg);
  ASSERT_TRUE(eng_bytes.ok()) << eng_bytes.status().to_string();
  auto engine = Runtime(quiet).deserialize(eng_bytes->data(), eng_bytes->size());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<std::string> tactics;
  for (const LayerDesc& l : (*engine)->layers()) tactics.push_back(l.tactic);
  EXPECT_NE(std::find(tactics.begin(), tactics.end(), "cuda.resize"), tactics.end());
  EXPECT_NE(std::find(tactics.begin(), tactics.end(), "cuda.topk"), tactics.end());
  EXPECT_EQ(std::find(tactics.begin(), tactics.end(), "cuda.host_fallback"), tactics.end());
  EXPECT_GT((*engine)->memory().workspace_bytes, 0u) << "rows of 2440 need the radix sort's workspace";
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();

  const Tensor x = tied_tensor(DataType::kFloat32, {2, 3, 40}, rng_, 5);
  auto dx = upload(x);
  ASSERT_TRUE(dx.ok());
  auto dv = device_alloc(DataType::kFloat32, {2, 3, 37});
  auto di = device_alloc(DataType::kInt64, {2, 3, 37});
  ASSERT_TRUE(dv.ok() && di.ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("x", dx->mutable_raw()).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("values", dv->mutable_raw()).ok());
  ASSERT_TRUE((*ctx)->set_tensor_address("indices", di->mutable_raw()).ok());
  Status st = (*ctx)->enqueue(nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  auto model = onnx::import_model_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  cpu::Executor exec;
  auto want = exec.run(*model->graph, {{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_EQ(want->size(), 2u);
  auto values = download(*dv);
  auto indices = download(*di);
  ASSERT_TRUE(values.ok() && indices.ok());
  // Exact: the resized values are compared (ties included) in the same order by both.
  EXPECT_TRUE(all_close(*values, (*want)[0])) << "values";
  EXPECT_TRUE(all_close(*indices, (*want)[1])) << "indices";
}

TEST_F(CudaTopKTest, RefusesWhatItDoesNotHandleAndSaysWhy) {
  refuses(topk_family(), 11, {input(DataType::kUInt8, {3, 5}), k_init(2)}, "TopK", 2);
  refuses(topk_family(), 11, {input(DataType::kFloat64, {3, 5}), k_init(2)}, "TopK", 2);
  EXPECT_NE(refusal(11, {input(DataType::kInt8, {3, 5}), k_init(2)}, "TopK").find("input X is i8"), std::string::npos);
  EXPECT_EQ(refusal(11, {input(DataType::kBFloat16, {3, 5}), k_init(2)}, "TopK {axis=0}"), "");
}

TEST_F(CudaTopKTest, HostParametersCheckShapesAndRoundTrip) {
  TopKParams p;
  p.axis = -2;
  p.largest = 0;
  TopKDesc d;
  ASSERT_TRUE(backend::cuda::topk_desc_for(p, {2, 9, 5}, {2, 4, 5}, &d).ok());
  EXPECT_EQ(d.outer, 2);
  EXPECT_EQ(d.n, 9);
  EXPECT_EQ(d.inner, 5);
  EXPECT_EQ(d.k, 4);
  EXPECT_FALSE(d.largest);
  EXPECT_FALSE(backend::cuda::topk_desc_for(p, {2, 9, 5}, {2, 10, 5}, &d).ok());  // K > n
  EXPECT_FALSE(backend::cuda::topk_desc_for(p, {2, 9, 5}, {3, 4, 5}, &d).ok());   // other dims differ
  EXPECT_FALSE(backend::cuda::topk_desc_for(p, {9}, {4}, &d).ok());               // axis -2 of rank 1
  // Ordering keys: NaN above +inf, -0 equal to +0, ints in order.
  auto fbits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof(b));
    return b;
  };
  EXPECT_GT(tm::float_order(fbits(std::nanf(""))), tm::float_order(fbits(INFINITY)));
  EXPECT_EQ(tm::float_order(fbits(-std::nanf(""))), tm::float_order(fbits(std::nanf(""))));
  EXPECT_EQ(tm::float_order(fbits(-0.0f)), tm::float_order(fbits(0.0f)));
  EXPECT_LT(tm::float_order(fbits(-3.5f)), tm::float_order(fbits(-1.0f)));
  EXPECT_LT(tm::float_order(fbits(-INFINITY)), tm::float_order(fbits(-3.5f)));
  EXPECT_LT(tm::int32_order(-5), tm::int32_order(3));
  EXPECT_LT(tm::int64_order(std::numeric_limits<int64_t>::min()), tm::int64_order(-1));
  // The engine's params rebuild the tactic; malformed ones are rejected.
  auto g = parse_graph(op_graph(11, {input(DataType::kFloat32, {3, 5}), k_init(2)}, "TopK {largest=0}", 2));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = topk_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  std::vector<uint8_t> bytes = cands[0]->serialize();
  EXPECT_NE(topk_family().create("cuda.topk", bytes), nullptr);
  bytes.resize(3);
  EXPECT_EQ(topk_family().create("cuda.topk", bytes), nullptr);
  // Short rows need no workspace; long ones do (keys, values, offsets and CUB's scratch, whose
  // size CUB asks the device for), not shrinking as rows or row lengths grow.
  TopKDesc shortd{4, 2048, 3, 5, true}, longd{4, 5000, 3, 5, true}, more_rows{40, 5000, 3, 5, true},
      longer_rows{4, 9000, 3, 5, true};
  EXPECT_EQ(backend::cuda::topk_workspace_bytes(backend::cuda::TopKType::kF32, shortd), 0u);
  if (!no_device_.empty()) GTEST_SKIP() << no_device_;
  const size_t a = backend::cuda::topk_workspace_bytes(backend::cuda::TopKType::kF32, longd);
  EXPECT_GT(a, 5000u * 12 * (8 + 8 + 4 + 4));
  EXPECT_GE(backend::cuda::topk_workspace_bytes(backend::cuda::TopKType::kF32, more_rows), a);
  EXPECT_GE(backend::cuda::topk_workspace_bytes(backend::cuda::TopKType::kF32, longer_rows), a);
}

}  // namespace
}  // namespace ingot::gpu_test
