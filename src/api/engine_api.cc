// Copyright ingot authors. Apache-2.0.
//
// The public Builder and Runtime: thin doors onto builder/, engine/ and runtime/.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "api/host_tensor.h"
#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/builder.h"
#include "core/mapped_file.h"
#include "engine/engine_format.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ingot/reference.h"
#include "onnx/importer.h"
#include "quant/calibration.h"
#include "quant/smooth_quant.h"
#include "quant/insert_qdq.h"
#include "quant/sensitivity.h"
#include "runtime/engine_impl.h"

namespace ingot {

namespace {

class StderrLogger : public Logger {
 public:
  void log(Severity severity, const char* message) noexcept override {
    if (severity > Severity::kWarning) return;
    std::fprintf(stderr, "[ingot %s] %s\n", severity == Severity::kError ? "error" : "warning", message);
  }
};

const char* backend_name(BackendKind k) { return k == BackendKind::kCuda ? "cuda" : "cpu"; }

using ReferenceFactory = std::function<Result<std::unique_ptr<ReferenceModel>>()>;
using ModelFactory = std::function<Result<onnx::Model>()>;

struct Calibration {
  std::map<std::string, float> scales;
  // Kept for the accuracy search (BuilderConfig::int8_min_cosine): inputs and fp32 outputs.
  std::vector<std::map<std::string, Tensor>> batches;
  std::vector<std::vector<Tensor>> want;
  // Where the batches ran ("cpu engine", "cuda engine", "reference interpreter") and how long
  // calibration took, from the first batch read to the scales.
  std::string ran_on;
  double seconds = 0;
  // With SmoothQuant: max |x| per channel of the last dim of each observed tensor that has a
  // known one (quant/smooth_quant.h).
  std::map<std::string, std::vector<float>> channel_amax;
};

// The tensors calibration observes (quant::calibrated_tensors: the activations insert_qdq reads
// scales for) and their statistics, whichever way the fp32 values are computed.
struct Observed {
  std::vector<std::string> names;
  std::map<std::string, quant::TensorCalibration> seen;
  // Tensors whose per-channel maxima are kept too (SmoothQuant): name -> channels (last dim).
  std::map<std::string, int64_t> channels;
  std::map<std::string, std::vector<float>> channel_amax;

  // Folds in one batch's values of the observed tensors among `values` (name -> f32 data and
  // element count; others are ignored), tensors spread over threads.
  void fold(const std::map<std::string, std::pair<const float*, int64_t>>& values) {
    std::vector<quant::Observation> work;
    for (const std::string& n : names) {
      auto it = values.find(n);
      if (it != values.end()) work.push_back({&seen[n], it->second.first, it->second.second});
    }
    quant::observe_all(work);
    for (const auto& [n, c] : channels)
      if (auto it = values.find(n); it != values.end())
        quant::observe_channel_amax(&channel_amax[n], it->second.first, it->second.second, c);
  }
};

// A calibration batch against the model's inputs (what the reference interpreter checks too):
// known names, the model's dtype, rank and fixed dims, and as many bytes as the shape needs.
Status check_batch(const std::vector<TensorInfo>& inputs, const std::vector<HostTensor>& batch) {
  for (const HostTensor& t : batch) {
    const TensorInfo* info = nullptr;
    for (const TensorInfo& i : inputs)
      if (i.name == t.name) info = &i;
    if (!info) return invalid_argument("'", t.name, "' is not an input of the model");
    if (t.dtype != info->dtype)
      return invalid_argument("input '", t.name, "' is ", data_type_name(t.dtype), ", the model's is ",
                              data_type_name(info->dtype));
    if (info->rank_known && t.shape.size() != info->shape.size())
      return invalid_argument("input '", t.name, "' has rank ", t.shape.size(), ", the model's has ",
                              info->shape.size());
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (t.shape[k] < 0) return invalid_argument("input '", t.name, "' has a negative dim");
      if (info->rank_known && info->shape[k] >= 0 && t.shape[k] != info->shape[k])
        return invalid_argument("input '", t.name, "' dim ", k, " is fixed to ", info->shape[k], ", got ", t.shape[k]);
    }
    if (t.dtype != DataType::kString && t.data.size() != storage_bytes(t.dtype, t.numel()))
      return invalid_argument("input '", t.name, "' has ", t.data.size(), " bytes, its shape needs ",
                              storage_bytes(t.dtype, t.numel()));
  }
  return Status::Ok();
}

// The f32 tensors of a batch, by name, for Observed::fold.
std::map<std::string, std::pair<const float*, int64_t>> float_views(const std::vector<HostTensor>& tensors) {
  std::map<std::string, std::pair<const float*, int64_t>> out;
  for (const HostTensor& t : tensors)
    if (t.dtype == DataType::kFloat32 && t.data.size() == static_cast<size_t>(t.numel()) * 4)
      out[t.name] = {reinterpret_cast<const float*>(t.data.data()), t.numel()};
  return out;
}

// The fp32 engine calibration runs its batches through: the model with every observed tensor
// marked as a graph output (so no fusion hides it), for the build's backend, with one
// optimization profile spanning the batches' shapes (they need not fit the build's profiles),
// run through the runtime as `ingot run` runs engines. No reduced precision, no autotuning
// beyond the backend's first guess (it runs a few batches, once), no timing cache.
class CalibrationEngine {
 public:
  // One output after finish(): host bytes (the context's own memory on a host backend, a copy
  // otherwise), valid until the next start().
  struct HostOutput {
    DataType dtype = DataType::kUndefined;
    std::vector<int64_t> dims;
    const void* data = nullptr;
  };

