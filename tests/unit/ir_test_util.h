// Copyright ingot authors. Apache-2.0.
//
// The unit tests' one way to get a graph from the IR text form: parsed, then types inferred
// (set `infer` false for graphs inference must not see yet); parse or inference errors are test
// failures, and nullptr comes back on a parse error.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ir/op_registry.h"
#include "ir/text.h"

namespace ingot::testing_util {

inline std::unique_ptr<ir::Graph> parse_ir(const std::string& text, bool infer = true) {
  auto g = ir::parse_text(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return nullptr;
  if (infer) {
    Status s = ir::infer_graph(**g);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  return std::move(g).value();
}

/// The graph's op types in node order.
inline std::vector<std::string> op_list(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n->op_type());
  return ops;
}

}  // namespace ingot::testing_util
