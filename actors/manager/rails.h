// Rails: the manager's devices after its primary one, and the striping of large RDMA transfers
// over them (docs/architecture.md, "Several devices").
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// A striping queue pair has a number, its stripe s: it joins this manager's device `rail(s)` to
// the peer's device of the same rail (rail 0 is the primary device; rails are paired by
// position, as multi-NIC fabrics are cabled: NIC k of every host on the same network), and
// stripe_index(rail, j) numbers the j-th queue pair of a pair of devices. Stripe 0 is the
// managers' own queue pair (qp_handshakes.h); the others are made here.
//
// Invariants (numbered as the manager's, which lists them all):
// 18. A host buffer is registered on every rail when it is registered, or on none (its handle
//     then carries no rails and its transfers are never striped); a handle's rails are its
//     owner's, in its owner's order; a lost rail's key is empty (device "") and gets no slice,
//     the other rails' keys stay valid.
// 19. An RDMA read or write that the striping rule takes (actors/transfer/path_choice.h
//     invariant 7) is cut into slices (actors/transfer/stripe_plan.h), one per
//     usable queue pair: the managers' own and the striping queue pairs to that peer on the
//     primary devices and on rails both sides have, whose local port is ACTIVE. A smaller one
//     (above kInlinePollMaxBytes: the latency path stays on the managers' queue pair) goes
//     whole to the one of those already made with the fewest ops pending. The reads and writes
//     of one batch (a transfer list's batch) to one owner stripe by what they move together:
//     when that would be striped, each of them smaller than stripe_min_bytes goes whole on the
//     least busy of those queue pairs (made, or waited for, as for a striped op), so a list of
//     small ranges spreads over the rails. Its reply comes
//     only once every slice completed (no byte of it lands after the reply). A slice that fails on
//     a rail runs once more on the managers' own queue pair (failover: the op still moves every
//     byte); the op fails only when a slice fails there, with that error.
// 20. Striping queue pairs are made on first use, one handshake per (peer, stripe), initiated
//     by the requester as the managers' own (invariant 3; the peer keeps at most one accepted
//     per stripe, and accepts only stripes of its own rails whose port is ACTIVE, at most
//     stripe_qps per pair of devices); a striping queue pair that died is not made again for
//     kStripeRetry either. An op that could use one whose
//     handshake is in flight waits for it; a handshake that failed is not tried again for
//     kStripeRetry (the op runs on the queue pairs there are). A striping queue pair in ERR is
//     dropped; the primary device's loss, and a peer's end, drop them all before any reply.
// 21. A rail whose port goes down has its striping queue pairs flushed at once (their slices
//     fail over), and gets no slices while its port is not ACTIVE; a rail whose device is lost
//     is let go of (queue pairs, every buffer's registration on it, its device) and not used
//     again by this manager. A failed slice fails over whatever the error (a rail's key the
//     owner no longer honours included): the managers' own queue pair's answer is the op's.
// 26. Class queue pairs: an RDMA op of the latency or the background class to a peer (reads,
//     writes and atomics; not a notify write, whose notice rides the managers' queue pair, nor
//     an op between this node's own buffers, nor a staged one) runs whole on a queue pair of its
//     class to that peer, on the primary devices (stripe number class_stripe), so it never
//     waits behind a bulk op's posted work or a bulk slice; only bulk-class ops are striped
//     (path_choice.h invariant 7) and least_busy never gives a bulk op a class queue pair.
//     It is made on first use by a handshake as the striping ones (the op waits for it, and for
//     no other handshake: not another class's, nor a bulk op's striping ones); one
//     that failed is not tried again for kStripeRetry, and meanwhile the class's ops run on the
//     managers' own queue pair; one in ERR is replaced by the next op of its class (as the
//     managers' own: invariant 4). Both of its ends carry the class's traffic class and service
//     level (ManagerOptions::latency_traffic, background_traffic: each side its own options').
//     The acceptor takes one per class and peer, on its primary device, not counted against
//     stripe_qps (counted against max_qps_per_node, as any it accepts: invariant 22).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"
#include "components/priority.h"