  static Result<std::unique_ptr<CalibrationEngine>> create(const BuilderConfig& config, onnx::Model model,
                                                           const std::vector<std::string>& observe,
                                                           const std::vector<std::vector<HostTensor>>& batches) {
    std::unique_ptr<CalibrationEngine> e(new CalibrationEngine());
    ir::Graph& g = *model.graph;
    std::set<std::string> inputs;  // observed in the batches themselves
    for (const ir::Value* v : g.inputs()) inputs.insert(v->name());
    std::set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
    for (const std::string& name : observe) {
      ir::Value* v = g.find_value(name);
      if (!v) return internal_error("the tensor '", name, "' to observe is not in the model");
      if (inputs.count(name) || outputs.count(v)) continue;
      g.add_output(v);
      outputs.insert(v);
    }
    builder::BuildOptions opt;
    opt.backend = backend_name(config.backend);
    INGOT_ASSIGN_OR_RETURN(builder::Profile profile, batch_profile(g, batches));
    if (!profile.inputs.empty()) opt.profiles.push_back(std::move(profile));
    opt.pipeline.disabled.insert(config.disabled_passes.begin(), config.disabled_passes.end());
    opt.optimize = config.optimization_level > 0;
    opt.tune.optimization_level = 1;
    opt.tune.workspace_limit = config.workspace_bytes;
    opt.conv_layout = "nchw";
    opt.allow_host_fallback = true;
    std::shared_ptr<ir::Graph> graph(std::move(model.graph));
    INGOT_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(graph, std::move(model.storage), opt));
    INGOT_ASSIGN_OR_RETURN(const backend::Backend* be, backend::find_backend(plan.backend));
    e->device_ = &be->device();
    INGOT_ASSIGN_OR_RETURN(e->engine_, runtime::make_engine(std::move(plan)));
    for (const std::string& name : observe) {
      bool found = inputs.count(name) > 0;
      for (const IoTensorDesc& d : e->engine_->io_tensors()) found |= !d.is_input && d.name == name;
      if (!found) return internal_error("the engine has no output '", name, "'");
    }
    for (const IoTensorDesc& d : e->engine_->io_tensors())
      if (d.dtype == DataType::kString) return unsupported("'", d.name, "' is a string tensor");
    INGOT_ASSIGN_OR_RETURN(e->context_, e->engine_->create_execution_context());
    INGOT_RETURN_IF_ERROR(e->context_->set_optimization_profile(0));
    return e;
  }

  ~CalibrationEngine() {
    if (device_) (void)device_->synchronize(nullptr);
    context_.reset();
    for (auto& [name, b] : device_inputs_)
      if (b.first) device_->release(b.first);
  }

