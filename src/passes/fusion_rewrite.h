// Copyright ingot authors. Apache-2.0.
//
// Small graph-surgery helpers shared by the fusion passes (fold_batchnorm, fuse_conv_gemm,
// fuse_pointwise). They exist because a fused node cannot reuse its anchor: op type and domain
// are fixed at creation, so every fusion builds a new node, moves the last absorbed value's
// name and readers onto it, and drops the absorbed nodes.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "passes/pattern_util.h"

namespace ingot::passes::fusion {

/// passes::single_consumer() restricted to a reader in `g` itself (not in a nested subgraph):
/// only such a node can be absorbed into a fusion of `g`.
ir::Node* single_consumer(const ir::Graph& g, const ir::Value* v);
/// The other input of a binary node given one of them (nullptr if `n` is not binary or does
/// not read `v`, or reads it twice; passes::other_input() accepts the latter).
ir::Value* other_operand(const ir::Node& n, const ir::Value* v);
/// A node of the default ONNX domain with this op type?
bool is_onnx_op(const ir::Node& n, const char* op_type);
/// ingot::Silu or ingot::Gelu: the activations pattern recognition makes (ingot::Gelu below
/// opset 20), which fuse wherever their ONNX forms do.
bool is_ingot_activation(const ir::Node& n);
/// An elementwise op fuse_pointwise puts into one kernel (unary math and activations, ingot's
/// too, broadcasting arithmetic/comparison/logic, Where, Clip, PRelu, Cast between non-fp8 float
/// types), with one output and no absent input but Clip's bounds.
bool is_elementwise(const ir::Node& n);

/// Creates `op_type` in `domain` reading `inputs`, whose single output takes over `last`: its
/// readers, its graph-output slot and its name. Every node in `absorbed` is removed (they must
/// be read only by each other and, for `last`, by the nodes now reading the fused output) and
/// listed in the new node's origins in the order given. Restores topological order.
Result<ir::Node*> replace_with_fused(ir::Graph& g, const std::string& op_type, const std::string& domain,
                                     const std::vector<ir::Value*>& inputs, ir::Attributes attrs,
                                     const std::string& name, ir::Value* last,
                                     const std::vector<ir::Node*>& absorbed);

/// Asks `runs` (a builder's check; empty: always yes) whether `fused`, just added beside the nodes
/// `parts` it would replace, should stay. No: `fused` is removed again and `why` may say why. An error
/// from the check removes it too and is returned.
Result<bool> keep_fused_node(ir::Graph& g, ir::Node* fused, const std::vector<const ir::Node*>& parts,
                             const FusionCheck& runs, std::string* why);

/// Index of `n` in g.nodes() (nodes().size() when absent).
size_t node_index(const ir::Graph& g, const ir::Node* n);

}  // namespace ingot::passes::fusion
