// Copyright ingot authors. Apache-2.0.
//
// Shared helpers for the GPU tactic tests: every CUDA tactic is checked against the CPU
// reference (cpu::run_node) on the same host inputs. A device tensor here is an ordinary
// ingot::Tensor whose raw() is a device pointer and whose owner frees it with cudaFree, so
// the StepIO a tactic sees in tests is built exactly as the backend builds it.
//
// Typical use:
//   class MyTest : public ingot::gpu_test::CudaTest {};
//   TEST_F(MyTest, Relu) {
//     auto g = parse_one_node("...");                       // ir::parse_text + ir::infer_graph
//     std::vector<Tensor> in = {random_tensor(DataType::kFloat16, {3, 5}, rng)};
//     auto got = run_tactic(*tactic, node, in);             // device run, outputs on the host
//     auto want = run_reference(node, in);                  // cpu::run_node
//     EXPECT_TRUE(all_close(got.value(), want.value()));    // tolerance by dtype
//   }
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/tactic.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/text.h"

namespace ingot::gpu_test {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return internal_error(what, " failed: ", cudaGetErrorString(err));
}

/// Empty when a CUDA device is usable, else why not ("no CUDA device: <cudaGetErrorString>").
inline std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device: cudaGetDeviceCount returned 0";
  return "";
}

/// Fixture for every GPU test: skips, saying why, on machines without a CUDA device.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = cuda_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

/// Owning device allocation (workspaces, raw scratch).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    // At least one byte so that 0-sized tensors still get a distinct, valid pointer.
    if (cudaMalloc(&ptr_, bytes ? bytes : 1) != cudaSuccess) { ptr_ = nullptr; bytes_ = 0; }
  }
  ~DeviceBuffer() { if (ptr_) cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = o.ptr_; bytes_ = o.bytes_; o.ptr_ = nullptr; o.bytes_ = 0;
    }
    return *this;
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  bool valid() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// A device tensor (raw() is a device pointer; freed when the last copy goes).
inline Result<Tensor> device_alloc(DataType dtype, const Shape64& shape) {
  size_t bytes = storage_bytes(dtype, shape_numel(shape));
  void* p = nullptr;
  Status st = cuda_status(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  if (!st.ok()) return st;
  std::shared_ptr<const void> owner(p, [](const void* q) { cudaFree(const_cast<void*>(q)); });
  return Tensor::borrow(dtype, shape, p, std::move(owner));
}

/// Fills a device tensor with 0xFF bytes (NaN for every float type) so unwritten elements show.
// cudaMemset on device memory and cudaMemcpy from pageable host memory may return before the
// device has finished them, and they run on the legacy default stream, which the tactics' non-
// blocking streams do not wait for: both end with a device synchronize, or the poison can land
// after the kernel's writes (seen on the H200 when other processes loaded the GPU: Clip's bf16
// output NaN from element 2048 on, a Cast's output all -1).
inline Status poison(Tensor& device) {
  INGOT_RETURN_IF_ERROR(cuda_status(cudaMemset(device.mutable_raw(), 0xFF, device.nbytes()), "cudaMemset(poison)"));
  return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize(poison)");
}

inline Result<Tensor> upload(const Tensor& host) {
  INGOT_ASSIGN_OR_RETURN(Tensor d, device_alloc(host.dtype(), host.shape()));
  if (host.nbytes()) {
    INGOT_RETURN_IF_ERROR(cuda_status(cudaMemcpy(d.mutable_raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice),
                                      "cudaMemcpy(upload)"));
    INGOT_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize(upload)"));
  }
  return d;
}

inline Result<Tensor> download(const Tensor& device) {
  INGOT_ASSIGN_OR_RETURN(Tensor h, Tensor::zeros(device.dtype(), device.shape()));
  if (device.nbytes()) {
    INGOT_RETURN_IF_ERROR(cuda_status(cudaMemcpy(h.mutable_raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost),
                                      "cudaMemcpy(download)"));
  }
  return h;
}

/// The IR text of a graph with one node %y = op {attrs}(%x0, %x1, ...) @n: every input of type
/// `dt` and shape ins[i], nullopt for an omitted optional input (written `_`).
inline std::string one_node_graph(const std::string& op, const std::string& attrs, DataType dt,
                                  const std::vector<std::optional<Shape64>>& ins) {
  std::ostringstream os;
  os << "graph g {\n  opset \"\" 17\n  opset \"ingot\" 1\n";
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i]) os << "  input %x" << i << ": " << data_type_name(dt) << shape_to_string(*ins[i]) << "\n";
  os << "  %y = " << op << " ";
  if (!attrs.empty()) os << "{" << attrs << "}";
  os << "(";
  for (size_t i = 0; i < ins.size(); ++i) os << (i ? ", " : "") << (ins[i] ? "%x" + std::to_string(i) : "_");
  os << ") @n\n  output %y\n}\n";
  return os.str();
}

