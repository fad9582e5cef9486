// Copyright ingot authors. Apache-2.0.
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "calibration.h"

namespace ingot::tools {

bool parse_dims(const std::string& text, std::vector<int64_t>& dims) {
  dims.clear();
  if (text.empty()) return true;
  std::istringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    if (part.empty() || part.size() > 12 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    dims.push_back(std::stoll(part));
  }
  return text.back() != 'x';
}

bool parse_shape_list(const std::string& text, ShapeMap& out, std::string& err) {
  std::istringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      err = "malformed shape '" + item + "' (expected name:DIMxDIMx...)";
      return false;
    }
    std::vector<int64_t> dims;
    if (!parse_dims(item.substr(colon + 1), dims)) {
      err = "malformed dims in '" + item + "' (expected non-negative integers joined by 'x', e.g. 1x3x224x224)";
      return false;
    }
    out[item.substr(0, colon)] = dims;
  }
  return true;
}

std::string dims_to_string(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

bool ShapeOptions::parse(const std::string& flag, const std::string& value, std::string& err) {
  ShapeMap* m = flag == "--shapes"       ? &shapes
                : flag == "--min-shapes" ? &min
                : flag == "--opt-shapes" ? &opt
                : flag == "--max-shapes" ? &max
                                         : nullptr;
  if (!m) return false;
  if (!parse_shape_list(value, *m, err)) {
    err = flag + ": " + err;
    return false;
  }
  return true;
}

bool ShapeOptions::to_profile(OptimizationProfile& profile, std::string& err) const {
  std::set<std::string> names;
  for (const ShapeMap* m : {&shapes, &min, &opt, &max})
    for (const auto& [k, v] : *m) names.insert(k);
  for (const auto& n : names) {
    auto pick = [&](const ShapeMap& m, std::vector<int64_t>& out) {
      auto it = m.find(n);
      if (it == m.end()) return false;
      out = it->second;
      return true;
    };
    std::vector<int64_t> s, lo, mid, hi;
    bool has_s = pick(shapes, s);
    bool has_lo = pick(min, lo), has_mid = pick(opt, mid), has_hi = pick(max, hi);
    if (has_s && (has_lo || has_mid || has_hi)) {
      err = "input '" + n + "' is given both --shapes and --min/--opt/--max-shapes";
      return false;
    }
    if (has_s)
      lo = mid = hi = s;
    else {
      const std::vector<int64_t>& any = has_mid ? mid : has_hi ? hi : lo;
      if (!has_lo) lo = any;
      if (!has_mid) mid = any;
      if (!has_hi) hi = any;
    }
    profile.set_dimensions(n, lo, mid, hi);
  }
  return true;
}

bool ShapeOptions::run_dims(const std::string& input, std::vector<int64_t>& dims) const {
  auto it = shapes.find(input);
  if (it != shapes.end()) {
    dims = it->second;
    return true;
  }
  it = opt.find(input);
  if (it != opt.end()) {
    dims = it->second;
    return true;
  }
  return false;
}

namespace {

bool parse_int(const std::string& v, long long lo, long long hi, long long& out) {
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoll(v);
  return out >= lo && out <= hi;
}

}  // namespace

bool parse_int_arg(const std::string& command, const std::string& flag, const std::string& text, long long lo,
                   long long hi, long long& out) {
  try {
    size_t used = 0;
    out = std::stoll(text, &used);
    if (used != text.size() || out < lo || out > hi) throw std::out_of_range("");
    return true;
  } catch (...) {
    std::cerr << command << ": " << flag << " needs an integer in [" << lo << ", " << hi << "], got '" << text << "'\n";
    return false;
  }
}

BuildFlag parse_build_flag(const std::vector<std::string>& args, size_t& i, BuilderConfig& config, std::string& err) {
  const std::string& a = args[i];
  auto value = [&](std::string& out) {
    if (i + 1 >= args.size()) {
      err = a + " needs a value";
      return false;
    }
    out = args[++i];
    return true;
  };
  std::string v;
  long long n = 0;
  if (a == "--fp16")
    config.fp16 = true;
  else if (a == "--bf16")
    config.bf16 = true;
  else if (a == "--tf32")
    config.tf32 = true;
  else if (a == "--best")
    config.fp16 = config.bf16 = config.tf32 = true;
  else if (a == "--strict-types")
    config.strict_types = true;
  else if (a == "--reduced-io")
    config.reduced_io = true;
  else if (a == "--no-host-fallback")
    config.allow_host_fallback = false;
  else if (a == "--layer-precisions") {
    if (!value(v)) return BuildFlag::kError;
    std::istringstream ss(v);
    std::string item;
    bool any = false;
    while (std::getline(ss, item, ',')) {
      size_t colon = item.rfind(':');
      std::string prec = colon == std::string::npos ? "" : item.substr(colon + 1);
      if (colon == std::string::npos || colon == 0 ||
          (prec != "fp32" && prec != "fp16" && prec != "bf16" && prec != "int8" && prec != "fp8")) {
        err = "--layer-precisions expects LAYER:fp32|fp16|bf16|int8|fp8[,...], got '" + item + "'";
        return BuildFlag::kError;
      }
      config.layer_precisions[item.substr(0, colon)] = prec;
      any = true;
    }
    if (!any) {
      err = "--layer-precisions expects LAYER:fp32|fp16|bf16|int8|fp8[,...], got ''";
      return BuildFlag::kError;
    }
  } else if (a == "--workspace") {
    if (!value(v)) return BuildFlag::kError;
    if (!parse_int(v, 1, 1 << 20, n)) {
      err = "--workspace needs MiB in [1, 1048576], got '" + v + "'";
      return BuildFlag::kError;
    }
    config.workspace_bytes = static_cast<uint64_t>(n) << 20;
  } else if (a == "--opt-level") {
    if (!value(v)) return BuildFlag::kError;
    if (!parse_int(v, 0, 5, n)) {
      err = "--opt-level needs an integer in [0, 5], got '" + v + "'";
      return BuildFlag::kError;
    }
    config.optimization_level = static_cast<int>(n);
  } else if (a == "--disable-pass") {
    if (!value(v)) return BuildFlag::kError;
    config.disabled_passes.push_back(v);
  } else if (a == "--dump-ir") {
    if (!value(config.dump_ir_dir)) return BuildFlag::kError;
  } else if (a == "--conv-layout") {
    if (!value(v)) return BuildFlag::kError;
    if (v != "auto" && v != "nhwc" && v != "nchw") {
      err = "--conv-layout must be auto, nhwc or nchw, got '" + v + "'";
      return BuildFlag::kError;
    }
    config.conv_layout = v;
  } else if (a == "--int8") {
    config.int8 = true;
    config.calibrator = &cli_calibrator();
  } else if (a == "--fp8") {
    config.fp8 = true;
    cli_calibrator().fp8 = true;
    config.calibrator = &cli_calibrator();
  } else if (a == "--calibration-data") {
    if (!value(cli_calibrator().dir)) return BuildFlag::kError;
    config.calibrator = &cli_calibrator();
  } else if (a == "--calibrator") {
    if (!value(v)) return BuildFlag::kError;
    if (v != "entropy" && v != "minmax" && v != "percentile") {
      err = "--calibrator must be entropy, minmax or percentile, got '" + v + "'";
      return BuildFlag::kError;
    }
    cli_calibrator().algorithm_name = v;
  } else if (a == "--percentile") {
    if (!value(v)) return BuildFlag::kError;
    char* end = nullptr;
    const double p = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(p > 0 && p <= 100)) {
      err = "--percentile needs a number in (0, 100], got '" + v + "'";
      return BuildFlag::kError;
    }
    cli_calibrator().percentile_value = p;
  } else if (a == "--int8-min-cosine") {
    if (!value(v)) return BuildFlag::kError;
    char* end = nullptr;
    const double c = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(c > 0 && c <= 1)) {
      err = "--int8-min-cosine needs a number in (0, 1], got '" + v + "'";
      return BuildFlag::kError;
    }
    config.int8_min_cosine = c;
  } else if (a == "--smoothquant") {
    if (!value(v)) return BuildFlag::kError;
    char* end = nullptr;
    const double alpha = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(alpha >= 0 && alpha <= 1)) {
      err = "--smoothquant needs the migration strength alpha in [0, 1] (0.5 is SmoothQuant's default), got '" + v +
            "'";
      return BuildFlag::kError;
    }
    config.smoothquant_alpha = alpha;
  } else if (a == "--calibration-cache") {
    if (!value(cli_calibrator().cache_path)) return BuildFlag::kError;
    config.calibrator = &cli_calibrator();
  } else if (a == "--timing-cache") {
    if (!value(config.timing_cache_file)) return BuildFlag::kError;
  } else if (a == "--tactic-timing") {
    if (!value(v)) return BuildFlag::kError;
    if (v != "stream" && v != "device") {
      err = "--tactic-timing must be stream or device, got '" + v + "'";
      return BuildFlag::kError;
    }
    config.tactic_timing = v;
  } else {
    return BuildFlag::kNotMine;
  }
  return BuildFlag::kOk;
}

