// Copyright ingot authors. Apache-2.0.
//
// The cuBLASLt tactics (MatMul, Gemm, ingot::FusedGemm) against the CPU reference kernels on
// random shapes (odd sizes, K not a multiple of 8, batch broadcasting, 1-D operands) and
// random non-zero data in fp32, TF32, fp16 and bf16. GEMM results are compared normwise
// (||got - want|| / ||want||, the error measure that does not punish cancellation in single
// elements) and elementwise against the largest reference magnitude; unwritten elements stay
// NaN from the poisoned output and fail. Name/param round trips and supports() decisions need
// no device and run everywhere the CUDA backend is built.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using Input = std::optional<Shape64>;  // nullopt: an omitted optional input

std::unique_ptr<backend::Tactic> make_tactic(const std::string& name) {
  return backend::cuda::cublaslt_family().create(name, {});
}

std::string type_text(DataType dt, const Shape64& s) { return std::string(data_type_name(dt)) + shape_to_string(s); }

double norm_tolerance(DataType dt, bool tf32) {
  if (dt == DataType::kFloat32) return tf32 ? 2e-3 : 1e-5;
  return dt == DataType::kFloat16 ? 2e-3 : 1e-2;
}

double normwise_error(const Tensor& got, const Tensor& want) {
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double d = got.get_f64(i) - want.get_f64(i);
    diff2 += d * d;
    ref2 += want.get_f64(i) * want.get_f64(i);
  }
  return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
}

// ||got - want|| / ||want|| below `tol`, every element within 4·tol of the largest |want|,
// and no NaN where the reference has none.
::testing::AssertionResult gemm_close(const Tensor& got, const Tensor& want, double tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "got " << data_type_name(got.dtype()) << shape_to_string(got.shape())
                                         << ", want " << data_type_name(want.dtype()) << shape_to_string(want.shape());
  double diff2 = 0, ref2 = 0, max_abs = 0, ref_max = 0;
  int64_t worst = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(g) != std::isnan(w))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w
                                           << " (NaN: unwritten or overflow)";
    double d = std::fabs(g - w);
    diff2 += d * d;
    ref2 += w * w;
    ref_max = std::max(ref_max, std::fabs(w));
    if (d > max_abs) {
      max_abs = d;
      worst = i;
    }
  }
  double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (rel < tol && max_abs <= 4 * tol * std::max(ref_max, 1e-30)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "normwise rel error " << rel << " (tol " << tol << "), max abs error "
                                       << max_abs << " at " << worst << " (got " << got.get_f64(worst) << ", want "
                                       << want.get_f64(worst) << "), max |want| " << ref_max;
}

class CublasLtTest : public CudaTest {
 public:
  // The worst normwise error seen per precision, printed once for the report.
  static void TearDownTestSuite() {
    for (const auto& [name, err] : worst_)
      std::printf("[ cublaslt ] worst normwise rel error %-5s %.3g over %d cases\n", name.c_str(), err.first,
                  err.second);
  }

