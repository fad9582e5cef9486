// Copyright ingot authors. Apache-2.0.
//
// Mixed precision that keeps accuracy (the automatic half of --int8): which quantizable layers
// to leave in float so that the int8 model's outputs stay within a stated budget of the fp32
// model's on the calibration batches. As Polygraphy's `debug precision` bisects, but in one
// ordered pass: each layer's sensitivity is measured alone (only it in int8: the worst cosine
// against fp32 of any sample of any output over the batches, a sample being a slice along an
// output's leading (batch) dim: one sentence's embedding, one image's logits; a whole-tensor
// cosine would let a few ruined samples hide behind many good ones), then, starting from every layer in int8, the most
// sensitive layers go back to float one at a time until the budget holds. Runs on the CPU
// reference executor.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "quant/insert_qdq.h"

namespace ingot::quant {

struct SensitivityResult {
  std::map<std::string, std::string> keep_float;      ///< layer -> why (for insert_qdq)
  std::vector<std::pair<std::string, double>> alone;  ///< layer -> cosine with only it in int8, worst first
  double cosine = 1.0;                                ///< the chosen mix's worst output cosine
  int evaluations = 0;
};

/// `fresh_graph` returns a new copy of the model graph (it is rewritten per trial); `batches`
/// are the calibration inputs and `want` the fp32 outputs on each (graph output order).
/// `forced_float` layers stay in float from the start; `forced_int8` are never taken back.
Result<SensitivityResult> choose_float_layers(const std::function<Result<std::shared_ptr<ir::Graph>>()>& fresh_graph,
                                              const std::map<std::string, float>& scales,
                                              const std::vector<std::map<std::string, Tensor>>& batches,
                                              const std::vector<std::vector<Tensor>>& want, double min_cosine,
                                              const std::map<std::string, std::string>& forced_float,
                                              const std::vector<std::string>& forced_int8,
                                              QuantType type = QuantType::kInt8);

/// The smallest cosine similarity between matching slices along the leading dim of two tensors
/// of one shape (rank >= 2, leading dim > 1); otherwise the whole tensors' cosine.
double worst_sample_cosine(const Tensor& a, const Tensor& b);

/// Cosine similarity of two tensors of the same element count (1 when both are all zeros).
double cosine(const Tensor& a, const Tensor& b);

}  // namespace ingot::quant
