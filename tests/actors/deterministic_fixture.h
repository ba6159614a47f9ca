// DeterministicFixture: a manager on CAF 0.17's test_coordinator, with a fake peer, where the
// test decides the order of every event (Zeek Broker's tests/cpp/test.cc base_fixture, eRPC's
// tests/protocol_tests on transport_impl/fake).
//
// What it is
// - `sys`: the actor system of the manager under test (node A), scheduler policy "testing":
//   nothing runs until the test runs it, on the test's own thread, and time is the scheduler's
//   clock (caf::detail::test_actor_clock), which moves only when the test moves it. The manager
//   reads its deadlines from that clock (self_->clock().now()), so a timeout fires exactly when
//   the test says. It runs the fallback transport without a device and without the stream
//   channel: no thread of its own, no socket, no middleman.
// - `peer_sys`: a second such system (node B, another node id) for the fake peer and for actors
//   that play "another node". Both clocks move together.
// - FakePeer: a stand-in peer manager in `peer_sys` speaking the sealed peer protocol
//   (actors/peer_facade.h, invariant 6). It owns one buffer (`memory`), records every request
//   the manager sends it (fetch, store, read_ack, buf_check, ...) and answers none until told:
//   `answer(i)` serves request i (a fetch from its memory, a store into it, a read_ack's echo),
//   `fail(i, err)` answers with an error, `kill()` ends it. It can also ask the manager for
//   fetches, as a peer node does (`fetch`), or send it any sealed request whose answer is a
//   uint64_t (`ask`: store, atomic), and records the answers. It applies the atomics the
//   manager asks of it (fetch-add, compare-swap on its memory's word) when told to answer.
// - `self`: a scoped actor of node A, the application. `ask<T>(dest, xs...)` sends a request
//   (no CAF timeout: only the manager's own deadlines end it); `reply(p)` is its answer if it
//   came, without waiting; `quiet()` says that nothing else is in the application's mailbox (no
//   second reply).
//
// How to drive it
// - `run_jobs()`: every message that can be handled now is handled; the clock stands still.
// - `advance(d)`: the clock moves by d, the timers due fire, and their messages are handled.
// - `next_timeout()`: the earliest pending timer fires (the clock jumps to it) and is handled.
// - `run()`: Broker's loop, jobs and all timers until nothing is left (bounded: a manager that
//   keeps re-arming a timer, e.g. a read_ack retry, fails the test instead of spinning).
// A test sends, runs jobs, looks (peer.log(), reply(), the memory), answers or moves the clock,
// and looks again: every interleaving it checks is written out in the test.
#pragma once

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "actors/rdma_errors.h"
#include "actors/rdma_manager_actor.h"
#include "actors/rdma_messages.h"
#include "components/secure_random.h"
#include "tests/actors/expect_rdma_error.h"

