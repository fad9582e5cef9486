// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot build MODEL.onnx -o FILE [options]`; returns the process exit code.
int build_command(const std::vector<std::string>& args);
void build_help();

}  // namespace ingot::tools