std::string build_flags_help() {
  return "  --fp16 --bf16 --tf32 --best allow reduced precision: layers with a fast fp16/bf16 tactic\n"
         "                              compute in it (engine inputs and outputs keep their types);\n"
         "                              --tf32 lets fp32 GEMMs/convs use TF32; --best allows all three\n"
         "  --reduced-io                with --fp16/--bf16: fp32 inputs and float outputs of the engine\n"
         "                              take that type (no Casts at its edges; fp16 with --best)\n"
         "  --strict-types              fail when a layer cannot run in the allowed reduced precision\n"
         "  --no-host-fallback          fail, naming each, when a layer would run on the CPU in a GPU engine\n"
         "  --layer-precisions L:P,...  force layer (node name) L to P = fp32|fp16|bf16 (with --int8 also\n"
         "                              int8; fp32 keeps it out of int8)\n"
         "  --int8                      INT8: Conv/Gemm/MatMul layers with calibrated inputs run quantized\n"
         "                              (int8 symmetric, weights per output channel); needs calibration\n"
         "  --fp8                       the same in FP8 E4M3 (scale = max / 448; calibrator default minmax)\n"
         "  --calibration-data DIR      .npy batches: DIR/*.npy for a one-input model, else\n"
         "                              DIR/<batch>/<input>.npy\n"
         "  --calibrator A              entropy (default, TensorRT's EntropyCalibration2) | minmax | percentile\n"
         "  --percentile P              the percentile calibrator's |x| percentile (default 99.99)\n"
         "  --int8-min-cosine C         keep the layers most sensitive to int8 (each measured alone) in\n"
         "                              float until every sample (slice along the batch dim) of every\n"
         "                              output keeps cosine >= C against fp32 on the calibration\n"
         "                              batches (runs them; ignores the cache)\n"
         "  --smoothquant ALPHA         with --int8: SmoothQuant before quantizing (as modelopt's int8_sq,\n"
         "                              TensorRT-LLM's --smoothquant): each MatMul/Gemm input's outlier\n"
         "                              channels move into the weight, s_j = max|x_j|^A / max|w_j|^(1-A);\n"
         "                              0.5 is the paper's default (runs the batches; ignores the cache)\n"
         "  --calibration-cache FILE    read the scales from FILE when it exists (no batch runs), else\n"
         "                              calibrate and write it (TensorRT's text format)\n"
         "  --workspace MiB             largest scratch per layer\n"
         "  --opt-level N               0 = no graph optimization and no tuning; 1 first tactic; 2..5 time\n"
         "                              2, 4 (default 3), 8 or all candidate tactics per layer\n"
         "  --conv-layout auto|nhwc|nchw  2-D conv layout: auto = NHWC where a conv runs in fp16/bf16\n"
         "                              on a backend with an NHWC tactic (Transposes only at region edges)\n"
         "  --disable-pass NAME         skip an optimizer pass (repeatable)\n"
         "  --dump-ir DIR               write the IR after every pass (DIR is made when missing)\n"
         "  --timing-cache FILE         tactic timings to read and update (shared across builds)\n"
         "  --tactic-timing stream|device  what tactic timings count: stream (default) = between\n"
         "                              back-to-back enqueues, host cost included (engines run without\n"
         "                              CUDA graphs); device = GPU time alone (engines replayed from\n"
         "                              CUDA graphs, as ingot run --cuda-graph does)\n";
}

