// Copyright ingot authors. Apache-2.0.
//
// Building an engine: ONNX model → optimized graph → one step per node with a chosen tactic →
// memory plan → serialized engine (see engine.h to load and run it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ingot/logger.h"
#include "ingot/reference.h"
#include "ingot/status.h"

namespace ingot {

/// Input dims allowed by one optimization profile: for every input with open dims, the
/// smallest (min), the one tactics are tuned for (opt) and the largest (max). Inputs whose
/// model shape is fully fixed need no entry.
class OptimizationProfile {
 public:
  /// Sets min/opt/max for `input`. All three must have the model's rank and
  /// min <= opt <= max element-wise (checked when the engine is built).
  void set_dimensions(const std::string& input, std::vector<int64_t> min, std::vector<int64_t> opt,
                      std::vector<int64_t> max);
  struct Entry {
    std::string input;
    std::vector<int64_t> min, opt, max;
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

enum class BackendKind { kCpu = 0, kCuda = 1 };

/// INT8 post-training calibration data, shaped like TensorRT's IInt8Calibrator: the builder
/// asks for batches until an empty one (it holds them all: the fp32 engine it runs them on has
/// one optimization profile spanning their shapes, which need not fit BuilderConfig::profiles),
/// runs the fp32 model on each and observes the tensors the quantized layers read; the
/// algorithm turns what it saw into each tensor's scale. A cache (TensorRT's text
/// form) skips all of that: when read_cache() returns text, no batch is asked for; after a
/// calibration the builder hands the new cache to write_cache().
class Calibrator {
 public:
  virtual ~Calibrator() = default;
  /// The next batch, one tensor per model input (by name; `inputs` are the model's); empty when
  /// there are no more.
  virtual Result<std::vector<HostTensor>> next_batch(const std::vector<TensorInfo>& inputs) = 0;
  /// How many batches there are (for the progress bar); -1 when unknown.
  virtual int num_batches() const { return -1; }
  /// "entropy" (TensorRT's EntropyCalibration2, the default), "minmax" or "percentile".
  virtual std::string algorithm() const { return "entropy"; }
  /// The percentile of |x| the percentile algorithm keeps (default 99.99).
  virtual double percentile() const { return 99.99; }
  /// A calibration cache's text, or "" when there is none.
  virtual std::string read_cache() { return {}; }
  virtual void write_cache(const std::string& text) { (void)text; }
};

struct BuilderConfig {
  BackendKind backend = BackendKind::kCpu;
  bool fp16 = false;          ///< allow fp16 tactics (CUDA)
  bool bf16 = false;          ///< allow bf16 tactics (CUDA)
  bool tf32 = false;          ///< allow TF32 math in fp32 GEMM/conv (CUDA)
  bool strict_types = false;  ///< a layer that cannot run in the allowed reduced precision is an error
  /// INT8: Conv/Gemm/MatMul layers whose inputs the calibrator gives a range run quantized
  /// (symmetric int8 activations per tensor, weights per output channel). Needs `calibrator`.
  /// Today the graph carries the quantization as Q/DQ pairs and fp32-rounded weights, which
  /// every backend runs (the CPU backend as the accuracy reference); int8 GPU kernels are next.
  bool int8 = false;
  /// FP8 (E4M3), the same way as int8 (the same calibrator; scale = threshold / 448, values
  /// rounded to E4M3, weights per output channel); the calibrator's default is min-max, as FP8
  /// recipes use max calibration. Either int8 or fp8.
  bool fp8 = false;
  Calibrator* calibrator = nullptr;  ///< not owned; used during the build only
  /// With int8: the least cosine similarity every sample (slice along the leading, batch dim) of
  /// every output must keep against fp32 on the calibration batches; the most sensitive layers
  /// (each measured alone in int8) go back to float until it holds. 0: off (every calibrated layer in int8). layer_precisions L:fp32 /
  /// L:int8 pin a layer either way.
  double int8_min_cosine = 0;
  /// With int8: SmoothQuant's migration strength alpha in [0, 1] (quant/smooth_quant.h): each
  /// MatMul/Gemm input's outlier channels move into the weight before quantizing. < 0: off.
  /// Needs the calibration batches (the per-channel maxima are not in the cache).
  double smoothquant_alpha = -1;
  /// With fp16 or bf16: the engine's fp32 inputs and float outputs take that type (fp16 when both
  /// are allowed), so no Casts run at its edges and callers pass and receive it, as trtexec's
  /// --inputIOFormats/--outputIOFormats=fp16 do. Off: engine inputs and outputs keep the model's types.
  bool reduced_io = false;
  /// Per-layer precision, by node name (or the name of a model node a fused layer absorbed):
  /// "fp32" keeps a layer in fp32, "fp16"/"bf16" forces it (an error when no tactic has it).
  std::map<std::string, std::string> layer_precisions;
  /// On a GPU backend, a layer no GPU kernel takes runs on the host fallback (copies to and from
  /// the CPU reference kernel, a synchronize, no CUDA graph) and the build warns, naming each.
  /// false makes that an error listing every such layer (op, node, opset, why), like TensorRT's
  /// refusal of a layer it has no implementation for.
  bool allow_host_fallback = true;
  uint64_t workspace_bytes = 1ull << 30;  ///< largest scratch a step may use
  int optimization_level = 3;             ///< 0..5: more tactics timed at higher levels
  std::string timing_cache_file;          ///< read and updated when set (CUDA)
  /// What tactic timings count (CUDA): "stream" (default), the time between back-to-back enqueues,
  /// host cost included where it outlasts the kernels (for engines run without CUDA graphs);
  /// "device", device time alone (for engines replayed from CUDA graphs, as TensorRT times).
  std::string tactic_timing = "stream";
  std::vector<OptimizationProfile> profiles;
  std::vector<std::string> disabled_passes;  ///< optimizer passes to skip, by name
  std::string dump_ir_dir;                   ///< write the IR after every pass into this folder
  /// 2-D convolution layout: "auto" (channels-last where a conv computes in fp16/bf16 and the
  /// backend has a channels-last tactic), "nhwc" (every float conv that can) or "nchw".
  std::string conv_layout = "auto";
  /// Called on the building thread as the build advances: phase ("optimize", "tactics",
  /// "memory"), steps done and the phase's total. Tactic selection (autotuning on CUDA) is the
  /// long phase; a CLI draws a progress bar with an ETA from it.
  std::function<void(const char* phase, int done, int total)> progress;
};

/// What a build did, for the CLI summary.
struct BuildSummary {
  int steps = 0;
  int nodes_before_optimization = 0;
  int fused_nodes = 0;        ///< steps standing for more than one model node
  int tactics_timed = 0;      ///< candidate tactics measured on the GPU
  int tactics_cut_short = 0;  ///< of those, measured by one run only (far slower than the best)
  int timing_cache_hits = 0;  ///< steps decided by the timing cache without measuring
  int timing_cache_entries = 0;
  uint64_t engine_bytes = 0;
  uint64_t arena_bytes = 0;
  uint64_t weight_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  double seconds = 0;
  /// Where `seconds` went: wall seconds per phase in build order (calibrate when int8/fp8 ran
  /// batches, optimize, split, precision, layout, tactics, memory, then import+write); the layout
  /// and tactic phases time kernels.
  std::vector<std::pair<std::string, double>> phase_seconds;
  int reduced_precision_layers = 0;  ///< layers lowered to fp16/bf16
  int precision_casts = 0;           ///< Cast layers inserted where fp32 meets fp16/bf16
  int channels_last_convs = 0;       ///< convolutions running NHWC
  int layout_reformats = 0;          ///< Transpose layers left where NHWC regions meet NCHW ops
  int split_fusions = 0;             ///< fused layers split back into GPU steps (no fused GPU kernel)
  /// Steps on the host fallback, "<op> '<node>' (<domain> opset N): why" each.
  std::vector<std::string> host_steps;
  std::vector<std::string> notes;  ///< pass refusals and other remarks
  // INT8 (BuilderConfig::int8).
  int int8_layers = 0;                 ///< layers quantized
  std::vector<std::string> int8_kept;  ///< "<layer> (<op>): why" for each left in float
  int calibration_batches = 0;         ///< batches run (0 when the cache had the scales)
  int calibration_tensors = 0;         ///< tensors with a scale
  bool calibration_from_cache = false;
  double int8_cosine = 1.0;  ///< with int8_min_cosine: the chosen mix's worst sample cosine
  std::vector<std::pair<std::string, double>> int8_sensitivity;  ///< layer -> cosine alone in int8
  /// Wall seconds calibration took (reading the batches, running them, the scales); 0 when the
  /// cache had the scales. Also in phase_seconds as "calibrate".
  double calibration_seconds = 0;
  /// What ran the calibration batches: "cpu engine" or "cuda engine" (an fp32 engine of the
  /// build's backend with the observed tensors as outputs), or "reference interpreter" (the
  /// fallback when that engine cannot be built or run; the build log says why).
  std::string calibration_ran_on;
  /// With smoothquant_alpha: one line per smoothed activation ("x -> layers: largest / median
  /// channel max before -> after").
  std::vector<std::string> smoothquant;
};

class Builder {
 public:
  /// `logger` must outlive the builder.
  explicit Builder(Logger& logger = default_logger());

  /// Builds and serializes an engine from an ONNX file (external data next to it). Fails with
  /// a message naming the file and the node/op/input at fault: unsupported ops, profiles that
  /// do not match the inputs, dynamic inputs without a profile, ...
  Result<std::vector<uint8_t>> build_serialized(const std::string& onnx_path, const BuilderConfig& config,
                                                BuildSummary* summary = nullptr) const;
  /// Same from serialized ModelProto bytes (no external data).
  Result<std::vector<uint8_t>> build_serialized_from_bytes(const void* data, size_t size, const BuilderConfig& config,
                                                           BuildSummary* summary = nullptr) const;

 private:
  Logger* logger_;
};

}  // namespace ingot
