// Copyright ingot authors. Apache-2.0.
//
// The 128x192x64 ping-pong config, bias-only and bias + residual (no Gelu: the Gelu kernels'
// 64x128 epilogue subtile does not divide N = 192). bench/cutlass_epilogue_probe.cu on the H200
// (session 7, bias only, back to back): BERT-base b64 FFN2 (8192x768x3072) 54.8 us against 56.4
// for 128x128 ping-pong, the attention output projection (8192x768x768) 16.7 against 17.1.
#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"

namespace ingot::backend::cuda::cutlass_detail {

using cute::Int;
using cute::Shape;
using Tile128x192 = Shape<Int<128>, Int<192>, Int<64>>;
using Cluster1x1 = Shape<Int<1>, Int<1>, Int<1>>;

KernelEntry entry_128x192x64_pingpong_c1x1(CutlassGemmType t, CutlassEpilogue e) {
  if (e != CutlassEpilogue::kBias) return KernelEntry{};
  switch (t) {
    case CutlassGemmType::kFloat16:
      return GemmKernel<Tile128x192, Cluster1x1, Pingpong, cutlass::half_t, CutlassEpilogue::kBias>::entry();
    case CutlassGemmType::kBFloat16:
      return GemmKernel<Tile128x192, Cluster1x1, Pingpong, cutlass::bfloat16_t, CutlassEpilogue::kBias>::entry();
  }
  return KernelEntry{};
}

KernelEntry residual_entry_128x192x64_pingpong_c1x1(CutlassGemmType t) {
  return residual_entry_for<Tile128x192, Cluster1x1, Pingpong>(t);
}

}  // namespace ingot::backend::cuda::cutlass_detail
