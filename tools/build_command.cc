// Copyright ingot authors. Apache-2.0.
//
// `ingot build MODEL.onnx -o MODEL.engine`: the builder, with trtexec's options.
#include "build_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "file_io.h"
#include "ingot/builder.h"
#include "ingot/reference.h"
#include "options.h"

namespace ingot::tools {

namespace {

class CliLogger : public Logger {
 public:
  explicit CliLogger(bool verbose) : verbose_(verbose) {}
  void log(Severity s, const char* msg) noexcept override {
    if (s <= Severity::kWarning || verbose_)
      std::cerr << (s == Severity::kError ? "error: " : s == Severity::kWarning ? "warning: " : "  ") << msg << "\n";
  }

 private:
  bool verbose_;
};

// A progress bar with an ETA on stderr: redrawn in place on a terminal, a line per quarter of the
// tactic phase otherwise (logs stay readable).
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(2) != 0), start_(std::chrono::steady_clock::now()) {}
  void update(const char* phase, int done, int total) {
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - start_).count();
    std::string ph = phase;
    if (ph != phase_) {
      phase_ = ph;
      phase_start_ = now;
      last_quarter_ = -1;
    }
    if (ph == "calibrating") return calibrating(done, total, now, elapsed);
    if (ph != "tactics" || total <= 0) return;
    double in_phase = std::chrono::duration<double>(now - phase_start_).count();
    double eta = done > 0 ? in_phase / done * (total - done) : 0;
    if (tty_) {
      if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      const int width = 30;
      int filled = static_cast<int>(static_cast<double>(width) * done / total);
      std::string bar(static_cast<size_t>(filled), '#');
      bar.append(static_cast<size_t>(width - filled), '.');
      std::fprintf(stderr, "\r  choosing tactics [%s] %d/%d  %.1fs elapsed  ETA %.1fs   ", bar.c_str(), done, total,
                   elapsed, eta);
      if (done == total) std::fprintf(stderr, "\n");
    } else {
      int quarter = done * 4 / total;
      if (quarter == last_quarter_) return;
      last_quarter_ = quarter;
      std::fprintf(stderr, "  choosing tactics: %d/%d steps, %.1fs elapsed, ETA %.1fs\n", done, total, elapsed, eta);
    }
    std::fflush(stderr);
  }

 private:
  // INT8 calibration: batches run so far, of how many, and the time left at this pace.
  void calibrating(int done, int total, std::chrono::steady_clock::time_point now, double elapsed) {
    double in_phase = std::chrono::duration<double>(now - phase_start_).count();
    double eta = done > 0 && total > done ? in_phase / done * (total - done) : 0;
    if (tty_) {
      std::fprintf(stderr, "\r  calibrating: batch %d/%d  %.1fs elapsed  ETA %.1fs   ", done, total, elapsed, eta);
      if (done >= total) std::fprintf(stderr, "\n");
    } else if (done == 0 || done >= total || done * 4 / std::max(total, 1) != (done - 1) * 4 / std::max(total, 1)) {
      std::fprintf(stderr, "  calibrating: batch %d/%d, %.1fs elapsed, ETA %.1fs\n", done, total, elapsed, eta);
    }
    std::fflush(stderr);
  }

  bool tty_;
  std::chrono::steady_clock::time_point start_, phase_start_, last_draw_;
  std::string phase_;
  int last_quarter_ = -1;
};

// trtexec's habit: an input with open dims that no shape flag names is built for 1 in each open dim,
// said in one line (the library itself refuses such a model; a CLI user gets a working engine).
// A model the reference cannot load is left to the builder, whose error names the problem.
bool default_open_dims(const std::string& model, BuilderConfig& config) {
  auto ref = ReferenceModel::load(model);
  if (!ref.ok()) return true;
  const bool had_profiles = !config.profiles.empty();
  if (!had_profiles) config.profiles.emplace_back();
  for (const TensorInfo& in : (*ref)->inputs()) {
    bool open = false;
    for (int64_t d : in.shape) open |= d < 0;
    if (!open || !in.rank_known) continue;
    std::vector<int64_t> dims;
    std::string text;
    for (size_t i = 0; i < in.shape.size(); ++i) {
      dims.push_back(in.shape[i] >= 0 ? in.shape[i] : 1);
      text += (i ? "x" : "") + std::to_string(dims.back());
    }
    for (size_t p = 0; p < config.profiles.size(); ++p) {
      OptimizationProfile& prof = config.profiles[p];
      bool named = false;
      for (const auto& e : prof.entries()) named |= e.input == in.name;
      if (named) continue;
      prof.set_dimensions(in.name, dims, dims, dims);
      std::cerr << "note: input '" << in.name << "' has open dims and no shape flag names it: building "
                << (config.profiles.size() > 1 ? "profile " + std::to_string(p) + " " : std::string()) << "for "
                << in.name << ":" << text << " (give --shapes or --min/--opt/--max-shapes to choose)\n";
    }
  }
  // Nothing was open and no flag gave shapes: no profile, as before.
  if (!had_profiles && config.profiles[0].entries().empty()) config.profiles.clear();
  return true;
}

}  // namespace

