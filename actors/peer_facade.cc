#include "actors/peer_facade.h"

#include <caf/actor_proxy.hpp>
#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "actors/detail/manager_events.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_messages.h"
#include "actors/request_audience.h"
#include "actors/version.h"
#include "components/secure_random.h"

namespace caf_rdma::detail {

namespace {

enum class Kind : uint8_t {
  kPeer,       ///< the peer protocol (Audience::kPeer): from actors of other nodes only
  kQuestion,   ///< read-only questions (Audience::kQuestion): from anyone
  kLocalOnly,  ///< acts on this node's memory (Audience::kLocal): never through the facade
  kUnknown,    ///< an atom the manager does not serve (or a known one in another shape)
  kAnswer,     ///< no leading atom: an answer of the manager on its way back
};

struct Classified {
  Kind kind;
  const char* request;
  bool answered = true;  ///< the manager answers it (all but the notices lane_drop, device_gone)
};

/// Whether `m` has the exact shape of one of `Interface`'s handlers; nullopt if not, else
/// whether the manager answers it (a `reacts_to` handler is a notice: no answer).
template <class Sig>
struct Shape;

template <class Atom, class... Ts, class Out>
struct Shape<caf::typed_mpi<caf::detail::type_list<Atom, Ts...>, Out>> {
  static bool matches(const caf::message& m) {
    return m.match_elements<caf::atom_value, Ts...>() &&
           m.get_as<caf::atom_value>(0) == Atom::get_value();
  }
  static constexpr bool answered = !std::is_same<Out, caf::output_tuple<void>>::value;
};

template <class... Sigs>
std::optional<bool> served_shape(const caf::message& m, caf::typed_actor<Sigs...>*) {
  std::optional<bool> answered;
  // The first handler whose shape `m` has (the fold stops at it).
  (void)((Shape<Sigs>::matches(m) && (answered = Shape<Sigs>::answered, true)) || ...);
  return answered;
}

template <class Interface>
std::optional<bool> served_shape(const caf::message& m) {
  return served_shape(m, static_cast<Interface*>(nullptr));
}

/// By the table of requests (actors/request_audience.h): local-only requests by their atom
/// alone, questions and the peer protocol by their exact shape in their interface.
Classified classify(const caf::message& m) {
  if (m.empty() || !m.match_element<caf::atom_value>(0))
    return {Kind::kAnswer, nullptr};
  const RequestInfo* r = find_request(m.get_as<caf::atom_value>(0));
  if (r == nullptr)
    return {Kind::kUnknown, nullptr};
  std::optional<bool> answered;
  switch (r->audience) {
    case Audience::kLocal:
      return {Kind::kLocalOnly, r->name};
    case Audience::kQuestion:
      if ((answered = served_shape<manager_questions_actor>(m)))
        return {Kind::kQuestion, r->name, *answered};
      break;
    case Audience::kPeer:
      if ((answered = served_shape<peer_protocol_actor>(m)))
        return {Kind::kPeer, r->name, *answered};
      break;
  }
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

/// The nonce a message ends with, if it does.
std::optional<PeerNonce> trailing_nonce(const caf::message& m) {
  if (m.size() < 2 || !m.match_element<PeerNonce>(m.size() - 1))
    return std::nullopt;
  return m.get_as<PeerNonce>(m.size() - 1);
}

bool same(const PeerNonce& a, const PeerNonce& b) {
  return ((a.hi ^ b.hi) | (a.lo ^ b.lo)) == 0;
}

/// A request the facade sent for its manager and whose answer it awaits (invariant 6).
struct Awaited {
  caf::message_id id;        ///< the id its answer comes under (a response id)
  caf::response_promise rp;  ///< the manager's request
  PeerNonce nonce;
  caf::node_id asked;                         ///< the node of the actor asked
  std::chrono::steady_clock::time_point due;  ///< the request's deadline (CAF's timeout is later)
};

void await_answer(caf::scheduled_actor* self, const std::shared_ptr<Awaited>& a,
                  const std::shared_ptr<FacadeCounters>& counters);

/// Something arrived under `a`'s id that is not its answer: count it and wait on.
void reject(caf::scheduled_actor* self, const std::shared_ptr<Awaited>& a,
            const std::shared_ptr<FacadeCounters>& counters) {
  counters->forged.fetch_add(1, std::memory_order_relaxed);
  await_answer(self, a, counters);
}

/// Whether the message being handled comes from the node `a` asked.
bool from_asked(caf::scheduled_actor* self, const Awaited& a) {
  const caf::mailbox_element* e = self->current_mailbox_element();
  return e != nullptr && e->sender != nullptr && e->sender->node() == a.asked;
}

/// A handler for answer type T, sealed with a nonce.
template <class T>
auto sealed(caf::scheduled_actor* self, const std::shared_ptr<Awaited>& a,
            const std::shared_ptr<FacadeCounters>& counters) {
  return [self, a, counters](T& x, PeerNonce& n) {
    if (!same(n, a->nonce) || !from_asked(self, *a))
      return reject(self, a, counters);
    a->rp.deliver(std::move(x));
  };
}

/// (Re-)installs the handler of `a`'s answer: CAF removes a response handler once anything
/// arrived under its id, so one that was not the answer installs it again.
void await_answer(caf::scheduled_actor* self, const std::shared_ptr<Awaited>& a,
                  const std::shared_ptr<FacadeCounters>& counters) {
  self->add_multiplexed_response_handler(
      a->id,
      caf::behavior{
          sealed<QpInfoMsg>(self, a, counters),
          sealed<ByteChunk>(self, a, counters),
          sealed<uint64_t>(self, a, counters),
          sealed<StreamGrantMsg>(self, a, counters),
          sealed<TransferOutcome>(self, a, counters),
          sealed<caf::error>(self, a, counters),
          // Unsealed: CAF's own request timeout (sent by this actor's clock) is taken once
          // the deadline passed; anything else (also what CAF makes of a message of another
          // shape, unexpected_response) is not the answer.
          [self, a, counters](caf::error& err) {
            if (err == caf::sec::request_timeout && self->clock().now() >= a->due)  // actor clock
              return a->rp.deliver(std::move(err));
            reject(self, a, counters);
          },
      });
}

}  // namespace

PeerFacade::PeerFacade(caf::actor_config& cfg, caf::actor_addr manager, std::string name,
                       std::shared_ptr<FacadeCounters> counters)
    : caf::event_based_actor(cfg),
      manager_(std::move(manager)),
      name_(std::move(name)),
      counters_(std::move(counters)) {}

void PeerFacade::enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) {
  // Invariant 4: nobody has a reason to end the facade by message (it ends with its manager),
  // and once an exit message with CAF's `kill` is in the mailbox no handler can refuse it.
  if (ptr != nullptr && ptr->content().match_elements<caf::exit_msg>()) {
    counters_->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  caf::event_based_actor::enqueue(std::move(ptr), eu);
}

caf::behavior PeerFacade::make_behavior() {
  auto* self = this;
  const caf::actor_addr manager = manager_;
  auto counters = counters_;
  auto drop = [counters] {
    counters->dropped.fetch_add(1, std::memory_order_relaxed);
    return caf::delegated<caf::message>{};
  };
  auto node = std::make_shared<std::string>(name_);
  // A strong handle for the monitor: CAF's monitor of an address takes the raw actor, which may
  // already be on its way out when the manager stopped before this facade ran for the first
  // time (then the facade has nothing to serve).
  auto strong = caf::actor_cast<caf::actor>(manager);
  if (!strong) {
    self->quit(caf::exit_reason::normal);
    return {};
  }
  self->monitor(strong);
  strong = nullptr;
  self->set_down_handler([self, manager](caf::down_msg& msg) {
    if (msg.source == manager)
      self->quit(msg.reason);
  });
  // Exit messages never get here (enqueue drops them); a handler all the same.
  self->set_exit_handler([](caf::exit_msg&) {});
  // Answers the facade owes (invariant 5): every message it forwards to its manager goes under
  // a request id of its own, drawn at random (60 bits), and the answer is recognised by that id
  // alone: the manager answers to the facade under it, and nobody else knows it (a frame that
  // claims the requester and its request id is not the manager's answer: invariant 2). Each
  // entry: whom to answer, under which id, sealed how (invariant 6; no seal for a question or an
  // unsealed request). Only these answers go out: a message or error nobody is owed (a peer's,
  // or one that claims the facade itself as sender) is dropped, so no frame can make the facade
  // answer itself (or another facade) in a loop.
  struct Owed {
    caf::strong_actor_ptr to;  ///< the forwarded message's sender
    caf::message_id mid;       ///< its message id
    std::optional<PeerNonce> seal;
  };
  auto owed = std::make_shared<std::unordered_map<uint64_t, Owed>>();
  // The answer owed for the current message (the manager's answer), taken; nullopt if none is.
  auto take_owed = [owed](const caf::mailbox_element* e) -> std::optional<Owed> {
    if (e == nullptr || !e->mid.is_request())
      return std::nullopt;
    auto it = owed->find(e->mid.integer_value() & caf::message_id::request_id_mask);
    if (it == owed->end())
      return std::nullopt;
    Owed o = std::move(it->second);
    owed->erase(it);
    return o;
  };
  // Answers `o` with `answer`, sealed as its request was, in the facade's name.
  auto answer = [self](const Owed& o, caf::message msg) {
    if (!o.to)
      return;  // an anonymous sender: nobody to answer
    // A request's answer is its response; an asynchronous message's answer goes back as an
    // asynchronous message (as CAF answers one).
    if (o.seal)
      msg = caf::message::concat(msg, caf::make_message(*o.seal));
    o.to->enqueue(caf::make_mailbox_element(caf::actor_cast<caf::strong_actor_ptr>(self),
                                            o.mid.response_id(), {}, std::move(msg)),
                  self->context());
  };
  // An error as an ordinary message: the manager's error answer on its way back, or something a
  // peer sent. Never fatal.
  self->set_error_handler([self, take_owed, answer, drop](caf::error& err) {
    auto o = take_owed(self->current_mailbox_element());
    if (!o)
      return (void)drop();
    answer(*o, caf::make_message(std::move(err)));
  });
  self->set_default_handler([manager, node, owed, take_owed, answer, drop](
                                caf::scheduled_actor* me,
                                caf::message_view& view) -> caf::result<caf::message> {
    auto* e = me->current_mailbox_element();
    caf::message m = view.move_content_to_message();
    // A request of the peer protocol ends with its seal (invariant 6): what the manager sees,
    // and what is classified, is the request without it.
    const std::optional<PeerNonce> nonce = trailing_nonce(m);
    if (nonce)
      m = m.drop_right(1);
    const Classified c = classify(m);
    auto sealed = [&](const caf::message& answer) -> caf::message {
      return nonce ? caf::message::concat(answer, caf::make_message(*nonce)) : answer;
    };
    // Refusals go only to a request's sender, never to the facade itself.
    const bool answerable =
        e->mid.is_request() && e->sender && e->sender != caf::actor_cast<caf::strong_actor_ptr>(me);
    auto refuse = [&](ErrorCode code, const std::string& why) -> caf::result<caf::message> {
      if (!answerable)
        return drop();
      return sealed(caf::make_message(make_rdma_error(code, why)));
    };
    switch (c.kind) {
      case Kind::kAnswer:
        // The manager answered a forwarded message: answer its sender in our name, sealed as
        // its request was.
        if (nonce)
          return drop();  // the manager's answers carry no seal: a peer's forgery
        if (auto o = take_owed(e)) {
          answer(*o, std::move(m));
          return caf::delegated<caf::message>{};
        }
        return drop();
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
                          "' request of this shape: " + caf::to_string(m) + " (it runs caf-rdma " +
                          kVersion + "; a node of another version may send other shapes)");
      case Kind::kPeer:
        // From another node (a proxy, or an actor of another actor system of this process).
        // What claims this node is a forged routed message or handshake: no manager of ours
        // speaks the peer protocol to its own facade.
        if (!e->sender || e->sender->node() == me->node())
          return refuse(ErrorCode::kPermissionDenied,
                        std::string(c.request) + " from " + describe(e->sender) + " refused by " +
                            *node + ": the peer protocol is for the managers of other nodes");
        // Its requests come sealed (the notices lane_drop and device_gone are not requests).
        if (c.answered && !nonce)
          return refuse(ErrorCode::kInvalidArgument,
                        std::string(c.request) + " from " + describe(e->sender) + " refused by " +
                            *node +
                            ": a peer-protocol request without its seal (PeerNonce); is the "
                            "sender's caf-rdma older than this node's?");
        break;
      case Kind::kQuestion:
        break;  // asked sealed (RdmaClient) or not (any CAF actor): answered the same way
    }
    // Invariant 7: the request's arrival beside its requester's time left (its shape was
    // checked: the last element is that uint32_t).
    if (c.kind == Kind::kPeer && carries_time_left(m.get_as<caf::atom_value>(0)) &&
        m.match_element<uint32_t>(m.size() - 1)) {
      OwnerDue due{me->clock().now(), m.get_as<uint32_t>(m.size() - 1)};
      m = caf::message::concat(m.drop_right(1), caf::make_message(due));
    }
    auto target = caf::actor_cast<caf::strong_actor_ptr>(manager);
    if (!target)
      return refuse(ErrorCode::kPeerUnavailable, "the RDMA manager of " + *node + " is gone");
    // Invariant 2: the sender stays (the manager's checks see the peer); the manager answers
    // every message it answers (all but the notices lane_drop and device_gone) to us, under a
    // request id only we know.
    caf::message_id mid = caf::make_message_id();  // a notice: asynchronous, no answer
    if (c.answered) {
      uint64_t id = 0;
      while (id == 0 || owed->count(id) > 0)
        id = secure_random_u64() & caf::message_id::request_id_mask;
      owed->emplace(id, Owed{e->sender, e->mid, nonce});
      mid = caf::make_message_id(id);
    }
    target->enqueue(caf::make_mailbox_element(
                        e->sender, mid, {caf::actor_cast<caf::strong_actor_ptr>(me)}, std::move(m)),
                    me->context());
    return caf::delegated<caf::message>{};
  });
  return {
      [self, counters](PeerCall& call) -> caf::result<caf::message> {
        if (!call.expects_reply) {
          self->send(call.dest, std::move(call.msg));
          return caf::delegated<caf::message>{};
        }
        // Invariant 6: sealed with a fresh nonce; only its answer goes back to the manager.
        auto a = std::make_shared<Awaited>();
        a->rp = self->make_response_promise();
        secure_random(&a->nonce, sizeof(a->nonce));
        a->asked = call.dest.node();
        a->due = self->clock().now() + call.timeout;
        auto h = self->request(call.dest, call.timeout,
                               caf::message::concat(call.msg, caf::make_message(a->nonce)));
        a->id = h.id();
        await_answer(self, a, counters);
        return caf::delegated<caf::message>{};
      },
      [node](FacadeName& n) { *node = std::move(n.name); },
  };
}

}  // namespace caf_rdma::detail
