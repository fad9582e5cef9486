// Copyright ingot authors. Apache-2.0.
#include "run_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "benchmark.h"
#include "device_io.h"
#include "finite_check.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "ingot/reference.h"
#include "inputs.h"
#include "npy.h"
#include "options.h"

namespace ingot::tools {

namespace {

struct RunOptions {
  std::string model;
  std::string backend = "cpu";
  ShapeOptions shapes;                                 // --shapes name:1x3x224x224
  int profile = 0;                                     // --profile-index N
  bool reference = false;                              // --reference: the graph interpreter
  bool verbose = false;
  std::map<std::string, std::string> input_files;      // --load-inputs name:file.npy
  std::string save_outputs;                            // --save-outputs DIR
  bool check_finite = false;                           // --check-finite
  std::string onnx;                                    // --onnx FILE: the model an engine was built from
  BuilderConfig build;                                 // builder flags for an .onnx built on the fly
  bool build_flag_given = false;
  uint64_t seed = 1;
  BenchmarkOptions bench;
};

// What `run` drives: the graph interpreter (--reference) or an engine.
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual Result<std::vector<HostTensor>> run(const std::vector<HostTensor>& inputs) = 0;
  /// A run with `listener` seeing every step's outputs (engines only; the interpreter: nullptr).
  virtual Result<std::vector<HostTensor>> run_listened(const std::vector<HostTensor>&, TensorListener*) {
    return Status(StatusCode::kUnsupported, "the reference interpreter has no steps to listen to");
  }
  virtual void describe(std::ostream& os) const = 0;
  virtual void verbose(std::ostream& os) const {}
  /// The engine behind the runner; nullptr for the interpreter.
  virtual std::shared_ptr<Engine> engine() const { return nullptr; }
};

class ReferenceRunner : public ModelRunner {
 public:
  explicit ReferenceRunner(std::unique_ptr<ReferenceModel> m) : m_(std::move(m)) {}
  const std::vector<TensorInfo>& inputs() const override { return m_->inputs(); }
  Result<std::vector<HostTensor>> run(const std::vector<HostTensor>& in) override { return m_->run(in); }
  void describe(std::ostream& os) const override {
    os << "reference interpreter (opset " << m_->opset() << ", " << m_->num_nodes() << " nodes)";
  }

 private:
  std::unique_ptr<ReferenceModel> m_;
};

class EngineRunner : public ModelRunner {
 public:
  static Result<std::unique_ptr<EngineRunner>> create(std::shared_ptr<Engine> engine, const ShapeOptions& shapes,
                                                      int profile) {
    auto r = std::unique_ptr<EngineRunner>(new EngineRunner());
    r->engine_ = std::move(engine);
    auto ctx = r->engine_->create_execution_context();
    if (!ctx.ok()) return ctx.status();
    r->ctx_ = std::move(ctx).value();
    Status ps = r->ctx_->set_optimization_profile(profile);
    if (!ps.ok()) return ps;
    auto io = IoBuffers::create(*r->engine_, *r->ctx_);
    if (!io.ok()) return io.status();
    r->io_ = std::move(io).value();
    for (const IoTensorDesc& d : r->engine_->io_tensors()) {
      if (!d.is_input) continue;
      TensorInfo t;
      t.name = d.name;
      t.dtype = d.dtype;
      t.shape = d.shape;
      t.dim_names = d.dim_names;
      std::vector<int64_t> dims;
      bool open = false;
      for (int64_t x : d.shape) open |= x < 0;
      // Open dims run at --shapes, else at the profile's opt.
      if (open && !shapes.run_dims(d.name, dims)) {
        std::vector<int64_t> opt;
        if (r->engine_->profile_dimensions(profile, d.name, nullptr, &opt, nullptr).ok()) t.shape = opt;
      }
      r->inputs_.push_back(t);
    }
    return r;
  }
  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  // Inputs go to the engine's memory (device memory for cuda engines), outputs come back.
  Result<std::vector<HostTensor>> run(const std::vector<HostTensor>& in) override {
    Status s = io_->upload_all(in);
    if (!s.ok()) return s;
    s = ctx_->enqueue(io_->stream());
    if (!s.ok()) return s;
    return io_->download_all();
  }
  Result<std::vector<HostTensor>> run_listened(const std::vector<HostTensor>& in, TensorListener* listener) override {
    ctx_->set_tensor_listener(listener);
    auto out = run(in);
    ctx_->set_tensor_listener(nullptr);
    return out;
  }
  void describe(std::ostream& os) const override {
    os << engine_->backend() << " engine (" << engine_->layers().size() << " steps)";
  }
  std::shared_ptr<Engine> engine() const override { return engine_; }
  void verbose(std::ostream& os) const override {
    MemoryFigures m = engine_->memory();
    os << "memory: arena " << human_bytes(m.arena_bytes) << " per context (lifetime lower bound "
       << human_bytes(m.lower_bound_bytes) << "), weights " << human_bytes(m.weight_bytes) << " shared, workspace "
       << human_bytes(m.workspace_bytes) << "\nsteps:\n";
    for (const LayerDesc& l : engine_->layers()) {
      os << "  " << l.op << " '" << l.name << "'  tactic " << l.tactic;
      if (l.origins.size() > 1) {
        os << "  fuses";
        for (const auto& o : l.origins) os << " " << o;
      }
      os << "\n";
    }
  }

