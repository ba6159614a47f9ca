// LaneTable: direct lanes, the queue pairs a client of this process drives itself
// (actors/direct_lane.h): opened with one handshake, accepted from peers (at most
// kMaxLanesPerPeer each), dropped with their peer or device.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class LaneTable : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  caf::result<LaneGrant> open_lane(BufferHandle remote, uint32_t timeout_ms);
  void close_lane(uint64_t lane);
  /// The sender (a peer manager) closed its lane `lane`.
  void drop_lane(uint64_t lane);
  Result<QpInfoMsg> accept_lane(Peer& peer, const QpInfoMsg& remote);
  /// Tells a peer manager to drop its side of our direct lane `lane`.
  void send_lane_drop(const caf::actor& peer, uint64_t lane);

private:
  uint64_t next_lane_ = 1;
};

}  // namespace caf_rdma::detail
