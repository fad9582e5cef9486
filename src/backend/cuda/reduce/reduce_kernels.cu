// Copyright ingot authors. Apache-2.0.
//
// Reduction kernels. A group of G threads (1, a warp, or a 256-thread block) computes one output:
// the group strides over the reduced elements, then combines through shuffles (and shared memory
// for a block). G = 1 when the innermost reduced dim is not contiguous, so that neighbouring
// threads read neighbouring elements (reducing the channels of NCHW); a warp when it is (a row
// reduction); a block when a few outputs each fold very many elements.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/reduce/reduce_kernels.h"

namespace ingot::backend::cuda {
namespace {

using ew::from_f32;
using ew::to_f32;

constexpr int kBlock = 256;

__device__ __forceinline__ float identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return 1.0f;
    case ReduceOp::kMax: case ReduceOp::kLogSumExp: return -INFINITY;
    case ReduceOp::kMin: return INFINITY;
    default: return 0.0f;
  }
}

__device__ __forceinline__ float lift(ReduceOp op, float v) {
  switch (op) {
    case ReduceOp::kSumSquare: case ReduceOp::kL2: return v * v;
    case ReduceOp::kL1: return fabsf(v);
    default: return v;
  }
}

/// Combines two partials. LogSumExp's first pass is a Max.
__device__ __forceinline__ float combine(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMax:
    case ReduceOp::kLogSumExp: return (isnan(a) || isnan(b)) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
    case ReduceOp::kMin: return (isnan(a) || isnan(b)) ? __int_as_float(0x7fffffff) : fminf(a, b);
    default: return a + b;
  }
}

/// Combines `v` across the G threads of a group (G = 1, 32 or kBlock); every thread gets the result.
template <int G>
__device__ __forceinline__ float group_combine(ReduceOp op, float v, float* smem) {
  if constexpr (G > 1) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = combine(op, v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  if constexpr (G > 32) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();  // smem may still be read from a previous call
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = smem[0];
    for (int w = 1; w < kBlock / 32; ++w) v = combine(op, v, smem[w]);
  }
  return v;
}

__device__ __forceinline__ int64_t offset_of(int64_t i, int rank, const int64_t* dims, const int64_t* strides) {
  // One (merged) dim, the common case (NHWC's H x W, a row): i < dims[0], so no 64-bit division.
  if (rank == 1) return i * strides[0];
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

template <class T, int G>
__global__ void __launch_bounds__(kBlock) reduce_kernel(ReduceOp op, const T* x, T* y, ReduceDesc d) {
  INGOT_KERNEL_ENTRY();
  __shared__ float smem[kBlock / 32];
  constexpr int kGroups = kBlock / G;
  const int lane = threadIdx.x % G;
  const int64_t group_stride = static_cast<int64_t>(gridDim.x) * kGroups;
  // Every thread of a block runs the same number of iterations (the block barrier needs it).
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < d.outputs; base += group_stride) {
    const int64_t o = base + threadIdx.x / G;
    const bool live = o < d.outputs;
    const T* xo = live ? x + offset_of(o, d.kept_rank, d.kept_dims, d.kept_strides) : x;
    const int64_t count = live ? d.count : 0;
    float acc = identity_of(op);
    for (int64_t r = lane; r < count; r += G)
      acc = combine(op, acc, lift(op, to_f32(xo[offset_of(r, d.red_rank, d.red_dims, d.red_strides)])));
    acc = group_combine<G>(op, acc, smem);
    float sum = 0.0f;
    if (op == ReduceOp::kLogSumExp) {
      const float m = acc;
      const float shift = isfinite(m) ? m : 0.0f;
      for (int64_t r = lane; r < count; r += G)
        sum += expf(to_f32(xo[offset_of(r, d.red_rank, d.red_dims, d.red_strides)]) - shift);
      sum = group_combine<G>(ReduceOp::kSum, sum, smem);
    }
    if (!live || lane != 0) continue;
    float v = acc;
    switch (op) {
      case ReduceOp::kMean: v = acc / static_cast<float>(d.count); break;
      case ReduceOp::kL2: v = sqrtf(acc); break;
      case ReduceOp::kLogSum: v = logf(acc); break;
      case ReduceOp::kLogSumExp: v = isfinite(acc) ? acc + logf(sum) : logf(sum); break;
      default: break;
    }
    y[o] = from_f32<T>(v);
  }
}

