// Copyright ingot authors. Apache-2.0.
//
// Reading and writing NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <string>

#include "ingot/reference.h"
#include "ingot/status.h"

namespace ingot::tools {

Result<HostTensor> load_npy(const std::string& path);
Status save_npy(const std::string& path, const HostTensor& t);

}  // namespace ingot::tools
