// Copyright ingot authors. Apache-2.0.
//
// `ingot tune MODEL.onnx`: a route search under an accuracy threshold and a time budget (issue 23;
// TensorRT's tuner has --dryRun, --loadRefOutputs, --accuracyThreshold, --accuracyAlgorithm and
// --tuningTimeOut). A route is one choice of each build setting the builder has: precision (fp32,
// fp16, bf16; tf32 on CUDA), conv layout (auto/nhwc/nchw, only for models with a Conv), builder
// optimization level, tactic-timing mode and CUDA graph replay (CUDA only), the profile's opt shapes
// (when --opt-shapes is given more than once); with --calibration-data
// also int8 and fp8 (fp16 with 8-bit layers, calibrated once per precision for the whole search). Each route is built,
// run on the same inputs (median latency of timed runs) and its outputs scored against reference
// outputs (the interpreter's, or --load-ref-outputs) with a loss (>= 0, lower is better); a route
// whose loss is over the threshold is kept in the tuning cache but never chosen. The cache (JSON,
// --tuning-cache) holds every route tried, so a rerun builds only what is missing. At the end: a
// table, the best route and why it won, its engine (-o), and an SVG of latency against loss with
// the threshold and the Pareto front (--svg).
#include "tune_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "calibration.h"
#include "device_io.h"
#include "file_io.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ingot/inspect.h"
#include "ingot/reference.h"
#include "inputs.h"
#include "npy.h"
#include "options.h"
#include "svg_text.h"

namespace ingot::tools {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Route {
  std::string precision = "fp32";  // fp32 | tf32 | fp16 | bf16 | int8 | fp8 (the last two: fp16 + 8-bit)
  std::string layout = "auto";
  int opt_level = 3;
  std::string timing = "stream";   // CUDA
  bool graph = false;              // CUDA
  int opt = -1;                    // which --opt-shapes (0-based) when several were given, else -1
  std::string key() const {
    std::ostringstream s;
    s << precision << "/" << layout << "/o" << opt_level << "/" << timing << (graph ? "/graph" : "");
    if (opt >= 0) s << "/opt" << opt + 1;
    return s.str();
  }
};

struct Outcome {
  bool ok = false;
  std::string error;
  double latency_ms = 0, build_s = 0, loss = 0;
  bool passed = false;
  bool cached = false;
};

struct TuneOptions {
  std::string model, output, cache_file, svg, ref_dir;
  std::string shape_args, inputs_arg;  // as given: part of the cache's scope
  std::string scope;                   // the tuning cache's scope (cache_scope), computed once
  BackendKind backend = BackendKind::kCpu;
  std::vector<std::string> precisions, layouts, timings;
  std::vector<int> opt_levels;
  std::vector<bool> graphs;
  bool dry_run = false;
  bool have_threshold = false;
  double threshold = 0;
  std::string algorithm = "cosine";
  int topk = 1;
  double timeout_s = 0;  // 0: none
  int iterations = 20;
  ShapeOptions shapes;                  // the first --opt-shapes among them
  std::vector<std::string> opt_choices;  // every --opt-shapes as given: several make a search axis
  uint64_t seed = 1;
  std::string calibration_dir, calibrator;  // int8 / fp8 routes
};

// One calibration per 8-bit precision for the whole search: the first int8 (fp8) route runs the
// batches, the later ones read the scales it wrote (as a TensorRT calibration cache is reused).
class SearchCalibrator : public NpyCalibrator {
 public:
  Result<std::vector<HostTensor>> next_batch(const std::vector<TensorInfo>& inputs) override {
    auto b = NpyCalibrator::next_batch(inputs);
    if (b.ok() && !b->empty()) ++batches_run;
    return b;
  }
  std::string read_cache() override {
    reused += !text_.empty();
    return text_;
  }
  void write_cache(const std::string& text) override { text_ = text; }
  int batches_run = 0, reused = 0;  ///< batches calibrated on; builds that read the scales back