/// Strided reductions (the reduced axes are not innermost, e.g. global pooling of NHWC: 2048
/// outputs of 49 elements each, 2048 apart): lanes of a warp take 32 neighbouring outputs (their
/// loads coalesce) and the block's kRows warps split each output's range, combined through shared
/// memory. One thread per output would run `count` dependent loads in a row on few blocks.
/// When the outputs fill few blocks (squeeze-excite pooling at batch 1: 96 outputs of 112x112
/// elements made 3 blocks of 1568 loads per thread, 80 us on the H200), blockIdx.y splits the range
/// into gridDim.y chunks: each block then writes its un-finalized partial to partial[chunk][o]
/// and reduce_finish_kernel combines the chunks in order (deterministic) and finalizes.
constexpr int kRows = kBlock / 32;

__device__ __forceinline__ float finalize(ReduceOp op, float v, int64_t count) {
  switch (op) {
    case ReduceOp::kMean: return v / static_cast<float>(count);
    case ReduceOp::kL2: return sqrtf(v);
    case ReduceOp::kLogSum: return logf(v);
    default: return v;
  }
}

template <class T>
__global__ void __launch_bounds__(kBlock) reduce_strided_kernel(ReduceOp op, const T* x, T* y, float* partial,
                                                                ReduceDesc d) {
  INGOT_KERNEL_ENTRY();
  __shared__ float part[kRows][33];
  const int lane = threadIdx.x & 31, row = threadIdx.x >> 5;
  const int64_t chunk = (d.count + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t r1 = min(d.count, r0 + chunk);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * 32; base < d.outputs; base += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t o = base + lane;
    const bool live = o < d.outputs;
    const T* xo = live ? x + offset_of(o, d.kept_rank, d.kept_dims, d.kept_strides) : x;
    float acc = identity_of(op);
    if (live)
#pragma unroll 4
      for (int64_t r = r0 + row; r < r1; r += kRows)
        acc = combine(op, acc, lift(op, to_f32(xo[offset_of(r, d.red_rank, d.red_dims, d.red_strides)])));
    __syncthreads();  // part may still be read from the previous iteration
    part[row][lane] = acc;
    __syncthreads();
    if (row != 0 || !live) continue;
    float v = part[0][lane];
    for (int w = 1; w < kRows; ++w) v = combine(op, v, part[w][lane]);
    if (partial) partial[static_cast<int64_t>(blockIdx.y) * d.outputs + o] = v;
    else y[o] = from_f32<T>(finalize(op, v, d.count));
  }
}

// reduce_strided_kernel with V neighbouring outputs per lane, read as one 16-byte pack per reduced
// row (squeeze-excite pooling of NHWC: [N, H*W, C] over H*W, a warp reads 512 bytes per row instead
// of 64): the kept innermost dim is contiguous and a whole number of packs, x 16-byte aligned, the
// reduced dims one (merged) dim. Lane l of a warp takes outputs base + l*V .. + V-1.
template <class T, int V>
__global__ void __launch_bounds__(kBlock)
    reduce_strided_packed_kernel(ReduceOp op, const T* x, T* y, float* partial, ReduceDesc d) {
  INGOT_KERNEL_ENTRY();
  __shared__ float part[kRows][32 * V + 1];
  const int lane = threadIdx.x & 31, row = threadIdx.x >> 5;
  const int64_t chunk = (d.count + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t r1 = min(d.count, r0 + chunk);
  const int64_t rstride = d.red_strides[0];
  constexpr int64_t kTile = 32 * V;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTile; base < d.outputs;
       base += static_cast<int64_t>(gridDim.x) * kTile) {
    const int64_t o = base + static_cast<int64_t>(lane) * V;
    const bool live = o < d.outputs;
    const T* xo = live ? x + offset_of(o, d.kept_rank, d.kept_dims, d.kept_strides) : x;
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = identity_of(op);
    if (live)
#pragma unroll 4
      for (int64_t r = r0 + row; r < r1; r += kRows) {
        const ew::Pack<T, V> p = *reinterpret_cast<const ew::Pack<T, V>*>(xo + r * rstride);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = combine(op, acc[k], lift(op, to_f32(p.v[k])));
      }
    __syncthreads();  // part may still be read from the previous iteration
#pragma unroll
    for (int k = 0; k < V; ++k) part[row][lane * V + k] = acc[k];
    __syncthreads();
    // The block's 32 * V outputs, one per thread (and a second round when 32 * V > kBlock).
    for (int j = threadIdx.x; j < kTile; j += kBlock) {
      const int64_t oj = base + j;
      if (oj >= d.outputs) continue;
      float v = part[0][j];
      for (int w = 1; w < kRows; ++w) v = combine(op, v, part[w][j]);
      if (partial)
        partial[static_cast<int64_t>(blockIdx.y) * d.outputs + oj] = v;
      else
        y[oj] = from_f32<T>(finalize(op, v, d.count));
    }
  }
}

