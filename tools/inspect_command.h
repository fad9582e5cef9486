// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot inspect FILE.onnx|FILE.engine [options]`; returns the process exit code.
int inspect_command(const std::vector<std::string>& args);
void inspect_help();

}  // namespace ingot::tools