 private:
  std::string text_;
};

SearchCalibrator& calibrator_for(const TuneOptions& o, bool fp8) {
  static SearchCalibrator int8_cal, fp8_cal;
  SearchCalibrator& c = fp8 ? fp8_cal : int8_cal;
  c.dir = o.calibration_dir;
  c.algorithm_name = o.calibrator;
  c.fp8 = fp8;
  return c;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

// ---- Losses: >= 0, lower is better; one number per output, the route's loss is their maximum.

std::vector<double> values(const HostTensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.element(i);
  return v;
}

// Rows over the last axis (a scalar is one row of one).
int64_t row_len(const HostTensor& t) { return t.shape.empty() ? 1 : std::max<int64_t>(t.shape.back(), 1); }

Result<double> loss_of(const TuneOptions& o, const HostTensor& ref, const HostTensor& got) {
  if (ref.numel() != got.numel())
    return Status(StatusCode::kInvalidArgument, "output '" + ref.name + "' has " + std::to_string(got.numel()) +
                                                    " elements, the reference " + std::to_string(ref.numel()));
  const std::vector<double> a = values(ref), b = values(got);
  const size_t n = a.size();
  for (size_t i = 0; i < n; ++i)
    if (std::isnan(b[i]) != std::isnan(a[i]) || (std::isinf(b[i]) && a[i] != b[i])) return INFINITY;
  if (o.algorithm == "max-abs") {
    double m = 0;
    for (size_t i = 0; i < n; ++i)
      if (!std::isnan(a[i])) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  }
  if (o.algorithm == "rel-l2") {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; ++i)
      if (!std::isnan(a[i])) d += (a[i] - b[i]) * (a[i] - b[i]), r += a[i] * a[i];
    return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
  }
  if (o.algorithm == "cosine") {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; ++i)
      if (!std::isnan(a[i])) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
    if (aa == 0 && bb == 0) return 0.0;
    if (aa == 0 || bb == 0) return 1.0;
    return std::max(0.0, 1.0 - ab / std::sqrt(aa * bb));
  }
  const int64_t len = row_len(ref), rows = static_cast<int64_t>(n) / len;
  if (o.algorithm == "topk") {  // the share of rows whose top-k sets differ
    const int64_t k = std::min<int64_t>(o.topk, len);
    int64_t differ = 0;
    for (int64_t r = 0; r < rows; ++r) {
      auto top = [&](const std::vector<double>& v) {
        std::vector<int64_t> idx(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = i;
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t x, int64_t y) {
          const double vx = v[static_cast<size_t>(r * len + x)], vy = v[static_cast<size_t>(r * len + y)];
          return vx > vy || (vx == vy && x < y);
        });
        return std::set<int64_t>(idx.begin(), idx.begin() + k);
      };
      differ += top(a) != top(b);
    }
    return rows ? static_cast<double>(differ) / static_cast<double>(rows) : 0.0;
  }
  // kl: mean over rows of KL(softmax(ref) || softmax(got)).
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    auto log_softmax = [&](const std::vector<double>& v) {
      double m = -INFINITY;
      for (int64_t i = 0; i < len; ++i) m = std::max(m, v[static_cast<size_t>(r * len + i)]);
      double s = 0;
      for (int64_t i = 0; i < len; ++i) s += std::exp(v[static_cast<size_t>(r * len + i)] - m);
      std::vector<double> out(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) out[static_cast<size_t>(i)] = v[static_cast<size_t>(r * len + i)] - m - std::log(s);
      return out;
    };
    const std::vector<double> lp = log_softmax(a), lq = log_softmax(b);
    for (int64_t i = 0; i < len; ++i) total += std::exp(lp[static_cast<size_t>(i)]) * (lp[static_cast<size_t>(i)] - lq[static_cast<size_t>(i)]);
  }
  return rows ? std::max(0.0, total / static_cast<double>(rows)) : 0.0;
}

// ---- One route: build, run, score.

BuilderConfig config_for(const TuneOptions& o, const Route& r, const OptimizationProfile* profile) {
  BuilderConfig c;
  c.backend = o.backend;
  c.fp16 = r.precision == "fp16" || r.precision == "int8" || r.precision == "fp8";
  c.int8 = r.precision == "int8";
  c.fp8 = r.precision == "fp8";
  if (c.int8 || c.fp8) c.calibrator = &calibrator_for(o, c.fp8);
  c.bf16 = r.precision == "bf16";
  c.tf32 = r.precision == "tf32";
  c.conv_layout = r.layout;
  c.optimization_level = r.opt_level;
  c.tactic_timing = r.timing;
  if (profile) c.profiles.push_back(*profile);
  return c;
}

Result<std::vector<uint8_t>> build_route(const TuneOptions& o, const Route& r, const OptimizationProfile* profile) {
  Builder builder;
  return builder.build_serialized(o.model, config_for(o, r, profile));
}

// `engine` receives the route's serialized engine when it built.
Outcome try_route(const TuneOptions& o, const Route& r, const OptimizationProfile* profile,
                  const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& refs,
                  std::vector<uint8_t>* engine_bytes) {
  Outcome out;
  const auto t0 = Clock::now();
  auto bytes = build_route(o, r, profile);
  out.build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!bytes.ok()) {
    out.error = "build: " + bytes.status().to_string();
    return out;
  }
  Runtime runtime;
  auto engine = runtime.deserialize(bytes->data(), bytes->size());
  if (!engine.ok()) {
    out.error = "load: " + engine.status().to_string();
    return out;
  }
  auto ctx = (*engine)->create_execution_context();
  if (!ctx.ok()) {
    out.error = "context: " + ctx.status().to_string();
    return out;
  }
  auto io = IoBuffers::create(**engine, **ctx);
  if (!io.ok()) {
    out.error = io.status().to_string();
    return out;
  }
  Status s = (*io)->upload_all(inputs);
  if (s.ok() && r.graph) s = (*ctx)->set_cuda_graph_mode(true);
  auto run_once = [&]() -> Status {
    Status e = (*ctx)->enqueue((*io)->stream());
    if (!e.ok()) return e;
    return (*io)->synchronize();
  };
  for (int i = 0; s.ok() && i < 3; ++i) s = run_once();  // warm-up (and the graph's capture)
  std::vector<double> ms;
  const auto start = Clock::now();
  while (s.ok() && (static_cast<int>(ms.size()) < o.iterations ||
                    std::chrono::duration<double>(Clock::now() - start).count() < 0.2)) {
    const auto a = Clock::now();
    s = run_once();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
    if (ms.size() >= 1000) break;
  }
  if (!s.ok()) {
    out.error = "run: " + s.to_string();
    return out;
  }
  std::sort(ms.begin(), ms.end());
  out.latency_ms = ms[ms.size() / 2];
  auto got = (*io)->download_all();
  if (!got.ok()) {
    out.error = "outputs: " + got.status().to_string();
    return out;
  }
  double loss = 0;
  for (const HostTensor& ref : refs) {
    const HostTensor* g = nullptr;
    for (const HostTensor& t : *got)
      if (t.name == ref.name) g = &t;
    if (!g) {
      out.error = "the engine has no output '" + ref.name + "'";
      return out;
    }
    auto l = loss_of(o, ref, *g);
    if (!l.ok()) {
      out.error = l.status().to_string();
      return out;
    }
    loss = std::max(loss, *l);
  }
  out.ok = true;
  out.loss = loss;
  *engine_bytes = std::move(bytes).value();
  out.passed = !o.have_threshold || loss <= o.threshold;
  return out;
}

