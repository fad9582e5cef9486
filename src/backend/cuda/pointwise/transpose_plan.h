// Copyright ingot authors. Apache-2.0.
//
// How launch_transpose moves a permutation (a batched 2-D transpose with a dim of at most 8, an
// image's channels, keeps its own kernels): planned on the host (transpose_plan.cc), run by elementwise_row_kernels.cu. The
// index arithmetic below is __host__ __device__ so the tests replay a kernel's addressing on the
// host, without a GPU, against the permutation itself.
//
// Two forms, after output dims that are contiguous in the input too have been merged:
// - kRuns: the innermost output dim is contiguous in the input as well (a window partition that
//   keeps channels innermost: [B, h, p, w, p, C] -> [B, h, w, p, p, C]). Each run of that dim is
//   copied in the widest unit (16 down to 1 bytes) that the run length, the input's run offsets and
//   both pointers allow; one thread per unit.
// - kTiled: the input's stride-1 dim sits elsewhere in the output (a window un-partition to NCHW:
//   [B, h, w, p, p, C] -> [B, C, h, p, w, p]). A tile of J x K elements goes through shared memory:
//   J indexes the trailing output dims (flattened; contiguous in the output), K the input dims
//   next to the stride-1 one (flattened; contiguous in the input), and the other dims are the batch.
//   Reads run along K and writes along J, so both are coalesced, however short each single dim is
//   (MaxViT's 7-wide windows: J = 7 x 8 x 7 output positions per tile row). The one-thread-per-
//   element loop this replaces moved MaxViT-T's 25.7 MB window transposes at 350-500 GB/s on the
//   H100 (census s33a profile, 58 of them 1.42 ms of 6.98 ms at batch 32).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#if defined(__CUDACC__)
#define INGOT_TRANSPOSE_HD __host__ __device__ __forceinline__
#else
#define INGOT_TRANSPOSE_HD inline
#endif

namespace ingot::backend::cuda {

constexpr int kTransposeGroupDims = 6;

/// A set of dims walked as one flat row-major index: the dims' sizes (outermost first) and the
/// strides each dim has in the input and in the output (elements, or units for kRuns).
struct TransposeGroup {
  int32_t rank = 0;
  int64_t size = 1;  ///< product of dims
  int64_t dims[kTransposeGroupDims] = {};
  int64_t in[kTransposeGroupDims] = {};
  int64_t out[kTransposeGroupDims] = {};
};

/// Input and output offsets of flat index i of group g. Idx is uint32_t where every index the
/// launch forms fits (TransposePlan::index32), else int64_t.
template <class Idx>
INGOT_TRANSPOSE_HD void transpose_group_offsets(const TransposeGroup& g, Idx i, int64_t* in, int64_t* out) {
  int64_t a = 0, b = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const Idx s = static_cast<Idx>(g.dims[d]);
    const Idx q = i / s;
    const Idx idx = i - q * s;
    i = q;
    a += static_cast<int64_t>(idx) * g.in[d];
    b += static_cast<int64_t>(idx) * g.out[d];
  }
  *in = a;
  *out = b;
}

enum class TransposeForm : int32_t { kRuns = 0, kTiled = 1 };

struct TransposePlan {
  TransposeForm form = TransposeForm::kRuns;
  bool index32 = false;  ///< every flat index, offset and grid-stride sum fits in 31 bits
  // kRuns: unit_bytes per access, `run` units per run; `outer` walks the runs (strides in units;
  // out strides are the output's, so a unit's output offset is its flat index).
  int32_t unit_bytes = 1;
  int64_t run = 1;
  TransposeGroup outer;
  // kTiled: tile edge in elements (64 or 32 for 1- and 2-byte elements, 32 otherwise); j: trailing output dims (output offset of flat j is j), k: the
  // input-contiguous dims, batch: the rest. tiles = batch.size * tiles_j * tiles_k.
  int32_t tile = 32;
  TransposeGroup j, k, batch;
  int64_t tiles_j = 0, tiles_k = 0;
};

/// Drops size-1 output dims and merges an output dim into the one before it where its input stride
/// continues that one's (dims/strides: at least kTransposeGroupDims each). Returns the merged rank
/// (0 for one element), or -1 for a dim <= 0 or a rank outside 0..kTransposeGroupDims.
int32_t merge_transpose_dims(int32_t rank, const int64_t* out_dims, const int64_t* in_strides, int64_t* dims,
                             int64_t* strides);

/// Plans y = transpose(x) (out_dims, in_strides as launch_transpose takes them, already merged or
/// not; size-1 dims are dropped here). False only when neither form applies: no input dim has
/// stride 1 (not a permutation of a contiguous tensor), or rank is outside 0..kTransposeGroupDims. x and y are the pointers, for the unit width's alignment.
bool plan_transpose(int32_t element_bytes, int32_t rank, const int64_t* out_dims, const int64_t* in_strides,
                    const void* x, const void* y, TransposePlan* plan);

/// The launch's grid for a plan (blocks of kTransposeThreads threads; grid-stride beyond it).
constexpr int kTransposeThreads = 256;
int64_t transpose_plan_blocks(const TransposePlan& plan);

/// Runs a plan (elementwise_row_kernels.cu). launch_transpose calls it for what it plans; the
/// transpose probe (bench/transpose_probe.cu) calls it directly to time a plan against the
/// batched 2-D kernels on their own shapes.
cudaError_t launch_transpose_plan(int32_t element_bytes, const TransposePlan& plan, const void* x, void* y,
                                  cudaStream_t stream);

}  // namespace ingot::backend::cuda
