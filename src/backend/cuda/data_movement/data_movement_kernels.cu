// Copyright ingot authors. Apache-2.0.
//
// Data-movement kernels: one thread per output element, elements moved as unsigned integers of
// their width (Gather of rows of 64 bytes or more: one row per block row, and Concat/Split: a
// thread per word of the joined rows, both in words of up to 16 bytes). Index math is int64
// (tensors above 2^31 elements are common enough for embeddings), but Concat/Split's when the
// launch's thread space fits 32 bits. Grid-stride loops; no shared memory. Gathers of narrower
// rows (a last-axis Gather: the channel shuffle) and Concat/Split of a few parts whose rows are
// not whole 16-byte words go through shared memory first (staged_rows_kernels.cu) where they fit.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/data_movement/data_movement_kernels.h"
#include "backend/cuda/data_movement/staged_rows_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

using ew::grid_for;
using ew::kThreads;

/// Calls f(Tag<unsigned type of that width>) for 1, 2, 4 or 8 bytes; false otherwise.
template <class F>
bool dispatch_bytes(int32_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(ew::Tag<uint8_t>{}); return true;
    case 2: f(ew::Tag<uint16_t>{}); return true;
    case 4: f(ew::Tag<uint32_t>{}); return true;
    case 8: f(ew::Tag<uint64_t>{}); return true;
    default: return false;
  }
}

__device__ __forceinline__ int64_t map_coord(int64_t c, int64_t n, EdgeMode mode) {
  if (c >= 0 && c < n) return c;
  switch (mode) {
    case EdgeMode::kWrap: return ((c % n) + n) % n;
    case EdgeMode::kEdge: return c < 0 ? 0 : n - 1;
    case EdgeMode::kReflect: {
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      c = ((c % p) + p) % p;
      return c >= n ? p - c : c;
    }
    default: return -1;
  }
}

// kDeviceStarts: start/step come from start_step (written by a kernel earlier on the stream).
template <class T, bool kDeviceStarts>
__global__ void index_map_kernel(const T* x, T* y, int64_t n, IndexMapDesc d, const T* pad_value,
                                 const int64_t* start_step) {
  INGOT_KERNEL_ENTRY();
  if (kDeviceStarts) {
    for (int dim = 0; dim < d.rank; ++dim) {
      d.start[dim] = start_step[dim];
      d.step[dim] = start_step[kMaxDims + dim];
    }
  }
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    int64_t r = i, off = 0;
    bool inside = true;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      const int64_t o = r % d.out_dims[dim];
      r /= d.out_dims[dim];
      const int64_t c = map_coord(d.start[dim] + o * d.step[dim], d.in_dims[dim], d.mode);
      inside = inside && c >= 0;
      off += c * d.in_strides[dim];
    }
    y[i] = inside ? x[off] : (pad_value ? *pad_value : T(0));
  }
}

// index_map over whole runs: the innermost dims are copied whole (start 0, step 1, all of
// them, contiguous), so each run of `words` V-sized words is one source run. One walk over the
// outer dims per run instead of per element (Swin's strided patch-merging Slices, Pads of
// channels-last images): blockDim.x threads copy a run's words, blockDim.y runs at a time.
template <class V>
__global__ void index_map_runs_kernel(const V* x, V* y, int64_t runs, int64_t words, int64_t elems_per_word,
                                      IndexMapDesc d, int32_t outer_rank) {
  INGOT_KERNEL_ENTRY();
  const int64_t run_stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < runs; r += run_stride) {
    int64_t rem = r, off = 0;
    bool inside = true;
    for (int dim = outer_rank - 1; dim >= 0; --dim) {
      const int64_t o = rem % d.out_dims[dim];
      rem /= d.out_dims[dim];
      const int64_t c = map_coord(d.start[dim] + o * d.step[dim], d.in_dims[dim], d.mode);
      inside = inside && c >= 0;
      off += c * d.in_strides[dim];
    }
    const V* src = x + (inside ? off / elems_per_word : 0);
    V* dst = y + r * words;
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = inside ? src[w] : V{};
  }
}

