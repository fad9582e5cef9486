// Copyright ingot authors. Apache-2.0.
//
// Pointwise kernels: unary ops and Cast, binary ops with broadcasting, Where. The op is a
// run-time argument (a warp-uniform switch) rather than a template parameter, which keeps this
// file to 9 + 6 + 3 instantiations; the loops are memory bound, so the switch costs little.
#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace ew {
namespace {

__device__ __forceinline__ float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return powf(a, b);
    // NaN in either operand gives NaN (fmaxf/fminf would drop it), as the reference does.
    case BinaryOp::kMax: return (isnan(a) || isnan(b)) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
    case BinaryOp::kMin: return (isnan(a) || isnan(b)) ? __int_as_float(0x7fffffff) : fminf(a, b);
  }
  return a;
}

// Elements [0, nvec * N) move as packs (x and y 16-byte aligned, checked by the launcher);
// the tail [nvec * N, n) element by element.
template <class In, class Out>
__global__ void unary_kernel(UnaryOp op, UnaryParams p, const In* x, Out* y, int64_t n,
                             int64_t nvec) {
  INGOT_KERNEL_ENTRY();
  constexpr int N = 16 / (sizeof(In) < sizeof(Out) ? sizeof(In) : sizeof(Out));
  float lo = p.lo, hi = p.hi;
  if (p.lo_ptr) lo = to_f32(*static_cast<const In*>(p.lo_ptr));
  if (p.hi_ptr) hi = to_f32(*static_cast<const In*>(p.hi_ptr));
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto* xv = reinterpret_cast<const Pack<In, N>*>(x);
  auto* yv = reinterpret_cast<Pack<Out, N>*>(y);
  for (int64_t i = tid; i < nvec; i += stride) {
    Pack<In, N> a = xv[i];
    Pack<Out, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = from_f32<Out>(apply_unary(op, to_f32(a.v[k]), p.alpha, p.beta, lo, hi));
    yv[i] = r;
  }
  for (int64_t i = nvec * N + tid; i < n; i += stride)
    y[i] = from_f32<Out>(apply_unary(op, to_f32(x[i]), p.alpha, p.beta, lo, hi));
}

template <class T>
__global__ void binary_same_kernel(BinaryOp op, const T* a, const T* b,
                                   T* y, int64_t n, int64_t nvec) {
  INGOT_KERNEL_ENTRY();
  constexpr int N = 16 / sizeof(T);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto* av = reinterpret_cast<const Pack<T, N>*>(a);
  const auto* bv = reinterpret_cast<const Pack<T, N>*>(b);
  auto* yv = reinterpret_cast<Pack<T, N>*>(y);
  for (int64_t i = tid; i < nvec; i += stride) {
    Pack<T, N> pa = av[i], pb = bv[i], r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = from_f32<T>(apply_binary(op, to_f32(pa.v[k]), to_f32(pb.v[k])));
    yv[i] = r;
  }
  for (int64_t i = nvec * N + tid; i < n; i += stride) y[i] = from_f32<T>(apply_binary(op, to_f32(a[i]), to_f32(b[i])));
}

// No __restrict__ in this file: in-place steps may alias y with an input.
// I: the index type, uint32_t when n fits (64-bit division is a long software sequence: with
// int64 indices the squeeze-excite Mul ran at 12% of the H200's bandwidth).
template <class T, class I>
__global__ void binary_broadcast_kernel(BinaryOp op, const T* a, const T* b, T* y, I n, BroadcastDesc d) {
  INGOT_KERNEL_ENTRY();
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    I off[2] = {0, 0};
    I r = i;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      const I size = static_cast<I>(d.dims[dim]);
      const I idx = r % size;
      r /= size;
      off[0] += idx * static_cast<I>(d.strides[0][dim]);
      off[1] += idx * static_cast<I>(d.strides[1][dim]);
    }
    y[i] = from_f32<T>(apply_binary(op, to_f32(a[off[0]]), to_f32(b[off[1]])));
  }
}