 protected:
  // Parses the node, checks supports(), runs `tactic_name` and the reference on the same
  // random inputs and compares. `output_shape` is needed when the graph has symbolic dims.
  void check(const std::string& op, const std::string& attrs, DataType dt, const std::vector<Input>& ins,
             const std::string& tactic_name = "cuda.cublaslt.0") {
    SCOPED_TRACE(one_node_graph(op, attrs, dt, ins));
    auto g = parse_graph(one_node_graph(op, attrs, dt, ins));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto tactic = make_tactic(tactic_name);
    ASSERT_NE(tactic, nullptr);
    ASSERT_TRUE(tactic->supports(node, input_types(node)));
    std::vector<Tensor> in;
    for (const Input& s : ins) in.push_back(s ? random_tensor(dt, *s, rng_) : Tensor());
    auto got = run_tactic(*tactic, node, in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run_reference(node, in);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    bool tf32 = tactic_name.find("tf32") != std::string::npos;
    EXPECT_TRUE(gemm_close((*got)[0], (*want)[0], norm_tolerance(dt, tf32)));
    auto& w = worst_[tf32 ? "tf32" : data_type_name(dt)];
    w.first = std::max(w.first, normwise_error((*got)[0], (*want)[0]));
    ++w.second;
  }

  std::mt19937 rng_{20261129};
  static inline std::map<std::string, std::pair<double, int>> worst_;
};

const DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

// The cuBLASLt family's candidate names, in order, for the one-node graph `text`.
std::vector<std::string> candidate_names(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  std::vector<std::string> out;
  if (!g.ok()) return out;
  const ir::Node& node = *(*g)->nodes()[0];
  for (const auto& t : backend::cuda::cublaslt_family().candidates(node, input_types(node))) out.push_back(t->name());
  return out;
}

// ---- device tests -------------------------------------------------------------------------

TEST_F(CublasLtTest, MatMul2DOddShapes) {
  for (DataType dt : kDtypes) {
    check("MatMul", "", dt, {Shape64{37, 53}, Shape64{53, 29}});
    check("MatMul", "", dt, {Shape64{1, 7}, Shape64{7, 1}});
    check("MatMul", "", dt, {Shape64{130, 9}, Shape64{9, 67}});
  }
}

TEST_F(CublasLtTest, MatMulBatchBroadcasting) {
  const std::vector<std::pair<Shape64, Shape64>> cases = {
      {{3, 17, 33}, {33, 19}},          // B without batch: folded into M
      {{2, 3, 17, 33}, {1, 33, 19}},    // B batch of ones: folded
      {{17, 33}, {4, 33, 19}},          // A without batch: A stride 0
      {{1, 1, 17, 33}, {2, 3, 33, 19}}, // A batch of ones
      {{2, 3, 17, 33}, {2, 3, 33, 19}}, // equal batches
      {{5, 17, 33}, {1, 5, 33, 19}},    // equal after left padding
  };
  for (DataType dt : kDtypes)
    for (const auto& [a, b] : cases) check("MatMul", "", dt, {a, b});
}

TEST_F(CublasLtTest, MatMulVectorOperands) {
  for (DataType dt : kDtypes) {
    check("MatMul", "", dt, {Shape64{33}, Shape64{33, 19}});      // [K] x [K,N] -> [N]
    check("MatMul", "", dt, {Shape64{3, 17, 33}, Shape64{33}});   // [..,M,K] x [K] -> [..,M]
    check("MatMul", "", dt, {Shape64{33}, Shape64{4, 33, 19}});   // [K] x [B,K,N] -> [B,N]
    check("MatMul", "", dt, {Shape64{33}, Shape64{33}});          // dot product -> []
  }
}

TEST_F(CublasLtTest, GemmTransposesAlphaBetaAndC) {
  const int64_t M = 23, N = 31, K = 45;
  for (DataType dt : kDtypes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Shape64 a = ta ? Shape64{K, M} : Shape64{M, K};
        Shape64 b = tb ? Shape64{N, K} : Shape64{K, N};
        std::string t = "transA=" + std::to_string(ta) + ", transB=" + std::to_string(tb);
        check("Gemm", t + ", alpha=0.75", dt, {a, b});
        check("Gemm", t + ", alpha=0.75", dt, {a, b, Shape64{N}});             // bias epilogue
        check("Gemm", t + ", alpha=1.5", dt, {a, b, Shape64{1, N}});           // bias epilogue
        check("Gemm", t + ", alpha=0.5, beta=-0.5", dt, {a, b, Shape64{M, N}});  // C matrix
        check("Gemm", t + ", beta=0.0", dt, {a, b, Shape64{1}});                // C ignored
      }
}

TEST_F(CublasLtTest, FusedGemmEpilogues) {
  const char* acts[] = {"", "Relu", "GeluTanh"};
  for (DataType dt : kDtypes)
    for (const char* act : acts)
      for (int bias = 0; bias < 2; ++bias)
        for (int res = 0; res < 2; ++res) {
          std::string a = std::string("activation=\"") + act + "\"";
          // kind gemm: transposed A, alpha, C over N, residual [M,N].
          Input c = bias ? Input(Shape64{1, 29}) : std::nullopt;
          Input r = res ? Input(Shape64{21, 29}) : std::nullopt;
          check("ingot::FusedGemm", a + ", kind=\"gemm\", transA=1, alpha=0.5", dt, {Shape64{37, 21}, Shape64{37, 29}, c, r});
          // kind matmul: batched A with a weight B, bias [N], residual like the output.
          Input cm = bias ? Input(Shape64{29}) : std::nullopt;
          Input rm = res ? Input(Shape64{2, 5, 29}) : std::nullopt;
          check("ingot::FusedGemm", a + ", kind=\"matmul\", alpha=1.25", dt, {Shape64{2, 5, 37}, Shape64{37, 29}, cm, rm});
          // kind matmul with a batched weight (strided batch, bias shared by every batch member).
          Input rb = res ? Input(Shape64{3, 6, 29}) : std::nullopt;
          check("ingot::FusedGemm", a + ", kind=\"matmul\"", dt, {Shape64{3, 6, 37}, Shape64{3, 37, 29}, cm, rb});
        }
}

TEST_F(CublasLtTest, FusedGemmResidualOrderWithoutActivation) {
  for (DataType dt : kDtypes)
    check("ingot::FusedGemm", "kind=\"gemm\", residual_before_activation=0", dt,
          {Shape64{19, 41}, Shape64{41, 13}, Shape64{13}, Shape64{19, 13}});
}

TEST_F(CublasLtTest, RandomShapes) {
  std::mt19937 shapes(7);
  auto dim = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(shapes)); };
  for (int iter = 0; iter < 40; ++iter) {
    DataType dt = kDtypes[iter % 3];
    int64_t m = dim(1, 97), n = dim(1, 97), k = dim(1, 257), batch = dim(1, 4);
    switch (dim(0, 4)) {
      case 0: check("MatMul", "", dt, {Shape64{m, k}, Shape64{k, n}}); break;
      case 1: check("MatMul", "", dt, {Shape64{batch, m, k}, Shape64{k, n}}); break;
      case 2: check("MatMul", "", dt, {Shape64{m, k}, Shape64{batch, k, n}}); break;
      case 3: check("MatMul", "", dt, {Shape64{batch, m, k}, Shape64{batch, k, n}}); break;
      default:
        check("ingot::FusedGemm", "kind=\"gemm\", activation=\"Relu\", transB=1", dt,
              {Shape64{m, k}, Shape64{n, k}, Shape64{n}, Shape64{m, n}});
    }
  }
}

TEST_F(CublasLtTest, LongReduction) {
  for (DataType dt : kDtypes) check("MatMul", "", dt, {Shape64{9, 4099}, Shape64{4099, 17}});
}

