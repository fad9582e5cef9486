// Copyright ingot authors. Apache-2.0.
//
// The int8 GEMM kernels of cutlass_int8_gemm.h: sm90 TMA + GMMA, warp-specialized cooperative,
// 128x128x128 tiles (K 128 int8 = 128 bytes a row, the swizzle's width), A [M,K] and B [N,K] both
// K-major (what int8 wgmma reads), int32 accumulators, and the epilogue as an epilogue visitor tree:
//   scaled = (acc · x_scale) · w_scale[n]      x_scale a scalar read from device memory, w_scale a row
//                                             broadcast (one value per output column n)
//   kBias:          D = scaled + bias[n]
//   kBiasResidual:  D = (scaled + bias[n]) + C  (C the residual, CUTLASS's source operand, fp16)
//   kBiasGeluQuant: D = Gelu(scaled + bias[n]) / y_scale, stored as int8 (cvt.rni.sat: half to even,
//                   saturated)
// in fp32, rounded once to D's type. Persistent data-parallel tile scheduler (no workspace).
#include "backend/cuda/gemm/cutlass_gemm_kernels.cuh"
#include "backend/cuda/gemm/cutlass_int8_gemm.h"

namespace ingot::backend::cuda {
namespace cutlass_detail {
namespace {

using cute::Int;
using cute::Shape;
using cute::Stride;
using Tile = Shape<Int<128>, Int<128>, Int<128>>;
using Cluster = Shape<Int<1>, Int<1>, Int<1>>;
using Half = cutlass::half_t;
constexpr auto kRne = cutlass::FloatRoundStyle::round_to_nearest;

// The trees' leaves: the accumulator, x_scale, w_scale[n], bias[n], C.
using XScale = evt::Sm90ScalarBroadcast<float, Stride<cute::_0, cute::_0, int64_t>>;
using WScale = evt::Sm90RowBroadcast<0, Tile, float, float, Stride<cute::_0, cute::_1, int64_t>>;
using Bias = evt::Sm90RowBroadcast<0, Tile, Half, float, Stride<cute::_0, cute::_1, int64_t>>;
template <template <class> class Op, class Out>
using Compute = evt::Sm90Compute<Op, Out, float, kRne>;

// (acc · x_scale) · w_scale[n] + bias[n]
using Scaled = evt::Sm90EVT<Compute<cutlass::multiplies, float>,
                            evt::Sm90EVT<Compute<cutlass::multiplies, float>, evt::Sm90AccFetch, XScale>, WScale>;
template <class Out>
using ScaledPlusBias = evt::Sm90EVT<Compute<cutlass::plus, Out>, Scaled, Bias>;

template <CutlassInt8Epilogue kEpilogue>
struct Int8Fusion;
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBias> {
  using Op = ScaledPlusBias<Half>;
  using D = Half;
  using C = void;
};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasResidual> {
  using Op = evt::Sm90EVT<Compute<cutlass::plus, Half>, ScaledPlusBias<float>, evt::Sm90SrcFetch<Half>>;
  using D = Half;
  using C = Half;
};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasGeluQuant> {
  using YScale = evt::Sm90ScalarBroadcast<float, Stride<cute::_0, cute::_0, int64_t>>;
  using Op = evt::Sm90EVT<Compute<cutlass::divides, int8_t>,
                          evt::Sm90EVT<Compute<ExactGelu, float>, ScaledPlusBias<float>>, YScale>;
  using D = int8_t;
  using C = void;
};

// The arguments of the trees above, leaves first in each node, as the visitor trees take them.
template <class Out>
typename ScaledPlusBias<Out>::Arguments scaled_plus_bias(const CutlassInt8GemmProblem& p) {
  typename XScale::Arguments xs{{1.0f}, {p.x_scale}, {}};
  typename WScale::Arguments ws{p.w_scale, 1.0f, {}};
  typename Bias::Arguments b{static_cast<const Half*>(p.bias), Half(0), {}};
  return {{{{}, xs, {}}, ws, {}}, b, {}};
}

template <CutlassInt8Epilogue kEpilogue>
struct Int8GemmKernel {
  using F = Int8Fusion<kEpilogue>;
  using RowMajor = cutlass::layout::RowMajor;
  using ColumnMajor = cutlass::layout::ColumnMajor;
  static constexpr int kAlignAB = 16;  // 16 bytes of int8
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<typename F::D>::value;
  static constexpr int kAlignC = std::is_void_v<typename F::C> ? kAlignD : 8;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      int32_t, float, typename F::C, RowMajor, kAlignC, typename F::D, RowMajor, kAlignD,
      cutlass::epilogue::TmaWarpSpecializedCooperative, typename F::Op>::CollectiveOp;

