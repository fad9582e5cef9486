// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for the binary / variadic elementwise ops: arithmetic, comparisons,
// logic, bitwise ops and Where. Integers are computed in their own type (wrapping like C
// unsigned arithmetic), floats in double and rounded once to the output type. The unary ops
// and activations are in elementwise_unary.cc.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/shape.h"

namespace ingot::cpu {

void register_elementwise_unary_kernels(KernelRegistry& r);

namespace {

template <class T>
struct Tag {
  using type = T;
};

template <class T>
constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                          std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

/// Calls f(Tag<T>) for the storage type of `dt`; false for dtypes without one here.
template <class F>
bool visit_numeric(DataType dt, F&& f) {
  switch (dt) {
    case DataType::kFloat32: f(Tag<float>{}); return true;
    case DataType::kFloat64: f(Tag<double>{}); return true;
    case DataType::kFloat16: f(Tag<Float16>{}); return true;
    case DataType::kBFloat16: f(Tag<BFloat16>{}); return true;
    case DataType::kInt8: f(Tag<int8_t>{}); return true;
    case DataType::kInt16: f(Tag<int16_t>{}); return true;
    case DataType::kInt32: f(Tag<int32_t>{}); return true;
    case DataType::kInt64: f(Tag<int64_t>{}); return true;
    case DataType::kUInt8: f(Tag<uint8_t>{}); return true;
    case DataType::kUInt16: f(Tag<uint16_t>{}); return true;
    case DataType::kUInt32: f(Tag<uint32_t>{}); return true;
    case DataType::kUInt64: f(Tag<uint64_t>{}); return true;
    case DataType::kBool: f(Tag<uint8_t>{}); return true;
    default: return false;
  }
}

template <class T>
inline double ld(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
inline T st(double v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// Output 0 with the given dtype and shape, allocating it unless inference already did.
Result<Tensor*> output0(KernelContext& k, DataType dt, const Shape64& shape) {
  Tensor& y = k.output(0);
  if (y.defined() && y.dtype() == dt && y.shape() == shape) return &y;
  return k.allocate_output(0, dt, shape);
}

/// Shapes for a binary op after legacy (opset < 7, broadcast=1) alignment of B to A.
Result<Shape64> legacy_b_shape(const KernelContext& k, const Shape64& a, const Shape64& b) {
  if (k.opset() >= 7 || k.attrs().get_int("broadcast", 0) == 0) return b;
  int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  int64_t axis = k.attrs().get_int("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (rb > ra || axis < 0 || axis + rb > ra)
    return k.error("legacy broadcast of ", shape_to_string(b), " to ", shape_to_string(a), " impossible");
  Shape64 out(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) out[static_cast<size_t>(axis + i)] = b[static_cast<size_t>(i)];
  return out;
}

/// y[i] = f(a[ia(i)], b[ib(i)]) over the flat indices of y.
template <class A, class B, class O, class F>
void binary_loop(const A* pa, const Shape64& sa, const B* pb, const Shape64& sb, O* py,
                 const Shape64& sy, F&& f) {
  int64_t n = shape_numel(sy);
  if (n == 0) return;
  int64_t na = shape_numel(sa), nb = shape_numel(sb);
  if (na == n && nb == n && sa == sy && sb == sy) {
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], pb[i]);
  } else if (na == n && sa == sy && nb == 1) {
    const B bv = pb[0];
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[i], bv);
  } else if (nb == n && sb == sy && na == 1) {
    const A av = pa[0];
    for (int64_t i = 0; i < n; ++i) py[i] = f(av, pb[i]);
  } else {
    BroadcastIndexer ia(sy, sa), ib(sy, sb);
    for (int64_t i = 0; i < n; ++i) py[i] = f(pa[ia(i)], pb[ib(i)]);
  }
}

/// Common prologue of binary kernels: broadcast shape (legacy rules included).
struct BinaryShapes {
  Shape64 a, b, y;
};
Result<BinaryShapes> binary_shapes(const KernelContext& k, const Tensor& a, const Tensor& b) {
  BinaryShapes s;
  s.a = a.shape();
  INGOT_ASSIGN_OR_RETURN(s.b, legacy_b_shape(k, a.shape(), b.shape()));
  auto y = ir::broadcast_shapes(s.a, s.b);
  if (!y.ok()) return k.error(y.status().message());
  s.y = *y;
  return s;
}

enum class Arith { kAdd, kSub, kMul, kDiv, kMod, kFmod, kMax, kMin };

/// Integer arithmetic in T with C-unsigned wrapping; `bad` set on division by zero.
template <class T>
inline T int_arith(Arith op, T a, T b, bool& bad) {
  using U = uint64_t;
  switch (op) {
    case Arith::kAdd: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case Arith::kSub: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case Arith::kMul: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case Arith::kMax: return a < b ? b : a;
    case Arith::kMin: return b < a ? b : a;
    case Arith::kDiv:
    case Arith::kMod:
    case Arith::kFmod: {
      if (b == 0) {
        bad = true;
        return 0;
      }
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) {  // avoid the INT_MIN / -1 trap: quotient wraps, remainder is 0
          return op == Arith::kDiv ? static_cast<T>(U(0) - static_cast<U>(a)) : T(0);
        }
      }
      if (op == Arith::kDiv) return static_cast<T>(a / b);  // truncation toward zero
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>) {
        if (op == Arith::kMod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    }
  }
  return 0;
}

/// numpy's floating remainder: result has the divisor's sign.
inline double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (b == 0 || std::isnan(m)) return m;
  if (m != 0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}

inline double float_arith(Arith op, double a, double b) {
  switch (op) {
    case Arith::kAdd: return a + b;
    case Arith::kSub: return a - b;
    case Arith::kMul: return a * b;
    case Arith::kDiv: return a / b;
    case Arith::kMod: return py_fmod(a, b);
    case Arith::kFmod: return std::fmod(a, b);
    case Arith::kMax: return (std::isnan(a) || std::isnan(b)) ? std::nan("") : (a < b ? b : a);
    case Arith::kMin: return (std::isnan(a) || std::isnan(b)) ? std::nan("") : (b < a ? b : a);
  }
  return 0;
}

/// y = a op b with the storage type T of a/b/y; `sy` is y's shape.
template <class T>
Status arith_typed(KernelContext& k, Arith op, const T* pa, const Shape64& sa, const T* pb,
                   const Shape64& sb, T* py, const Shape64& sy) {
  if constexpr (kIsFloat<T>) {
    if constexpr (std::is_same_v<T, float>) {
      switch (op) {  // the hot cases, exact in float
        case Arith::kAdd: binary_loop(pa, sa, pb, sb, py, sy, [](float x, float y) { return x + y; }); return Status::Ok();
        case Arith::kSub: binary_loop(pa, sa, pb, sb, py, sy, [](float x, float y) { return x - y; }); return Status::Ok();
        case Arith::kMul: binary_loop(pa, sa, pb, sb, py, sy, [](float x, float y) { return x * y; }); return Status::Ok();
        case Arith::kDiv: binary_loop(pa, sa, pb, sb, py, sy, [](float x, float y) { return x / y; }); return Status::Ok();
        default: break;
      }
    }
    binary_loop(pa, sa, pb, sb, py, sy, [op](T x, T y) { return st<T>(float_arith(op, ld(x), ld(y))); });
    return Status::Ok();
  } else {
    bool bad = false;
    binary_loop(pa, sa, pb, sb, py, sy, [op, &bad](T x, T y) { return int_arith<T>(op, x, y, bad); });
    if (bad) return k.error("integer division by zero");
    return Status::Ok();
  }
}

KernelFn arith_kernel(Arith op) {
  return [op](KernelContext& k) -> Status {
    const Tensor& a = *k.input(0);
    const Tensor& b = *k.input(1);
    if (a.dtype() != b.dtype()) return k.error("input types differ: ", data_type_name(a.dtype()), " vs ", data_type_name(b.dtype()));
    INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, a.dtype(), s.y));
    Status status = Status::Ok();
    Arith eff = op;
    if (op == Arith::kMod && k.attrs().get_int("fmod", 0) == 1) eff = Arith::kFmod;
    bool ok = a.dtype() != DataType::kBool && visit_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      status = arith_typed<T>(k, eff, a.data<T>(), s.a, b.data<T>(), s.b, y->mutable_data<T>(), s.y);
    });
    if (!ok) return k.unsupported_case("type ", data_type_name(a.dtype()));
    return status;
  };
}