TEST_F(CublasLtTest, EveryHeuristicIndexAndTf32) {
  for (int i = 0; i < 4; ++i) {
    std::string idx = std::to_string(i);
    check("ingot::FusedGemm", "kind=\"matmul\", activation=\"Relu\"", DataType::kFloat32,
          {Shape64{4, 64, 128}, Shape64{128, 96}, Shape64{96}, std::nullopt}, "cuda.cublaslt." + idx);
    check("ingot::FusedGemm", "kind=\"matmul\", activation=\"Relu\"", DataType::kFloat32,
          {Shape64{4, 64, 128}, Shape64{128, 96}, Shape64{96}, std::nullopt}, "cuda.cublaslt.tf32." + idx);
    check("MatMul", "", DataType::kFloat16, {Shape64{256, 512}, Shape64{512, 384}}, "cuda.cublaslt." + idx);
  }
}

// One tactic serves several shapes (dynamic profiles): each shape gets its own plan and
// returning to an earlier shape reuses it.
TEST_F(CublasLtTest, DynamicShapesKeepSeparatePlans) {
  auto g = parse_graph(R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %a: f16[batch,seq,37]
    input %w: f16[37,29]
    input %c: f16[29]
    %y = ingot::FusedGemm {kind="matmul", activation="GeluTanh"}(%a, %w, %c) @n
    output %y
  })");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  auto tactic = make_tactic("cuda.cublaslt.0");
  ASSERT_TRUE(tactic->supports(node, input_types(node)));
  for (int64_t b : {1, 8, 3, 1, 8}) {
    int64_t s = 2 * b + 1;
    std::vector<Tensor> in = {random_tensor(DataType::kFloat16, {b, s, 37}, rng_),
                              random_tensor(DataType::kFloat16, {37, 29}, rng_),
                              random_tensor(DataType::kFloat16, {29}, rng_)};
    auto got = run_tactic(*tactic, node, in, {{b, s, 29}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run_reference(node, in);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_TRUE(gemm_close((*got)[0], (*want)[0], norm_tolerance(DataType::kFloat16, false))) << "batch " << b;
  }
}

// Activations without a cuBLASLt epilogue run our unary kernel after the bias epilogue (BERT's
// FFN is Gemm + exact Gelu, its pooler Gemm + Tanh), with a residual before them and a batch, in
// every precision.
TEST_F(CublasLtTest, ActivationsAfterTheEpilogue) {
  const char* acts[] = {"activation=\"Gelu\"", "activation=\"Tanh\"", "activation=\"Sigmoid\"", "activation=\"Silu\"",
                        "activation=\"HardSwish\"", "activation=\"LeakyRelu\", activation_params=[0.1]",
                        "activation=\"HardSigmoid\", activation_params=[0.2, 0.5]",
                        "activation=\"Clip\", activation_params=[-0.5, 0.75]"};
  for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
    for (const char* act : acts) {
      const std::vector<Input> ins = {Shape64{3, 33, 64}, Shape64{64, 47}, Shape64{47}, Shape64{3, 33, 47}};
      auto g = parse_graph(one_node_graph("ingot::FusedGemm", std::string("kind=\"matmul\", ") + act, dt, ins));
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      std::vector<Tensor> in = {random_tensor(dt, {3, 33, 64}, rng_, -0.3, 0.3), random_tensor(dt, {64, 47}, rng_, -0.3, 0.3),
                                random_tensor(dt, {47}, rng_), random_tensor(dt, {3, 33, 47}, rng_)};
      auto got = run_tactic(*make_tactic("cuda.cublaslt.0"), *(*g)->nodes()[0], in);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      auto want = run_reference(*(*g)->nodes()[0], in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      const double tol = dt == DataType::kFloat32 ? 1e-5 : dt == DataType::kFloat16 ? 2e-3 : 1e-2;
      EXPECT_TRUE(gemm_close((*got)[0], (*want)[0], tol)) << act << " " << data_type_name(dt);
    }
}

// cuBLASLt's GELU epilogue is the tanh form, which this harness tells apart from the erf form
// at fp32 tolerance (the control must fail); exact Gelu (erf) runs the bias epilogue and then
// our Gelu kernel, and must match the erf form (other precisions: ActivationsAfterTheEpilogue).
TEST_F(CublasLtTest, GeluEpilogueIsTheTanhForm) {
  const std::vector<Input> ins = {Shape64{33, 64}, Shape64{64, 47}, Shape64{47}, std::nullopt};
  auto tanh_graph = parse_graph(one_node_graph("ingot::FusedGemm", "kind=\"gemm\", activation=\"GeluTanh\"",
                                           DataType::kFloat32, ins));
  auto erf_graph = parse_graph(one_node_graph("ingot::FusedGemm", "kind=\"gemm\", activation=\"Gelu\"",
                                          DataType::kFloat32, ins));
  ASSERT_TRUE(tanh_graph.ok() && erf_graph.ok());
  std::vector<Tensor> in = {random_tensor(DataType::kFloat32, {33, 64}, rng_, -0.3, 0.3),
                            random_tensor(DataType::kFloat32, {64, 47}, rng_, -0.3, 0.3),
                            random_tensor(DataType::kFloat32, {47}, rng_), Tensor()};
  auto got = run_tactic(*make_tactic("cuda.cublaslt.0"), *(*tanh_graph)->nodes()[0], in);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto want_tanh = run_reference(*(*tanh_graph)->nodes()[0], in);
  auto want_erf = run_reference(*(*erf_graph)->nodes()[0], in);
  ASSERT_TRUE(want_tanh.ok() && want_erf.ok());
  EXPECT_TRUE(gemm_close((*got)[0], (*want_tanh)[0], 1e-5));
  EXPECT_FALSE(gemm_close((*got)[0], (*want_erf)[0], 1e-5));
  std::printf("[ cublaslt ] GELU epilogue vs tanh form %.3g, vs erf form %.3g (normwise)\n",
              normwise_error((*got)[0], (*want_tanh)[0]), normwise_error((*got)[0], (*want_erf)[0]));
  auto exact = run_tactic(*make_tactic("cuda.cublaslt.0"), *(*erf_graph)->nodes()[0], in);
  ASSERT_TRUE(exact.ok()) << exact.status().to_string();
  EXPECT_TRUE(gemm_close((*exact)[0], (*want_erf)[0], 1e-5));
  EXPECT_FALSE(gemm_close((*exact)[0], (*want_tanh)[0], 1e-5));
}

#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
// cuDNN's matmul + bias + GELU_FWD graph (the exact erf Gelu in one kernel): offered for BERT's
// FFN shape, equal to the reference at the precision's tolerance, with and without a bias.
TEST_F(CublasLtTest, CudnnMatmulWithExactGelu) {
  struct Case { Shape64 a; int64_t n; bool bias; };
  const Case cases[] = {{{128, 768}, 3072, true}, {{3, 33, 64}, 48, true}, {{2, 40, 32}, 16, false}};
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16})
    for (const Case& c : cases) {
      const int64_t k = c.a.back();
      Shape64 out = c.a;
      out.back() = c.n;
      std::vector<Input> ins = {c.a, Shape64{k, c.n}};
      if (c.bias) ins.push_back(Shape64{c.n});
      auto g = parse_graph(one_node_graph("ingot::FusedGemm", "kind=\"matmul\", activation=\"Gelu\"", dt, ins));
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      const ir::Node& node = *(*g)->nodes()[0];
      auto cands = backend::cuda::cudnn_matmul_family().candidates(node, input_types(node));
      ASSERT_FALSE(cands.empty()) << "cuDNN matmul+Gelu not offered for " << shape_to_string(c.a) << " x [" << k
                                  << "," << c.n << "] " << data_type_name(dt);
      std::vector<Tensor> in = {random_tensor(dt, c.a, rng_, -0.3, 0.3), random_tensor(dt, {k, c.n}, rng_, -0.3, 0.3)};
      if (c.bias) in.push_back(random_tensor(dt, {c.n}, rng_));
      auto want = run_reference(node, in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      for (const auto& t : cands) {
        auto got = run_tactic(*t, node, in);
        ASSERT_TRUE(got.ok()) << t->name() << ": " << got.status().to_string();
        const double tol = dt == DataType::kFloat16 ? 2e-3 : 1e-2;
        EXPECT_TRUE(gemm_close((*got)[0], (*want)[0], tol)) << t->name() << " " << shape_to_string(c.a) << " "
                                                            << data_type_name(dt);
        std::printf("[ cudnn.matmul ] %s %s x [%lld,%lld] %s normwise %.3g\n", t->name().c_str(),
                    shape_to_string(c.a).c_str(), static_cast<long long>(k), static_cast<long long>(c.n),
                    data_type_name(dt), normwise_error((*got)[0], (*want)[0]));
        auto again = backend::cuda::cudnn_matmul_family().create(t->name(), t->serialize());
        ASSERT_NE(again, nullptr) << t->name();
        EXPECT_EQ(again->name(), t->name());
      }
    }
}
#endif

#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
// BERT-base FFN1 at batch 64 (M 8192, K 768, N 3072, fp16): the bias-only GEMM, cuBLASLt's bias
// epilogue + our Gelu pass, and each cuDNN matmul + Gelu plan, in microseconds per call.
TEST_F(CublasLtTest, TimingBertFfnWithGelu) {
  const Shape64 a = {8192, 768}, w = {768, 3072}, b = {3072}, y = {8192, 3072};
  std::vector<Tensor> dev;
  for (const Shape64& s : {a, w, b}) {
    auto d = upload(random_tensor(DataType::kFloat16, s, rng_, -0.3, 0.3));
    ASSERT_TRUE(d.ok());
    dev.push_back(*d);
  }
  auto out = device_alloc(DataType::kFloat16, y);
  ASSERT_TRUE(out.ok());
  std::vector<Tensor> outs = {*out};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const double gflop = 2.0 * 8192 * 768 * 3072 / 1e9;
  for (const char* act : {"", "Gelu"}) {
    const std::string attrs = std::string("kind=\"matmul\"") + (*act ? std::string(", activation=\"") + act + "\"" : "");
    auto g = parse_graph(one_node_graph("ingot::FusedGemm", attrs, DataType::kFloat16, {a, w, b}));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    std::vector<std::unique_ptr<backend::Tactic>> tactics;
    tactics.push_back(make_tactic("cuda.cublaslt.0"));
    if (*act)
      for (auto& t : backend::cuda::cudnn_matmul_family().candidates(node, input_types(node))) tactics.push_back(std::move(t));
    for (const auto& t : tactics) {
      ASSERT_TRUE(t->prepare(node).ok());
      DeviceBuffer ws(std::max<uint64_t>(t->workspace_bytes(node, {a, w, b}), 1));
      backend::StepIO io;
      io.node = &node;
      io.inputs = {&dev[0], &dev[1], &dev[2]};
      io.outputs = &outs;
      io.stream = stream;
      io.workspace = ws.get();
      auto us = median_enqueue_us(*t, io);
      ASSERT_TRUE(us.has_value()) << t->name();
      std::printf("[timing] %-20s BERT FFN1 b64 fp16 %-5s %7.1f us  %5.0f TFLOP/s\n", t->name().c_str(),
                  *act ? act : "bias", *us, gflop / *us * 1e3);
    }
  }
  cudaStreamDestroy(stream);
}
#endif

// Device views the test places itself: offsets from the allocation (alignment), the output
// aliasing the residual (an in-place step), and a CUDA graph capture of enqueue.
// Uploads `host` into an allocation one element larger and views it from element `offset`.
Result<Tensor> upload_at(const Tensor& host, int64_t offset, std::vector<Tensor>* owners) {
  Shape64 flat{host.numel() + offset};
  INGOT_ASSIGN_OR_RETURN(Tensor buf, device_alloc(host.dtype(), flat));
  owners->push_back(buf);
  size_t esize = storage_bytes(host.dtype(), 1);
  auto* base = static_cast<uint8_t*>(buf.mutable_raw()) + offset * static_cast<int64_t>(esize);
  INGOT_RETURN_IF_ERROR(cuda_status(cudaMemcpy(base, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy"));
  return Tensor::borrow(host.dtype(), host.shape(), base, nullptr);
}

TEST_F(CublasLtTest, MisalignedViewsAndInPlaceResidual) {
  for (DataType dt : kDtypes) {
    SCOPED_TRACE(data_type_name(dt));
    const std::vector<Input> ins = {Shape64{3, 21, 45}, Shape64{45, 27}, Shape64{27}, Shape64{3, 21, 27}};
    auto g = parse_graph(one_node_graph("ingot::FusedGemm", "kind=\"matmul\", activation=\"Relu\"", dt, ins));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    std::vector<Tensor> host;
    for (const Input& s : ins) host.push_back(random_tensor(dt, *s, rng_));
    auto want = run_reference(node, host);
    ASSERT_TRUE(want.ok());
    auto tactic = make_tactic("cuda.cublaslt.0");
    for (int64_t offset : {1, 3, 8}) {
      std::vector<Tensor> owners, views;
      for (const Tensor& h : host) {
        auto v = upload_at(h, offset, &owners);
        ASSERT_TRUE(v.ok()) << v.status().to_string();
        views.push_back(*v);
      }
      std::vector<const Tensor*> ptrs;
      for (const Tensor& v : views) ptrs.push_back(&v);
      // The output is the residual's own storage: D aliases C.
      std::vector<Tensor> outs = {views[3]};
      DeviceBuffer ws(tactic->workspace_bytes(node, {}));
      backend::StepIO io;
      io.node = &node;
      io.inputs = ptrs;
      io.outputs = &outs;
      io.workspace = ws.get();
      io.in_place = true;
      ASSERT_TRUE(tactic->enqueue(io).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got = download(outs[0]);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(gemm_close(*got, (*want)[0], norm_tolerance(dt, false))) << "offset " << offset;
    }
  }
}

TEST_F(CublasLtTest, EnqueueCapturesIntoCudaGraph) {
  const std::vector<Input> ins = {Shape64{4, 33, 65}, Shape64{65, 40}, Shape64{40}, std::nullopt};
  auto g = parse_graph(one_node_graph("ingot::FusedGemm", "kind=\"matmul\", activation=\"GeluTanh\"", DataType::kFloat16, ins));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host = {random_tensor(DataType::kFloat16, {4, 33, 65}, rng_),
                              random_tensor(DataType::kFloat16, {65, 40}, rng_),
                              random_tensor(DataType::kFloat16, {40}, rng_), Tensor()};
  auto want = run_reference(node, host);
  ASSERT_TRUE(want.ok());
  std::vector<Tensor> dev(3);
  std::vector<const Tensor*> ptrs(4, nullptr);
  for (size_t i = 0; i < 3; ++i) {
    auto d = upload(host[i]);
    ASSERT_TRUE(d.ok());
    dev[i] = *d;
    ptrs[i] = &dev[i];
  }
  auto y = device_alloc(DataType::kFloat16, {4, 33, 40});
  ASSERT_TRUE(y.ok());
  std::vector<Tensor> outs = {*y};
  auto tactic = make_tactic("cuda.cublaslt.1");
  DeviceBuffer ws(tactic->workspace_bytes(node, {}));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend::StepIO io;
  io.node = &node;
  io.inputs = ptrs;
  io.outputs = &outs;
  io.workspace = ws.get();
  io.stream = stream;
  ASSERT_TRUE(tactic->enqueue(io).ok());  // warm-up: builds the plan for this shape
  ASSERT_TRUE(poison(outs[0]).ok());
  {
    const Status st = capture_and_replay(*tactic, io);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(gemm_close(*got, (*want)[0], norm_tolerance(DataType::kFloat16, false)));
  cudaStreamDestroy(stream);
}

TEST_F(CublasLtTest, CandidatesOnDeviceStartWithTheFirstHeuristic) {
  auto g = parse_graph(one_node_graph("MatMul", "", DataType::kFloat32, {Shape64{64, 128}, Shape64{128, 96}}));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  auto cands = backend::cuda::cublaslt_family().candidates(node, input_types(node));
  ASSERT_GE(cands.size(), 2u);
  ASSERT_LE(cands.size(), 8u);
  EXPECT_EQ(cands[0]->name(), "cuda.cublaslt.0");
  bool seen_tf32 = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    bool tf32 = cands[i]->name().find("tf32") != std::string::npos;
    EXPECT_TRUE(tf32 || !seen_tf32) << "exact tactics come before TF32 ones";
    seen_tf32 |= tf32;
    EXPECT_TRUE(cands[i]->supports(node, input_types(node))) << cands[i]->name();
    EXPECT_EQ(cands[i]->workspace_bytes(node, {{64, 128}, {128, 96}}), 32u << 20);
  }
  EXPECT_TRUE(seen_tf32);
}

// ---- host-only tests (no device needed) ---------------------------------------------------

// An N whose bytes are not a multiple of 16 (GPT-2's LM head, N = 50257) with B stored [N,K]:
// the split variants run the aligned columns and the 1-7 column tail as two GEMMs, straight into
// y ("split") or into a 16-byte-pitched D in the workspace that is then copied into place
// ("padded"). Same outputs as the reference (tails of 1, 5 and 7 columns, with a bias and a Gelu
// after it); offered only for such shapes; a residual is refused at enqueue.
TEST_F(CublasLtTest, SplitVariantsForAMisalignedN) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16})
    for (const char* tactic : {"cuda.cublaslt.split.0", "cuda.cublaslt.padded.0", "cuda.cublaslt.split.1"}) {
      SCOPED_TRACE(tactic);
      check("Gemm", "transB=1", dt, {Shape64{65, 96}, Shape64{1001, 96}, Shape64{1001}}, tactic);
      check("Gemm", "transB=1", dt, {Shape64{3, 64}, Shape64{13, 64}}, tactic);
      check("ingot::FusedGemm", "transB=1, activation=\"Gelu\"", dt, {Shape64{40, 32}, Shape64{999, 32}, Shape64{999}},
            tactic);
    }
  auto names = candidate_names;
  auto has_split = [](const std::vector<std::string>& v) {
    return std::any_of(v.begin(), v.end(), [](const std::string& n) {
      return n.rfind("cuda.cublaslt.split.", 0) == 0 || n.rfind("cuda.cublaslt.padded.", 0) == 0;
    });
  };
  const auto misaligned = names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{64, 32}, Shape64{1001, 32}}));
  ASSERT_GE(misaligned.size(), 3u);
  // Interleaved from the first, so the default optimization level (4 timed) times every kind.
  EXPECT_EQ(misaligned[0], "cuda.cublaslt.split.0");
  EXPECT_EQ(misaligned[1], "cuda.cublaslt.padded.0");
  EXPECT_EQ(misaligned[2], "cuda.cublaslt.0");
  EXPECT_FALSE(has_split(names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{64, 32}, Shape64{1024, 32}}))));
  EXPECT_FALSE(has_split(names(one_node_graph("Gemm", "transB=1", DataType::kFloat32, {Shape64{64, 32}, Shape64{1001, 32}}))));
  // B stored [K,N]: its last columns are not a GEMM of their own.
  EXPECT_FALSE(has_split(names(one_node_graph("MatMul", "", DataType::kFloat16, {Shape64{64, 32}, Shape64{32, 1001}}))));
  // Fewer than 8 columns: nothing aligned to split off.
  EXPECT_FALSE(has_split(names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{64, 32}, Shape64{5, 32}}))));
  auto g = parse_graph(one_node_graph("ingot::FusedGemm", "transB=1", DataType::kFloat16,
                                  {Shape64{8, 16}, Shape64{33, 16}, Shape64{33}, Shape64{8, 33}}));
  ASSERT_TRUE(g.ok());
  std::vector<Tensor> in;
  for (const Shape64& sh : {Shape64{8, 16}, Shape64{33, 16}, Shape64{33}, Shape64{8, 33}})
    in.push_back(random_tensor(DataType::kFloat16, sh, rng_));
  for (const char* tactic : {"cuda.cublaslt.split.0", "cuda.cublaslt.padded.0"}) {
    auto got = run_tactic(*make_tactic(tactic), *(*g)->nodes()[0], in);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnsupported) << got.status().to_string();
  }
}