/// Parses a one-node (or small) graph in the IR text form and runs inference on it.
inline Result<std::unique_ptr<ir::Graph>> parse_graph(const std::string& text) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g, ir::parse_text(text));
  INGOT_RETURN_IF_ERROR(ir::infer_graph(*g));
  return g;
}

/// The types a backend's supports() sees for a node: its input values' inferred types.
inline std::vector<ir::TensorType> input_types(const ir::Node& node) {
  std::vector<ir::TensorType> types;
  for (const ir::Value* v : node.inputs()) {
    ir::TensorType t;
    if (v) { t.dtype = v->dtype(); t.shape = v->shape(); }
    types.push_back(t);
  }
  return types;
}

/// Device copies of `host` into `dev` (resized to match) and pointers to them, nullptr where a host
/// tensor is undefined (an omitted optional input): a StepIO's inputs.
inline Result<std::vector<const Tensor*>> upload_inputs(const std::vector<Tensor>& host, std::vector<Tensor>* dev) {
  dev->assign(host.size(), Tensor());
  std::vector<const Tensor*> ptrs(host.size(), nullptr);
  for (size_t i = 0; i < host.size(); ++i) {
    if (!host[i].defined()) continue;
    INGOT_ASSIGN_OR_RETURN((*dev)[i], upload(host[i]));
    ptrs[i] = &(*dev)[i];
  }
  return ptrs;
}

inline Status capture_and_replay(const backend::Tactic& tactic, backend::StepIO& io, int replays);

/// run_tactic's and run_tactic_captured's body.
inline Result<std::vector<Tensor>> run_tactic_on_device(const backend::Tactic& tactic, const ir::Node& node,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<Shape64>& output_shapes, bool captured) {
  std::vector<Tensor> d_inputs;
  INGOT_ASSIGN_OR_RETURN(std::vector<const Tensor*> in_ptrs, upload_inputs(inputs, &d_inputs));
  std::vector<Shape64> in_shapes;
  for (const Tensor& t : inputs) in_shapes.push_back(t.defined() ? t.shape() : Shape64{});
  std::vector<Tensor> d_outputs(node.outputs().size());
  for (size_t o = 0; o < node.outputs().size(); ++o) {
    const ir::Value* v = node.output(o);
    if (!v) continue;  // omitted optional output: stays undefined
    Shape64 shape;
    if (o < output_shapes.size()) {
      shape = output_shapes[o];
    } else if (v->shape().is_concrete()) {
      shape = v->shape().concrete();
    } else {
      return invalid_argument("run_tactic: output ", o, " of ", node.describe(), " has no concrete shape ",
                              v->shape().to_string(), "; pass output_shapes");
    }
    INGOT_ASSIGN_OR_RETURN(d_outputs[o], device_alloc(v->dtype(), shape));
    INGOT_RETURN_IF_ERROR(poison(d_outputs[o]));
  }
  DeviceBuffer workspace(tactic.workspace_bytes(node, in_shapes));
  if (!workspace.valid()) return internal_error("run_tactic: workspace cudaMalloc failed");
  cudaStream_t stream = nullptr;
  INGOT_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::shared_ptr<void> stream_guard(nullptr, [stream](void*) { cudaStreamDestroy(stream); });
  backend::StepIO io;
  io.node = &node;
  io.inputs = in_ptrs;
  io.outputs = &d_outputs;
  io.workspace = workspace.get();
  io.stream = stream;
  INGOT_RETURN_IF_ERROR(tactic.enqueue(io));
  INGOT_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
  INGOT_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "kernel (sticky error)"));
  if (captured) {  // that run was the warm-up (plans built): the replayed graph must write it all again
    for (Tensor& o : d_outputs)
      if (o.defined()) INGOT_RETURN_IF_ERROR(poison(o));
    INGOT_RETURN_IF_ERROR(capture_and_replay(tactic, io, 1));
  }
  std::vector<Tensor> host_outputs(d_outputs.size());
  for (size_t o = 0; o < d_outputs.size(); ++o) {
    if (!d_outputs[o].defined()) continue;
    INGOT_ASSIGN_OR_RETURN(host_outputs[o], download(d_outputs[o]));
  }
  return host_outputs;
}


