// Copyright ingot authors. Apache-2.0.
//
// The model repository: `<repo>/<model>/config.pbtxt` and numbered version folders holding
// `model.engine` or `model.onnx` (Triton's layout). An .onnx is built into an engine on load
// (CPU backend unless the config asks for cuda) and the engine is written beside it; the next
// start reuses it while it is newer than both the model and the config. Each loaded version
// owns its engine, statistics and dynamic batcher.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ingot/engine.h"
#include "ingot/logger.h"
#include "ingot/status.h"
#include "server/dynamic_batcher.h"
#include "server/infer_request.h"
#include "server/metrics.h"
#include "server/model_config.h"

namespace ingot::server {

/// One loaded, ready model version.
struct ServedModel {
  std::string name;
  int64_t version = 0;
  std::string version_str;
  std::string platform;  ///< "ingot_cpu" / "ingot_cuda"
  config::ModelConfig config;
  ModelSignature signature;
  BatchingOptions batching;
  std::shared_ptr<Engine> engine;
  std::unique_ptr<ModelStats> stats;        // outlives the batcher, which reports to it
  std::unique_ptr<DynamicBatcher> batcher;  // declared last: stopped first
  ~ServedModel();
};

class ModelRepository {
 public:
  /// `logger` and `metrics` outlive the repository.
  ModelRepository(std::string path, Logger& logger, Metrics& metrics);
  ~ModelRepository();

  /// Loads every model folder; failures are logged and kept as UNAVAILABLE with the reason.
  /// Fails only when the repository folder cannot be read.
  Status load_all();
  /// (Re)loads one model by folder name; the old versions stop after the new ones are ready.
  Status load(const std::string& name);
  /// Unloads a model: new requests get 404, queued ones are still answered.
  Status unload(const std::string& name);

  /// A ready version ("" = the highest), or nullptr with a 404/400 error naming what is missing.
  std::shared_ptr<ServedModel> find(const std::string& name, const std::string& version, RequestError* error) const;

  struct IndexEntry {
    std::string name, version, state, reason;
  };
  /// Every model folder in the repository and every loaded version (the repository index).
  std::vector<IndexEntry> index() const;
  /// True when every model folder is loaded and ready.
  bool all_ready() const;
  /// Stops every batcher after draining its queue (SIGTERM).
  void stop_all();

 private:
  Result<std::vector<std::shared_ptr<ServedModel>>> load_versions(const std::string& name);
  Result<std::shared_ptr<ServedModel>> load_version(const std::string& name, const std::string& dir, int64_t version,
                                                    const config::ModelConfig& config, const std::string& config_path);
  Result<std::shared_ptr<Engine>> engine_for(const std::string& dir, const config::ModelConfig& config,
                                             const std::string& config_path);

  struct Entry {
    std::vector<std::shared_ptr<ServedModel>> versions;  // ascending
    std::string state = "UNAVAILABLE";
    std::string reason;
  };
  std::string path_;
  Logger* logger_;
  Metrics* metrics_;
  std::mutex load_mu_;  // one load/unload at a time
  mutable std::mutex mu_;
  std::map<std::string, Entry> models_;
};

}  // namespace ingot::server