void build_help() {
  std::cout << "usage: ingot build MODEL.onnx -o MODEL.engine [options]\n\n"
               "Optimizes the model, picks a tactic per layer for the target backend, plans memory and\n"
               "writes a versioned engine file.\n\n"
               "options:\n"
               "  -o, --output FILE           engine file to write (required)\n"
               "  --backend cpu|cuda          target backend (default cpu)\n"
               "  --shapes name:1x3x224x224   fix open dims (min = opt = max); an input with open dims\n"
               "                              that no shape flag names is built for 1 in each, with a note\n"
               "  --min-shapes/--opt-shapes/--max-shapes name:DIMS  one optimization profile\n"
               "  --profile                   ends a profile: the shape flags after it start the next one\n"
               "                              (select it at run time with ingot run --profile-index N)\n"
            << build_flags_help() << "  --verbose                   print pass notes\n";
}

int build_command(const std::vector<std::string>& args) {
  std::string model, output, err;
  ShapeOptions shapes;
  BuilderConfig config;
  bool verbose = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot build: " << a << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      build_help();
      return 0;
    } else if (a == "-o" || a == "--output") {
      if (!value(output)) return 2;
    } else if (a == "--backend") {
      if (!value(v)) return 2;
      if (v == "cpu")
        config.backend = BackendKind::kCpu;
      else if (v == "cuda")
        config.backend = BackendKind::kCuda;
      else {
        std::cerr << "ingot build: unknown backend '" << v << "' (cpu, cuda)\n";
        return 2;
      }
    } else if (a == "--shapes" || a == "--min-shapes" || a == "--opt-shapes" || a == "--max-shapes") {
      if (!value(v)) return 2;
      if (!shapes.parse(a, v, err)) {
        std::cerr << "ingot build: " << err << "\n";
        return 2;
      }
    } else if (a == "--profile") {
      // Closes the optimization profile given so far; the shape flags after it make the next one.
      OptimizationProfile p;
      if (shapes.empty() || !shapes.to_profile(p, err)) {
        std::cerr << "ingot build: --profile closes a profile, but "
                  << (shapes.empty() ? "no shapes came before it" : err) << "\n";
        return 2;
      }
      config.profiles.push_back(p);
      shapes = ShapeOptions();
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (BuildFlag f = parse_build_flag(args, i, config, err); f != BuildFlag::kNotMine) {
      if (f == BuildFlag::kError) {
        std::cerr << "ingot build: " << err << "\n";
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ingot build: unknown option '" << a << "' (see ingot build --help)\n";
      return 2;
    } else if (model.empty()) {
      model = a;
    } else {
      std::cerr << "ingot build: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (model.empty() || output.empty()) {
    std::cerr << "ingot build: need a model and -o FILE (see ingot build --help)\n";
    return 2;
  }
  if (!shapes.empty()) {
    OptimizationProfile p;
    if (!shapes.to_profile(p, err)) {
      std::cerr << "ingot build: " << err << "\n";
      return 2;
    }
    config.profiles.push_back(p);
  }
  if (!default_open_dims(model, config)) return 1;
  if (config.backend == BackendKind::kCpu && (config.fp16 || config.bf16))
    std::cerr << "note: on the cpu backend --fp16/--bf16 store activations and weights in the reduced type and the\n"
                 "      reference kernels compute with it: use it to preview accuracy, not for speed\n";
  CliLogger logger(verbose);
  ProgressBar bar;
  config.progress = [&bar](const char* phase, int done, int total) { bar.update(phase, done, total); };
  Builder builder(logger);
  BuildSummary summary;
  auto bytes = builder.build_serialized(model, config, &summary);
  if (!bytes.ok()) {
    std::cerr << "ingot build: " << bytes.status().to_string() << "\n";
    return 1;
  }
  Status written = write_file(output, std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  if (!written.ok()) {
    std::cerr << "ingot build: " << written.message() << "\n";
    return 1;
  }
  std::cout << "built " << output << "\n"
            << "  model nodes      " << summary.nodes_before_optimization << "\n"
            << "  engine steps     " << summary.steps << " (" << summary.fused_nodes << " fused)\n";
  if (config.fp16 || config.bf16 || !config.layer_precisions.empty())
    std::cout << "  reduced precision " << summary.reduced_precision_layers << " layers, " << summary.precision_casts
              << " cast layers at fp32 boundaries\n";
  if (config.int8 || config.fp8) {
    std::cout << (config.fp8 ? "  fp8 (e4m3)       " : "  int8             ") << summary.int8_layers
              << " layers quantized, " << summary.int8_kept.size() << " kept in float; scales for "
              << summary.calibration_tensors << " tensors "
              << (summary.calibration_from_cache
                      ? std::string("from the calibration cache")
                      : "from " + std::to_string(summary.calibration_batches) + " calibration batches")
              << "\n";
    if (!summary.calibration_from_cache)
      std::printf("  calibration      %d batches on the %s in %.2f s\n", summary.calibration_batches,
                  summary.calibration_ran_on.c_str(), summary.calibration_seconds);
    std::fflush(stdout);
    if (!summary.smoothquant.empty()) {
      std::printf("  smoothquant      alpha %.2f, %zu activations smoothed:\n", config.smoothquant_alpha,
                  summary.smoothquant.size());
      for (const std::string& l : summary.smoothquant) std::printf("    %s\n", l.c_str());
      std::fflush(stdout);
    }
    for (const std::string& k : summary.int8_kept) std::cout << "    float: " << k << "\n";
    if (config.int8_min_cosine > 0) {
      std::printf("  int8 accuracy    worst sample cosine %.6f (budget %.6f); each layer alone in int8:\n",
                  summary.int8_cosine, config.int8_min_cosine);
      for (const auto& [layer, c] : summary.int8_sensitivity) std::printf("    %-24s %.6f\n", layer.c_str(), c);
      std::fflush(stdout);
    }
  }
  if (summary.channels_last_convs)
    std::cout << "  channels-last    " << summary.channels_last_convs << " convolutions, " << summary.layout_reformats
              << " transpose layers at NCHW boundaries\n";
  if (summary.split_fusions)
    std::cout << "  split fusions    " << summary.split_fusions
              << " fused layers split into GPU steps (no fused kernel for their epilogue)\n";
  if (config.backend != BackendKind::kCpu) {
    std::cout << "  host fallback    " << summary.host_steps.size() << " steps"
              << (summary.host_steps.empty() ? "" : " (CPU round trips, no CUDA graph):") << "\n";
    for (const std::string& h : summary.host_steps) std::cout << "    " << h << "\n";
  }
  std::cout << "  tactics timed    " << summary.tactics_timed
            << (summary.tactics_cut_short
                    ? " (" + std::to_string(summary.tactics_cut_short) + " cut short after one run)"
                    : std::string())
            << ", timing-cache hits " << summary.timing_cache_hits
            << (config.timing_cache_file.empty() ? std::string()
                                                 : " (cache " + config.timing_cache_file + ": " +
                                                       std::to_string(summary.timing_cache_entries) + " entries)")
            << "\n"
            << "  engine size      " << human_bytes(summary.engine_bytes) << "\n"
            << "  weights          " << human_bytes(summary.weight_bytes) << "\n"
            << "  arena            " << human_bytes(summary.arena_bytes) << " (lifetime lower bound "
            << human_bytes(summary.lower_bound_bytes) << ")\n"
            << "  build time       " << summary.seconds << " s";
  if (!summary.phase_seconds.empty()) {
    std::cout << " (";
    for (size_t i = 0; i < summary.phase_seconds.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.1f", i ? ", " : "", summary.phase_seconds[i].first.c_str(),
                    summary.phase_seconds[i].second);
      std::cout << buf;
    }
    std::cout << ")";
  }
  std::cout << "\n";
  return 0;
}

}  // namespace ingot::tools
