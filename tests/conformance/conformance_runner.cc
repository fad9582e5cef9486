// Copyright ingot authors. Apache-2.0.
//
// Runs ONNX's node test suite (written by generate_node_data.py from the installed onnx
// package) through import → CPU reference backend and compares with the expected outputs.
// Every case ends as pass, fail (with the reason) or unsupported (with the reason); training
// cases are counted apart. Each case runs in a child process so a crash or a hang is a
// failure of that case, not of the run.
//
// With --expectations FILE, every case that does not pass must be listed there with its
// status; an unlisted failure is a regression (exit 1) and a listed case that now passes is
// reported so the file can be tightened. --write-expectations FILE rewrites the file.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef INGOT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "backend/cpu/executor.h"
#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/importer.h"

namespace fs = std::filesystem;
using namespace ingot;

namespace {

struct Outcome {
  std::string status;  // pass, fail, unsupported
  std::string reason;
};

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DataType t) {
  switch (t) {
    case DataType::kFloat64: return {1e-5, 1e-7};
    case DataType::kFloat32: return {1e-3, 1e-5};
    case DataType::kFloat16: return {1e-2, 1e-3};
    case DataType::kBFloat16: return {2e-2, 1e-2};
    default: return {0.13, 1e-3};  // fp8/fp4: one step of a 2-3 bit mantissa
  }
}

// Engines built with --fp16 (--bf16) compute in half precision through the whole model: their
// float outputs are judged as a user judges them, by direction (cosine >= 0.9999, issue 5's bar;
// 0.999 for bf16) and normwise relative error (<= 1e-2; 5e-2 for bf16), not element by element.
bool g_fp16 = false;
bool g_no_host_fallback = false;  // --no-host-fallback: a step on the CUDA host fallback fails the case
bool g_bf16 = false;  // --bf16: the same, with bf16 engines

std::string compare_reduced(const Tensor& got, const Tensor& want, const std::string& name) {
  double dot = 0, ng = 0, nw = 0, d2 = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;  // the same infinity (a masked score, say)
    if (!std::isfinite(g) && std::isfinite(w))
      return "output '" + name + "'[" + std::to_string(i) + "] = " + std::to_string(g) + ", expected " + std::to_string(w);
    dot += g * w;
    ng += g * g;
    nw += w * w;
    d2 += (g - w) * (g - w);
  }
  double cos = (ng == 0 && nw == 0) ? 1 : dot / std::sqrt(ng * nw);
  double rel = nw > 0 ? std::sqrt(d2 / nw) : std::sqrt(d2);
  // bf16 keeps 8 significant bits to fp16's 11: a looser bar.
  const double min_cos = g_bf16 ? 0.999 : 0.9999, max_rel = g_bf16 ? 0.05 : 0.01;
  if (cos >= min_cos && rel <= max_rel) return "";
  std::ostringstream os;
  os << "output '" << name << "': cosine " << cos << " (need >= " << min_cos << "), normwise relative error " << rel
     << " (need <= " << max_rel << ")";
  return os.str();
}

std::string compare(const Tensor& got, const Tensor& want, const std::string& name) {
  std::ostringstream os;
  if (got.dtype() != want.dtype()) {
    os << "output '" << name << "' dtype " << data_type_name(got.dtype()) << ", expected " << data_type_name(want.dtype());
    return os.str();
  }
  if (got.shape() != want.shape()) {
    os << "output '" << name << "' shape " << shape_to_string(got.shape()) << ", expected "
       << shape_to_string(want.shape());
    return os.str();
  }
  if (got.dtype() == DataType::kString) {
    for (int64_t i = 0; i < got.numel(); ++i)
      if (got.strings()[i] != want.strings()[i]) {
        os << "output '" << name << "'[" << i << "] = \"" << got.strings()[i] << "\", expected \"" << want.strings()[i] << "\"";
        return os.str();
      }
    return "";
  }
  if (is_float(got.dtype()) && (g_fp16 || g_bf16) && got.numel() > 0) return compare_reduced(got, want, name);
  if (is_float(got.dtype())) {
    Tolerance tol = tolerance_for(got.dtype());
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      double g = got.get_f64(i), w = want.get_f64(i);
      if (std::isnan(w) && std::isnan(g)) continue;
      if (std::isinf(w) && g == w) continue;
      double err = std::fabs(g - w);
      if (!(err <= tol.atol + tol.rtol * std::fabs(w))) {
        if (first < 0) first = i;
        ++bad;
        if (!(err <= worst)) worst = err;
      }
    }
    if (bad) {
      os << "output '" << name << "': " << bad << "/" << got.numel() << " elements outside rtol " << tol.rtol
         << " atol " << tol.atol << " (first at " << first << ": got " << got.get_f64(first) << ", expected "
         << want.get_f64(first) << "; max abs err " << worst << ")";
      return os.str();
    }
    return "";
  }
  for (int64_t i = 0; i < got.numel(); ++i)
    if (got.get_i64(i) != want.get_i64(i)) {
      os << "output '" << name << "'[" << i << "] = " << got.get_i64(i) << ", expected " << want.get_i64(i);
      return os.str();
    }
  return "";
}

