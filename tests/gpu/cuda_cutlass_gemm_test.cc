// Copyright ingot authors. Apache-2.0.
//
// The CUTLASS GEMM tactics (ingot::FusedGemm, fp16/bf16, bias and exact Gelu in the epilogue)
// against the CPU reference: every config on BERT-like and odd shapes (M not a multiple of any
// tile, leading batch dims), random non-zero data, with and without bias and Gelu, and with a
// random non-zero residual (bias + residual, no activation) on the configs that compile it. Large problems
// are checked on a sample of rows (the first tile, rows across tile boundaries, the middle, the
// last partial tile) so the reference stays quick; every element is checked for NaN (the
// output starts poisoned). Exact Gelu is told apart from the tanh form on inputs that make the
// two differ by tens of fp16 ulps. Device tests skip without a compute capability 9.0 device;
// name round trips and supports() decisions run wherever the family is built.
#ifdef INGOT_WITH_CUTLASS

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/gemm/cutlass_gemm_kernels.h"
#include "builder/autotune.h"
#include "builder/builder.h"
#include "gpu_test_util.h"
#include "runtime/engine_impl.h"

namespace ingot::gpu_test {
namespace {

constexpr const char* kPrefix = "cuda.cutlass.gemm.";

std::vector<std::string> tactic_names() {
  std::vector<std::string> names;
  for (int i = 0; i < backend::cuda::cutlass_gemm_config_count(); ++i)
    names.push_back(std::string(kPrefix) + backend::cuda::cutlass_gemm_config(i)->name);
  return names;
}

std::unique_ptr<backend::Tactic> make_tactic(const std::string& name) {
  return backend::cuda::cutlass_gemm_family().create(name, {});
}

// "" when the current device is compute capability 9.0, else why the device tests skip.
std::string not_sm90_reason() {
  std::string why = cuda_unavailable_reason();
  if (!why.empty()) return why;
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major == 9 && minor == 0) return "";
  return "the CUTLASS kernels are sm90a; device " + std::to_string(dev) + " is sm_" +
         std::to_string(major * 10 + minor);
}

class CutlassGemm : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    const std::string why = not_sm90_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  std::mt19937 rng_{20261201};
};

