// Copyright ingot authors. Apache-2.0.
#include "calibration.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "file_io.h"
#include "npy.h"

namespace ingot::tools {

namespace fs = std::filesystem;

namespace {
Status bad(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }
}  // namespace

std::vector<std::string> NpyCalibrator::entries() const {
  std::vector<std::string> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() || (e.is_regular_file() && e.path().extension() == ".npy")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

int NpyCalibrator::num_batches() const { return static_cast<int>(entries().size()); }

Result<std::vector<HostTensor>> NpyCalibrator::next_batch(const std::vector<TensorInfo>& inputs) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return bad("--calibration-data '" + dir + "' is not a folder");
  const std::vector<std::string> all = entries();
  if (next_ == 0 && all.empty())
    return bad("--calibration-data '" + dir +
               "' has no .npy batches (a file per batch for a one-input model, a folder per batch holding "
               "<input>.npy otherwise)");
  if (next_ >= all.size()) return std::vector<HostTensor>{};
  const std::string entry = all[next_++];
  std::vector<HostTensor> batch;
  if (!fs::is_directory(entry, ec)) {
    if (inputs.size() != 1)
      return bad("--calibration-data: '" + entry + "' is a file, but the model has " + std::to_string(inputs.size()) +
                 " inputs: give a folder per batch holding <input>.npy");
    auto t = load_npy(entry);
    if (!t.ok()) return Status(t.status().code(), entry + ": " + t.status().message());
    t->name = inputs[0].name;
    batch.push_back(std::move(*t));
    return batch;
  }
  for (const TensorInfo& in : inputs) {
    const std::string file = (fs::path(entry) / (in.name + ".npy")).string();
    if (!fs::exists(file, ec))
      return bad("--calibration-data: batch folder '" + entry + "' has no " + in.name + ".npy for input '" + in.name +
                 "'");
    auto t = load_npy(file);
    if (!t.ok()) return Status(t.status().code(), file + ": " + t.status().message());
    t->name = in.name;
    batch.push_back(std::move(*t));
  }
  return batch;
}

std::string NpyCalibrator::read_cache() {
  std::error_code ec;
  if (cache_path.empty() || !fs::exists(cache_path, ec)) return {};
  auto text = read_file(cache_path);
  return text.ok() ? std::move(text).value() : std::string();
}

void NpyCalibrator::write_cache(const std::string& text) {
  if (cache_path.empty()) return;
  std::error_code ec;
  const fs::path parent = fs::path(cache_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::ofstream f(cache_path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) std::cerr << "warning: cannot write the calibration cache '" << cache_path << "'\n";
}

NpyCalibrator& cli_calibrator() {
  static NpyCalibrator c;
  return c;
}

}  // namespace ingot::tools
