#include "primitives/status.h"

#include <cstring>

namespace caf_rdma {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNoDevice:
      return "no_device";
    case ErrorCode::kDeviceNotFound:
      return "device_not_found";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kIbverbsCall:
      return "ibverbs_call";
    case ErrorCode::kWorkCompletion:
      return "work_completion";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kOutOfBounds:
      return "out_of_bounds";
    case ErrorCode::kReleased:
      return "released";
    case ErrorCode::kPeerUnavailable:
      return "peer_unavailable";
    case ErrorCode::kCuda:
      return "cuda";
    case ErrorCode::kUnknownBuffer:
      return "unknown_buffer";
    case ErrorCode::kSizeMismatch:
      return "size_mismatch";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kDataMismatch:
      return "data_mismatch";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string Error::to_string() const {
  return std::string(caf_rdma::to_string(code_)) + ": " + message_;
}

Error Error::with_context(const std::string& prefix) const {
  return Error(code_, prefix + ": " + message_);
}

void throw_bad_result_access(const Error* error) {
  throw BadResultAccess(error != nullptr
                            ? "caf-rdma: the value of a Result that holds an error was taken: " +
                                  error->to_string()
                            : std::string("caf-rdma: the error of a Result (or Status) that "
                                          "holds a value was taken"));
}

std::string errno_string(int err) {
  char buf[256];
  // GNU strerror_r: returns the message, in buf or a static string.
  return ::strerror_r(err, buf, sizeof(buf));
}

}  // namespace caf_rdma
