// Copyright ingot authors. Apache-2.0.
//
// Pooling kernels. Windowed pooling runs one thread per output element (channels-first) or per
// output pixel and group of channels (channels-last) and walks its window directly (windows are
// small: 2x2 to 7x7); the global forms run one warp per plane. All are memory bound; fp32
// accumulation, one rounding on store.
#include <cfloat>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/pool/pool_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::Pack;
using ew::to_f32;

// Taps of one window along one dim: [first, last) are in the input, `padded` count toward
// count_include_pad. I is the index type: int32_t whenever the tensors allow it (64-bit
// division and multiplication made the kernel compute-bound: ResNet-50's 3x3/2 MaxPool at
// batch 128 ran at 6.6 % of the memory roofline with int64_t indices).
template <class I>
struct Taps {
  I start, valid, padded;
};

template <class I>
__device__ __forceinline__ Taps<I> window_taps(const PoolDesc& d, int dim, I o) {
  const I kernel = static_cast<I>(d.kernel[dim]), dil = static_cast<I>(d.dilation[dim]);
  const I in = static_cast<I>(d.in[dim]), pb = static_cast<I>(d.pad_begin[dim]), pe = static_cast<I>(d.pad_end[dim]);
  const I start = o * static_cast<I>(d.stride[dim]) - pb;
  I valid = 0, padded = 0;
  for (I t = 0; t < kernel; ++t) {
    const I c = start + t * dil;
    valid += (c >= 0 && c < in);
    padded += (c >= -pb && c < in + pe);
  }
  return {start, valid, padded};
}

// Dims are normalized to 3 by the launcher (leading unit dims), so the loops are fixed.
template <class T, class I>
__global__ void pool_kernel(PoolOp op, const T* x, T* y, PoolDesc d, I n) {
  INGOT_KERNEL_ENTRY();
  const I grid_stride = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  const I in0 = static_cast<I>(d.in[0]), in1 = static_cast<I>(d.in[1]), in2 = static_cast<I>(d.in[2]);
  const I out0 = static_cast<I>(d.out[0]), out1 = static_cast<I>(d.out[1]), out2 = static_cast<I>(d.out[2]);
  const I k0n = static_cast<I>(d.kernel[0]), k1n = static_cast<I>(d.kernel[1]), k2n = static_cast<I>(d.kernel[2]);
  const I dil0 = static_cast<I>(d.dilation[0]), dil1 = static_cast<I>(d.dilation[1]), dil2 = static_cast<I>(d.dilation[2]);
  const I in_plane = in0 * in1 * in2;
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < n;
       i += grid_stride) {
    I r = i;
    const I o2 = r % out2;
    r /= out2;
    const I o1 = r % out1;
    r /= out1;
    const I o0 = r % out0;
    const I plane = r / out0;
    const T* xp = x + static_cast<int64_t>(plane) * in_plane;
    const Taps<I> t0 = window_taps<I>(d, 0, o0), t1 = window_taps<I>(d, 1, o1), t2 = window_taps<I>(d, 2, o2);
    float acc = op == PoolOp::kMax ? -INFINITY : 0.0f;
    bool any = false;
    for (I k0 = 0; k0 < k0n; ++k0) {
      const I c0 = t0.start + k0 * dil0;
      if (c0 < 0 || c0 >= in0) continue;
      for (I k1 = 0; k1 < k1n; ++k1) {
        const I c1 = t1.start + k1 * dil1;
        if (c1 < 0 || c1 >= in1) continue;
        const T* row = xp + (c0 * in1 + c1) * in2;
        for (I k2 = 0; k2 < k2n; ++k2) {
          const I c2 = t2.start + k2 * dil2;
          if (c2 < 0 || c2 >= in2) continue;
          const float v = to_f32(row[c2]);
          if (op == PoolOp::kMax) {
            // As the reference: the first tap seeds the maximum, a later one replaces it only when larger.
            if (!any || v > acc) acc = v;
            any = true;
          } else {
            acc += v;
          }
        }
      }
    }
    if (op == PoolOp::kAvg) {
      const I div = d.count_include_pad ? t0.padded * t1.padded * t2.padded : t0.valid * t1.valid * t2.valid;
      acc = div > 0 ? acc / static_cast<float>(div) : 0.0f;
    }
    y[i] = from_f32<T>(acc);
  }
}

