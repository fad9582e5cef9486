// Copyright ingot authors. Apache-2.0.
//
// GGUF (v2 and v3), llama.cpp's model file: metadata key/values (hyperparameters, the tokenizer's
// vocabulary and merges, the chat template) and tensors in ggml's block-quantized types. The file
// is memory-mapped and tensors are read in place; dequantize() turns a tensor's blocks into
// floats for the types LLM checkpoints use (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the
// k-quants Q2_K..Q6_K, IQ4_NL, IQ4_XS). Every count, length and offset is checked against the file's size before it is used, so
// a truncated or hostile file is an error naming what is wrong, never a read past the end.
// Layout reference: the GGUF specification in ggml's docs (gguf.md) and ggml's block structs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/mapped_file.h"

namespace ingot::llm {

/// ggml's tensor types (the numbers are the file's).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ4_NL = 20, kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kBF16 = 30,
};

/// "Q4_1", "F16", ...; "type N" for numbers ggml has no name for here.
std::string ggml_type_name(GgmlType t);
/// Elements per block and bytes per block; false for an unknown type.
bool ggml_block(GgmlType t, int64_t* block_elems, int64_t* block_bytes);

/// GGUF's metadata value types.
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
  kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

/// One metadata value: a scalar (integers and bools in `i`, floats in `f`), a string, or an
/// array of one scalar type (ints/floats) or of strings.
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType elem_type = GgufType::kU8;  ///< arrays only
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> dims;  ///< ggml order: dims[0] is the fastest-varying (a row's length)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;        ///< from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  ///< in the mapped file
  int64_t numel() const;
};

class GgufFile {
 public:
  /// Maps and parses a file.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  /// Parses bytes the caller keeps alive (for tests and the fuzzer).
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size, const std::string& what = "gguf");
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;
  /// A metadata integer / float / string; an error naming the key when missing or of another type.
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;

 private:
  GgufFile() = default;
  Status parse_impl(const uint8_t* data, size_t size);
  std::string what_;
  std::unique_ptr<MappedFile> map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> by_name_;
};

/// Q4_K / Q5_K blocks: sub-block j's (scale, min), eight 6-bit pairs packed in the block's 12 bytes at q.
void ggml_k4_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min);

/// Dequantizes `n` elements (a whole number of blocks) of type `t` at `src` into `dst`.
Status dequantize(GgmlType t, const uint8_t* src, int64_t n, float* dst);
/// A whole tensor as floats (numel() of them).
Result<std::vector<float>> dequantize(const GgufTensor& t);

}  // namespace ingot::llm
