// Copyright ingot authors. Apache-2.0.
//
// Row copies staged through shared memory: see staged_rows_kernels.h. Why: a thread per element
// (or per narrow word) has too few bytes in flight to cover HBM latency, and a row that is not a
// multiple of 16 bytes cannot be moved in 16-byte words on both sides at once. A chunk of whole
// rows is contiguous in each tensor, so it can be read in 16-byte words whatever the row width;
// the per-column rearrangement then happens in shared memory, and every index computation is
// 32-bit, relative to the chunk (only the chunk's base is 64-bit). The last chunk's partial word
// goes element by element.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/data_movement/staged_rows_kernels.h"
#include "backend/cuda/pointwise/elementwise_common.cuh"

namespace ingot::backend::cuda {
namespace {

constexpr int kBlock = 256;
/// Independent loads each thread has in flight per step.
constexpr int kUnroll = 4;
/// The same for the join's parts (a chunk of kChunkBytes is two 16-byte words a thread; more
/// registers for the words and their parts spill).
constexpr int kPartUnroll = 2;
/// A chunk's target size: with 8 resident blocks that keeps 64 KB of loads in flight per SM,
/// about twice what the H200's HBM latency needs.
constexpr int64_t kChunkBytes = 8192;
/// Largest chunk staged: with a full column table (16 KB) 48 KB of shared memory, the most a
/// launch gets without opting in.
constexpr int64_t kMaxStageBytes = 32768;
/// Chunks shrink below kChunkBytes rather than leave fewer than this many (two per H200 SM).
constexpr int64_t kMinChunks = 264;

/// Copies n T elements from `from` to `to`, both contiguous and V-aligned (one side global, the
/// other shared): V words, kUnroll loads in flight per thread, then the partial word by element.
template <class T, class V>
__device__ __forceinline__ void copy_run(const T* __restrict__ from, T* __restrict__ to, uint32_t n) {
  constexpr uint32_t kPer = sizeof(V) / sizeof(T);
  const uint32_t words = n / kPer;
  const V* src = reinterpret_cast<const V*>(from);
  V* dst = reinterpret_cast<V*>(to);
  for (uint32_t w = threadIdx.x; w < words; w += kUnroll * blockDim.x) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (w + u * blockDim.x < words) v[u] = src[w + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (w + u * blockDim.x < words) dst[w + u * blockDim.x] = v[u];
  }
  for (uint32_t e = words * kPer + threadIdx.x; e < n; e += blockDim.x) to[e] = from[e];
}

/// launch_gather_columns' view: x [rows, in_cols] -> y [rows, out_cols], in elements.
struct GatherColumns {
  int64_t rows = 0;
  int32_t in_cols = 0, out_cols = 0;
  int32_t inner = 1, axis_len = 0;
  int32_t chunk_rows = 1;
  int32_t table_bytes = 0;  ///< shared bytes of the column table (a multiple of 16); staged rows follow
};

/// kPack elements (or column-table entries) moved as one word.
template <class T, int kPack>
struct alignas(sizeof(T) * kPack) Packed {
  T v[kPack];
};

// kStaged: the chunk's x rows are first copied to shared memory in V words (rows that the
// gather mostly reads whole); otherwise the gathered elements come from global memory through
// L1 (rows far wider than what is taken from them). A thread writes kPack adjacent output
// elements as one word (kPack divides out_cols), words blockDim.x apart so that a warp's stores
// are contiguous; it walks them with one division per chunk: (row, word) advance by blockDim.x
// words with an add and a compare.
template <class T, class V, bool kStaged, int kPack>
__global__ void __launch_bounds__(kBlock) gather_columns_kernel(const T* __restrict__ x, const void* indices,
                                                                bool idx64, T* __restrict__ y, GatherColumns g) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t* col = reinterpret_cast<int32_t*>(smem);
  T* stage = reinterpret_cast<T*>(smem + g.table_bytes);
  for (int32_t q = threadIdx.x; q < g.out_cols; q += blockDim.x) {
    const int32_t k = q / g.inner, i = q - k * g.inner;
    int64_t j = idx64 ? static_cast<const int64_t*>(indices)[k] : static_cast<const int32_t*>(indices)[k];
    if (j < 0) j += g.axis_len;
    col[q] = (j >= 0 && j < g.axis_len) ? static_cast<int32_t>(j) * g.inner + i : -1;
  }
  __syncthreads();
  const auto* cols = reinterpret_cast<const Packed<int32_t, kPack>*>(col);
  const uint32_t in_cols = static_cast<uint32_t>(g.in_cols);
  const uint32_t words = static_cast<uint32_t>(g.out_cols) / kPack;  // per output row
  const uint32_t step_rows = blockDim.x / words, step_words = blockDim.x - step_rows * words;
  const int64_t chunks = (g.rows + g.chunk_rows - 1) / g.chunk_rows;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t r0 = c * g.chunk_rows;
    const uint32_t nr = static_cast<uint32_t>(g.rows - r0 < g.chunk_rows ? g.rows - r0 : g.chunk_rows);
    if constexpr (kStaged) {
      copy_run<T, V>(x + r0 * in_cols, stage, nr * in_cols);
      __syncthreads();
    }
    const T* src = kStaged ? stage : x + r0 * in_cols;
    auto* dst = reinterpret_cast<Packed<T, kPack>*>(y + r0 * g.out_cols);
    const uint32_t n = nr * words;
    uint32_t r = threadIdx.x / words, w = threadIdx.x - r * words;
    for (uint32_t e = threadIdx.x; e < n; e += kUnroll * blockDim.x) {
      Packed<T, kPack> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const bool live = e + u * blockDim.x < n;
        const Packed<int32_t, kPack> from = cols[w];
        const T* row = src + r * in_cols;
#pragma unroll
        for (int s = 0; s < kPack; ++s)
          v[u].v[s] = (live && from.v[s] >= 0) ? row[static_cast<uint32_t>(from.v[s])] : T(0);
        w += step_words;
        r += step_rows;
        if (w >= words) {
          w -= words;
          ++r;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (e + u * blockDim.x < n) dst[e + u * blockDim.x] = v[u];
    }
    if constexpr (kStaged) __syncthreads();  // the next chunk overwrites the stage
  }
}

/// launch_join_staged's parts, in units; the parts tile the joined row in order.
struct JoinStaged {
  void* data[kMaxStagedParts] = {};
  int32_t at[kMaxStagedParts] = {};
  int32_t cols[kMaxStagedParts] = {};
  int32_t count = 0;
  int32_t pitch = 0;  ///< units per joined row
  int32_t chunk_rows = 1;
  int64_t rows = 0;
};

/// p.<array>[j] for a part index that may differ between threads: unrolled selects of uniform
/// loads instead of an indexed load from the parameter space.
template <class A>
__device__ __forceinline__ A pick(const A (&a)[kMaxStagedParts], int j) {
  A v = a[0];
#pragma unroll
  for (int k = 1; k < kMaxStagedParts; ++k)
    if (j == k) v = a[k];
  return v;
}

// Moves the parts' `nr` rows starting at row r0 to (kToShared) or from the joined rows staged in
// shared memory: the global side in 16-byte words, the shared side unit by unit (one division per
// word finds its row). The parts' whole words are numbered end to end, so a thread's kPartUnroll
// loads are all in flight at once whichever parts they fall in, and threads take words
// blockDim.x apart, so global accesses coalesce; the shared side sees up to 4-way bank
// conflicts, well within its bandwidth. Each part's partial last word (the last chunk's) goes
// unit by unit.
template <class U, bool kToShared>
__device__ __forceinline__ void move_parts(const JoinStaged& p, int64_t r0, uint32_t nr, U* stage) {
  constexpr uint32_t kPer = sizeof(uint4) / sizeof(U);
  union Word {
    uint4 v;
    U u[kPer];
  };
  const uint32_t pitch = static_cast<uint32_t>(p.pitch);
  uint32_t total = 0;
  for (int32_t j = 0; j < p.count; ++j) total += nr * static_cast<uint32_t>(p.cols[j]) / kPer;
  for (uint32_t w0 = threadIdx.x; w0 < total; w0 += kPartUnroll * blockDim.x) {
    Word b[kPartUnroll];
    int part[kPartUnroll];
    uint32_t w[kPartUnroll];  // within its part
#pragma unroll
    for (int u = 0; u < kPartUnroll; ++u) {
      w[u] = w0 + u * blockDim.x;
      part[u] = -1;
      if (w[u] >= total) continue;
      part[u] = 0;
#pragma unroll
      for (int j = 0; j + 1 < kMaxStagedParts; ++j) {
        const uint32_t words = nr * static_cast<uint32_t>(p.cols[j]) / kPer;
        if (j + 1 >= p.count || w[u] < words) break;
        w[u] -= words;
        part[u] = j + 1;
      }
      if constexpr (kToShared) {
        const uint32_t cols = static_cast<uint32_t>(pick(p.cols, part[u]));
        b[u].v = reinterpret_cast<const uint4*>(static_cast<const U*>(pick(p.data, part[u])) + r0 * cols)[w[u]];
      }
    }
#pragma unroll
    for (int u = 0; u < kPartUnroll; ++u) {
      if (part[u] < 0) continue;
      const uint32_t cols = static_cast<uint32_t>(pick(p.cols, part[u]));
      const uint32_t e = w[u] * kPer, r = e / cols;
      uint32_t c = e - r * cols;
      U* row = stage + r * pitch + static_cast<uint32_t>(pick(p.at, part[u]));
#pragma unroll
      for (uint32_t s = 0; s < kPer; ++s) {
        if constexpr (kToShared)
          row[c] = b[u].u[s];
        else
          b[u].u[s] = row[c];
        if (++c == cols) {
          c = 0;
          row += pitch;
        }
      }
      if constexpr (!kToShared)
        reinterpret_cast<uint4*>(static_cast<U*>(pick(p.data, part[u])) + r0 * cols)[w[u]] = b[u].v;
    }
  }
  for (int32_t j = 0; j < p.count; ++j) {
    const uint32_t cols = static_cast<uint32_t>(p.cols[j]), n = nr * cols, at = static_cast<uint32_t>(p.at[j]);
    U* part = static_cast<U*>(p.data[j]) + r0 * cols;
    for (uint32_t e = n / kPer * kPer + threadIdx.x; e < n; e += blockDim.x) {
      const uint32_t r = e / cols;
      U& cell = stage[r * pitch + at + (e - r * cols)];
      if constexpr (kToShared)
        cell = part[e];
      else
        part[e] = cell;
    }
  }
}

// A chunk of joined rows lives in shared memory: Concat fills it from the parts and writes it out
// whole; Split reads it in whole and writes the parts. All global accesses are 16-byte words
// (plus the last chunk's partial words), whatever the parts' widths.
template <class U, bool kConcat>
__global__ void __launch_bounds__(kBlock) join_staged_kernel(const __grid_constant__ JoinStaged p, U* joined) {
  INGOT_KERNEL_ENTRY();
  extern __shared__ __align__(16) unsigned char smem[];
  U* stage = reinterpret_cast<U*>(smem);
  const int64_t chunks = (p.rows + p.chunk_rows - 1) / p.chunk_rows;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t r0 = c * p.chunk_rows;
    const uint32_t nr = static_cast<uint32_t>(p.rows - r0 < p.chunk_rows ? p.rows - r0 : p.chunk_rows);
    U* rows = joined + r0 * p.pitch;
    const uint32_t n = nr * static_cast<uint32_t>(p.pitch);
    if constexpr (!kConcat) {
      copy_run<U, uint4>(rows, stage, n);
      __syncthreads();
    }
    move_parts<U, kConcat>(p, r0, nr, stage);
    __syncthreads();
    if constexpr (kConcat) {
      copy_run<U, uint4>(stage, rows, n);
      __syncthreads();  // the next chunk overwrites the stage
    }
  }
}