/// Integer power by squaring with wrapping; negative exponents give the truncated value.
template <class T>
T int_pow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return static_cast<T>((e % 2 == 0) ? 1 : -1);
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (e > 0) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

/// double → T for integer T, saturating instead of UB on out-of-range / NaN.
template <class T>
T double_to_int(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

Status pow_kernel(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, a.dtype(), s.y));
  bool b_int = is_integer(b.dtype());
  bool ok_b = b_int || b.dtype() == DataType::kFloat32 || b.dtype() == DataType::kFloat64 ||
              b.dtype() == DataType::kFloat16 || b.dtype() == DataType::kBFloat16;
  bool ok_a = false;
  if (ok_b && a.dtype() != DataType::kBool) {
    ok_a = visit_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* pa = a.data<T>();
      T* py = y->mutable_data<T>();
      if constexpr (std::is_same_v<T, float>) {
        if (b.dtype() == DataType::kFloat32) {
          binary_loop(pa, s.a, b.data<float>(), s.b, py, s.y,
                      [](float x, float e) { return static_cast<float>(std::pow(double(x), double(e))); });
          return;
        }
      }
      // Generic path: exponent read element by element through the indexer.
      int64_t n = shape_numel(s.y);
      BroadcastIndexer ia(s.y, s.a), ib(s.y, s.b);
      for (int64_t i = 0; i < n; ++i) {
        T x = pa[ia(i)];
        int64_t j = ib(i);
        if constexpr (kIsFloat<T>) {
          double e = b_int ? static_cast<double>(b.get_i64(j)) : b.get_f64(j);
          py[i] = st<T>(std::pow(ld(x), e));
        } else if (b_int) {
          py[i] = int_pow<T>(static_cast<int64_t>(x), b.get_i64(j));
        } else {
          py[i] = double_to_int<T>(std::pow(static_cast<double>(x), b.get_f64(j)));
        }
      }
    });
  }
  if (!ok_a) return k.unsupported_case("types ", data_type_name(a.dtype()), ", ", data_type_name(b.dtype()));
  return Status::Ok();
}

