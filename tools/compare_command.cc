// Copyright ingot authors. Apache-2.0.
//
// `ingot compare`: Polygraphy's question for ingot. Is the engine (optimized, fused, with the
// tactics it picked) still computing the model? The oracle is the fp32 reference interpreter
// on the unoptimized graph; both see the very same input bytes. With --all-layers every tensor
// a step produces is matched by name with the interpreter's value, so the first step that
// leaves tolerance points at the kernel or rewrite to blame.
#include "compare_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ingot/reference.h"
#include "device_io.h"
#include "inputs.h"
#include "npy.h"
#include "options.h"

namespace ingot::tools {

namespace {

constexpr int kUsage = 2;
constexpr int kFail = 1;

struct CompareOptions {
  std::string model;
  std::string engine_file;  // --engine: compare this engine instead of building one
  ShapeOptions shapes;
  BuilderConfig config;
  std::map<std::string, std::string> input_files;
  uint64_t seed = 1;
  double atol = 1e-5, rtol = 1e-5;
  bool all_layers = false;
  long long check_layers = -1;  // steps [0, N) count toward the verdict
  bool build_flag_given = false;  // a builder flag: only meaningful when compare builds the engine
};

// How far one engine tensor is from the reference. Relative error divides by |ref|, floored
// at kRelFloor so that exact zeros in the reference do not turn every rounding into infinity.
struct Diff {
  std::string problem;  // non-empty when the tensors cannot be compared element-wise
  int64_t n = 0, within = 0;
  double max_abs = 0, mean_abs = 0, max_rel = 0, mean_rel = 0, cosine = 1;
  bool pass() const { return problem.empty() && within == n; }
};

constexpr double kRelFloor = 1e-12;

Diff diff(const HostTensor& ref, const HostTensor& got, double atol, double rtol) {
  Diff d;
  if (ref.shape != got.shape) {
    d.problem = "shape " + dims_to_string(got.shape) + ", the reference has " + dims_to_string(ref.shape);
    return d;
  }
  if ((ref.dtype == DataType::kString) != (got.dtype == DataType::kString)) {
    d.problem = std::string("dtype ") + data_type_name(got.dtype) + ", the reference has " + data_type_name(ref.dtype);
    return d;
  }
  d.n = ref.numel();
  if (ref.dtype == DataType::kString) {
    for (int64_t i = 0; i < d.n; ++i) d.within += ref.strings[i] == got.strings[i];
    d.max_abs = d.max_rel = d.within == d.n ? 0 : 1;
    d.cosine = d.within == d.n ? 1 : 0;
    return d;
  }
  double sum_abs = 0, sum_rel = 0, dot = 0, nr = 0, ng = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    double r = ref.element(i), g = got.element(i);
    double abs_err, rel_err;
    bool ok;
    if (std::isnan(r) || std::isnan(g) || std::isinf(r) || std::isinf(g)) {
      bool same = (std::isnan(r) && std::isnan(g)) || r == g;  // NaN matches NaN, inf its own sign
      abs_err = rel_err = same ? 0 : std::numeric_limits<double>::infinity();
      ok = same;
    } else {
      abs_err = std::fabs(g - r);
      rel_err = abs_err == 0 ? 0 : abs_err / std::max(std::fabs(r), kRelFloor);
      ok = abs_err <= atol + rtol * std::fabs(r);
      dot += r * g;
      nr += r * r;
      ng += g * g;
    }
    d.within += ok;
    d.max_abs = std::max(d.max_abs, abs_err);
    d.max_rel = std::max(d.max_rel, rel_err);
    sum_abs += abs_err;
    sum_rel += rel_err;
  }
  if (d.n) {
    d.mean_abs = sum_abs / d.n;
    d.mean_rel = sum_rel / d.n;
  }
  if (nr == 0 && ng == 0) d.cosine = 1;  // both all zero (or nothing finite): identical direction
  else if (nr == 0 || ng == 0) d.cosine = 0;
  else d.cosine = dot / (std::sqrt(nr) * std::sqrt(ng));
  return d;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string percent(const Diff& d) { return d.n ? fmt("%.2f%%", 100.0 * d.within / d.n) : "100.00%"; }

// Copies every tensor the engine reports; the listener's memory is valid only during the call.
class Recorder : public TensorListener {
 public:
  struct Entry {
    int layer;
    HostTensor tensor;
  };
  void on_tensor(int layer_index, const char* tensor_name, DataType dtype, const std::vector<int64_t>& dims,
                 const void* data) noexcept override {
    try {
      auto h = HostTensor::zeros(tensor_name, dtype, dims);
      if (!h.ok() || dtype == DataType::kString) return;
      if (data && !h->data.empty()) std::memcpy(h->data.data(), data, h->data.size());
      entries.push_back({layer_index, std::move(h).value()});
    } catch (...) {
      dropped = true;  // out of memory: the table says so rather than throwing through the engine
    }
  }
  std::vector<Entry> entries;
  bool dropped = false;
};

// Inputs go to the engine's memory (device memory for cuda engines) and outputs come back.
Result<std::vector<HostTensor>> run_engine(const Engine& engine, const std::vector<HostTensor>& inputs,
                                           TensorListener* listener) {
  auto ctx = engine.create_execution_context();
  if (!ctx.ok()) return ctx.status();
  ExecutionContext& c = **ctx;
  auto io = IoBuffers::create(engine, c);
  if (!io.ok()) return io.status();
  Status s = (*io)->upload_all(inputs);
  if (!s.ok()) return s;
  c.set_tensor_listener(listener);
  s = c.enqueue((*io)->stream());
  if (!s.ok()) return s;
  return (*io)->download_all();
}

bool is_open(const TensorInfo& in) {
  if (!in.rank_known) return true;
  for (int64_t d : in.shape)
    if (d < 0) return true;
  return false;
}

// The engine under test: --engine, or one built from the model with the build flags. Open
// inputs that no shape flag names are fixed at their .npy shape, else at 1 (as `ingot run`).
Result<std::shared_ptr<Engine>> get_engine(const CompareOptions& opt, const ReferenceModel& model,
                                           const std::map<std::string, HostTensor>& loaded) {
  Runtime runtime;
  if (!opt.engine_file.empty()) return runtime.deserialize_file(opt.engine_file);
  BuilderConfig config = opt.config;
  OptimizationProfile profile;
  std::string err;
  if (!opt.shapes.to_profile(profile, err)) return Status(StatusCode::kInvalidArgument, err);
  std::set<std::string> named;
  for (const auto& e : profile.entries()) named.insert(e.input);
  bool any_open = false;
  for (const TensorInfo& in : model.inputs()) {
    if (!is_open(in)) continue;
    any_open = true;
    if (named.count(in.name)) continue;
    std::vector<int64_t> dims;
    auto f = loaded.find(in.name);
    if (f != loaded.end()) {
      dims = f->second.shape;
    } else {
      if (!in.rank_known)
        return Status(StatusCode::kInvalidArgument, "input '" + in.name + "' has unknown rank: give --shapes " + in.name + ":...");
      for (int64_t d : in.shape) dims.push_back(d >= 0 ? d : 1);
    }
    profile.set_dimensions(in.name, dims, dims, dims);
  }
  if (any_open || !profile.entries().empty()) config.profiles.push_back(profile);
  Builder builder;
  auto bytes = builder.build_serialized(opt.model, config);
  if (!bytes.ok()) return bytes.status();
  return runtime.deserialize(bytes->data(), bytes->size());
}

// Inputs in model order: .npy files first, then random ones (one generator, model order, so
// the same seed gives the same bytes as `ingot run`). Open dims that no flag or file fixes run
// at the engine's opt dims.
Result<std::vector<HostTensor>> make_inputs(const CompareOptions& opt, const ReferenceModel& model,
                                            const Engine& engine, std::map<std::string, HostTensor>& loaded) {
  std::mt19937_64 rng(opt.seed);
  std::vector<HostTensor> inputs;
  for (const TensorInfo& in : model.inputs()) {
    auto f = loaded.find(in.name);
    if (f != loaded.end()) {
      inputs.push_back(f->second);
      continue;
    }
    TensorInfo info = in;
    std::vector<int64_t> dims, opt_dims;
    if (is_open(in) && !opt.shapes.run_dims(in.name, dims) &&
        engine.profile_dimensions(0, in.name, nullptr, &opt_dims, nullptr).ok()) {
      info.shape = opt_dims;
      info.rank_known = true;
    }
    auto t = random_input(info, opt.shapes, rng);
    if (!t.ok()) return Status(t.status().code(), "input '" + in.name + "': " + t.status().message());
    t->name = in.name;
    inputs.push_back(std::move(t).value());
  }
  return inputs;
}

void print_diff(const Diff& d, std::ostream& os) {
  if (!d.problem.empty()) {
    os << "    " << d.problem << "\n";
    return;
  }
  os << "    max abs " << fmt("%.4g", d.max_abs) << "  mean abs " << fmt("%.4g", d.mean_abs) << "  max rel "
     << fmt("%.4g", d.max_rel) << "  mean rel " << fmt("%.4g", d.mean_rel) << "  cosine " << fmt("%.6f", d.cosine)
     << "\n    within tolerance " << percent(d) << " (" << d.within << "/" << d.n << ")\n";
}

// The per-layer table, one row per engine tensor in execution order. Returns false when a step
// that counts toward the verdict (the first `check_layers` steps; none without the flag) leaves
// tolerance.
bool compare_layers(const CompareOptions& opt, const Engine& engine, const Recorder& rec,
                    const std::vector<HostTensor>& ref_all, std::ostream& os) {
  std::map<std::string, const HostTensor*> ref;
  for (const HostTensor& t : ref_all) ref[t.name] = &t;
  const auto& layers = engine.layers();
  long long limit = opt.check_layers >= 0 ? opt.check_layers : static_cast<long long>(layers.size());
  std::vector<std::vector<std::string>> rows = {{"step", "layer", "op", "tensor", "shape", "max abs", "max rel",
                                                 "cosine", "within", ""}};
  const Recorder::Entry* first_bad = nullptr;
  int compared = 0, missing = 0;
  for (const Recorder::Entry& e : rec.entries) {
    if (e.layer >= limit) break;
    bool known_layer = e.layer >= 0 && e.layer < static_cast<int>(layers.size());
    std::vector<std::string> row = {std::to_string(e.layer), known_layer ? layers[e.layer].name : "?",
                                    known_layer ? layers[e.layer].op : "?", e.tensor.name,
                                    dims_to_string(e.tensor.shape)};
    auto it = ref.find(e.tensor.name);
    if (it == ref.end()) {
      ++missing;
      row.insert(row.end(), {"-", "-", "-", "-", "not in the reference (skipped)"});
    } else {
      Diff d = diff(*it->second, e.tensor, opt.atol, opt.rtol);
      ++compared;
      if (!d.pass() && !first_bad && known_layer) first_bad = &e;
      if (!d.problem.empty()) row.insert(row.end(), {"-", "-", "-", "-", "FAIL: " + d.problem});
      else
        row.insert(row.end(), {fmt("%.3g", d.max_abs), fmt("%.3g", d.max_rel), fmt("%.6f", d.cosine), percent(d),
                               d.pass() ? "" : "FAIL"});
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  os << "\nper-layer comparison (" << (opt.check_layers >= 0 ? "first " + std::to_string(limit) + " steps" : "every step")
     << ", in execution order):\n";
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t c = 0; c < r.size(); ++c) {
      bool right = c == 0 || (c >= 5 && c <= 8);  // numbers right-aligned
      std::string pad(width[c] - r[c].size(), ' ');
      line += " " + (right ? pad + r[c] : r[c] + (c + 1 < r.size() ? pad : ""));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  if (rec.dropped) os << "  (some tensors could not be copied: out of memory)\n";
  os << "  " << compared << " tensors compared, " << missing << " not in the reference\n";
  if (first_bad) {
    const LayerDesc& l = layers[first_bad->layer];
    os << "first layer out of tolerance: step " << first_bad->layer << " '" << l.name << "' (" << l.op
       << ", tactic " << l.tactic << ") producing '" << first_bad->tensor.name << "'";
    std::string fused;
    for (const auto& o : l.origins)
      if (!o.empty()) fused += " " + o;
    if (l.origins.size() > 1) os << ", fusing " << l.origins.size() << " model nodes" << (fused.empty() ? "" : ":" + fused);
    os << "\n";
  } else {
    os << "every compared layer is within tolerance\n";
  }
  return !(first_bad && opt.check_layers >= 0);
}

// Parses the command line; returns -1 to go on, else the exit code.
int parse(const std::vector<std::string>& args, CompareOptions& opt) {
  std::string err;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    auto value = [&]() {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot compare: " << a << " needs a value\n";
        return false;
      }
      v = args[++i];
      return true;
    };
    auto as_int = [&](long long lo, long long hi, long long& out) { return parse_int_arg("ingot compare", a, v, lo, hi, out); };
    auto as_tol = [&](double& out) {
      try {
        size_t used = 0;
        out = std::stod(v, &used);
        if (used != v.size() || !(out >= 0) || std::isinf(out)) throw std::out_of_range("");
        return true;
      } catch (...) {
        std::cerr << "ingot compare: " << a << " needs a non-negative number, got '" << v << "'\n";
        return false;
      }
    };
    long long n = 0;
    if (a == "-h" || a == "--help") {
      compare_help();
      return 0;
    } else if (a == "--engine") {
      if (!value()) return kUsage;
      opt.engine_file = v;
    } else if (a == "--backend") {
      if (!value()) return kUsage;
      if (v == "cpu") opt.config.backend = BackendKind::kCpu;
      else if (v == "cuda") opt.config.backend = BackendKind::kCuda;
      else {
        std::cerr << "ingot compare: unknown backend '" << v << "' (cpu, cuda)\n";
        return kUsage;
      }
    } else if (a == "--shapes" || a == "--min-shapes" || a == "--opt-shapes" || a == "--max-shapes") {
      if (!value()) return kUsage;
      if (!opt.shapes.parse(a, v, err)) {
        std::cerr << "ingot compare: " << err << "\n";
        return kUsage;
      }
    } else if (BuildFlag f = parse_build_flag(args, i, opt.config, err); f != BuildFlag::kNotMine) {
      if (f == BuildFlag::kError) {
        std::cerr << "ingot compare: " << err << "\n";
        return kUsage;
      }
      opt.build_flag_given = true;
    } else if (a == "--load-inputs") {
      if (!value()) return kUsage;
      if (!parse_pairs(v, opt.input_files, err)) {
        std::cerr << "ingot compare: --load-inputs: " << err << "\n";
        return kUsage;
      }
    } else if (a == "--seed") {
      if (!value() || !as_int(0, std::numeric_limits<long long>::max(), n)) return kUsage;
      opt.seed = static_cast<uint64_t>(n);
    } else if (a == "--atol") {
      if (!value() || !as_tol(opt.atol)) return kUsage;
    } else if (a == "--rtol") {
      if (!value() || !as_tol(opt.rtol)) return kUsage;
    } else if (a == "--all-layers") {
      opt.all_layers = true;
    } else if (a == "--check-layers") {
      if (!value() || !as_int(0, std::numeric_limits<int>::max(), n)) return kUsage;
      opt.check_layers = n;
      opt.all_layers = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ingot compare: unknown option '" << a << "' (see ingot compare --help)\n";
      return kUsage;
    } else if (opt.model.empty()) {
      opt.model = a;
    } else {
      std::cerr << "ingot compare: unexpected argument '" << a << "'\n";
      return kUsage;
    }
  }
  if (opt.model.empty()) {
    std::cerr << "ingot compare: no model given (see ingot compare --help)\n";
    return kUsage;
  }
  if (!opt.engine_file.empty() && (opt.build_flag_given || !opt.shapes.min.empty() || !opt.shapes.max.empty())) {
    std::cerr << "ingot compare: build flags (precision, --opt-level, --disable-pass, --min/--max-shapes, ...) do not "
                 "apply with --engine\n";
    return kUsage;
  }
  return -1;
}

int code_of(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ||
                 s.code() == StatusCode::kOutOfRange
             ? kUsage
             : kFail;
}

}  // namespace

void compare_help() {
  std::cout << "usage: ingot compare MODEL.onnx [options]\n\n"
               "Runs the fp32 reference interpreter (the unoptimized graph) and an engine on the same\n"
               "inputs and reports, per output, max/mean absolute and relative error, cosine similarity\n"
               "and the share of elements with |engine - ref| <= atol + rtol * |ref|. Exit code 0 when\n"
               "every output is within tolerance, 1 when one is not, 2 on usage errors.\n\n"
               "options:\n"
               "  --engine FILE               compare this engine instead of building one from MODEL\n"
               "  --backend cpu|cuda          backend to build for (default cpu)\n"
               "  --shapes name:1x3x224x224   run (and build) at these dims (comma-separated list)\n"
               "  --min-shapes/--opt-shapes/--max-shapes name:DIMS  the build's profile; runs at opt\n"
               "build flags (when compare builds the engine; as ingot build):\n"
            << build_flags_help() <<
               "  --load-inputs name:f.npy    read inputs from .npy files (others are random)\n"
               "  --seed N                    seed for random inputs (default 1, as ingot run)\n"
               "  --atol A  --rtol R          tolerances (default 1e-5 each)\n"
               "  --all-layers                also compare every tensor the engine's steps produce with\n"
               "                              the interpreter's value of the same name, and name the\n"
               "                              first step out of tolerance (informational)\n"
               "  --check-layers N            like --all-layers for the first N steps, and those steps\n"
               "                              count toward PASS/FAIL\n";
}

int compare_command(const std::vector<std::string>& args) {
  CompareOptions opt;
  int rc = parse(args, opt);
  if (rc >= 0) return rc;
  auto model = ReferenceModel::load(opt.model);
  if (!model.ok()) {
    std::cerr << "ingot compare: " << model.status().to_string() << "\n";
    return code_of(model.status());
  }
  const ReferenceModel& ref = **model;
  for (const ShapeMap* m : {&opt.shapes.shapes, &opt.shapes.min, &opt.shapes.opt, &opt.shapes.max})
    for (const auto& [name, dims] : *m) {
      bool known = false;
      for (const auto& in : ref.inputs()) known |= in.name == name;
      if (!known) {
        std::cerr << "ingot compare: a shape flag names '" << name << "', which is not an input of the model\n";
        return kUsage;
      }
    }
  std::map<std::string, HostTensor> loaded;
  for (const auto& [name, file] : opt.input_files) {
    bool known = false;
    for (const auto& in : ref.inputs()) known |= in.name == name;
    if (!known) {
      std::cerr << "ingot compare: --load-inputs names '" << name << "', which is not an input of the model\n";
      return kUsage;
    }
    auto t = load_npy(file);
    if (!t.ok()) {
      std::cerr << "ingot compare: input '" << name << "': " << t.status().message() << "\n";
      return kUsage;
    }
    t->name = name;
    loaded[name] = std::move(t).value();
  }
  auto engine = get_engine(opt, ref, loaded);
  if (!engine.ok()) {
    std::cerr << "ingot compare: " << engine.status().to_string() << "\n";
    return code_of(engine.status());
  }
  const Engine& eng = **engine;
  auto inputs = make_inputs(opt, ref, eng, loaded);
  if (!inputs.ok()) {
    std::cerr << "ingot compare: " << inputs.status().message() << "\n";
    return code_of(inputs.status());
  }

  std::cout << "model " << opt.model << ": reference interpreter (opset " << ref.opset() << ", " << ref.num_nodes()
            << " nodes) vs " << eng.backend() << " engine ("
            << (opt.engine_file.empty() ? "built now" : opt.engine_file) << ", " << eng.layers().size()
            << " steps)\ntolerance: |engine - ref| <= " << opt.atol << " + " << opt.rtol << " * |ref|\ninputs:\n";
  for (const HostTensor& t : *inputs) summarize(t, std::cout);

  auto ref_outs = opt.all_layers ? ref.run_all(*inputs) : ref.run(*inputs);
  if (!ref_outs.ok()) {
    std::cerr << "ingot compare: reference: " << ref_outs.status().to_string() << "\n";
    return code_of(ref_outs.status());
  }
  Recorder rec;
  auto eng_outs = run_engine(eng, *inputs, opt.all_layers ? &rec : nullptr);
  if (!eng_outs.ok()) {
    std::cerr << "ingot compare: engine: " << eng_outs.status().to_string() << "\n";
    return code_of(eng_outs.status());
  }

  bool pass = true;
  std::cout << "outputs:\n";
  for (const TensorInfo& out : ref.outputs()) {
    const HostTensor* r = nullptr;
    const HostTensor* g = nullptr;
    for (const HostTensor& t : *ref_outs) if (t.name == out.name) r = &t;
    for (const HostTensor& t : *eng_outs) if (t.name == out.name) g = &t;
    if (!r || !g) {
      std::cout << "  " << out.name << "  FAIL\n    " << (r ? "the engine has no output of this name" : "the reference did not compute it") << "\n";
      pass = false;
      continue;
    }
    Diff d = diff(*r, *g, opt.atol, opt.rtol);
    pass &= d.pass();
    std::cout << "  " << out.name << "  " << data_type_name(g->dtype) << dims_to_string(g->shape) << "  "
              << (d.pass() ? "PASS" : "FAIL") << "\n";
    print_diff(d, std::cout);
  }
  for (const HostTensor& g : *eng_outs) {
    bool known = false;
    for (const TensorInfo& out : ref.outputs()) known |= out.name == g.name;
    if (!known) {
      std::cout << "  " << g.name << "  FAIL\n    the model has no output of this name\n";
      pass = false;
    }
  }
  if (opt.all_layers) pass &= compare_layers(opt, eng, rec, *ref_outs, std::cout);
  std::cout << (pass ? "PASS" : "FAIL") << ": " << (pass ? "every output within tolerance" : "outside tolerance")
            << " (atol " << opt.atol << ", rtol " << opt.rtol << ")\n";
  return pass ? 0 : kFail;
}

}  // namespace ingot::tools