// ---- The tuning cache: {"version", "scope", "entries": {route key: outcome}, "engine_route"}; the
// scope is what makes outcomes comparable (the model file and a hash of its contents, the loss, the
// reference, the inputs, shapes and calibration data); "engine_route" names the route whose engine
// is kept beside the cache (FILE.engine).

// Computed once per command (it reads the whole model): TuneOptions::scope.
std::string cache_scope(const TuneOptions& o) {
  auto read = read_file(o.model);
  const std::string model = read.ok() ? std::move(read).value() : std::string();
  std::ostringstream s;
  s << o.model << " #" << std::hex << std::hash<std::string>{}(model) << "/" << std::dec << model.size() << "|" << o.algorithm << (o.algorithm == "topk" ? std::to_string(o.topk) : "") << "|seed " << o.seed
    << "|ref " << (o.ref_dir.empty() ? "interpreter" : o.ref_dir) << "|backend "
    << (o.backend == BackendKind::kCuda ? "cuda" : "cpu");
  if (!o.calibration_dir.empty()) s << "|calibration " << o.calibration_dir << " " << o.calibrator;
  if (!o.shape_args.empty()) s << "|shapes" << o.shape_args;
  if (!o.inputs_arg.empty()) s << "|inputs " << o.inputs_arg;
  return s.str();
}

// The route whose engine the cache keeps beside it (FILE.engine), or "".
std::map<std::string, Outcome> read_cache(const TuneOptions& o, std::string* note, std::string* engine_route);

// The cache, or none (with a note) when it is not one of ours or has a field of the wrong type.
std::map<std::string, Outcome> load_cache(const TuneOptions& o, std::string* note, std::string* engine_route) {
  try {
    return read_cache(o, note, engine_route);
  } catch (const nlohmann::json::exception& e) {
    *note = "the tuning cache '" + o.cache_file + "' is malformed (" + e.what() + "; ignored, rewritten)";
    return {};
  }
}

std::map<std::string, Outcome> read_cache(const TuneOptions& o, std::string* note, std::string* engine_route) {
  std::map<std::string, Outcome> c;
  engine_route->clear();
  if (o.cache_file.empty()) return c;
  std::ifstream f(o.cache_file);
  if (!f) return c;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != 1) {
    *note = "the tuning cache '" + o.cache_file + "' is not one (ignored, rewritten)";
    return c;
  }
  if (j.value("scope", "") != o.scope) {
    *note = "the tuning cache '" + o.cache_file + "' is for another model, loss, reference, shapes or inputs (ignored, rewritten)";
    return c;
  }
  for (auto& [key, e] : j["entries"].items()) {
    Outcome x;
    x.ok = e.value("ok", false);
    x.error = e.value("error", "");
    x.latency_ms = e.value("latency_ms", 0.0);
    x.build_s = e.value("build_s", 0.0);
    x.loss = e.value("loss", 0.0);
    if (e.contains("loss") && e["loss"].is_null()) x.loss = INFINITY;
    x.cached = true;
    c[key] = x;
  }
  if (j.contains("engine_route") && j["engine_route"].is_string()) *engine_route = j["engine_route"].get<std::string>();
  return c;
}

std::string engine_file_of(const TuneOptions& o) { return o.cache_file + ".engine"; }

void save_cache(const TuneOptions& o, const std::map<std::string, Outcome>& c, const std::string& engine_route) {
  if (o.cache_file.empty()) return;
  json entries = json::object();
  for (const auto& [key, x] : c) {
    json e = {{"ok", x.ok}, {"latency_ms", x.latency_ms}, {"build_s", x.build_s}};
    e["loss"] = std::isfinite(x.loss) ? json(x.loss) : json(nullptr);
    if (!x.error.empty()) e["error"] = x.error;
    entries[key] = e;
  }
  json j = {{"version", 1}, {"scope", o.scope}, {"entries", entries}};
  if (!engine_route.empty()) j["engine_route"] = engine_route;
  Status s = write_file(o.cache_file, j.dump(1) + "\n");
  if (!s.ok()) std::cerr << "ingot tune: the tuning cache: " << s.message() << "\n";
}

// ---- The picture: latency (x) against loss (y), threshold and Pareto front marked.

