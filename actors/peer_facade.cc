#include "actors/peer_facade.h"

#include <caf/actor_proxy.hpp>
#include <caf/all.hpp>

#include <map>
#include <memory>
#include <utility>

#include "actors/rdma_atoms.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_messages.h"

namespace caf_rdma::detail {

namespace {

enum class Kind : uint8_t {
  kPeer,       ///< the peer protocol: from actors of other nodes only
  kQuestion,   ///< read-only questions: from anyone
  kLocalOnly,  ///< acts on this node's memory: never through the facade
  kUnknown,    ///< an atom the manager does not serve (or a known one in another shape)
  kAnswer,     ///< no leading atom: an answer of the manager on its way back
};

struct Classified {
  Kind kind;
  const char* request;
};

template <class Atom, class... Ts>
bool shaped(const caf::message& m) {
  return m.match_elements<caf::atom_value, Ts...>() && m.get_as<caf::atom_value>(0) == Atom::value;
}

Classified classify(const caf::message& m) {
  if (m.empty() || !m.match_element<caf::atom_value>(0))
    return {Kind::kAnswer, nullptr};
  if (shaped<qp_connect_atom, QpInfoMsg>(m))
    return {Kind::kPeer, "qp_connect"};
  if (shaped<fetch_atom, BufferRef, uint64_t, uint64_t>(m))
    return {Kind::kPeer, "fetch"};
  if (shaped<store_atom, BufferRef, uint64_t, ByteChunk>(m))
    return {Kind::kPeer, "store"};
  if (shaped<stream_grant_atom, BufferRef, uint64_t, uint64_t, uint8_t, uint32_t>(m))
    return {Kind::kPeer, "stream_grant"};
  if (shaped<lane_drop_atom, uint64_t>(m))
    return {Kind::kPeer, "lane_drop"};
  if (shaped<device_gone_atom, std::string>(m))
    return {Kind::kPeer, "device_gone"};
  if (shaped<buf_check_atom, BufferRef, uint64_t, uint64_t, uint8_t>(m))
    return {Kind::kPeer, "buf_check"};
  if (shaped<checksum_atom, BufferRef, uint64_t, uint64_t>(m))
    return {Kind::kPeer, "checksum"};
  if (shaped<dir_get_atom, std::string, uint32_t>(m))
    return {Kind::kQuestion, "dir_get"};
  if (shaped<peer_state_atom, caf::actor>(m))
    return {Kind::kQuestion, "peer_state"};
  if (shaped<stats_atom>(m))
    return {Kind::kQuestion, "stats"};
  const auto a = m.get_as<caf::atom_value>(0);
  static const std::pair<caf::atom_value, const char*> kLocalOnly[] = {
      {request_buffer_atom::value, "request_buffer"},
      {release_buffer_atom::value, "release_buffer"},
      {transfer_atom::value, "transfer"},
      {batch_atom::value, "batch"},
      {lane_open_atom::value, "lane_open"},
      {ask_check_atom::value, "ask_check"},
      {ask_sum_atom::value, "ask_sum"},
      {dir_put_atom::value, "dir_put"},
  };
  for (const auto& [atom, request] : kLocalOnly)
    if (a == atom)
      return {Kind::kLocalOnly, request};
  return {Kind::kUnknown, nullptr};
}

bool is_proxy(const caf::strong_actor_ptr& x) {
  return x && dynamic_cast<caf::actor_proxy*>(caf::actor_cast<caf::abstract_actor*>(x)) != nullptr;
}

std::string describe(const caf::strong_actor_ptr& x) {
  if (!x)
    return "an anonymous sender";
  return std::string(is_proxy(x) ? "network proxy " : "actor ") + std::to_string(x->id()) +
         " of node " + caf::to_string(x->node());
}

/// Relays the answer to request `id` (sent by the facade) to `rp`, whatever its type among the
/// peer protocol's answers.
void relay_answer(caf::scheduled_actor* self, caf::message_id id, caf::response_promise rp) {
  auto shared = std::make_shared<caf::response_promise>(std::move(rp));
  auto deliver = [shared](auto& x) { shared->deliver(std::move(x)); };
  self->add_multiplexed_response_handler(id,
                                         caf::behavior{
                                             [deliver](QpInfoMsg& x) mutable { deliver(x); },
                                             [deliver](ByteChunk& x) mutable { deliver(x); },
                                             [deliver](uint64_t& x) mutable { deliver(x); },
                                             [deliver](StreamGrantMsg& x) mutable { deliver(x); },
                                             [deliver](TransferOutcome& x) mutable { deliver(x); },
                                             [deliver](caf::error& x) mutable { deliver(x); },
                                         });
}

}  // namespace

caf::behavior peer_facade(caf::event_based_actor* self, const caf::actor_addr& manager,
                          std::string name, const std::shared_ptr<std::atomic<uint64_t>>& dropped) {
  auto drop = [dropped] {
    dropped->fetch_add(1, std::memory_order_relaxed);
    return caf::delegated<caf::message>{};
  };
  auto node = std::make_shared<std::string>(std::move(name));
  self->monitor(manager);
  self->set_down_handler([self, manager](caf::down_msg& msg) {
    if (msg.source == manager)
      self->quit(msg.reason);
  });
  // Exit messages from the network do not end the facade (invariant 4); CAF's `kill` cannot be
  // ignored by any actor: see the README's security model.
  self->set_exit_handler([](caf::exit_msg&) {});
  // Answers the facade owes (invariant 5): per (sender, request id) of a forwarded message the
  // manager will answer, how many. Only these answers go out: a message or error nobody is
  // owed (a peer's, or one that claims the facade itself as sender) is dropped, so no frame
  // can make the facade answer itself (or another facade) in a loop.
  using Key = std::pair<caf::actor_addr, uint64_t>;
  auto owed = std::make_shared<std::map<Key, uint32_t>>();
  auto key_of = [](const caf::mailbox_element& e) {
    return Key{caf::actor_cast<caf::actor_addr>(e.sender), e.mid.request_id().integer_value()};
  };
  auto take_owed = [owed, key_of](const caf::mailbox_element* e) {
    if (e == nullptr)
      return false;
    auto it = owed->find(key_of(*e));
    if (it == owed->end())
      return false;
    if (--it->second == 0)
      owed->erase(it);
    return true;
  };
  // An error as an ordinary message: the manager's error answer on its way back, or something a
  // peer sent. Never fatal.
  self->set_error_handler([self, take_owed, drop](caf::error& err) {
    if (take_owed(self->current_mailbox_element()))
      self->make_response_promise().deliver(std::move(err));
    else
      drop();
  });
  self->set_default_handler([manager, node, owed, key_of, take_owed, drop](
                                caf::scheduled_actor* me,
                                caf::message_view& view) -> caf::result<caf::message> {
    auto* e = me->current_mailbox_element();
    caf::message m = view.move_content_to_message();
    const Classified c = classify(m);
    // Refusals go only to a request's sender, never to the facade itself.
    const bool answerable =
        e->mid.is_request() && e->sender && e->sender != caf::actor_cast<caf::strong_actor_ptr>(me);
    auto refuse = [&](ErrorCode code, const std::string& why) -> caf::result<caf::message> {
      if (!answerable)
        return drop();
      return make_rdma_error(code, why);
    };
    switch (c.kind) {
      case Kind::kAnswer:
        // The manager answered a forwarded message: answer its sender in our name.
        if (!take_owed(e))
          return drop();
        return m;
      case Kind::kLocalOnly:
        return refuse(ErrorCode::kPermissionDenied,
                      std::string(c.request) + " from " + describe(e->sender) + " refused by " +
                          *node +
                          ": only actors of the manager's own node may make this request (send "
                          "it to your node's manager)");
      case Kind::kUnknown:
        return refuse(ErrorCode::kInvalidArgument,
                      "the RDMA manager of " + *node + " serves no '" +
                          caf::to_string(m.get_as<caf::atom_value>(0)) +
                          "' request of this shape: " + caf::to_string(m));
      case Kind::kPeer:
        // From another node (a proxy, or an actor of another actor system of this process).
        // What claims this node is a forged routed message or handshake: no manager of ours
        // speaks the peer protocol to its own facade.
        if (!e->sender || e->sender->node() == me->node())
          return refuse(ErrorCode::kPermissionDenied,
                        std::string(c.request) + " from " + describe(e->sender) + " refused by " +
                            *node + ": the peer protocol is for the managers of other nodes");
        break;
      case Kind::kQuestion:
        break;
    }
    auto target = caf::actor_cast<caf::strong_actor_ptr>(manager);
    if (!target)
      return refuse(ErrorCode::kPeerUnavailable, "the RDMA manager of " + *node + " is gone");
    // The manager answers every request, and asynchronous messages other than lane_drop and
    // device_gone (their handlers return nothing).
    if (e->mid.is_request() ||
        (!shaped<lane_drop_atom, uint64_t>(m) && !shaped<device_gone_atom, std::string>(m)))
      ++(*owed)[key_of(*e)];
    // Invariant 2: the sender and request id stay; the manager's answer comes back to us.
    target->enqueue(
        caf::make_mailbox_element(e->sender, e->mid, {caf::actor_cast<caf::strong_actor_ptr>(me)},
                                  std::move(m)),
        me->context());
    return caf::delegated<caf::message>{};
  });
  return {
      [self](PeerCall& call) -> caf::result<caf::message> {
        if (!call.expects_reply) {
          self->send(call.dest, std::move(call.msg));
          return caf::delegated<caf::message>{};
        }
        auto rp = self->make_response_promise();
        auto h = self->request(call.dest, call.timeout, std::move(call.msg));
        relay_answer(self, h.id(), std::move(rp));
        return caf::delegated<caf::message>{};
      },
      [node](FacadeName& n) { *node = std::move(n.name); },
  };
}

}  // namespace caf_rdma::detail
