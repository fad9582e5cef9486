// Copyright ingot authors. Apache-2.0.
//
// A read-only memory map of a whole file: engine files (the runtime uses their weights in place)
// and LLM checkpoints (GGUF, safetensors) are read through it; the map lives as long as its owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ingot {

class MappedFile {
 public:
  /// kNotFound when the file cannot be opened, kIoError when it cannot be mapped.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return static_cast<const uint8_t*>(map_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* map_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ingot
