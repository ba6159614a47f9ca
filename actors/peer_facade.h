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
//     sender, anything else with invalid_argument naming the atom.
//  2. A forwarded request keeps its sender (the peer's identity) and its request id, with the
//     facade as the only stage: the manager's answer comes back to the facade, which answers
//     the peer in its own name. Answers travel back through the facade in the order the manager
//     gave them.
//  3. The manager's messages to peers (PeerCall) leave in the order the manager sent them, with
//     the facade as their sender; a request's answer, or its error, goes back to the manager
//     once.
//  4. The facade lives as long as its manager (it monitors it; it holds no strong reference to
//     it) and never quits for a message it receives (exit, error or down messages from the
//     network are ignored or answered).
//  5. The facade answers only what it owes: a refusal to a request whose sender is not the
//     facade itself, and the manager's answer to each message it forwarded, once. Any other
//     answer or error that reaches it is dropped: no frame can make it answer itself, or another
//     facade, in a loop.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>

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

/// The facade's behavior; `manager` is the node's manager, `name` its name in errors.
/// `dropped` counts what it drops (invariant 5; ManagerStats::facade_dropped).
caf::behavior peer_facade(caf::event_based_actor* self, const caf::actor_addr& manager,
                          std::string name, const std::shared_ptr<std::atomic<uint64_t>>& dropped);

}  // namespace caf_rdma::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::PeerCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_rdma::detail::FacadeName)
