// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot compare MODEL.onnx [options]`: an engine against the fp32 reference interpreter on
/// the same inputs. Returns 0 when every output is within tolerance, 1 when one is not (or a
/// run fails), 2 on usage errors.
int compare_command(const std::vector<std::string>& args);
void compare_help();

}  // namespace ingot::tools