namespace caf_rdma::testing {

// The manager keeps its deadlines as steady_clock time points and reads them from the actor
// clock: the two must be one type.
static_assert(std::is_same_v<caf::actor_clock::time_point, std::chrono::steady_clock::time_point>,
              "the manager's deadlines are steady_clock time points read from the actor clock");

using namespace std::chrono_literals;

// Commands of the test to its fake peer (handled in the fake peer's own context).
using fake_answer_atom = caf::atom_constant<caf::atom("fk_answer")>;
using fake_fail_atom = caf::atom_constant<caf::atom("fk_fail")>;
using fake_fetch_atom = caf::atom_constant<caf::atom("fk_fetch")>;
using fake_ask_atom = caf::atom_constant<caf::atom("fk_ask")>;

/// The id of the one buffer a FakePeer owns.
constexpr uint64_t kFakeBufferId = 7;

inline uint8_t det_pattern(uint64_t i, uint32_t seed) {
  // The seed is spread over the high bits: patterns of two seeds differ in (nearly) every byte.
  return static_cast<uint8_t>((i * 2654435761u + seed * 0x9E3779B97F4A7C15u) >> 11);
}

/// Memory owned by a test, filled with det_pattern (seed 0: zeros).
inline std::vector<uint8_t> patterned(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = seed == 0 ? 0 : det_pattern(i, seed);
  return v;
}

/// One request the manager sent the fake peer, in arrival order.
struct PeerAsk {
  caf::atom_value kind{};  ///< fetch_atom::value, store_atom::value, read_ack_atom::value, ...
  BufferRef ref;
  uint64_t offset = 0;
  uint64_t length =
      0;  ///< fetch, buf_check: the length asked; store: the chunk's size; packs: total
  std::vector<PackedRange> ranges;    ///< fetch_list, store_list: the ranges, in order
  std::vector<uint8_t> bytes;         ///< store: the chunk (applied to `memory` when answered)
  uint64_t token = 0;                 ///< read_ack
  uint32_t left_ms = 0;               ///< store, atomic: the time its requester had left
  uint8_t atomic_kind = 0;            ///< atomic: TransferKind (fetch-add, compare-swap)
  uint64_t operand = 0, compare = 0;  ///< atomic
  bool answered = false;
  caf::response_promise rp;
  PeerNonce nonce;
};

/// What a fetch the fake peer asked came back with: the bytes, or the error.
struct FetchAnswer {
  bool ok = false;
  std::vector<uint8_t> bytes;
  caf::error error;
};

/// The fake peer's state, shared with the test (only one thread ever runs: no locks).
struct FakePeerLog {
  std::vector<uint8_t> memory;  ///< its one buffer (kFakeBufferId)
  uint64_t secret_hi = 0, secret_lo = 0;
  std::vector<PeerAsk> asked;
  std::map<uint64_t, FetchAnswer> fetched;  ///< by the tag of its own fetch (FakePeer::fetch)
  /// By the tag of its own request (FakePeer::ask): the uint64_t answer, or the error.
  std::map<uint64_t, caf::expected<uint64_t>> asked_answers;

  /// Indexes in `asked` of the requests of `kind` (not yet answered only, with `open`).
  std::vector<size_t> of(caf::atom_value kind, bool open = false) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < asked.size(); ++i)
      if (asked[i].kind == kind && (!open || !asked[i].answered))
        out.push_back(i);
    return out;
  }
};

