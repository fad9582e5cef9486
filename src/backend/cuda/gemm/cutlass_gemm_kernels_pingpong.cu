// Copyright ingot authors. Apache-2.0.
//
// The ping-pong CUTLASS GEMM configs (see cutlass_gemm_kernels.cuh): the two consumer warp groups
// work on different tiles, one's epilogue overlapping the other's mainloop; smaller tiles, more of
// them for small M.
#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"

namespace ingot::backend::cuda::cutlass_detail {

using cute::Int;
using cute::Shape;

KernelEntry entry_128x128x64_pingpong_c1x1(CutlassGemmType t, CutlassEpilogue e) {
  return entry_for<Shape<Int<128>, Int<128>, Int<64>>, Shape<Int<1>, Int<1>, Int<1>>, Pingpong>(t, e);
}

KernelEntry entry_64x128x64_pingpong_c1x1(CutlassGemmType t, CutlassEpilogue e) {
  return entry_for<Shape<Int<64>, Int<128>, Int<64>>, Shape<Int<1>, Int<1>, Int<1>>, Pingpong>(t, e);
}

}  // namespace ingot::backend::cuda::cutlass_detail
