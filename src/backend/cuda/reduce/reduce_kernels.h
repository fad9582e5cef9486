// Copyright ingot authors. Apache-2.0.
//
// Launchers for the reduction family's device code (reduce_kernels.cu): Reduce* over any set of
// axes and ArgMax/ArgMin over one axis, for f32/f16/bf16 inputs, accumulated in fp32. Plain C++
// so reduce_tactics.cc compiles with the host compiler; every launcher enqueues on `stream`,
// never synchronizes, and returns cudaGetLastError() after its launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"  // FloatType, kMaxDims

namespace ingot::backend::cuda {

enum class ReduceOp : int32_t { kSum = 0, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

/// A contiguous input seen as kept dims (one output element per index) and reduced dims (the
/// elements folded into it), each with their element strides in the input, outermost first.
/// Build it with size-1 dims dropped and neighbours of the same kind merged: the launcher picks
/// a thread, a warp or a block per output from the innermost reduced stride and the sizes.
struct ReduceDesc {
  int32_t kept_rank = 0;
  int32_t red_rank = 0;
  int64_t kept_dims[kMaxDims] = {};
  int64_t kept_strides[kMaxDims] = {};
  int64_t red_dims[kMaxDims] = {};
  int64_t red_strides[kMaxDims] = {};
  int64_t outputs = 1;  ///< product of kept_dims
  int64_t count = 1;    ///< product of red_dims (elements per output)
};

/// A strided reduction whose outputs fill fewer than this many 32-output blocks splits each
/// output's range over more blocks (two launches: partials, then their combination).
/// Eight 256-thread blocks on each of the H200's 132 SMs: the loads a warp has in flight are few
/// (a few per row), so latency hides only with many warps (264, two waves, left squeeze-excite
/// pooling of [16,20,20,480] at 37 us in the census profile of 2026-12-02).
constexpr int64_t kReduceSplitTargetBlocks = 1056;
/// The fewest reduced elements a split chunk takes.
constexpr int64_t kReduceMinRowsPerChunk = 64;
/// Outputs a strided reduction's lane takes as one 16-byte pack per reduced row when `desc` allows
/// it for elements of `element_bytes` (one merged reduced dim, the kept innermost dim contiguous and
/// a whole number of packs, the reduced stride too): 16 / element_bytes, else 1 (also for 0). The
/// launcher also needs x 16-byte aligned.
int reduce_pack_width(const ReduceDesc& desc, int element_bytes);
/// Most scratch a split needs: chunks * outputs floats, chunks <= ceil(target / tiles) and
/// outputs <= 32 * V * tiles (V <= 8, the pack width of 2-byte types), so at most
/// (target + tiles) * 32 * V < 2 * target * 32 * 8 floats.
constexpr uint64_t kReduceWorkspaceBytes = 2 * kReduceSplitTargetBlocks * 32 * 8 * sizeof(float);

/// How many chunks launch_reduce splits `desc`'s reduced range into (1: no split), for elements
/// of `element_bytes` (0: as if unpacked; the tiles are 32 * reduce_pack_width outputs).
int reduce_split_chunks(const ReduceDesc& desc, int element_bytes = 0);

/// y[o] = reduction of the `count` elements of output o (y contiguous, `outputs` elements).
/// Max/Min propagate NaN; an empty reduction gives the op's identity (Mean: NaN). `workspace`
/// (kReduceWorkspaceBytes) holds a split reduction's partials; without it the reduction runs
/// unsplit. `allow_pack`: a strided reduction whose layout allows it (reduce_pack_width > 1, x
/// 16-byte aligned) reads 16-byte packs of neighbouring outputs, which wins on large inputs (batch-64
/// squeeze-excite pooling 1.1-2.6x) and loses ~4 us on small ones (batch 1), fewer lanes in flight;
/// the autotuner picks (tactics cuda.reduce.<op> and cuda.reduce.<op>.packed).
cudaError_t launch_reduce(ReduceOp op, FloatType t, const void* x, void* y, const ReduceDesc& desc, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream, bool allow_pack = false);

/// ArgMax / ArgMin over the middle dim of the contiguous [outer, len, inner] view; y holds
/// outer * inner int64 indices. Ties keep the first index (the last with select_last); the
/// first NaN wins, as numpy. len must be >= 1.
cudaError_t launch_arg_reduce(bool is_max, bool select_last, FloatType t, const void* x, int64_t* y, int64_t outer,
                              int64_t len, int64_t inner, cudaStream_t stream);

/// Element types of launch_cumsum.
enum class ScanType : int32_t { kF32 = 0, kF16, kBF16, kI32, kI64 };

/// CumSum over the middle dim of the contiguous [outer, len, inner] view: one thread per line,
/// floats accumulated in fp32, integers wrapping; `exclusive` shifts by one (starting at 0),
/// `reverse` runs from the end. Lines are independent, so threads of neighbouring `inner`
/// positions read neighbouring elements.
cudaError_t launch_cumsum(ScanType t, const void* x, void* y, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                          bool reverse, cudaStream_t stream);

}  // namespace ingot::backend::cuda