  // Binds the batch and enqueues the engine on it (on the legacy default stream: asynchronous on
  // a device backend, so the host can observe the previous batch meanwhile).
  Status start(const std::vector<HostTensor>& batch) {
    for (const HostTensor& t : batch) {
      INGOT_RETURN_IF_ERROR(context_->set_input_shape(t.name, t.shape));
      void* address = const_cast<uint8_t*>(t.data.data());
      if (!device_->is_host()) {
        auto& [p, capacity] = device_inputs_[t.name];
        if (t.data.size() > capacity) {
          if (p) device_->release(p);
          p = nullptr;
          capacity = 0;
          INGOT_ASSIGN_OR_RETURN(p, device_->allocate(t.data.size()));
          capacity = t.data.size();
        }
        INGOT_RETURN_IF_ERROR(device_->copy_to_device(p, t.data.data(), t.data.size(), nullptr));
        address = p;
      }
      INGOT_RETURN_IF_ERROR(context_->set_tensor_address(t.name, address));
    }
    return context_->enqueue(nullptr);
  }

  // Waits for the run started last and makes its outputs readable on the host.
  Status finish() {
    outputs_.clear();
    for (const IoTensorDesc& d : engine_->io_tensors()) {
      if (d.is_input) continue;
      HostOutput o;
      o.dtype = d.dtype;
      INGOT_ASSIGN_OR_RETURN(o.dims, context_->tensor_shape(d.name));
      const size_t bytes = storage_bytes(d.dtype, shape_numel(o.dims));
      const void* src = context_->tensor_address(d.name);
      if (bytes && !src) return internal_error("output '", d.name, "' has no memory after the run");
      if (device_->is_host() || !bytes) {
        o.data = src;
      } else {
        std::vector<uint8_t>& staging = staging_[d.name];
        staging.resize(bytes);
        INGOT_RETURN_IF_ERROR(device_->copy_to_host(staging.data(), src, bytes, nullptr));
        o.data = staging.data();
      }
      outputs_[d.name] = std::move(o);
    }
    return device_->synchronize(nullptr);
  }

  const std::map<std::string, HostOutput>& outputs() const { return outputs_; }
  // Whether start() returns before the run ends (a device backend).
  bool asynchronous() const { return !device_->is_host(); }

  // The f32 outputs of the last finished run, by name, for Observed::fold.
  std::map<std::string, std::pair<const float*, int64_t>> float_views() const {
    std::map<std::string, std::pair<const float*, int64_t>> out;
    for (const auto& [name, o] : outputs_)
      if (o.dtype == DataType::kFloat32) out[name] = {static_cast<const float*>(o.data), shape_numel(o.dims)};
    return out;
  }

 private:
  CalibrationEngine() = default;

  // One profile over every batch: per open input, min and max of each dim; tactics are chosen at
  // the largest.
  static Result<builder::Profile> batch_profile(const ir::Graph& g,
                                                const std::vector<std::vector<HostTensor>>& batches) {
    builder::Profile p;
    for (const ir::Value* v : g.inputs()) {
      bool open = !v->shape().rank_known();
      for (const ir::Dim& d : v->shape().dims()) open |= !d.is_known();
      if (!open) continue;
      builder::ProfileDims dims;
      dims.input = v->name();
      for (const auto& batch : batches)
        for (const HostTensor& t : batch) {
          if (t.name != v->name()) continue;
          if (dims.min.empty()) {
            dims.min = dims.max = t.shape;
          } else if (t.shape.size() != dims.min.size()) {
            return invalid_argument("input '", v->name(), "' changes rank between calibration batches");
          } else {
            for (size_t k = 0; k < t.shape.size(); ++k) {
              dims.min[k] = std::min(dims.min[k], t.shape[k]);
              dims.max[k] = std::max(dims.max[k], t.shape[k]);
            }
          }
        }
      if (dims.min.empty()) return invalid_argument("input '", v->name(), "' has open dims and is in no batch");
      dims.opt = dims.max;
      p.inputs.push_back(std::move(dims));
    }
    return p;
  }

  backend::Device* device_ = nullptr;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> context_;
  std::map<std::string, std::pair<void*, size_t>> device_inputs_;  // device backends: address, capacity
  std::map<std::string, std::vector<uint8_t>> staging_;            // device backends: outputs on the host
  std::map<std::string, HostOutput> outputs_;
};

// The accuracy search's copy of one batch: its inputs and the model's outputs (`outputs`, in
// model order, looked up by name in `values`).
Status keep_batch(const std::vector<HostTensor>& batch, const std::vector<TensorInfo>& outputs,
                  const std::function<Result<Tensor>(const std::string&)>& value, Calibration* out) {
  std::map<std::string, Tensor> feeds;
  for (const HostTensor& h : batch) {
    INGOT_ASSIGN_OR_RETURN(feeds[h.name], host_to_tensor(h));
  }
  std::vector<Tensor> outs;
  for (const TensorInfo& o : outputs) {
    INGOT_ASSIGN_OR_RETURN(Tensor t, value(o.name));
    outs.push_back(std::move(t));
  }
  out->batches.push_back(std::move(feeds));
  out->want.push_back(std::move(outs));
  return Status::Ok();
}