Outcome classify(const Status& s) {
  if (s.code() == StatusCode::kUnsupported) return {"unsupported", s.message()};
  return {"fail", s.to_string()};
}

// How a case is executed.
enum class Mode { kInterpreter, kEngine, kEngineOptimized };
Mode g_mode = Mode::kInterpreter;
std::string g_backend = "cpu";

// Caller memory for an engine binding: host memory for CPU engines, device memory for CUDA.
class Binding {
 public:
  Binding(size_t bytes, bool device) : device_(device) {
#ifdef INGOT_WITH_CUDA
    if (device_) {
      if (cudaMalloc(&p_, bytes ? bytes : 1) != cudaSuccess) p_ = nullptr;
      return;
    }
#endif
    host_.resize(bytes ? bytes : 1);
    p_ = host_.data();
  }
  ~Binding() {
#ifdef INGOT_WITH_CUDA
    if (device_ && p_) cudaFree(p_);
#endif
  }
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;
  void* get() const { return p_; }
  bool upload(const void* src, size_t n) {
#ifdef INGOT_WITH_CUDA
    if (device_) return cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice) == cudaSuccess;
#endif
    if (n) std::memcpy(p_, src, n);
    return true;
  }
  static bool download(void* dst, const void* src, size_t n, bool device) {
#ifdef INGOT_WITH_CUDA
    if (device) return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost) == cudaSuccess;
#endif
    if (n) std::memcpy(dst, src, n);
    return true;
  }

 private:
  bool device_;
  void* p_ = nullptr;
  std::vector<uint8_t> host_;
};

class QuietLogger : public Logger {
 public:
  void log(Severity, const char*) noexcept override {}
};

// Builds an engine for the case (profile = the data set's input shapes), serializes, loads and
// runs it through the public API. Without optimization the outputs must equal the
// interpreter's bit for bit.
Result<std::vector<Tensor>> run_engine(const fs::path& dir, const ir::Graph& g, const std::map<std::string, Tensor>& feeds,
                                       bool optimize) {
  QuietLogger quiet;
  BuilderConfig config;
  config.optimization_level = optimize ? 3 : 0;
  config.fp16 = g_fp16;
  config.allow_host_fallback = !g_no_host_fallback;
  config.bf16 = g_bf16;
  const bool device = g_backend == "cuda";
  config.backend = device ? BackendKind::kCuda : BackendKind::kCpu;
  OptimizationProfile profile;
  bool any = false;
  for (const ir::Value* v : g.inputs()) {
    auto it = feeds.find(v->name());
    if (it == feeds.end()) continue;
    if (!v->shape().is_concrete()) {
      profile.set_dimensions(v->name(), it->second.shape(), it->second.shape(), it->second.shape());
      any = true;
    }
  }
  if (any) config.profiles.push_back(profile);
  Builder builder(quiet);
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, builder.build_serialized((dir / "model.onnx").string(), config));
  Runtime runtime(quiet);
  INGOT_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine, runtime.deserialize(bytes.data(), bytes.size()));
  INGOT_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  std::vector<std::unique_ptr<Binding>> bindings;
  // Strings bind as arrays of std::string in host memory, on every backend (they never live on
  // a device; string ops run in the CUDA backend's host fallback).
  std::map<std::string, Tensor> string_feeds;
  for (const auto& [name, t] : feeds) {
    if (t.dtype() == DataType::kString) {
      string_feeds[name] = t.clone();
      INGOT_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
      INGOT_RETURN_IF_ERROR(ctx->set_tensor_address(name, string_feeds[name].mutable_strings().data()));
      continue;
    }
    bindings.push_back(std::make_unique<Binding>(t.nbytes(), device));
    if (!bindings.back()->get() || !bindings.back()->upload(t.raw(), t.nbytes()))
      return internal_error("cannot stage input '", name, "'");
    INGOT_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
    INGOT_RETURN_IF_ERROR(ctx->set_tensor_address(name, bindings.back()->get()));
  }
  INGOT_RETURN_IF_ERROR(ctx->enqueue(nullptr));
