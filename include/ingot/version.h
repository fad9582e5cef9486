// Copyright ingot authors. Apache-2.0.
#pragma once

namespace ingot {

/// The library version, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace ingot
