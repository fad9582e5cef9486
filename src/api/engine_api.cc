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

struct Calibration {
  std::map<std::string, float> scales;
  // Kept for the accuracy search (BuilderConfig::int8_min_cosine): inputs and fp32 outputs.
  std::vector<std::map<std::string, Tensor>> batches;
  std::vector<std::vector<Tensor>> want;
};

// INT8 calibration: the scales of every float tensor, from the calibrator's cache or by running
// the fp32 model (the reference interpreter) on its batches and observing every value.
Result<Calibration> calibrate(const BuilderConfig& config, const ReferenceFactory& reference, BuildSummary* summary,
                              Logger& logger) {
  Calibration out;
  const bool keep = config.int8_min_cosine > 0;
  const quant::QuantType qtype = config.fp8 ? quant::QuantType::kFp8E4M3 : quant::QuantType::kInt8;
  const double divisor = quant::quant_max(qtype);
  Calibrator& cal = *config.calibrator;
  INGOT_ASSIGN_OR_RETURN(quant::CalibrationAlgorithm algo, quant::parse_algorithm(cal.algorithm()));
  const std::string cached = keep ? std::string() : cal.read_cache();  // the search needs the batches
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
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceModel> model, reference());
  std::map<std::string, quant::TensorCalibration> seen;
  const int total = cal.num_batches();
  int batches = 0;
  if (config.progress) config.progress("calibrating", 0, total > 0 ? total : 1);
  for (;;) {
    INGOT_ASSIGN_OR_RETURN(std::vector<HostTensor> batch, cal.next_batch(model->inputs()));
    if (batch.empty()) break;
    auto values = model->run_all(batch);
    if (!values.ok())
      return Status(values.status().code(),
                    "calibration batch " + std::to_string(batches + 1) + ": " + values.status().message());
    auto observe = [&](const HostTensor& t) {
      if (t.dtype != DataType::kFloat32 || t.data.size() != static_cast<size_t>(t.numel()) * 4) return;
      seen[t.name].observe(reinterpret_cast<const float*>(t.data.data()), t.numel());
    };
    for (const HostTensor& t : batch) observe(t);
    for (const HostTensor& t : *values) observe(t);
    if (keep) {
      std::map<std::string, Tensor> feeds;
      for (const HostTensor& h : batch) {
        INGOT_ASSIGN_OR_RETURN(feeds[h.name], host_to_tensor(h));
      }
      std::vector<Tensor> outs;
      for (const TensorInfo& o : model->outputs())
        for (const HostTensor& h : *values)
          if (h.name == o.name) {
            INGOT_ASSIGN_OR_RETURN(Tensor t, host_to_tensor(h));
            outs.push_back(std::move(t));
          }
      out.batches.push_back(std::move(feeds));
      out.want.push_back(std::move(outs));
    }
    ++batches;
    if (config.progress) config.progress("calibrating", batches, total > 0 ? std::max(total, batches) : batches + 1);
  }
  if (batches == 0) return invalid_argument("INT8 calibration: the calibrator gave no batch");
  std::map<std::string, float> scales;
  for (const auto& [name, t] : seen) {
    const double th = quant::threshold(t, algo, cal.percentile());
    if (th > 0) scales[name] = static_cast<float>(th / divisor);
  }
  cal.write_cache(quant::write_cache(algo, scales, qtype == quant::QuantType::kFp8E4M3));
  logger.log(Severity::kInfo, ("calibrated " + std::to_string(scales.size()) + " tensors on " +
                               std::to_string(batches) + " batches (" + quant::algorithm_name(algo) + ")")
                                  .c_str());
  if (summary) {
    summary->calibration_batches = batches;
    summary->calibration_tensors = static_cast<int>(scales.size());
  }
  out.scales = std::move(scales);
  return out;
}

Result<std::vector<uint8_t>> build_from_model(onnx::Model model, const BuilderConfig& config, BuildSummary* summary,
                                              Logger& logger, const ReferenceFactory& reference,
                                              const std::function<Result<onnx::Model>()>& import_fresh) {
  auto t0 = std::chrono::steady_clock::now();
  quant::QdqReport qdq;
  if (config.int8 && config.fp8) return invalid_argument("choose one of int8 and fp8 (--int8, --fp8)");
  if (config.int8 || config.fp8) {
    if (!config.calibrator)
      return invalid_argument(config.fp8 ? "FP8" : "INT8",
                              " needs calibration data: set BuilderConfig::calibrator (ingot ", "build ",
                              config.fp8 ? "--fp8" : "--int8", " --calibration-data DIR)");
    const quant::QuantType qtype = config.fp8 ? quant::QuantType::kFp8E4M3 : quant::QuantType::kInt8;
    INGOT_ASSIGN_OR_RETURN(Calibration cal, calibrate(config, reference, summary, logger));
    // --layer-precisions under --int8: fp32 keeps a layer in float, int8 keeps it quantized.
    std::map<std::string, std::string> keep_float;
    std::vector<std::string> forced_int8;
    for (const auto& [layer, prec] : config.layer_precisions) {
      if (prec == "fp32") keep_float[layer] = "--layer-precisions " + layer + ":fp32";
      if (prec == (config.fp8 ? "fp8" : "int8")) forced_int8.push_back(layer);
    }
    if (config.int8_min_cosine > 0) {
      auto fresh = [&]() -> Result<std::shared_ptr<ir::Graph>> {
        INGOT_ASSIGN_OR_RETURN(onnx::Model m, import_fresh());
        auto holder = std::make_shared<onnx::Model>(std::move(m));
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
    // The builder's phases; what is left of the wall time is import and the engine write.
    double phases = 0;
    for (const auto& [name, sec] : report.phase_seconds) phases += sec;
    summary->phase_seconds = report.phase_seconds;
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
