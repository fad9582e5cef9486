// Copyright ingot authors. Apache-2.0.
//
// The int8 GEMM kernels of cutlass_int8_gemm.h: sm90 TMA + GMMA, warp-specialized cooperative (and
// ping-pong for the GEMM forms, CutlassInt8Schedule), 128x128x128 tiles (K 128 int8 = 128 bytes a row, the swizzle's width), A [M,K] and B [N,K] both
// K-major (what int8 wgmma reads), int32 accumulators, and the epilogue as an epilogue visitor tree:
//   scaled = (acc · x_scale) · w_scale[n]      x_scale a scalar read from device memory, w_scale a row
//                                             broadcast (one value per output column n); the bias
//                                             fp16 where D is fp16, fp32 where D is int8
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
// The bias has Y's type where Y is fp16, float32 where Y is quantized (what the precision pass leaves
// a layer with an 8-bit result).
template <class B>
using BiasOf = evt::Sm90RowBroadcast<0, Tile, B, float, Stride<cute::_0, cute::_1, int64_t>>;
template <template <class> class Op, class Out>
using Compute = evt::Sm90Compute<Op, Out, float, kRne>;

// (acc · x_scale) · w_scale[n] + bias[n]
using Scaled = evt::Sm90EVT<Compute<cutlass::multiplies, float>,
                            evt::Sm90EVT<Compute<cutlass::multiplies, float>, evt::Sm90AccFetch, XScale>, WScale>;
template <class Out, class B = Half>
using ScaledPlusBias = evt::Sm90EVT<Compute<cutlass::plus, Out>, Scaled, BiasOf<B>>;

template <CutlassInt8Epilogue kEpilogue>
struct Int8Fusion;
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBias> {
  using Op = ScaledPlusBias<Half>;
  using D = Half;
  using C = void;
  using BiasT = Half;
};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasResidual> {
  using Op = evt::Sm90EVT<Compute<cutlass::plus, Half>, ScaledPlusBias<float>, evt::Sm90SrcFetch<Half>>;
  using D = Half;
  using C = Half;
  using BiasT = Half;
};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasGeluQuant> {
  using YScale = evt::Sm90ScalarBroadcast<float, Stride<cute::_0, cute::_0, int64_t>>;
  using Op = evt::Sm90EVT<Compute<cutlass::divides, int8_t>,
                          evt::Sm90EVT<Compute<ExactGelu, float>, ScaledPlusBias<float, float>>, YScale>;
  using D = int8_t;
  using C = void;
  using BiasT = float;
};

// The convolution forms: Relu(s + bias [+ C | + r_scale · C8]) [/ y_scale as int8].
using Scalar = evt::Sm90ScalarBroadcast<float, Stride<cute::_0, cute::_0, int64_t>>;
enum class Res { kNone, kHalf, kInt8 };
template <Res kRes, class B>
struct ResidualSum;
template <class B>
struct ResidualSum<Res::kNone, B> {
  using Op = ScaledPlusBias<float, B>;
  using C = void;
};
template <class B>
struct ResidualSum<Res::kHalf, B> {
  using Op = evt::Sm90EVT<Compute<cutlass::plus, float>, ScaledPlusBias<float, B>, evt::Sm90SrcFetch<Half>>;
  using C = Half;
};
template <class B>
struct ResidualSum<Res::kInt8, B> {  // (s + bias) + C8 · r_scale
  using Op = evt::Sm90EVT<Compute<cutlass::plus, float>, ScaledPlusBias<float, B>,
                          evt::Sm90EVT<Compute<cutlass::multiplies, float>, evt::Sm90SrcFetch<int8_t>, Scalar>>;
  using C = int8_t;
};
template <class T>
using Relu = cutlass::epilogue::thread::ReLu<T>;
template <Res kRes, bool kQuant>
struct ConvFusion {
  using BiasT = std::conditional_t<kQuant, float, Half>;
  using Sum = ResidualSum<kRes, BiasT>;
  using Act = evt::Sm90EVT<Compute<Relu, std::conditional_t<kQuant, float, Half>>, typename Sum::Op>;
  using Op = std::conditional_t<kQuant, evt::Sm90EVT<Compute<cutlass::divides, int8_t>, Act, Scalar>, Act>;
  using D = std::conditional_t<kQuant, int8_t, Half>;
  using C = typename Sum::C;
};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasReluQuant> : ConvFusion<Res::kNone, true> {};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasResidualReluQuant> : ConvFusion<Res::kHalf, true> {};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasResidual8ReluQuant> : ConvFusion<Res::kInt8, true> {};
template <>
struct Int8Fusion<CutlassInt8Epilogue::kBiasResidual8Relu> : ConvFusion<Res::kInt8, false> {};