__device__ __forceinline__ int64_t load_any_index(const void* p, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// One thread: a handful of entries.
__global__ void slice_starts_kernel(const void* starts, const void* axes, const void* steps, bool i64, int32_t count,
                                    int32_t rank, IndexMapDesc dims, int64_t* start_step) {
  INGOT_KERNEL_ENTRY();
  for (int d = 0; d < kMaxDims; ++d) {
    start_step[d] = 0;
    start_step[kMaxDims + d] = 1;
  }
  for (int32_t j = 0; j < count; ++j) {
    int64_t a = axes ? load_any_index(axes, i64, j) : j;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) continue;
    const int64_t dim = dims.in_dims[a];
    const int64_t step = steps ? load_any_index(steps, i64, j) : 1;
    int64_t s = load_any_index(starts, i64, j);
    if (s < 0) s += dim;
    const int64_t hi = step > 0 ? dim : dim - 1;
    s = s < 0 ? 0 : (s > hi ? hi : s);
    start_step[a] = dim <= 0 ? 0 : s;
    start_step[kMaxDims + a] = step == 0 ? 1 : step;
  }
}

__global__ void pad_starts_kernel(const int64_t* pads, const void* axes, bool i64, int32_t count, int32_t rank,
                                  int64_t* start_step) {
  INGOT_KERNEL_ENTRY();
  for (int d = 0; d < kMaxDims; ++d) {
    start_step[d] = 0;
    start_step[kMaxDims + d] = 1;
  }
  for (int32_t j = 0; j < count; ++j) {
    int64_t a = axes ? load_any_index(axes, i64, j) : j;
    if (a < 0) a += rank;
    if (a >= 0 && a < rank) start_step[a] = -pads[j];
  }
}

// launch_join_rows' parts, in words: part j covers words [start[j], start[j] + cols[j]) of each
// row of the thread space (the parts of this launch side by side) and [at[j], at[j] + cols[j]) of
// the joined row (pitch words).
struct JoinParams {
  const void* data[kMaxRowSegments];
  int64_t start[kMaxRowSegments];
  int64_t at[kMaxRowSegments];
  int64_t cols[kMaxRowSegments];
  int32_t count;
  int64_t span;   // words per row of the thread space
  int64_t pitch;  // words per joined row
};

template <class V, class I, bool kConcat>
__global__ void join_rows_kernel(const __grid_constant__ JoinParams p, V* joined, I n) {
  INGOT_KERNEL_ENTRY();
  const I grid_stride = static_cast<I>(gridDim.x) * blockDim.x;
  const I span = static_cast<I>(p.span);
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const I r = i / span, c = i - r * span;
    int lo = 0, hi = p.count - 1;  // the last part starting at or before c
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (static_cast<I>(p.start[mid]) <= c) lo = mid;
      else hi = mid - 1;
    }
    const I cc = c - static_cast<I>(p.start[lo]);
    V* part = static_cast<V*>(const_cast<void*>(p.data[lo]));
    const int64_t j = static_cast<int64_t>(r) * p.pitch + p.at[lo] + cc;
    const int64_t k = static_cast<int64_t>(r) * p.cols[lo] + cc;
    if (kConcat) joined[j] = part[k];
    else part[k] = joined[j];
  }
}

template <class I>
__device__ __forceinline__ int64_t load_index(const void* p, int64_t i) {
  return static_cast<int64_t>(static_cast<const I*>(p)[i]);
}

template <class T>
__global__ void gather_kernel(const T* x, const void* indices, bool idx64, T* y, int64_t outer, int64_t axis_len,
                              int64_t inner, int64_t count) {
  INGOT_KERNEL_ENTRY();
  const int64_t n = outer * count * inner;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const int64_t in = i % inner;
    const int64_t k = (i / inner) % count;
    const int64_t o = i / (inner * count);
    int64_t j = idx64 ? load_index<int64_t>(indices, k) : load_index<int32_t>(indices, k);
    if (j < 0) j += axis_len;
    y[i] = (j >= 0 && j < axis_len) ? x[(o * axis_len + j) * inner + in] : T(0);
  }
}