void write_svg(const TuneOptions& o, const std::vector<Route>& routes, const std::vector<Outcome>& out, int best) {
  const double W = 720, H = 440, L = 70, R = 20, T = 40, B = 50;
  double xmax = 0, ymax = 0;
  for (const Outcome& x : out)
    if (x.ok) xmax = std::max(xmax, x.latency_ms), ymax = std::max(ymax, std::isfinite(x.loss) ? x.loss : 0.0);
  if (o.have_threshold) ymax = std::max(ymax, o.threshold * 1.2);
  xmax = xmax > 0 ? xmax * 1.1 : 1;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  auto px = [&](double v) { return L + (W - L - R) * v / xmax; };
  auto py = [&](double v) { return H - B - (H - T - B) * std::min(v, ymax) / ymax; };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' font-family='sans-serif' font-size='11'>\n";
  s << "<text x='" << L << "' y='20' font-size='14'>" << xml_escape("ingot tune: " + o.model) << "</text>\n";
  s << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='black'/>\n";
  s << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='black'/>\n";
  s << "<text x='" << (W / 2) << "' y='" << H - 12 << "'>latency (ms, median)</text>\n";
  s << "<text x='12' y='" << T - 8 << "'>" << xml_escape("loss (" + o.algorithm + ")") << "</text>\n";
  for (int i = 0; i <= 4; ++i) {
    s << "<text x='" << px(xmax * i / 4) - 10 << "' y='" << H - B + 14 << "'>" << std::setprecision(3) << xmax * i / 4 << "</text>\n";
    s << "<text x='4' y='" << py(ymax * i / 4) + 4 << "'>" << std::setprecision(3) << ymax * i / 4 << "</text>\n";
  }
  if (o.have_threshold)
    s << "<line x1='" << L << "' y1='" << py(o.threshold) << "' x2='" << W - R << "' y2='" << py(o.threshold)
      << "' stroke='red' stroke-dasharray='5,4'/><text x='" << W - R - 90 << "' y='" << py(o.threshold) - 4
      << "' fill='red'>threshold</text>\n";
  // Pareto front: no other route is both faster and more accurate.
  std::vector<int> front;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok) continue;
    bool dominated = false;
    for (size_t j = 0; j < out.size() && !dominated; ++j)
      dominated = j != i && out[j].ok && out[j].latency_ms <= out[i].latency_ms && out[j].loss <= out[i].loss &&
                  (out[j].latency_ms < out[i].latency_ms || out[j].loss < out[i].loss);
    if (!dominated) front.push_back(static_cast<int>(i));
  }
  std::sort(front.begin(), front.end(), [&](int a, int b) { return out[a].latency_ms < out[b].latency_ms; });
  if (front.size() > 1) {
    s << "<polyline fill='none' stroke='#2a7' stroke-width='1.5' points='";
    for (int i : front) s << px(out[i].latency_ms) << "," << py(out[i].loss) << " ";
    s << "'/>\n";
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok) continue;
    const bool is_best = static_cast<int>(i) == best;
    s << "<circle cx='" << px(out[i].latency_ms) << "' cy='" << py(out[i].loss) << "' r='" << (is_best ? 6 : 4)
      << "' fill='" << (is_best ? "#d80" : out[i].passed ? "#36c" : "#999") << "'><title>"
      << xml_escape("#" + std::to_string(i + 1) + " " + routes[i].key()) << "</title></circle>\n";
    s << "<text x='" << px(out[i].latency_ms) + 6 << "' y='" << py(out[i].loss) - 4 << "'>#" << i + 1 << "</text>\n";
  }
  s << "<text x='" << L + 10 << "' y='" << T + 12 << "'>orange: chosen; blue: within the threshold; grey: over it; "
       "green line: Pareto front</text>\n</svg>\n";
  Status w = write_file(o.svg, s.str());
  if (!w.ok()) std::cerr << "ingot tune: " << w.message() << "\n";
}

std::string bar(int done, int total, double elapsed, const std::string& best) {
  std::ostringstream s;
  const int w = 24, filled = total ? w * done / total : w;
  s << "\r[" << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(w - filled), '.') << "] "
    << done << "/" << total << " routes";
  if (done > 0 && done < total) s << ", ETA " << static_cast<int>(elapsed / done * (total - done) + 0.5) << " s";
  if (!best.empty()) s << ", best " << best;
  s << "   ";
  return s.str();
}

void tune_help() {
  std::cout << "usage: ingot tune MODEL.onnx [options]\n"
               "Searches build routes (precision x conv layout x optimization level [x tactic timing x CUDA\n"
               "graph on CUDA] [x opt shapes]) for the fastest engine whose outputs stay within an accuracy threshold.\n"
               "  --backend cpu|cuda             (default cpu)\n"
               "  --precisions LIST              of fp32,tf32,fp16,bf16 (default fp32,fp16,bf16 on cpu;\n"
               "                                 fp16,bf16,tf32,fp32 on cuda: the likely fastest first)\n"
               "                                 int8, fp8: fp16 with 8-bit layers (need --calibration-data;\n"
               "                                 added to the default list when it is given)\n"
               "  --calibration-data DIR         batches for the int8/fp8 routes (as ingot build's), calibrated\n"
               "                                 once per precision for the whole search\n"
               "  --calibrator A                 entropy, minmax, percentile (default: entropy for int8, minmax for fp8)\n"
               "  --conv-layouts LIST            of auto,nhwc,nchw (default all three for models with a Conv, else auto)\n"
               "  --opt-levels LIST              builder optimization levels (default 3 on cpu, 3,5 on cuda)\n"
               "  --tactic-timings LIST          cuda: of stream,device (default stream)\n"
               "  --cuda-graph off|on|both       cuda: replay from a CUDA graph (default on)\n"
               "  --dry-run                      print the numbered routes and an estimate; build nothing\n"
               "  --load-ref-outputs DIR         reference outputs (<output>.npy, as `ingot run --save-outputs`\n"
               "                                 writes); default: the reference interpreter's on the same inputs\n"
               "  --load-inputs name:file.npy,.. inputs (default: random, --seed)\n"
               "  --accuracy-threshold T         a route whose loss is over T is never chosen (required with\n"
               "                                 --load-ref-outputs; without one every route is eligible)\n"
               "  --accuracy-algorithm A         cosine (1 - cosine similarity; default), max-abs, rel-l2,\n"
               "                                 topk[:K] (share of rows whose top-K differ), kl (KL of softmaxes)\n"
               "  --tuning-timeout S             stop starting routes after S seconds; the best so far wins\n"
               "  --tuning-cache FILE            every route's outcome; a rerun builds only what is missing\n"
               "  --iterations N                 timed runs per route (default 20, at least 0.2 s)\n"
               "  --shapes / --min-shapes / --opt-shapes / --max-shapes   as for ingot build\n"
               "                                 --opt-shapes given more than once (with --min/--max-shapes):\n"
               "                                 a search axis, each route built for one of them (optK in its\n"
               "                                 name) and run at the first\n"
               "  -o, --output FILE.engine       write the chosen route's engine\n"
               "  --svg FILE                     latency against loss, threshold and Pareto front\n"
               "  --seed N                       random inputs' seed (default 1)\n";
}

}  // namespace