// Calibration on the fp32 engine of the build's backend: each batch's observed tensors come back
// as engine outputs. On a device backend the host folds batch k into the histograms while the
// device runs batch k + 1.
Status observe_on_engine(const BuilderConfig& config, onnx::Model model, const std::vector<TensorInfo>& model_outputs,
                         const std::vector<std::vector<HostTensor>>& batches, Observed& obs, Calibration* keep) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CalibrationEngine> engine,
                         CalibrationEngine::create(config, std::move(model), obs.names, batches));
  const int n = static_cast<int>(batches.size());
  bool pending = false;  // the previous batch's outputs wait in the engine's host copies
  for (int b = 0; b < n; ++b) {
    Status s = engine->start(batches[static_cast<size_t>(b)]);
    if (s.ok() && pending) obs.fold(engine->float_views());
    if (s.ok()) s = engine->finish();
    if (!s.ok()) return Status(s.code(), "calibration batch " + std::to_string(b + 1) + ": " + s.message());
    obs.fold(float_views(batches[static_cast<size_t>(b)]));
    if (engine->asynchronous())
      pending = true;
    else
      obs.fold(engine->float_views());
    if (keep) {
      INGOT_RETURN_IF_ERROR(keep_batch(
          batches[static_cast<size_t>(b)], model_outputs,
          [&](const std::string& name) -> Result<Tensor> {
            auto it = engine->outputs().find(name);
            if (it == engine->outputs().end()) return internal_error("the engine has no output '", name, "'");
            INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(it->second.dtype, it->second.dims));
            if (t.nbytes()) std::memcpy(t.mutable_raw(), it->second.data, t.nbytes());
            return t;
          },
          keep));
    }
    if (config.progress) config.progress("calibrating", b + 1, n);
  }
  if (pending) obs.fold(engine->float_views());
  return Status::Ok();
}

// Calibration on the reference interpreter (the fallback): every value of each batch computed on
// the host, node by node, the observed ones folded in.
Status observe_on_interpreter(const BuilderConfig& config, const ReferenceModel& model,
                              const std::vector<std::vector<HostTensor>>& batches, Observed& obs, Calibration* keep) {
  const int n = static_cast<int>(batches.size());
  for (int b = 0; b < n; ++b) {
    const std::vector<HostTensor>& batch = batches[static_cast<size_t>(b)];
    auto values = model.run_all(batch);
    if (!values.ok())
      return Status(values.status().code(),
                    "calibration batch " + std::to_string(b + 1) + ": " + values.status().message());
    std::map<std::string, std::pair<const float*, int64_t>> views = float_views(batch);
    for (auto& [name, view] : float_views(*values)) views[name] = view;
    obs.fold(views);
    if (keep) {
      INGOT_RETURN_IF_ERROR(keep_batch(
          batch, model.outputs(),
          [&](const std::string& name) -> Result<Tensor> {
            for (const HostTensor& h : *values)
              if (h.name == name) return host_to_tensor(h);
            return internal_error("the interpreter gave no '", name, "'");
          },
          keep));
    }
    if (config.progress) config.progress("calibrating", b + 1, n);
  }
  return Status::Ok();
}

