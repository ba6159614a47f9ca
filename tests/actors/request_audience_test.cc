// The table of requests (actors/request_audience.h) against what the manager and its facade do:
// every request of local_requests_actor, sent by an actor of another node straight to the manager
// or to its facade, is refused with permission_denied naming the table's name; every answered
// request of peer_protocol_actor reaches the facade's peer-protocol check (refused unsealed,
// naming it); questions are answered through the facade. The messages are made from the
// interfaces' signatures, so a request added to an interface is covered here unasked.
// (Invariant 1 of request_audience.h is checked at compile time.)
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <set>
#include <string>
#include <type_traits>

#include "actors/detail/manager_events.h"
#include "actors/rdma_errors.h"
#include "actors/rdma_manager_actor.h"
#include "actors/request_audience.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;

/// What came back for one message: an error, a value, or nothing in time.
struct Answer {
  bool value = false;
  caf::error error;
};

template <class Sig>
struct Signature;

template <class Atom, class... Ts, class... Rs>
struct Signature<caf::typed_mpi<caf::detail::type_list<Atom, Ts...>, caf::output_tuple<Rs...>>> {
  using atom = Atom;
  static constexpr bool answered =
      !std::is_same<caf::output_tuple<Rs...>, caf::output_tuple<void>>::value;
  /// The request with default-made arguments.
  static caf::message message() { return caf::make_message(Atom::value, Ts{}...); }
  /// Asks `dest` from `self`.
  static Answer ask(caf::scoped_actor& self, const caf::actor& dest) {
    Answer a;
    if constexpr (answered) {
      self->request(dest, 5s, message())
          .receive([&](Rs&...) { a.value = true; }, [&](caf::error& e) { a.error = e; });
    } else if (std::is_same<Atom, cancel_atom>::value) {
      // No answer of its own, but asked as a request: an empty one, or the refusal.
      self->request(dest, 5s, message())
          .receive([&] { a.value = true; }, [&](caf::error& e) { a.error = e; });
    }
    return a;
  }
};

/// Calls `f(Signature<Sig>{})` for every signature of `Interface`.
template <class F, class... Sigs>
void each_signature(F f, caf::typed_actor<Sigs...>*) {
  (f(Signature<Sigs>{}), ...);
}
template <class Interface, class F>
void each_signature(F f) {
  each_signature(f, static_cast<Interface*>(nullptr));
}

class RequestAudienceTest : public ::testing::Test {
protected:
  void SetUp() override {
    ManagerOptions o;
    o.mode = TransportMode::kFallback;
    o.name = "the tested node";
    auto m = spawn_manager(home_, o);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    manager_ = caf::actor_cast<caf::actor>(*m);
    caf::scoped_actor self{home_};
    self->request(caf::actor_cast<detail::manager_impl_actor>(manager_), 5s, detail::GetFacade{})
        .receive([&](caf::actor& f) { facade_ = f; },
                 [&](caf::error& e) { FAIL() << error_message(e); });
    ASSERT_TRUE(facade_);
  }
  void TearDown() override {
    caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    manager_ = nullptr;
    facade_ = nullptr;
  }

  /// A config with the middleman, which gives each system a node id of its own.
  struct Config : caf::actor_system_config {
    Config() { load<caf::io::middleman>(); }
  };
  Config home_cfg_, other_cfg_;
  caf::actor_system home_{home_cfg_};
  caf::actor_system other_{other_cfg_};  // another node, same process
  caf::actor manager_, facade_;
};

TEST_F(RequestAudienceTest, TheTableNamesEachAtomOnceUnderItsOwnName) {
  std::set<std::string> names;
  std::set<uint64_t> atoms;
  for (const RequestInfo& r : kRequests) {
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_TRUE(atoms.insert(static_cast<uint64_t>(r.atom)).second) << r.name;
    EXPECT_EQ(find_request(r.atom), &r) << r.name;
  }
  EXPECT_EQ(find_request(caf::atom("nosuchreq")), nullptr);
  EXPECT_STREQ(request_of<buf_sum_atom>().name, "buf_sum");
}

// Invariant 2 of request_audience.h, the manager's side: ManagerState::local_only for every
// kLocal row (a handler without the check would run the request, or fail otherwise).
TEST_F(RequestAudienceTest, EveryLocalRequestFromAnotherNodeIsRefusedByTheManager) {
  caf::scoped_actor stranger{other_};
  size_t n = 0;
  each_signature<local_requests_actor>([&](auto sig) {
    using S = decltype(sig);
    const char* name = request_of<typename S::atom>().name;
    Answer a = S::ask(stranger, manager_);
    EXPECT_FALSE(a.value) << name << " served for an actor of another node";
    EXPECT_EQ(error_code(a.error), ErrorCode::kPermissionDenied)
        << name << ": " << error_message(a.error);
    EXPECT_NE(error_message(a.error).find(std::string(name) + " from "), std::string::npos)
        << error_message(a.error);
    ++n;
  });
  EXPECT_EQ(n, detail::InterfaceRows<local_requests_actor>::size);
}