uint64_t address_bits(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

/// The largest power of two, at most 16, that divides `bits` (16 for 0).
int64_t pow2_dividing(uint64_t bits) {
  int64_t w = 16;
  while (w > 1 && (bits & static_cast<uint64_t>(w - 1)) != 0) w /= 2;
  return w;
}

/// Rows per chunk: about kChunkBytes of `row_bytes` rows, fewer where that leaves fewer than
/// kMinChunks chunks, and a multiple of `granule` (which keeps every chunk 16-byte aligned).
int64_t chunk_rows(int64_t rows, int64_t row_bytes, int64_t granule) {
  int64_t r = std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, row_bytes));
  r = std::min(r, (rows + kMinChunks - 1) / kMinChunks);
  return std::max(granule, r / granule * granule);
}

template <class F>
bool with_unsigned(int64_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      f(ew::Tag<uint8_t>{});
      return true;
    case 2:
      f(ew::Tag<uint16_t>{});
      return true;
    case 4:
      f(ew::Tag<uint32_t>{});
      return true;
    case 8:
      f(ew::Tag<uint64_t>{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool launch_gather_columns(int32_t element_bytes, const void* x, const void* indices, bool indices_int64, void* y,
                           int64_t outer, int64_t axis_len, int64_t inner, int64_t count, cudaStream_t stream) {
  int64_t eb = element_bytes;
  if (eb <= 0 || outer < 16 || inner < 1 || count < 1 || axis_len < 0 || inner * eb >= 64) return false;
  // Rows of several elements move as wider ones where the row and both buffers allow (two fp16
  // channels as one 4-byte element): fewer, wider accesses.
  while (eb < 8 && inner % 2 == 0 && ((address_bits(x) | address_bits(y)) & static_cast<uint64_t>(2 * eb - 1)) == 0) {
    eb *= 2;
    inner /= 2;
  }
  GatherColumns g;
  const int64_t in_cols = axis_len * inner, out_cols = count * inner;
  if (out_cols > kMaxGatherColumns || in_cols > std::numeric_limits<int32_t>::max()) return false;
  g.rows = outer;
  g.in_cols = static_cast<int32_t>(in_cols);
  g.out_cols = static_cast<int32_t>(out_cols);
  g.inner = static_cast<int32_t>(inner);
  g.axis_len = static_cast<int32_t>(axis_len);
  g.table_bytes = static_cast<int32_t>((out_cols * 4 + 15) / 16 * 16);
  // Staging reads x's rows whole: worth it when the gather takes at least half a row's worth.
  const bool wide = (address_bits(x) & 15u) == 0;
  const int64_t word = wide ? 16 : eb;
  const int64_t granule = word / std::min(word, pow2_dividing(static_cast<uint64_t>(in_cols * eb)));
  const bool staged = in_cols <= 2 * out_cols && granule * in_cols * eb <= kMaxStageBytes;
  int64_t rows_per = 0, stage_bytes = 0;
  if (staged) {
    rows_per = chunk_rows(outer, std::max(in_cols, out_cols) * eb, granule);
    stage_bytes = (rows_per * in_cols * eb + 15) / 16 * 16;
  } else {
    rows_per = chunk_rows(outer, out_cols * eb, 1);
    if (in_cols > 0) rows_per = std::min(rows_per, std::numeric_limits<int32_t>::max() / in_cols);
    if (rows_per < 1) return false;
  }
  g.chunk_rows = static_cast<int32_t>(rows_per);
  const int64_t chunks = (outer + rows_per - 1) / rows_per;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(chunks, ew::kMaxBlocks));
  const size_t shared = static_cast<size_t>(g.table_bytes + stage_bytes);
  // Staged rows of narrow elements write 2 or 4 of them per thread as one word of up to 8 bytes
  // (where the output row holds whole words): fewer instructions per element.
  int64_t pack = 1;
  if (staged && wide) {
    while (pack < 4 && 2 * pack * eb <= 8 && out_cols % (2 * pack) == 0 &&
           (address_bits(y) & static_cast<uint64_t>(2 * pack * eb - 1)) == 0)
      pack *= 2;
  }
  return with_unsigned(eb, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    if (staged && wide) {
      if constexpr (sizeof(T) <= 2) {
        if (pack == 4) {
          launch_kernel(gather_columns_kernel<T, uint4, true, 4>, grid, kBlock, shared, stream, xs, indices,
                        indices_int64, ys, g);
          return;
        }
      }
      if constexpr (sizeof(T) <= 4) {
        if (pack == 2) {
          launch_kernel(gather_columns_kernel<T, uint4, true, 2>, grid, kBlock, shared, stream, xs, indices,
                        indices_int64, ys, g);
          return;
        }
      }
      launch_kernel(gather_columns_kernel<T, uint4, true, 1>, grid, kBlock, shared, stream, xs, indices, indices_int64,
                    ys, g);
    } else if (staged) {
      launch_kernel(gather_columns_kernel<T, T, true, 1>, grid, kBlock, shared, stream, xs, indices, indices_int64, ys,
                    g);
    } else {
      launch_kernel(gather_columns_kernel<T, T, false, 1>, grid, kBlock, shared, stream, xs, indices, indices_int64, ys,
                    g);
    }
  });
}

bool launch_join_staged(int32_t unit_bytes, bool concat, void* joined, int64_t pitch, int64_t rows,
                        const RowSegment* parts, int32_t count, cudaStream_t stream) {
  if (count < 1 || count > kMaxStagedParts || rows < 1 || pitch < 1) return false;
  if (unit_bytes != 1 && unit_bytes != 2 && unit_bytes != 4 && unit_bytes != 8) return false;
  const int64_t row_bytes = pitch * unit_bytes;
  if (row_bytes > kMaxStageBytes) return false;
  JoinStaged p;
  uint64_t addresses = address_bits(joined), sizes = static_cast<uint64_t>(row_bytes);
  int64_t at = 0;
  for (int32_t j = 0; j < count; ++j) {
    if (parts[j].at != at || parts[j].cols < 1) return false;
    addresses |= address_bits(parts[j].data);
    sizes |= static_cast<uint64_t>(parts[j].cols * unit_bytes);
    p.data[j] = const_cast<void*>(parts[j].data);
    p.at[j] = static_cast<int32_t>(at);
    p.cols[j] = static_cast<int32_t>(parts[j].cols);
    at += parts[j].cols;
  }
  if (at != pitch || (addresses & 15u) != 0) return false;
  // Every chunk starts a multiple of `granule` rows in, where each part's rows and the joined
  // rows all sum to whole 16-byte words.
  const int64_t granule = 16 / pow2_dividing(sizes);
  if (granule * row_bytes > kMaxStageBytes) return false;
  p.count = count;
  p.pitch = static_cast<int32_t>(pitch);
  p.rows = rows;
  p.chunk_rows = static_cast<int32_t>(chunk_rows(rows, row_bytes, granule));
  const int64_t chunks = (rows + p.chunk_rows - 1) / p.chunk_rows;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(chunks, ew::kMaxBlocks));
  const size_t shared = static_cast<size_t>((p.chunk_rows * row_bytes + 15) / 16 * 16);
  return with_unsigned(unit_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (concat)
      launch_kernel(join_staged_kernel<U, true>, grid, kBlock, shared, stream, p, static_cast<U*>(joined));
    else
      launch_kernel(join_staged_kernel<U, false>, grid, kBlock, shared, stream, p, static_cast<U*>(joined));
  });
}

}  // namespace ingot::backend::cuda