// Gather of whole rows (inner elements contiguous in x and y): y row r = (o, k) is x row
// (o, indices[k]), copied in V-sized words by the block's x threads, blockDim.y rows at a time.
// One index load and one division per row, against three 64-bit divisions per element in
// gather_kernel: BERT's embedding lookups ([8192] rows of 1536 bytes) run at copy speed.
template <class V>
__global__ void gather_rows_kernel(const V* x, const void* indices, bool idx64, V* y, int64_t outer, int64_t axis_len,
                                   int64_t count, int64_t words_per_row) {
  INGOT_KERNEL_ENTRY();
  const int64_t rows = outer * count;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows; r += row_stride) {
    const int64_t o = r / count, k = r - o * count;
    int64_t j = idx64 ? load_index<int64_t>(indices, k) : load_index<int32_t>(indices, k);
    if (j < 0) j += axis_len;
    const bool in_range = j >= 0 && j < axis_len;
    const V* src = x + (o * axis_len + (in_range ? j : 0)) * words_per_row;
    V* dst = y + r * words_per_row;
    for (int64_t w = threadIdx.x; w < words_per_row; w += blockDim.x) dst[w] = in_range ? src[w] : V{};
  }
}

template <class T>
__global__ void gather_elements_kernel(const T* x, const void* indices, bool idx64, T* y, int64_t n,
                                       GatherElementsDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    int64_t j = idx64 ? load_index<int64_t>(indices, i) : load_index<int32_t>(indices, i);
    if (j < 0) j += d.axis_len;
    if (j < 0 || j >= d.axis_len) {
      y[i] = T(0);
      continue;
    }
    int64_t r = i, off = 0;
    for (int dim = d.rank - 1; dim >= 0; --dim) {
      const int64_t c = r % d.out_dims[dim];
      r /= d.out_dims[dim];
      off += (dim == d.axis ? j : c) * d.x_strides[dim];
    }
    y[i] = x[off];
  }
}

// ScatterND's update (kGather false: y's slice at tuple s = updates' slice s, out-of-range tuples
// skipped) and GatherND (kGather true: y's slice s = x's slice at tuple s, zeros when out of
// range) walk the same index tuples.
template <class T, bool kGather>
__global__ void nd_slices_kernel(const T* src, const int64_t* indices, T* y, int64_t slices, int64_t slice_size,
                                 ScatterNdDesc d) {
  INGOT_KERNEL_ENTRY();
  const int64_t n = slices * slice_size;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) {
    const int64_t s = i / slice_size, w = i - s * slice_size;
    int64_t off = 0;
    bool ok = true;
    for (int j = 0; j < d.k; ++j) {
      int64_t c = indices[s * d.k + j];
      if (c < 0) c += d.dims[j];
      ok = ok && c >= 0 && c < d.dims[j];
      off += c * d.strides[j];
    }
    if constexpr (kGather) {
      y[i] = ok ? src[off + w] : T{};
    } else if (ok) {
      y[off + w] = src[i];
    }
  }
}

template <bool kGather>
cudaError_t launch_nd_slices(int32_t element_bytes, const void* src, const int64_t* indices, void* y,
                             int64_t slices, int64_t slice_size, const ScatterNdDesc& desc, cudaStream_t stream) {
  const int64_t n = slices * slice_size;
  if (n <= 0) return cudaSuccess;
  if (desc.k < 0 || desc.k > kMaxDims) return cudaErrorInvalidValue;
  const bool ok = dispatch_bytes(element_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(nd_slices_kernel<T, kGather>, grid_for(n), kThreads, 0, stream, static_cast<const T*>(src), indices,
                  static_cast<T*>(y), slices, slice_size, desc);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

template <class T>
__global__ void fill_kernel(T* y, int64_t n, T v) {
  INGOT_KERNEL_ENTRY();
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride) y[i] = v;
}

__global__ void write_values_kernel(int64_t* y, SmallValues v) {
  INGOT_KERNEL_ENTRY();
  const int i = threadIdx.x;
  if (i < v.count) y[i] = v.v[i];
}

template <class T, class Acc>
__global__ void range_kernel(const T* start, const T* delta, T* y, int64_t n) {
  INGOT_KERNEL_ENTRY();
  const Acc s = static_cast<Acc>(*start), dl = static_cast<Acc>(*delta);
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += grid_stride)
    y[i] = static_cast<T>(s + static_cast<Acc>(i) * dl);
}

