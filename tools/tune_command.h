// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot tune MODEL.onnx`: the route search (see tune_command.cc).
int tune_command(const std::vector<std::string>& args);

}  // namespace ingot::tools