constexpr bool is_conv_form(CutlassInt8Epilogue e) { return !cutlass_int8_gemm_form(e); }
constexpr bool has_half_c(CutlassInt8Epilogue e) {
  return e == CutlassInt8Epilogue::kBiasResidual || e == CutlassInt8Epilogue::kBiasResidualReluQuant;
}
constexpr bool has_int8_c(CutlassInt8Epilogue e) {
  return e == CutlassInt8Epilogue::kBiasResidual8ReluQuant || e == CutlassInt8Epilogue::kBiasResidual8Relu;
}
constexpr bool quantizes(CutlassInt8Epilogue e) {
  return e == CutlassInt8Epilogue::kBiasGeluQuant || (is_conv_form(e) && e != CutlassInt8Epilogue::kBiasResidual8Relu);
}

// The arguments of the trees above, leaves first in each node, as the visitor trees take them.
template <class Out, class B>
typename ScaledPlusBias<Out, B>::Arguments scaled_plus_bias(const CutlassInt8GemmProblem& p) {
  typename XScale::Arguments xs{{1.0f}, {p.x_scale}, {}};
  typename WScale::Arguments ws{p.w_scale, 1.0f, {}};
  typename BiasOf<B>::Arguments b{static_cast<const B*>(p.bias), B(0), {}};
  return {{{{}, xs, {}}, ws, {}}, b, {}};
}

// Ping-pong's conv forms are not built (cutlass_int8_gemm.h): dispatch never reaches them.
template <CutlassInt8Epilogue kEpilogue, class Schedule = Cooperative>
struct Int8GemmKernel {
  using F = Int8Fusion<kEpilogue>;
  using RowMajor = cutlass::layout::RowMajor;
  using ColumnMajor = cutlass::layout::ColumnMajor;
  static constexpr int kAlignAB = 16;  // 16 bytes of int8
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<typename F::D>::value;
  static constexpr int kAlignC = std::is_void_v<typename F::C> ? kAlignD : 128 / cutlass::sizeof_bits<std::conditional_t<std::is_void_v<typename F::C>, Half, typename F::C>>::value;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      int32_t, float, typename F::C, RowMajor, kAlignC, typename F::D, RowMajor, kAlignD,
      typename Schedule::Epilogue, typename F::Op>::CollectiveOp;

  // B [N,K] row-major is CUTLASS's K x N column-major operand: K-major, as int8 GMMA needs.
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, RowMajor, kAlignAB, int8_t, ColumnMajor, kAlignAB,
      int32_t, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;

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
      args.epilogue.thread = scaled_plus_bias<Half, Half>(p);
    } else if constexpr (kEpilogue == CutlassInt8Epilogue::kBiasResidual) {
      args.epilogue.thread = {scaled_plus_bias<float, Half>(p), {}, {}};  // plus(scaled + bias, C)
    } else if constexpr (kEpilogue == CutlassInt8Epilogue::kBiasGeluQuant) {
      typename F::YScale::Arguments ys{{1.0f}, {p.y_scale}, {}};
      args.epilogue.thread = {{scaled_plus_bias<float, float>(p), {}}, ys, {}};  // divides(gelu(scaled + bias), y_scale)
    } else {
      typename Scalar::Arguments ys{{1.0f}, {p.y_scale}, {}}, rs{{1.0f}, {p.r_scale}, {}};
      typename F::Sum::Op::Arguments sum;
      if constexpr (has_int8_c(kEpilogue))
        sum = {scaled_plus_bias<float, typename F::BiasT>(p), {{}, rs, {}}, {}};  // plus(s + bias, multiplies(C8, r_scale))
      else if constexpr (has_half_c(kEpilogue))
        sum = {scaled_plus_bias<float, typename F::BiasT>(p), {}, {}};  // plus(s + bias, C)
      else
        sum = scaled_plus_bias<float, typename F::BiasT>(p);
      if constexpr (quantizes(kEpilogue))
        args.epilogue.thread = {{sum, {}}, ys, {}};  // divides(relu(sum), y_scale)
      else
        args.epilogue.thread = {sum, {}};  // relu(sum)
    }
    if constexpr (!std::is_void_v<typename F::C>) {
      using StrideC = typename Kernel::StrideC;
      args.epilogue.ptr_C = static_cast<const typename F::C*>(p.c);
      args.epilogue.dC = StrideC(cute::make_stride(p.ldc, cute::Int<1>{}, int64_t(0)));
    }
    return args;
  }

  static bool can_implement(const CutlassInt8GemmProblem& p) {
    if (p.k % 16 != 0 || p.n % 16 != 0 || !p.x_scale || !p.w_scale) return false;
    if ((has_half_c(kEpilogue) || has_int8_c(kEpilogue)) && !p.c) return false;
    if (has_int8_c(kEpilogue) && !p.r_scale) return false;
    if (quantizes(kEpilogue) && !p.y_scale) return false;
    return Gemm::can_implement(arguments(p)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const CutlassInt8GemmProblem& p) { return Gemm::get_workspace_size(arguments(p)); }

  static CutlassGemmStatus run(const CutlassInt8GemmProblem& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
    if (!can_implement(p)) return CutlassGemmStatus::kCannotImplement;
    return run_adapter<Gemm>(arguments(p), workspace, workspace_bytes, stream);
  }
};

}  // namespace
}  // namespace cutlass_detail

