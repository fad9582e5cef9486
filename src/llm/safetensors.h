// Copyright ingot authors. Apache-2.0.
//
// Hugging Face checkpoints: safetensors files (an 8-byte little-endian header length, a JSON
// header mapping each tensor to its dtype, shape and [begin, end) byte range, then the data) and
// a model folder's sharded index (model.safetensors.index.json's weight_map). Files are
// memory-mapped and tensors read in place. Every length, range and size is checked against the
// file before use: a truncated or hostile file is an error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ingot/data_type.h"
#include "core/mapped_file.h"

namespace ingot::llm {

struct SafeTensor {
  std::string name;
  std::string dtype_name;  ///< as the file says: "F32", "BF16", "F8_E4M3", ...
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  ///< in the mapped file
  uint64_t nbytes = 0;
  std::string file;  ///< the file it lives in
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  /// Parses bytes the caller keeps alive (tests, fuzzing).
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* data, size_t size,
                                                        const std::string& what = "safetensors");
  ~SafetensorsFile();
  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status parse_impl(const uint8_t* data, size_t size);
  std::string what_;
  std::unique_ptr<MappedFile> map_;
  std::map<std::string, SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A Hugging Face model folder's weights: model.safetensors, or the shards that
/// model.safetensors.index.json names (each tensor from the shard its weight_map gives).
class SafetensorsModel {
 public:
  static Result<std::unique_ptr<SafetensorsModel>> open(const std::string& folder);
  const SafeTensor* find(const std::string& name) const;
  const std::map<std::string, const SafeTensor*>& tensors() const { return all_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafeTensor*> all_;
};

/// A tensor's elements as floats (F32, F16, BF16, F64, F8_E4M3, F8_E5M2, and the integer types).
Result<std::vector<float>> to_floats(const SafeTensor& t);

}  // namespace ingot::llm
