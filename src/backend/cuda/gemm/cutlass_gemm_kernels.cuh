// Copyright ingot authors. Apache-2.0.
//
// The one CUTLASS kernel template behind cutlass_gemm_kernels.h, included only by the
// cutlass_gemm_kernels_*.cu files (each instantiates a few configs, so the files compile in
// parallel). Built from CUTLASS's collective builders:
//  - mainloop: sm90 TMA + GMMA, warp-specialized (cooperative or ping-pong), fp16 or bf16 A
//    row-major (K-major), B row-major (N-major, the [K,N] weight as stored), fp32 accumulation, stages
//    filling the shared memory the epilogue leaves;
//  - epilogue: TMA warp-specialized; kBias and kBiasGelu with epilogue visitor trees of our own
//    (Fusion below): acc + bias[n] (a row broadcast, read from global memory once per tile; a null
//    bias pointer reads as zeros), then the activation, all in fp32, rounded once to the output
//    type; no C operand (no C loads). kBiasResidual: LinCombPerColBias with C (the residual, D's
//    type, row-major, TMA-loaded) and beta 1, beta·C + (alpha·acc + bias) in fp32
//    (sm90_callbacks_tma_warpspecialized.hpp's Sm90LinCombPerColBias), rounded once; only
//    residual_entry_for instantiates it;
//  - persistent data-parallel tile scheduler (no workspace).
// The Gelu is ExactGelu below: exact_gelu.h's branch-free 0.5·x·(1 + erf(x/√2)) (an erfc fit
// accurate to ~9e-6 relative where fp16 can see it). CUTLASS's own GELU<float> calls CUDA's erff,
// whose two polynomial branches become ~25 instructions of selects and multiply-adds per element;
// with it the exact-Gelu epilogue cost ~20 us over bias-only at BERT's FFN1 (77 -> 96 us, 128x256
// cooperative) and ~40 us in the ping-pong config (66 -> 106 us). GELU_taylor, the tanh form, is
// not used: the model asks for erf.
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "backend/cuda/core/launch.cuh"
#include "backend/cuda/gemm/cutlass_gemm_kernels.h"
#include "backend/cuda/gemm/exact_gelu.h"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

namespace ingot::backend::cuda::cutlass_detail {

// GeluTile: the epilogue subtile of the Gelu kernels (bias-only and residual ones keep CUTLASS's
// choice, 128x32 cooperative and 64x32 ping-pong). At BERT's FFN1 (bench/cutlass_epilogue_probe.cu,
// H200) wider subtiles cut the exact-Gelu epilogue's cost: 128x256 cooperative 76.7 -> 75.7 us with
// 128x64, 128x128 ping-pong 74.7 -> 72.3 us with 64x128 (ping-pong subtiles are one warp group's 64
// rows); bias-only, 64x128 changed nothing (59.1 -> 58.8 us). Every config's tile N is a multiple of both.
struct Cooperative {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using GeluTile = cute::Shape<cute::Int<128>, cute::Int<64>>;
};
struct Pingpong {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using GeluTile = cute::Shape<cute::Int<64>, cute::Int<128>>;
};

/// The exact Gelu as a CUTLASS activation: Sm90Compute applies it to Array<float, N> fragments.
template <class T>
struct ExactGelu {
  CUTLASS_HOST_DEVICE T operator()(T const& x) const { return T(exact_gelu(static_cast<float>(x))); }
};
template <class T, int N>
struct ExactGelu<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(exact_gelu(static_cast<float>(x[i])));
    return y;
  }
};

// The epilogues as CUTLASS fusions. kBias and kBiasGelu are epilogue visitor trees of our own:
// acc + bias[n] (one fp32 add), then the Gelu, rounded once to the output type. CUTLASS's
// LinCombPerColBias(EltAct) computes beta·C + (alpha·acc + bias) with runtime alpha and beta, so
// without a C operand it still spends a multiply-add per element on beta·0 (each instruction per
// element costs ~0.75 us at BERT's FFN1, bench/RESULTS.md). kBiasResidual keeps LinCombPerColBias
// with C and beta 1 (its two multiply-adds are the two adds the residual needs anyway).
namespace evt = cutlass::epilogue::fusion;
template <class Element, class TileShape>
using BiasBroadcast = evt::Sm90RowBroadcast<0, TileShape, Element, float, cute::Stride<cute::_0, cute::_1, int64_t>,
                                            128 / cutlass::sizeof_bits<Element>::value>;
template <class Out, class Element, class TileShape>
using AccPlusBias = evt::Sm90EVT<evt::Sm90Compute<cutlass::plus, Out, float, cutlass::FloatRoundStyle::round_to_nearest>,
                                 evt::Sm90AccFetch, BiasBroadcast<Element, TileShape>>;

