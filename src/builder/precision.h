// Copyright ingot authors. Apache-2.0.
//
// Reduced-precision lowering (BuilderConfig::fp16 / bf16): rewrites an optimized fp32 graph so
// that the layers where it pays and is numerically safe compute in fp16 or bf16, TensorRT
// style. Engine inputs and outputs keep their types; Cast steps appear only where an fp32 region
// meets a reduced one, and are visible in the engine's layer list.
//
// Which layers are lowered:
//  - compute layers (Conv, GEMMs, attention, norms, softmax, pooling, activations and other
//    elementwise arithmetic, fused Pointwise) when the backend has a real tactic for them at the
//    reduced type (not the CUDA host fallback) — kernels accumulate norms, reductions and
//    softmax in fp32 whatever the storage type; the quantized layers (QuantGemm, QuantConv) take
//    the type for their bias, residual and float result, their 8-bit operands and fp32 scales
//    staying as they are;
//  - data-movement layers (Reshape, Transpose, Concat, Gather, Slice, ...) follow their data
//    input: they are lowered when it already is, so no cast pair is inserted around them;
//  - everything else (Exp, Pow, ReduceSum, control flow, integer ops...) stays in fp32.
// Weights read only by lowered layers are converted once; weights shared with an fp32 layer
// get a converted copy. A layer's precision can be forced by node name (or the name of a model
// node it absorbed); strict mode makes a compute layer that cannot be lowered an error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend/tactic.h"
#include "core/status.h"
#include "ir/graph.h"

namespace ingot::builder {

struct PrecisionOptions {
  DataType reduced = DataType::kUndefined;  ///< kFloat16 or kBFloat16; kUndefined: no lowering
  bool strict = false;                      ///< a compute layer without a reduced tactic is an error
  std::map<std::string, DataType> forced;   ///< node or origin name -> kFloat32 / kFloat16 / kBFloat16
  /// fp32 graph inputs and float outputs take the reduced type: no Casts at the engine's edges
  /// (callers pass and receive fp16/bf16). Needs `reduced`.
  bool reduced_io = false;
  /// A 2-D FusedConv or QuantConv counts as having a reduced tactic when its channels-last twin
  /// has one (the layout pass, after this one, may make it channels-last): the builder sets it
  /// unless convs stay channels-first.
  bool channels_last_convs = false;
};

struct PrecisionReport {
  int lowered = 0;            ///< nodes now computing in the reduced type
  int kept_fp32 = 0;          ///< compute-eligible nodes left in fp32 (no reduced tactic, or forced)
  int casts = 0;              ///< Cast nodes inserted at region boundaries
  int weights_converted = 0;  ///< initializers converted (or copied) to the reduced type
  std::vector<std::string> notes;
};

/// Lowers `g` in place for backend `be`; re-runs type inference to check the result.
Status lower_precision(ir::Graph& g, const backend::Backend& be, const PrecisionOptions& options,
                       PrecisionReport* report);

/// `t`'s values in type `to` (float types round to nearest; the element loop the builder uses to
/// convert weights and fold Casts of constants).
Result<Tensor> convert_tensor(const Tensor& t, DataType to);

}  // namespace ingot::builder
