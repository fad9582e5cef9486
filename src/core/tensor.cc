// Copyright ingot authors. Apache-2.0.
#include "core/tensor.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <sstream>

namespace ingot {

int64_t shape_numel(const Shape64& shape) {
  // Saturates instead of overflowing: shapes can come from untrusted files, and a saturated
  // count still fails every allocation or size check it reaches.
  constexpr int64_t kMax = int64_t{1} << 55;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    if (__builtin_mul_overflow(n, d, &n) || n > kMax) n = kMax;
  }
  return n;
}

Shape64 shape_strides(const Shape64& shape) {
  Shape64 s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

std::string shape_to_string(const Shape64& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

size_t storage_bytes(DataType t, int64_t numel) {
  int bits = data_type_bits(t);
  if (t == DataType::kString || numel <= 0) return 0;
  // Saturates like shape_numel: an absurd count from a corrupt file still fails allocation.
  constexpr int64_t kMaxBytes = int64_t{1} << 58;
  if (numel > kMaxBytes / 16) return static_cast<size_t>(kMaxBytes);
  return static_cast<size_t>((numel * bits + 7) / 8);
}

namespace {
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
}  // namespace

Result<Tensor> Tensor::zeros(DataType dtype, Shape64 shape) {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("negative dim in shape ", shape_to_string(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  // Guard the product against overflow before allocating.
  long double approx = 1;
  for (int64_t d : t.shape_) approx *= static_cast<long double>(d);
  if (approx > static_cast<long double>(std::numeric_limits<int64_t>::max() / 16))
    return make_status(StatusCode::kOutOfMemory, "tensor of shape ", shape_to_string(t.shape_),
                       " is too large");
  t.numel_ = shape_numel(t.shape_);
  if (dtype == DataType::kString) {
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(t.numel_));
    return t;
  }
  size_t bytes = storage_bytes(dtype, t.numel_);
  size_t alloc = ((bytes + 63) / 64) * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p)
    return make_status(StatusCode::kOutOfMemory, "cannot allocate ", bytes, " bytes for a ",
                       data_type_name(dtype), shape_to_string(t.shape_), " tensor");
  std::memset(p, 0, alloc);
  t.owner_ = std::shared_ptr<void>(p, AlignedFree());
  t.data_ = static_cast<uint8_t*>(p);
  return t;
}

Tensor Tensor::borrow(DataType dtype, Shape64 shape, const void* data,
                      std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.owner_ = std::move(owner);
  t.data_ = static_cast<uint8_t*>(const_cast<void*>(data));
  return t;
}

Tensor Tensor::from_strings(Shape64 shape, std::vector<std::string> values) {
  Tensor t = zeros(DataType::kString, std::move(shape)).value();
  *t.strings_ = std::move(values);
  t.strings_->resize(static_cast<size_t>(t.numel_));
  return t;
}

namespace {
int64_t sub_byte_get(const uint8_t* d, int64_t i, int bits, bool is_signed) {
  int per = 8 / bits;
  uint8_t byte = d[i / per];
  int shift = static_cast<int>(i % per) * bits;
  int64_t v = (byte >> shift) & ((1 << bits) - 1);
  if (is_signed && (v & (1 << (bits - 1)))) v -= (1 << bits);
  return v;
}
void sub_byte_set(uint8_t* d, int64_t i, int bits, int64_t v) {
  int per = 8 / bits;
  int shift = static_cast<int>(i % per) * bits;
  uint8_t mask = static_cast<uint8_t>(((1 << bits) - 1) << shift);
  d[i / per] = static_cast<uint8_t>((d[i / per] & ~mask) | ((v << shift) & mask));
}
template <class T>
T cast_from_double(double v) {
  if (std::isnan(v)) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (v >= 9.2233720368547758e18) return static_cast<T>(std::numeric_limits<int64_t>::max());
    if (v <= -9.2233720368547758e18) return static_cast<T>(std::numeric_limits<int64_t>::min());
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    if (v >= 1.8446744073709552e19) return static_cast<T>(std::numeric_limits<uint64_t>::max());
    if (v < 0) return static_cast<T>(static_cast<int64_t>(v));
    return static_cast<T>(static_cast<uint64_t>(v));
  }
}
}  // namespace

double Tensor::get_f64(int64_t i) const {
  switch (dtype_) {
    case DataType::kFloat32: return data<float>()[i];
    case DataType::kFloat64: return data<double>()[i];
    case DataType::kFloat16: return half_bits_to_float(data<uint16_t>()[i]);
    case DataType::kBFloat16: return bfloat16_bits_to_float(data<uint16_t>()[i]);
    case DataType::kUInt64: return static_cast<double>(data<uint64_t>()[i]);
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
      return small_float_to_float(data_[i], dtype_);
    case DataType::kFloat4E2M1:
      return small_float_to_float(static_cast<uint8_t>(sub_byte_get(data_, i, 4, false)), dtype_);
    default:
      if (is_integer(dtype_) || dtype_ == DataType::kBool) return static_cast<double>(get_i64(i));
      return std::numeric_limits<double>::quiet_NaN();  // strings, complex: no numeric value
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  switch (dtype_) {
    case DataType::kBool: return data_[i] != 0;
    case DataType::kUInt8: return data<uint8_t>()[i];
    case DataType::kInt8: return data<int8_t>()[i];
    case DataType::kUInt16: return data<uint16_t>()[i];
    case DataType::kInt16: return data<int16_t>()[i];
    case DataType::kUInt32: return data<uint32_t>()[i];
    case DataType::kInt32: return data<int32_t>()[i];
    case DataType::kUInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    case DataType::kInt64: return data<int64_t>()[i];
    case DataType::kUInt4: return sub_byte_get(data_, i, 4, false);
    case DataType::kInt4: return sub_byte_get(data_, i, 4, true);
    case DataType::kUInt2: return sub_byte_get(data_, i, 2, false);
    case DataType::kInt2: return sub_byte_get(data_, i, 2, true);
    default:
      if (is_float(dtype_)) return cast_from_double<int64_t>(get_f64(i));
      return 0;  // strings, complex: no numeric value
  }
}

void Tensor::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DataType::kFloat32: mutable_data<float>()[i] = static_cast<float>(v); return;
    case DataType::kFloat64: mutable_data<double>()[i] = v; return;
    case DataType::kFloat16: mutable_data<uint16_t>()[i] = float_to_half_bits(static_cast<float>(v)); return;
    case DataType::kBFloat16: mutable_data<uint16_t>()[i] = float_to_bfloat16_bits(static_cast<float>(v)); return;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
      data_[i] = float_to_small_float(static_cast<float>(v), dtype_, true);
      return;
    case DataType::kFloat4E2M1:
      sub_byte_set(data_, i, 4, float_to_small_float(static_cast<float>(v), dtype_, true));
      return;
    case DataType::kBool: data_[i] = v != 0; return;
    case DataType::kUInt64: mutable_data<uint64_t>()[i] = cast_from_double<uint64_t>(v); return;
    default: set_i64(i, cast_from_double<int64_t>(v)); return;
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  switch (dtype_) {
    case DataType::kBool: data_[i] = v != 0; return;
    case DataType::kUInt8: mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DataType::kInt8: mutable_data<int8_t>()[i] = static_cast<int8_t>(v); return;
    case DataType::kUInt16: mutable_data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case DataType::kInt16: mutable_data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DataType::kUInt32: mutable_data<uint32_t>()[i] = static_cast<uint32_t>(v); return;
    case DataType::kInt32: mutable_data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DataType::kUInt64: mutable_data<uint64_t>()[i] = static_cast<uint64_t>(v); return;
    case DataType::kInt64: mutable_data<int64_t>()[i] = v; return;
    case DataType::kUInt4: case DataType::kInt4: sub_byte_set(data_, i, 4, v); return;
    case DataType::kUInt2: case DataType::kInt2: sub_byte_set(data_, i, 2, v); return;
    default: set_f64(i, static_cast<double>(v)); return;
  }
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  Tensor t = zeros(dtype_, shape_).value();
  if (dtype_ == DataType::kString) {
    *t.strings_ = *strings_;
  } else if (nbytes() > 0) {
    std::memcpy(t.data_, data_, nbytes());
  }
  return t;
}

Result<Tensor> Tensor::reshaped(Shape64 shape) const {
  for (int64_t d : shape)
    if (d < 0) return invalid_argument("negative dim in shape ", shape_to_string(shape));
  if (shape_numel(shape) != numel_)
    return invalid_argument("cannot reshape ", shape_to_string(shape_), " to ",
                            shape_to_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::vector<double> Tensor::to_f64_vector() const {
  std::vector<double> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_f64(i);
  return v;
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_i64(i);
  return v;
}

std::string Tensor::to_string(size_t max_elements) const {
  std::ostringstream os;
  os << data_type_name(dtype_) << shape_to_string(shape_) << " {";
  int64_t n = std::min<int64_t>(numel_, static_cast<int64_t>(max_elements));
  for (int64_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    if (dtype_ == DataType::kString) os << '"' << (*strings_)[i] << '"';
    else if (is_float(dtype_)) os << get_f64(i);
    else os << get_i64(i);
  }
  if (n < numel_) os << ", ...";
  os << "}";
  return os.str();
}

Result<Tensor> permute_dims(const Tensor& in, const std::vector<size_t>& perm) {
  const size_t rank = in.shape().size();
  if (perm.size() != rank) return invalid_argument("permutation of ", perm.size(), " dims for a rank-", rank, " tensor");
  std::vector<bool> seen(rank, false);
  for (size_t p : perm) {
    if (p >= rank || seen[p]) return invalid_argument("not a permutation of ", rank, " dims");
    seen[p] = true;
  }
  const int bits = data_type_bits(in.dtype());
  if (in.dtype() == DataType::kString || bits < 8 || bits % 8)
    return invalid_argument("cannot permute ", data_type_name(in.dtype()), " tensors element by element");
  Shape64 out_shape;
  for (size_t p : perm) out_shape.push_back(in.shape()[p]);
  INGOT_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(in.dtype(), out_shape));
  const size_t es = static_cast<size_t>(bits / 8);
  Shape64 in_strides = shape_strides(in.shape());
  std::vector<int64_t> idx(rank, 0);
  const uint8_t* src = static_cast<const uint8_t*>(in.raw());
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_raw());
  for (int64_t o = 0; o < out.numel(); ++o) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * in_strides[perm[d]];
    std::memcpy(dst + static_cast<size_t>(o) * es, src + static_cast<size_t>(off) * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace ingot
