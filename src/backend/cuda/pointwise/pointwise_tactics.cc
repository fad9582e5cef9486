// Copyright ingot authors. Apache-2.0.
//
// The pointwise tactic family of the cuda backend: one NVRTC-compiled kernel per
// ingot::Pointwise node (source from pointwise_codegen.h). prepare() generates the source for the
// node's input/output dtypes, compiles it for the current device's arch to a CUBIN (cached per
// process, so identical nodes compile once) and loads it; serialize() carries the CUBIN, so
// create() rebuilds the tactic from an engine file with no compiler, loading the CUBIN once per
// tactic instance. enqueue only fills a fixed-size argument struct and launches: no allocation,
// no sync, capturable.
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_check.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/core/param_bytes.h"
#include "backend/cuda/pointwise/pointwise_codegen.h"

namespace ingot::backend::cuda {

Result<std::vector<uint8_t>> compile_pointwise_source(const std::string& source, const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, std::vector<uint8_t>> cache;  // arch + '\n' + source -> CUBIN
  const std::string key = arch + '\n' + source;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), "ingot_pointwise.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return internal_error("nvrtcCreateProgram failed: ", nvrtcGetErrorString(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::string arch_opt = "--gpu-architecture=" + arch;
  // No FMA contraction: the reference rounds every op, and a fused a*b-c differs from it by
  // far more than fp32 tolerance when the subtraction cancels.
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--fmad=false"};
  r = nvrtcCompileProgram(prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      nvrtcGetProgramLog(prog, &log[0]);
      log.resize(log_size - 1);
    }
    return internal_error("NVRTC failed to compile the pointwise kernel for ", arch, ": ", nvrtcGetErrorString(r),
                          "\n", log);
  }
  size_t size = 0;
  r = nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS || size == 0)
    return internal_error("nvrtcGetCUBINSize failed for ", arch, ": ", nvrtcGetErrorString(r));
  std::vector<uint8_t> cubin(size);
  r = nvrtcGetCUBIN(prog, reinterpret_cast<char*>(cubin.data()));
  if (r != NVRTC_SUCCESS) return internal_error("nvrtcGetCUBIN failed: ", nvrtcGetErrorString(r));
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(key, cubin);
  return cubin;
}

namespace {

constexpr const char* kTacticName = "cuda.pointwise.nvrtc";
// IPW3: IPW2 and the body's leading Concat (pieces, axis) after the vector width. IPW2: the kernels
// start with the PDL wait (backend/cuda/core/launch.cuh) and launch with PDL. IPW1 engines' kernels
// do not wait: they load and launch without it.
constexpr char kMagic[4] = {'I', 'P', 'W', '3'};
constexpr char kMagicPdl[4] = {'I', 'P', 'W', '2'};
constexpr char kMagicNoPdl[4] = {'I', 'P', 'W', '1'};

bool is_pointwise(const ir::Node& n) { return n.op_type() == "Pointwise" && n.domain() == "ingot"; }

/// "sm_90a" style target of the current device (arch-specific features from Hopper on).
Result<std::string> current_arch() {
  int dev = 0, major = 0, minor = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&dev));
  INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return "sm_" + std::to_string(major * 10 + minor) + (major >= 9 ? "a" : "");
}

class PointwiseTactic final : public Tactic {
 public:
  PointwiseTactic() = default;
  PointwiseTactic(const PointwiseTactic&) = delete;
  PointwiseTactic& operator=(const PointwiseTactic&) = delete;
  ~PointwiseTactic() override {
    if (lib_) cudaLibraryUnload(lib_);
  }

