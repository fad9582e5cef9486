// Copyright ingot authors. Apache-2.0.
//
// Model repository scanning, engine building/caching and version bookkeeping (see
// model_repository.h).
#include "server/model_repository.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ingot/builder.h"
#include "ingot/reference.h"

namespace ingot::server {

namespace fs = std::filesystem;

namespace {

Status err(StatusCode code, std::string message) { return Status(code, std::move(message)); }

bool is_version_dir(const fs::directory_entry& e, int64_t* version) {
  if (!e.is_directory()) return false;
  std::string n = e.path().filename().string();
  if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *version = std::stoll(n);
  return true;
}

fs::file_time_type mtime(const fs::path& p) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  return ec ? fs::file_time_type::min() : t;
}

// The optimization profile an .onnx is built with: the batch dim spans [1, max_batch_size];
// other open dims take the config's dims.
Result<BuilderConfig> builder_config(const std::string& onnx, const config::ModelConfig& config,
                                     const std::string& config_path, const std::string& dir) {
  BuilderConfig bc;
  const config::IngotBuildOptions& o = config.ingot();
  bool gpu_group = false;
  for (const auto& g : config.instance_group())
    gpu_group = gpu_group || g.kind() == config::ModelInstanceGroup::KIND_GPU;
  if (o.backend() == "cuda" || (o.backend().empty() && gpu_group)) {
    bc.backend = BackendKind::kCuda;
  } else if (!o.backend().empty() && o.backend() != "cpu") {
    return err(StatusCode::kInvalidArgument,
               config_path + ": ingot.backend must be \"cpu\" or \"cuda\", got \"" + o.backend() + "\"");
  }
  bc.fp16 = o.fp16();
  bc.bf16 = o.bf16();
  bc.tf32 = o.tf32();
  bc.reduced_io = o.reduced_io();
  if (o.has_optimization_level()) bc.optimization_level = o.optimization_level();
  if (o.workspace_mib() > 0) bc.workspace_bytes = o.workspace_mib() << 20;
  if (!o.timing_cache_file().empty()) bc.timing_cache_file = (fs::path(dir) / o.timing_cache_file()).string();

  auto model = ReferenceModel::load(onnx);
  if (!model.ok()) return model.status();
  int64_t mbs = config.max_batch_size();
  int64_t opt_batch = mbs;
  if (o.opt_batch_size() > 0) {
    opt_batch = std::min<int64_t>(o.opt_batch_size(), mbs);
  } else if (config.dynamic_batching().preferred_batch_size_size() > 0) {
    const auto& p = config.dynamic_batching().preferred_batch_size();
    opt_batch = *std::max_element(p.begin(), p.end());
  }
  OptimizationProfile profile;
  bool any_open = false;
  for (const TensorInfo& in : (*model)->inputs()) {
    std::vector<int64_t> cdims;
    for (const auto& ci : config.input()) {
      if (ci.name() == in.name) cdims.assign(ci.dims().begin(), ci.dims().end());
    }
    std::vector<int64_t> mn = in.shape, op = in.shape, mx = in.shape;
    bool open = false;
    for (size_t d = 0; d < in.shape.size(); ++d) {
      if (in.shape[d] >= 0) continue;
      open = true;
      if (d == 0 && mbs > 0) {
        mn[d] = 1, op[d] = opt_batch, mx[d] = mbs;
        continue;
      }
      size_t cd = d - (mbs > 0 ? 1 : 0);
      if (cd >= cdims.size() || cdims[cd] < 0) {
        return err(StatusCode::kInvalidArgument, config_path + ": input '" + in.name + "' dim " + std::to_string(d) +
                                                     " is open in the model; give its size in the config's dims");
      }
      mn[d] = op[d] = mx[d] = cdims[cd];
    }
    if (open) {
      profile.set_dimensions(in.name, mn, op, mx);
      any_open = true;
    }
  }
  if (any_open) bc.profiles.push_back(profile);
  return bc;
}

}  // namespace

ServedModel::~ServedModel() {
  if (batcher) batcher->stop();
}

ModelRepository::ModelRepository(std::string path, Logger& logger, Metrics& metrics)
    : path_(std::move(path)), logger_(&logger), metrics_(&metrics) {}

ModelRepository::~ModelRepository() { stop_all(); }