enum class Cmp { kEq, kLt, kLe, kGt, kGe };

template <class T>
inline bool compare(Cmp op, T a, T b) {
  switch (op) {
    case Cmp::kEq: return a == b;
    case Cmp::kLt: return a < b;
    case Cmp::kLe: return a <= b;
    case Cmp::kGt: return a > b;
    case Cmp::kGe: return a >= b;
  }
  return false;
}

KernelFn compare_kernel(Cmp op) {
  return [op](KernelContext& k) -> Status {
    const Tensor& a = *k.input(0);
    const Tensor& b = *k.input(1);
    if (a.dtype() != b.dtype()) return k.error("input types differ: ", data_type_name(a.dtype()), " vs ", data_type_name(b.dtype()));
    INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, DataType::kBool, s.y));
    uint8_t* py = y->mutable_data<uint8_t>();
    if (a.dtype() == DataType::kString) {
      if (op != Cmp::kEq) return k.unsupported_case("string comparison other than Equal");
      binary_loop(a.strings().data(), s.a, b.strings().data(), s.b, py, s.y,
                  [](const std::string& x, const std::string& y) { return uint8_t(x == y); });
      return Status::Ok();
    }
    bool ok = visit_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kIsFloat<T>) {
        binary_loop(a.data<T>(), s.a, b.data<T>(), s.b, py, s.y,
                    [op](T x, T y) { return uint8_t(compare(op, ld(x), ld(y))); });
      } else {
        binary_loop(a.data<T>(), s.a, b.data<T>(), s.b, py, s.y,
                    [op](T x, T y) { return uint8_t(compare(op, x, y)); });
      }
    });
    if (!ok) return k.unsupported_case("type ", data_type_name(a.dtype()));
    return Status::Ok();
  };
}

enum class Logic { kAnd, kOr, kXor };

KernelFn logic_kernel(Logic op) {
  return [op](KernelContext& k) -> Status {
    const Tensor& a = *k.input(0);
    const Tensor& b = *k.input(1);
    if (a.dtype() != DataType::kBool || b.dtype() != DataType::kBool)
      return k.error("inputs must be bool, got ", data_type_name(a.dtype()), ", ", data_type_name(b.dtype()));
    INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, DataType::kBool, s.y));
    binary_loop(a.data<uint8_t>(), s.a, b.data<uint8_t>(), s.b, y->mutable_data<uint8_t>(), s.y,
                [op](uint8_t x, uint8_t y) -> uint8_t {
                  bool p = x != 0, q = y != 0;
                  return op == Logic::kAnd ? (p && q) : op == Logic::kOr ? (p || q) : (p != q);
                });
    return Status::Ok();
  };
}

