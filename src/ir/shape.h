// Copyright ingot authors. Apache-2.0.
//
// Shapes as the graph sees them: each dim is a known size, a named symbol ("batch") or
// unknown; the rank itself may be unknown. Symbols are kept through inference (a Relu of
// [batch,3] is [batch,3]), so an engine can later bind them per optimization profile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ingot::ir {

class Dim {
 public:
  Dim() = default;                                      ///< unknown
  Dim(int64_t value) : value_(value) {}                 // NOLINT: a known size
  static Dim symbol(std::string name) { Dim d; d.symbol_ = std::move(name); return d; }
  static Dim unknown() { return Dim(); }

  bool is_known() const { return value_ >= 0; }
  bool is_symbol() const { return !symbol_.empty(); }
  bool is_unknown() const { return value_ < 0 && symbol_.empty(); }
  int64_t value() const { return value_; }  ///< -1 unless is_known()
  const std::string& symbol_name() const { return symbol_; }

  bool operator==(const Dim& o) const { return value_ == o.value_ && symbol_ == o.symbol_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  /// Whether both dims are the same for every binding of symbols: the same known value or the same
  /// symbol (two unknown dims may differ).
  bool provably_equal(const Dim& o) const { return (is_known() || is_symbol()) && *this == o; }
  /// "3", "batch" or "?"
  std::string to_string() const;

 private:
  int64_t value_ = -1;
  std::string symbol_;
};

class Shape {
 public:
  Shape() = default;  ///< rank 0 (a scalar)
  Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}  // NOLINT
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  static Shape from_concrete(const Shape64& dims);
  static Shape unknown_rank() { Shape s; s.rank_known_ = false; return s; }

  bool rank_known() const { return rank_known_; }
  size_t rank() const { return dims_.size(); }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& mutable_dims() { return dims_; }
  const Dim& operator[](size_t i) const { return dims_[i]; }
  Dim& operator[](size_t i) { return dims_[i]; }
  /// Known rank and every dim a known size.
  bool is_concrete() const;
  /// The sizes; only meaningful when is_concrete().
  Shape64 concrete() const;
  bool operator==(const Shape& o) const { return rank_known_ == o.rank_known_ && dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[batch,3,224,224]", "[]" for a scalar, "[*]" for unknown rank.
  std::string to_string() const;

 private:
  std::vector<Dim> dims_;
  bool rank_known_ = true;
};

/// Multidirectional (numpy) broadcast of two shapes. A symbol against 1 stays the symbol;
/// two different symbols give an unknown dim; two known sizes that are neither equal nor 1
/// are an error naming both shapes.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

/// Dim orders between channels-first and channels-last layouts of rank n (n >= 2): output dim d
/// is input dim perm[d]. [N, C, spatial...] -> [N, spatial..., C] and back; weights [K, C, k...]
/// and [K, k..., C] permute the same way.
std::vector<size_t> channels_last_perm(size_t n);
std::vector<size_t> channels_first_perm(size_t n);
/// out[i] = in[perm[i]]; a shape of unknown rank or of another rank than perm comes back as is.
Shape permute_shape(const Shape& in, const std::vector<size_t>& perm);
/// Concrete broadcast, same rules.
Result<Shape64> broadcast_shapes(const Shape64& a, const Shape64& b);

/// a * b for element counts, saturating at 2^62 instead of overflowing (dims come from files).
inline int64_t mul_dims(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > (int64_t{1} << 62) || r < -(int64_t{1} << 62))
    return (a < 0) != (b < 0) ? -(int64_t{1} << 62) : (int64_t{1} << 62);
  return r;
}

/// Normalizes a possibly negative axis against `rank`; error when outside [-rank, rank).
Result<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace ingot::ir