std::string dims_text(const Shape64& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

// One FusedGemm (kind matmul) node: A `a`, weight [K, N], optional bias [N], optional residual
// %r of Y's shape (input 3); `attrs` extra.
std::string gemm_graph(const Shape64& a, int64_t n, bool bias, const std::string& act, const std::string& dtype = "f16",
                       const std::string& attrs = "", bool residual = false) {
  const int64_t k = a.back();
  Shape64 y = a;
  y.back() = n;
  std::ostringstream os;
  os << "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n";
  os << "  input %a: " << dtype << dims_text(a) << "\n  input %w: " << dtype << "[" << k << "," << n << "]\n";
  if (bias) os << "  input %c: " << dtype << "[" << n << "]\n";
  if (residual) os << "  input %r: " << dtype << dims_text(y) << "\n";
  os << "  %y = ingot::FusedGemm {kind=\"matmul\"" << (act.empty() ? "" : ", activation=\"" + act + "\"") << attrs
     << "}(%a, %w" << (bias ? ", %c" : "") << (residual ? (bias ? ", %r" : ", _, %r") : "")
     << ") @ffn\n  output %y\n}\n";
  return os.str();
}

bool has_residual_kernel(int config) {
  return backend::cuda::cutlass_gemm_has_kernel(config, backend::cuda::CutlassEpilogue::kBiasResidual,
                                                backend::cuda::CutlassGemmType::kFloat16);
}

bool has_gelu_kernel(int config) {
  return backend::cuda::cutlass_gemm_has_kernel(config, backend::cuda::CutlassEpilogue::kBiasGelu,
                                                backend::cuda::CutlassGemmType::kFloat16);
}

// The tactics of the configs that compile the Gelu epilogue (all but 128x192).
std::vector<std::string> gelu_tactic_names() {
  std::vector<std::string> names;
  for (int i = 0; i < backend::cuda::cutlass_gemm_config_count(); ++i)
    if (has_gelu_kernel(i)) names.push_back(std::string(kPrefix) + backend::cuda::cutlass_gemm_config(i)->name);
  return names;
}

// The tactics of the configs that compile the residual epilogue.
std::vector<std::string> residual_tactic_names() {
  std::vector<std::string> names;
  for (int i = 0; i < backend::cuda::cutlass_gemm_config_count(); ++i)
    if (has_residual_kernel(i)) names.push_back(std::string(kPrefix) + backend::cuda::cutlass_gemm_config(i)->name);
  return names;
}

// Rows of the [M, N] result to compare: every row for small M; else the first rows, rows across
// the 128 and 256 tile boundaries, the middle and the last (partial-tile) rows.
std::vector<int64_t> rows_to_check(int64_t m) {
  std::vector<int64_t> rows;
  auto add = [&](int64_t lo, int64_t hi) {
    for (int64_t r = std::max<int64_t>(lo, 0); r < std::min(hi, m); ++r)
      if (rows.empty() || r > rows.back()) rows.push_back(r);
  };
  if (m <= 192) {
    add(0, m);
    return rows;
  }
  add(0, 24);
  add(120, 136);
  add(248, 264);
  add(m / 2 - 4, m / 2 + 4);
  add(m - 40, m);
  return rows;
}

// The rows `rows` of a row-major [M, cols] tensor, as [rows, cols].
Tensor gather_rows(const Tensor& t, int64_t cols, const std::vector<int64_t>& rows) {
  Tensor out = Tensor::zeros(t.dtype(), {static_cast<int64_t>(rows.size()), cols}).value();
  const size_t row_bytes = storage_bytes(t.dtype(), cols);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(out.mutable_raw()) + i * row_bytes,
                static_cast<const uint8_t*>(t.raw()) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  return out;
}

// GEMM tolerances: ||got - want|| / ||want|| below 2e-3 (fp16) or 1e-2 (bf16) and every element
// within 2.5 times that + as much relative (the reference rounds the product to the type before
// the bias and the activation, the kernel does not: about one ulp apart before the last rounding).
::testing::AssertionResult close_to(const Tensor& got, const Tensor& want) {
  if (got.numel() != want.numel()) return ::testing::AssertionFailure() << got.numel() << " vs " << want.numel();
  const double tol = want.dtype() == DataType::kBFloat16 ? 1e-2 : 2e-3;
  double diff2 = 0, ref2 = 0, worst = 0;
  int64_t bad = 0, worst_i = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get_f64(i), w = want.get_f64(i), d = std::fabs(g - w);
    if (std::isnan(g) != std::isnan(w))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
    diff2 += d * d;
    ref2 += w * w;
    if (d > 2.5 * tol * (1 + std::fabs(w))) ++bad;
    if (d > worst) {
      worst = d;
      worst_i = i;
    }
  }
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (rel < tol && bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "normwise " << rel << ", " << bad << " elements out of tolerance, worst "
                                       << worst << " at " << worst_i << " (got " << got.get_f64(worst_i) << ", want "
                                       << want.get_f64(worst_i) << ")";
}

struct DeviceCase {
  std::vector<Tensor> host;  // a, w, [bias], [residual] (an undefined bias before a residual: none)
  std::vector<Tensor> dev;
  // The step's inputs: null where the tensor is undefined (an omitted bias).
  std::vector<const Tensor*> io_inputs() const {
    std::vector<const Tensor*> in;
    for (const Tensor& t : dev) in.push_back(t.defined() ? &t : nullptr);
    return in;
  }
};

// Uniform [-1, 1] activations, weights scaled by 1/sqrt(K), bias in [-1, 1], residual (of Y's
// shape) in [-1, 1]; none zero.
DeviceCase make_case(const Shape64& a, int64_t n, bool bias, std::mt19937& rng, DataType dt = DataType::kFloat16,
                     bool residual = false) {
  const int64_t k = a.back();
  const double s = 1.0 / std::sqrt(static_cast<double>(k));
  DeviceCase c;
  c.host.push_back(random_tensor(dt, a, rng, -1.0, 1.0, true, 1e-3));
  c.host.push_back(random_tensor(dt, {k, n}, rng, -s, s, true, 1e-3 * s));
  if (bias)
    c.host.push_back(random_tensor(dt, {n}, rng, -1.0, 1.0, true, 1e-3));
  else if (residual)
    c.host.emplace_back();
  if (residual) {
    Shape64 y = a;
    y.back() = n;
    c.host.push_back(random_tensor(dt, y, rng, -1.0, 1.0, true, 1e-3));
  }
  for (const Tensor& h : c.host) c.dev.push_back(h.defined() ? upload(h).value() : Tensor());
  return c;
}

// Runs `tactic` on the uploaded case into a poisoned output of `y_shape`; the output on the host.
Result<Tensor> run_on(const backend::Tactic& tactic, const ir::Node& node, DeviceCase& c, const Shape64& y_shape) {
  INGOT_ASSIGN_OR_RETURN(Tensor y, device_alloc(c.host[0].dtype(), y_shape));
  INGOT_RETURN_IF_ERROR(poison(y));
  std::vector<Tensor> outs = {y};
  std::vector<Shape64> shapes;
  backend::StepIO io;
  io.node = &node;
  io.inputs = c.io_inputs();
  for (const Tensor& t : c.dev) shapes.push_back(t.defined() ? t.shape() : Shape64{});
  io.outputs = &outs;
  DeviceBuffer ws(tactic.workspace_bytes(node, shapes));
  io.workspace = ws.get();
  INGOT_RETURN_IF_ERROR(tactic.enqueue(io));
  INGOT_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  return download(outs[0]);
}

// ---- device tests -------------------------------------------------------------------------

// Every config, fp16 and bf16, with and without bias and Gelu, against the reference on sampled rows.
TEST_F(CutlassGemm, EveryConfigMatchesTheReference) {
  struct Case {
    Shape64 a;
    int64_t n;
  };
  const Case cases[] = {
      {{77, 768}, 768},        // M below every tile height
      {{2, 64, 768}, 3072},    // M 128, leading batch dims
      {{1000, 3072}, 768},     // M not a multiple of a tile, K 3072
      {{64, 128, 768}, 3072},  // BERT-base FFN1 at batch 64 (M 8192)
      {{8192, 3072}, 768},     // FFN2
      {{3, 5, 40}, 24},        // K and N below one tile
      {{1, 8}, 8},             // one row
  };
  const auto names = tactic_names();
  ASSERT_FALSE(names.empty());
  for (const Case& cs : cases) {
    const int64_t k = cs.a.back();
    int64_t m = 1;
    for (size_t i = 0; i + 1 < cs.a.size(); ++i) m *= cs.a[i];
    const std::vector<int64_t> rows = rows_to_check(m);
    Shape64 y_shape = cs.a;
    y_shape.back() = cs.n;
    for (int variant = 0; variant < 4; ++variant) {
      const int bias = variant % 2 == 0;
      const DataType dt = variant < 2 ? DataType::kFloat16 : DataType::kBFloat16;
      const std::string type = dt == DataType::kFloat16 ? "f16" : "bf16";
      DeviceCase c = make_case(cs.a, cs.n, bias != 0, rng_, dt);
      // The reference on the sampled rows only: the same node with A's rows gathered.
      std::vector<Tensor> ref_in = {gather_rows(c.host[0], k, rows), c.host[1]};
      if (bias) ref_in.push_back(c.host[2]);
      for (const std::string act : {"Gelu", ""}) {
        const std::string what = type + " A " + dims_text(cs.a) + " N " + std::to_string(cs.n) + (bias ? " bias" : "") +
                                 (act.empty() ? "" : " Gelu");
        SCOPED_TRACE(what);
        auto g = parse_graph(gemm_graph(cs.a, cs.n, bias != 0, act, type));
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        auto gs = parse_graph(gemm_graph({static_cast<int64_t>(rows.size()), k}, cs.n, bias != 0, act, type));
        ASSERT_TRUE(gs.ok()) << gs.status().to_string();
        const ir::Node& node = *(*g)->nodes()[0];
        auto want = run_reference(*(*gs)->nodes()[0], ref_in);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        for (size_t ci = 0; ci < names.size(); ++ci) {
          const std::string& name = names[ci];
          auto tactic = make_tactic(name);
          ASSERT_NE(tactic, nullptr) << name;
          const bool compiled = act.empty() || has_gelu_kernel(static_cast<int>(ci));
          ASSERT_EQ(tactic->supports(node, input_types(node)), compiled) << name;
          if (!compiled) continue;  // 128x192: no Gelu kernel
          auto got = run_on(*tactic, node, c, y_shape);
          ASSERT_TRUE(got.ok()) << name << ": " << got.status().to_string();
          int64_t nans = 0;
          for (int64_t i = 0; i < got->numel(); ++i) nans += std::isnan(got->get_f64(i)) ? 1 : 0;
          EXPECT_EQ(nans, 0) << name << ": unwritten (NaN) elements";
          EXPECT_TRUE(close_to(gather_rows(*got, cs.n, rows), (*want)[0])) << name;
        }
      }
    }
  }
}

// Bias + residual, no activation (BERT's attention-output projection and FFN2), fp16 and bf16,
// with and without bias, on every config that compiles the residual epilogue, against the reference
// (act(y + bias + R) with no activation, in double, rounded once) on sampled rows; the residual is
// random and non-zero. The other configs refuse the node.
TEST_F(CutlassGemm, ResidualMatchesTheReference) {
  struct Case {
    Shape64 a;
    int64_t n;
  };
  const Case cases[] = {
      {{77, 768}, 768},        // M below every tile height
      {{2, 64, 768}, 3072},    // M 128, leading batch dims
      {{1000, 3072}, 768},     // M not a multiple of a tile, K 3072
      {{64, 128, 768}, 768},   // BERT-base attention output at batch 64 (M 8192)
      {{64, 128, 3072}, 768},  // FFN2
      {{3, 5, 40}, 24},        // K and N below one tile
      {{1, 8}, 8},             // one row
  };
  const auto names = residual_tactic_names();
  ASSERT_FALSE(names.empty()) << "no config compiles the residual epilogue";
  for (const Case& cs : cases) {
    const int64_t k = cs.a.back();
    int64_t m = 1;
    for (size_t i = 0; i + 1 < cs.a.size(); ++i) m *= cs.a[i];
    const std::vector<int64_t> rows = rows_to_check(m);
    Shape64 y_shape = cs.a;
    y_shape.back() = cs.n;
    for (int variant = 0; variant < 4; ++variant) {
      const bool bias = variant % 2 == 0;
      const DataType dt = variant < 2 ? DataType::kFloat16 : DataType::kBFloat16;
      const std::string type = dt == DataType::kFloat16 ? "f16" : "bf16";
      DeviceCase c = make_case(cs.a, cs.n, bias, rng_, dt, true);
      std::vector<Tensor> ref_in = {gather_rows(c.host[0], k, rows), c.host[1], c.host[2],
                                    gather_rows(c.host[3], cs.n, rows)};
      const std::string what =
          type + " A " + dims_text(cs.a) + " N " + std::to_string(cs.n) + (bias ? " bias" : "") + " residual";
      SCOPED_TRACE(what);
      auto g = parse_graph(gemm_graph(cs.a, cs.n, bias, "", type, "", true));
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      auto gs = parse_graph(gemm_graph({static_cast<int64_t>(rows.size()), k}, cs.n, bias, "", type, "", true));
      ASSERT_TRUE(gs.ok()) << gs.status().to_string();
      const ir::Node& node = *(*g)->nodes()[0];
      auto want = run_reference(*(*gs)->nodes()[0], ref_in);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      for (const std::string& name : tactic_names()) {
        auto tactic = make_tactic(name);
        ASSERT_NE(tactic, nullptr) << name;
        const bool compiled = std::find(names.begin(), names.end(), name) != names.end();
        ASSERT_EQ(tactic->supports(node, input_types(node)), compiled) << name;
        if (!compiled) continue;
        auto got = run_on(*tactic, node, c, y_shape);
        ASSERT_TRUE(got.ok()) << name << ": " << got.status().to_string();
        int64_t nans = 0;
        for (int64_t i = 0; i < got->numel(); ++i) nans += std::isnan(got->get_f64(i)) ? 1 : 0;
        EXPECT_EQ(nans, 0) << name << ": unwritten (NaN) elements";
        EXPECT_TRUE(close_to(gather_rows(*got, cs.n, rows), (*want)[0])) << name;
      }
    }
  }
}

// The epilogue's Gelu is the erf form: with A's row m holding x_m in its first column (zeros
// elsewhere) and B's first row ones, each output is Gelu(x_m + bias_n) for x_m across [-6, 6],
// where the tanh form differs from the erf form by up to ~60 fp16 ulps (near x = -2.7). fp16 only:
// bf16 runs the same fp32 functor, and its ulps are too coarse to tell the forms apart this well.
TEST_F(CutlassGemm, GeluIsTheErfForm) {
  const int64_t m = 512, k = 64, n = 64;
  Tensor a = Tensor::zeros(DataType::kFloat16, {m, k}).value();
  Tensor w = Tensor::zeros(DataType::kFloat16, {k, n}).value();
  Tensor c = Tensor::zeros(DataType::kFloat16, {n}).value();
  for (int64_t i = 0; i < m; ++i) a.set_f64(i * k, -6.0 + 12.0 * static_cast<double>(i) / (m - 1));
  for (int64_t j = 0; j < n; ++j) {
    w.set_f64(j, 1.0);
    c.set_f64(j, 0.03125 * static_cast<double>(j % 8) - 0.125);
  }
  DeviceCase dc;
  dc.host = {a, w, c};
  for (const Tensor& h : dc.host) dc.dev.push_back(upload(h).value());
  auto g = parse_graph(gemm_graph({m, k}, n, true, "Gelu"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  for (const std::string& name : gelu_tactic_names()) {
    auto got = run_on(*make_tactic(name), node, dc, {m, n});
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().to_string();
    int64_t erf_bad = 0, tanh_apart = 0;
    double worst = 0, worst_x = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double x = a.get_f64(i * k) + c.get_f64(j);  // exact in fp32, as the kernel adds it
        const double erf_form = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        const double tanh_form = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        // One fp16 ulp (2^-10 relative), plus 1e-6 for fp32's 1 + erf(z) in the negative tail
        // (where it cancels: Gelu(-5) is -7e-6).
        const double tol = std::fabs(erf_form) * 9.77e-4 + 1e-6;
        const double d = std::fabs(got->get_f64(i * n + j) - erf_form);
        erf_bad += d > tol ? 1 : 0;
        if (d / tol > worst) {
          worst = d / tol;
          worst_x = x;
        }
        tanh_apart += std::fabs(tanh_form - erf_form) > 8 * tol ? 1 : 0;
      }
    EXPECT_EQ(erf_bad, 0) << name << ": outputs beyond one fp16 ulp of the erf form; worst " << worst
                          << " tolerances at x = " << worst_x;
    EXPECT_GT(tanh_apart, 100) << "the inputs should tell the two forms apart";
  }
}

// One tactic across shapes (a symbolic batch): nothing is cached per shape, so each call runs
// the shape it is given.
TEST_F(CutlassGemm, SymbolicBatchAcrossShapes) {
  auto g = parse_graph(R"(graph g {
    opset "" 17
    opset "ingot" 1
    input %a: f16[batch,seq,256]
    input %w: f16[256,384]
    input %c: f16[384]
    %y = ingot::FusedGemm {kind="matmul", activation="Gelu"}(%a, %w, %c) @n
    output %y
  })");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  for (const std::string& name : gelu_tactic_names()) {
    auto tactic = make_tactic(name);
    ASSERT_TRUE(tactic->supports(node, input_types(node))) << name;
    for (int64_t b : {1, 8, 3}) {
      const int64_t s = 2 * b + 5;
      DeviceCase c = make_case({b, s, 256}, 384, true, rng_);
      auto got = run_on(*tactic, node, c, {b, s, 384});
      ASSERT_TRUE(got.ok()) << name << ": " << got.status().to_string();
      auto want = run_reference(node, c.host);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      EXPECT_TRUE(close_to(*got, (*want)[0])) << name << " batch " << b;
    }
  }
}