#ifdef INGOT_WITH_CUDA
  if (device && cudaDeviceSynchronize() != cudaSuccess) return internal_error("cudaDeviceSynchronize failed");
#endif
  std::vector<Tensor> outs;
  for (const ir::Value* v : g.outputs()) {
    INGOT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx->tensor_shape(v->name()));
    const void* p = ctx->tensor_address(v->name());
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(v->dtype(), shape));
    if (t.dtype() == DataType::kString) {
      const std::string* src = static_cast<const std::string*>(p);
      if (t.numel() && !src) return internal_error("output '", v->name(), "' has no address");
      for (int64_t k = 0; k < t.numel(); ++k) t.mutable_strings()[static_cast<size_t>(k)] = src[k];
      outs.push_back(std::move(t));
      continue;
    }
    if (t.nbytes()) {
      if (!p) return internal_error("output '", v->name(), "' has no address");
      if (!Binding::download(t.mutable_raw(), p, t.nbytes(), device))
        return internal_error("cannot copy output '", v->name(), "' back");
    }
    outs.push_back(std::move(t));
  }
  return outs;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

Outcome run_case(const fs::path& dir) {
  auto model = onnx::import_model_file((dir / "model.onnx").string());
  if (!model.ok()) return classify(model.status());
  const ir::Graph& g = *model->graph;
  for (const ir::Value* v : g.inputs())
    if (!v->non_tensor_kind().empty())
      return {"unsupported", "graph input '" + v->name() + "' is a " + v->non_tensor_kind()};
  for (const ir::Value* v : g.outputs())
    if (!v->non_tensor_kind().empty())
      return {"unsupported", "graph output '" + v->name() + "' is a " + v->non_tensor_kind()};
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {"fail", "no test_data_set folders"};
  for (const fs::path& set : sets) {
    std::map<std::string, Tensor> feeds;
    size_t n_in = 0;
    for (;; ++n_in) {
      fs::path p = set / ("input_" + std::to_string(n_in) + ".pb");
      if (!fs::exists(p)) break;
      std::string name;
      auto t = onnx::load_tensor_proto_file(p.string(), &name);
      if (!t.ok()) return {"fail", "cannot read " + p.string() + ": " + t.status().message()};
      // Inputs bind by position: the i-th graph input that is not an initializer-only value.
      if (n_in >= g.inputs().size()) return {"fail", "more input files than graph inputs"};
      feeds[g.inputs()[n_in]->name()] = std::move(t).value();
    }
    cpu::Executor exec;
    auto outs = exec.run(g, feeds);
    if (!outs.ok()) return classify(outs.status());
    if (g_mode != Mode::kInterpreter) {
      auto eng = run_engine(dir, g, feeds, g_mode == Mode::kEngineOptimized);
      if (!eng.ok()) return classify(eng.status());
      if (g_mode == Mode::kEngine && g_backend == "cpu")
        for (size_t j = 0; j < outs->size(); ++j)
          if (!bitwise_equal((*eng)[j], (*outs)[j]))
            return {"fail", "engine output " + std::to_string(j) + " differs from the interpreter's"};
      outs = std::move(eng);
    }
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      fs::path p = set / ("output_" + std::to_string(j) + ".pb");
      if (!fs::exists(p)) return {"fail", "missing " + p.string()};
      auto want = onnx::load_tensor_proto_file(p.string());
      if (!want.ok()) return {"fail", "cannot read " + p.string() + ": " + want.status().message()};
      std::string diff = compare((*outs)[j], *want, g.outputs()[j]->name());
      if (!diff.empty()) return {"fail", set.filename().string() + ": " + diff};
    }
  }
  return {"pass", ""};
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

bool g_in_process = false;

