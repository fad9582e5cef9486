// Copyright ingot authors. Apache-2.0.
//
// The cuda backend: device memory and stream-ordered copies (CudaDevice), the tactic families
// (cuda_tactics.h), and a host-fallback tactic that runs any op the families do not cover on
// the CPU reference kernels with copies around it. The fallback keeps every model runnable and
// correct while fast tactics are added; it synchronizes the stream, so engines that use it
// cannot be captured into CUDA graphs, and the builder notes every node it falls back on.
#include <cuda_runtime_api.h>
#include <cublasLt.h>

#include <algorithm>
#include <mutex>

#include "backend/cpu/executor.h"
#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/timing_kernels.h"
#include "backend/device.h"

namespace ingot::backend::cuda {

namespace {

class CudaDevice : public Device {
 public:
  CudaDevice(int ordinal, std::string arch) : ordinal_(ordinal), arch_(std::move(arch)) {}
  bool is_host() const override { return false; }
  Result<void*> allocate(size_t bytes) override {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
      // Out of memory is not sticky, but it stays the thread's "last error": clear it, or the next
      // tactic's launch check (cudaGetLastError) would report this failure as its own.
      cudaGetLastError();
      if (e == cudaErrorMemoryAllocation)
        return make_status(StatusCode::kOutOfMemory, "cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(e));
      // Anything else is an earlier kernel's sticky error surfacing here (session 41: a misaligned
      // shared-memory access read "out of memory: ... misaligned address"): say so, not OOM.
      return make_status(StatusCode::kInternal, "cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(e),
                         " (the device is in an error state: an earlier kernel failed)");
    }
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  Status copy_to_device(void* dst, const void* src, size_t n, void* stream) override {
    if (n) INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Status copy_to_host(void* dst, const void* src, size_t n, void* stream) override {
    if (n) INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Status copy_on_device(void* dst, const void* src, size_t n, void* stream) override {
    if (n && dst != src)
      INGOT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Status fill(void* dst, int byte, size_t n, void* stream) override {
    if (n) INGOT_CUDA_CHECK(cudaMemsetAsync(dst, byte, n, static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Status synchronize(void* stream) override {
    INGOT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Status begin_capture(void* stream) override {
    if (!stream) return unsupported("the legacy default stream cannot be captured: enqueue on a created stream");
    INGOT_CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal));
    return Status::Ok();
  }
  Result<std::shared_ptr<void>> end_capture(void* stream) override {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
    if (e != cudaSuccess) {
      if (graph) cudaGraphDestroy(graph);
      return internal_error("CUDA graph capture failed: ", cudaGetErrorString(e));
    }
    cudaGraphExec_t exec = nullptr;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) return internal_error("cudaGraphInstantiate failed: ", cudaGetErrorString(e));
    return std::shared_ptr<void>(exec, [](void* x) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(x)); });
  }
  Status launch_graph(void* graph, void* stream) override {
    INGOT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }
  Result<std::shared_ptr<void>> create_stream() override {
    cudaStream_t s = nullptr;
    INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return std::shared_ptr<void>(s, [](void* x) { cudaStreamDestroy(static_cast<cudaStream_t>(x)); });
  }
  Result<std::shared_ptr<void>> create_marker() override {
    cudaEvent_t e = nullptr;
    INGOT_CUDA_CHECK(cudaEventCreate(&e));  // default flags: timing on
    return std::shared_ptr<void>(e, [](void* x) { cudaEventDestroy(static_cast<cudaEvent_t>(x)); });
  }
  Status record_marker(void* marker, void* stream) override {
    // External: a node of the graph while capturing (a plain record would only order streams).
    INGOT_CUDA_CHECK(cudaEventRecordWithFlags(static_cast<cudaEvent_t>(marker), static_cast<cudaStream_t>(stream),
                                              cudaEventRecordExternal));
    return Status::Ok();
  }
  Result<float> marker_elapsed_ms(void* from, void* to) override {
    float ms = 0;
    INGOT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
    return ms;
  }
  std::string arch() const override { return arch_; }
  std::map<std::string, std::string> library_versions() const override {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    return {{"cudart", std::to_string(rt)}, {"cublasLt", std::to_string(cublasLtGetVersion())}};
  }

 private:
  int ordinal_;
  std::string arch_;
};

// Copies inputs to the host, runs the reference kernel, copies outputs back. If/Loop/Scan bodies
// read outer-scope values through the context's subgraph runner (host copies made on demand).
class HostFallbackTactic : public Tactic {
 public:
  explicit HostFallbackTactic(Device& device) : device_(device) {}
  std::string name() const override { return "cuda.host_fallback"; }
  // String tensors never live on the device (a device engine keeps them in host memory): they
  // are read and written as they are, the others copied.
  bool supports(const ir::Node& node, const std::vector<ir::TensorType>&) const override {
    return cpu::KernelRegistry::global().find(node.op_type(), node.domain()) != nullptr;
  }
  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }
  bool capturable() const override { return false; }  // synchronizes and reads device data on the host
  bool is_host_fallback() const override { return true; }
  bool handles_dynamic_outputs() const override { return true; }
  Status enqueue(StepIO& io) const override {
    std::vector<Tensor> host_in(io.inputs.size());
    std::vector<const Tensor*> ptrs(io.inputs.size(), nullptr);
    for (size_t i = 0; i < io.inputs.size(); ++i) {
      const Tensor* t = io.inputs[i];
      if (!t) continue;
      if (t->dtype() == DataType::kString) {
        ptrs[i] = t;
        continue;
      }
      INGOT_ASSIGN_OR_RETURN(host_in[i], Tensor::zeros(t->dtype(), t->shape()));
      INGOT_RETURN_IF_ERROR(device_.copy_to_host(host_in[i].mutable_raw(), t->raw(), t->nbytes(), io.stream));
      ptrs[i] = &host_in[i];
    }
    INGOT_RETURN_IF_ERROR(device_.synchronize(io.stream));
    // Subgraphs (If/Loop/Scan bodies, ingot::Pointwise) run on the host too; the context's runner
    // copies the outer-scope values a body reads to the host (none without a context).
    auto runner = io.subgraph_runner
                      ? io.subgraph_runner
                      : cpu::make_subgraph_runner([](const ir::Value*) -> const Tensor* { return nullptr; });
    INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, cpu::run_node(*io.node, ptrs, runner));
    for (size_t i = 0; i < outs.size() && i < io.outputs->size(); ++i) {
      if (!io.node->outputs()[i]) continue;
      Tensor& view = (*io.outputs)[i];
      if (!view.defined()) {
        if (!io.allocate_output) return internal_error(io.node->describe(), ": no allocator for a data-dependent output");
        INGOT_ASSIGN_OR_RETURN(view, io.allocate_output(outs[i].dtype(), outs[i].shape()));
      }
      if (view.shape() != outs[i].shape() || view.dtype() != outs[i].dtype())
        return internal_error(io.node->describe(), ": output ", i, " has another shape than planned");
      if (view.dtype() == DataType::kString) {
        view.mutable_strings() = outs[i].strings();
        continue;
      }
      INGOT_RETURN_IF_ERROR(device_.copy_to_device(view.mutable_raw(), outs[i].raw(), outs[i].nbytes(), io.stream));
    }
    // The host buffers die with this call: the copies must finish first.
    return device_.synchronize(io.stream);
  }

 private:
  Device& device_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int ordinal, std::string arch) : device_(ordinal, std::move(arch)) {
#ifdef INGOT_WITH_CUTLASS
    // First: the autotuner's width takes candidates in order, and these fused exact-Gelu GEMMs
    // beat cuDNN's and cuBLASLt + Gelu pass at BERT's shapes (see cutlass_gemm_kernels.cu). At
    // most two per node (fp16/bf16 FusedGemm matmuls, none or exact Gelu, or bias + residual
    // without an activation), so at the default width of 4 cuDNN's two (Gelu) or cuBLASLt's top
    // two (bias only, bias + residual) are still timed.
    families_.push_back(cutlass_gemm_family());
#endif
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
    // Before cuBLASLt, whose top-k would fill the autotuner's width: it takes only the exact-Gelu
    // GEMMs that cuBLASLt runs in two passes.
    families_.push_back(cudnn_matmul_family());
#endif
    families_.push_back(cublaslt_family());
    families_.push_back(quant_gemm_family());
    // Before cuDNN's: the autotuner's width takes candidates in order, and one candidate always
    // fits. It takes only depthwise layers, with any activation fused.
    families_.push_back(depthwise_conv_family());
    // Also before cuDNN's, one candidate: CNN stems (C <= 4), which cuDNN pads for its tensor cores.
    families_.push_back(small_channel_conv_family());
    // The stem conv with its max pool (fuse_conv_pool forms the node only where this offers it).
    families_.push_back(stem_pool_conv_family());
    // Also before cuDNN's, one candidate: 1x1 convs on one pixel (squeeze-excite FCs), GEMVs that
    // took cuDNN 5-9 us each.
    families_.push_back(pixel_conv_family());
    // A squeeze-excite block in three launches (fuse_squeeze_excite forms the node only where this offers it).
    families_.push_back(squeeze_excite_family());
    // Also before cuDNN's, at most two candidates: grouped convs of 2-64 channels per group (RegNet,
    // ResNeXt), where every cuDNN engine took ~55 us at batch 1.
    families_.push_back(grouped_conv_family());
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
    families_.push_back(cudnn_graph_conv_family());  // first: the autotuner's width takes candidates in order
    // ingot::QuantConv (channels-last int8 / fp8) alone: without it the builder splits those layers
    // into DequantizeLinear and a float conv.
    families_.push_back(cudnn_quant_conv_family());
#endif
#ifdef INGOT_WITH_CUDNN
    families_.push_back(cudnn_conv_family());
#endif
    // After cuDNN's, one candidate: a 1x1 channels-last conv as a cuBLASLt GEMM (with bias, Relu and
    // the residual in its epilogue). cuDNN's plans keep the autotuner's width; this one is timed
    // beside them as the first candidate of a family past the width.
    families_.push_back(cublaslt_conv_family());
    families_.push_back(pool_family());
    families_.push_back(reduce_family());
    families_.push_back(data_movement_family());
    families_.push_back(norm_family());
    families_.push_back(rotary_family());
    families_.push_back(swiglu_family());
    families_.push_back(quant_family());
    families_.push_back(resize_family());
    families_.push_back(topk_family());
    families_.push_back(attention_family());
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
    families_.push_back(cudnn_sdpa_family());
#endif
    families_.push_back(pointwise_family());
    families_.push_back(elementwise_family());
  }
  std::string name() const override { return "cuda"; }
  Device& device() const override { return device_; }
  std::vector<std::unique_ptr<Tactic>> candidates(const ir::Node& node,
                                                  const std::vector<ir::TensorType>& inputs) const override {
    std::vector<std::unique_ptr<Tactic>> v;
    for (const auto& f : families_)
      for (auto& t : f.candidates(node, inputs))
        if (t->supports(node, inputs)) v.push_back(std::move(t));
    auto fb = std::make_unique<HostFallbackTactic>(device_);
    if (fb->supports(node, inputs)) v.push_back(std::move(fb));
    return v;
  }
  Result<double> time_enqueue(const Tactic& tactic, std::vector<StepIO>& ios, int warmup, int runs,
                              TimingMode mode) const override {
    if (ios.empty() || runs < 1) return invalid_argument("time_enqueue needs input sets and runs >= 1");
    cudaStream_t stream = nullptr;
    INGOT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> events(static_cast<size_t>(runs) + 1, nullptr);
    auto cleanup = [&] {
      for (cudaEvent_t e : events)
        if (e) cudaEventDestroy(e);
      cudaStreamDestroy(stream);
    };
    Status st = Status::Ok();
    for (auto& e : events)
      if (st.ok() && cudaEventCreate(&e) != cudaSuccess) st = internal_error("cudaEventCreate failed");
    size_t k = 0;
    for (int i = 0; st.ok() && i < warmup; ++i, ++k) {
      ios[k % ios.size()].stream = stream;
      st = tactic.enqueue(ios[k % ios.size()]);
    }
    // kDevice: the timed runs queue up behind a device-side wait of ~kHostBudgetMs per run (at most
    // kMaxWaitMs), so the GPU runs them back to back and each interval is device time, as a CUDA
    // graph replays it; without it a tactic with a costly host enqueue (cuDNN's execute, CUTLASS's
    // TMA descriptors, ~10 us; the legacy cuDNN conv's ~150 us) is charged its host time on small
    // problems, where the GPU waits for the host. Tactics that synchronize with the host cannot
    // queue up: no wait for them.
    if (st.ok() && mode == TimingMode::kDevice && tactic.capturable()) {
      constexpr double kHostBudgetMs = 0.05, kMaxWaitMs = 2.0;
      const double wait_ms = std::min(kMaxWaitMs, kHostBudgetMs * runs);
      const int clock_khz = current_device_info().clock_khz;
      const int64_t cycles = static_cast<int64_t>(wait_ms * (clock_khz > 0 ? clock_khz : 2000000));
      if (launch_spin_wait(cycles, stream) != cudaSuccess) st = internal_error("spin wait launch failed");
    }
    if (st.ok() && cudaEventRecord(events[0], stream) != cudaSuccess) st = internal_error("cudaEventRecord failed");
    for (int i = 0; st.ok() && i < runs; ++i, ++k) {
      ios[k % ios.size()].stream = stream;
      st = tactic.enqueue(ios[k % ios.size()]);
      if (st.ok() && cudaEventRecord(events[static_cast<size_t>(i) + 1], stream) != cudaSuccess)
        st = internal_error("cudaEventRecord failed");
    }
    cudaError_t e = cudaStreamSynchronize(stream);
    if (st.ok() && e != cudaSuccess) st = internal_error("timing ", tactic.name(), ": ", cudaGetErrorString(e));
    std::vector<double> ms;
    for (int i = 0; st.ok() && i < runs; ++i) {
      float t = 0;
      if (cudaEventElapsedTime(&t, events[static_cast<size_t>(i)], events[static_cast<size_t>(i) + 1]) != cudaSuccess)
        st = internal_error("cudaEventElapsedTime failed");
      ms.push_back(t);
    }
    cleanup();
    if (!st.ok()) {
      cudaGetLastError();  // a failed launch must not poison the next candidate
      return st;
    }
    std::nth_element(ms.begin(), ms.begin() + static_cast<long>(ms.size() / 2), ms.end());
    return ms[ms.size() / 2];
  }
  Result<std::unique_ptr<Tactic>> create_tactic(const std::string& name, const std::vector<uint8_t>& params) const override {
    if (name == "cuda.host_fallback") return std::unique_ptr<Tactic>(new HostFallbackTactic(device_));
    for (const auto& f : families_)
      if (auto t = f.create(name, params)) return t;
    return unsupported("the cuda backend has no tactic '", name, "' (engine built by another ingot version?)");
  }

 private:
  mutable CudaDevice device_;
  std::vector<TacticFamily> families_;
};

}  // namespace

Result<const Backend*> cuda_backend() {
  static std::once_flag once;
  static std::unique_ptr<CudaBackend> backend;
  static Status error;
  std::call_once(once, [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      error = unsupported("no CUDA device: ", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
      return;
    }
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
      error = unsupported("cannot query CUDA device ", dev);
      return;
    }
    backend = std::make_unique<CudaBackend>(dev, "sm_" + std::to_string(prop.major * 10 + prop.minor));
  });
  if (!backend) return error;
  return static_cast<const Backend*>(backend.get());
}

}  // namespace ingot::backend::cuda