// Broadcasts whose innermost dim is contiguous (stride 1) or broadcast (stride 0) in each operand
// and a whole number of 16-byte packs long, with every other stride of a contiguous operand a
// multiple of the pack: a thread per pack of y, the pack's offsets found once (the squeeze-excite
// Mul: x [N, HW, C] times s [N, 1, C] channels-last, [N*C, HW] times [N*C, 1] channels-first).
// splat_k: operand k is broadcast along the innermost dim (one element, repeated).
template <class T, class I>
__global__ void binary_broadcast_packed_kernel(BinaryOp op, const T* a, const T* b, T* y, I nvec, BroadcastDesc d,
                                               bool splat_a, bool splat_b) {
  INGOT_KERNEL_ENTRY();
  constexpr int N = 16 / sizeof(T);
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  const I inner = static_cast<I>(d.dims[d.rank - 1]) / N;  // packs per innermost row
  for (I v = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += stride) {
    I r = v / inner;
    const I c = (v - r * inner) * N;
    I off[2] = {c * static_cast<I>(d.strides[0][d.rank - 1]), c * static_cast<I>(d.strides[1][d.rank - 1])};
    for (int dim = d.rank - 2; dim >= 0; --dim) {
      const I size = static_cast<I>(d.dims[dim]);
      const I idx = r % size;
      r /= size;
      off[0] += idx * static_cast<I>(d.strides[0][dim]);
      off[1] += idx * static_cast<I>(d.strides[1][dim]);
    }
    Pack<T, N> pa, pb, out;
    if (splat_a) {
      const T e = a[off[0]];
#pragma unroll
      for (int k = 0; k < N; ++k) pa.v[k] = e;
    } else {
      pa = *reinterpret_cast<const Pack<T, N>*>(a + off[0]);
    }
    if (splat_b) {
      const T e = b[off[1]];
#pragma unroll
      for (int k = 0; k < N; ++k) pb.v[k] = e;
    } else {
      pb = *reinterpret_cast<const Pack<T, N>*>(b + off[1]);
    }
#pragma unroll
    for (int k = 0; k < N; ++k) out.v[k] = from_f32<T>(apply_binary(op, to_f32(pa.v[k]), to_f32(pb.v[k])));
    reinterpret_cast<Pack<T, N>*>(y)[v] = out;
  }
}

// Both operands y-contiguous over a trailing block of y's dims and broadcast over the dims before
// it ("rows": BERT's embeddings + a [1, S, H] constant), in 16-byte packs: operand k's pack v is
// v % period_k (period_k packs; v itself where the operand is as large as y).
template <class T>
__global__ void binary_rows_kernel(BinaryOp op, const T* a, const T* b, T* y, int64_t nvec, int64_t pa,
                                   int64_t pb) {
  INGOT_KERNEL_ENTRY();
  constexpr int N = 16 / sizeof(T);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const auto* av = reinterpret_cast<const Pack<T, N>*>(a);
  const auto* bv = reinterpret_cast<const Pack<T, N>*>(b);
  auto* yv = reinterpret_cast<Pack<T, N>*>(y);
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += stride) {
    const Pack<T, N> pa_v = av[v < pa ? v : v % pa], pb_v = bv[v < pb ? v : v % pb];
    Pack<T, N> r;
#pragma unroll
    for (int k = 0; k < N; ++k) r.v[k] = from_f32<T>(apply_binary(op, to_f32(pa_v.v[k]), to_f32(pb_v.v[k])));
    yv[v] = r;
  }
}

template <class T>
__global__ void where_kernel(const uint8_t* c, const T* x, const T* z, T* y, int64_t n, BroadcastDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[3];
    broadcast_offsets<3>(d, i, off);
    y[i] = c[off[0]] ? x[off[1]] : z[off[2]];
  }
}

}  // namespace
}  // namespace ew

