// PeerFacade: the actor a node publishes in its manager's place. Every message from another
// node reaches the manager through it, and every message the manager sends to another node
// leaves through it, so the manager's own handle never leaves its process.
//
// Why: CAF 0.17's BASP resolves the sender of a routed message that claims the receiving node
// as a source through the local actor registry, and every local actor that was ever serialized
// is in it. A peer writing raw BASP frames can thus make a message look as if it came from any
// actor of the victim's node that has been on the network; and it can address only actors that
// are in that registry. The manager never is: no message can reach it from the network, and
// the requests that act on the node's memory are served only for the senders that can.
//
// Invariants:
//  1. The facade forwards to the manager only the peer protocol, from network proxies (actors of
//     other nodes), and the read-only questions, each checked for its exact shape; requests that
//     act on the node's memory are refused with permission_denied naming the request and the
//     sender, anything else with invalid_argument naming the atom. Which request is which comes
//     from the table of actors/request_audience.h, the shapes from the manager's interfaces.
//  2. A forwarded message keeps its sender (the peer's identity), with the facade as the only
//     stage, under a request id of the facade's own drawn at random (60 bits): the manager's
//     answer comes back to the facade under that id, and only a message under it is taken for
//     the answer (a frame claiming the peer and its request id is not: BASP lets a third node
//     claim any sender). The facade answers the peer in its own name, under the peer's request
//     id. Answers travel back through the facade in the order the manager gave them.
//  3. The manager's messages to peers (PeerCall) leave in the order the manager sent them, with
//     the facade as their sender; a request's answer, or its error, goes back to the manager
//     once.
//  4. The facade lives as long as its manager (it monitors it; it holds no strong reference to
//     it) and never quits for a message it receives: exit messages are dropped before they
//     reach its mailbox (CAF lets no actor ignore `kill` once it is there), error and down
//     messages from the network are ignored or answered.
//  5. The facade answers only what it owes: a refusal to a request whose sender is not the
//     facade itself, and the manager's answer to each message it forwarded, once. Any other
//     answer or error that reaches it is dropped: no frame can make it answer itself, or another
//     facade, in a loop.
//  6. Sealed answers: every request the facade sends for its manager carries a fresh PeerNonce
//     (128 bits from getrandom) as its last element; the asked node's facade strips it before
//     its manager sees the request and appends it to the answer (value or error). The manager
//     gets an answer only if it carries that nonce and comes from the node asked; an unsealed
//     error only if it is CAF's own request timeout at or after the request's deadline.
//     Anything else that arrives under the request's id (a forged answer or error: CAF 0.17
//     matches answers by id alone) is dropped, counted (ManagerStats::forged_answers), and the
//     request keeps waiting for its real answer. CAF's own errors for a peer that went away
//     are not taken either (nobody can tell them from forged ones): the manager learns of it
//     from its monitor (down_msg, generated locally) and fails what it had with that peer.
//     Questions (dir_get, stats, peer_state) may come sealed as well (RdmaClient seals those it
//     asks another node's facade, and takes only the sealed answer); they are answered sealed.
//  7. Arrival: a peer request that carries its requester's time left (carries_time_left in
//     actors/request_audience.h: store, store_list, atomic) reaches the manager with that `left_ms`
//     replaced by an OwnerDue stamped when the facade took the request, so the manager can
//     refuse one it takes up after that time (actors/transfer/chunk_path.h invariant 1). Time
//     the request spent before the facade took it (the network, the facade's own mailbox) is
//     not counted.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/mailbox_element.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace caf_rdma::detail {

/// Manager -> its facade: send `msg` to `dest` (a peer manager) as the facade; with
/// `expects_reply`, as a request answered (to the manager) with the peer's answer or error,
/// or `timeout` when none comes in time.
struct PeerCall {
  caf::actor dest;
  std::chrono::milliseconds timeout{0};
  caf::message msg;
  bool expects_reply = true;
};

/// Manager -> its facade: the node's name (host:port) for the facade's refusals.
struct FacadeName {
  std::string name;
};

/// What the facade dropped, read by its manager's stats.
struct FacadeCounters {
  /// Messages nobody was owed an answer for, refusals it could not send, exit messages
  /// (invariants 4 and 5; ManagerStats::facade_dropped).
  std::atomic<uint64_t> dropped{0};
  /// Answers to its requests without their seal or from another node (invariant 6;
  /// ManagerStats::forged_answers).
  std::atomic<uint64_t> forged{0};
};

/// The facade: `manager` is the node's manager, `name` its name in errors.
class PeerFacade : public caf::event_based_actor {
public:
  PeerFacade(caf::actor_config& cfg, caf::actor_addr manager, std::string name,
             std::shared_ptr<FacadeCounters> counters);

  /// Drops exit messages (invariant 4) before CAF's mailbox sees them.
  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override;

  caf::behavior make_behavior() override;

private:
  caf::actor_addr manager_;
  std::string name_;
  std::shared_ptr<FacadeCounters> counters_;
};

}  // namespace caf_rdma::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::PeerCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::FacadeName)