// The "rows" variant: GEMMs over the rows r with r mod 8 = j (fp16/bf16) and their 16-byte-aligned
// columns, written straight into y, and a kernel for the 1-14 edge columns per row. Row counts
// that are not multiples of 8, N mod 8 of 1, 3 and 7, alpha, and a Gelu run after it (kPost);
// offered only with enough rows (2·M >= 7·K) and no bias; a bias is refused at enqueue.
TEST_F(CublasLtTest, RowsVariantForAMisalignedN) {
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16})
    for (const char* tactic : {"cuda.cublaslt.rows.0", "cuda.cublaslt.rows.1"}) {
      SCOPED_TRACE(tactic);
      check("Gemm", "transB=1", dt, {Shape64{130, 32}, Shape64{1001, 32}}, tactic);
      check("Gemm", "transB=1, alpha=0.5", dt, {Shape64{117, 32}, Shape64{1003, 32}}, tactic);
      check("Gemm", "transB=1", dt, {Shape64{260, 64}, Shape64{15, 64}}, tactic);
      check("ingot::FusedGemm", "transB=1, activation=\"Gelu\"", dt, {Shape64{200, 32}, Shape64{999, 32}}, tactic);
    }
  auto names = candidate_names;
  auto has_rows = [](const std::vector<std::string>& v) {
    return std::any_of(v.begin(), v.end(), [](const std::string& n) { return n.rfind("cuda.cublaslt.rows.", 0) == 0; });
  };
  const auto tall = names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{4096, 768}, Shape64{50257, 768}}));
  ASSERT_FALSE(tall.empty());
  EXPECT_EQ(tall[0], "cuda.cublaslt.rows.0");
  // GPT-2's head at batch 1 (M = 128): re-reading the weight 8 times costs more than the copy.
  EXPECT_FALSE(has_rows(names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{128, 768}, Shape64{50257, 768}}))));
  EXPECT_FALSE(has_rows(names(one_node_graph("Gemm", "transB=1", DataType::kFloat16,
                                         {Shape64{4096, 768}, Shape64{50257, 768}, Shape64{50257}}))));
  EXPECT_FALSE(has_rows(names(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{4096, 768}, Shape64{50264, 768}}))));
  auto g = parse_graph(one_node_graph("Gemm", "transB=1", DataType::kFloat16, {Shape64{256, 16}, Shape64{33, 16}, Shape64{33}}));
  ASSERT_TRUE(g.ok());
  std::vector<Tensor> in;
  for (const Shape64& sh : {Shape64{256, 16}, Shape64{33, 16}, Shape64{33}}) in.push_back(random_tensor(DataType::kFloat16, sh, rng_));
  auto got = run_tactic(*make_tactic("cuda.cublaslt.rows.0"), *(*g)->nodes()[0], in);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnsupported) << got.status().to_string();
}