namespace detail {

inline caf::behavior fake_peer(caf::event_based_actor* self,
                               const std::shared_ptr<FakePeerLog>& log) {
  auto hold = [self, log](PeerAsk a, const PeerNonce& n) {
    a.nonce = n;
    a.rp = self->make_response_promise();
    log->asked.push_back(std::move(a));
    return caf::delegated<caf::message>{};
  };
  auto fits = [log](uint64_t offset, uint64_t n) {
    return offset <= log->memory.size() && n <= log->memory.size() - offset;
  };
  return {
      [=](fetch_atom, const BufferRef& ref, uint64_t offset, uint64_t length, const PeerNonce& n) {
        PeerAsk a;
        a.kind = fetch_atom::value;
        a.ref = ref;
        a.offset = offset;
        a.length = length;
        return hold(std::move(a), n);
      },
      [=](store_atom, const BufferRef& ref, uint64_t offset, const ByteChunk& c, uint64_t,
          uint32_t left_ms, const PeerNonce& n) {
        PeerAsk a;
        a.kind = store_atom::value;
        a.ref = ref;
        a.offset = offset;
        a.length = c.size;
        a.left_ms = left_ms;
        a.bytes.assign(c.data, c.data + c.size);  // the chunk's message (and pin) goes now
        return hold(std::move(a), n);
      },
      [=](fetch_list_atom, const BufferRef& ref, const std::vector<PackedRange>& ranges,
          const PeerNonce& n) {
        PeerAsk a;
        a.kind = fetch_list_atom::value;
        a.ref = ref;
        a.ranges = ranges;
        for (const PackedRange& r : ranges)
          a.length += r.length;
        return hold(std::move(a), n);
      },
      [=](store_list_atom, const BufferRef& ref, const std::vector<PackedRange>& ranges,
          const ByteChunk& c, uint32_t left_ms, const PeerNonce& n) {
        PeerAsk a;
        a.kind = store_list_atom::value;
        a.ref = ref;
        a.ranges = ranges;
        a.length = c.size;
        a.left_ms = left_ms;
        a.bytes.assign(c.data, c.data + c.size);
        return hold(std::move(a), n);
      },
      [=](atomic_atom, const BufferRef& ref, uint64_t offset, uint8_t kind, uint64_t operand,
          uint64_t compare, uint32_t left_ms, const PeerNonce& n) {
        PeerAsk a;
        a.kind = atomic_atom::value;
        a.ref = ref;
        a.offset = offset;
        a.length = 8;
        a.atomic_kind = kind;
        a.operand = operand;
        a.compare = compare;
        a.left_ms = left_ms;
        return hold(std::move(a), n);
      },
      [=](read_ack_atom, uint64_t token, const PeerNonce& n) {
        PeerAsk a;
        a.kind = read_ack_atom::value;
        a.token = token;
        return hold(std::move(a), n);
      },
      [=](buf_check_atom, const BufferRef& ref, uint64_t offset, uint64_t length, uint8_t,
          const PeerNonce& n) {
        PeerAsk a;
        a.kind = buf_check_atom::value;
        a.ref = ref;
        a.offset = offset;
        a.length = length;
        return hold(std::move(a), n);
      },
      [=](qp_connect_atom, const QpInfoMsg&, const PeerNonce& n) {
        PeerAsk a;
        a.kind = qp_connect_atom::value;
        return hold(std::move(a), n);
      },
      // -- the test's commands --
      [=](fake_answer_atom, uint64_t i) {
        if (i >= log->asked.size() || log->asked[i].answered)
          return;
        PeerAsk& a = log->asked[i];
        a.answered = true;
        if (a.kind == fetch_atom::value) {
          if (!fits(a.offset, a.length))
            return a.rp.deliver(make_rdma_error(ErrorCode::kOutOfBounds, "fake fetch"), a.nonce);
          a.rp.deliver(ByteChunk::copy_of(log->memory.data() + a.offset, a.length), a.nonce);
        } else if (a.kind == store_atom::value) {
          if (!fits(a.offset, a.bytes.size()))
            return a.rp.deliver(make_rdma_error(ErrorCode::kOutOfBounds, "fake store"), a.nonce);
          std::memcpy(log->memory.data() + a.offset, a.bytes.data(), a.bytes.size());
          a.rp.deliver(uint64_t{a.bytes.size()}, a.nonce);
        } else if (a.kind == fetch_list_atom::value || a.kind == store_list_atom::value) {
          // As an owner does: every range checked first, then all of them moved.
          for (const PackedRange& r : a.ranges)
            if (!fits(r.offset, r.length))
              return a.rp.deliver(make_rdma_error(ErrorCode::kOutOfBounds, "fake pack"), a.nonce);
          const bool fetch = a.kind == fetch_list_atom::value;
          std::vector<uint8_t> out;
          uint64_t at = 0;
          for (const PackedRange& r : a.ranges) {
            uint8_t* mem = log->memory.data() + r.offset;
            if (fetch)
              out.insert(out.end(), mem, mem + r.length);
            else
              std::memcpy(mem, a.bytes.data() + at, r.length);
            at += r.length;
          }
          if (fetch)
            a.rp.deliver(ByteChunk::copy_of(out.data(), out.size()), a.nonce);
          else
            a.rp.deliver(uint64_t{at}, a.nonce);
        } else if (a.kind == atomic_atom::value) {
          if (!fits(a.offset, 8))
            return a.rp.deliver(make_rdma_error(ErrorCode::kOutOfBounds, "fake atomic"), a.nonce);
          uint64_t old = 0;
          std::memcpy(&old, log->memory.data() + a.offset, 8);
          const bool add = a.atomic_kind == wire_kind(TransferKind::kFetchAdd);
          const uint64_t now = add ? old + a.operand : (old == a.compare ? a.operand : old);
          std::memcpy(log->memory.data() + a.offset, &now, 8);
          a.rp.deliver(old, a.nonce);
        } else if (a.kind == read_ack_atom::value) {
          a.rp.deliver(a.token, a.nonce);
        } else if (a.kind == buf_check_atom::value) {
          a.rp.deliver(TransferOutcome{}, a.nonce);
        } else {
          a.rp.deliver(make_rdma_error(ErrorCode::kInternal, "the fake peer cannot answer this"),
                       a.nonce);
        }
      },
      [=](fake_fail_atom, uint64_t i, caf::error& err) {
        if (i >= log->asked.size() || log->asked[i].answered)
          return;
        log->asked[i].answered = true;
        log->asked[i].rp.deliver(std::move(err), log->asked[i].nonce);
      },
      [=](fake_ask_atom, uint64_t tag, const caf::actor& dest, caf::message& msg) {
        // Sealed as a peer's facade seals it; the answer counts only with the nonce back.
        PeerNonce nonce;
        secure_random(&nonce, sizeof(nonce));
        auto h =
            self->request(dest, caf::infinite, caf::message::concat(msg, caf::make_message(nonce)));
        auto same = [nonce](const PeerNonce& n) { return n.hi == nonce.hi && n.lo == nonce.lo; };
        self->add_multiplexed_response_handler(
            h.id(),
            caf::behavior{
                [=](uint64_t v, PeerNonce& n) {
                  log->asked_answers.insert_or_assign(
                      tag, caf::expected<uint64_t>(
                               same(n) ? caf::expected<uint64_t>(v)
                                       : make_rdma_error(ErrorCode::kInternal, "unsealed answer")));
                },
                [=](caf::error& e, PeerNonce&) {
                  log->asked_answers.insert_or_assign(tag, caf::expected<uint64_t>(std::move(e)));
                },
                [=](caf::error& e) {
                  log->asked_answers.insert_or_assign(tag, caf::expected<uint64_t>(std::move(e)));
                },
            });
      },
      [=](fake_fetch_atom, uint64_t tag, const caf::actor& dest, caf::message& msg) {
        // Sealed as a peer's facade seals it; the answer counts only with the nonce back.
        PeerNonce nonce;
        secure_random(&nonce, sizeof(nonce));
        auto h =
            self->request(dest, caf::infinite, caf::message::concat(msg, caf::make_message(nonce)));
        auto same = [nonce](const PeerNonce& n) { return n.hi == nonce.hi && n.lo == nonce.lo; };
        self->add_multiplexed_response_handler(
            h.id(), caf::behavior{
                        [=](ByteChunk& c, PeerNonce& n) {
                          FetchAnswer& a = log->fetched[tag];
                          a.ok = same(n);
                          a.bytes.assign(c.data, c.data + c.size);
                          if (!a.ok)
                            a.error = make_rdma_error(ErrorCode::kInternal, "unsealed answer");
                        },
                        [=](caf::error& e, PeerNonce&) { log->fetched[tag].error = std::move(e); },
                        [=](caf::error& e) { log->fetched[tag].error = std::move(e); },
                    });
      },
  };
}

}  // namespace detail

