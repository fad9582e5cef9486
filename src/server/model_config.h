// Copyright ingot authors. Apache-2.0.
//
// Reading `<model>/config.pbtxt` (Triton's model configuration, protobuf text format, see
// model_config.proto) and the settings the server derives from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ingot/data_type.h"
#include "ingot/engine.h"
#include "ingot/status.h"
#include "server/infer_request.h"
#include "server/model_config.pb.h"

namespace ingot::server {

/// Parses config text; `file` names the source in errors ("config.pbtxt:3:5: unknown field 'foo'").
Result<config::ModelConfig> parse_model_config(const std::string& text, const std::string& file);
/// Reads and parses a config file.
Result<config::ModelConfig> read_model_config(const std::string& path);

/// The config as Triton's `GET /v2/models/<m>/config` writes it: proto field names, and 64-bit
/// integers as JSON numbers (protobuf's JSON printer writes them as strings, `"dims":["3","224"]`,
/// which Triton's clients and perf_analyzer do not expect).
std::string model_config_json(const config::ModelConfig& config);

/// config's TYPE_FP32 → kFloat32 (kUndefined for TYPE_INVALID / unknown).
DataType datatype_from_config(config::DataType t);

/// Triton's auto-completed config: the inputs and outputs a config leaves out are filled from the
/// served signature (name, data type, dims without the batch dim), and an empty platform gets
/// `platform`, so GET .../config and the gRPC ModelConfig tell clients (perf_analyzer) what to send.
void complete_model_config(config::ModelConfig& config, const ModelSignature& signature, const std::string& platform);

/// Batching settings resolved from a config (Triton's defaults where fields are left out).
struct BatchingOptions {
  int64_t max_batch_size = 0;  ///< 0: the model does not batch
  bool dynamic = false;        ///< dynamic_batching present
  std::vector<int64_t> preferred_sizes;
  int64_t max_queue_delay_us = 0;
  int64_t max_queue_size = 0;      ///< 0: unbounded
  int64_t default_timeout_us = 0;  ///< 0: none
  int instances = 1;               ///< sum of instance_group counts (default 1)
  std::vector<int> gpus;           ///< one entry per instance (-1 = none/CPU)
  /// Batch sizes prepared at load (each instance runs one warm-up batch of each, so tactics build
  /// their per-shape plans then, not on a request) and that executed batches are padded up to:
  /// the config parameter "ingot.prepared_batch_sizes" = "auto" (the default: for cuda engines
  /// auto_prepared_sizes(): powers of two and their midpoints, max_batch_size and the preferred sizes; none for
  /// cpu engines, whose kernels prepare nothing per shape), "none", or a list "1,2,4,8".
  enum class Prepared { kAuto, kNone, kList } prepared = Prepared::kAuto;
  std::vector<int64_t> prepared_sizes;  ///< kList: ascending, unique, within [1, max_batch_size]
  /// cuda engines: each instance's context replays a CUDA graph per batch size it runs (captured
  /// during the prepared sizes' warm-up), as `ingot run --cuda-graph` does. On unless the config
  /// says `optimization { cuda { graphs: false } }`; ignored for cpu engines.
  bool cuda_graphs = true;
};
Result<BatchingOptions> batching_options(const config::ModelConfig& config, const std::string& file);

/// Checks the config's inputs/outputs against an engine and returns the signature clients see.
/// A config with no input (output) entries takes them from the engine (Triton's auto-complete);
/// errors name the tensor, the file and what differs.
Result<ModelSignature> resolve_signature(const config::ModelConfig& config, const Engine& engine,
                                         const std::string& file);

}  // namespace ingot::server
