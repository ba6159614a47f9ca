// What the manager's RDMA needs and nothing else uses: the device and its rails, the completion
// poller and the shared completion queue, the queue pairs of handshakes in flight, the loopback
// queue pair, a batch's queued queue pairs and the direct lanes this manager opened; and, per
// peer, its queue pairs (PeerQps). The manager's front (actors/detail/manager_state.h) holds one
// RdmaLinks apart from everything else it keeps, so that the RDMA path can stand
// behind one transport interface, and a fake one in its place (issue 49's seam: this object is
// what that interface will own).
//
// Invariants (the rules on these fields are the manager's, numbered in manager_state.h, and its
// parts', which cite them):
//  1. `domain` null means no primary device now (none, or lost until it is opened again):
//     then `no_rdma_reason` says why, `completions` and `monitor` are null and no queue pair
//     made on it is held (the poller and the rails may stay).
//  2. `port_down` is non-empty exactly while the primary device's port is down (why).
//  3. Every queue pair held here was made on `domain` or on a rail's domain; the completions
//     of those but direct lanes' (polled by their clients' threads, on their own completion
//     queues) are polled by `poller`, which stops first when the manager goes (its destructor,
//     actors/rdma_manager_actor.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_addr.hpp>

#include "actors/direct_lane.h"
#include "actors/transfer/transfer_path.h"
#include "components/completion_poller.h"
#include "components/completion_router.h"
#include "components/device_monitor.h"
#include "components/nic.h"
#include "components/qp_endpoint.h"

namespace caf_rdma::detail {

/// What a peer's RDMA needs: its queue pairs, their handshakes and the ops waiting for them, the
/// direct lanes it opened to us, its striping queue pairs.
struct PeerQps {
  std::shared_ptr<QpEndpoint> initiated;
  std::shared_ptr<QpEndpoint> accepted;
  bool handshaking = false;
  std::vector<OpId> waiting;                              ///< ops waiting for the QP
  std::map<uint64_t, std::shared_ptr<QpEndpoint>> lanes;  ///< accepted direct lanes, by id
  /// Striping queue pairs (manager/rails.h invariants 19-20), by stripe number: initiated by
  /// this manager, and accepted from the peer; handshakes in flight, ops waiting for them, and
  /// when a failed one may be tried again.
  std::map<uint32_t, std::shared_ptr<QpEndpoint>> stripes;
  std::map<uint32_t, std::shared_ptr<QpEndpoint>> stripes_accepted;
  std::map<uint32_t, uint64_t> stripes_opening;  ///< stripe -> its handshake's opening number
  std::vector<OpId> stripe_waiting;              ///< bulk ops waiting for striping queue pairs
  /// Ops waiting for their class's queue pair (rails.h invariant 26), by its stripe number.
  std::map<uint32_t, std::vector<OpId>> class_waiting;
  std::map<uint32_t, std::chrono::steady_clock::time_point> stripe_failed;
};

/// One of the manager's rails (manager/rails.h): its device, and the completion queue its
/// striping queue pairs share (made with the first).
struct RailDevice {
  std::string name;
  std::shared_ptr<Nic> domain;  ///< null once the device was lost (`lost` says how)
  std::shared_ptr<CompletionRouter> completions;
  std::unique_ptr<DeviceMonitor> monitor;  ///< its port and loss events (null: not watched)
  std::string lost;
};

/// A direct lane this manager opened (the lane itself belongs to its client).
struct LaneRecord {
  caf::actor_addr owner;           ///< peer key, or our own address for a loopback lane
  std::weak_ptr<QpEndpoint> qp;    ///< aborted when the owner goes down
  std::weak_ptr<DirectLane> lane;  ///< retired when our device goes (DirectLane invariant 5)
};

/// The manager's RDMA state (plain data; its parts in actors/manager/ and actors/transfer/ keep
/// the rules). Declared in the order it is torn down in reverse.
struct RdmaLinks {
  std::shared_ptr<Nic> domain;  ///< the primary device (RdmaDomain, or a test's fake NIC)
  /// The rails (manager/rails.h): rail k at k - 1; they live as long as the manager.
  std::vector<RailDevice> rails;
  std::string no_rdma_reason;
  std::unique_ptr<DeviceMonitor> monitor;  ///< watches domain (null without one)
  /// Queue pairs of handshakes in flight (the managers' QPs and direct lanes), by a number of
  /// their own: the answer's callback holds only that number, so dropping these on a device
  /// loss lets the device go at once (a late answer finds nothing and is ignored).
  std::map<uint64_t, std::shared_ptr<QpEndpoint>> opening;
  uint64_t next_opening = 1;
  std::string port_down;  ///< non-empty while our port is down: why
  uint64_t device_losses = 0, device_reopens = 0;
  std::unique_ptr<CompletionPoller> poller;
  /// The shared completion queue of domain's queue pairs (made with the first; dropped with
  /// the device: its QPs keep it alive until they go).
  std::shared_ptr<CompletionRouter> completions;
  /// While a batch starts its ops: RDMA ops are queued on their QPs (listed here) and posted
  /// together afterwards, one chain of work requests per QP.
  bool batching = false;
  std::vector<std::shared_ptr<QpEndpoint>> queued_on;
  std::shared_ptr<QpEndpoint> loopback;
  /// Direct lanes this manager opened and that are still alive, by lane id.
  std::map<uint64_t, LaneRecord> lanes;
};

}  // namespace caf_rdma::detail