bool parse_llm_load_flag(const std::string& flag, const std::string& value, LlmLoadOptions& options, std::string& err) {
  err.clear();
  // Each flag's two accepted values (as its error names them) and the one that sets its option
  // (--quantization and --kv-cache-dtype are vLLM's names).
  struct Flag {
    const char* name;
    const char* values[2];
    const char* on;
    void (*set)(LlmLoadOptions&, bool on);
  };
  static const Flag kFlags[] = {
      {"--backend", {"cpu", "cuda"}, "cuda", [](LlmLoadOptions& o, bool on) { o.backend = on ? "cuda" : "cpu"; }},
      {"--dtype", {"fp16", "bf16"}, "bf16", [](LlmLoadOptions& o, bool on) { o.bf16 = on; }},
      {"--kv-cache-dtype", {"fp8", "auto"}, "fp8", [](LlmLoadOptions& o, bool on) { o.fp8_kv = on; }},
  };
  if (flag == "--quantization") {  // vLLM's name: fp8 (W8A8 / W8A16), int4 (W4A16), none
    if (value != "fp8" && value != "int4" && value != "none") {
      err = flag + " must be fp8, int4 or none, got '" + value + "'";
      return false;
    }
    options.fp8_weights = value == "fp8";
    options.int4_weights = value == "int4";
    options.checkpoint_int4 = false;  // given: what it says (unset: a 4-bit checkpoint runs as stored)
    return true;
  }
  for (const Flag& f : kFlags) {
    if (flag != f.name) continue;
    if (value != f.values[0] && value != f.values[1]) {
      err = flag + " must be " + f.values[0] + " or " + f.values[1] + ", got '" + value + "'";
      return false;
    }
    f.set(options, value == f.on);
    return true;
  }
  return false;
}

std::string llm_precision_label(const LlmLoadOptions& options, bool int4) {
  const char* int4_label = !int4 ? "" : options.int4_weights ? ", int4 weights" : ", int4 weights (the checkpoint's)";
  if (options.backend != "cuda") return std::string("CPU fp32") + int4_label;
  return std::string(options.bf16 ? "GPU bf16" : "GPU fp16") + (options.fp8_weights ? ", fp8 weights" : "") +
         int4_label +
         (options.fp8_kv ? ", fp8 KV cache" : "");
}

}  // namespace ingot::tools