KernelFn bitwise_kernel(Logic op) {
  return [op](KernelContext& k) -> Status {
    const Tensor& a = *k.input(0);
    const Tensor& b = *k.input(1);
    if (a.dtype() != b.dtype()) return k.error("input types differ");
    if (!is_integer(a.dtype()) && a.dtype() != DataType::kBool)
      return k.unsupported_case("type ", data_type_name(a.dtype()));
    INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, a.dtype(), s.y));
    bool ok = visit_numeric(a.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!kIsFloat<T>) {
        binary_loop(a.data<T>(), s.a, b.data<T>(), s.b, y->mutable_data<T>(), s.y, [op](T x, T y) {
          return static_cast<T>(op == Logic::kAnd ? (x & y) : op == Logic::kOr ? (x | y) : (x ^ y));
        });
      }
    });
    if (!ok) return k.unsupported_case("type ", data_type_name(a.dtype()));
    return Status::Ok();
  };
}

Status bitshift_kernel(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  if (a.dtype() != b.dtype()) return k.error("input types differ");
  if (!is_integer(a.dtype())) return k.unsupported_case("type ", data_type_name(a.dtype()));
  bool left = k.attrs().get_string("direction", "") == "LEFT";
  INGOT_ASSIGN_OR_RETURN(BinaryShapes s, binary_shapes(k, a, b));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, a.dtype(), s.y));
  bool ok = visit_numeric(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      using U = std::make_unsigned_t<T>;
      constexpr int64_t kBits = sizeof(T) * 8;
      binary_loop(a.data<T>(), s.a, b.data<T>(), s.b, y->mutable_data<T>(), s.y, [left](T x, T n) -> T {
        int64_t sh = static_cast<int64_t>(n);
        if (sh < 0 || sh >= kBits) return (!left && x < 0) ? static_cast<T>(-1) : T(0);
        if (left) return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(x)) << sh));
        if constexpr (std::is_signed_v<T>) {
          // arithmetic shift, written without relying on implementation-defined >> of negatives
          return x < 0 ? static_cast<T>(~(~x >> sh)) : static_cast<T>(x >> sh);
        } else {
          return static_cast<T>(x >> sh);
        }
      });
    }
  });
  if (!ok) return k.unsupported_case("type ", data_type_name(a.dtype()));
  return Status::Ok();
}

/// Max, Min, Sum, Mean over any number of broadcast inputs.
KernelFn variadic_kernel(Arith op, bool mean) {
  return [op, mean](KernelContext& k) -> Status {
    std::vector<const Tensor*> xs;
    for (size_t i = 0; i < k.num_inputs(); ++i)
      if (k.has_input(i)) xs.push_back(k.input(i));
    if (xs.empty()) return k.error("needs at least one input");
    DataType dt = xs[0]->dtype();
    Shape64 shape = xs[0]->shape();
    for (const Tensor* x : xs) {
      if (x->dtype() != dt) return k.error("input types differ");
      auto r = ir::broadcast_shapes(shape, x->shape());
      if (!r.ok()) return k.error(r.status().message());
      shape = *r;
    }
    INGOT_ASSIGN_OR_RETURN(Tensor * y, output0(k, dt, shape));
    Status status = Status::Ok();
    bool ok = dt != DataType::kBool && visit_numeric(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* py = y->mutable_data<T>();
      if constexpr (kIsFloat<T>) {
        // Accumulate in double, round once at the end.
        int64_t n = shape_numel(shape);
        std::vector<double> acc(static_cast<size_t>(n));
        for (size_t j = 0; j < xs.size(); ++j) {
          const T* px = xs[j]->data<T>();
          BroadcastIndexer ix(shape, xs[j]->shape());
          for (int64_t i = 0; i < n; ++i) {
            double v = ld(px[ix(i)]);
            acc[static_cast<size_t>(i)] = j == 0 ? v : float_arith(op, acc[static_cast<size_t>(i)], v);
          }
        }
        double div = mean ? static_cast<double>(xs.size()) : 1.0;
        for (int64_t i = 0; i < n; ++i) py[i] = st<T>(acc[static_cast<size_t>(i)] / div);
      } else {
        if (mean) {
          status = k.unsupported_case("Mean of integer type");
          return;
        }
        binary_loop(py, shape, xs[0]->data<T>(), xs[0]->shape(), py, shape, [](T, T x) { return x; });
        bool bad = false;
        for (size_t j = 1; j < xs.size(); ++j) {
          binary_loop(py, shape, xs[j]->data<T>(), xs[j]->shape(), py, shape,
                      [op, &bad](T acc, T x) { return int_arith<T>(op, acc, x, bad); });
        }
      }
    });
    if (!ok) return k.unsupported_case("type ", data_type_name(dt));
    return status;
  };
}

