// Copyright ingot authors. Apache-2.0.
//
// TopK kernels (see topk_kernels.h for the ordering). Short rows: one block per row sorts the
// padded row's keys in shared memory with a bitonic network and writes the first k. Long rows:
// a fill kernel writes every key to the workspace, CUB's segmented radix sort orders each row
// (segments are rows), and a gather kernel writes the first k of each. All launches are
// stream-ordered, need no host synchronization and are the same for the same shapes, so they
// can be captured into a CUDA graph.
#include <algorithm>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/pointwise/elementwise_common.cuh"
#include "backend/cuda/topk/topk_kernels.h"

namespace ingot::backend::cuda {
namespace {

__device__ __forceinline__ uint64_t order_of(float v) { return topk_math::float_order(__float_as_uint(v)); }
__device__ __forceinline__ uint64_t order_of(__half v) { return order_of(__half2float(v)); }
__device__ __forceinline__ uint64_t order_of(__nv_bfloat16 v) { return order_of(__bfloat162float(v)); }
__device__ __forceinline__ uint64_t order_of(int32_t v) { return topk_math::int32_order(v); }
__device__ __forceinline__ uint64_t order_of(int64_t v) { return topk_math::int64_order(v); }

template <class T>
constexpr bool kWide = sizeof(T) == 8;

constexpr int kSortThreads = 512;
constexpr unsigned kMaxRowBlocks = 65535;

template <class T>
__global__ void __launch_bounds__(kSortThreads) topk_bitonic_kernel(const T* x, T* values, int64_t* indices,
                                                                      TopKDesc d, int64_t p) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ uint64_t smem[];
  uint64_t* rank = smem;
  uint32_t* idx = reinterpret_cast<uint32_t*>(smem + p);
  const int64_t rows = d.outer * d.inner;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t o = row / d.inner, in = row % d.inner;
    const T* xr = x + o * d.n * d.inner + in;
    for (int64_t i = threadIdx.x; i < p; i += blockDim.x) {
      if (i < d.n) {
        rank[i] = topk_math::rank_of(order_of(xr[i * d.inner]), d.largest, kWide<T>);
        idx[i] = static_cast<uint32_t>(i);
      } else {  // padding: sorts after every real key
        rank[i] = ~0ull;
        idx[i] = ~0u;
      }
    }
    __syncthreads();
    for (int64_t size = 2; size <= p; size <<= 1) {
      for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
        for (int64_t i = threadIdx.x; i < p; i += blockDim.x) topk_math::bitonic_step(rank, idx, size, stride, i);
        __syncthreads();
      }
    }
    const int64_t out_base = o * d.k * d.inner + in;
    for (int64_t t = threadIdx.x; t < d.k; t += blockDim.x) {
      const int64_t src = idx[t];
      values[out_base + t * d.inner] = xr[src * d.inner];
      if (indices) indices[out_base + t * d.inner] = src;
    }
    __syncthreads();  // the next row reuses the shared arrays
  }
}

// ---- Long rows: keys in the workspace, CUB segmented radix sort, gather. ----

// The workspace is laid out for a capacity of keys and of rows (segments) that only grows with
// the shapes, so a buffer sized at the profile's max shapes fits every smaller run. A batch is
// as many rows as both capacities allow (at least one row: a row longer than kBatchItems is
// a batch of its own).
constexpr int64_t kBatchItems = int64_t{1} << 22;

int64_t item_capacity(const TopKDesc& d) {
  return std::min(d.outer * d.inner * d.n, std::max(kBatchItems, d.n));
}
int64_t row_capacity(const TopKDesc& d) {
  return std::max<int64_t>(1, std::min(d.outer * d.inner, kBatchItems / (kTopKBitonicMax + 1)));
}
int64_t batch_rows(const TopKDesc& d) {
  return std::max<int64_t>(1, std::min(row_capacity(d), item_capacity(d) / d.n));
}

struct SortLayout {
  size_t keys_a = 0, keys_b = 0, vals_a = 0, vals_b = 0, offsets = 0, temp = 0, temp_bytes = 0, total = 0;
};

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

/// Offsets of the workspace parts; false when CUB cannot size its scratch.
bool sort_layout(const TopKDesc& d, SortLayout* l) {
  const int64_t items = item_capacity(d), rows = row_capacity(d);
  if (items > 0x7fffffffll) return false;  // CUB's item count is an int
  size_t off = 0;
  l->keys_a = off;
  off += align256(static_cast<size_t>(items) * sizeof(uint64_t));
  l->keys_b = off;
  off += align256(static_cast<size_t>(items) * sizeof(uint64_t));
  l->vals_a = off;
  off += align256(static_cast<size_t>(items) * sizeof(uint32_t));
  l->vals_b = off;
  off += align256(static_cast<size_t>(items) * sizeof(uint32_t));
  l->offsets = off;
  off += align256(static_cast<size_t>(rows + 1) * sizeof(int));
  l->temp = off;
  cub::DoubleBuffer<uint64_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<uint32_t> vals(nullptr, nullptr);
  size_t temp_bytes = 0;
  if (cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, keys, vals, static_cast<int>(items),
                                               static_cast<int>(rows), static_cast<const int*>(nullptr),
                                               static_cast<const int*>(nullptr) + 1) != cudaSuccess)
    return false;
  l->temp_bytes = temp_bytes;
  off += align256(temp_bytes);
  l->total = off;
  return true;
}

