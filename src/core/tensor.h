// Copyright ingot authors. Apache-2.0.
//
// Tensor: a dtype, a concrete shape and a block of host memory, shared by reference.
// Copying a Tensor shares the storage (like a shared_ptr); clone() copies the elements.
// Storage is either allocated here (zeroed, 64-byte aligned) or borrowed from an owner such
// as a parsed model or a memory-mapped external-data file, so weights are never copied
// more than once. Sub-byte types (int4, uint4, float4e2m1, int2, uint2) are packed low
// bits first, as ONNX stores them. Strings live in a vector<string> of numel() entries.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ingot {

using Shape64 = std::vector<int64_t>;

/// Product of the dims (1 for a scalar), saturating at 2^55. Dims must be non-negative.
int64_t shape_numel(const Shape64& shape);
/// Row-major element strides.
Shape64 shape_strides(const Shape64& shape);
/// "[2,3,4]"
std::string shape_to_string(const Shape64& shape);
/// Bytes needed for `numel` elements of `t` (sub-byte types rounded up to whole bytes).
size_t storage_bytes(DataType t, int64_t numel);

class Tensor {
 public:
  Tensor() = default;

  /// New zero-filled tensor (empty strings for kString). Fails on negative dims or when the
  /// allocation fails (kOutOfMemory).
  static Result<Tensor> zeros(DataType dtype, Shape64 shape);
  /// Zero-copy view of `data` (at least storage_bytes(dtype, numel) bytes) kept alive by
  /// `owner`. The data must not be written through the view.
  static Tensor borrow(DataType dtype, Shape64 shape, const void* data,
                       std::shared_ptr<const void> owner);
  /// Tensor of dtype from a vector whose C++ type matches the dtype's storage
  /// (float for f32, int64_t for i64, uint8_t/bool for bool, Float16 for f16, ...).
  template <class T>
  static Tensor from_vector(DataType dtype, Shape64 shape, const std::vector<T>& values);
  static Tensor from_strings(Shape64 shape, std::vector<std::string> values);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape64& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return storage_bytes(dtype_, numel_); }

  const void* raw() const { return data_; }
  void* mutable_raw() { return data_; }
  template <class T>
  const T* data() const { return static_cast<const T*>(static_cast<const void*>(data_)); }
  template <class T>
  T* mutable_data() { return static_cast<T*>(static_cast<void*>(data_)); }
  const std::vector<std::string>& strings() const { return *strings_; }
  std::vector<std::string>& mutable_strings() { return *strings_; }

  /// Element i (flat, row-major) of any numeric or bool dtype, as double / int64. Slow but
  /// total: the reference backend's way to treat every dtype alike.
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  /// Stores v in element i, converting to the dtype (round to nearest, wrap for integers as
  /// a C cast would after truncation toward zero; bool is v != 0).
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);

  /// Deep copy.
  Tensor clone() const;
  /// Same storage, new shape with the same numel.
  Result<Tensor> reshaped(Shape64 shape) const;
  /// All elements as doubles / int64 (convenience for tests and small kernels).
  std::vector<double> to_f64_vector() const;
  std::vector<int64_t> to_i64_vector() const;
  /// "f32[2,3] {1, 2, 3, ...}" with at most `max_elements` values.
  std::string to_string(size_t max_elements = 8) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  Shape64 shape_;
  int64_t numel_ = 0;
  std::shared_ptr<const void> owner_;
  uint8_t* data_ = nullptr;
  std::shared_ptr<std::vector<std::string>> strings_;
};

/// A copy with dims reordered: output dim d is input dim perm[d] (numpy transpose). Whole-byte
/// element types only (kInvalidArgument for strings and packed sub-byte types).
Result<Tensor> permute_dims(const Tensor& in, const std::vector<size_t>& perm);

template <class T>
Tensor Tensor::from_vector(DataType dtype, Shape64 shape, const std::vector<T>& values) {
  Tensor t = zeros(dtype, std::move(shape)).value();
  size_t bytes = std::min(t.nbytes(), values.size() * sizeof(T));
  if (bytes) std::memcpy(t.data_, values.data(), bytes);
  return t;
}

}  // namespace ingot
