// Copyright ingot authors. Apache-2.0.
//
// The bytes tactics keep in an engine (Tactic::serialize / serialize_for) beyond a name: values
// appended in the host's byte order (engines are bound to their GPU and build), read back with
// every length checked, so a corrupt or foreign record is refused instead of read past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ingot::backend::cuda {

/// Appends the bytes of trivially copyable `v`.
template <class T>
void put_bytes(std::vector<uint8_t>& out, T v) {
  static_assert(std::is_trivially_copyable<T>::value, "plain values only");
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof v);
}

/// Reads what put_bytes wrote, in order; false (nothing read) once a value would pass the end.
class ParamReader {
 public:
  explicit ParamReader(const std::vector<uint8_t>& d) : d_(d) {}
  template <class T>
  bool get(T* v) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    if (d_.size() - off_ < sizeof(T)) return false;
    std::memcpy(v, d_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return true;
  }
  /// The next `n` bytes, in place.
  bool bytes(size_t n, const uint8_t** p) {
    if (d_.size() - off_ < n) return false;
    *p = d_.data() + off_;
    off_ += n;
    return true;
  }
  bool done() const { return off_ == d_.size(); }

 private:
  const std::vector<uint8_t>& d_;
  size_t off_ = 0;
};

}  // namespace ingot::backend::cuda