TEST(CublasLtFamily, NamesAndParamsRoundTrip) {
  auto family = backend::cuda::cublaslt_family();
  EXPECT_EQ(family.name, "cublaslt");
  for (const std::string name : {"cuda.cublaslt.0", "cuda.cublaslt.3", "cuda.cublaslt.tf32.0", "cuda.cublaslt.tf32.2",
                                 "cuda.cublaslt.padded.0", "cuda.cublaslt.padded.3", "cuda.cublaslt.split.0",
                                 "cuda.cublaslt.split.3", "cuda.cublaslt.rows.0", "cuda.cublaslt.rows.3"}) {
    auto t = family.create(name, {});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name(), name);
    auto again = family.create(name, t->serialize());
    ASSERT_NE(again, nullptr) << name;
    EXPECT_EQ(again->name(), name);
  }
  for (const std::string bad : {"cuda.cublaslt.4", "cuda.cublaslt.", "cuda.cublaslt.x", "cuda.cublaslt.12",
                                "cuda.cublaslt.tf32.", "cuda.elementwise.Relu", "cpu.reference"})
    EXPECT_EQ(family.create(bad, {}), nullptr) << bad;
  // Params that disagree with the name (another index, another variant, unknown version).
  EXPECT_EQ(family.create("cuda.cublaslt.1", {1, 2, 0}), nullptr);
  EXPECT_EQ(family.create("cuda.cublaslt.1", {1, 1, 1}), nullptr);
  EXPECT_EQ(family.create("cuda.cublaslt.1", {9, 1, 0}), nullptr);
}