cudaError_t launch_unary(UnaryOp op, const UnaryParams& p, FloatType in, FloatType out, const void* x, void* y,
                         int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ew::dispatch_float(in, [&](auto tin) {
    using In = typename decltype(tin)::type;
    ew::dispatch_float(out, [&](auto tout) {
      using Out = typename decltype(tout)::type;
      constexpr int64_t N = 16 / (sizeof(In) < sizeof(Out) ? sizeof(In) : sizeof(Out));
      const int64_t nvec = (ew::aligned16(x) && ew::aligned16(y)) ? n / N : 0;
      const int64_t work = nvec + (n - nvec * N);
      launch_kernel(ew::unary_kernel<In, Out>, ew::grid_for(work), ew::kThreads, 0, stream, op, p,
                    static_cast<const In*>(x), static_cast<Out*>(y), n, nvec);
    });
  });
  return cudaGetLastError();
}

namespace {

/// float nearest to d with round-to-odd, so a second rounding (to fp16/bf16) rounds once overall.
__device__ __forceinline__ float to_float_odd(double d) {
  float f = __double2float_rz(d);
  if (static_cast<double>(f) != d && isfinite(f)) {
    unsigned int u = __float_as_uint(f) | 1u;
    f = __uint_as_float(u);
  }
  return f;
}

__global__ void cast_kernel(CastType in, CastType out, const void* x, void* y, int64_t n) {
  INGOT_KERNEL_ENTRY();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    // Load: integers/bool as 64-bit two's complement bits, floats as double.
    int64_t v = 0;
    double d = 0;
    bool is_float = false;
    switch (in) {
      case CastType::kBool: v = static_cast<const uint8_t*>(x)[i] != 0; break;
      case CastType::kI8: v = static_cast<const int8_t*>(x)[i]; break;
      case CastType::kU8: v = static_cast<const uint8_t*>(x)[i]; break;
      case CastType::kI16: v = static_cast<const int16_t*>(x)[i]; break;
      case CastType::kU16: v = static_cast<const uint16_t*>(x)[i]; break;
      case CastType::kI32: v = static_cast<const int32_t*>(x)[i]; break;
      case CastType::kU32: v = static_cast<const uint32_t*>(x)[i]; break;
      case CastType::kI64: v = static_cast<const int64_t*>(x)[i]; break;
      case CastType::kU64: v = static_cast<int64_t>(static_cast<const uint64_t*>(x)[i]); break;
      case CastType::kF16: d = __half2float(static_cast<const __half*>(x)[i]); is_float = true; break;
      case CastType::kBF16: d = __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]); is_float = true; break;
      case CastType::kF32: d = static_cast<const float*>(x)[i]; is_float = true; break;
      case CastType::kF64: d = static_cast<const double*>(x)[i]; is_float = true; break;
    }
    if (!is_float) d = in == CastType::kU64 ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
    const bool nonzero = is_float ? d != 0.0 : v != 0;  // NaN != 0
    switch (out) {
      case CastType::kBool: static_cast<uint8_t*>(y)[i] = nonzero ? 1 : 0; break;
      case CastType::kI8: static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v); break;
      case CastType::kU8: static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v); break;
      case CastType::kI16: static_cast<int16_t*>(y)[i] = static_cast<int16_t>(v); break;
      case CastType::kU16: static_cast<uint16_t*>(y)[i] = static_cast<uint16_t>(v); break;
      case CastType::kI32: static_cast<int32_t*>(y)[i] = static_cast<int32_t>(v); break;
      case CastType::kU32: static_cast<uint32_t*>(y)[i] = static_cast<uint32_t>(v); break;
      case CastType::kI64: static_cast<int64_t*>(y)[i] = v; break;
      case CastType::kU64: static_cast<uint64_t*>(y)[i] = static_cast<uint64_t>(v); break;
      case CastType::kF16: static_cast<__half*>(y)[i] = __float2half_rn(to_float_odd(d)); break;
      case CastType::kBF16: static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(to_float_odd(d)); break;
      case CastType::kF32: static_cast<float*>(y)[i] = static_cast<float>(d); break;
      case CastType::kF64: static_cast<double*>(y)[i] = d; break;
    }
  }
}

}  // namespace