// Channels-last: thread i pools V consecutive channels (one 16-byte pack when V > 1) of one output
// pixel, so the threads of a warp read neighbouring packs of the same input pixels. The taps walk
// the window in the channels-first kernel's order with its max rule (the first tap seeds, a
// later one replaces only when larger), so NaN handling is the same.
template <PoolOp kOp, class T, class I, int V>
__global__ void pool_nhwc_kernel(const T* x, T* y, PoolDesc d, I channels, I n) {
  INGOT_KERNEL_ENTRY();
  const I grid_stride = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  const I in_h = static_cast<I>(d.in[0]), in_w = static_cast<I>(d.in[1]);
  const I out_h = static_cast<I>(d.out[0]), out_w = static_cast<I>(d.out[1]);
  const I k_h = static_cast<I>(d.kernel[0]), k_w = static_cast<I>(d.kernel[1]);
  const I dil_h = static_cast<I>(d.dilation[0]), dil_w = static_cast<I>(d.dilation[1]);
  const I groups = channels / V;
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < n;
       i += grid_stride) {
    I r = i;
    const I g = r % groups;
    r /= groups;
    const I ow = r % out_w;
    r /= out_w;
    const I oh = r % out_h;
    const I batch = r / out_h;
    const Taps<I> th = window_taps<I>(d, 0, oh), tw = window_taps<I>(d, 1, ow);
    const T* xb = x + g * V;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = kOp == PoolOp::kMax ? -INFINITY : 0.0f;
    bool any = false;
    for (I kh = 0; kh < k_h; ++kh) {
      const I ih = th.start + kh * dil_h;
      if (ih < 0 || ih >= in_h) continue;
      const T* row = xb + (batch * in_h + ih) * in_w * channels;
      for (I kw = 0; kw < k_w; ++kw) {
        const I iw = tw.start + kw * dil_w;
        if (iw < 0 || iw >= in_w) continue;
        const T* p = row + iw * channels;
        T v[V];
        if constexpr (V == 1) {
          v[0] = *p;
        } else {
          const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
          for (int k = 0; k < V; ++k) v[k] = pk.v[k];
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float f = to_f32(v[k]);
          if constexpr (kOp == PoolOp::kMax) {
            if (!any || f > acc[k]) acc[k] = f;
          } else {
            acc[k] += f;
          }
        }
        any = true;
      }
    }
    if constexpr (kOp == PoolOp::kAvg) {
      const I div = d.count_include_pad ? th.padded * tw.padded : th.valid * tw.valid;
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = div > 0 ? acc[k] / static_cast<float>(div) : 0.0f;
    }
    T* out = y + i * V;
    if constexpr (V == 1) {
      out[0] = from_f32<T>(acc[0]);
    } else {
      Pack<T, V> pk;
#pragma unroll
      for (int k = 0; k < V; ++k) pk.v[k] = from_f32<T>(acc[k]);
      *reinterpret_cast<Pack<T, V>*>(out) = pk;
    }
  }
}

template <PoolOp kOp, class T, int V>
void launch_nhwc(const T* x, T* y, const PoolDesc& d, int64_t channels, bool narrow, cudaStream_t stream) {
  const int64_t n = d.planes * d.out[0] * d.out[1] * (channels / V);
  if (narrow)
    launch_kernel(pool_nhwc_kernel<kOp, T, int32_t, V>, ew::grid_for(n), ew::kThreads, 0, stream, x, y, d,
                  static_cast<int32_t>(channels), static_cast<int32_t>(n));
  else
    launch_kernel(pool_nhwc_kernel<kOp, T, int64_t, V>, ew::grid_for(n), ew::kThreads, 0, stream, x, y, d, channels, n);
}

constexpr int kWarpsPerBlock = 8;

template <class T>
__global__ void global_pool_kernel(PoolOp op, const T* x, T* y, int64_t planes, int64_t size) {
  INGOT_KERNEL_ENTRY();
  const int lane = threadIdx.x & 31;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); p < planes;
       p += warp_stride) {
    const T* xp = x + p * size;
    float acc = op == PoolOp::kMax ? -INFINITY : 0.0f;
    for (int64_t i = lane; i < size; i += 32) {
      const float v = to_f32(xp[i]);
      if (op == PoolOp::kAvg) acc += v;
      else acc = (isnan(v) || isnan(acc)) ? __int_as_float(0x7fffffff) : fmaxf(acc, v);
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, acc, off);
      if (op == PoolOp::kAvg) acc += o;
      else acc = (isnan(o) || isnan(acc)) ? __int_as_float(0x7fffffff) : fmaxf(acc, o);
    }
    if (lane == 0) y[p] = from_f32<T>(op == PoolOp::kAvg ? acc / static_cast<float>(size) : acc);
  }
}

}  // namespace