namespace {

// Calls f with Int8GemmKernel<e> for the runtime form e and schedule; `none` where the ping-pong
// schedule is asked for a form it does not build (the conv forms).
template <class F, class R>
auto dispatch(CutlassInt8Epilogue e, CutlassInt8Schedule schedule, F&& f, R none) {
  using namespace cutlass_detail;
  using E = CutlassInt8Epilogue;
  if (schedule == CutlassInt8Schedule::kPingpong) {
    switch (e) {
      case E::kBias: return f(Int8GemmKernel<E::kBias, Pingpong>{});
      case E::kBiasResidual: return f(Int8GemmKernel<E::kBiasResidual, Pingpong>{});
      case E::kBiasGeluQuant: return f(Int8GemmKernel<E::kBiasGeluQuant, Pingpong>{});
      default: return none;
    }
  }
  switch (e) {
    case E::kBias: return f(Int8GemmKernel<E::kBias>{});
    case E::kBiasResidual: return f(Int8GemmKernel<E::kBiasResidual>{});
    case E::kBiasGeluQuant: return f(Int8GemmKernel<E::kBiasGeluQuant>{});
    case E::kBiasReluQuant: return f(Int8GemmKernel<E::kBiasReluQuant>{});
    case E::kBiasResidualReluQuant: return f(Int8GemmKernel<E::kBiasResidualReluQuant>{});
    case E::kBiasResidual8ReluQuant: return f(Int8GemmKernel<E::kBiasResidual8ReluQuant>{});
    case E::kBiasResidual8Relu: break;
  }
  return f(Int8GemmKernel<E::kBiasResidual8Relu>{});
}

bool known_form(CutlassInt8Epilogue e) { return static_cast<int>(e) <= static_cast<int>(CutlassInt8Epilogue::kBiasResidual8Relu); }
bool known_schedule(CutlassInt8Schedule s) {
  return s == CutlassInt8Schedule::kCooperative || s == CutlassInt8Schedule::kPingpong;
}

}  // namespace

bool cutlass_int8_gemm_can_implement(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                     CutlassInt8Schedule schedule) {
  if (!known_form(epilogue) || !known_schedule(schedule)) return false;
  return dispatch(epilogue, schedule, [&](auto k) { return decltype(k)::can_implement(p); }, false);
}

size_t cutlass_int8_gemm_workspace_bytes(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                         CutlassInt8Schedule schedule) {
  if (!known_form(epilogue) || !known_schedule(schedule)) return 0;
  return dispatch(epilogue, schedule, [&](auto k) { return decltype(k)::workspace_bytes(p); }, size_t{0});
}

CutlassGemmStatus launch_cutlass_int8_gemm(CutlassInt8Epilogue epilogue, const CutlassInt8GemmProblem& p,
                                           void* workspace, size_t workspace_bytes, cudaStream_t stream,
                                           CutlassInt8Schedule schedule) {
  if (!known_form(epilogue) || !known_schedule(schedule)) return CutlassGemmStatus::kUnknownKernel;
  return dispatch(
      epilogue, schedule, [&](auto k) { return decltype(k)::run(p, workspace, workspace_bytes, stream); },
      CutlassGemmStatus::kCannotImplement);
}

}  // namespace ingot::backend::cuda