  // B [N,K] row-major is CUTLASS's K x N column-major operand: K-major, as int8 GMMA needs.
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, RowMajor, kAlignAB, int8_t, ColumnMajor, kAlignAB,
      int32_t, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments arguments(const CutlassInt8GemmProblem& p) {
    using StrideA = typename Kernel::StrideA;  // (M, K, L): (lda, 1, batch)
    using StrideB = typename Kernel::StrideB;  // (N, K, L): (ldb, 1, batch)
    using StrideD = typename Kernel::StrideD;  // (M, N, L): (ldd, 1, batch)
    StrideA stride_a = cute::make_stride(p.lda, cute::Int<1>{}, int64_t(0));
    StrideB stride_b = cute::make_stride(p.ldb, cute::Int<1>{}, int64_t(0));
    StrideD stride_d = cute::make_stride(p.ldd, cute::Int<1>{}, int64_t(0));
    cutlass::KernelHardwareInfo hw;
    cudaGetDevice(&hw.device_id);
    hw.sm_count = p.sm_count;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {p.m, p.n, p.k, 1},
                                  {static_cast<const int8_t*>(p.a), stride_a, static_cast<const int8_t*>(p.b), stride_b},
                                  {{}, nullptr, stride_d, static_cast<typename F::D*>(p.d), stride_d},
                                  hw};
    if constexpr (kEpilogue == CutlassInt8Epilogue::kBias) {
      args.epilogue.thread = scaled_plus_bias<Half>(p);
    } else if constexpr (kEpilogue == CutlassInt8Epilogue::kBiasResidual) {
      args.epilogue.thread = {scaled_plus_bias<float>(p), {}, {}};  // plus(scaled + bias, C)
      using StrideC = typename Kernel::StrideC;
      args.epilogue.ptr_C = static_cast<const Half*>(p.c);
      args.epilogue.dC = StrideC(cute::make_stride(p.ldc, cute::Int<1>{}, int64_t(0)));
    } else {
      typename F::YScale::Arguments ys{{1.0f}, {p.y_scale}, {}};
      args.epilogue.thread = {{scaled_plus_bias<float>(p), {}}, ys, {}};  // divides(gelu(scaled + bias), y_scale)
    }
    return args;
  }

  static bool can_implement(const CutlassInt8GemmProblem& p) {
    if (p.k % 16 != 0 || p.n % 16 != 0 || !p.x_scale || !p.w_scale) return false;
    if (kEpilogue == CutlassInt8Epilogue::kBiasResidual && !p.c) return false;
    if (kEpilogue == CutlassInt8Epilogue::kBiasGeluQuant && !p.y_scale) return false;
    return Gemm::can_implement(arguments(p)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const CutlassInt8GemmProblem& p) { return Gemm::get_workspace_size(arguments(p)); }

  static CutlassGemmStatus run(const CutlassInt8GemmProblem& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
    if (!can_implement(p)) return CutlassGemmStatus::kCannotImplement;
    typename Gemm::Arguments args = arguments(p);
    if (Gemm::get_workspace_size(args) > workspace_bytes) return CutlassGemmStatus::kWorkspaceTooSmall;
    Gemm gemm;
    if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess)
      return CutlassGemmStatus::kInitializeFailed;
    if (gemm.run(stream, nullptr, pdl_enabled()) != cutlass::Status::kSuccess) return CutlassGemmStatus::kLaunchFailed;
    return CutlassGemmStatus::kOk;
  }
};

}  // namespace
}  // namespace cutlass_detail

bool cutlass_int8_gemm_can_implement(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p) {
  using namespace cutlass_detail;
  switch (epilogue) {
    case CutlassInt8Epilogue::kBias: return Int8GemmKernel<CutlassInt8Epilogue::kBias>::can_implement(p);
    case CutlassInt8Epilogue::kBiasResidual: return Int8GemmKernel<CutlassInt8Epilogue::kBiasResidual>::can_implement(p);
    case CutlassInt8Epilogue::kBiasGeluQuant:
      return Int8GemmKernel<CutlassInt8Epilogue::kBiasGeluQuant>::can_implement(p);
  }
  return false;
}

size_t cutlass_int8_gemm_workspace_bytes(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p) {
  using namespace cutlass_detail;
  switch (epilogue) {
    case CutlassInt8Epilogue::kBias: return Int8GemmKernel<CutlassInt8Epilogue::kBias>::workspace_bytes(p);
    case CutlassInt8Epilogue::kBiasResidual:
      return Int8GemmKernel<CutlassInt8Epilogue::kBiasResidual>::workspace_bytes(p);
    case CutlassInt8Epilogue::kBiasGeluQuant:
      return Int8GemmKernel<CutlassInt8Epilogue::kBiasGeluQuant>::workspace_bytes(p);
  }
  return 0;
}

CutlassGemmStatus launch_cutlass_int8_gemm(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  using namespace cutlass_detail;
  switch (epilogue) {
    case CutlassInt8Epilogue::kBias:
      return Int8GemmKernel<CutlassInt8Epilogue::kBias>::run(p, workspace, workspace_bytes, stream);
    case CutlassInt8Epilogue::kBiasResidual:
      return Int8GemmKernel<CutlassInt8Epilogue::kBiasResidual>::run(p, workspace, workspace_bytes, stream);
    case CutlassInt8Epilogue::kBiasGeluQuant:
      return Int8GemmKernel<CutlassInt8Epilogue::kBiasGeluQuant>::run(p, workspace, workspace_bytes, stream);
  }
  return CutlassGemmStatus::kUnknownKernel;
}

}  // namespace ingot::backend::cuda
