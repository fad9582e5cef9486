// Copyright ingot authors. Apache-2.0.
#pragma once

namespace ingot {

enum class Severity { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };

/// Receives messages from the library. Implementations must be thread-safe: contexts on
/// several threads may log at once. The library never frees a Logger it was given.
class Logger {
 public:
  virtual ~Logger() = default;
  virtual void log(Severity severity, const char* message) noexcept = 0;
};

/// Logs kWarning and above to stderr, prefixed with the severity.
Logger& default_logger();

}  // namespace ingot
