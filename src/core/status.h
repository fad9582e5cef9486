// Copyright ingot authors. Apache-2.0.
//
// Internal helpers around the public Status: building messages and propagating errors.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "ingot/status.h"

namespace ingot {

namespace detail {
template <class... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

/// Status with `code` and the concatenation of `args` (anything with operator<<).
template <class... Args>
Status make_status(StatusCode code, Args&&... args) {
  return Status(code, detail::str_cat(std::forward<Args>(args)...));
}
template <class... Args>
Status invalid_argument(Args&&... a) { return make_status(StatusCode::kInvalidArgument, std::forward<Args>(a)...); }
template <class... Args>
Status invalid_model(Args&&... a) { return make_status(StatusCode::kInvalidModel, std::forward<Args>(a)...); }
template <class... Args>
Status unsupported(Args&&... a) { return make_status(StatusCode::kUnsupported, std::forward<Args>(a)...); }
template <class... Args>
Status internal_error(Args&&... a) { return make_status(StatusCode::kInternal, std::forward<Args>(a)...); }

}  // namespace ingot

#define INGOT_CONCAT_INNER_(a, b) a##b
#define INGOT_CONCAT_(a, b) INGOT_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function when it is not ok.
#define INGOT_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::ingot::Status ingot_status_ = (expr);           \
    if (!ingot_status_.ok()) return ingot_status_;    \
  } while (0)

/// `lhs = value of expr` (a Result<T>), or returns its Status from the enclosing function.
#define INGOT_ASSIGN_OR_RETURN(lhs, expr) \
  INGOT_ASSIGN_OR_RETURN_IMPL_(INGOT_CONCAT_(ingot_result_, __LINE__), lhs, expr)
#define INGOT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
