// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot run MODEL [options]`; returns the process exit code.
int run_command(const std::vector<std::string>& args);
void run_help();

}  // namespace ingot::tools