// Thread u of row r covers y's 16-byte unit u counted from the unit holding the row's first
// element: lanes whose unit lies wholly inside the row store 8 elements at once, the partial
// units at both ends element by element. x is read 2 bytes at a time (coalesced across the warp).
__global__ void copy_rows_u16_kernel(const uint16_t* x, int64_t x_pitch, uint16_t* y, int64_t y_pitch,
                                     int64_t row_elems, int64_t rows) {
  INGOT_KERNEL_ENTRY();
  struct alignas(16) Unit {
    uint16_t v[8];
  };
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint16_t* xr = x + r * x_pitch;
    uint16_t* yr = y + r * y_pitch;
    const int64_t lead = static_cast<int64_t>((reinterpret_cast<uintptr_t>(yr) & 15u) >> 1);  // elements before the unit boundary
    const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t first = u * 8 - lead;  // the unit's first element in the row (may be negative)
    if (first >= row_elems || first + 8 <= 0) continue;
    if (first >= 0 && first + 8 <= row_elems) {
      Unit w;
#pragma unroll
      for (int e = 0; e < 8; ++e) w.v[e] = xr[first + e];
      *reinterpret_cast<Unit*>(yr + first) = w;
    } else {
      for (int e = 0; e < 8; ++e) {
        const int64_t i = first + e;
        if (i >= 0 && i < row_elems) yr[i] = xr[i];
      }
    }
  }
}

}  // namespace

namespace {

// Row copies (gather_rows_kernel, index_map_runs_kernel) move rows in the widest word, up to 16
// bytes, that divides the row and both base addresses; blockDim.x threads per row (a multiple of
// 32, at most 256), blockDim.y rows per block.
struct RowLaunch {
  int word = 1;
  int64_t words = 0;  ///< per row
  dim3 block;
  unsigned grid = 0;
};

RowLaunch row_launch(int64_t row_bytes, int64_t rows, const void* x, const void* y) {
  RowLaunch l;
  const uint64_t bits = static_cast<uint64_t>(row_bytes) | reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y);
  l.word = 16;
  while (l.word > 1 && (bits & static_cast<uint64_t>(l.word - 1)) != 0) l.word /= 2;
  l.words = row_bytes / l.word;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>(256, (l.words + 31) / 32 * 32));
  const unsigned by = std::max(1u, 256u / bx);
  l.block = dim3(bx, by);
  l.grid = static_cast<unsigned>(std::min<int64_t>((rows + by - 1) / by, int64_t(1) << 20));
  return l;
}

/// Calls f(Tag<the unsigned word type>) for a RowLaunch's word size.
template <class F>
void with_word(int word, F&& f) {
  switch (word) {
    case 16: f(ew::Tag<uint4>{}); break;
    case 8: f(ew::Tag<uint2>{}); break;
    case 4: f(ew::Tag<uint32_t>{}); break;
    case 2: f(ew::Tag<uint16_t>{}); break;
    default: f(ew::Tag<uint8_t>{}); break;
  }
}