int tune_command(const std::vector<std::string>& args) {
  TuneOptions o;
  std::string graph_arg = "on";
  bool layouts_given = false, opt_given = false, precisions_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    auto value = [&]() {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot tune: " << a << " needs a value\n";
        return false;
      }
      v = args[++i];
      return true;
    };
    long long n = 0;
    std::string err;
    if (a == "-h" || a == "--help") {
      tune_help();
      return 0;
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (a == "--backend") {
      if (!value()) return 2;
      if (v != "cpu" && v != "cuda") {
        std::cerr << "ingot tune: --backend must be cpu or cuda, got '" << v << "'\n";
        return 2;
      }
      o.backend = v == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
    } else if (a == "--precisions") {
      if (!value()) return 2;
      o.precisions = split(v);
      precisions_given = true;
      for (const std::string& p : o.precisions)
        if (p != "fp32" && p != "tf32" && p != "fp16" && p != "bf16" && p != "int8" && p != "fp8") {
          std::cerr << "ingot tune: --precisions takes fp32, tf32, fp16, bf16, int8, fp8; got '" << p << "'\n";
          return 2;
        }
    } else if (a == "--calibration-data") {
      if (!value()) return 2;
      o.calibration_dir = v;
    } else if (a == "--calibrator") {
      if (!value()) return 2;
      if (v != "entropy" && v != "minmax" && v != "percentile") {
        std::cerr << "ingot tune: --calibrator must be entropy, minmax or percentile, got '" << v << "'\n";
        return 2;
      }
      o.calibrator = v;
    } else if (a == "--conv-layouts") {
      if (!value()) return 2;
      o.layouts = split(v);
      layouts_given = true;
      for (const std::string& l : o.layouts)
        if (l != "auto" && l != "nhwc" && l != "nchw") {
          std::cerr << "ingot tune: --conv-layouts takes auto, nhwc, nchw; got '" << l << "'\n";
          return 2;
        }
    } else if (a == "--opt-levels") {
      if (!value()) return 2;
      opt_given = true;
      for (const std::string& x : split(v)) {
        if (!parse_int_arg("ingot tune", a, x, 0, 5, n)) return 2;
        o.opt_levels.push_back(static_cast<int>(n));
      }
    } else if (a == "--tactic-timings") {
      if (!value()) return 2;
      o.timings = split(v);
      for (const std::string& t : o.timings)
        if (t != "stream" && t != "device") {
          std::cerr << "ingot tune: --tactic-timings takes stream, device; got '" << t << "'\n";
          return 2;
        }
    } else if (a == "--cuda-graph") {
      if (!value()) return 2;
      if (v != "off" && v != "on" && v != "both") {
        std::cerr << "ingot tune: --cuda-graph must be off, on or both, got '" << v << "'\n";
        return 2;
      }
      graph_arg = v;
    } else if (a == "--load-ref-outputs") {
      if (!value()) return 2;
      o.ref_dir = v;
    } else if (a == "--load-inputs") {
      if (!value()) return 2;
      o.inputs_arg = v;
    } else if (a == "--accuracy-threshold") {
      if (!value()) return 2;
      char* end = nullptr;
      o.threshold = std::strtod(v.c_str(), &end);
      if (!end || *end || !(o.threshold >= 0)) {
        std::cerr << "ingot tune: --accuracy-threshold needs a number >= 0, got '" << v << "'\n";
        return 2;
      }
      o.have_threshold = true;
    } else if (a == "--accuracy-algorithm") {
      if (!value()) return 2;
      o.algorithm = v;
      if (v.rfind("topk", 0) == 0) {
        o.algorithm = "topk";
        if (v.size() > 4 && (v[4] != ':' || !parse_int_arg("ingot tune", a, v.substr(5), 1, 1 << 20, n))) {
          std::cerr << "ingot tune: --accuracy-algorithm topk:K needs K >= 1, got '" << v << "'\n";
          return 2;
        }
        if (v.size() > 4) o.topk = static_cast<int>(n);
      } else if (v != "cosine" && v != "max-abs" && v != "rel-l2" && v != "kl") {
        std::cerr << "ingot tune: --accuracy-algorithm must be cosine, max-abs, rel-l2, topk[:K] or kl, got '" << v << "'\n";
        return 2;
      }
    } else if (a == "--tuning-timeout") {
      if (!value()) return 2;
      char* end = nullptr;
      o.timeout_s = std::strtod(v.c_str(), &end);
      if (!end || *end || !(o.timeout_s > 0)) {
        std::cerr << "ingot tune: --tuning-timeout needs seconds > 0, got '" << v << "'\n";
        return 2;
      }
    } else if (a == "--tuning-cache") {
      if (!value()) return 2;
      o.cache_file = v;
    } else if (a == "--iterations") {
      if (!value() || !parse_int_arg("ingot tune", a, v, 1, 100000, n)) return 2;
      o.iterations = static_cast<int>(n);
    } else if (a == "--seed") {
      if (!value() || !parse_int_arg("ingot tune", a, v, 0, (1ll << 62), n)) return 2;
      o.seed = static_cast<uint64_t>(n);
    } else if (a == "-o" || a == "--output") {
      if (!value()) return 2;
      o.output = v;
    } else if (a == "--svg") {
      if (!value()) return 2;
      o.svg = v;
    } else if (a == "--opt-shapes" && !o.opt_choices.empty()) {
      // A second (third, ...) opt shape: one more value of the opt-shapes axis.
      if (!value()) return 2;
      ShapeOptions check;
      if (!check.parse(a, v, err)) {
        std::cerr << "ingot tune: " << err << "\n";
        return 2;
      }
      o.opt_choices.push_back(v);
      o.shape_args += " " + a + " " + v;
    } else if (a == "--shapes" || a == "--min-shapes" || a == "--opt-shapes" || a == "--max-shapes") {
      if (!value()) return 2;
      if (a == "--opt-shapes") o.opt_choices.push_back(v);
      if (!o.shapes.parse(a, v, err)) {
        std::cerr << "ingot tune: " << err << "\n";
        return 2;
      }
      o.shape_args += " " + a + " " + v;
    } else if (!a.empty() && a[0] != '-' && o.model.empty()) {
      o.model = a;
    } else {
      std::cerr << "ingot tune: unknown option '" << a << "' (ingot tune --help)\n";
      return 2;
    }
  }
  if (o.model.empty()) {
    std::cerr << "ingot tune: a MODEL.onnx is required (ingot tune --help)\n";
    return 2;
  }
  if (!o.ref_dir.empty() && !o.have_threshold) {
    std::cerr << "ingot tune: --load-ref-outputs needs --accuracy-threshold (the loss every route must stay within)\n";
    return 2;
  }
  const bool cuda = o.backend == BackendKind::kCuda;
  // On CUDA the reduced precisions come first: they are usually the fastest, so a --tuning-timeout
  // that stops the search early has tried the most promising routes.
  if (!precisions_given) o.precisions = cuda ? std::vector<std::string>{"fp16", "bf16", "tf32", "fp32"}
                                             : std::vector<std::string>{"fp32", "fp16", "bf16"};
  if (!precisions_given && !o.calibration_dir.empty()) {
    // fp16, fp8, bf16, int8, tf32, fp32 on CUDA (FP8 is Hopper's; measured faster than int8 there);
    // fp32, fp16, bf16, int8 on the CPU (its FP8 is an emulation: ask for it by name).
    if (cuda) {
      o.precisions.insert(o.precisions.begin() + 1, "fp8");
      o.precisions.insert(o.precisions.begin() + 3, "int8");
    } else {
      o.precisions.push_back("int8");
    }
  }
  for (const std::string& p : o.precisions)
    if ((p == "int8" || p == "fp8") && o.calibration_dir.empty()) {
      std::cerr << "ingot tune: the " << p << " routes need --calibration-data DIR\n";
      return 2;
    }
  if (!cuda)
    for (const std::string& p : o.precisions)
      if (p == "tf32") {
        std::cerr << "ingot tune: tf32 is a CUDA precision (--backend cuda)\n";
        return 2;
      }
  if (!opt_given) o.opt_levels = cuda ? std::vector<int>{3, 5} : std::vector<int>{3};
  if (o.timings.empty() || !cuda) o.timings = {"stream"};
  o.graphs = !cuda ? std::vector<bool>{false}
             : graph_arg == "both" ? std::vector<bool>{false, true}
                                   : std::vector<bool>{graph_arg == "on"};
  if (!layouts_given) {
    auto report = inspect_model(o.model, InspectOptions{{}, false});
    if (!report.ok()) {
      std::cerr << "ingot tune: " << report.status().to_string() << "\n";
      return 1;
    }
    const bool has_conv = report->before.op_counts.count("Conv") > 0;
    o.layouts = has_conv ? std::vector<std::string>{"auto", "nhwc", "nchw"} : std::vector<std::string>{"auto"};
  }
  if (o.opt_choices.size() > 1 && !o.shapes.shapes.empty()) {
    std::cerr << "ingot tune: several --opt-shapes (a search axis) need a profile (--min-shapes/--max-shapes), "
                 "not --shapes\n";
    return 2;
  }
  // The routes, in a fixed order: precision, layout, level, timing, graph, opt shapes.
  const int n_opt = o.opt_choices.size() > 1 ? static_cast<int>(o.opt_choices.size()) : 0;
  std::vector<Route> routes;
  for (const std::string& p : o.precisions)
    for (const std::string& l : o.layouts)
      for (int lvl : o.opt_levels)
        for (const std::string& t : o.timings)
          for (bool g : o.graphs)
            for (int k = n_opt ? 0 : -1; k < n_opt; ++k) routes.push_back(Route{p, l, lvl, t, g, k});
  auto print_opt_legend = [&]() {
    for (int k = 0; k < n_opt; ++k) std::cout << "  opt" << k + 1 << " = --opt-shapes " << o.opt_choices[k] << "\n";
  };

  if (!o.cache_file.empty()) o.scope = cache_scope(o);
  std::string note, engine_route;
  std::map<std::string, Outcome> cache = load_cache(o, &note, &engine_route);
  if (!note.empty()) std::cerr << "ingot tune: " << note << "\n";

  if (o.dry_run) {
    double known = 0, seen = 0;
    int missing = 0;
    for (const Route& r : routes) {
      auto c = cache.find(r.key());
      if (c != cache.end()) known += c->second.build_s, ++seen;
      else ++missing;
    }
    std::cout << routes.size() << " routes for " << o.model << " (" << (cuda ? "cuda" : "cpu") << "):\n";
    print_opt_legend();
    for (size_t i = 0; i < routes.size(); ++i) {
      auto c = cache.find(routes[i].key());
      std::cout << std::setw(4) << i + 1 << "  " << routes[i].key() << (c != cache.end() ? "  (in the cache)" : "") << "\n";
    }
    std::cout << missing << " to build";
    if (seen > 0) std::cout << ", about " << std::fixed << std::setprecision(0) << (known / seen) * missing * 1.3 << " s";
    else if (missing > 0) std::cout << " (no estimate: nothing in the tuning cache yet)";
    std::cout << "\n";
    return 0;
  }

  // Inputs and reference outputs.
  auto model = ReferenceModel::load(o.model);
  if (!model.ok()) {
    std::cerr << "ingot tune: " << model.status().to_string() << "\n";
    return 1;
  }
  std::map<std::string, HostTensor> loaded;
  if (!o.inputs_arg.empty()) {
    std::map<std::string, std::string> files;
    std::string err;
    if (!parse_pairs(o.inputs_arg, files, err)) {
      std::cerr << "ingot tune: --load-inputs: " << err << "\n";
      return 2;
    }
    for (const auto& [name, file] : files) {
      auto t = load_npy(file);
      if (!t.ok()) {
        std::cerr << "ingot tune: " << t.status().to_string() << "\n";
        return 1;
      }
      t->name = name;
      loaded[name] = std::move(t).value();
    }
  }
  OptimizationProfile profile;
  std::string err;
  if (!o.shapes.to_profile(profile, err)) {
    std::cerr << "ingot tune: " << err << "\n";
    return 2;
  }
  std::mt19937_64 rng(o.seed);
  std::vector<HostTensor> inputs;
  bool open = false;
  for (const TensorInfo& in : (*model)->inputs()) {
    auto f = loaded.find(in.name);
    bool in_open = !in.rank_known;
    for (int64_t d : in.shape) in_open = in_open || d < 0;
    open = open || in_open;
    if (f != loaded.end()) {
      inputs.push_back(f->second);
    } else {
      auto t = random_input(in, o.shapes, rng);
      if (!t.ok()) {
        std::cerr << "ingot tune: input '" << in.name << "': " << t.status().to_string() << "\n";
        return 2;
      }
      t->name = in.name;
      inputs.push_back(std::move(t).value());
    }
    bool named = false;
    for (const auto& e : profile.entries()) named = named || e.input == in.name;
    if (in_open && !named) profile.set_dimensions(in.name, inputs.back().shape, inputs.back().shape, inputs.back().shape);
  }
  const OptimizationProfile* prof = open || !o.shapes.empty() ? &profile : nullptr;
  // With several --opt-shapes, route k's profile is the same min/max with opt shapes k (the
  // inputs, and so the timing and the loss, stay at the first one's).
  std::vector<OptimizationProfile> opt_profiles;
  for (int k = 0; k < n_opt; ++k) {
    ShapeOptions choice;
    choice.parse("--opt-shapes", o.opt_choices[static_cast<size_t>(k)], err);
    OptimizationProfile p;
    for (const auto& e : profile.entries()) {
      auto c = choice.opt.find(e.input);
      p.set_dimensions(e.input, e.min, c != choice.opt.end() ? c->second : e.opt, e.max);
    }
    opt_profiles.push_back(std::move(p));
  }
  auto profile_of = [&](const Route& r) { return r.opt >= 0 ? &opt_profiles[static_cast<size_t>(r.opt)] : prof; };
  std::vector<HostTensor> refs;
  if (!o.ref_dir.empty()) {
    for (const TensorInfo& out : (*model)->outputs()) {
      auto t = load_npy(o.ref_dir + "/" + out.name + ".npy");
      if (!t.ok()) {
        std::cerr << "ingot tune: reference output: " << t.status().to_string() << "\n";
        return 1;
      }
      t->name = out.name;
      refs.push_back(std::move(t).value());
    }
  } else {
    auto r = (*model)->run(inputs);
    if (!r.ok()) {
      std::cerr << "ingot tune: reference run: " << r.status().to_string() << "\n";
      return 1;
    }
    refs = std::move(r).value();
  }
  if (cuda) start_device_context();

  // The search.
  std::vector<Outcome> out(routes.size());
  int best = -1, built = 0, reused = 0, tried = 0;
  // The engine of the fastest passing route built in this run: -o writes the engine that was
  // measured, not a rebuild (whose tactic timing could choose differently).
  std::vector<uint8_t> best_bytes;
  std::string best_bytes_route;
  bool timed_out = false;
  auto better = [&](int i) {
    return out[i].ok && out[i].passed && (best < 0 || out[i].latency_ms < out[best].latency_ms);
  };
  const auto t0 = Clock::now();
  for (size_t i = 0; i < routes.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    auto c = cache.find(routes[i].key());
    if (c == cache.end() && o.timeout_s > 0 && elapsed > o.timeout_s) {
      timed_out = true;
      break;
    }
    std::string best_text;
    if (best >= 0) {
      std::ostringstream b;
      b << std::fixed << std::setprecision(3) << out[best].latency_ms << " ms (#" << best + 1 << ")";
      best_text = b.str();
    }
    std::cerr << bar(static_cast<int>(i), static_cast<int>(routes.size()), elapsed, best_text) << std::flush;
    if (c != cache.end()) {
      out[i] = c->second;
      out[i].passed = out[i].ok && (!o.have_threshold || out[i].loss <= o.threshold);
      ++reused;
    } else {
      std::vector<uint8_t> bytes;
      out[i] = try_route(o, routes[i], profile_of(routes[i]), inputs, refs, &bytes);
      cache[routes[i].key()] = out[i];
      save_cache(o, cache, engine_route);  // each route as it completes: an interrupted search keeps its work
      ++built;
      if (better(static_cast<int>(i))) best_bytes = std::move(bytes), best_bytes_route = routes[i].key();
    }
    ++tried;
    if (better(static_cast<int>(i))) best = static_cast<int>(i);
  }
  std::cerr << bar(tried, static_cast<int>(routes.size()), std::chrono::duration<double>(Clock::now() - t0).count(), "")
            << "\n";

  // The table, fastest first.
  std::vector<int> order;
  for (int i = 0; i < tried; ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (out[a].ok != out[b].ok) return out[a].ok;
    return out[a].latency_ms < out[b].latency_ms;
  });
  print_opt_legend();
  std::cout << "route  " << std::left << std::setw(28) << "settings" << std::right << std::setw(12) << "latency ms"
            << std::setw(14) << ("loss " + o.algorithm).substr(0, 13) << std::setw(8) << "pass" << std::setw(10)
            << "build s" << "  source\n";
  for (int i : order) {
    const Outcome& x = out[i];
    std::cout << std::setw(5) << i + 1 << "  " << std::left << std::setw(28) << routes[i].key() << std::right;
    if (!x.ok) {
      std::cout << "  failed: " << x.error << "\n";
      continue;
    }
    std::ostringstream loss;
    loss << std::setprecision(3) << x.loss;
    std::cout << std::setw(12) << std::fixed << std::setprecision(4) << x.latency_ms << std::setw(14) << loss.str()
              << std::setw(8) << (x.passed ? "yes" : "NO") << std::setw(10) << std::setprecision(2) << x.build_s
              << "  " << (x.cached ? "cache" : "built") << (i == best ? "  <- chosen" : "") << "\n";
  }
  std::cout << tried << " of " << routes.size() << " routes (" << built << " built, " << reused
            << " from the tuning cache) in " << std::fixed << std::setprecision(1)
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s";
  if (timed_out) std::cout << "; the tuning timeout (" << o.timeout_s << " s) stopped the search";
  std::cout << "\n";
  for (bool fp8 : {false, true}) {
    const SearchCalibrator& c = calibrator_for(o, fp8);
    if (c.batches_run > 0 || c.reused > 0)
      std::cout << (fp8 ? "fp8" : "int8") << " routes: calibrated once on " << c.batches_run
                << " batches; " << c.reused << " later build" << (c.reused == 1 ? "" : "s")
                << " read the scales back\n";
  }
  if (!o.svg.empty()) write_svg(o, routes, std::vector<Outcome>(out.begin(), out.begin() + tried), best);
  if (best < 0) {
    std::cout << "no route " << (o.have_threshold ? "within the accuracy threshold" : "built") << "\n";
    return 1;
  }
  int passing = 0;
  for (int i = 0; i < tried; ++i) passing += out[i].ok && out[i].passed;
  std::ostringstream why;
  why << "chosen: route " << best + 1 << " (" << routes[best].key() << "), " << std::fixed << std::setprecision(4)
      << out[best].latency_ms << " ms, loss " << std::defaultfloat << std::setprecision(3) << out[best].loss
      << ": the fastest of " << passing << " route" << (passing == 1 ? "" : "s");
  if (o.have_threshold) why << " within the threshold " << o.threshold << " (" << tried - passing << " over it or failed)";
  else why << " (no accuracy threshold given)";
  std::cout << why.str() << "\n";
  // The chosen engine: this run's measured one; else the one the tuning cache kept for the same
  // route (a rerun writes it in seconds); else rebuilt (said so: tactic timing may choose differently).
  const std::string chosen_key = routes[best].key();
  std::string source = "measured in this run";
  if (best_bytes_route != chosen_key) {
    best_bytes.clear();
    if (!o.cache_file.empty() && engine_route == chosen_key) {
      auto kept = read_file(engine_file_of(o));
      if (kept.ok() && !kept->empty()) {
        best_bytes.assign(kept->begin(), kept->end());
        source = "kept by the tuning cache";
      }
    }
    if (best_bytes.empty() && !o.output.empty()) {
      auto bytes = build_route(o, routes[best], profile_of(routes[best]));
      if (!bytes.ok()) {
        std::cerr << "ingot tune: rebuilding the chosen route: " << bytes.status().to_string() << "\n";
        return 1;
      }
      best_bytes = std::move(bytes).value();
      source = "rebuilt (the cache kept no engine of it; its tactics were timed again)";
    }
  }
  auto write = [&](const std::string& path) {
    return write_file(path, std::string_view(reinterpret_cast<const char*>(best_bytes.data()), best_bytes.size())).ok();
  };
  if (!o.cache_file.empty() && !best_bytes.empty() && engine_route != chosen_key) {
    if (write(engine_file_of(o))) {
      engine_route = chosen_key;
      save_cache(o, cache, engine_route);
    } else {
      std::cerr << "ingot tune: cannot write '" << engine_file_of(o) << "' (the tuning cache keeps no engine)\n";
    }
  }
  if (!o.output.empty()) {
    if (!write(o.output)) {
      std::cerr << "ingot tune: cannot write '" << o.output << "'\n";
      return 1;
    }
    std::cout << "wrote " << o.output << " (" << source << ")\n";
  }
  return 0;
}

}  // namespace ingot::tools
