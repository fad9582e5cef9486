// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot serve --model-repository DIR [options]`: serves until SIGTERM/SIGINT, then drains
/// and returns 0; returns the process exit code.
int serve_command(const std::vector<std::string>& args);
void serve_help();

}  // namespace ingot::tools