template <class Element, CutlassEpilogue kEpilogue, class TileShape>
struct Fusion;
template <class Element, class TileShape>
struct Fusion<Element, CutlassEpilogue::kBias, TileShape> {
  using Op = AccPlusBias<Element, Element, TileShape>;
};
// The C operand (ElementC below) and beta 1 make it add the residual.
template <class Element, class TileShape>
struct Fusion<Element, CutlassEpilogue::kBiasResidual, TileShape> {
  using Op = cutlass::epilogue::fusion::LinCombPerColBias<Element, float, Element>;
};
/// act(acc + bias): the Gelu kernels' tree (and the probes' other activations).
template <template <class> class Act, class Element, class TileShape>
using ActOfAccPlusBias = evt::Sm90EVT<evt::Sm90Compute<Act, Element, float, cutlass::FloatRoundStyle::round_to_nearest>,
                                      AccPlusBias<float, Element, TileShape>>;
template <class Element, class TileShape>
struct Fusion<Element, CutlassEpilogue::kBiasGelu, TileShape> {
  using Op = ActOfAccPlusBias<ExactGelu, Element, TileShape>;
};
/// Whether a visitor tree is one node over one child (ActOfAccPlusBias); AccPlusBias has two.
template <class Op>
struct IsActTree : std::false_type {};
template <class Node, class Child>
struct IsActTree<evt::Sm90TreeVisitor<Node, Child>> : std::true_type {};

/// The epilogue arguments of a fusion: the visitor trees above take {children..., node} per
/// node (the bias broadcast: pointer, value for a null pointer, stride); CUTLASS's fusion
/// operations (kBiasResidual, and the probes' LinCombPerColBias variants) take alpha, beta, bias.
template <class FusionOp, class Element, class TileShape, class Thread>
void set_epilogue_thread(Thread& thread, const CutlassGemmProblem& p, bool residual) {
  const Element* bias = static_cast<const Element*>(p.bias);
  if constexpr (std::is_base_of_v<evt::FusionOperation, FusionOp>) {
    thread.alpha = 1.0f;
    thread.beta = residual ? 1.0f : 0.0f;  // D = 1·C + (1·acc + bias) with a C operand
    thread.bias_ptr = bias;
  } else if constexpr (std::is_same_v<FusionOp, AccPlusBias<Element, Element, TileShape>>) {
    thread = {{}, {bias, Element(0), {}}, {}};  // plus(acc, bias)
  } else {
    static_assert(IsActTree<FusionOp>::value, "an epilogue visitor tree without arguments here");
    thread = {{{}, {bias, Element(0), {}}, {}}, {}};  // act(plus(acc, bias))
  }
}

template <class Schedule, CutlassEpilogue kEpilogue>
using DefaultEpilogueTile = std::conditional_t<kEpilogue == CutlassEpilogue::kBiasGelu, typename Schedule::GeluTile,
                                               cutlass::epilogue::collective::EpilogueTileAuto>;

/// Runs a CUTLASS 3 GemmUniversalAdapter on arguments it can implement: the workspace check,
/// the adapter's initialize (workspace set-up, none here; the kernel parameters with their TMA
/// descriptors, on the host; the dynamic shared-memory attribute), then one launch. With PDL
/// (built with CUTLASS_ENABLE_GDC_FOR_SM90, backend/cuda/core/launch.cuh) the kernel's producer
/// and epilogue wait for the previous grid before they load, and it signals its dependents early.
template <class Gemm>
CutlassGemmStatus run_adapter(const typename Gemm::Arguments& args, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  if (Gemm::get_workspace_size(args) > workspace_bytes) return CutlassGemmStatus::kWorkspaceTooSmall;
  Gemm gemm;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return CutlassGemmStatus::kInitializeFailed;
  if (gemm.run(stream, nullptr, pdl_enabled()) != cutlass::Status::kSuccess) return CutlassGemmStatus::kLaunchFailed;
  return CutlassGemmStatus::kOk;
}

// FusionOp and EpilogueTile are for probes (bench/cutlass_epilogue_probe.cu); the library uses
// the defaults.
template <class TileShape, class ClusterShape, class Schedule, class Element, CutlassEpilogue kEpilogue,
          class FusionOp = typename Fusion<Element, kEpilogue, TileShape>::Op,
          class EpilogueTile = DefaultEpilogueTile<Schedule, kEpilogue>>