Result<std::shared_ptr<Engine>> ModelRepository::engine_for(const std::string& dir, const config::ModelConfig& config,
                                                            const std::string& config_path) {
  fs::path onnx = fs::path(dir) / "model.onnx";
  fs::path engine_path = fs::path(dir) / "model.engine";
  if (!config.default_model_filename().empty()) {
    fs::path f = fs::path(dir) / config.default_model_filename();
    if (f.extension() == ".onnx") {
      onnx = f;
      engine_path = fs::path(f).replace_extension(".engine");
    } else {
      engine_path = f;
      onnx.clear();
    }
  }
  bool have_onnx = !onnx.empty() && fs::exists(onnx);
  Runtime runtime(*logger_);
  if (fs::exists(engine_path)) {
    bool fresh = !have_onnx || (mtime(engine_path) >= mtime(onnx) && mtime(engine_path) >= mtime(config_path));
    if (fresh) {
      auto engine = runtime.deserialize_file(engine_path.string());
      if (engine.ok()) {
        if (!have_onnx || resolve_signature(config, **engine, config_path).ok()) return engine;
      } else if (!have_onnx) {
        return engine.status();
      }
      std::string why = engine.ok() ? "does not fit the config" : engine.status().message();
      logger_->log(Severity::kWarning, (engine_path.string() + ": rebuilding from model.onnx (" + why + ")").c_str());
    }
  }
  if (!have_onnx) {
    return err(StatusCode::kNotFound, dir + ": no model.engine or model.onnx (or default_model_filename) to serve");
  }
  auto bc = builder_config(onnx.string(), config, config_path, dir);
  if (!bc.ok()) return bc.status();
  logger_->log(Severity::kInfo, ("building " + onnx.string()).c_str());
  Builder builder(*logger_);
  auto bytes = builder.build_serialized(onnx.string(), *bc);
  if (!bytes.ok()) return bytes.status();
  // Written under a temporary name, then renamed: a concurrent start never reads half a file.
  fs::path tmp = engine_path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    if (!f) return err(StatusCode::kIoError, "cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, engine_path, ec);
  if (ec)
    return err(StatusCode::kIoError,
               "cannot rename " + tmp.string() + " to " + engine_path.string() + ": " + ec.message());
  return runtime.deserialize_file(engine_path.string());
}

Result<std::shared_ptr<ServedModel>> ModelRepository::load_version(const std::string& name, const std::string& dir,
                                                                   int64_t version, const config::ModelConfig& config,
                                                                   const std::string& config_path) {
  auto engine = engine_for(dir, config, config_path);
  if (!engine.ok()) return engine.status();
  auto sig = resolve_signature(config, **engine, config_path);
  if (!sig.ok()) return sig.status();
  auto batching = batching_options(config, config_path);
  if (!batching.ok()) return batching.status();
  auto m = std::make_shared<ServedModel>();
  m->name = name;
  m->version = version;
  m->version_str = std::to_string(version);
  m->platform = "ingot_" + (*engine)->backend();
  m->config = config;
  m->signature = std::move(sig.value());
  m->signature.name = name;
  complete_model_config(m->config, m->signature, m->platform);
  m->batching = batching.value();
  m->engine = engine.value();
  m->stats = std::make_unique<ModelStats>(metrics_, name, m->version_str);
  auto batcher = DynamicBatcher::create(m->engine, m->signature, m->batching, m->stats.get());
  if (!batcher.ok()) return batcher.status();
  m->batcher = std::move(batcher.value());
  if (!m->batcher->prepared_sizes().empty()) {
    std::string sizes;
    for (int64_t p : m->batcher->prepared_sizes()) sizes += (sizes.empty() ? "" : ",") + std::to_string(p);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", m->batcher->warm_up_ms());
    logger_->log(Severity::kInfo, ("model '" + name + "': prepared batch sizes " + sizes + " (batches run padded " +
                                   "up to the next one; warm-up " + ms + " ms)")
                                      .c_str());
  }
  if (!m->batcher->cuda_graphs().empty()) {
    logger_->log(Severity::kInfo, ("model '" + name + "': CUDA graphs " + m->batcher->cuda_graphs()).c_str());
  }
  return m;
}

Result<std::vector<std::shared_ptr<ServedModel>>> ModelRepository::load_versions(const std::string& name) {
  fs::path dir = fs::path(path_) / name;
  if (!fs::is_directory(dir)) return err(StatusCode::kNotFound, "no model folder '" + name + "' in " + path_);
  std::string config_path = (dir / "config.pbtxt").string();
  auto config = read_model_config(config_path);
  if (!config.ok()) return config.status();
  if (!config->name().empty() && config->name() != name) {
    return err(StatusCode::kInvalidArgument,
               config_path + ": name '" + config->name() + "' differs from the folder name '" + name + "'");
  }
  config->set_name(name);
  std::vector<int64_t> versions;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    int64_t v;
    if (is_version_dir(e, &v)) versions.push_back(v);
  }
  std::sort(versions.begin(), versions.end());
  if (versions.empty())
    return err(StatusCode::kNotFound, dir.string() + ": no numbered version folder (e.g. 1/model.onnx)");
  // Version policy: latest 1 by default (Triton's default), all, latest N or specific.
  const auto& vp = config->version_policy();
  std::vector<int64_t> chosen;
  if (vp.has_all()) {
    chosen = versions;
  } else if (vp.has_specific()) {
    for (int64_t v : vp.specific().versions()) {
      if (!std::binary_search(versions.begin(), versions.end(), v)) {
        return err(StatusCode::kNotFound,
                   config_path + ": version_policy names version " + std::to_string(v) + ", which has no folder");
      }
      chosen.push_back(v);
    }
  } else {
    size_t n = vp.has_latest() && vp.latest().num_versions() > 0 ? vp.latest().num_versions() : 1;
    chosen.assign(versions.end() - std::min(n, versions.size()), versions.end());
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::shared_ptr<ServedModel>> loaded;
  for (int64_t v : chosen) {
    auto m = load_version(name, (dir / std::to_string(v)).string(), v, *config, config_path);
    if (!m.ok())
      return Status(m.status().code(),
                    "model '" + name + "' version " + std::to_string(v) + ": " + m.status().message());
    loaded.push_back(std::move(m.value()));
  }
  return loaded;
}

Status ModelRepository::load_all() {
  std::error_code ec;
  if (!fs::is_directory(path_, ec)) return err(StatusCode::kNotFound, "model repository " + path_ + " is not a folder");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path_, ec)) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  if (ec) return err(StatusCode::kIoError, "cannot read " + path_ + ": " + ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    Status st = load(n);
    if (!st.ok()) logger_->log(Severity::kError, st.message().c_str());
  }
  return Status::Ok();
}

