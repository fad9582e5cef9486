// Copyright ingot authors. Apache-2.0.
//
// The cooperative CUTLASS GEMM configs (see cutlass_gemm_kernels.cuh): large tiles for large M.
#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"

namespace ingot::backend::cuda::cutlass_detail {

using cute::Int;
using cute::Shape;

KernelEntry entry_128x256x64_coop_c1x1(CutlassGemmType t, CutlassEpilogue e) {
  return entry_for<Shape<Int<128>, Int<256>, Int<64>>, Shape<Int<1>, Int<1>, Int<1>>, Cooperative>(t, e);
}

KernelEntry entry_256x128x64_coop_c2x1(CutlassGemmType t, CutlassEpilogue e) {
  return entry_for<Shape<Int<256>, Int<128>, Int<64>>, Shape<Int<2>, Int<1>, Int<1>>, Cooperative>(t, e);
}

}  // namespace ingot::backend::cuda::cutlass_detail