// Pointers off 16 bytes are refused with a message naming the node (not a fault in the kernel).
TEST_F(CutlassGemm, RefusesMisalignedPointers) {
  auto g = parse_graph(gemm_graph({64, 64}, 64, true, "Gelu"));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  DeviceCase c = make_case({64, 64}, 64, true, rng_);
  auto y = device_alloc(DataType::kFloat16, {64 * 64 + 8});
  ASSERT_TRUE(y.ok());
  auto tactic = make_tactic(tactic_names()[0]);
  for (int which = 0; which < 4; ++which) {  // A, B, bias, Y two bytes past an aligned address
    std::vector<Tensor> ins = c.dev;
    std::vector<Tensor> outs = {Tensor::borrow(DataType::kFloat16, {64, 64}, y->raw(), nullptr)};
    Tensor& t = which < 3 ? ins[static_cast<size_t>(which)] : outs[0];
    t = Tensor::borrow(DataType::kFloat16, t.shape(), static_cast<const uint8_t*>(t.raw()) + 2, nullptr);
    backend::StepIO io;
    io.node = &node;
    for (const Tensor& i : ins) io.inputs.push_back(&i);
    io.outputs = &outs;
    Status st = tactic->enqueue(io);
    EXPECT_FALSE(st.ok()) << "operand " << which;
    EXPECT_NE(st.to_string().find("16-byte"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find("ffn"), std::string::npos) << st.to_string();
  }
  // A residual two bytes past an aligned address.
  auto gr = parse_graph(gemm_graph({64, 64}, 64, true, "", "f16", "", true));
  ASSERT_TRUE(gr.ok()) << gr.status().to_string();
  const ir::Node& rnode = *(*gr)->nodes()[0];
  DeviceCase rc = make_case({64, 64}, 64, true, rng_, DataType::kFloat16, true);
  auto r = device_alloc(DataType::kFloat16, {64 * 64 + 8});
  ASSERT_TRUE(r.ok());
  for (const std::string& name : residual_tactic_names()) {
    std::vector<Tensor> ins = rc.dev;
    ins[3] = Tensor::borrow(DataType::kFloat16, {64, 64}, static_cast<const uint8_t*>(r->raw()) + 2, nullptr);
    std::vector<Tensor> outs = {Tensor::borrow(DataType::kFloat16, {64, 64}, y->raw(), nullptr)};
    backend::StepIO io;
    io.node = &rnode;
    for (const Tensor& i : ins) io.inputs.push_back(&i);
    io.outputs = &outs;
    Status st = make_tactic(name)->enqueue(io);
    EXPECT_FALSE(st.ok()) << name;
    EXPECT_NE(st.to_string().find("residual"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find("16-byte"), std::string::npos) << st.to_string();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CutlassGemm, EnqueueCapturesIntoCudaGraph) {
  auto g = parse_graph(gemm_graph({4, 33, 128}, 256, true, "Gelu"));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  DeviceCase c = make_case({4, 33, 128}, 256, true, rng_);
  auto want = run_reference(node, c.host);
  ASSERT_TRUE(want.ok());
  for (const std::string& name : gelu_tactic_names()) {
    auto tactic = make_tactic(name);
    auto y = device_alloc(DataType::kFloat16, {4, 33, 256});
    ASSERT_TRUE(y.ok() && poison(*y).ok());
    std::vector<Tensor> outs = {*y};
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    backend::StepIO io;
    io.node = &node;
    for (const Tensor& t : c.dev) io.inputs.push_back(&t);
    io.outputs = &outs;
    io.stream = stream;
    {
      const Status st = capture_and_replay(*tactic, io);
      ASSERT_TRUE(st.ok()) << name << ": " << st.to_string();
    }
    auto got = download(outs[0]);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(close_to(*got, (*want)[0])) << name;
    cudaStreamDestroy(stream);
  }
}

// Through the builder on the cuda backend: the family offers its configs inside the autotuner's
// width at the default optimization level, and the engine (whatever it chose) matches the
// reference. Prints the choice at a small shape and at BERT-base FFN1 batch 64.
TEST_F(CutlassGemm, BuilderOffersCutlassForFusedGemmGelu) {
  const int width = builder::candidates_for_level(builder::TuneOptions{}.optimization_level);
  for (const Shape64& a : {Shape64{8, 128, 256}, Shape64{64, 128, 768}}) {
    const int64_t k = a.back(), n = 4 * k;
    const std::string text = gemm_graph(a, n, true, "Gelu");
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node0 = *(*g)->nodes()[0];
    auto be = backend::find_backend("cuda");
    ASSERT_TRUE(be.ok()) << be.status().to_string();
    auto cands = (*be)->candidates(node0, input_types(node0));
    int first_cutlass = -1;
    for (size_t i = 0; i < cands.size(); ++i)
      if (first_cutlass < 0 && cands[i]->name().rfind(kPrefix, 0) == 0) first_cutlass = static_cast<int>(i);
    ASSERT_GE(first_cutlass, 0) << "no cutlass candidate";
    EXPECT_LT(first_cutlass, width) << "the first cutlass candidate lies outside the autotuner's width " << width;

    builder::BuildOptions opt;
    opt.backend = "cuda";
    std::shared_ptr<ir::Graph> graph(std::move(*g));
    auto plan = builder::build_plan(graph, {}, opt);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    std::string chosen;
    for (const builder::Step& s : plan->steps)
      if (s.node && s.node->op_type() == "FusedGemm") chosen = s.tactic;
    std::printf("[ cutlass ] A %s x [%lld,%lld] + bias, Gelu: candidates", dims_text(a).c_str(),
                static_cast<long long>(k), static_cast<long long>(n));
    for (size_t i = 0; i < cands.size() && i < static_cast<size_t>(width); ++i)
      std::printf(" %s", cands[i]->name().c_str());
    std::printf("; autotuner chose %s\n", chosen.c_str());
    EXPECT_FALSE(chosen.empty());
    if (a[0] * a[1] > 1024) continue;  // the reference check at the small shape only

    auto engine = runtime::make_engine(std::move(*plan));
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    auto ctx = (*engine)->create_execution_context();
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    DeviceCase c = make_case(a, n, true, rng_);
    Shape64 y_shape = a;
    y_shape.back() = n;
    auto y = device_alloc(DataType::kFloat16, y_shape);
    ASSERT_TRUE(y.ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("a", c.dev[0].mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("w", c.dev[1].mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("c", c.dev[2].mutable_raw()).ok());
    ASSERT_TRUE((*ctx)->set_tensor_address("y", y->mutable_raw()).ok());
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    Status st = (*ctx)->enqueue(stream);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    auto got = download(*y);
    ASSERT_TRUE(got.ok());
    auto ref_graph = parse_graph(text);
    ASSERT_TRUE(ref_graph.ok());
    auto want = run_reference(*(*ref_graph)->nodes()[0], c.host);
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(close_to(*got, (*want)[0])) << chosen;
  }
}

// Not a pass/fail check: the median time of every config (fp16, bias + exact Gelu, and bias
// only) at BERT-base shapes, next to cuBLASLt (bias epilogue, plus its Gelu pass for Gelu), and
// the config the family ranks first, so the GPU log shows which configs earn their compile time.
// With a residual (FFN2 and the attention output at batch 64, bias + residual, no activation):
// the configs that compile that epilogue, next to cuBLASLt with the residual as its C (beta 1).
TEST_F(CutlassGemm, TimesBertShapes) {
  struct Shape3 {
    int64_t m, n, k;
    const char* label;
    bool residual;
  };
  const Shape3 shapes[] = {{8192, 3072, 768, "FFN1 b64", false},
                           {8192, 768, 3072, "FFN2 b64", false},
                           {128, 3072, 768, "FFN1 b1", false},
                           {8192, 768, 3072, "FFN2 b64", true},
                           {8192, 768, 768, "Oproj b64", true}};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const Shape3& s : shapes) {
    DeviceCase c = make_case({s.m, s.k}, s.n, true, rng_, DataType::kFloat16, s.residual);
    auto y = device_alloc(DataType::kFloat16, {s.m, s.n});
    ASSERT_TRUE(y.ok());
    std::vector<Tensor> outs = {*y};
    const double tflop = 2.0 * s.m * s.n * s.k / 1e12;
    std::vector<std::string> acts = {"Gelu", ""};
    if (s.residual) acts = {""};  // residual + Gelu is not taken
    for (const std::string& act : acts) {
      auto g = parse_graph(gemm_graph({s.m, s.k}, s.n, true, act, "f16", "", s.residual));
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      const ir::Node& node = *(*g)->nodes()[0];
      std::vector<std::unique_ptr<backend::Tactic>> tactics;
      for (const std::string& name : s.residual ? residual_tactic_names() : act.empty() ? tactic_names() : gelu_tactic_names())
        tactics.push_back(make_tactic(name));
      tactics.push_back(backend::cuda::cublaslt_family().create("cuda.cublaslt.0", {}));
      auto ranked = backend::cuda::cutlass_gemm_family().candidates(node, input_types(node));
      std::vector<Shape64> shapes_in = {{s.m, s.k}, {s.k, s.n}, {s.n}};
      if (s.residual) shapes_in.push_back({s.m, s.n});
      for (const auto& t : tactics) {
        if (s.residual) ASSERT_TRUE(t->supports(node, input_types(node))) << t->name() << " with a residual";
        ASSERT_TRUE(t->prepare(node).ok()) << t->name();
        DeviceBuffer ws(std::max<uint64_t>(t->workspace_bytes(node, shapes_in), 1));
        backend::StepIO io;
        io.node = &node;
        io.inputs = c.io_inputs();
        io.outputs = &outs;
        io.stream = stream;
        io.workspace = ws.get();
        auto us = median_enqueue_us(*t, io, 10, 50);
        ASSERT_TRUE(us.has_value()) << t->name();
        // Host time per enqueue (launches queue up without waiting for the device).
        const int kHostRuns = 50;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kHostRuns; ++i) ASSERT_TRUE(t->enqueue(io).ok());
        const double host_us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kHostRuns;
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        const bool first = !ranked.empty() && ranked[0]->name() == t->name();
        const char* epilogue = s.residual ? "bias+res" : act.empty() ? "bias" : "Gelu";
        std::printf("[timing] %-9s M %5lld N %4lld K %4lld %-9s %-42s %8.1f us %6.0f TFLOP/s  host %5.1f us%s\n",
                    s.label, static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                    epilogue, t->name().c_str(), *us, tflop / (*us * 1e-6), host_us, first ? "  (ranked first)" : "");
      }
    }
  }
  cudaStreamDestroy(stream);
}

// ---- host-only tests (no device needed) ---------------------------------------------------

TEST(CutlassGemmFamily, NamesAndParamsRoundTrip) {
  auto family = backend::cuda::cutlass_gemm_family();
  EXPECT_EQ(family.name, "cutlass");
  const auto names = tactic_names();
  ASSERT_GE(names.size(), 3u);
  for (const std::string& name : names) {
    auto t = family.create(name, {});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name(), name);
    auto again = family.create(name, t->serialize());
    ASSERT_NE(again, nullptr) << name;
    EXPECT_EQ(again->name(), name);
    std::vector<uint8_t> wrong = t->serialize();
    wrong[0] = 9;
    EXPECT_EQ(family.create(name, wrong), nullptr) << name;
  }
  EXPECT_EQ(family.create(names[0], family.create(names[1], {})->serialize()), nullptr) << "params of another config";
  for (const std::string bad : {"cuda.cutlass.gemm.", "cuda.cutlass.gemm.128x128", "cuda.cutlass.gemm.999x1x1_coop",
                                "cuda.cublaslt.0", "cpu.reference"})
    EXPECT_EQ(family.create(bad, {}), nullptr) << bad;
}

struct SupportCase {
  std::string text;
  bool supported;                      // on a compute capability 9.0 device
  bool residual_configs_only = false;  // supported by the configs that compile the residual epilogue only
};

// Shapes with M >= 1024: below that no cutlass config is offered (see the next test).
TEST(CutlassGemmFamily, SupportsOnlyWhatTheKernelsRun) {
  const bool sm90 = not_sm90_reason().empty();
  auto graph = [](const std::string& inputs, const std::string& node) {
    return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n" + inputs + "  %y = " + node + " @n\n  output %y\n}\n";
  };
  const std::string abc = "  input %a: f16[2,512,64]\n  input %b: f16[64,32]\n  input %c: f16[32]\n";
  const std::string fg = "ingot::FusedGemm {kind=\"matmul\"";
  const std::vector<SupportCase> cases = {
      {graph(abc, fg + ", activation=\"Gelu\"}(%a, %b, %c)"), true},
      {graph(abc, fg + "}(%a, %b, %c)"), true},                   // bias only
      {graph(abc, fg + ", activation=\"Gelu\"}(%a, %b)"), true},  // no bias
      {graph(abc, fg + "}(%a, %b)"), true},                       // plain matmul
      {graph("  input %a: f16[n,seq,64]\n  input %b: f16[64,32]\n", fg + ", activation=\"Gelu\"}(%a, %b)"), true},
      {graph(abc + "  input %c1: f16[1,32]\n", fg + ", activation=\"Gelu\"}(%a, %b, %c1)"), true},
      // The tanh Gelu and the other activations: refused.
      {graph(abc, fg + ", activation=\"GeluTanh\"}(%a, %b, %c)"), false},
      {graph(abc, fg + ", activation=\"Relu\"}(%a, %b, %c)"), false},
      // A residual of Y's shape and type without an activation: on the configs that compile it.
      {graph(abc + "  input %r: f16[2,512,32]\n", fg + "}(%a, %b, %c, %r)"), true, true},
      {graph(abc + "  input %r: f16[2,512,32]\n", fg + "}(%a, %b, _, %r)"), true, true},
      {graph(abc + "  input %r: f16[2,512,32]\n", fg + ", residual_before_activation=0}(%a, %b, %c, %r)"), true, true},
      {graph("  input %a: f16[n,seq,64]\n  input %b: f16[64,32]\n  input %r: f16[n,seq,32]\n", fg + "}(%a, %b, _, %r)"),
       true, true},
      {graph("  input %a: bf16[1024,64]\n  input %b: bf16[64,32]\n  input %c: bf16[32]\n  input %r: bf16[1024,32]\n",
             fg + "}(%a, %b, %c, %r)"),
       true, true},
      // A residual with Gelu, whatever the order; of another shape or type; one that may differ.
      {graph(abc + "  input %r: f16[2,512,32]\n", fg + ", activation=\"Gelu\"}(%a, %b, %c, %r)"), false},
      {graph(abc + "  input %r: f16[2,512,32]\n",
             fg + ", activation=\"Gelu\", residual_before_activation=0}(%a, %b, %c, %r)"),
       false},
      {graph(abc + "  input %r: f16[1,512,32]\n", fg + "}(%a, %b, %c, %r)"), false},   // broadcast over batch
      {graph(abc + "  input %r: f16[2,512,1]\n", fg + "}(%a, %b, %c, %r)"), false},    // broadcast over N
      {graph(abc + "  input %r: f16[512,32]\n", fg + "}(%a, %b, %c, %r)"), false},     // lower rank
      {graph(abc + "  input %r: bf16[2,512,32]\n", fg + "}(%a, %b, %c, %r)"), false},  // another type
      {graph(abc + "  input %r: f32[2,512,32]\n", fg + "}(%a, %b, %c, %r)"), false},
      {graph("  input %a: f16[n,seq,64]\n  input %b: f16[64,32]\n  input %r: f16[m,seq,32]\n", fg + "}(%a, %b, _, %r)"),
       false},
      // N or K not a multiple of 8.
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,36]\n", fg + ", activation=\"Gelu\"}(%a, %b)"), false},
      {graph("  input %a: f16[1024,60]\n  input %b: f16[60,32]\n", fg + ", activation=\"Gelu\"}(%a, %b)"), false},
      // Other precisions.
      {graph("  input %a: f32[1024,64]\n  input %b: f32[64,32]\n", fg + ", activation=\"Gelu\"}(%a, %b)"), false},
      {graph("  input %a: bf16[1024,64]\n  input %b: bf16[64,32]\n", fg + ", activation=\"Gelu\"}(%a, %b)"), true},
      {graph("  input %a: bf16[1024,64]\n  input %b: bf16[64,32]\n  input %c: f16[32]\n", fg + "}(%a, %b, %c)"), false},
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,32]\n  input %c: f32[32]\n", fg + "}(%a, %b, %c)"), false},
      {graph("  input %a: f64[1024,64]\n  input %b: f64[64,32]\n", fg + "}(%a, %b)"), false},
      // Scales, transposes, Gemm rules, a bias that is not a vector over N, a batched weight.
      {graph(abc, fg + ", activation=\"Gelu\", alpha=0.5}(%a, %b, %c)"), false},
      {graph(abc, fg + ", activation=\"Gelu\", beta=2.0}(%a, %b, %c)"), false},
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,32]\n",
             "ingot::FusedGemm {kind=\"gemm\", activation=\"Gelu\"}(%a, %b)"),
       false},
      {graph("  input %a: f16[1024,64]\n  input %b: f16[32,64]\n", "ingot::FusedGemm {kind=\"gemm\", transB=1}(%a, %b)"),
       false},
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,32]\n  input %c: f16[1024,32]\n", fg + "}(%a, %b, %c)"), false},
      {graph("  input %a: f16[4,512,64]\n  input %b: f16[4,64,32]\n", fg + "}(%a, %b)"), false},
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,k]\n", fg + "}(%a, %b)"), false},
      // Not a FusedGemm.
      {graph("  input %a: f16[1024,64]\n  input %b: f16[64,32]\n", "MatMul(%a, %b)"), false},
  };
  const auto names = tactic_names();
  for (const auto& c : cases) {
    auto g = parse_graph(c.text);
    if (!g.ok()) {
      EXPECT_FALSE(c.supported) << c.text << g.status().to_string();
      continue;
    }
    const ir::Node& node = *(*g)->nodes()[0];
    for (size_t i = 0; i < names.size(); ++i) {
      // The residual kernels and the Gelu ones are not compiled for every config.
      const bool gelu = c.text.find("activation=\"Gelu\"") != std::string::npos;
      const bool compiled = c.residual_configs_only ? has_residual_kernel(static_cast<int>(i))
                            : gelu ? has_gelu_kernel(static_cast<int>(i))
                                   : true;
      EXPECT_EQ(make_tactic(names[i])->supports(node, input_types(node)), c.supported && compiled && sm90)
          << names[i] << "\n"
          << c.text;
    }
    const auto cands = backend::cuda::cutlass_gemm_family().candidates(node, input_types(node));
    EXPECT_EQ(!cands.empty(), c.supported && sm90) << c.text;
    EXPECT_LE(cands.size(), 2u);
  }
}