// Invariant 2, the facade's side: every kLocal row refused by atom, naming it.
TEST_F(RequestAudienceTest, EveryLocalRequestIsRefusedByTheFacade) {
  caf::scoped_actor stranger{other_};
  each_signature<local_requests_actor>([&](auto sig) {
    using S = decltype(sig);
    const char* name = request_of<typename S::atom>().name;
    Answer a = S::ask(stranger, facade_);
    EXPECT_EQ(error_code(a.error), ErrorCode::kPermissionDenied)
        << name << ": " << error_message(a.error);
    EXPECT_NE(error_message(a.error).find(std::string(name) + " from "), std::string::npos)
        << error_message(a.error);
    EXPECT_NE(error_message(a.error).find("the tested node"), std::string::npos)
        << error_message(a.error);
  });
}

// The facade classifies every answered request of peer_protocol_actor, in its exact shape, as
// the peer protocol: from another node, unsealed, it is refused for its missing seal (not as an
// unknown request), named as the table names it.
TEST_F(RequestAudienceTest, EveryPeerRequestReachesThePeerProtocolCheck) {
  caf::scoped_actor stranger{other_};
  each_signature<peer_protocol_actor>([&](auto sig) {
    using S = decltype(sig);
    if (!S::answered)
      return;  // lane_drop, device_gone: notices, never answered
    const char* name = request_of<typename S::atom>().name;
    Answer a = S::ask(stranger, facade_);
    EXPECT_EQ(error_code(a.error), ErrorCode::kInvalidArgument)
        << name << ": " << error_message(a.error);
    EXPECT_NE(error_message(a.error).find(std::string(name) + " from "), std::string::npos)
        << error_message(a.error);
    EXPECT_NE(error_message(a.error).find("without its seal"), std::string::npos)
        << error_message(a.error);
  });
}

// Questions go through the facade to the manager, from anyone.
TEST_F(RequestAudienceTest, QuestionsAreAnsweredThroughTheFacade) {
  caf::scoped_actor stranger{other_};
  Answer stats = Signature<caf::replies_to<stats_atom>::with<ManagerStats>>::ask(stranger, facade_);
  EXPECT_TRUE(stats.value) << error_message(stats.error);
  Answer state = Signature<caf::replies_to<peer_state_atom, caf::actor>::with<std::string>>::ask(
      stranger, facade_);
  EXPECT_TRUE(state.value) << error_message(state.error);
}

// ManagerOptions::priority_aging out of its range (components/priority.h) is refused, naming it;
// nothing is spawned.
TEST_F(RequestAudienceTest, APriorityAgingOutOfRangeIsRefusedNamingIt) {
  for (auto aging : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5),
                     kMaxAging + std::chrono::milliseconds(1)}) {
    ManagerOptions o;
    o.mode = TransportMode::kFallback;
    o.priority_aging = aging;
    auto m = spawn_manager(home_, o);
    ASSERT_FALSE(m.ok()) << "priority_aging " << aging.count() << " ms was taken";
    EXPECT_EQ(m.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(m.error().message().find("priority_aging must be in 1.."), std::string::npos)
        << m.error().message();
  }
}

// A class's traffic (ManagerOptions::latency_traffic, background_traffic; components/
// qp_traffic.h) out of its range is refused, naming the option, the field and the value.
TEST_F(RequestAudienceTest, AClassTrafficOutOfRangeIsRefusedNamingIt) {
  struct Case {
    QpTraffic latency, background;
    const char* said;
  };
  const Case cases[] = {
      {{256, -1}, {}, "ManagerOptions::latency_traffic.traffic_class is 256"},
      {{-1, 16}, {}, "ManagerOptions::latency_traffic.service_level is 16"},
      {{}, {-2, -1}, "ManagerOptions::background_traffic.traffic_class is -2"},
  };
  for (const Case& c : cases) {
    ManagerOptions o;
    o.mode = TransportMode::kFallback;
    o.latency_traffic = c.latency;
    o.background_traffic = c.background;
    auto m = spawn_manager(home_, o);
    ASSERT_FALSE(m.ok()) << c.said << ": taken";
    EXPECT_EQ(m.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(m.error().message().find(c.said), std::string::npos) << m.error().message();
  }
}

}  // namespace
}  // namespace caf_rdma
