// Copyright ingot authors. Apache-2.0.
//
// The residual CUTLASS GEMM kernels (kBiasResidual, see cutlass_gemm_kernels.cuh): D = acc + bias + C,
// C the residual that BERT's attention-output projection and FFN2 add (FusedGemm with bias and
// residual, no activation). Only two configs get one, fp16 and bf16: the ping-pong 128x128x64 (the
// fastest bias-only kernel at FFN2 b64, 65 us against cuBLASLt's 68 us) and the cooperative
// 128x256x64; a file of their own, so the other files' compile times stay as they were.
#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"

namespace ingot::backend::cuda::cutlass_detail {

using cute::Int;
using cute::Shape;

KernelEntry residual_entry_128x256x64_coop_c1x1(CutlassGemmType t) {
  return residual_entry_for<Shape<Int<128>, Int<256>, Int<64>>, Shape<Int<1>, Int<1>, Int<1>>, Cooperative>(t);
}

KernelEntry residual_entry_128x128x64_pingpong_c1x1(CutlassGemmType t) {
  return residual_entry_for<Shape<Int<128>, Int<128>, Int<64>>, Shape<Int<1>, Int<1>, Int<1>>, Pingpong>(t);
}

}  // namespace ingot::backend::cuda::cutlass_detail