// INT8/FP8 calibration: the scales of the tensors insert_qdq quantizes, from the calibrator's
// cache or by running the fp32 model on its batches and observing those tensors: on an fp32
// engine of the build's backend, or, when that engine cannot be built or run, on the reference
// interpreter (as TensorRT calibrates on the target GPU with the tensors it needs marked as outputs).
Result<Calibration> calibrate(const BuilderConfig& config, const ReferenceFactory& reference,
                              const ModelFactory& import_fresh, BuildSummary* summary, Logger& logger) {
  Calibration out;
  const bool keep = config.int8_min_cosine > 0;
  const bool smooth = config.smoothquant_alpha >= 0;
  const quant::QuantType qtype = config.fp8 ? quant::QuantType::kFp8E4M3 : quant::QuantType::kInt8;
  const double divisor = quant::quant_max(qtype);
  Calibrator& cal = *config.calibrator;
  INGOT_ASSIGN_OR_RETURN(quant::CalibrationAlgorithm algo, quant::parse_algorithm(cal.algorithm()));
  // The search needs the batches, SmoothQuant the per-channel maxima: neither is in the cache.
  const std::string cached = keep || smooth ? std::string() : cal.read_cache();
  if (!cached.empty()) {
    std::string header;
    auto scales = quant::read_cache(cached, &header);
    if (!scales.ok()) return Status(scales.status().code(), "calibration cache: " + scales.status().message());
    const bool fp8_cache = header.find("FP8") != std::string::npos;
    if (fp8_cache != config.fp8)
      return invalid_argument("calibration cache: its scales are for ", fp8_cache ? "fp8" : "int8", " ('", header,
                              "'), this build is ", config.fp8 ? "fp8" : "int8", ": give another cache file");
    logger.log(Severity::kInfo, ("calibration cache (" + header + "): " + std::to_string(scales->size()) +
                                 " tensor scales read, no batches run")
                                    .c_str());
    if (summary) {
      summary->calibration_from_cache = true;
      summary->calibration_tensors = static_cast<int>(scales->size());
    }
    out.scales = std::move(*scales);
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceModel> model, reference());
  const int total = cal.num_batches();
  if (config.progress) config.progress("calibrating", 0, total > 0 ? total : 1);
  // Every batch first: the calibration engine's profile spans their shapes.
  std::vector<std::vector<HostTensor>> batches;
  for (;;) {
    INGOT_ASSIGN_OR_RETURN(std::vector<HostTensor> batch, cal.next_batch(model->inputs()));
    if (batch.empty()) break;
    Status s = check_batch(model->inputs(), batch);
    if (!s.ok())
      return Status(s.code(), "calibration batch " + std::to_string(batches.size() + 1) + ": " + s.message());
    batches.push_back(std::move(batch));
  }
  if (batches.empty()) return invalid_argument("INT8 calibration: the calibrator gave no batch");
  INGOT_ASSIGN_OR_RETURN(onnx::Model fresh, import_fresh());
  Observed obs;
  obs.names = quant::calibrated_tensors(*fresh.graph);
  if (smooth)
    for (const std::string& n : obs.names)
      if (const ir::Value* v = fresh.graph->find_value(n);
          v && v->shape().rank_known() && v->shape().rank() >= 2 && v->shape()[v->shape().rank() - 1].is_known())
        obs.channels[n] = v->shape()[v->shape().rank() - 1].value();
  out.ran_on = std::string(backend_name(config.backend)) + " engine";
  Status on_engine = observe_on_engine(config, std::move(fresh), model->outputs(), batches, obs, keep ? &out : nullptr);
  if (!on_engine.ok()) {
    logger.log(Severity::kInfo, ("calibration: the fp32 " + out.ran_on + " cannot run the batches (" +
                                 on_engine.message() + "); the reference interpreter runs them instead")
                                    .c_str());
    obs.seen.clear();
    obs.channel_amax.clear();
    out.batches.clear();
    out.want.clear();
    out.ran_on = "reference interpreter";
    INGOT_RETURN_IF_ERROR(observe_on_interpreter(config, *model, batches, obs, keep ? &out : nullptr));
  }
  std::vector<const quant::TensorCalibration*> tensors;
  for (const auto& [name, t] : obs.seen) tensors.push_back(&t);
  const std::vector<double> th = quant::thresholds(tensors, algo, cal.percentile());
  std::map<std::string, float> scales;
  size_t k = 0;
  for (const auto& [name, t] : obs.seen) {
    if (th[k] > 0) scales[name] = static_cast<float>(th[k] / divisor);
    ++k;
  }
  cal.write_cache(quant::write_cache(algo, scales, qtype == quant::QuantType::kFp8E4M3));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", out.seconds);
  logger.log(Severity::kInfo,
             ("calibrated " + std::to_string(scales.size()) + " tensors on " + std::to_string(batches.size()) +
              " batches (" + quant::algorithm_name(algo) + ") on the " + out.ran_on + " in " + took)
                 .c_str());
  if (summary) {
    summary->calibration_batches = static_cast<int>(batches.size());
    summary->calibration_tensors = static_cast<int>(scales.size());
    summary->calibration_seconds = out.seconds;
    summary->calibration_ran_on = out.ran_on;
  }
  out.scales = std::move(scales);
  out.channel_amax = std::move(obs.channel_amax);
  return out;
}