namespace caf_rdma::detail {

/// A failed striping handshake is tried again after this long (invariant 20).
constexpr std::chrono::seconds kStripeRetry{5};

/// The stripe number of the j-th queue pair between rail `rail` of two managers.
constexpr uint32_t stripe_index(uint32_t rail, uint32_t j) {
  return j * (static_cast<uint32_t>(kMaxRails) + 1) + rail;
}
constexpr uint32_t rail_of(uint32_t stripe) {
  return stripe % (static_cast<uint32_t>(kMaxRails) + 1);
}
/// The stripe number of class `p`'s queue pair between two managers' primary devices
/// (invariant 26): past every striping queue pair's. Bulk has none (0: the managers' own).
constexpr uint32_t class_stripe(Priority p) {
  return p == Priority::kBulk ? 0 : stripe_index(0, kMaxStripeQps - 1 + static_cast<uint32_t>(p));
}
/// The class of the queue pair of `stripe` (bulk: the managers' own and the striping ones).
constexpr Priority class_of_stripe(uint32_t stripe) {
  return stripe != 0 && stripe == class_stripe(Priority::kLatency)      ? Priority::kLatency
         : stripe != 0 && stripe == class_stripe(Priority::kBackground) ? Priority::kBackground
                                                                        : Priority::kBulk;
}
/// Whether `stripe` is a class queue pair's (invariant 26).
constexpr bool is_class_stripe(uint32_t stripe) {
  return class_of_stripe(stripe) != Priority::kBulk;
}

/// How logs and errors name the queue pair of `stripe`: "latency-class queue pair" or
/// "striping queue pair 3 (rail 1)".
std::string stripe_name(uint32_t stripe);

/// One queue pair a striped op may put a slice on, and the rail it joins.
struct StripeLane {
  std::shared_ptr<QpEndpoint> qp;
  uint32_t rail = 0;
};

/// Opens the rails `options` asks for (rail_devices, or with all_devices every other device
/// with an active port), `primary` being the primary device: each with the primary's port and
/// settings, its GID chosen by the usual rules. Errors name the rail's device.
Result<std::vector<std::shared_ptr<Nic>>> open_rails(const ManagerOptions& options,
                                                     const std::string& primary);

class Rails : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// Invariant 18: registers host buffer `entry` on every rail and lists the keys in `h`.
  void register_buffer(LocalBuffer& entry, BufferHandle& h, Access access);
  /// Sets each read's and write's OpRecord::batch_bytes: what the batch's reads and writes
  /// to its owner move together (invariant 19).
  static void count_batch(std::vector<OpRecord>& ops);
  /// Whether op `id` (about to be posted on the managers' queue pair) is striped: false: post
  /// it as one. True with `lanes` empty: it waits for a striping handshake and is connected
  /// again once that ended (invariant 20). True with `lanes`: its slices go on `lanes` besides
  /// the managers' queue pair, or, with `*whole` (an op of a batch that stripes by its bytes
  /// together), the op goes whole on the least busy of them and the managers' queue pair.
  bool stripes(OpId id, std::vector<StripeLane>* lanes, bool* whole);
  /// Of `primary` and `lanes`, the queue pair with the fewest ops pending (the primary on a
  /// tie).
  static StripeLane least_busy_of(const std::shared_ptr<QpEndpoint>& primary,
                                  const std::vector<StripeLane>& lanes);
  /// For op `id` below stripe_min_bytes (and above kInlinePollMaxBytes), whose batch is not
  /// striped by its bytes together: the ready queue pair to its owner, among the managers' own
  /// (`primary`) and the striping ones whose rail both sides have, with the fewest ops pending
  /// (the primary on a tie); makes none (invariant 19).
  StripeLane least_busy(OpId id, const std::shared_ptr<QpEndpoint>& primary);
  /// Invariant 26: where op `id` (about to be posted on the managers' queue pair `*qp`) runs.
  /// False: it waits for its class queue pair's handshake and is connected again once that
  /// ended. True: post it on `*qp`, now its class queue pair where it has one.
  bool class_lane(OpId id, std::shared_ptr<QpEndpoint>* qp);
  /// A peer's striping handshake (QpInfoMsg::stripe != 0).
  Result<QpInfoMsg> accept(Peer& p, const QpInfoMsg& remote);
  /// Drops striping queue pair `qp` of peer `key` (in ERR: invariant 20).
  void drop(const caf::actor_addr& key, const std::shared_ptr<QpEndpoint>& dropped);
  /// The peer ended: its striping queue pairs go, its waiting ops fail with `err`.
  void drop_peer(Peer& p, const caf::error& err);
  /// The primary device was lost: every striping queue pair goes (invariant 20).
  void drop_all();
  /// Flushes the striping queue pairs (of `peer` only, when given) with `reason`.
  void abort(const std::string& reason, const caf::actor_addr* peer = nullptr);
  /// The key registered on rail `rail` of `b` (rail 0: the primary's).
  static const RdmaBuffer& region(const LocalBuffer& b, uint32_t rail);
  /// Starts watching each rail's device (its port going down, its loss).
  void watch();
  /// An event of a rail's device (false: not a rail's): its port down or the device lost takes
  /// its striping queue pairs down at once, so their slices fail over now (invariant 19), and
  /// a lost rail is let go of entirely (its registrations too): later ops do without it.
  bool rail_event(const DeviceChanged& e);
  /// The rails' device names, in order.
  std::vector<std::string> names() const;
  /// Live striping queue pairs (initiated and accepted).
  size_t live_qps() const;
  /// "; rails rxe2 (...), ..." for the start line ("" without rails).
  std::string describe() const;

private:
  /// Invariant 18: `local` is registered on every rail this manager has (and it has some).
  bool on_every_rail(const LocalBuffer& local) const;
  /// Drops every striping queue pair of `p` and its handshakes in flight.
  void forget(Peer& p);
  void handshake(const caf::actor_addr& key, uint32_t stripe);
  /// The handshake of `p`'s `stripe` ended: the ops that waited for it (a class's for its own;
  /// bulk ones once no striping handshake is open) are connected again.
  void handshake_ended(Peer& p, uint32_t stripe);
  const std::shared_ptr<Nic>& domain_of(uint32_t rail) const;
  bool port_active(uint32_t rail) const;
};

}  // namespace caf_rdma::detail
