// QpHandshakes: the queue pairs to peer managers: the one handshake per peer, accepting a peer's,
// the loopback QP, and dropping QPs in ERR.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// Invariants (numbered as the manager's, which lists them all):
//  3. For each peer manager, this manager initiates at most one queue pair (created by one
//     handshake; concurrent first transfers wait for it) and accepts at most one from that peer
//     (a new handshake from the peer replaces it). Ops are only posted on initiated QPs.
//  4. A queue pair in ERR is dropped (destroyed, so the NIC stops) and the next transfer to that
//     peer makes a new one.
// 22. Queue pairs accepted from peers (managers' own, lanes, striping queue pairs) are at most
//     ManagerOptions::max_qps_per_node from the actors of one node, and max_qps in all: a
//     handshake that would add one beyond is refused (resource_exhausted, naming the limit and
//     the node) before a queue pair is made, and before a sender never seen is taken for a
//     peer; one that replaces a queue pair it already has adds none. (The node is the one the
//     sender's id names: a node that routes messages for ids it invents can spread its
//     handshakes over them; max_qps bounds them all.)
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"
#include "components/nic.h"

namespace caf_rdma::detail {

class QpHandshakes : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  void handshake(const caf::actor_addr& key);
  caf::result<QpInfoMsg> accept_connect(const QpInfoMsg& remote);
  /// The rest of a queue-pair handshake from `p` (accept_connect), once it is taken for `p`.
  Result<QpInfoMsg> finish_accept(Peer& p, const QpInfoMsg& remote);
  /// Invariant 22: ok, or why a handshake from `who` of `node` that would add a queue pair is
  /// refused.
  Status accept_room(const caf::node_id& node, const std::string& who) const;
  void drop_qp(Peer& peer, const std::shared_ptr<QpEndpoint>& qp);
  /// Drops `qp` (of peer `key`'s: the managers', a class's or a stripe's; or the loopback QP)
  /// so the NIC stops using it.
  void drop_qp_of(const caf::actor_addr& key, const std::shared_ptr<QpEndpoint>& qp);
  void fail_waiting(Peer& peer, const caf::error& err);
  Result<std::shared_ptr<QpEndpoint>> loopback_qp();
  /// Options of a new queue pair on the primary device (RdmaLinks::domain) whose completions go to
  /// the device's shared completion queue (one poll per sweep for all peers; made here with the
  /// first). Direct lanes' own QPs, polled by their client's threads, keep a CQ of their own.
  /// Its packets carry class `cls`'s traffic (ManagerOptions::traffic_of).
  Result<QpOptions> shared_qp_options(Priority cls = Priority::kBulk);
  /// The same on device `domain`, whose shared completion queue is `completions` (made here
  /// with the first QP): the rails' striping QPs and the class queue pairs (manager/rails.h),
  /// whose packets carry class `cls`'s traffic (ManagerOptions::traffic_of).
  Result<QpOptions> shared_qp_options(const std::shared_ptr<Nic>& domain,
                                      std::shared_ptr<CompletionRouter>& completions,
                                      Priority cls = Priority::kBulk);
  /// A new queue pair on `domain` with `options`, or why none: every queue pair this manager
  /// makes (its handshakes', the rails', the direct lanes', the loopback) is made here.
  static Result<std::shared_ptr<QpEndpoint>> make_qp(const std::shared_ptr<Nic>& domain,
                                                     const Result<QpOptions>& options);
  QpInfoMsg to_msg(const QpInfo& info, uint64_t lane = 0) const;
  /// Keeps `qp` while its handshake is in flight (`RdmaLinks::opening`); the number to take it back
  /// with.
  uint64_t hold_opening(std::shared_ptr<QpEndpoint> qp);
  /// The QP held under `n`, no longer held; null when a device loss dropped it meanwhile.
  std::shared_ptr<QpEndpoint> take_opening(uint64_t n);
};

}  // namespace caf_rdma::detail
