// What stream_client.cc and stream_client_attempt.cc share (StreamClient's parts; not API).
#pragma once

#include <string>

#include "components/stream_client.h"

namespace caf_rdma::detail {

/// A job the stopping client ends before it moved a byte (StreamClient::stop()).
Error stopped_error();
/// A job's endpoint as the pool names it: its same-host endpoint (`local`) or host:port.
std::string endpoint_of(const StreamJob& job, bool local);

}  // namespace caf_rdma::detail