struct GemmKernel {
  using RowMajor = cutlass::layout::RowMajor;
  static constexpr int kAlignment = 8;  // 16 bytes of fp16/bf16: what TMA needs
  static constexpr bool kResidual = kEpilogue == CutlassEpilogue::kBiasResidual;
  // The C operand: the residual for kBiasResidual, else none (void: no C loads, no C shared memory).
  using ElementC = std::conditional_t<kResidual, Element, void>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpilogueTile, float, float,
      ElementC, RowMajor, kAlignment, Element, RowMajor, kAlignment, typename Schedule::Epilogue, FusionOp>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, RowMajor, kAlignment, Element, RowMajor, kAlignment,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments arguments(const CutlassGemmProblem& p) {
    using StrideA = typename Kernel::StrideA;  // (M, K, L): (lda, 1, batch)
    using StrideB = typename Kernel::StrideB;  // (N, K, L): (1, ldb, batch)
    using StrideD = typename Kernel::StrideD;  // (M, N, L): (ldd, 1, batch)
    StrideA stride_a = cute::make_stride(p.lda, cute::Int<1>{}, int64_t(0));
    StrideB stride_b = cute::make_stride(cute::Int<1>{}, p.ldb, int64_t(0));
    StrideD stride_d = cute::make_stride(p.ldd, cute::Int<1>{}, int64_t(0));
    cutlass::KernelHardwareInfo hw;
    cudaGetDevice(&hw.device_id);
    hw.sm_count = p.sm_count;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.m, p.n, p.k, 1},
        {static_cast<const Element*>(p.a), stride_a, static_cast<const Element*>(p.b), stride_b},
        {{}, nullptr, stride_d, static_cast<Element*>(p.d), stride_d},
        hw};
    set_epilogue_thread<FusionOp, Element, TileShape>(args.epilogue.thread, p, kResidual);
    if constexpr (kResidual) {
      using StrideC = typename Kernel::StrideC;  // (M, N, L): (ldc, 1, batch)
      args.epilogue.ptr_C = static_cast<const Element*>(p.c);
      args.epilogue.dC = StrideC(cute::make_stride(p.ldc, cute::Int<1>{}, int64_t(0)));
    }
    return args;
  }

  static bool can_implement(const CutlassGemmProblem& p) {
    return Gemm::can_implement(arguments(p)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const CutlassGemmProblem& p) { return Gemm::get_workspace_size(arguments(p)); }

  static CutlassGemmStatus run(const CutlassGemmProblem& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
    typename Gemm::Arguments args = arguments(p);
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) return CutlassGemmStatus::kCannotImplement;
    return run_adapter<Gemm>(args, workspace, workspace_bytes, stream);
  }

  static KernelEntry entry() { return KernelEntry{&can_implement, &workspace_bytes, &run}; }
};

/// Every type and epilogue of one tile configuration.
template <class TileShape, class ClusterShape, class Schedule>
KernelEntry entry_for(CutlassGemmType type, CutlassEpilogue epilogue) {
  using F16 = cutlass::half_t;
  using BF16 = cutlass::bfloat16_t;
  constexpr CutlassEpilogue kBias = CutlassEpilogue::kBias, kGelu = CutlassEpilogue::kBiasGelu;
  const bool gelu = epilogue == kGelu;
  if (epilogue != kBias && !gelu) return KernelEntry{};
  switch (type) {
    case CutlassGemmType::kFloat16:
      return gelu ? GemmKernel<TileShape, ClusterShape, Schedule, F16, kGelu>::entry()
                  : GemmKernel<TileShape, ClusterShape, Schedule, F16, kBias>::entry();
    case CutlassGemmType::kBFloat16:
      return gelu ? GemmKernel<TileShape, ClusterShape, Schedule, BF16, kGelu>::entry()
                  : GemmKernel<TileShape, ClusterShape, Schedule, BF16, kBias>::entry();
  }
  return KernelEntry{};
}

/// The kBiasResidual kernels of one tile configuration (instantiated only where asked for:
/// the C operand's loads and shared memory make another kernel per type).
template <class TileShape, class ClusterShape, class Schedule>
KernelEntry residual_entry_for(CutlassGemmType type) {
  constexpr CutlassEpilogue kRes = CutlassEpilogue::kBiasResidual;
  switch (type) {
    case CutlassGemmType::kFloat16:
      return GemmKernel<TileShape, ClusterShape, Schedule, cutlass::half_t, kRes>::entry();
    case CutlassGemmType::kBFloat16:
      return GemmKernel<TileShape, ClusterShape, Schedule, cutlass::bfloat16_t, kRes>::entry();
  }
  return KernelEntry{};
}

}  // namespace ingot::backend::cuda::cutlass_detail
