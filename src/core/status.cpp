// Names of status codes, dtypes and backends, and Status formatting.
#include "treeverify/status.h"

#include "treeverify/types.h"
#include "treeverify/verify.h"

namespace treeverify {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kNoDevice:
      return "no device";
    case StatusCode::kCudaError:
      return "CUDA error";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown status";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
  }
  return "unknown dtype";
}

const char* kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::kSameAsQ:
      return "same as q";
    case KvFormat::kE4M3:
      return "e4m3";
  }
  return "unknown KV format";
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kCpuReference:
      return "cpu-reference";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "unknown backend";
}

Status parse_backend(const std::string& name, Backend* backend) {
  for (Backend b : {Backend::kAuto, Backend::kCpuReference, Backend::kCpu, Backend::kCuda}) {
    if (name == backend_name(b)) {
      *backend = b;
      return Status::Ok();
    }
  }
  // The names before 0.2 (one vocabulary since: the backend says what a user picks, the kernel
  // name what runs): say what they are now rather than only refuse them.
  const char* renamed = name == "cpu-fast" ? "cpu" : name == "cuda-mma" ? "cuda" : nullptr;
  return Status(StatusCode::kInvalidArgument,
                "unknown backend '" + name + "'" +
                    (renamed ? std::string(": it is called '") + renamed + "' now" : "") +
                    " (expected auto, cpu-reference, cpu or cuda)");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kExact:
      return "exact";
    case Precision::kFast:
      return "fast";
  }
  return "unknown precision";
}

Status parse_precision(const std::string& name, Precision* precision) {
  for (Precision p : {Precision::kExact, Precision::kFast}) {
    if (name == precision_name(p)) {
      *precision = p;
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInvalidArgument,
                "unknown precision '" + name + "' (expected exact or fast)");
}

}  // namespace treeverify