Result<std::vector<uint8_t>> build_from_model(onnx::Model model, const BuilderConfig& config, BuildSummary* summary,
                                              Logger& logger, const ReferenceFactory& reference,
                                              const ModelFactory& import_fresh) {
  auto t0 = std::chrono::steady_clock::now();
  quant::QdqReport qdq;
  double calibration_seconds = 0;
  if (config.int8 && config.fp8) return invalid_argument("choose one of int8 and fp8 (--int8, --fp8)");
  if (config.int8 || config.fp8) {
    if (!config.calibrator)
      return invalid_argument(config.fp8 ? "FP8" : "INT8",
                              " needs calibration data: set BuilderConfig::calibrator (ingot ", "build ",
                              config.fp8 ? "--fp8" : "--int8", " --calibration-data DIR)");
    const quant::QuantType qtype = config.fp8 ? quant::QuantType::kFp8E4M3 : quant::QuantType::kInt8;
    INGOT_ASSIGN_OR_RETURN(Calibration cal, calibrate(config, reference, import_fresh, summary, logger));
    calibration_seconds = cal.seconds;
    // --layer-precisions under --int8: fp32 keeps a layer in float, int8 keeps it quantized.
    std::map<std::string, std::string> keep_float;
    std::vector<std::string> forced_int8;
    for (const auto& [layer, prec] : config.layer_precisions) {
      if (prec == "fp32") keep_float[layer] = "--layer-precisions " + layer + ":fp32";
      if (prec == (config.fp8 ? "fp8" : "int8")) forced_int8.push_back(layer);
    }
    // SmoothQuant: the outlier channels of each MatMul/Gemm input move into its weight; the
    // smoothed tensors' scales join cal.scales. The search's trial graphs are smoothed alike.
    const bool smooth = config.smoothquant_alpha >= 0;
    if (smooth) {
      if (config.fp8) return invalid_argument("SmoothQuant (--smoothquant) is for int8, not fp8");
      INGOT_ASSIGN_OR_RETURN(quant::SmoothReport sq, quant::smooth_quant(*model.graph, cal.channel_amax,
                                                                         config.smoothquant_alpha, &cal.scales, qtype,
                                                                         keep_float));
      logger.log(Severity::kInfo, ("smoothquant (alpha " + std::to_string(config.smoothquant_alpha) + "): " +
                                   std::to_string(sq.activations) + " activations, " + std::to_string(sq.layers) +
                                   " layers")
                                      .c_str());
      for (const std::string& l : sq.lines) logger.log(Severity::kInfo, ("smoothquant: " + l).c_str());
      if (summary) summary->smoothquant = sq.lines;
    }
    if (config.int8_min_cosine > 0) {
      auto fresh = [&]() -> Result<std::shared_ptr<ir::Graph>> {
        INGOT_ASSIGN_OR_RETURN(onnx::Model m, import_fresh());
        auto holder = std::make_shared<onnx::Model>(std::move(m));
        if (smooth) {
          std::map<std::string, float> same;  // the names and scales the main graph's smoothing gave
          INGOT_RETURN_IF_ERROR(quant::smooth_quant(*holder->graph, cal.channel_amax, config.smoothquant_alpha, &same,
                                                    qtype, keep_float)
                                    .status());
        }
        return std::shared_ptr<ir::Graph>(holder, holder->graph.get());
      };
      INGOT_ASSIGN_OR_RETURN(quant::SensitivityResult sr,
                             quant::choose_float_layers(fresh, cal.scales, cal.batches, cal.want,
                                                        config.int8_min_cosine, keep_float, forced_int8, qtype));
      keep_float = sr.keep_float;
      if (summary) {
        summary->int8_cosine = sr.cosine;
        summary->int8_sensitivity = sr.alone;
      }
      logger.log(Severity::kInfo,
                 ("int8 accuracy search: " + std::to_string(sr.evaluations) + " evaluations on the calibration batches")
                     .c_str());
    }
    INGOT_ASSIGN_OR_RETURN(qdq, quant::insert_qdq(*model.graph, cal.scales, keep_float, qtype));
    for (const std::string& k : qdq.kept) logger.log(Severity::kInfo, ("int8: kept in float: " + k).c_str());
  }
  builder::BuildOptions opt;
  opt.backend = backend_name(config.backend);
  for (const auto& p : config.profiles) {
    builder::Profile bp;
    for (const auto& e : p.entries()) bp.inputs.push_back({e.input, e.min, e.opt, e.max});
    opt.profiles.push_back(std::move(bp));
  }
  opt.pipeline.disabled.insert(config.disabled_passes.begin(), config.disabled_passes.end());
  opt.pipeline.dump_dir = config.dump_ir_dir;
  opt.optimize = config.optimization_level > 0;
  opt.precision.reduced = config.fp16 ? DataType::kFloat16 : config.bf16 ? DataType::kBFloat16 : DataType::kUndefined;
  opt.precision.strict = config.strict_types;
  opt.precision.reduced_io = config.reduced_io;
  if (config.reduced_io && !config.fp16 && !config.bf16)
    return invalid_argument("reduced-precision inputs and outputs (--reduced-io) need --fp16 or --bf16");
  opt.tune.optimization_level = config.optimization_level;
  opt.tune.workspace_limit = config.workspace_bytes;
  opt.tune.tf32 = config.tf32;
  if (config.tactic_timing == "device")
    opt.tune.timing = backend::TimingMode::kDevice;
  else if (config.tactic_timing != "stream")
    return invalid_argument("tactic timing must be stream or device, got '", config.tactic_timing, "'");
  opt.timing_cache_file = config.timing_cache_file;
  opt.progress = config.progress;
  opt.conv_layout = config.conv_layout;
  opt.allow_host_fallback = config.allow_host_fallback;
  for (const auto& [layer, prec] : config.layer_precisions) {
    if (prec == "int8" || prec == "fp8") {
      if (prec == "int8" ? !config.int8 : !config.fp8)
        return invalid_argument("layer precision ", prec, " for '", layer, "' needs --", prec);
      continue;
    }
    if (prec == "fp32" && (config.int8 || config.fp8) && !config.fp16 && !config.bf16)
      continue;  // the int8 rewrite keeps it
    DataType t = prec == "fp32"   ? DataType::kFloat32
                 : prec == "fp16" ? DataType::kFloat16
                 : prec == "bf16" ? DataType::kBFloat16
                                  : DataType::kUndefined;
    if (t == DataType::kUndefined)
      return invalid_argument("layer precision for '", layer, "' must be fp32, fp16, bf16, int8 or fp8, got '", prec,
                              "'");
    opt.precision.forced[layer] = t;
  }
  builder::BuildReport report;
  std::shared_ptr<ir::Graph> graph(std::move(model.graph));
  INGOT_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(graph, std::move(model.storage), opt, &report));
  for (const auto& n : report.notes) logger.log(Severity::kInfo, n.c_str());
  engine::EngineIdentity id = engine::current_identity(plan.backend, plan.gpu_arch);
  INGOT_ASSIGN_OR_RETURN(const backend::Backend* be, backend::find_backend(plan.backend));
  id.library_versions = be->device().library_versions();
  for (const builder::ValuePlan& v : plan.values)
    if (v.storage == builder::Storage::kDynamic && v.value->producer()) {
      logger.log(Severity::kInfo, ("'" + v.value->name() + "' (from " + v.value->producer()->describe() +
                                   ") has a size only known at run time: it is allocated per run, and engines "
                                   "with such values cannot be captured into CUDA graphs")
                                      .c_str());
    }
  for (const std::string& h : report.host_steps)
    logger.log(Severity::kWarning,
               ("host fallback: " + h + "; it runs on the CPU with copies around it (no CUDA graph capture)").c_str());
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, engine::write_engine(plan, id));
  if (summary) {
    summary->steps = static_cast<int>(plan.steps.size());
    summary->nodes_before_optimization = report.nodes_before;
    summary->fused_nodes = report.fused_steps;
    summary->tactics_timed = report.tune.timed;
    summary->tactics_cut_short = report.tune.cut_short;
    summary->timing_cache_hits = report.tune.cache_hits;
    summary->timing_cache_entries = static_cast<int>(report.timing_cache_entries);
    summary->engine_bytes = bytes.size();
    summary->arena_bytes = plan.memory.arena_bytes;
    summary->weight_bytes = plan.memory.weight_bytes;
    summary->lower_bound_bytes = plan.memory.lower_bound_bytes;
    summary->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Calibration and the builder's phases; what is left of the wall time is import and the engine write.
    summary->phase_seconds = report.phase_seconds;
    if (calibration_seconds > 0)
      summary->phase_seconds.insert(summary->phase_seconds.begin(), {"calibrate", calibration_seconds});
    double phases = 0;
    for (const auto& [name, sec] : summary->phase_seconds) phases += sec;
    summary->phase_seconds.emplace_back("import+write", std::max(0.0, summary->seconds - phases));
    summary->notes = report.notes;
    summary->reduced_precision_layers = report.precision.lowered;
    summary->precision_casts = report.precision.casts;
    summary->channels_last_convs = report.layout.channels_last_convs;
    summary->layout_reformats = report.layout.reformats;
    summary->split_fusions = report.split.split;
    summary->host_steps = report.host_steps;
    summary->int8_layers = qdq.quantized_layers;
    summary->int8_kept = qdq.kept;
  }
  return bytes;
}

}  // namespace