// index_map_runs_kernel where the innermost dims copied whole make runs of at least 64 bytes
// (words up to 16 bytes that divide the run and both base addresses); false otherwise. Zero fill
// outside (no pad-value pointer) and host-known starts only.
bool launch_index_map_runs(int32_t element_bytes, const void* x, void* y, int64_t n, const IndexMapDesc& d,
                           cudaStream_t stream) {
  int32_t outer = d.rank;
  int64_t run = 1;
  while (outer > 0) {
    const int dim = outer - 1;
    if (d.start[dim] != 0 || d.step[dim] != 1 || d.out_dims[dim] != d.in_dims[dim] || d.in_strides[dim] != run) break;
    run *= d.in_dims[dim];
    --outer;
  }
  if (outer == d.rank || run <= 0 || n % run != 0) return false;
  for (int dim = 0; dim < outer; ++dim)
    if (d.in_strides[dim] % run != 0) return false;
  const int64_t run_bytes = run * element_bytes;
  if (run_bytes < 64) return false;
  const int64_t runs = n / run;
  const RowLaunch l = row_launch(run_bytes, runs, x, y);
  if (l.word < element_bytes || l.word % element_bytes != 0) return false;
  const int64_t per_word = l.word / element_bytes;
  with_word(l.word, [&](auto tag) {
    using V = typename decltype(tag)::type;
    launch_kernel(index_map_runs_kernel<V>, l.grid, l.block, 0, stream, static_cast<const V*>(x), static_cast<V*>(y),
                  runs, l.words, per_word, d, outer);
  });
  return true;
}

}  // namespace

