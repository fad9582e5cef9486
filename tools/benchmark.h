// Copyright ingot authors. Apache-2.0.
//
// Timing and per-layer profiling for `ingot run`, modelled on trtexec: warm-up,
// a timed loop that runs until both an iteration count and a duration are met,
// several contexts on several threads, a "Performance summary", per-iteration
// times and a per-layer table with each step's share of the GPU's roofline
// (peaks by GPU arch and step precision; see benchmark.cc). Uses the public API only; per-layer times come
// from ExecutionContext::set_profiler, intermediate shapes (for FLOPs and
// bytes) from one extra run with a TensorListener, kept out of the timed loop
// because the listener slows every step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ingot/engine.h"
#include "ingot/reference.h"
#include "ingot/status.h"

namespace ingot::tools {

struct BenchmarkOptions {
  int warmup_runs = 2;
  double warmup_ms = 0;
  int iterations = 10; ///< per stream; 1 when only the output summary is wanted
  double duration_s =
      0;           ///< the loop runs until both iterations and duration are met
  int streams = 1; ///< contexts, each on its own thread
  int profile = 0; ///< optimization profile every context runs in
  std::vector<double> percentiles{50, 90, 99};
  bool no_data_transfers = false;
  bool cuda_graph = false;    ///< --cuda-graph: capture each context's enqueue, replay it
  /// --back-to-back N: after the timed loop, N queries enqueued between two CUDA events with one
  /// synchronize at the end (what a pipeline that never waits per query sees); 0: not measured.
  int back_to_back = 0;
  std::string export_times;   ///< JSON file: one entry per timed iteration
  bool dump_profile = false;  ///< print the per-layer table
  std::string export_profile; ///< JSON file: the per-layer table
  bool iterations_given = false;
  /// Any flag other than --iterations given: these need an engine, not the
  /// interpreter.
  bool engine_only_given = false;
  bool requested() const { return iterations_given || engine_only_given; }
};

enum class FlagParse { kNotMine, kOk, kError };

/// Parses args[i] when it is a benchmarking flag, advancing i past its value.
/// kError comes with a one-line message in `err` naming the flag, the value and
/// what is allowed.
FlagParse parse_benchmark_flag(const std::vector<std::string> &args, size_t &i,
                               BenchmarkOptions &opt, std::string &err);
/// The help lines of those flags.
void benchmark_help(std::ostream &os);

/// A tensor whose dtype and dims are known before running (weights, fixed
/// dims).
struct KnownTensor {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  /// Seen in the engine's own run (activations, I/O); false for the model file's figures
  /// (weights), whose dtype is the model's, not necessarily the engine's (see layer_bytes).
  bool from_run = false;
};
using KnownTensors = std::map<std::string, KnownTensor>;

/// Dtype and dims of every tensor of the optimized graph of an .onnx model
/// whose dims are all numbers (weights above all, which an engine does not
/// expose). Empty when inspection fails: FLOPs then fall back to what the run
/// itself shows.
KnownTensors static_tensor_shapes(const std::string &onnx_path);

/// Warms up, times, profiles and reports `engine` on `inputs` (copied into each
/// stream's engine memory: device memory for cuda engines). Writes the summary (and the table) to
/// `os`, the JSON files where asked. kInvalidArgument for inputs the engine
/// refuses, the run's own status for failed runs, kIoError for files that
/// cannot be written.
Status run_benchmark(const std::shared_ptr<Engine> &engine,
                     const std::vector<HostTensor> &inputs,
                     const BenchmarkOptions &opt, const KnownTensors &known,
                     std::ostream &os);

} // namespace ingot::tools
