// Copyright ingot authors. Apache-2.0.
//
// How every ingot kernel starts and is launched: programmatic dependent launch (PDL, compute
// capability 9.0+).
//
// A batch-1 engine is a chain of small dependent kernels; in a CUDA graph the gap between two of
// them (the next grid's launch and ramp-up after the previous one drains) is a large share of each
// step. With PDL the next kernel is launched as the previous one's blocks exit, and each waits at
// its first statement until the previous grid has completed and its writes are visible. Reads and
// writes happen in the same order as without PDL: only launch latency overlaps.
//
// The rules, checked by tests/lint/pdl_lint.py (a CPU test):
//  1. Every __global__ function in src/ starts with INGOT_KERNEL_ENTRY(), before anything else
//     (an early return before the wait would let the grid complete before its predecessor, and the
//     next kernel would then wait on the wrong grid).
//  2. Every launch of an ingot kernel goes through launch_kernel() (no <<<>>>).
// CUTLASS's GEMMs wait the same way (built with CUTLASS_ENABLE_GDC_FOR_SM90, run with
// launch_with_pdl). cuBLASLt and cuDNN launch their kernels without the attribute: a kernel after
// them waits for them in full, as before; an ingot kernel after one of theirs still waits for it
// at INGOT_KERNEL_ENTRY.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Waits for the previous grid in the stream (complete, writes visible); a no-op in a kernel launched
/// without PDL. ingot's kernels do not signal launch_dependents early: the next grid is scheduled as
/// this one's blocks exit. On the H100 (bench/pdl_probe.cu), an early signal at entry cost 10% on
/// 2M-element kernels, probably as the next grid's waiting blocks held multiprocessor slots;
/// without it, PDL gave 1.43x on 2-us kernels and 1.08x on 4-us ones.
#define INGOT_KERNEL_ENTRY() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define INGOT_KERNEL_ENTRY() \
  do {                       \
  } while (0)
#endif

namespace ingot::backend::cuda {

/// Whether launches use PDL: on a device of compute capability 9.0 or newer, unless the environment
/// says INGOT_PDL=0 (to compare, or to rule PDL out when chasing a bug). Read once per process.
bool pdl_enabled();

/// The launch attribute for launch_kernel and for kernels launched through the driver API (the
/// generated pointwise kernels).
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  return a;
}

/// kernel<<<grid, block, smem, stream>>>(args...), with PDL where enabled. Arguments convert to the
/// kernel's parameter types as with <<<>>>. Returns the launch's error (as cudaGetLastError would).
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr = pdl_attribute();
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace ingot::backend::cuda