// The residual epilogue is compiled for the 128x256 cooperative and the 128x128 and 128x192
// ping-pong configs, fp16 and bf16; bias for every config, Gelu for every config but 128x192 (its N
// is no multiple of the Gelu epilogue subtile). Tactic names and params do not name the epilogue,
// so an engine written before keeps loading: params {1, config index} as before.
TEST(CutlassGemmFamily, ResidualKernelsOfThreeConfigs) {
  using backend::cuda::CutlassEpilogue;
  using backend::cuda::CutlassGemmType;
  std::vector<std::string> with_residual;
  for (int i = 0; i < backend::cuda::cutlass_gemm_config_count(); ++i) {
    const std::string name = backend::cuda::cutlass_gemm_config(i)->name;
    for (CutlassGemmType t : {CutlassGemmType::kFloat16, CutlassGemmType::kBFloat16}) {
      EXPECT_TRUE(backend::cuda::cutlass_gemm_has_kernel(i, CutlassEpilogue::kBias, t)) << name;
      EXPECT_EQ(backend::cuda::cutlass_gemm_has_kernel(i, CutlassEpilogue::kBiasGelu, t),
                name != "128x192x64_pingpong_c1x1")
          << name;
      EXPECT_EQ(backend::cuda::cutlass_gemm_has_kernel(i, CutlassEpilogue::kBiasResidual, t),
                backend::cuda::cutlass_gemm_has_kernel(i, CutlassEpilogue::kBiasResidual, CutlassGemmType::kFloat16))
          << name;
    }
    if (has_residual_kernel(i)) with_residual.push_back(name);
    auto t = backend::cuda::cutlass_gemm_family().create(std::string(kPrefix) + name, {1, static_cast<uint8_t>(i)});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->serialize(), (std::vector<uint8_t>{1, static_cast<uint8_t>(i)})) << name;
  }
  EXPECT_EQ(with_residual, (std::vector<std::string>{"128x256x64_coop_c1x1", "128x128x64_pingpong_c1x1",
                                                     "128x192x64_pingpong_c1x1"}));
  EXPECT_FALSE(backend::cuda::cutlass_gemm_has_kernel(-1, CutlassEpilogue::kBiasResidual, CutlassGemmType::kFloat16));
  EXPECT_FALSE(backend::cuda::cutlass_gemm_has_kernel(backend::cuda::cutlass_gemm_config_count(),
                                                      CutlassEpilogue::kBias, CutlassGemmType::kFloat16));
}

