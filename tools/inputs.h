// Copyright ingot authors. Apache-2.0.
//
// Model inputs for the commands that run models (run, compare): seeded random tensors sized
// from the model and --shapes, and one-line statistics. Shared so that `ingot run` and
// `ingot compare` given the same seed and shapes feed a model the very same bytes.
#pragma once

#include <iosfwd>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ingot/reference.h"
#include "ingot/status.h"
#include "options.h"

namespace ingot::tools {

/// "a:f.npy,b:g.npy" → map. Error text in `err` on malformed input.
bool parse_pairs(const std::string& text, std::map<std::string, std::string>& out, std::string& err);

/// A random tensor for `info`: dims from --shapes (or --opt-shapes), else the model's dims
/// with open ones at 1. Floats uniform in [-1, 1), ints in [0, 9], bools 0/1, strings "s<digit>".
/// kInvalidArgument when --shapes contradicts the model's rank or a fixed dim, or the rank is
/// unknown and --shapes does not give it.
Result<HostTensor> random_input(const TensorInfo& info, const ShapeOptions& shapes, std::mt19937_64& rng);

/// "  name  f32[2,3]  min .. max .. mean .. std .. [nan N] [inf N]"
void summarize(const HostTensor& t, std::ostream& os);

}  // namespace ingot::tools