Logger& default_logger() {
  static StderrLogger logger;
  return logger;
}

void OptimizationProfile::set_dimensions(const std::string& input, std::vector<int64_t> min, std::vector<int64_t> opt,
                                         std::vector<int64_t> max) {
  for (auto& e : entries_)
    if (e.input == input) {
      e.min = std::move(min);
      e.opt = std::move(opt);
      e.max = std::move(max);
      return;
    }
  entries_.push_back({input, std::move(min), std::move(opt), std::move(max)});
}

Builder::Builder(Logger& logger) : logger_(&logger) {}

Result<std::vector<uint8_t>> Builder::build_serialized(const std::string& onnx_path, const BuilderConfig& config,
                                                       BuildSummary* summary) const {
  INGOT_ASSIGN_OR_RETURN(onnx::Model model, onnx::import_model_file(onnx_path));
  auto r = build_from_model(
      std::move(model), config, summary, *logger_, [&] { return ReferenceModel::load(onnx_path); },
      [&] { return onnx::import_model_file(onnx_path); });
  if (!r.ok()) return Status(r.status().code(), onnx_path + ": " + r.status().message());
  return r;
}

Result<std::vector<uint8_t>> Builder::build_serialized_from_bytes(const void* data, size_t size,
                                                                  const BuilderConfig& config,
                                                                  BuildSummary* summary) const {
  INGOT_ASSIGN_OR_RETURN(onnx::Model model, onnx::import_model_bytes(data, size));
  return build_from_model(
      std::move(model), config, summary, *logger_, [&] { return ReferenceModel::load_bytes(data, size); },
      [&] { return onnx::import_model_bytes(data, size); });
}

