// LaneTable: direct lanes, the queue pairs a client of this process drives itself
// (actors/direct_lane.h): opened with one handshake, accepted from peers (at most
// kMaxLanesPerPeer each), dropped with their peer or device. A lane is of one priority class
// (RdmaClient keeps one per owner and class): both of its ends carry the class's traffic class and
// service level, each from its own manager's options (QpInfoMsg::priority tells the acceptor).
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class LaneTable : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// A lane of class `priority` (a wire value; one naming no class is refused): its queue
  /// pair, and the owner's side of it, carry the class's traffic (ManagerOptions::traffic_of).
  caf::result<LaneGrant> open_lane(BufferHandle remote, uint32_t timeout_ms, uint8_t priority);
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
