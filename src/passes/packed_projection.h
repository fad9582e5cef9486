// Copyright ingot authors. Apache-2.0.
//
// Sibling projections as one GEMM: what fuse_gated_mlp (gate and up) and pack_rotary_qkv (Q, K
// and V) share. Projections reading one input x with constant weights [K, N_i] become one GEMM
// with the weights concatenated on N, so a layer launches one GEMM where it launched several,
// with more output tiles at small batches.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ingot::passes {

/// A projection packing takes: an ai.onnx MatMul, or an ingot::FusedGemm {kind="matmul"} with at
/// most a bias (no activation, no residual).
bool is_packable_projection(const ir::Node* n);

/// `projs` (each is_packable_projection, in order) as one GEMM named `base` writing a new value of
/// `out_shape` ([..., sum of N_i]) and the first's type: a MatMul, or a FusedGemm with the first's attributes and the biases concatenated
/// (zeros for those without) when any has one; the new node absorbs their origins. nullptr with
/// *why set when they cannot pack: different inputs or attributes, a weight that is not a
/// constant 2-D [K, N] of one K and type, a bias that is not a constant [N]. The projections
/// stay for the caller to remove.
Result<ir::Node*> add_packed_projection(ir::Graph& g, const std::vector<const ir::Node*>& projs,
                                        const ir::Shape& out_shape, const std::string& base, std::string* why);

}  // namespace ingot::passes