cudaError_t launch_cast(CastType in, CastType out, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool float_in = in == CastType::kF16 || in == CastType::kBF16 || in == CastType::kF32 || in == CastType::kF64;
  if (float_in && out != CastType::kBool) return cudaErrorInvalidValue;  // not offered (see the header)
  launch_kernel(cast_kernel, ew::grid_for(n), ew::kThreads, 0, stream, in, out, x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_binary_same_shape(BinaryOp op, FloatType t, const void* a, const void* b, void* y, int64_t n,
                                     cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t N = 16 / sizeof(T);
    const int64_t nvec = (ew::aligned16(a) && ew::aligned16(b) && ew::aligned16(y)) ? n / N : 0;
    const int64_t work = nvec + (n - nvec * N);
    launch_kernel(ew::binary_same_kernel<T>, ew::grid_for(work), ew::kThreads, 0, stream, op, static_cast<const T*>(a),
                  static_cast<const T*>(b), static_cast<T*>(y), n, nvec);
  });
  return cudaGetLastError();
}

namespace {
// Operand k's period along y's flat index when it is laid out as y over a trailing block of dims
// and broadcast (stride 0) over every dim before it: the block's size (n for an operand as large
// as y); 0 otherwise.
int64_t broadcast_row_period(const BroadcastDesc& d, int k) {
  int64_t period = 1;
  int dim = d.rank - 1;
  for (; dim >= 0; --dim) {  // the trailing block laid out as y's
    if (d.dims[dim] == 1) continue;
    if (d.strides[k][dim] != period) break;
    period *= d.dims[dim];
  }
  for (; dim >= 0; --dim)  // every dim before it broadcast
    if (d.dims[dim] != 1 && d.strides[k][dim] != 0) return 0;
  return period;
}

// The largest element offset operand k reaches (its extent minus one).
int64_t max_offset(const BroadcastDesc& d, int k) {
  int64_t m = 0;
  for (int dim = 0; dim < d.rank; ++dim) m += (d.dims[dim] - 1) * d.strides[k][dim];
  return m;
}

// Whether binary_broadcast_packed_kernel runs this map with packs of n elements: the innermost
// dim a whole number of packs, each operand contiguous (stride 1: its other strides multiples of
// the pack, its address 16-byte aligned) or broadcast (stride 0: splat) along it.
bool packed_broadcast(const BroadcastDesc& d, int64_t n, const void* a, const void* b, const void* y, bool splat[2]) {
  if (d.rank < 1 || d.dims[d.rank - 1] % n != 0 || !ew::aligned16(y)) return false;
  const void* ops[2] = {a, b};
  for (int k = 0; k < 2; ++k) {
    const int64_t s = d.strides[k][d.rank - 1];
    if (s != 0 && s != 1) return false;
    splat[k] = s == 0;
    if (splat[k]) continue;
    if (!ew::aligned16(ops[k])) return false;
    for (int dim = 0; dim + 1 < d.rank; ++dim)
      if (d.strides[k][dim] % n != 0) return false;
  }
  return true;
}
}  // namespace