/// A stand-in peer manager (see the top of this file).
class FakePeer {
public:
  FakePeer(caf::actor_system& sys, std::vector<uint8_t> memory, std::string name)
      : log_(std::make_shared<FakePeerLog>()), name_(std::move(name)) {
    log_->memory = std::move(memory);
    secure_random(&log_->secret_hi, sizeof(log_->secret_hi));
    secure_random(&log_->secret_lo, sizeof(log_->secret_lo));
    actor_ = sys.spawn(detail::fake_peer, log_);
  }

  const caf::actor& actor() const { return actor_; }
  const std::string& name() const { return name_; }
  FakePeerLog& log() { return *log_; }
  std::vector<uint8_t>& memory() { return log_->memory; }

  /// Its buffer's handle, as its owner (this peer) issued it.
  BufferHandle handle() const {
    BufferHandle h;
    h.id = kFakeBufferId;
    h.addr = reinterpret_cast<uint64_t>(log_->memory.data());
    h.size = log_->memory.size();
    h.access = static_cast<uint8_t>(BufferAccess::kReadWrite);
    h.memory = static_cast<uint8_t>(BufferMemory::kHost);
    h.owner = actor_;
    h.owner_name = name_;
    h.secret_hi = log_->secret_hi;
    h.secret_lo = log_->secret_lo;
    return h;
  }

