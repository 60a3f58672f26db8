// Status: the result of every treeverify call that can fail, with a readable message.
#pragma once

#include <string>
#include <utility>

namespace treeverify {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // an input breaks the data-layout contract (docs/DESIGN.md section 3)
  kUnsupported,      // valid input that no compiled kernel handles on this device
  kNoDevice,         // a CUDA backend was asked for and no usable GPU is present
  kCudaError,        // the CUDA runtime reported an error
  kInternal,         // a bug in treeverify: please report it
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace treeverify