// A known M under 1024 (BERT at batch 1: M 128) gets no candidates, though the tactics would run
// it: cuBLASLt and cuDNN are faster there. An open M still gets them.
TEST(CutlassGemmFamily, NoCandidatesForFewKnownRows) {
  const bool sm90 = not_sm90_reason().empty();
  auto text = [](const std::string& a) {
    return "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n  input %a: f16[" + a +
           "]\n  input %b: f16[768,3072]\n  input %c: f16[3072]\n"
           "  %y = ingot::FusedGemm {kind=\"matmul\", activation=\"Gelu\"}(%a, %b, %c) @n\n  output %y\n}\n";
  };
  for (const auto& [a, offered] : std::vector<std::pair<std::string, bool>>{
           {"1,128,768", false}, {"8,127,768", false}, {"8,128,768", true}, {"b,128,768", true}}) {
    auto g = parse_graph(text(a));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    for (const std::string& name : tactic_names())
      EXPECT_EQ(make_tactic(name)->supports(node, input_types(node)), sm90 && has_gelu_kernel(
                    backend::cuda::cutlass_gemm_config_index(name.substr(std::strlen(kPrefix)).c_str())));
    EXPECT_EQ(!backend::cuda::cutlass_gemm_family().candidates(node, input_types(node)).empty(), offered && sm90) << a;
  }
}

}  // namespace
}  // namespace ingot::gpu_test

#endif  // INGOT_WITH_CUTLASS
