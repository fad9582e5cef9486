// Copyright ingot authors. Apache-2.0.
//
// The cuda backend's environment switches, read through one helper. Each switch exists to measure
// one form against another on the same binaries, or to keep a kernel that has not yet passed its
// GPU test off the default path (the autotuner keeps the fastest candidate without comparing
// outputs; none is gated so today). Today's switches, where they are read:
//   INGOT_PDL=0                          programmatic dependent launch off (core/device_info.cc)
//   INGOT_CUDNN_CONV_ACTIVATIONS=relu    cuDNN graph convs fuse Relu only (conv/cudnn_graph_conv_common.cc)
//   INGOT_CUTLASS_INT8_PINGPONG=0        no ping-pong int8 GEMM candidate (gemm/quant_gemm_tactics.cc)
//   INGOT_STEM_MMA=0                     no tensor-core stem conv (+ max pool) (conv/stem_pool_conv_tactics.cc)
//   INGOT_NORM_QUANTIZE=0                no LayerNorm that writes its 8-bit copy (norm/norm_tactics.cc)
#pragma once

#include <cstdlib>
#include <cstring>

namespace ingot::backend::cuda {

/// Whether environment variable `name` is set to exactly `value`.
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace ingot::backend::cuda
