// caf::error for the actor layer: the codes of `ErrorCode`, category "caf_rdma", with the
// message (naming buffer, peer, sizes, device, status string) as the error's context.
//
// Invariants:
//  1. rdma_errc and ErrorCode number their codes the same: an error crosses between the layers
//     (to_caf_error, to_error) keeping its code and message.
//  2. `request_error_code` is the only mapping of CAF's own errors (caf::sec) to an ErrorCode.
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
  cancelled = static_cast<uint8_t>(ErrorCode::kCancelled),
};

/// Converts a lower-layer error.
caf::error to_caf_error(const Error& error);
/// Makes an error from a code and a message.
caf::error make_rdma_error(ErrorCode code, std::string message);
/// The ErrorCode of an rdma error; kInternal for errors of other categories.
ErrorCode error_code(const caf::error& error);
/// The message of an rdma error; for other errors CAF's rendering of code and context.
std::string error_message(const caf::error& error);
/// The one mapping of a caf::error to an ErrorCode: that of any error a request can end with
/// (RdmaClient, the examples, and the manager's outcome of an op, `detail::outcome_of`).
///  - category "caf_rdma": its own code;
///  - sec::request_timeout (CAF's request timeout): kTimeout;
///  - sec::request_receiver_down (the receiver is gone, or the link to its node was lost) and
///    sec::remote_linking_failed (the remote actor no longer exists): kPeerUnavailable;
///  - anything else (other sec values, other categories): kInternal.
ErrorCode request_error_code(const caf::error& error);
/// The lower-layer Error for a request's error (code as request_error_code, error_message).
Error to_error(const caf::error& error);

}  // namespace caf_rdma

CAF_ERROR_CODE_ENUM(caf_rdma::rdma_errc, "caf_rdma")