  std::string name() const override { return kTacticName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    if (!is_pointwise(node) || node.outputs().size() != 1 || !node.output(0)) return false;
    // (generate_pointwise_source bounds the inputs: a leading Concat's pieces count apart)
    if (in.size() != node.inputs().size() || in.size() > static_cast<size_t>(kPointwiseMaxInputs + kPointwiseMaxConcat))
      return false;
    std::vector<DataType> storage;
    for (const ir::TensorType& t : in) {
      if (t.dtype == DataType::kUndefined || !t.shape.rank_known() || t.shape.rank() > kPointwiseMaxRank) return false;
      storage.push_back(t.dtype);
    }
    const ir::Value* out = node.output(0);
    if (out->shape().rank_known() && out->shape().rank() > kPointwiseMaxRank) return false;
    return generate_pointwise_source(node, storage, out->dtype()).ok();
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status prepare(const ir::Node& node) override {
    std::vector<DataType> storage;
    for (const ir::Value* v : node.inputs()) {
      if (!v) return unsupported(node.describe(), ": omitted inputs are not supported");
      storage.push_back(v->dtype());
    }
    if (!node.output(0)) return unsupported(node.describe(), ": no output");
    INGOT_ASSIGN_OR_RETURN(PointwiseSource src, generate_pointwise_source(node, storage, node.output(0)->dtype()));
    INGOT_ASSIGN_OR_RETURN(std::string arch, current_arch());
    auto cubin = compile_pointwise_source(src.source, arch);
    if (!cubin.ok()) return Status(cubin.status().code(), node.describe() + ": " + cubin.status().message());
    in_dtypes_ = storage;
    out_dtype_ = node.output(0)->dtype();
    vec_ = src.vec;
    cat_ = src.concat;
    arch_ = arch;
    cubin_ = std::move(cubin).value();
    load_status_ = load();
    if (!load_status_.ok()) return Status(load_status_.code(), node.describe() + ": " + load_status_.message());
    return Status::Ok();
  }

  /// Layout: "IPW3", vec, Concat pieces, Concat axis, #inputs, input dtypes, output dtype, arch length +
  /// bytes, CUBIN size + bytes (IPW1/IPW2: no pieces and axis).
  std::vector<uint8_t> serialize() const override {
    std::vector<uint8_t> b(kMagic, kMagic + 4);
    put_bytes<int32_t>(b, vec_);
    put_bytes<int32_t>(b, cat_.pieces);
    put_bytes<int32_t>(b, cat_.axis);
    put_bytes<int32_t>(b, static_cast<int32_t>(in_dtypes_.size()));
    for (DataType t : in_dtypes_) put_bytes<int32_t>(b, static_cast<int32_t>(t));
    put_bytes<int32_t>(b, static_cast<int32_t>(out_dtype_));
    put_bytes<int32_t>(b, static_cast<int32_t>(arch_.size()));
    b.insert(b.end(), arch_.begin(), arch_.end());
    put_bytes<int32_t>(b, static_cast<int32_t>(cubin_.size()));
    b.insert(b.end(), cubin_.begin(), cubin_.end());
    return b;
  }

  /// Restores from serialize()'s bytes and loads the CUBIN; errors surface at enqueue (create()
  /// has no Status to return).
  void restore(const std::vector<uint8_t>& params) { load_status_ = parse_and_load(params); }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined())
      return internal_error("cuda.pointwise: step without a node or a defined output 0");
    const ir::Node& node = *io.node;
    if (!load_status_.ok()) return Status(load_status_.code(), node.describe() + ": " + load_status_.message());
    if (lib_ == nullptr) return internal_error(node.describe(), ": pointwise tactic used before prepare()");
    Tensor& y = (*io.outputs)[0];
    const int n_in = static_cast<int>(in_dtypes_.size());
    if (static_cast<int>(io.inputs.size()) != n_in)
      return internal_error(node.describe(), ": ", io.inputs.size(), " inputs, the kernel was built for ", n_in);
    if (y.dtype() != out_dtype_)
      return internal_error(node.describe(), ": output is ", data_type_name(y.dtype()), ", the kernel writes ",
                            data_type_name(out_dtype_));
    for (int k = 0; k < n_in; ++k) {
      const Tensor* t = io.inputs[static_cast<size_t>(k)];
      if (t == nullptr) return internal_error(node.describe(), ": input ", k, " is missing");
      if (t->dtype() != in_dtypes_[static_cast<size_t>(k)])
        return internal_error(node.describe(), ": input ", k, " is ", data_type_name(t->dtype()),
                              ", the kernel reads ", data_type_name(in_dtypes_[static_cast<size_t>(k)]));
    }
    // The kernel's inputs: the node's, or the joined value of a leading Concat (the output's shape,
    // read from the pieces in `cat`) and the inputs after the pieces.
    PointwiseArgs args;
    PointwiseConcatArgs cat;
    const Shape64* shapes[kPointwiseMaxInputs];
    DataType dtypes[kPointwiseMaxInputs];
    const int first = cat_.pieces;
    const int n_args = first > 0 ? 1 + n_in - first : n_in;
    if (n_args > kPointwiseMaxInputs) return internal_error(node.describe(), ": ", n_args, " kernel inputs");
    if (first > 0) {
      INGOT_RETURN_IF_ERROR(plan_concat(node, io, y.shape(), &cat));
      args.in[0] = nullptr;
      shapes[0] = &y.shape();
      dtypes[0] = in_dtypes_[0];
    }
    for (int k = first; k < n_in; ++k) {
      const int a = first > 0 ? 1 + k - first : k;
      args.in[a] = io.inputs[static_cast<size_t>(k)]->raw();
      shapes[a] = &io.inputs[static_cast<size_t>(k)]->shape();
      dtypes[a] = in_dtypes_[static_cast<size_t>(k)];
    }
    for (int k = n_args; k < kPointwiseMaxInputs; ++k) args.in[k] = nullptr;
    bool flat = false;
    if (!plan_pointwise_launch(y.shape(), shapes, n_args, &args, &flat))
      return invalid_argument(node.describe(), ": inputs do not broadcast to the output ", shape_to_string(y.shape()),
                              " within ", kPointwiseMaxRank, " dims");
    if (args.n == 0) return Status::Ok();
    args.out = y.mutable_raw();
    args.vec_ok = 0;
    cudaKernel_t kernel = nullptr;
    int64_t work = args.n;
    // Whether every operand read as packs of v along dim `d` (stride 1 there) is aligned for it; the
    // joined value of a leading Concat also needs each pack within one piece.
    auto aligned_for = [&](int v, int d) {
      auto fits = [v](const void* p, DataType t) {
        return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(v * (data_type_bits(t) / 8)) == 0;
      };
      bool ok = fits(args.out, out_dtype_);
      for (int k = 0; k < n_args && ok; ++k)
        if (args.strides[k][d] != 0) ok = fits(args.in[k], dtypes[k]);
      if (first > 0 && ok) {
        bool whole = cat.inner % v == 0;
        if (cat.inner == 1) {
          whole = true;
          for (int j = 0; j < cat.n && whole; ++j) whole = (cat.off[j + 1] - cat.off[j]) % v == 0;
        }
        ok = whole;
        for (int j = 0; j < cat.n && ok; ++j) ok = fits(cat.in[j], dtypes[0]);
      }
      return ok;
    };
    if (flat) {
      kernel = flat_;
      if (vec_ > 1 && args.n >= vec_ && aligned_for(vec_, 0)) {
        args.vec_ok = 1;
        work = args.n / vec_;
      }
    } else {
      bool small = args.n < (int64_t{1} << 31);
      for (int k = 0; k < n_in && small; ++k) small = io.inputs[static_cast<size_t>(k)]->numel() < (int64_t{1} << 31);
      // (the joined value's offsets are 64-bit in pw_cat_at whichever kernel runs)
      kernel = small ? general32_ : general64_;
      // Packs along the innermost dim when its size divides and every input walks it densely or not at all.
      const int d = args.rank - 1;
      bool inner_ok = small && d >= 1;
      for (int k = 0; k < n_args && inner_ok; ++k) inner_ok = args.strides[k][d] == 0 || args.strides[k][d] == 1;
      for (int v : {vec_, vec_ / 2}) {
        if (!inner_ok || v < 2 || args.dims[d] % v != 0 || !aligned_for(v, d)) continue;
        kernel = v == vec_ ? inner_v_ : inner_h_;
        work = args.n / v;
        break;
      }
    }
    int64_t blocks = (work + kPointwiseBlock - 1) / kPointwiseBlock;
    blocks = std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t{sm_count_} * 16));
    void* params[] = {&args, &cat};
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kPointwiseBlock);
    cfg.stream = static_cast<cudaStream_t>(io.stream);
    cudaLaunchAttribute attr = pdl_attribute();
    if (!waits_) attr.val.programmaticStreamSerializationAllowed = 0;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    cudaError_t err = cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(kernel), params);
    if (err != cudaSuccess)
      return internal_error(node.describe(), ": ", kTacticName, " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

 private:
  Status parse_and_load(const std::vector<uint8_t>& params) {
    ParamReader r(params);
    const uint8_t* magic = nullptr;
    int32_t vec = 0, n = 0, out = 0, arch_len = 0, cubin_len = 0;
    const uint8_t* arch = nullptr;
    const uint8_t* cubin = nullptr;
    const bool v3 = r.bytes(4, &magic) && std::memcmp(magic, kMagic, 4) == 0;
    if (!magic || (!v3 && std::memcmp(magic, kMagicPdl, 4) != 0 && std::memcmp(magic, kMagicNoPdl, 4) != 0) ||
        !r.get(&vec) || vec < 1)
      return invalid_model(kTacticName, ": engine parameters are not a pointwise kernel (rebuild the engine)");
    int32_t pieces = 0, axis = 0;
    if (v3 && (!r.get(&pieces) || !r.get(&axis) || pieces < 0 || pieces == 1 || pieces > kPointwiseMaxConcat ||
               axis < 0 || axis >= kPointwiseMaxRank))
      return invalid_model(kTacticName, ": damaged parameters (rebuild the engine)");
    if (!r.get(&n) || n < pieces || n - pieces + (pieces > 0) > kPointwiseMaxInputs)
      return invalid_model(kTacticName, ": engine parameters are not a pointwise kernel (rebuild the engine)");
    waits_ = std::memcmp(magic, kMagicNoPdl, 4) != 0;
    cat_.pieces = pieces;
    cat_.axis = axis;
    in_dtypes_.clear();
    for (int32_t k = 0; k < n; ++k) {
      int32_t t = 0;
      if (!r.get(&t) || !is_valid_data_type(t) || data_type_bits(static_cast<DataType>(t)) < 8)
        return invalid_model(kTacticName, ": damaged parameters (rebuild the engine)");
      in_dtypes_.push_back(static_cast<DataType>(t));
    }
    if (!r.get(&out) || !r.get(&arch_len) || arch_len < 0 || !r.bytes(static_cast<size_t>(arch_len), &arch) ||
        !r.get(&cubin_len) || cubin_len <= 0 || !r.bytes(static_cast<size_t>(cubin_len), &cubin) || !r.done() ||
        !is_valid_data_type(out) || data_type_bits(static_cast<DataType>(out)) < 8)
      return invalid_model(kTacticName, ": truncated or damaged parameters (rebuild the engine)");
    vec_ = vec;
    out_dtype_ = static_cast<DataType>(out);
    arch_.assign(reinterpret_cast<const char*>(arch), static_cast<size_t>(arch_len));
    cubin_.assign(cubin, cubin + cubin_len);
    auto now = current_arch();
    if (now.ok() && *now != arch_)
      return unsupported(kTacticName, ": kernel compiled for ", arch_, ", this device is ", *now,
                         " (rebuild the engine)");
    return load();
  }

  /// The pieces of a leading Concat for this call: each of the output's shape but along the axis,
  /// whose sizes add up to the output's.
  Status plan_concat(const ir::Node& node, const StepIO& io, const Shape64& out, PointwiseConcatArgs* cat) const {
    const size_t axis = static_cast<size_t>(cat_.axis);
    if (axis >= out.size())
      return internal_error(node.describe(), ": Concat axis ", axis, " of a rank-", out.size(), " output");
    cat->inner = 1;
    for (size_t d = axis + 1; d < out.size(); ++d) cat->inner *= out[d];
    int64_t off = 0;
    for (int j = 0; j < cat_.pieces; ++j) {
      const Tensor& t = *io.inputs[static_cast<size_t>(j)];
      bool fits = t.shape().size() == out.size();
      for (size_t d = 0; d < out.size() && fits; ++d) fits = d == axis || t.shape()[d] == out[d];
      if (!fits)
        return invalid_argument(node.describe(), ": Concat piece ", j, " ", shape_to_string(t.shape()),
                                " does not fit the output ", shape_to_string(out), " along axis ", axis);
      cat->in[j] = t.raw();
      cat->off[j] = off;
      off += t.shape()[axis];
    }
    cat->off[cat_.pieces] = off;
    cat->n = cat_.pieces;
    if (off != out[axis])
      return invalid_argument(node.describe(), ": Concat pieces add up to ", off, " along axis ", axis, ", the output has ",
                              out[axis]);
    if (cat->inner == 0) cat->inner = 1;  // an empty output launches nothing
    return Status::Ok();
  }

  Status load() {
    if (lib_) {
      cudaLibraryUnload(lib_);
      lib_ = nullptr;
    }
    INGOT_CUDA_CHECK(cudaLibraryLoadData(&lib_, cubin_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    INGOT_CUDA_CHECK(cudaLibraryGetKernel(&flat_, lib_, "pw_flat"));
    INGOT_CUDA_CHECK(cudaLibraryGetKernel(&general32_, lib_, "pw_general32"));
    INGOT_CUDA_CHECK(cudaLibraryGetKernel(&general64_, lib_, "pw_general64"));
    INGOT_CUDA_CHECK(cudaLibraryGetKernel(&inner_v_, lib_, "pw_inner_v"));
    INGOT_CUDA_CHECK(cudaLibraryGetKernel(&inner_h_, lib_, "pw_inner_h"));
    int dev = 0;
    INGOT_CUDA_CHECK(cudaGetDevice(&dev));
    INGOT_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
    if (sm_count_ < 1) sm_count_ = 1;
    return Status::Ok();
  }

  std::vector<DataType> in_dtypes_;
  DataType out_dtype_ = DataType::kUndefined;
  int vec_ = 1;
  PointwiseConcat cat_;  ///< the body's leading Concat (pieces 0: none)
  std::string arch_;
  std::vector<uint8_t> cubin_;
  Status load_status_ = Status::Ok();
  cudaLibrary_t lib_ = nullptr;
  bool waits_ = true;  ///< the kernels start with the PDL wait (IPW2)
  cudaKernel_t flat_ = nullptr, general32_ = nullptr, general64_ = nullptr, inner_v_ = nullptr, inner_h_ = nullptr;
  int sm_count_ = 1;
};

}  // namespace

TacticFamily pointwise_family() {
  TacticFamily f;
  f.name = "pointwise";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    if (!is_pointwise(node)) return out;
    auto t = std::make_unique<PointwiseTactic>();
    if (t->supports(node, inputs)) out.push_back(std::move(t));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kTacticName) return nullptr;
    auto t = std::make_unique<PointwiseTactic>();
    t->restore(params);
    return t;
  };
  return f;
}

}  // namespace ingot::backend::cuda