/// Runs `tactic` on device copies of `inputs` (an undefined Tensor = omitted optional input).
/// Output shapes and dtypes come from the node's inferred (concrete) output types unless
/// `output_shapes` is given. Outputs are poisoned before the run. Synchronizes and returns
/// the outputs on the host.
inline Result<std::vector<Tensor>> run_tactic(const backend::Tactic& tactic, const ir::Node& node,
                                              const std::vector<Tensor>& inputs,
                                              const std::vector<Shape64>& output_shapes = {}) {
  return run_tactic_on_device(tactic, node, inputs, output_shapes, /*captured=*/false);
}

/// run_tactic, then the outputs poisoned again and one enqueue recorded into a CUDA graph and
/// replayed (capture_and_replay): the outputs are the replay's. What a captured engine runs.
inline Result<std::vector<Tensor>> run_tactic_captured(const backend::Tactic& tactic, const ir::Node& node,
                                                       const std::vector<Tensor>& inputs,
                                                       const std::vector<Shape64>& output_shapes = {}) {
  return run_tactic_on_device(tactic, node, inputs, output_shapes, /*captured=*/true);
}

/// Median microseconds of `tactic.enqueue(io)` on `io.stream` between CUDA events, after
/// `warmup` calls; nullopt when a call fails.
inline std::optional<double> median_enqueue_us(const backend::Tactic& tactic, backend::StepIO& io, int warmup = 10,
                                               int runs = 30) {
  for (int i = 0; i < warmup; ++i)
    if (!tactic.enqueue(io).ok()) return std::nullopt;
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return std::nullopt;
  std::vector<float> us;
  for (int i = 0; i < runs; ++i) {
    cudaEventRecord(start, static_cast<cudaStream_t>(io.stream));
    if (!tactic.enqueue(io).ok()) return std::nullopt;
    cudaEventRecord(stop, static_cast<cudaStream_t>(io.stream));
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

/// The CPU reference outputs for the same host inputs.
inline Result<std::vector<Tensor>> run_reference(const ir::Node& node, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(t.defined() ? &t : nullptr);
  return cpu::run_node(node, ptrs);
}

struct Tolerance {
  double rel = 0;
  double abs = 0;
};

/// Per-precision tolerances (the kernels compute in fp32 and round once to the output type).
inline Tolerance tolerance_for(DataType t) {
  switch (t) {
    case DataType::kFloat32: return {1e-5, 1e-6};
    case DataType::kFloat16: return {2e-3, 1e-3};
    case DataType::kBFloat16: return {1.6e-2, 1e-2};
    default: return {0, 0};  // integers, bool: exact
  }
}

/// tolerance_for(t) widened for a convolution output that sums `taps` products of inputs drawn
/// from [-3, 3] (mean |x w| 2.25): the kernel sums in fp32 in another order than the reference,
/// which rounds the sum to the type before the epilogue (the activation, the residual), so the
/// absolute part grows with the sum's typical size, eps(t) * 2.25 * taps (f32 7x7: 1.3e-5; f16
/// 3x3: 0.02); a wrong or missing tap is off by ~2.
inline Tolerance conv_sum_tolerance(DataType t, int64_t taps) {
  Tolerance tol = tolerance_for(t);
  const double eps = t == DataType::kFloat32 ? 1.19e-7 : t == DataType::kFloat16 ? 9.77e-4 : 7.81e-3;
  tol.abs += eps * 2.25 * static_cast<double>(taps);
  return tol;
}

/// Elementwise |got - want| <= abs + rel * |want|; NaN matches NaN, inf matches the same inf.
/// Reports the first few mismatches with their flat index.
inline ::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << data_type_name(got.dtype()) << " vs "
                                         << data_type_name(want.dtype());
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << "shape " << shape_to_string(got.shape()) << " vs "
                                         << shape_to_string(want.shape());
  int64_t bad = 0;
  double worst = 0;
  std::ostringstream msg;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if (std::isinf(w) || std::isinf(g)) ok = g == w;
    else ok = std::fabs(g - w) <= tol.abs + tol.rel * std::fabs(w);
    if (!ok) {
      if (bad < 8) msg << "\n  [" << i << "] got " << g << " want " << w;
      if (!std::isnan(g) && !std::isnan(w)) worst = std::max(worst, std::fabs(g - w));
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.numel() << " elements differ ("
                                       << data_type_name(got.dtype()) << shape_to_string(got.shape())
                                       << ", rel " << tol.rel << " abs " << tol.abs << ", worst abs diff " << worst
                                       << "):" << msg.str();
}

inline ::testing::AssertionResult all_close(const Tensor& got, const Tensor& want) {
  return all_close(got, want, tolerance_for(want.dtype()));
}

/// Uniform random values in [lo, hi) rounded to `dtype`; with `nonzero`, magnitudes below
/// `min_abs` are pushed away from zero (keeps Div/Log/Reciprocal well conditioned).
inline Tensor random_tensor(DataType dtype, const Shape64& shape, std::mt19937& rng, double lo = -2.0,
                            double hi = 2.0, bool nonzero = true, double min_abs = 0.1) {
  Tensor t = Tensor::zeros(dtype, shape).value();
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(rng);
    if (dtype == DataType::kBool) { t.set_f64(i, v > (lo + hi) / 2 ? 1 : 0); continue; }
    if (nonzero && std::fabs(v) < min_abs) v = v < 0 ? -min_abs : min_abs;
    t.set_f64(i, v);
  }
  return t;
}

/// Runs `tactic` and the CPU reference on the same inputs and checks every output (within `tol`,
/// or the output type's tolerance_for).
inline ::testing::AssertionResult matches_reference(const backend::Tactic& tactic, const ir::Node& node,
                                                    const std::vector<Tensor>& inputs,
                                                    std::optional<Tolerance> tol = std::nullopt) {
  auto got = run_tactic(tactic, node, inputs);
  if (!got.ok()) return ::testing::AssertionFailure() << "tactic: " << got.status().to_string();
  auto want = run_reference(node, inputs);
  if (!want.ok()) return ::testing::AssertionFailure() << "reference: " << want.status().to_string();
  if (got->size() != want->size())
    return ::testing::AssertionFailure() << got->size() << " outputs vs " << want->size();
  for (size_t o = 0; o < got->size(); ++o) {
    if (!(*got)[o].defined()) continue;
    auto r = tol ? all_close((*got)[o], (*want)[o], *tol) : all_close((*got)[o], (*want)[o]);
    if (!r) return ::testing::AssertionFailure() << "output " << o << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

/// Records one tactic.enqueue(io) on io.stream into a CUDA graph (thread-local capture, as the
/// runtime captures), replays it `replays` times and waits for the stream. The tactic's status
/// comes first (a tactic that fails inside a capture reports its own error, not the capture's).
inline Status capture_and_replay(const backend::Tactic& tactic, backend::StepIO& io, int replays = 1) {
  cudaStream_t stream = static_cast<cudaStream_t>(io.stream);
  INGOT_RETURN_IF_ERROR(
      cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  Status st = tactic.enqueue(io);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (st.ok()) st = cuda_status(ended, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  if (st.ok()) st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int i = 0; st.ok() && i < replays; ++i) st = cuda_status(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  if (st.ok()) st = cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize(replay)");
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  return st;
}

}  // namespace ingot::gpu_test