// Runs a case in a child so crashes and hangs are contained (unless --in-process, which CUDA
// runs use so the device is initialized once).
Outcome run_isolated(const fs::path& dir, int timeout_s) {
  if (g_in_process) return run_case(dir);
  int fds[2];
  if (pipe(fds) != 0) return run_case(dir);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(timeout_s);
    Outcome o = run_case(dir);
    std::string msg = o.status + "\t" + one_line(o.reason);
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    return {"fail", sig == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s"
                                   : std::string("crashed with signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")"};
  }
  auto tab = msg.find('\t');
  if (tab == std::string::npos) return {"fail", "child exited without a result"};
  return {msg.substr(0, tab), msg.substr(tab + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, expectations, write_expectations, filter;
  std::vector<std::string> expectations_files;
  double min_pass_rate = 0;
  bool verbose = false;
  int timeout_s = 60;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir") dir = next();
    else if (a == "--mode") {
      std::string m = next();
      if (m == "interpreter") g_mode = Mode::kInterpreter;
      else if (m == "engine") g_mode = Mode::kEngine;
      else if (m == "engine-optimized") g_mode = Mode::kEngineOptimized;
      else {
        std::cerr << "--mode: interpreter, engine or engine-optimized\n";
        return 2;
      }
    } else if (a == "--backend") {
      g_backend = next();
      if (g_backend != "cpu" && g_backend != "cuda") {
        std::cerr << "--backend: cpu or cuda\n";
        return 2;
      }
    } else if (a == "--expectations") expectations_files.push_back(next());
    else if (a == "--write-expectations") write_expectations = next();
    else if (a == "--filter") filter = next();
    else if (a == "--min-pass-rate") min_pass_rate = std::stod(next());
    else if (a == "--timeout") timeout_s = std::stoi(next());
    else if (a == "--verbose" || a == "-v") verbose = true;
    else if (a == "--in-process") g_in_process = true;
    else if (a == "--fp16") g_fp16 = true;
    else if (a == "--no-host-fallback") g_no_host_fallback = true;
    else if (a == "--bf16") g_bf16 = true;
    else {
      std::cerr << "usage: conformance_runner --dir DIR [--mode interpreter|engine|engine-optimized] [--fp16|--bf16] [--no-host-fallback] [--expectations FILE]..."
                   " [--write-expectations FILE]"
                   " [--filter SUBSTR] [--min-pass-rate R] [--timeout S] [-v]\n";
      return 2;
    }
  }
  if (dir.empty() || !fs::is_directory(dir)) {
    std::cerr << "conformance_runner: --dir must name the folder holding the cases\n";
    return 2;
  }
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  std::map<std::string, Outcome> expected;
  for (const std::string& file : expectations_files) {
    expectations += (expectations.empty() ? "" : ", ") + file;
    std::ifstream f(file);
    if (!f) {
      std::cerr << "conformance_runner: cannot read " << file << "\n";
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string name, status, reason;
      std::getline(ls, name, '\t');
      std::getline(ls, status, '\t');
      std::getline(ls, reason);
      expected[name] = {status, reason};
    }
  }

  auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, Outcome> results;
  int pass = 0, fail = 0, unsup = 0, training = 0;
  std::vector<std::string> regressions, newly_passing;
  for (const fs::path& c : cases) {
    std::string name = c.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    if (name.find("training") != std::string::npos) {
      ++training;
      continue;
    }
    Outcome o = run_isolated(c, timeout_s);
    results[name] = o;
    if (o.status == "pass") ++pass;
    else if (o.status == "unsupported") ++unsup;
    else ++fail;
    if (verbose || (o.status != "pass" && expected.count(name) == 0 && !expectations.empty()))
      std::cout << (o.status == "pass" ? "PASS " : o.status == "unsupported" ? "UNSUPPORTED " : "FAIL ") << name
                << (o.reason.empty() ? "" : ": " + o.reason) << "\n";
    auto it = expected.find(name);
    if (o.status != "pass" && it == expected.end()) regressions.push_back(name);
    if (o.status == "pass" && it != expected.end()) newly_passing.push_back(name);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int total = pass + fail + unsup;
  double rate = total ? static_cast<double>(pass) / total : 0;

  if (!write_expectations.empty()) {
    std::ofstream f(write_expectations);
    f << "# ONNX node conformance: every non-training case that does not pass, with its reason.\n"
         "# Written by conformance_runner --write-expectations; an unlisted failure fails CI.\n"
         "# case<TAB>status<TAB>reason\n";
    for (const auto& [name, o] : results)
      if (o.status != "pass") f << name << "\t" << o.status << "\t" << one_line(o.reason) << "\n";
  }
  if (!newly_passing.empty()) {
    std::cout << "\nNewly passing (remove from " << expectations << "):\n";
    for (const auto& n : newly_passing) std::cout << "  " << n << "\n";
  }
  if (!regressions.empty()) {
    std::cout << "\nRegressions (not passing, not in the expectations file):\n";
    for (const auto& n : regressions) std::cout << "  " << n << ": " << results[n].status << ": " << results[n].reason << "\n";
  }
  std::cout << "\nONNX node conformance: " << total << " non-training cases in " << secs << " s\n"
            << "  pass " << pass << "  fail " << fail << "  unsupported " << unsup << "  (training cases not run: "
            << training << ")\n"
            << "  pass rate " << rate * 100 << "%\n";
  bool bar_ok = rate >= min_pass_rate;
  if (!bar_ok) std::cout << "  below the required pass rate " << min_pass_rate * 100 << "%\n";
  bool ok = bar_ok && (expectations.empty() || regressions.empty());
  return ok ? 0 : 1;
}