  // Commands: each takes effect when the fake peer runs (DeterministicFixture::run_jobs).
  void answer(size_t i) { caf::anon_send(actor_, fake_answer_atom::value, uint64_t{i}); }
  void fail(size_t i, caf::error err) {
    caf::anon_send(actor_, fake_fail_atom::value, uint64_t{i}, std::move(err));
  }
  /// Asks `dest` (a manager's facade) for [offset, offset + length) of `ref`, as a peer node.
  void fetch(uint64_t tag, const caf::actor& dest, const BufferRef& ref, uint64_t offset,
             uint64_t length) {
    caf::anon_send(actor_, fake_fetch_atom::value, tag, dest,
                   caf::make_message(fetch_atom::value, ref, offset, length));
  }
  /// Asks `dest` (a manager's facade) for `ranges` of `ref` in one packed fetch, as a peer node.
  void fetch_list(uint64_t tag, const caf::actor& dest, const BufferRef& ref,
                  std::vector<PackedRange> ranges) {
    caf::anon_send(actor_, fake_fetch_atom::value, tag, dest,
                   caf::make_message(fetch_list_atom::value, ref, std::move(ranges)));
  }
  /// Sends `dest` (a manager's facade) the request `xs...` (a store or atomic: its answer is a
  /// uint64_t), sealed, as a peer node; the answer lands in log().asked_answers[tag].
  template <class... Ts>
  void ask(uint64_t tag, const caf::actor& dest, Ts&&... xs) {
    caf::anon_send(actor_, fake_ask_atom::value, tag, dest,
                   caf::make_message(std::forward<Ts>(xs)...));
  }
  void kill() { caf::anon_send_exit(actor_, caf::exit_reason::kill); }

private:
  std::shared_ptr<FakePeerLog> log_;
  std::string name_;
  caf::actor actor_;
};

/// A request of the application (`self`) whose answer may not be there yet.
template <class T>
struct Pending {
  caf::message_id id;  ///< its response id
  bool taken = false;
};

class DeterministicFixture : public ::testing::Test {
protected:
  DeterministicFixture()
      : sys_(configure(cfg_)),
        peer_sys_(configure_peer(peer_cfg_)),
        sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
        peer_sched_(dynamic_cast<caf::scheduler::test_coordinator&>(peer_sys_.scheduler())) {
    // Not zero (a deadline computed from it must not look like "no deadline"), the same on
    // both nodes.
    sched_.clock().current_time = caf::actor_clock::time_point{std::chrono::hours(1)};
    peer_sched_.clock().current_time = sched_.clock().current_time;
    // Every actor is ended before the systems go (TearDown); an actor left over shows up as a
    // leak under ASan instead of a hang here.
    sys_.await_actors_before_shutdown(false);
    peer_sys_.await_actors_before_shutdown(false);
    self_ = std::make_unique<caf::scoped_actor>(sys_, true);
  }

