// Copyright ingot authors. Apache-2.0.
//
// The IR's readable text form, for dumps (--dump-ir) and for tests that state graphs
// before and after a pass. One line per declaration:
//
//   graph main {
//     opset "" 17
//     input %x: f32[batch,3]
//     init %w: f32[3] = [1, -2, 0.5]
//     %s: f32[batch,3] = Add(%x, %w) @add0
//     %y: f32[batch,3] = LeakyRelu(%s) {alpha=0.1}
//     output %y
//   }
//
// Node lines: outputs (comma-separated, `_` for an omitted optional output, types optional),
// `=`, op type (with `domain::` prefix outside ai.onnx), attributes in braces (int, float,
// "string", [ints], [floats], ["strings"]), inputs in parentheses (`_` for an omitted
// optional input), and `@name` last. Subgraph attributes print as nested `graph` blocks; the
// parser does not read them back (tests state flat graphs).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "ir/graph.h"

namespace ingot::ir {

/// Prints the graph. Initializers with more than `max_init_values` elements print as
/// `= <N values>` and do not round-trip.
std::string to_text(const Graph& g, size_t max_init_values = 16);

/// Parses the text form; errors name the line.
Result<std::unique_ptr<Graph>> parse_text(const std::string& text);

}  // namespace ingot::ir