Status where_kernel(KernelContext& k) {
  const Tensor& c = *k.input(0);
  const Tensor& x = *k.input(1);
  const Tensor& yv = *k.input(2);
  if (c.dtype() != DataType::kBool) return k.error("condition must be bool");
  if (x.dtype() != yv.dtype()) return k.error("X and Y types differ");
  Shape64 shape = c.shape();
  for (const Tensor* t : {&x, &yv}) {
    auto r = ir::broadcast_shapes(shape, t->shape());
    if (!r.ok()) return k.error(r.status().message());
    shape = *r;
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * out, output0(k, x.dtype(), shape));
  int64_t n = shape_numel(shape);
  BroadcastIndexer ic(shape, c.shape()), ix(shape, x.shape()), iy(shape, yv.shape());
  const uint8_t* pc = c.data<uint8_t>();
  if (x.dtype() == DataType::kString) {
    auto& o = out->mutable_strings();
    for (int64_t i = 0; i < n; ++i)
      o[static_cast<size_t>(i)] = pc[ic(i)] ? x.strings()[static_cast<size_t>(ix(i))] : yv.strings()[static_cast<size_t>(iy(i))];
    return Status::Ok();
  }
  int bits = data_type_bits(x.dtype());
  if (bits % 8 != 0 || bits == 0) {
    for (int64_t i = 0; i < n; ++i) out->set_f64(i, pc[ic(i)] ? x.get_f64(ix(i)) : yv.get_f64(iy(i)));
    return Status::Ok();
  }
  size_t es = static_cast<size_t>(bits / 8);
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  const uint8_t* py = static_cast<const uint8_t*>(yv.raw());
  uint8_t* po = static_cast<uint8_t*>(out->mutable_raw());
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = pc[ic(i)] ? px + static_cast<size_t>(ix(i)) * es : py + static_cast<size_t>(iy(i)) * es;
    std::memcpy(po + static_cast<size_t>(i) * es, src, es);
  }
  return Status::Ok();
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  r.add("Add", arith_kernel(Arith::kAdd));
  r.add("Sub", arith_kernel(Arith::kSub));
  r.add("Mul", arith_kernel(Arith::kMul));
  r.add("Div", arith_kernel(Arith::kDiv));
  r.add("Mod", arith_kernel(Arith::kMod));
  r.add("Pow", pow_kernel);
  r.add("Equal", compare_kernel(Cmp::kEq));
  r.add("Less", compare_kernel(Cmp::kLt));
  r.add("LessOrEqual", compare_kernel(Cmp::kLe));
  r.add("Greater", compare_kernel(Cmp::kGt));
  r.add("GreaterOrEqual", compare_kernel(Cmp::kGe));
  r.add("And", logic_kernel(Logic::kAnd));
  r.add("Or", logic_kernel(Logic::kOr));
  r.add("Xor", logic_kernel(Logic::kXor));
  r.add("BitwiseAnd", bitwise_kernel(Logic::kAnd));
  r.add("BitwiseOr", bitwise_kernel(Logic::kOr));
  r.add("BitwiseXor", bitwise_kernel(Logic::kXor));
  r.add("BitShift", bitshift_kernel);
  r.add("Max", variadic_kernel(Arith::kMax, false));
  r.add("Min", variadic_kernel(Arith::kMin, false));
  r.add("Sum", variadic_kernel(Arith::kAdd, false));
  r.add("Mean", variadic_kernel(Arith::kAdd, true));
  r.add("Where", where_kernel);
  register_elementwise_unary_kernels(r);
}

}  // namespace ingot::cpu