  ~DeterministicFixture() override {
    self_.reset();
    for (auto& p : peers_)
      if (p->actor())
        caf::anon_send_exit(p->actor(), caf::exit_reason::user_shutdown);
    for (auto& a : others_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (manager_)
      caf::anon_send_exit(manager_, caf::exit_reason::user_shutdown);
    others_.clear();
    manager_ = nullptr;
    facade_ = nullptr;
    settle();
    peers_.clear();
  }

  /// The options of a manager here: fallback, no device, no stream channel, 4 KiB chunks.
  static ManagerOptions fallback_options() {
    ManagerOptions o;
    o.mode = TransportMode::kFallback;
    o.stream_host.clear();
    o.stream_min_bytes = 0;  // CAF chunks only: no stream threads
    o.fallback_chunk_bytes = 4096;
    o.fallback_window = 4;
    o.inline_poll = std::chrono::microseconds(0);
    o.name = "manager-under-test";
    return o;
  }

  /// Spawns the manager under test and runs its start; ASSERT_NO_FATAL_FAILURE it.
  void start_manager(ManagerOptions o = fallback_options()) {
    auto m = spawn_manager(sys_, std::move(o));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    manager_ = *m;
    run_jobs();
  }

  const rdma_manager_actor& manager() const { return manager_; }

  /// Spawns a second manager on the peer's node (a real owner for the manager under test, e.g.
  /// on a fake fabric: tests/actors/fake_nic.h), ended at teardown; a null handle and a failed
  /// test when it cannot start.
  rdma_manager_actor start_peer_manager(ManagerOptions o) {
    auto m = spawn_manager(peer_sys_, std::move(o));
    if (!m.ok()) {
      ADD_FAILURE() << m.error().to_string();
      return {};
    }
    others_.push_back(caf::actor_cast<caf::actor>(*m));
    run_jobs();
    return *m;
  }

  /// The manager's facade (what peers know it by), learned from a handle it issued.
  const caf::actor& facade() const { return facade_; }

  FakePeer& add_peer(std::vector<uint8_t> memory, std::string name = "fake-peer") {
    peers_.push_back(std::make_unique<FakePeer>(peer_sys_, std::move(memory), std::move(name)));
    run_jobs();
    return *peers_.back();
  }

  caf::scoped_actor& self() { return *self_; }
  caf::actor_system& sys() { return sys_; }
  caf::actor_system& peer_sys() { return peer_sys_; }

  // -- driving -------------------------------------------------------------------------------

  /// Handles every message that can be handled now, on both nodes; the clock stands still.
  size_t run_jobs() {
    size_t n = 0;
    while (sched_.has_job() || peer_sched_.has_job()) {
      while (sched_.try_run_once())
        ++n;
      while (peer_sched_.try_run_once())
        ++n;
    }
    return n;
  }

  /// run_jobs, except the manager's own: what reaches it waits in its mailbox (its facade and
  /// everything else run).
  size_t run_jobs_holding_manager() {
    auto* held = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(manager_));
    auto others = [held](caf::resumable* r) { return r != held; };
    size_t n = 0;
    for (size_t k = 1; k > 0; n += k)
      k = sched_.run_jobs_filtered(others) + peer_sched_.run_jobs_filtered(others);
    return n;
  }
  /// advance, holding the manager (run_jobs_holding_manager).
  void advance_holding_manager(caf::timespan d) {
    sched_.advance_time(d);
    peer_sched_.advance_time(d);
    run_jobs_holding_manager();
  }

  /// Handles one message (node A's first); false when none is waiting.
  bool step() { return sched_.try_run_once() || peer_sched_.try_run_once(); }

  /// Moves both clocks by `d`; the timers due by then fire and their messages are handled.
  void advance(caf::timespan d) {
    sched_.advance_time(d);
    peer_sched_.advance_time(d);
    run_jobs();
  }

  /// Fires the earliest pending timer (the clock jumps to it); false when there is none.
  bool next_timeout() {
    if (!sched_.has_pending_timeout())
      return false;
    sched_.trigger_timeout();
    sync_peer_clock();
    run_jobs();
    return true;
  }

  /// Broker's loop: jobs and every timer, until nothing is left (at most `limit` timers).
  void run(size_t limit = 1000) {
    run_jobs();
    for (size_t i = 0; sched_.has_pending_timeout() || peer_sched_.has_pending_timeout(); ++i) {
      ASSERT_LT(i, limit) << "timers keep coming: the manager re-arms one without end";
      if (sched_.has_pending_timeout())
        sched_.trigger_timeout();
      else
        peer_sched_.trigger_timeout();
      sync_peer_clock();
      run_jobs();
    }
  }

  /// The manager's clock.
  caf::actor_clock::time_point now() { return sched_.clock().now(); }

  // -- the application's requests ------------------------------------------------------------

  /// Sends `xs...` to `dest` as a request of the application, with no CAF timeout, and handles
  /// what can be handled.
  template <class T, class Dest, class... Ts>
  Pending<T> ask(const Dest& dest, Ts&&... xs) {
    return ask_as<T>(self(), dest, std::forward<Ts>(xs)...);
  }
  /// The same from `who` (e.g. a scoped actor of the peer's node).
  template <class T, class Dest, class... Ts>
  Pending<T> ask_as(caf::scoped_actor& who, const Dest& dest, Ts&&... xs) {
    auto h = who->request(dest, caf::infinite, std::forward<Ts>(xs)...);
    run_jobs();
    return Pending<T>{h.id()};
  }

