// Checks that turn a failed condition into a Status naming the argument, the condition and
// the offending values. The condition's text is the message; nothing is retyped.
#pragma once

#include <fmt/format.h>

#include <string>

#include "treeverify/status.h"

namespace treeverify::detail {

inline Status make_check_error(StatusCode code, const char* arg, const char* cond,
                               const std::string& detail) {
  std::string msg = fmt::format("argument '{}': ", arg);
  if (!detail.empty()) msg += detail + " ";
  msg += fmt::format("(requires {})", cond);
  return Status(code, std::move(msg));
}

}  // namespace treeverify::detail

// Returns kInvalidArgument from the enclosing function unless `cond` holds.
// Usage: TV_REQUIRE(p < i, "parents", "request {} node {}: parent = {}", b, i, p);
#define TV_REQUIRE(cond, arg, ...)                                                              \
  do {                                                                                          \
    if (!(cond))                                                                                \
      return ::treeverify::detail::make_check_error(::treeverify::StatusCode::kInvalidArgument, \
                                                    arg, #cond, fmt::format(__VA_ARGS__));      \
  } while (0)

// The same with another code, e.g. kUnsupported for valid input no kernel handles.
#define TV_REQUIRE_CODE(code, cond, arg, ...)                                                    \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      return ::treeverify::detail::make_check_error(code, arg, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// Propagates a non-ok Status.
#define TV_RETURN_IF_ERROR(expr)         \
  do {                                   \
    ::treeverify::Status _tv_s = (expr); \
    if (!_tv_s.ok()) return _tv_s;       \
  } while (0)
