// Copyright ingot authors. Apache-2.0.
//
// ingot::SqueezeExcite in three launches: the squeeze-excite block of EfficientNet, MobileNetV3,
// RegNetY, EfficientNetV2 and MaxViT,
//   pooled[n,c] = mean over H*W of x[n,c,:,:]
//   h[n,r]      = act1(b1[r] + sum_c w1[r,c] pooled[n,c])
//   gate[n,c]   = act2(b2[c] + sum_r w2[c,r] h[n,r])
//   y[n,c,hw]   = x[n,c,hw] gate[n,c]
// all in fp32, rounded once when y is written. Unfused it is 5-6 launches at batch 1 (a split
// ReduceMean and its finish, two one-pixel 1x1 convolutions, the Mul), each a dependent kernel of
// a few microseconds.
//
//  K1 (pool): fp32 partial sums of x over chunks of H*W into the workspace, [chunk][N*C].
//     Channels-last x is [N, HW, C]: a block's threads take neighbouring channel packs of one row
//     (V channels each, one 8- or 16-byte load) and several rows, the rows' sums combined in
//     shared memory by a fixed tree. Channels-first x is [N, C, HW]: a group of lanes (up to a
//     warp) per (channel row, chunk), combined by shuffles. When N*C fills few blocks, H*W is
//     split into chunks so ~1000 blocks run (batch 1: EfficientNet-B0's first SE pools 32
//     channels of 112x112).
//  K2 (finish + FC1): grid (N, Cr / rows): each block sums the chunks of sample n in order into
//     the means (shared memory, C floats), then each warp computes rows of h (lanes over C,
//     shuffle-reduced) into the workspace (fp32).
//  K3 (gate + scale): each block owns (n, a channel tile, a range of H*W): it computes its tile's
//     gates from h[n,:] and w2 (a lane group per channel), keeps them in shared memory, then
//     streams y = x gate with packed loads and stores.
// Deterministic: every sum has a fixed order (no atomics); the chunking is a function of the
// descriptor and the pointers' alignment.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/pointwise/elementwise_kernels.h"

namespace ingot::backend::cuda {

struct SqueezeExciteDesc {
  int64_t n = 0, hw = 0, c = 0, cr = 0;  // x [N, C, HW] or [N, HW, C]; w1 [Cr][C]; w2 [C][Cr]
  bool channels_last = false;
  UnaryOp act1 = UnaryOp::kIdentity;  // FC1's activation (kIdentity: none)
  UnaryParams act1_params;
  UnaryOp act2 = UnaryOp::kIdentity;  // FC2's activation (the gate's: mostly Sigmoid, HardSigmoid)
  UnaryParams act2_params;
};

/// The kernels' channel limits: K2 keeps the C means in shared memory (48 KiB), K3 the Cr values
/// of h.
constexpr int64_t kSqueezeExciteMaxC = 12288;
constexpr int64_t kSqueezeExciteMaxCr = 8192;

/// Workspace bytes for `d`: h (N*Cr fp32) and the pool's partial sums (chunks*N*C fp32). An upper
/// bound over every descriptor with the same C and Cr and smaller or equal N and HW, so the value
/// at a profile's max shapes serves every run of it.
uint64_t squeeze_excite_workspace_bytes(const SqueezeExciteDesc& d);

/// Whether the kernels take `d`: 1 <= C <= kSqueezeExciteMaxC, 1 <= Cr <= kSqueezeExciteMaxCr,
/// N*C within int32, H*W within 2^30, N*C*H*W within 2^38 (grids, row indices).
bool squeeze_excite_supported(const SqueezeExciteDesc& d);

/// x, y: [N, C, HW] or [N, HW, C] (d.channels_last) of type t; w1 [Cr][C], w2 [C][Cr]; b1 [Cr], b2
/// [C] or null. `workspace` holds at least squeeze_excite_workspace_bytes(d) (workspace_bytes
/// says how much there is). cudaErrorInvalidValue for an unsupported descriptor or too small a
/// workspace.
cudaError_t launch_squeeze_excite(FloatType t, const void* x, const void* w1, const void* b1, const void* w2,
                                  const void* b2, void* y, const SqueezeExciteDesc& d, void* workspace,
                                  uint64_t workspace_bytes, cudaStream_t stream);

}  // namespace ingot::backend::cuda