  /// The answer to `p` if it came (taken out of the mailbox: a second call says nothing came).
  template <class T>
  std::optional<caf::expected<T>> reply(Pending<T>& p) {
    return reply_to(self(), p);
  }
  /// The answer to `who`'s request `p` if it came.
  template <class T>
  std::optional<caf::expected<T>> reply_to(caf::scoped_actor& who, Pending<T>& p) {
    std::optional<caf::expected<T>> out;
    if (p.taken)
      return out;
    caf::blocking_actor::accept_one_cond rc;
    who->varargs_receive(
        rc, p.id, [&](T& x) { out = std::move(x); }, [&](caf::error& e) { out = std::move(e); },
        caf::after(std::chrono::seconds(0)) >> [] {});
    p.taken = out.has_value();
    return out;
  }

  /// Whether the first message in the application's mailbox is the answer to `p` (answers
  /// arrive in the order the manager gave them).
  template <class T>
  bool answered_first(const Pending<T>& p) {
    const caf::mailbox_element* e = self()->peek_at_next_mailbox_element();
    return e != nullptr && e->mid == p.id;
  }

  /// Whether nothing is in the application's mailbox (no answer nobody asked for, no second
  /// reply).
  bool quiet() { return self()->mailbox().empty(); }

  /// The answer to a request answered at once (after run_jobs), or a failed test.
  template <class T, class Dest, class... Ts>
  caf::expected<T> call(const Dest& dest, Ts&&... xs) {
    auto p = ask<T>(dest, std::forward<Ts>(xs)...);
    auto r = reply(p);
    if (!r) {
      ADD_FAILURE() << "no answer without waiting";
      return caf::make_error(caf::sec::request_timeout, "no answer");
    }
    return std::move(*r);
  }

  /// Registers `mem` with the manager (read-write); on failure the test fails and the handle is
  /// empty.
  BufferHandle register_buffer(std::vector<uint8_t>& mem) {
    auto h = call<BufferHandle>(manager_, request_buffer_atom::value,
                                reinterpret_cast<uint64_t>(mem.data()), uint64_t{mem.size()},
                                static_cast<uint8_t>(BufferAccess::kReadWrite));
    if (!h) {
      ADD_FAILURE() << "request_buffer: " << error_message(h.error());
      return {};
    }
    facade_ = h->owner;
    return *h;
  }

  /// Spawns an actor on the peer's node (another node id) that the fixture ends at teardown.
  template <class F, class... Ts>
  caf::actor spawn_on_peer_node(F f, Ts&&... xs) {
    others_.push_back(peer_sys_.spawn(f, std::forward<Ts>(xs)...));
    run_jobs();
    return others_.back();
  }

private:
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    add_message_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    return cfg;
  }

  /// The peer's node gets a node id of its own from a middleman (a manager's system without
  /// one has the invalid node id): its actors are "another node" for the manager. The testing
  /// network backend with manual multiplexing: no thread, no socket.
  static caf::actor_system_config& configure_peer(caf::actor_system_config& cfg) {
    configure(cfg);
    cfg.load<caf::io::middleman>();
    cfg.set("middleman.network-backend", caf::atom("testing"));
    cfg.set("middleman.manual-multiplexing", true);
    cfg.set("middleman.heartbeat-interval", caf::timespan{0});
    cfg.set("middleman.workers", size_t{0});
    return cfg;
  }

  void sync_peer_clock() {
    auto t = std::max(sched_.clock().current_time, peer_sched_.clock().current_time);
    sched_.clock().current_time = t;
    peer_sched_.clock().current_time = t;
  }

  /// At teardown: every job and timer, each actor ended (no actor re-arms anything any more).
  void settle() {
    run_jobs();
    while (sched_.has_pending_timeout() || peer_sched_.has_pending_timeout()) {
      sched_.trigger_timeouts();
      peer_sched_.trigger_timeouts();
      run_jobs();
    }
  }

  caf::actor_system_config cfg_, peer_cfg_;
  caf::actor_system sys_, peer_sys_;
  caf::scheduler::test_coordinator& sched_;       ///< node A (the manager)
  caf::scheduler::test_coordinator& peer_sched_;  ///< node B (the fake peers)
  std::unique_ptr<caf::scoped_actor> self_;
  rdma_manager_actor manager_;
  caf::actor facade_;
  std::vector<std::unique_ptr<FakePeer>> peers_;
  std::vector<caf::actor> others_;
};

}  // namespace caf_rdma::testing
