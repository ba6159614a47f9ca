// ServedLedger: what this node served as owner, by requester, path and kind
// (ManagerTelemetry::served, the caf_rdma_served_* metrics; docs/operations.md, "Metrics").
// The manager records the CAF chunks and atomics it answers; its stream server's workers record
// the requests they served (StreamServer::set_served).
//
// Invariants:
//  1. Thread-safe: the manager's actor and the stream server's workers record at once.
//  2. Rows only grow (Prometheus counters never go down).
//  3. Bounded: at most kMaxTelemetryPeers requesters are named per path (telemetry.h,
//     PeerLabels), so node ids (a new one per requesting process) cannot crowd out the stream
//     channel's addresses; the others are counted under kOtherPeers.
//  4. One request, one count: a CAF chunk (a read's fetch answer or a write's stored chunk), an
//     atomic (no bytes: its 8-byte word is not data moved), a stream or same-host request (a
//     list is one request of all its ranges' bytes). Only requests that succeeded count.
//  5. The requester is named as its connection knows it: its CAF node id for chunks and
//     atomics (this node's own for its own actors' requests; a restarted peer process is a new
//     id), its IPv4 address for the stream channel's TCP endpoint, kSameHostPeer for the
//     same-host endpoint (any process of this host may use it, no node id comes with it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "actors/manager/telemetry.h"
#include "actors/rdma_messages.h"

namespace caf_rdma {

/// The path of a served request (TrafficCount::path of ManagerTelemetry::served).
constexpr const char* kServedChunks = "chunks";
constexpr const char* kServedStream = "stream";
constexpr const char* kServedSameHost = "same-host";
/// Invariant 5: the requester named for the same-host endpoint.
constexpr const char* kSameHostPeer = "same-host";

class ServedLedger {
public:
  /// One request of `peer` served on `path` (invariant 4): `kind` a TransferKind's wire value.
  void record(const std::string& peer, const char* path, uint8_t kind, uint64_t bytes);
  /// Every row so far.
  std::vector<TrafficCount> rows() const;

private:
  mutable std::mutex mu_;
  std::map<std::string, PeerLabels> peers_;  ///< by path (invariant 3)
  std::map<std::tuple<std::string, std::string, uint8_t>, TrafficCount> rows_;
};

}  // namespace caf_rdma
