// caf::error for the actor layer: the codes of `ErrorCode`, category "caf_rdma", with the
// message (naming buffer, peer, sizes, device, status string) as the error's context.
#pragma once

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include <cstdint>
#include <string>

#include "primitives/status.h"

namespace caf_rdma {

/// Same numbering as ErrorCode (0 = no error), so both layers share one vocabulary.
enum class rdma_errc : uint8_t {
  no_error = 0,
  no_device = static_cast<uint8_t>(ErrorCode::kNoDevice),
  device_not_found = static_cast<uint8_t>(ErrorCode::kDeviceNotFound),
  invalid_argument = static_cast<uint8_t>(ErrorCode::kInvalidArgument),
  ibverbs_call = static_cast<uint8_t>(ErrorCode::kIbverbsCall),
  work_completion = static_cast<uint8_t>(ErrorCode::kWorkCompletion),
  timeout = static_cast<uint8_t>(ErrorCode::kTimeout),
  out_of_bounds = static_cast<uint8_t>(ErrorCode::kOutOfBounds),
  released = static_cast<uint8_t>(ErrorCode::kReleased),
  peer_unavailable = static_cast<uint8_t>(ErrorCode::kPeerUnavailable),
  cuda = static_cast<uint8_t>(ErrorCode::kCuda),
  unknown_buffer = static_cast<uint8_t>(ErrorCode::kUnknownBuffer),
  size_mismatch = static_cast<uint8_t>(ErrorCode::kSizeMismatch),
  internal = static_cast<uint8_t>(ErrorCode::kInternal),
  not_found = static_cast<uint8_t>(ErrorCode::kNotFound),
  resource_exhausted = static_cast<uint8_t>(ErrorCode::kResourceExhausted),
  data_mismatch = static_cast<uint8_t>(ErrorCode::kDataMismatch),
  permission_denied = static_cast<uint8_t>(ErrorCode::kPermissionDenied),
};

/// Converts a lower-layer error.
caf::error to_caf_error(const Error& error);
/// Makes an error from a code and a message.
caf::error make_rdma_error(ErrorCode code, std::string message);
/// The ErrorCode of an rdma error; kInternal for errors of other categories.
ErrorCode error_code(const caf::error& error);
/// The message of an rdma error; for other errors CAF's rendering of code and context.
std::string error_message(const caf::error& error);
/// The ErrorCode of any error a request can end with: rdma errors keep theirs, CAF's request
/// timeout is kTimeout, a receiver that is down is kPeerUnavailable, anything else kInternal.
ErrorCode request_error_code(const caf::error& error);
/// The lower-layer Error for a request's error (code as request_error_code, error_message).
Error to_error(const caf::error& error);

}  // namespace caf_rdma

CAF_ERROR_CODE_ENUM(caf_rdma::rdma_errc, "caf_rdma")
