// Copyright ingot authors. Apache-2.0.
//
// SmoothQuant (Xiao et al., "SmoothQuant: Accurate and Efficient Post-Training Quantization for
// Large Language Models", 2023; nvidia-modelopt's int8_sq, TensorRT-LLM's --smoothquant): moves
// the outlier channels of a linear layer's activation into its weight before INT8 quantization.
// Transformers' activations carry a few channels tens of times larger than the rest (MiniLM's
// channel 99 after each attention LayerNorm: |x| up to 30 where the median channel reaches 1.7),
// so one per-tensor int8 step either rounds the ordinary channels away or clips the outliers.
// For Y = X·W, per input channel j: s_j = max|X_j|^alpha / max|W_j|^(1-alpha), and
// Y = (X·diag(1/s))·(diag(s)·W) exactly; the smoothed activation's channels are even, and the
// per-output-channel weight scales absorb what moved into W.
//
// The rewrite, on the graph before insert_qdq: for each float activation x read as input 0 by
// MatMul / Gemm (transA 0) layers with a constant 2-D weight, x' = Mul(x, 1/s) feeds those layers
// (x's other readers keep x), each weight's row j is multiplied by s_j (one s per x: Q, K and V
// share theirs, so their packing still applies), and x' gets the per-tensor scale max_j(a_j/s_j)
// / qmax (min-max on the smoothed tensor, which the per-channel maxima give exactly). The Mul is
// one more elementwise step on backends that do not fold it into the quantize step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "quant/insert_qdq.h"

namespace ingot::quant {

/// Running per-channel max |x| over the last dim of float tensors with `channels` channels.
void observe_channel_amax(std::vector<float>* amax, const float* x, int64_t n, int64_t channels);

struct SmoothReport {
  int activations = 0;             ///< activation tensors smoothed
  int layers = 0;                  ///< layers reading a smoothed activation
  std::vector<std::string> lines;  ///< "<tensor> -> <layers>: max channel ratio before / after"
};

/// Rewrites `g` in place. `channel_amax`: tensor name -> max |x| per channel of its last dim over
/// the calibration batches. `alpha` in [0, 1] (0.5: SmoothQuant's default). Adds each smoothed
/// tensor's scale to `scales` (as the calibrator would have given it for that tensor).
/// Layers in `keep_float` are not smoothed (their input stays as it was).
Result<SmoothReport> smooth_quant(ir::Graph& g, const std::map<std::string, std::vector<float>>& channel_amax,
                                  double alpha, std::map<std::string, float>* scales, QuantType type,
                                  const std::map<std::string, std::string>& keep_float = {});

}  // namespace ingot::quant