/// Combines a split reduction's partials ([chunks][outputs] fp32, each chunk in order) and finalizes. The partials are
/// themselves a strided reduction over `chunks`: lanes take 32 neighbouring outputs and the block's kRows warps take
/// every kRows-th chunk, combined through shared memory in warp order (deterministic). One thread walking all the
/// chunks of its output made a chain of up to 196 dependent L2 reads (squeeze-excite pooling of [1,112,112,32]: 47 us
/// of a 0.48 ms EfficientNet-B0 in session 33's timing cache).
template <class T>
__global__ void __launch_bounds__(kBlock) reduce_finish_kernel(ReduceOp op, const float* partial, int chunks, T* y,
                                                               ReduceDesc d) {
  INGOT_KERNEL_ENTRY();
  __shared__ float part[kRows][33];
  const int lane = threadIdx.x & 31, row = threadIdx.x >> 5;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * 32; base < d.outputs;
       base += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t o = base + lane;
    const bool live = o < d.outputs;
    float acc = identity_of(op);
    if (live)
#pragma unroll 4
      for (int c = row; c < chunks; c += kRows) acc = combine(op, acc, partial[static_cast<int64_t>(c) * d.outputs + o]);
    __syncthreads();  // part may still be read from the previous iteration
    part[row][lane] = acc;
    __syncthreads();
    if (row != 0 || !live) continue;
    float v = part[0][lane];
    for (int w = 1; w < kRows; ++w) v = combine(op, v, part[w][lane]);
    y[o] = from_f32<T>(finalize(op, v, d.count));
  }
}

/// Whether candidate (value cv at index ci) replaces the best (bv at bi): numpy's rules, with
/// the index order deciding ties and making the combine order-independent.
__device__ __forceinline__ bool arg_better(bool is_max, bool last, float cv, int64_t ci, float bv, int64_t bi) {
  if (bi < 0) return ci >= 0;
  if (ci < 0) return false;
  const bool cn = isnan(cv), bn = isnan(bv);
  if (cn || bn) return cn && (!bn || ci < bi);  // the first NaN wins
  if (cv == bv) return last ? ci > bi : ci < bi;
  return is_max ? cv > bv : cv < bv;
}

template <class T, int G>
__global__ void __launch_bounds__(kBlock) arg_kernel(bool is_max, bool last, const T* x, int64_t* y, int64_t outer,
                                                     int64_t len, int64_t inner) {
  INGOT_KERNEL_ENTRY();
  constexpr int kGroups = kBlock / G;
  const int lane = threadIdx.x % G;
  const int64_t outputs = outer * inner;
  const int64_t group_stride = static_cast<int64_t>(gridDim.x) * kGroups;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / G; o < outputs; o += group_stride) {
    const T* xo = x + (o / inner) * len * inner + (o % inner);
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t j = lane; j < len; j += G) {
      const float v = to_f32(xo[j * inner]);
      if (arg_better(is_max, last, v, j, bv, bi)) {
        bv = v;
        bi = j;
      }
    }
    if (G == 32) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (arg_better(is_max, last, ov, oi, bv, bi)) {
          bv = ov;
          bi = oi;
        }
      }
    }
    if (lane == 0) y[o] = bi < 0 ? 0 : bi;
  }
}

}  // namespace