template <class T>
__global__ void topk_fill_keys_kernel(const T* x, TopKDesc d, int64_t row0, int64_t b, uint64_t* rank,
                                      uint32_t* idx, int* offsets) {
  INGOT_KERNEL_ENTRY();
  const int64_t items = b * d.n;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e <= items; e += grid_stride) {
    if (e % d.n == 0) offsets[e / d.n] = static_cast<int>(e);  // e == items gives the end offset
    if (e == items) continue;
    const int64_t row = row0 + e / d.n, i = e % d.n;
    const int64_t o = row / d.inner, in = row % d.inner;
    const uint64_t r = topk_math::rank_of(order_of(x[(o * d.n + i) * d.inner + in]), d.largest, kWide<T>);
    // Narrow ranks carry the index in the low bits: every key is distinct, whatever the sort's
    // stability. Wide (int64) ranks rely on the radix sort being stable over index order.
    rank[e] = kWide<T> ? r : ((r << 32) | static_cast<uint64_t>(i));
    idx[e] = static_cast<uint32_t>(i);
  }
}

template <class T>
__global__ void topk_gather_kernel(const T* x, T* values, int64_t* indices, TopKDesc d, int64_t row0, int64_t b,
                                   const uint32_t* idx) {
  INGOT_KERNEL_ENTRY();
  const int64_t items = b * d.k;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < items; e += grid_stride) {
    const int64_t r = e / d.k, t = e % d.k;
    const int64_t row = row0 + r;
    const int64_t o = row / d.inner, in = row % d.inner;
    const int64_t src = idx[r * d.n + t];
    const int64_t dst = (o * d.k + t) * d.inner + in;
    values[dst] = x[(o * d.n + src) * d.inner + in];
    if (indices) indices[dst] = src;
  }
}

template <class T>
cudaError_t launch_typed(const T* x, T* values, int64_t* indices, const TopKDesc& d, void* workspace,
                         cudaStream_t stream) {
  const int64_t rows = d.outer * d.inner;
  if (rows <= 0 || d.k <= 0) return cudaSuccess;
  if (d.n > 0xffffffffll) return cudaErrorInvalidValue;
  if (d.n <= kTopKBitonicMax) {
    const int64_t p = topk_math::bitonic_length(d.n);
    const int threads = static_cast<int>(std::min<int64_t>(std::max<int64_t>(p / 2, 32), kSortThreads));
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks));
    const size_t smem = static_cast<size_t>(p) * (sizeof(uint64_t) + sizeof(uint32_t));
    launch_kernel(topk_bitonic_kernel<T>, blocks, threads, smem, stream, x, values, indices, d, p);
    return cudaGetLastError();
  }
  if (workspace == nullptr) return cudaErrorInvalidValue;
  const int64_t b_max = batch_rows(d);
  SortLayout l;
  if (!sort_layout(d, &l)) return cudaErrorInvalidValue;
  auto* base = static_cast<uint8_t*>(workspace);
  for (int64_t row0 = 0; row0 < rows; row0 += b_max) {
    const int64_t b = std::min(b_max, rows - row0);
    auto* keys_a = reinterpret_cast<uint64_t*>(base + l.keys_a);
    auto* keys_b = reinterpret_cast<uint64_t*>(base + l.keys_b);
    auto* vals_a = reinterpret_cast<uint32_t*>(base + l.vals_a);
    auto* vals_b = reinterpret_cast<uint32_t*>(base + l.vals_b);
    auto* offsets = reinterpret_cast<int*>(base + l.offsets);
    const int64_t items = b * d.n;
    launch_kernel(topk_fill_keys_kernel<T>, ew::grid_for(items + 1), ew::kThreads, 0, stream, x, d, row0, b, keys_a,
                  vals_a, offsets);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    cub::DoubleBuffer<uint64_t> keys(keys_a, keys_b);
    cub::DoubleBuffer<uint32_t> vals(vals_a, vals_b);
    size_t temp_bytes = l.temp_bytes;
    err = cub::DeviceSegmentedRadixSort::SortPairs(base + l.temp, temp_bytes, keys, vals, static_cast<int>(items),
                                                   static_cast<int>(b), offsets, offsets + 1, 0, 64, stream);
    if (err != cudaSuccess) return err;
    launch_kernel(topk_gather_kernel<T>, ew::grid_for(b * d.k), ew::kThreads, 0, stream, x, values, indices, d, row0, b,
                  vals.Current());
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

size_t topk_workspace_bytes(TopKType, const TopKDesc& d) {
  if (d.n <= kTopKBitonicMax || d.outer * d.inner <= 0) return 0;
  SortLayout l;
  if (!sort_layout(d, &l)) return 0;
  return l.total;
}

cudaError_t launch_topk(TopKType t, const void* x, void* values, int64_t* indices, const TopKDesc& desc,
                        void* workspace, cudaStream_t stream) {
  switch (t) {
    case TopKType::kF32:
      return launch_typed(static_cast<const float*>(x), static_cast<float*>(values), indices, desc, workspace, stream);
    case TopKType::kF16:
      return launch_typed(static_cast<const __half*>(x), static_cast<__half*>(values), indices, desc, workspace,
                          stream);
    case TopKType::kBF16:
      return launch_typed(static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(values), indices, desc,
                          workspace, stream);
    case TopKType::kI32:
      return launch_typed(static_cast<const int32_t*>(x), static_cast<int32_t*>(values), indices, desc, workspace,
                          stream);
    case TopKType::kI64:
      return launch_typed(static_cast<const int64_t*>(x), static_cast<int64_t*>(values), indices, desc, workspace,
                          stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ingot::backend::cuda
