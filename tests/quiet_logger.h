// Copyright ingot authors. Apache-2.0.
//
// A Logger that drops every message: tests that build engines through the public API and only
// look at results use it to keep their output readable.
#pragma once

#include "ingot/logger.h"

namespace ingot::test {

class Quiet : public Logger {
 public:
  void log(Severity, const char*) noexcept override {}
};

}  // namespace ingot::test