TEST(CublasLtFamily, CandidatesWithoutDeviceAreTheFirstHeuristic) {
  if (cuda_unavailable_reason().empty()) GTEST_SKIP() << "a device is present (see CandidatesOnDevice...)";
  auto names = candidate_names;
  EXPECT_EQ(names(one_node_graph("MatMul", "", DataType::kFloat32, {Shape64{4, 8}, Shape64{8, 3}})),
            (std::vector<std::string>{"cuda.cublaslt.0", "cuda.cublaslt.tf32.0"}));
  EXPECT_EQ(names(one_node_graph("Gemm", "", DataType::kFloat16, {Shape64{4, 8}, Shape64{8, 3}})),
            (std::vector<std::string>{"cuda.cublaslt.0"}));
  EXPECT_TRUE(names("graph g {\n  opset \"\" 17\n  input %x: f32[3]\n  %y = Relu(%x)\n  output %y\n}\n").empty());
}

struct SupportCase {
  std::string text;
  bool supported;
};

TEST(CublasLtFamily, SupportsExactlyWhatMapsOntoCublasLt) {
  auto graph = [](const std::string& inputs, const std::string& node) {
    return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n" + inputs + "  %y = " + node + " @n\n  output %y\n}\n";
  };
  const std::string ab = "  input %a: f32[8,16]\n  input %b: f32[16,4]\n";
  const std::vector<SupportCase> cases = {
      {graph(ab, "MatMul(%a, %b)"), true},
      {graph("  input %a: f16[batch,seq,16]\n  input %b: f16[16,4]\n", "MatMul(%a, %b)"), true},
      {graph("  input %a: bf16[n,8,16]\n  input %b: bf16[n,16,4]\n", "MatMul(%a, %b)"), true},
      {graph("  input %a: f32[16]\n  input %b: f32[16,4]\n", "MatMul(%a, %b)"), true},
      // Partial batch broadcast, or symbols that may differ: refused.
      {graph("  input %a: f32[2,1,8,16]\n  input %b: f32[1,3,16,4]\n", "MatMul(%a, %b)"), false},
      {graph("  input %a: f32[n,8,16]\n  input %b: f32[m,16,4]\n", "MatMul(%a, %b)"), false},
      // Integer and double GEMMs are not cuBLASLt float tactics.
      {graph("  input %a: i32[8,16]\n  input %b: i32[16,4]\n", "MatMul(%a, %b)"), false},
      {graph("  input %a: f64[8,16]\n  input %b: f64[16,4]\n", "MatMul(%a, %b)"), false},
      // Gemm's C: bias over N with beta 1, or a full matrix; other broadcasts refused.
      {graph(ab + "  input %c: f32[4]\n", "Gemm(%a, %b, %c)"), true},
      {graph(ab + "  input %c: f32[1,4]\n", "Gemm(%a, %b, %c)"), true},
      {graph(ab + "  input %c: f32[8,4]\n", "Gemm {beta=2.0}(%a, %b, %c)"), true},
      {graph(ab + "  input %c: f32[4]\n", "Gemm {beta=2.0}(%a, %b, %c)"), false},
      {graph(ab + "  input %c: f32[1]\n", "Gemm(%a, %b, %c)"), false},
      {graph(ab + "  input %c: f32[8,1]\n", "Gemm(%a, %b, %c)"), false},
      {graph(ab + "  input %c: f32[1]\n", "Gemm {beta=0.0}(%a, %b, %c)"), true},
      // FusedGemm epilogues.
      {graph(ab + "  input %c: f32[4]\n", "ingot::FusedGemm {kind=\"gemm\", activation=\"Relu\"}(%a, %b, %c)"), true},
      {graph(ab + "  input %c: f32[4]\n", "ingot::FusedGemm {kind=\"gemm\", activation=\"GeluTanh\"}(%a, %b, %c)"),
       true},
      {graph(ab + "  input %c: f32[4]\n", "ingot::FusedGemm {kind=\"gemm\", activation=\"Gelu\"}(%a, %b, %c)"), true},
      {graph(ab, "ingot::FusedGemm {kind=\"gemm\", activation=\"Sigmoid\"}(%a, %b)"), true},
      {graph(ab, "ingot::FusedGemm {kind=\"gemm\", activation=\"Clip\"}(%a, %b)"), false},  // no [min, max]
      {graph(ab + "  input %r: f32[8,4]\n", "ingot::FusedGemm {kind=\"gemm\", activation=\"Relu\"}(%a, %b, _, %r)"),
       true},
      {graph(ab + "  input %r: f32[8,4]\n",
             "ingot::FusedGemm {kind=\"gemm\", activation=\"Relu\", residual_before_activation=0}(%a, %b, _, %r)"),
       false},
      {graph(ab + "  input %r: f32[8,4]\n", "ingot::FusedGemm {kind=\"gemm\", residual_before_activation=0}(%a, %b, _, %r)"),
       true},
      // A full C matrix and a residual would both need cuBLASLt's one C.
      {graph(ab + "  input %c: f32[8,4]\n  input %r: f32[8,4]\n", "ingot::FusedGemm {kind=\"gemm\"}(%a, %b, %c, %r)"),
       false},
      {graph(ab + "  input %c: f32[4]\n  input %r: f32[8,4]\n", "ingot::FusedGemm {kind=\"gemm\"}(%a, %b, %c, %r)"),
       true},
      {graph("  input %a: f16[2,8,16]\n  input %b: f16[16,4]\n  input %c: f16[1,1,4]\n  input %r: f16[2,8,4]\n",
             "ingot::FusedGemm {kind=\"matmul\", activation=\"Relu\"}(%a, %b, %c, %r)"),
       true},
      {graph(ab + "  input %c: f32[4]\n", "ingot::FusedGemm {kind=\"matmul\", transA=1}(%a, %b, %c)"), false},
      // Bias scaled by beta cannot go through the epilogue; a bias over M (B a vector) neither.
      {graph(ab + "  input %c: f32[4]\n", "ingot::FusedGemm {kind=\"matmul\", beta=0.5}(%a, %b, %c)"), false},
      {graph("  input %a: f32[8,16]\n  input %b: f32[16]\n  input %c: f32[8]\n",
             "ingot::FusedGemm {kind=\"matmul\"}(%a, %b, %c)"),
       false},
      // Mixed dtypes.
      {graph("  input %a: f16[8,16]\n  input %b: f32[16,4]\n", "Gemm(%a, %b)"), false},
  };
  for (const auto& c : cases) {
    auto g = parse_graph(c.text);
    if (!g.ok()) {
      // Mixed dtypes may already be rejected by inference; that is a refusal too.
      EXPECT_FALSE(c.supported) << c.text << g.status().to_string();
      continue;
    }
    const ir::Node& node = *(*g)->nodes()[0];
    for (const std::string name : {"cuda.cublaslt.0", "cuda.cublaslt.2"})
      EXPECT_EQ(make_tactic(name)->supports(node, input_types(node)), c.supported) << name << "\n" << c.text;
    // TF32 tactics take fp32 only.
    bool f32 = node.input(0)->dtype() == DataType::kFloat32;
    EXPECT_EQ(make_tactic("cuda.cublaslt.tf32.0")->supports(node, input_types(node)), c.supported && f32) << c.text;
  }
}

}  // namespace
}  // namespace ingot::gpu_test