cudaError_t launch_index_map(int32_t element_bytes, const void* x, void* y, int64_t n, const IndexMapDesc& desc,
                             const void* pad_value, const int64_t* device_start_step, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (desc.rank < 0 || desc.rank > kMaxDims) return cudaErrorInvalidValue;
  if (device_start_step == nullptr && pad_value == nullptr &&
      launch_index_map_runs(element_bytes, x, y, n, desc, stream))
    return cudaGetLastError();
  const bool ok = dispatch_bytes(element_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (device_start_step != nullptr) {
      launch_kernel(index_map_kernel<T, true>, grid_for(n), kThreads, 0, stream, static_cast<const T*>(x),
                    static_cast<T*>(y), n, desc, static_cast<const T*>(pad_value), device_start_step);
    } else {
      launch_kernel(index_map_kernel<T, false>, grid_for(n), kThreads, 0, stream, static_cast<const T*>(x),
                    static_cast<T*>(y), n, desc, static_cast<const T*>(pad_value), nullptr);
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_slice_starts(const void* starts, const void* axes, const void* steps, bool int64_indices,
                                int32_t count, int32_t rank, const int64_t* in_dims, int64_t* start_step,
                                cudaStream_t stream) {
  if (rank < 0 || rank > kMaxDims || count < 0 || count > kMaxDims) return cudaErrorInvalidValue;
  IndexMapDesc dims;  // only in_dims travels
  for (int32_t d = 0; d < rank; ++d) dims.in_dims[d] = in_dims[d];
  launch_kernel(slice_starts_kernel, 1, 1, 0, stream, starts, axes, steps, int64_indices, count, rank, dims,
                start_step);
  return cudaGetLastError();
}

cudaError_t launch_pad_starts(const int64_t* pads, const void* axes, bool int64_axes, int32_t count, int32_t rank,
                              int64_t* start_step, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxDims || count < 0 || count > kMaxDims) return cudaErrorInvalidValue;
  launch_kernel(pad_starts_kernel, 1, 1, 0, stream, pads, axes, int64_axes, count, rank, start_step);
  return cudaGetLastError();
}

cudaError_t launch_join_rows(int32_t element_bytes, bool concat, void* joined, int64_t joined_cols, int64_t outer,
                             const RowSegment* parts, int32_t count, cudaStream_t stream) {
  if (element_bytes <= 0 || count < 0 || count > kMaxRowSegments || outer < 0 || joined_cols < 0)
    return cudaErrorInvalidValue;
  if (outer == 0 || count == 0) return cudaSuccess;
  // The widest word dividing every row, column offset and address.
  uint64_t bits = static_cast<uint64_t>(joined_cols * element_bytes) | reinterpret_cast<uintptr_t>(joined);
  for (int32_t j = 0; j < count; ++j) {
    if (parts[j].cols < 0 || parts[j].at < 0 || parts[j].at + parts[j].cols > joined_cols) return cudaErrorInvalidValue;
    if (parts[j].cols == 0) continue;
    bits |= static_cast<uint64_t>(parts[j].cols * element_bytes) | static_cast<uint64_t>(parts[j].at * element_bytes) |
            reinterpret_cast<uintptr_t>(parts[j].data);
  }
  int word = 16;
  while (word > 1 && (bits & static_cast<uint64_t>(word - 1)) != 0) word /= 2;
  JoinParams p{};
  p.pitch = joined_cols * element_bytes / word;
  int32_t m = 0;
  for (int32_t j = 0; j < count; ++j) {
    if (parts[j].cols == 0) continue;  // zero-width parts take no threads
    p.data[m] = parts[j].data;
    p.at[m] = parts[j].at * element_bytes / word;
    p.cols[m] = parts[j].cols * element_bytes / word;
    p.start[m] = p.span;
    p.span += p.cols[m];
    ++m;
  }
  if (m == 0) return cudaSuccess;
  if (m <= kMaxStagedParts && word < 16) {
    // Rows in narrow words (ShuffleNet's 58-channel fp16 halves: 4 bytes) go through shared
    // memory in 16-byte words instead.
    RowSegment units[kMaxStagedParts];
    for (int32_t j = 0; j < m; ++j) units[j] = RowSegment{p.data[j], p.at[j], p.cols[j]};
    if (launch_join_staged(word, concat, joined, p.pitch, outer, units, m, stream)) return cudaGetLastError();
  }
  p.count = m;
  const int64_t n = outer * p.span;
  const bool narrow = n < (int64_t{1} << 31);
  with_word(word, [&](auto tag) {
    using V = typename decltype(tag)::type;
    V* y = static_cast<V*>(joined);
    if (concat && narrow)
      launch_kernel(join_rows_kernel<V, uint32_t, true>, grid_for(n), kThreads, 0, stream, p, y,
                    static_cast<uint32_t>(n));
    else if (concat)
      launch_kernel(join_rows_kernel<V, int64_t, true>, grid_for(n), kThreads, 0, stream, p, y, n);
    else if (narrow)
      launch_kernel(join_rows_kernel<V, uint32_t, false>, grid_for(n), kThreads, 0, stream, p, y,
                    static_cast<uint32_t>(n));
    else
      launch_kernel(join_rows_kernel<V, int64_t, false>, grid_for(n), kThreads, 0, stream, p, y, n);
  });
  return cudaGetLastError();
}

namespace {

// Rows of at least 64 bytes go through gather_rows_kernel in the widest word (up to 16 bytes)
// that divides the row and both base addresses; false where the element kernel is better.
bool launch_gather_rows(int32_t element_bytes, const void* x, const void* indices, bool indices_int64, void* y,
                        int64_t outer, int64_t axis_len, int64_t inner, int64_t count, cudaStream_t stream) {
  const int64_t row_bytes = inner * element_bytes;
  if (row_bytes < 64) return false;
  const int64_t rows = outer * count;
  const RowLaunch l = row_launch(row_bytes, rows, x, y);
  with_word(l.word, [&](auto tag) {
    using V = typename decltype(tag)::type;
    launch_kernel(gather_rows_kernel<V>, l.grid, l.block, 0, stream, static_cast<const V*>(x), indices, indices_int64,
                  static_cast<V*>(y), outer, axis_len, count, l.words);
  });
  return true;
}

}  // namespace

cudaError_t launch_gather(int32_t element_bytes, const void* x, const void* indices, bool indices_int64, void* y,
                          int64_t outer, int64_t axis_len, int64_t inner, int64_t count, cudaStream_t stream) {
  const int64_t n = outer * count * inner;
  if (n <= 0) return cudaSuccess;
  if (launch_gather_rows(element_bytes, x, indices, indices_int64, y, outer, axis_len, inner, count, stream) ||
      launch_gather_columns(element_bytes, x, indices, indices_int64, y, outer, axis_len, inner, count, stream))
    return cudaGetLastError();
  const bool ok = dispatch_bytes(element_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(gather_kernel<T>, grid_for(n), kThreads, 0, stream, static_cast<const T*>(x), indices, indices_int64,
                  static_cast<T*>(y), outer, axis_len, inner, count);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_gather_elements(int32_t element_bytes, const void* x, const void* indices, bool indices_int64,
                                   void* y, int64_t n, const GatherElementsDesc& desc, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (desc.rank < 1 || desc.rank > kMaxDims) return cudaErrorInvalidValue;
  const bool ok = dispatch_bytes(element_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(gather_elements_kernel<T>, grid_for(n), kThreads, 0, stream, static_cast<const T*>(x), indices,
                  indices_int64, static_cast<T*>(y), n, desc);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_scatter_nd(int32_t element_bytes, const void* updates, const int64_t* indices, void* y,
                              int64_t slices, int64_t slice_size, const ScatterNdDesc& desc, cudaStream_t stream) {
  return launch_nd_slices<false>(element_bytes, updates, indices, y, slices, slice_size, desc, stream);
}

cudaError_t launch_gather_nd(int32_t element_bytes, const void* x, const int64_t* indices, void* y, int64_t slices,
                             int64_t slice_size, const ScatterNdDesc& desc, cudaStream_t stream) {
  return launch_nd_slices<true>(element_bytes, x, indices, y, slices, slice_size, desc, stream);
}

cudaError_t launch_copy_rows_u16(const void* x, int64_t x_pitch, void* y, int64_t y_pitch, int64_t row_elems,
                                 int64_t rows, cudaStream_t stream) {
  if (rows <= 0 || row_elems <= 0) return cudaSuccess;
  if ((reinterpret_cast<uintptr_t>(x) & 1u) || (reinterpret_cast<uintptr_t>(y) & 1u)) return cudaErrorInvalidValue;
  // One block row per 16-byte unit of a y row (the unit before the first 16-byte boundary and
  // the one after the last are partial), blockIdx.y walks the rows.
  const int64_t units = row_elems / 8 + 2;
  const dim3 grid(static_cast<unsigned>((units + kThreads - 1) / kThreads),
                  static_cast<unsigned>(rows < 65535 ? rows : 65535));
  launch_kernel(copy_rows_u16_kernel, grid, kThreads, 0, stream, static_cast<const uint16_t*>(x), x_pitch,
                static_cast<uint16_t*>(y), y_pitch, row_elems, rows);
  return cudaGetLastError();
}

cudaError_t launch_fill(int32_t element_bytes, void* y, int64_t n, uint64_t bits, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool ok = dispatch_bytes(element_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(fill_kernel<T>, grid_for(n), kThreads, 0, stream, static_cast<T*>(y), n, static_cast<T>(bits));
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_write_values(int64_t* y, const SmallValues& values, cudaStream_t stream) {
  if (values.count <= 0) return cudaSuccess;
  if (values.count > kMaxSmallValues) return cudaErrorInvalidValue;
  launch_kernel(write_values_kernel, 1, kMaxSmallValues, 0, stream, y, values);
  return cudaGetLastError();
}

cudaError_t launch_range(RangeType t, const void* start, const void* delta, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const unsigned blocks = grid_for(n);
  switch (t) {
    case RangeType::kF32:
      launch_kernel(range_kernel<float, double>, blocks, kThreads, 0, stream, static_cast<const float*>(start),
                    static_cast<const float*>(delta), static_cast<float*>(y), n);
      break;
    case RangeType::kF64:
      launch_kernel(range_kernel<double, double>, blocks, kThreads, 0, stream, static_cast<const double*>(start),
                    static_cast<const double*>(delta), static_cast<double*>(y), n);
      break;
    case RangeType::kI16:
      launch_kernel(range_kernel<int16_t, int64_t>, blocks, kThreads, 0, stream, static_cast<const int16_t*>(start),
                    static_cast<const int16_t*>(delta), static_cast<int16_t*>(y), n);
      break;
    case RangeType::kI32:
      launch_kernel(range_kernel<int32_t, int64_t>, blocks, kThreads, 0, stream, static_cast<const int32_t*>(start),
                    static_cast<const int32_t*>(delta), static_cast<int32_t*>(y), n);
      break;
    case RangeType::kI64:
      launch_kernel(range_kernel<int64_t, int64_t>, blocks, kThreads, 0, stream, static_cast<const int64_t*>(start),
                    static_cast<const int64_t*>(delta), static_cast<int64_t*>(y), n);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ingot::backend::cuda