int reduce_pack_width(const ReduceDesc& d, int element_bytes) {
  if (element_bytes <= 0 || element_bytes > 16 || 16 % element_bytes != 0) return 1;
  const int v = 16 / element_bytes;
  const bool ok = d.red_rank == 1 && d.kept_rank >= 1 && d.kept_strides[d.kept_rank - 1] == 1 &&
                  d.kept_dims[d.kept_rank - 1] % v == 0 && d.red_strides[0] % v == 0;
  return ok ? v : 1;
}

int reduce_split_chunks(const ReduceDesc& d, int element_bytes) {
  const bool contiguous = d.red_rank > 0 && d.red_strides[d.red_rank - 1] == 1;
  if (contiguous || d.count < kRows || d.outputs <= 0) return 1;
  const int64_t tile = 32 * static_cast<int64_t>(reduce_pack_width(d, element_bytes));
  const int64_t tiles = (d.outputs + tile - 1) / tile;
  if (tiles >= kReduceSplitTargetBlocks) return 1;
  // At least kReduceMinRowsPerChunk rows per chunk (a warp row walks count / chunks / kRows of them).
  const int64_t by_rows = d.count / kReduceMinRowsPerChunk;
  const int64_t by_blocks = (kReduceSplitTargetBlocks + tiles - 1) / tiles;
  return static_cast<int>(std::max<int64_t>(1, std::min(by_rows, by_blocks)));
}

cudaError_t launch_reduce(ReduceOp op, FloatType t, const void* x, void* y, const ReduceDesc& d, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream, bool allow_pack) {
  if (d.outputs <= 0) return cudaSuccess;
  if (d.kept_rank < 0 || d.kept_rank > kMaxDims || d.red_rank < 0 || d.red_rank > kMaxDims)
    return cudaErrorInvalidValue;
  const bool contiguous = d.red_rank > 0 && d.red_strides[d.red_rank - 1] == 1;
  int g = 1;
  if (contiguous && d.count >= 16) g = (d.count >= 8192 && d.outputs <= 512) ? kBlock : 32;
  const bool strided = g == 1 && d.count >= kRows && op != ReduceOp::kLogSumExp;
  const int element_bytes = t == FloatType::kF32 ? 4 : 2;
  const bool packed = allow_pack && strided && reduce_pack_width(d, element_bytes) > 1 && ew::aligned16(x);
  int chunks = op == ReduceOp::kLogSumExp ? 1 : reduce_split_chunks(d, packed ? element_bytes : 0);
  if (chunks > 1 && (workspace == nullptr ||
                     static_cast<uint64_t>(chunks) * static_cast<uint64_t>(d.outputs) * sizeof(float) > workspace_bytes))
    chunks = 1;  // no room for the partials: one chunk, as before
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* xp = static_cast<const T*>(x);
    auto* yp = static_cast<T*>(y);
    constexpr int V = 16 / sizeof(T);
    float* partial = chunks > 1 ? static_cast<float*>(workspace) : nullptr;
    if (strided && packed) {
      const unsigned tiles = static_cast<unsigned>(ew::grid_for(d.outputs, 32 * V));
      launch_kernel(reduce_strided_packed_kernel<T, V>, dim3(tiles, static_cast<unsigned>(chunks)), kBlock, 0, stream,
                    op, xp, yp, partial, d);
    } else if (strided) {
      const unsigned tiles = static_cast<unsigned>(ew::grid_for(d.outputs, 32));
      launch_kernel(reduce_strided_kernel<T>, dim3(tiles, static_cast<unsigned>(chunks)), kBlock, 0, stream, op, xp, yp,
                    partial, d);
    } else if (g == 1) {
      launch_kernel(reduce_kernel<T, 1>, ew::grid_for(d.outputs, kBlock), kBlock, 0, stream, op, xp, yp, d);
    } else if (g == 32) {
      launch_kernel(reduce_kernel<T, 32>, ew::grid_for(d.outputs, kBlock / 32), kBlock, 0, stream, op, xp, yp, d);
    } else {
      launch_kernel(reduce_kernel<T, kBlock>, ew::grid_for(d.outputs, 1), kBlock, 0, stream, op, xp, yp, d);
    }
    if (strided && partial)
      launch_kernel(reduce_finish_kernel<T>, ew::grid_for(d.outputs, 32), kBlock, 0, stream, op, partial, chunks, yp,
                    d);
  });
  return cudaGetLastError();
}

