// Copyright ingot authors. Apache-2.0.
//
// Whole-file reads and writes for the CLI: one place that opens, checks and says which file failed.
#pragma once

#include <string>
#include <string_view>

#include "ingot/status.h"

namespace ingot::tools {

/// The file's bytes; kNotFound when it cannot be opened, kIoError when reading fails.
Result<std::string> read_file(const std::string& path);

/// Replaces the file with `bytes`; kIoError ("cannot write 'PATH'") when it cannot be written whole.
Status write_file(const std::string& path, std::string_view bytes);

}  // namespace ingot::tools