Runtime::Runtime(Logger& logger) : logger_(&logger) {}

namespace {
Result<std::shared_ptr<Engine>> load(const void* data, size_t size, std::shared_ptr<const void> owner) {
  INGOT_ASSIGN_OR_RETURN(engine::EngineIdentity file_id, engine::read_engine_identity(data, size));
  auto be = backend::find_backend(file_id.backend);
  if (!be.ok())
    return Status(be.status().code(), "this engine was built for the " + file_id.backend + " backend" +
                                          (file_id.gpu_arch.empty() ? "" : " (" + file_id.gpu_arch + ")") +
                                          ", which is not available here: " + be.status().message());
  engine::EngineIdentity expected = engine::current_identity(file_id.backend, (*be)->device().arch());
  expected.library_versions = (*be)->device().library_versions();
  INGOT_ASSIGN_OR_RETURN(builder::Plan plan, engine::read_engine(data, size, std::move(owner), expected));
  return runtime::make_engine(std::move(plan));
}
}  // namespace

Result<std::shared_ptr<Engine>> Runtime::deserialize(const void* data, size_t size) const {
  void* p = std::aligned_alloc(64, ((size + 63) / 64) * 64 + 64);
  if (!p) return make_status(StatusCode::kOutOfMemory, "cannot allocate ", size, " bytes for the engine");
  std::shared_ptr<void> buf(p, [](void* q) { std::free(q); });
  if (size) std::memcpy(p, data, size);
  return load(p, size, buf);
}

Result<std::shared_ptr<Engine>> Runtime::deserialize_file(const std::string& path) const {
  auto mapped = MappedFile::open(path);
  if (!mapped.ok()) {
    if (mapped.status().code() == StatusCode::kNotFound)
      return make_status(StatusCode::kNotFound, "cannot open engine '", path, "'");
    return mapped.status();
  }
  std::shared_ptr<const MappedFile> m = std::move(mapped).value();
  auto r = load(m->data(), m->size(), m);
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

}  // namespace ingot