cudaError_t launch_arg_reduce(bool is_max, bool select_last, FloatType t, const void* x, int64_t* y, int64_t outer,
                              int64_t len, int64_t inner, cudaStream_t stream) {
  const int64_t outputs = outer * inner;
  if (outputs <= 0) return cudaSuccess;
  if (len <= 0) return cudaErrorInvalidValue;
  ew::dispatch_float(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* xp = static_cast<const T*>(x);
    if (inner == 1 && len >= 16) {
      launch_kernel(arg_kernel<T, 32>, ew::grid_for(outputs, kBlock / 32), kBlock, 0, stream, is_max, select_last, xp,
                    y, outer, len, inner);
    } else {
      launch_kernel(arg_kernel<T, 1>, ew::grid_for(outputs, kBlock), kBlock, 0, stream, is_max, select_last, xp, y,
                    outer, len, inner);
    }
  });
  return cudaGetLastError();
}

namespace {
// Floats accumulate in fp32; integers in the unsigned type of their width (wrapping, no UB).
__device__ __forceinline__ float scan_in(float v) { return v; }
__device__ __forceinline__ float scan_in(__half v) { return __half2float(v); }
__device__ __forceinline__ float scan_in(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ uint32_t scan_in(int32_t v) { return static_cast<uint32_t>(v); }
__device__ __forceinline__ uint64_t scan_in(int64_t v) { return static_cast<uint64_t>(v); }

template <class T, class Acc>
__device__ __forceinline__ T scan_out(Acc a) {
  if constexpr (std::is_integral<T>::value) return static_cast<T>(a);
  else return ew::from_f32<T>(a);
}

template <class T, class Acc>
__global__ void cumsum_kernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                              bool reverse) {
  INGOT_KERNEL_ENTRY();
  const int64_t lines = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; l < lines; l += stride) {
    const int64_t base = (l / inner) * len * inner + l % inner;
    Acc acc = 0;
    for (int64_t s = 0; s < len; ++s) {
      const int64_t idx = base + (reverse ? len - 1 - s : s) * inner;
      const Acc v = scan_in(x[idx]);
      if (exclusive) y[idx] = scan_out<T>(acc);
      acc += v;
      if (!exclusive) y[idx] = scan_out<T>(acc);
    }
  }
}
}  // namespace

cudaError_t launch_cumsum(ScanType t, const void* x, void* y, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                          bool reverse, cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines <= 0 || len <= 0) return cudaSuccess;
  const unsigned grid = ew::grid_for(lines);
  switch (t) {
#define INGOT_CUMSUM(TT, T, ACC)                                                                                      \
  case ScanType::TT:                                                                                                  \
    launch_kernel(cumsum_kernel<T, ACC>, grid, ew::kThreads, 0, stream, static_cast<const T*>(x), static_cast<T*>(y), \
                  outer, len, inner, exclusive, reverse);                                                             \
    break;
    INGOT_CUMSUM(kF32, float, float)
    INGOT_CUMSUM(kF16, __half, float)
    INGOT_CUMSUM(kBF16, __nv_bfloat16, float)
    INGOT_CUMSUM(kI32, int32_t, uint32_t)
    INGOT_CUMSUM(kI64, int64_t, uint64_t)
#undef INGOT_CUMSUM
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