cudaError_t launch_binary(BinaryOp op, FloatType t, const void* a, const void* b, void* y, int64_t n,
                          const BroadcastDesc& desc, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t pa = broadcast_row_period(desc, 0), pb = broadcast_row_period(desc, 1);
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int64_t N = 16 / sizeof(T);
    if (pa > 0 && pb > 0 && pa % N == 0 && pb % N == 0 && n % N == 0 && ew::aligned16(a) && ew::aligned16(b) &&
        ew::aligned16(y)) {
      launch_kernel(ew::binary_rows_kernel<T>, ew::grid_for(n / N), ew::kThreads, 0, stream, op,
                    static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n / N, pa / N, pb / N);
      return;
    }
    const T* at = static_cast<const T*>(a);
    const T* bt = static_cast<const T*>(b);
    T* yt = static_cast<T*>(y);
    const bool narrow = n < (int64_t{1} << 31) && max_offset(desc, 0) < (int64_t{1} << 31) &&
                        max_offset(desc, 1) < (int64_t{1} << 31);
    bool splat[2];
    if (packed_broadcast(desc, N, a, b, y, splat)) {
      if (narrow)
        launch_kernel(ew::binary_broadcast_packed_kernel<T, uint32_t>, ew::grid_for(n / N), ew::kThreads, 0, stream, op,
                      at, bt, yt, static_cast<uint32_t>(n / N), desc, splat[0], splat[1]);
      else
        launch_kernel(ew::binary_broadcast_packed_kernel<T, int64_t>, ew::grid_for(n / N), ew::kThreads, 0, stream, op,
                      at, bt, yt, n / N, desc, splat[0], splat[1]);
      return;
    }
    if (narrow)
      launch_kernel(ew::binary_broadcast_kernel<T, uint32_t>, ew::grid_for(n), ew::kThreads, 0, stream, op, at, bt, yt,
                    static_cast<uint32_t>(n), desc);
    else
      launch_kernel(ew::binary_broadcast_kernel<T, int64_t>, ew::grid_for(n), ew::kThreads, 0, stream, op, at, bt, yt,
                    n, desc);
  });
  return cudaGetLastError();
}

namespace {
// Integer ops in the unsigned type of the same width: wrapping without signed-overflow UB.
template <class T, class U>
__global__ void binary_int_kernel(BinaryOp op, const T* a, const T* b, T* y, int64_t n, BroadcastDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[2];
    ew::broadcast_offsets<2>(d, i, off);
    const T x = a[off[0]], z = b[off[1]];
    T r;
    switch (op) {
      case BinaryOp::kAdd: r = static_cast<T>(static_cast<U>(x) + static_cast<U>(z)); break;
      case BinaryOp::kSub: r = static_cast<T>(static_cast<U>(x) - static_cast<U>(z)); break;
      case BinaryOp::kMul: r = static_cast<T>(static_cast<U>(x) * static_cast<U>(z)); break;
      case BinaryOp::kMax: r = x > z ? x : z; break;
      default: r = x < z ? x : z; break;  // kMin (the launcher takes no other op)
    }
    y[i] = r;
  }
}
}  // namespace

cudaError_t launch_binary_int(BinaryOp op, bool is64, const void* a, const void* b, void* y, int64_t n,
                              const BroadcastDesc& desc, cudaStream_t stream) {
  if (op != BinaryOp::kAdd && op != BinaryOp::kSub && op != BinaryOp::kMul && op != BinaryOp::kMax &&
      op != BinaryOp::kMin)
    return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  if (is64)
    launch_kernel(binary_int_kernel<int64_t, uint64_t>, ew::grid_for(n), ew::kThreads, 0, stream, op,
                  static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), static_cast<int64_t*>(y), n, desc);
  else
    launch_kernel(binary_int_kernel<int32_t, uint32_t>, ew::grid_for(n), ew::kThreads, 0, stream, op,
                  static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), static_cast<int32_t*>(y), n, desc);
  return cudaGetLastError();
}

cudaError_t launch_where(FloatType t, const uint8_t* cond, const void* x, const void* z, void* y, int64_t n,
                         const BroadcastDesc& desc, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(ew::where_kernel<T>, ew::grid_for(n), ew::kThreads, 0, stream, cond, static_cast<const T*>(x),
                  static_cast<const T*>(z), static_cast<T*>(y), n, desc);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