namespace {
// launch_pool's and launch_max_pool_i8's body; dispatch(f) calls f with the element type's tag.
template <class Dispatch>
cudaError_t pool_impl(PoolOp op, Dispatch dispatch, const void* x, void* y, const PoolDesc& desc, cudaStream_t stream) {
  if (desc.spatial_rank < 1 || desc.spatial_rank > kMaxPoolSpatialDims) return cudaErrorInvalidValue;
  // Right-align the spatial dims into three, padding in front with unit dims.
  PoolDesc d;
  d.planes = desc.planes;
  d.count_include_pad = desc.count_include_pad;
  const int shift = kMaxPoolSpatialDims - desc.spatial_rank;
  for (int i = 0; i < kMaxPoolSpatialDims; ++i) {
    const int s = i - shift;
    d.in[i] = s < 0 ? 1 : desc.in[s];
    d.out[i] = s < 0 ? 1 : desc.out[s];
    d.kernel[i] = s < 0 ? 1 : desc.kernel[s];
    d.stride[i] = s < 0 ? 1 : desc.stride[s];
    d.dilation[i] = s < 0 ? 1 : desc.dilation[s];
    d.pad_begin[i] = s < 0 ? 0 : desc.pad_begin[s];
    d.pad_end[i] = s < 0 ? 0 : desc.pad_end[s];
  }
  d.spatial_rank = kMaxPoolSpatialDims;
  const int64_t n = d.planes * d.out[0] * d.out[1] * d.out[2];
  if (n <= 0) return cudaSuccess;
  // 32-bit indices when every element index (and the grid's reach past n) fits.
  const int64_t in_elems = d.planes * d.in[0] * d.in[1] * d.in[2];
  const int64_t limit = (int64_t{1} << 31) - (int64_t{1} << 26);
  const bool narrow = in_elems < limit && n < limit;
  dispatch([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (narrow)
      launch_kernel(pool_kernel<T, int32_t>, ew::grid_for(n), ew::kThreads, 0, stream, op, static_cast<const T*>(x),
                    static_cast<T*>(y), d, static_cast<int32_t>(n));
    else
      launch_kernel(pool_kernel<T, int64_t>, ew::grid_for(n), ew::kThreads, 0, stream, op, static_cast<const T*>(x),
                    static_cast<T*>(y), d, n);
  });
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pool(PoolOp op, FloatType t, const void* x, void* y, const PoolDesc& desc, cudaStream_t stream) {
  return pool_impl(op, [t](auto&& f) { ew::dispatch_float(t, f); }, x, y, desc, stream);
}

cudaError_t launch_max_pool_i8(const void* x, void* y, const PoolDesc& desc, cudaStream_t stream) {
  return pool_impl(PoolOp::kMax, [](auto&& f) { f(ew::Tag<int8_t>{}); }, x, y, desc, stream);
}

namespace {
template <class Dispatch>
cudaError_t pool_nhwc_impl(PoolOp op, Dispatch dispatch, const void* x, void* y, const PoolDesc& desc,
                           int64_t channels, cudaStream_t stream) {
  if (desc.spatial_rank != 2 || channels < 0) return cudaErrorInvalidValue;
  const int64_t pixels = desc.planes * desc.out[0] * desc.out[1];
  if (pixels <= 0 || channels == 0) return cudaSuccess;
  // 32-bit indices when every element offset (and the grid's reach past the last one) fits.
  const int64_t in_elems = desc.planes * desc.in[0] * desc.in[1] * channels;
  const int64_t limit = (int64_t{1} << 31) - (int64_t{1} << 26);
  const bool narrow = in_elems < limit && pixels * channels < limit;
  dispatch([&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kV = 16 / sizeof(T);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    const bool packed = channels % kV == 0 && ew::aligned16(x) && ew::aligned16(y);
    if (op == PoolOp::kMax) {
      if (packed) launch_nhwc<PoolOp::kMax, T, kV>(xt, yt, desc, channels, narrow, stream);
      else launch_nhwc<PoolOp::kMax, T, 1>(xt, yt, desc, channels, narrow, stream);
    } else {
      if (packed) launch_nhwc<PoolOp::kAvg, T, kV>(xt, yt, desc, channels, narrow, stream);
      else launch_nhwc<PoolOp::kAvg, T, 1>(xt, yt, desc, channels, narrow, stream);
    }
  });
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pool_nhwc(PoolOp op, FloatType t, const void* x, void* y, const PoolDesc& desc, int64_t channels,
                             cudaStream_t stream) {
  return pool_nhwc_impl(op, [t](auto&& f) { ew::dispatch_float(t, f); }, x, y, desc, channels, stream);
}

cudaError_t launch_max_pool_nhwc_i8(const void* x, void* y, const PoolDesc& desc, int64_t channels,
                                   cudaStream_t stream) {
  return pool_nhwc_impl(PoolOp::kMax, [](auto&& f) { f(ew::Tag<int8_t>{}); }, x, y, desc, channels, stream);
}

cudaError_t launch_global_pool(PoolOp op, FloatType t, const void* x, void* y, int64_t planes, int64_t size,
                               cudaStream_t stream) {
  if (planes <= 0) return cudaSuccess;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned blocks = ew::grid_for(planes, kWarpsPerBlock);
    launch_kernel(global_pool_kernel<T>, blocks, kWarpsPerBlock * 32, 0, stream, op, static_cast<const T*>(x),
                  static_cast<T*>(y), planes, size);
  });
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
