// Copyright ingot authors. Apache-2.0.
//
// The topk family's device code interface (topk_kernels.cu) and the ordering it sorts by.
// TopK of a contiguous [outer, n, inner] view along the middle dim, giving values and int64
// indices of shape [outer, k, inner], in the CPU reference's order (src/backend/cpu/kernels/
// tensor_index.cc, a stable sort): best first, ties to the lower index, NaN above every
// number (first when largest, last when smallest), -0 equal to +0.
//
// Every element becomes a sort key: an unsigned "rank" whose ascending order is the wanted
// order, and its index along the axis; keys compare by rank, then index. Rows of up to
// kTopKBitonicMax elements are sorted by one block in shared memory (bitonic network, padded
// to a power of two with keys that sort last); longer rows go through a segmented radix sort
// (CUB) in the workspace, in batches of rows. The key functions and the network's
// compare-exchange are __host__ __device__ so the tests can replay them on the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

#if defined(__CUDACC__)
#define INGOT_TOPK_HD __host__ __device__ __forceinline__
#else
#define INGOT_TOPK_HD inline
#endif

namespace ingot::ir {
class Node;
struct TensorType;
}  // namespace ingot::ir

namespace ingot::backend::cuda {

enum class TopKType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4 };

/// Longest row the one-block shared-memory sort takes (a power of two).
constexpr int64_t kTopKBitonicMax = 2048;

struct TopKDesc {
  int64_t outer = 0;
  int64_t n = 0;  ///< axis length
  int64_t inner = 0;
  int64_t k = 0;
  bool largest = true;
};

/// Workspace bytes the launch needs for `desc` (0 when every row fits the shared-memory sort).
/// Grows with outer * inner, n.
size_t topk_workspace_bytes(TopKType t, const TopKDesc& desc);

/// values[o, t, i] / indices[o, t, i] = the t-th best of x[o, :, i]. `indices` may be null (the
/// node has no Indices output). `workspace` holds topk_workspace_bytes(t, desc) bytes.
cudaError_t launch_topk(TopKType t, const void* x, void* values, int64_t* indices, const TopKDesc& desc,
                        void* workspace, cudaStream_t stream);

namespace topk_math {

/// Ascending order of `bits` (a float's bit pattern) is ascending value; every NaN maps above
/// +inf and to one key, -0 to +0's key.
INGOT_TOPK_HD uint64_t float_order(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN
  if ((bits & 0x7fffffffu) == 0) bits = 0;                     // -0 == +0
  return (bits & 0x80000000u) ? static_cast<uint32_t>(~bits) : (bits | 0x80000000u);
}
INGOT_TOPK_HD uint64_t int32_order(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
INGOT_TOPK_HD uint64_t int64_order(int64_t v) { return static_cast<uint64_t>(v) ^ 0x8000000000000000ull; }

/// The rank a key sorts by (ascending): the order reversed for largest. `wide` is true for
/// 64-bit orders (int64 data); narrow ranks keep the upper 32 bits clear.
INGOT_TOPK_HD uint64_t rank_of(uint64_t order, bool largest, bool wide) {
  if (!largest) return order;
  return wide ? ~order : (~order & 0xffffffffull);
}

/// Keys compare by rank, then by index (lower first): a total order, so any correct sort gives
/// the reference's stable result.
INGOT_TOPK_HD bool key_less(uint64_t ra, uint32_t ia, uint64_t rb, uint32_t ib) {
  return ra < rb || (ra == rb && ia < ib);
}

/// One compare-exchange of the bitonic network (stage `size`, distance `stride`) at position i
/// of arrays holding `p` (a power of two) keys. Positions whose partner is below them do
/// nothing, so every pair is handled exactly once per step.
INGOT_TOPK_HD void bitonic_step(uint64_t* rank, uint32_t* idx, int64_t size, int64_t stride, int64_t i) {
  const int64_t j = i ^ stride;
  if (j <= i) return;
  const bool ascending = (i & size) == 0;
  const bool out_of_order =
      ascending ? key_less(rank[j], idx[j], rank[i], idx[i]) : key_less(rank[i], idx[i], rank[j], idx[j]);
  if (out_of_order) {
    const uint64_t r = rank[i];
    rank[i] = rank[j];
    rank[j] = r;
    const uint32_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

/// The padded length of a row for the bitonic sort: the next power of two >= n (at least 2).
INGOT_TOPK_HD int64_t bitonic_length(int64_t n) {
  int64_t p = 2;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace topk_math

// ---- Host side (topk_tactics.cc). ----

/// A TopK node's checked attributes, recorded in the engine (the tactic's params). K is read
/// from the Values output's shape at run time (the runtime propagates it from K).
struct TopKParams {
  uint32_t version = 1;
  int32_t axis = -1;  ///< as given (normalized against the run-time rank)
  int32_t largest = 1;
  int32_t reserved = 0;
};

/// Checks a TopK node against what the kernels do; the error says why a node is refused.
Status topk_params_for(const ir::Node& node, const std::vector<ir::TensorType>& inputs, TopKParams* params);
/// The launch description for these run-time shapes (x, and the Values output y); an error
/// when y is not x with the axis cut to some k <= n.
Status topk_desc_for(const TopKParams& params, const Shape64& x, const Shape64& y, TopKDesc* desc);
bool topk_type(DataType t, TopKType* out);

}  // namespace ingot::backend::cuda