 private:
  EngineRunner() = default;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
  std::unique_ptr<IoBuffers> io_;  // after ctx_: freed first
  std::vector<TensorInfo> inputs_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// .engine: load it. .onnx: the interpreter with --reference, else build an engine on the fly,
// with open dims fixed at --shapes (or 1).
Result<std::unique_ptr<ModelRunner>> open_model(const RunOptions& opt, const std::map<std::string, HostTensor>& loaded) {
  if (ends_with(opt.model, ".engine")) {
    Runtime runtime;
    start_device_context();  // the load time below excludes the CUDA context's creation
    auto t0 = std::chrono::steady_clock::now();
    auto e = runtime.deserialize_file(opt.model);
    if (!e.ok()) return e.status();
    std::cout << "engine load: " << std::fixed << std::setprecision(1)
              << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
              << " ms (read, deserialize, weights to the device)\n";
    std::cout.unsetf(std::ios::floatfield);
    auto r = EngineRunner::create(std::move(e).value(), opt.shapes, opt.profile);
    if (!r.ok()) return r.status();
    return std::unique_ptr<ModelRunner>(std::move(r).value());
  }
  auto model = ReferenceModel::load(opt.model);
  if (!model.ok()) return model.status();
  for (const auto& m : {&opt.shapes.shapes, &opt.shapes.opt})
    for (const auto& [name, dims] : *m) {
      bool known = false;
      for (const auto& in : (*model)->inputs()) known |= in.name == name;
      if (!known)
        return Status(StatusCode::kInvalidArgument, "--shapes names '" + name + "', which is not an input of the model");
    }
  if (opt.reference) return std::unique_ptr<ModelRunner>(new ReferenceRunner(std::move(model).value()));
  BuilderConfig config = opt.build;
  OptimizationProfile profile;
  bool any_open = false;
  for (const TensorInfo& in : (*model)->inputs()) {
    bool open = !in.rank_known;
    for (int64_t d : in.shape) open |= d < 0;
    if (!open) continue;
    any_open = true;
    std::vector<int64_t> dims;
    auto file = loaded.find(in.name);
    if (file != loaded.end()) {
      dims = file->second.shape;
    } else if (!opt.shapes.run_dims(in.name, dims)) {
      if (!in.rank_known)
        return Status(StatusCode::kInvalidArgument, "input '" + in.name + "' has unknown rank: give --shapes " + in.name + ":...");
      for (int64_t d : in.shape) dims.push_back(d >= 0 ? d : 1);
    }
    profile.set_dimensions(in.name, dims, dims, dims);
  }
  if (any_open) config.profiles.push_back(profile);
  config.backend = opt.backend == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
  Builder builder;
  auto bytes = builder.build_serialized(opt.model, config);
  if (!bytes.ok()) return bytes.status();
  Runtime runtime;
  auto e = runtime.deserialize(bytes->data(), bytes->size());
  if (!e.ok()) return e.status();
  auto r = EngineRunner::create(std::move(e).value(), opt.shapes, opt.profile);
  if (!r.ok()) return r.status();
  return std::unique_ptr<ModelRunner>(std::move(r).value());
}

}  // namespace

void run_help() {
  std::cout << "usage: ingot run MODEL.engine|MODEL.onnx [options]\n\n"
               "Runs an engine (an .onnx is built into one on the fly) and prints each output's name,\n"
               "dtype, shape and statistics.\n\n"
               "options:\n"
               "  --backend cpu|cuda          backend to build for when given an .onnx (default cpu)\n"
               "  --reference                 run an .onnx on the graph interpreter instead of an engine\n"
               "  --verbose                   print memory figures and the engine's steps\n"
               "  --shapes name:1x3x224x224   shapes for inputs with open dims (comma-separated list)\n"
               "  --load-inputs name:f.npy    read inputs from .npy files (others are random)\n"
               "  --save-outputs DIR          write each output to DIR/<name>.npy (DIR is made when missing)\n"
               "  --check-finite              fail when an output holds NaN or Inf; for engines, one more run\n"
               "                              names every step whose outputs hold them (the first is where\n"
               "                              they start) and which rows of the leading (batch) dim\n"
               "  --seed N                    seed for random inputs (default 1)\n"
               "  --profile-index N           run in the engine's optimization profile N (default 0)\n"
               "  --onnx MODEL.onnx           the model an engine was built from: its weight shapes give the\n"
               "                              profile's FLOPs and bytes of Conv steps and of every weight read\n"
               "\nbuilding (an .onnx is built into an engine first; as ingot build):\n"
            << build_flags_help() << "\nbenchmarking (engines; the interpreter takes only --iterations):\n";
  benchmark_help(std::cout);
}

int run_command(const std::vector<std::string>& args) {
  RunOptions opt;
  std::string err;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot run: " << a << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    FlagParse bench = parse_benchmark_flag(args, i, opt.bench, err);
    if (bench == FlagParse::kError) {
      std::cerr << "ingot run: " << err << "\n";
      return 2;
    }
    if (bench == FlagParse::kOk) continue;
    BuildFlag bf = parse_build_flag(args, i, opt.build, err);
    if (bf == BuildFlag::kError) {
      std::cerr << "ingot run: " << err << "\n";
      return 2;
    }
    if (bf == BuildFlag::kOk) {
      opt.build_flag_given = true;
      continue;
    }
    if (a == "-h" || a == "--help") {
      run_help();
      return 0;
    } else if (a == "--backend") {
      if (!value(opt.backend)) return 2;
    } else if (a == "--reference") {
      opt.reference = true;
    } else if (a == "--verbose" || a == "-v") {
      opt.verbose = true;
    } else if (a == "--profile-index") {
      if (!value(v)) return 2;
      if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos) {
        std::cerr << "ingot run: --profile-index needs a profile number, got '" << v << "'\n";
        return 2;
      }
      opt.profile = std::stoi(v);
      opt.bench.profile = opt.profile;
    } else if (a == "--shapes" || a == "--opt-shapes") {
      if (!value(v)) return 2;
      if (!opt.shapes.parse(a, v, err)) {
        std::cerr << "ingot run: " << err << "\n";
        return 2;
      }
    } else if (a == "--load-inputs") {
      if (!value(v)) return 2;
      if (!parse_pairs(v, opt.input_files, err)) {
        std::cerr << "ingot run: --load-inputs: " << err << "\n";
        return 2;
      }
    } else if (a == "--check-finite") {
      opt.check_finite = true;
    } else if (a == "--save-outputs") {
      if (!value(opt.save_outputs)) return 2;
    } else if (a == "--onnx") {
      if (!value(opt.onnx)) return 2;
    } else if (a == "--seed") {
      if (!value(v)) return 2;
      try {
        size_t used = 0;
        long long n = std::stoll(v, &used);
        if (used != v.size() || n < 0) throw std::out_of_range("");
        opt.seed = static_cast<uint64_t>(n);
      } catch (...) {
        std::cerr << "ingot run: " << a << " needs an integer >= 0, got '" << v << "'\n";
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ingot run: unknown option '" << a << "' (see ingot run --help)\n";
      return 2;
    } else if (opt.model.empty()) {
      opt.model = a;
    } else {
      std::cerr << "ingot run: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (opt.model.empty()) {
    std::cerr << "ingot run: no model given (see ingot run --help)\n";
    return 2;
  }
#ifdef INGOT_WITH_CUDA
  const char* available = "cpu, cuda";
  bool backend_ok = opt.backend == "cpu" || opt.backend == "cuda";
#else
  const char* available = "cpu";
  bool backend_ok = opt.backend == "cpu";
#endif
  if (opt.build_flag_given && (ends_with(opt.model, ".engine") || opt.reference)) {
    std::cerr << "ingot run: builder flags (precision, --opt-level, --timing-cache, ...) apply only when an .onnx is "
                 "built into an engine\n";
    return 2;
  }
  if (!opt.onnx.empty() && !ends_with(opt.model, ".engine")) {
    std::cerr << "ingot run: --onnx names the model an engine was built from; '" << opt.model
              << "' is not an .engine (an .onnx gives its shapes itself)\n";
    return 2;
  }
  if (!opt.onnx.empty() && !std::ifstream(opt.onnx)) {
    std::cerr << "ingot run: --onnx: cannot open '" << opt.onnx << "'\n";
    return 2;
  }
  if (!backend_ok) {
    std::cerr << "ingot run: backend '" << opt.backend << "' is not available in this build (available: " << available
              << ")\n";
    return 2;
  }
  // Inputs from files first: their shapes size the engine built for an .onnx.
  std::map<std::string, HostTensor> loaded;
  for (const auto& [name, file] : opt.input_files) {
    auto t = load_npy(file);
    if (!t.ok()) {
      std::cerr << "ingot run: input '" << name << "': " << t.status().message() << "\n";
      return 2;
    }
    t->name = name;
    loaded[name] = std::move(t).value();
  }
  auto runner = open_model(opt, loaded);
  if (!runner.ok()) {
    std::cerr << "ingot run: " << runner.status().to_string() << "\n";
    return runner.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  ModelRunner& model = **runner;
  if (opt.bench.engine_only_given && !model.engine()) {
    std::cerr << "ingot run: the reference interpreter takes only --iterations of the benchmarking options\n";
    return 2;
  }
  for (const auto& [name, file] : opt.input_files) {
    bool known = false;
    for (const auto& in : model.inputs()) known |= in.name == name;
    if (!known) {
      std::cerr << "ingot run: --load-inputs names '" << name << "', which is not an input of the model\n";
      return 2;
    }
  }
  std::mt19937_64 rng(opt.seed);
  std::vector<HostTensor> inputs;
  std::cout << "model " << opt.model << ": ";
  model.describe(std::cout);
  std::cout << "\ninputs:\n";
  for (const TensorInfo& info : model.inputs()) {
    auto f = loaded.find(info.name);
    Result<HostTensor> t = f != loaded.end() ? Result<HostTensor>(f->second) : random_input(info, opt.shapes, rng);
    if (!t.ok()) {
      std::cerr << "ingot run: input '" << info.name << "': " << t.status().message() << "\n";
      return 2;
    }
    t->name = info.name;
    summarize(*t, std::cout);
    inputs.push_back(std::move(t).value());
  }
  Result<std::vector<HostTensor>> outs = Status(StatusCode::kInternal, "not run");
  // Engines benchmark separately (below); the interpreter repeats its run --iterations times.
  int runs = model.engine() || !opt.bench.iterations_given ? 1 : opt.bench.iterations;
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < runs; ++it) {
    outs = model.run(inputs);
    if (!outs.ok()) {
      std::cerr << "ingot run: " << outs.status().to_string() << "\n";
      return outs.status().code() == StatusCode::kOutOfRange ? 2 : 1;
    }
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / runs;
  std::cout << "outputs:\n";
  for (const HostTensor& t : *outs) summarize(t, std::cout);
  if (opt.verbose) model.verbose(std::cout);
  if (model.engine() && opt.bench.requested()) {
    KnownTensors known;
    if (ends_with(opt.model, ".onnx")) known = static_tensor_shapes(opt.model);
    if (!opt.onnx.empty() && (opt.bench.dump_profile || !opt.bench.export_profile.empty())) {
      known = static_tensor_shapes(opt.onnx);
      if (known.empty())
        std::cout << "note: --onnx '" << opt.onnx << "' could not be inspected; FLOPs and bytes come from the run\n";
    }
    Status s = run_benchmark(model.engine(), inputs, opt.bench, known, std::cout);
    if (!s.ok()) {
      std::cerr << "ingot run: " << s.to_string() << "\n";
      return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
  } else {
    std::cout << "wall time per run: " << std::fixed << std::setprecision(3) << ms << " ms (" << runs << " run"
              << (runs > 1 ? "s" : "") << ")\n";
  }
  if (!opt.save_outputs.empty()) {
    // Like trtexec's and Polygraphy's output options, the folder is made when missing.
    std::error_code ec;
    std::filesystem::create_directories(opt.save_outputs, ec);
    if (ec) {
      std::cerr << "ingot run: cannot create the --save-outputs folder '" << opt.save_outputs << "': " << ec.message()
                << "\n";
      return 1;
    }
    for (const HostTensor& t : *outs) {
      std::string name = t.name;
      std::replace(name.begin(), name.end(), '/', '_');
      Status s = save_npy(opt.save_outputs + "/" + name + ".npy", t);
      if (!s.ok()) {
        std::cerr << "ingot run: " << s.to_string() << "\n";
        return 1;
      }
    }
  }
  if (opt.check_finite) {
    // Like Polygraphy's --validate, with every step of an engine marked as an output.
    bool bad = false;
    for (const HostTensor& t : *outs) {
      const NonFinite f = scan_non_finite(t);
      if (!f.any()) continue;
      bad = true;
      std::cout << "output " << t.name << ": " << f.nan << " NaN, " << f.inf << " Inf of " << f.numel;
      if (f.rows > 0)
        std::cout << " in rows " << index_ranges(f.bad_rows) << " (" << f.bad_rows.size() << " of " << f.rows << ")";
      std::cout << "\n";
    }
    if (model.engine()) {
      FiniteScan scan;
      auto again = model.run_listened(inputs, &scan);
      if (!again.ok()) {
        std::cerr << "ingot run: --check-finite: " << again.status().to_string() << "\n";
        return 1;
      }
      print_finite_report(scan, *model.engine(), 12, std::cout);
    }
    if (bad) {
      std::cerr << "ingot run: --check-finite: an output holds NaN or Inf\n";
      return 1;
    }
    std::cout << "outputs are finite\n";
  }
  return 0;
}

}  // namespace ingot::tools
