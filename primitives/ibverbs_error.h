// Builders for errors that come out of ibverbs calls and work completions.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "primitives/status.h"

namespace caf_rdma {

/// An error for a failed ibverbs call: "<call> failed on <where>: <strerror> (errno N)".
/// `err` is the errno value (ibverbs returns it directly or sets errno, depending on the call).
Error ibverbs_error(const std::string& call, int err, const std::string& where);

/// An error for a work completion with a non-success status, naming the status string
/// (`ibv_wc_status_str`), vendor syndrome, opcode, QP number and the work request id.
Error completion_error(const ibv_wc& wc, const std::string& where);

/// The work-completion status string (`ibv_wc_status_str`) that a completion_error's message
/// names, also inside a message that wraps it ("write refused ...: work request ..."); "" when
/// the message names none.
std::string wc_status_in(const std::string& message);

/// Name of a work-completion opcode ("RDMA_WRITE", "RDMA_READ", ...).
const char* wc_opcode_name(ibv_wc_opcode opcode);

}  // namespace caf_rdma
