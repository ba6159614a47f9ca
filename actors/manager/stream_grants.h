// StreamGrants: the owner side of the fallback's stream channel: grants of a token for one access
// to one buffer, their holds on the buffer, their expiry and withdrawal (manager invariants 2, 7).
// A part of the manager (actors/detail/manager_state.h): it works on the tables the front keeps
// (manager_tables.h) and holds no state of its own unless said below.
#pragma once

#include "actors/detail/manager_tables.h"

namespace caf_rdma::detail {

class ManagerState;

class StreamGrants {
public:
  explicit StreamGrants(ManagerState& m) : m_(m) {}
  StreamGrants(const StreamGrants&) = delete;
  StreamGrants& operator=(const StreamGrants&) = delete;

  caf::result<StreamGrantMsg> stream_grant(const BufferRef& ref, uint64_t offset, uint64_t length,
                                           uint8_t kind, uint32_t timeout_ms);
  void stream_served(uint64_t token, uint64_t bytes);
  void stream_expire(uint64_t token);
  /// Ends grant `token`'s hold on its buffer (once).
  void end_grant(uint64_t token);
  /// Withdraws the grants on local buffer `buffer` that no client claimed yet (at its release).
  void revoke_unclaimed_grants(uint64_t buffer);

private:
  ManagerState& m_;
};

}  // namespace caf_rdma::detail