Status ModelRepository::load(const std::string& name) {
  std::lock_guard<std::mutex> serial(load_mu_);
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return err(StatusCode::kInvalidArgument, "bad model name '" + name + "'");
  }
  if (!fs::is_directory(fs::path(path_) / name))
    return err(StatusCode::kNotFound, "no model folder '" + name + "' in " + path_);
  auto loaded = load_versions(name);
  std::vector<std::shared_ptr<ServedModel>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = models_[name];
    if (!loaded.ok()) {
      // A failed reload keeps serving what was loaded before.
      if (e.versions.empty()) {
        e.state = "UNAVAILABLE";
        e.reason = loaded.status().message();
      }
      return loaded.status();
    }
    old.swap(e.versions);
    e.versions = std::move(loaded.value());
    e.state = "READY";
    e.reason.clear();
  }
  for (auto& m : old) m->batcher->stop();  // drains; callers holding it still get their answers
  logger_->log(Severity::kInfo, ("loaded model '" + name + "'").c_str());
  return Status::Ok();
}

Status ModelRepository::unload(const std::string& name) {
  std::lock_guard<std::mutex> serial(load_mu_);
  std::vector<std::shared_ptr<ServedModel>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return err(StatusCode::kNotFound, "unknown model '" + name + "'");
    old.swap(it->second.versions);
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
  }
  for (auto& m : old) m->batcher->stop();
  return Status::Ok();
}

std::shared_ptr<ServedModel> ModelRepository::find(const std::string& name, const std::string& version,
                                                   RequestError* error) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    std::string why = it == models_.end() ? "" : " (" + it->second.reason + ")";
    *error =
        RequestError{404, "unknown model '" + name + "'" + (it == models_.end() ? "" : " or it is not ready") + why};
    return nullptr;
  }
  const auto& versions = it->second.versions;
  if (version.empty()) return versions.back();
  for (const auto& m : versions) {
    if (m->version_str == version) return m;
  }
  *error = RequestError{404, "model '" + name + "' has no ready version '" + version + "'"};
  return nullptr;
}

std::vector<ModelRepository::IndexEntry> ModelRepository::index() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path_, ec)) {
    if (e.is_directory()) names.push_back(e.path().filename().string());
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [n, e] : models_) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<IndexEntry> out;
  for (const std::string& n : names) {
    auto it = models_.find(n);
    if (it == models_.end()) {
      out.push_back({n, "", "UNAVAILABLE", "not loaded"});
    } else if (it->second.versions.empty()) {
      out.push_back({n, "", it->second.state, it->second.reason});
    } else {
      for (const auto& m : it->second.versions) out.push_back({n, m->version_str, "READY", ""});
    }
  }
  return out;
}

bool ModelRepository::all_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [n, e] : models_) {
    if (e.versions.empty() && e.reason != "unloaded") return false;
  }
  return true;
}

void ModelRepository::stop_all() {
  std::vector<std::shared_ptr<ServedModel>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [n, e] : models_) all.insert(all.end(), e.versions.begin(), e.versions.end());
  }
  for (auto& m : all) m->batcher->stop();
}

}  // namespace ingot::server
