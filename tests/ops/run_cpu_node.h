// Copyright ingot authors. Apache-2.0.
//
// One node through the CPU kernels as an engine's node runs: a one-node graph (ONNX opset 17 and
// ingot opset 1), the registry's shape inference, then cpu::run_node. For the tests of fused ingot
// ops, whose reference is the unfused ops written out in the test.
#pragma once

#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace ingot::ops_test {

/// Runs `op` (in `domain`) on `ins` (nullptr: an omitted optional input). `outputs[i]` false omits
/// optional output i (it comes back undefined).
inline Result<std::vector<Tensor>> run_cpu_node(const std::string& op, const std::string& domain,
                                                const std::vector<const Tensor*>& ins, const ir::Attributes& attrs,
                                                const std::vector<bool>& outputs = {true}) {
  ir::Graph g;
  g.set_opset_import("", 17);
  g.set_opset_import("ingot", 1);
  std::vector<ir::Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i)
    vals.push_back(ins[i]
                       ? g.add_input("in" + std::to_string(i), ins[i]->dtype(), ir::Shape::from_concrete(ins[i]->shape()))
                       : nullptr);
  std::vector<ir::Value*> outs;
  for (size_t o = 0; o < outputs.size(); ++o) outs.push_back(outputs[o] ? g.add_value("y" + std::to_string(o)) : nullptr);
  const ir::Node* n = g.add_node(op, vals, outs, attrs, "n0", domain);
  INGOT_RETURN_IF_ERROR(ir::infer_node(*n));
  return cpu::run_node(*n, ins);
}

}  // namespace ingot::ops_test
