// Copyright ingot authors. Apache-2.0.
//
// Helpers for tests that rewrite a graph and check the rewrite: a graph in the IR text form with
// deterministic non-zero weights, the node lines of a graph's text form (the before/after
// comparison), and both graphs run on the CPU reference executor with the same random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/executor.h"
#include "ir/text.h"
#include "ir_test_util.h"

namespace ingot::testing_util {

/// `head` + one f32 initializer per (name, shape) in `inits` with values of magnitude 0.1..1 and
/// random sign + `body` + the closing brace.
inline std::string with_weights(const std::string& head, const std::vector<std::pair<std::string, Shape64>>& inits,
                                const std::string& body, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  std::string text = head;
  for (const auto& [name, shape] : inits) {
    std::string dims, values;
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      dims += (i ? "," : "") + std::to_string(shape[i]);
      n *= shape[i];
    }
    for (int64_t i = 0; i < n; ++i) values += (i ? ", " : "") + std::to_string((rng() & 1 ? 1 : -1) * mag(rng));
    text += "  init %" + name + ": f32[" + dims + "] = [" + values + "]\n";
  }
  return text + body + "}\n";
}

/// The node lines of the text form (initializers and declarations left out).
inline std::string node_lines(const ir::Graph& g) {
  std::istringstream in(ir::to_text(g, 0));
  std::string line, out;
  while (std::getline(in, line)) {
    const size_t p = line.find_first_not_of(' ');
    if (p == std::string::npos || line.compare(p, 1, "%") != 0) continue;
    out += line.substr(p) + "\n";
  }
  return out;
}

/// Replaces the one occurrence of `from` in an IR text (a test's variant of a shared graph); a
/// missing `from` is a test failure, not an exception.
inline void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "'" << from << "' is not in the graph text";
    return;
  }
  text.replace(at, from.size(), to);
}

/// The graph parsed from `before_text` and `after`, run on the same random non-zero inputs: every
/// output equal within `rtol` (relative to max(1, |want|)).
inline void expect_same_outputs(const std::string& before_text, const ir::Graph& after, double rtol = 1e-5) {
  auto before = parse_ir(before_text);
  ASSERT_TRUE(before);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  std::map<std::string, Tensor> feeds;
  for (const ir::Value* in : before->inputs()) {
    if (in->initializer()) continue;
    Tensor t = Tensor::zeros(in->dtype(), in->shape().concrete()).value();
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
    feeds[in->name()] = t;
  }
  cpu::Executor ex;
  auto want = ex.run(*before, feeds);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = ex.run(after, feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(want->size(), got->size());
  for (size_t o = 0; o < want->size(); ++o) {
    ASSERT_EQ((*want)[o].shape(), (*got)[o].shape()) << "output " << o;
    for (int64_t i = 0; i < (*want)[o].numel(); ++i) {
      const double w = (*want)[o].get_f64(i), g = (*got)[o].get_f64(i);
      ASSERT_NEAR(g, w, rtol * std::max(1.0, std::fabs(w))) << "output " << o << " element " << i;
    }
  }
}

}  // namespace ingot::testing_util
