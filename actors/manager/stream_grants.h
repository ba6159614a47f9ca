// StreamGrants: the owner side of the fallback's stream channel: a grant is a token for one
// access to one buffer, held on the buffer until used, withdrawn or expired (bounded per buffer
// and per peer node, and by max_timeout: manager invariant 7; withdrawn at release: invariant 2).
// GPU memory is granted too where this manager stages it (ManagerOptions::device_memory): the
// server moves its bytes through bounce buffers (components/stream_server.h invariant 19).
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class StreamGrants : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  caf::result<StreamGrantMsg> stream_grant(const BufferRef& ref, uint64_t offset, uint64_t length,
                                           uint8_t kind, uint32_t timeout_ms);
  /// `exported`: its requester was handed the buffer's GPU export (gpu_exports.h invariant 2).
  void stream_served(uint64_t token, uint64_t bytes, bool exported);
  void stream_expire(uint64_t token);
  /// Ends grant `token`'s hold on its buffer (once).
  void end_grant(uint64_t token);
  /// Withdraws the grants on local buffer `buffer` that no client claimed yet (at its release).
  void revoke_unclaimed_grants(uint64_t buffer);
  /// Grants made as owner and not yet ended (ManagerTelemetry).
  uint64_t open_grants() const { return grants_.size(); }

private:
  /// Stream grants made as owner, by token.
  std::unordered_map<uint64_t, GrantHold> grants_;
  std::map<caf::node_id, uint32_t> grants_per_peer_;
};

}  // namespace caf_rdma::detail
