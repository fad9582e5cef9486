// Copyright ingot authors. Apache-2.0.
//
// Status and Result<T>: how every ingot function reports failure. Nothing in libingot throws
// across the public API or aborts on bad input; a failed call returns a Status whose message
// names what went wrong and where (file, node, op, input, dim, allowed range).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ingot {

/// Broad class of a failure; the message carries the specifics.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  ///< the caller passed something malformed (a shape, a flag, a name)
  kInvalidModel,     ///< the model file or graph is malformed (truncated, cyclic, bad attribute)
  kUnsupported,      ///< valid input that ingot does not implement (an op, a dtype, an opset)
  kNotFound,         ///< a named file, tensor or input does not exist
  kOutOfRange,       ///< a value outside its allowed range (e.g. a shape outside a profile)
  kIoError,          ///< reading or writing a file failed
  kOutOfMemory,      ///< an allocation failed
  kInternal,         ///< an ingot bug: an invariant did not hold
  kUnavailable,      ///< busy (a full queue) or stopping: try again later (a server's 503)
};

/// Human-readable name of a code, e.g. "invalid model".
const char* status_code_name(StatusCode code);

/// The outcome of an operation: ok, or a code with a message. Cheap to copy when ok.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "invalid model: <message>", or "ok".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// A value of type T, or the Status explaining why there is none.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  /// The error; Status::Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ingot
