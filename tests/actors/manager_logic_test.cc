// The manager's logic on the deterministic fixture (tests/actors/deterministic_fixture.h): every
// order of replies, answers, deaths and timer expiries is written out in the test, and time is
// the test scheduler's clock. Each case names the invariant of actors/detail/manager_state.h it
// checks. Native only: the manager runs the fallback without a device and without the stream
// channel (nothing runs on another thread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/actors/deterministic_fixture.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kChunk = 4096;

/// The backstop CAF requests to peers get beyond a transfer's timeout (manager_state.h).
constexpr auto kBackstop = std::chrono::seconds(1);

class ManagerLogicTest : public DeterministicFixture {
protected:
  Pending<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms) {
    return ask<TransferReply>(manager(), transfer_atom::value, op, timeout_ms);
  }
  Pending<uint64_t> release(uint64_t id) {
    return ask<uint64_t>(manager(), release_buffer_atom::value, id);
  }
};

/// Whether [from, from + n) of `a` equals [at, at + n) of `b`.
bool same_bytes(const std::vector<uint8_t>& a, uint64_t from, const std::vector<uint8_t>& b,
                uint64_t at, uint64_t n) {
  return from + n <= a.size() && at + n <= b.size() &&
         std::memcmp(a.data() + from, b.data() + at, n) == 0;
}

bool all_zero(const std::vector<uint8_t>& a, uint64_t from, uint64_t n) {
  return std::all_of(a.begin() + static_cast<long>(from), a.begin() + static_cast<long>(from + n),
                     [](uint8_t b) { return b == 0; });
}

// -- timeouts (invariant 5) --------------------------------------------------------------------

// Invariant 5: a transfer whose owner never answers gets exactly one reply, the timeout, at its
// deadline: not a moment before, and no later than the deadline sweep's slack.
TEST_F(ManagerLogicTest, Inv5_AnUnansweredTransferTimesOutAtItsDeadlineWithOneReply) {
  SCOPED_TRACE("Invariant 5");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine(kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 3));
  const auto t0 = now();
  auto p = transfer(make_read(local, peer.handle()), 100);
  ASSERT_EQ(peer.log().of(fetch_atom::value).size(), 1u) << "the owner was asked";
  advance(std::chrono::milliseconds(99));
  EXPECT_FALSE(reply(p)) << "replied before its timeout";
  ASSERT_TRUE(next_timeout()) << "no timer for the deadline";
  EXPECT_GE(now() - t0, std::chrono::milliseconds(100));
  EXPECT_LE(now() - t0, std::chrono::milliseconds(100) + kDeadlineSlack);
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply at the deadline";
  EXPECT_DET_ERROR((*r), ErrorCode::kTimeout, "timed out after 100 ms", "fake-peer");
  // Every other timer (the requests' backstops) fires: nothing more comes.
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_FALSE(reply(p));
  EXPECT_TRUE(quiet()) << "a second reply";
  EXPECT_TRUE(all_zero(mine, 0, kChunk)) << "a timed-out read wrote into the buffer";
}

// Invariants 5 and 10: an owner's answer that arrives after its read timed out is dropped: no
// second reply, not a byte of it in the buffer; and it still closes the requester's window to
// that owner (invariant 12), so the next read is served at once.
TEST_F(ManagerLogicTest, Inv10_ALateAnswerAfterTheTimeoutIsDropped) {
  SCOPED_TRACE("Invariants 5, 10 (a failed read drops late data) and 12");
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = kChunk;  // one fetch at a time to this owner
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 4));
  auto p = transfer(make_read(local, peer.handle()), 100);
  advance(std::chrono::milliseconds(101));
  auto r = reply(p);
  ASSERT_TRUE(r);
  EXPECT_DET_ERROR((*r), ErrorCode::kTimeout, "timed out");
  // Late, but before the request's own backstop: the facade hands it to the manager.
  peer.answer(peer.log().of(fetch_atom::value).at(0));
  run_jobs();
  EXPECT_FALSE(reply(p));
  EXPECT_TRUE(quiet()) << "a second reply";
  EXPECT_TRUE(all_zero(mine, 0, kChunk)) << "late data of a timed-out read landed";
  // The window it held is open again: a new read is asked at once and served.
  auto again = transfer(make_read(local, peer.handle()), 100);
  auto open = peer.log().of(fetch_atom::value, true);
  ASSERT_EQ(open.size(), 1u) << "the late answer did not release the requester's window";
  peer.answer(open[0]);
  run_jobs();
  auto r2 = reply(again);
  ASSERT_TRUE(r2);
  ASSERT_TRUE(*r2) << error_message(r2->error());
  EXPECT_EQ((*r2)->bytes, kChunk);
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, kChunk));
}

// -- fallback writes that time out (invariant 10) ----------------------------------------------

// Invariant 10: a write that times out with store chunks on their way is answered only once
// each chunk was answered or its request timed out (deadline + backstop), so the owner applies
// none of them after the reply.
TEST_F(ManagerLogicTest, Inv10_ATimedOutWriteWaitsForEveryStoreChunkOrItsBackstop) {
  SCOPED_TRACE("Invariant 10");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(4 * kChunk, 5);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 0));
  const auto t0 = now();
  auto p = transfer(make_write(local, peer.handle()), 100);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 4u) << "four chunks (the window) on their way";
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(peer.log().asked[stores[i]].offset, i * kChunk);
    EXPECT_TRUE(same_bytes(peer.log().asked[stores[i]].bytes, 0, mine, i * kChunk, kChunk))
        << "chunk " << i << " carries other bytes";
  }
  peer.answer(stores[0]);
  run_jobs();
  advance(std::chrono::milliseconds(101));  // past the deadline
  EXPECT_FALSE(reply(p)) << "answered while chunks 1..3 may still be applied";
  peer.answer(stores[1]);
  peer.answer(stores[2]);
  run_jobs();
  EXPECT_FALSE(reply(p)) << "answered while chunk 3 may still be applied";
  // Chunk 3 is never answered: its request ends at the deadline plus the backstop.
  advance(std::chrono::milliseconds(100) + kBackstop - (now() - t0) - std::chrono::milliseconds(1));
  EXPECT_FALSE(reply(p)) << "answered before chunk 3's request timed out";
  advance(std::chrono::milliseconds(2));
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply once every chunk was answered or timed out";
  EXPECT_DET_ERROR((*r), ErrorCode::kTimeout, "timed out after 100 ms");
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, 3 * kChunk)) << "chunks 0..2 were applied";
  EXPECT_TRUE(all_zero(peer.memory(), 3 * kChunk, kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
  // The facade took CAF's timeout of chunk 3's request as one (its deadline, on the same clock),
  // not as a forged answer.
  auto stats = call<ManagerStats>(manager(), stats_atom::value);
  ASSERT_TRUE(stats) << error_message(stats.error());
  EXPECT_EQ(stats->forged_answers, 0u);
}

// Invariant 10, the other order: every chunk is answered after the deadline; the reply (the
// timeout) comes right after the last answer, not at the backstop, and with it every chunk the
// owner applied.
TEST_F(ManagerLogicTest, Inv10_ATimedOutWriteRepliesRightAfterItsLastChunkIsAnswered) {
  SCOPED_TRACE("Invariant 10");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(4 * kChunk, 6);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 0));
  const auto t0 = now();
  auto p = transfer(make_write(local, peer.handle()), 100);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 4u);
  advance(std::chrono::milliseconds(101));
  for (size_t i : {3, 1, 0}) {  // in any order
    peer.answer(stores[i]);
    run_jobs();
    EXPECT_FALSE(reply(p)) << "answered with a chunk still on its way (after chunk " << i << ")";
  }
  peer.answer(stores[2]);
  run_jobs();
  EXPECT_LT(now() - t0, std::chrono::milliseconds(100) + kBackstop);
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply after the last chunk's answer";
  EXPECT_DET_ERROR((*r), ErrorCode::kTimeout, "timed out after 100 ms");
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, 4 * kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

// -- releases (invariants 1 and 2) -------------------------------------------------------------

// Invariant 2: a buffer released while a transfer uses it is refused to new transfers at once,
// and its release is answered only after that transfer's reply (message by message).
TEST_F(ManagerLogicTest, Inv2_AReleaseWaitsForTheTransferInFlightAndRefusesNewOnes) {
  SCOPED_TRACE("Invariant 2");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(kChunk, 9);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 0));
  auto write = transfer(make_write(local, peer.handle()), 1000);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 1u);
  auto rel = release(local.id);
  EXPECT_FALSE(reply(rel)) << "released while a transfer still uses the buffer";
  auto refused = transfer(make_write(local, peer.handle()), 1000);
  auto r0 = reply(refused);
  ASSERT_TRUE(r0) << "a new transfer on a released buffer waits instead of being refused";
  EXPECT_DET_ERROR((*r0), ErrorCode::kReleased, "was released");
  EXPECT_EQ(peer.log().of(store_atom::value).size(), 1u) << "the refused transfer reached the peer";
  peer.answer(stores[0]);
  run_jobs();
  EXPECT_TRUE(answered_first(write)) << "the release was answered before the transfer that used "
                                        "the buffer (or nothing was answered)";
  auto w = reply(write);
  auto released = reply(rel);
  ASSERT_TRUE(w && released) << "the transfer ended, but not both were answered";
  ASSERT_TRUE(*w) << error_message(w->error());
  EXPECT_EQ((*w)->bytes, kChunk);
  ASSERT_TRUE(*released) << error_message(released->error());
  EXPECT_EQ(**released, kChunk);
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, kChunk));
  EXPECT_TRUE(quiet());
}

// Invariant 1: a released id stays known as released (refused by transfers and by a second
// release) and no later buffer gets it.
TEST_F(ManagerLogicTest, Inv1_AReleasedIdIsRefusedAndNeverReused) {
  SCOPED_TRACE("Invariant 1");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 1), b(kChunk, 0), c(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  auto r = release(ha.id);
  auto ra = reply(r);
  ASSERT_TRUE(ra && *ra) << "an idle buffer's release is answered at once";
  EXPECT_EQ(**ra, kChunk);
  auto again = release(ha.id);
  auto r2 = reply(again);
  ASSERT_TRUE(r2);
  EXPECT_DET_ERROR((*r2), ErrorCode::kReleased, "was released");
  auto t = transfer(make_write(ha, hb), 100);
  auto rt = reply(t);
  ASSERT_TRUE(rt);
  EXPECT_DET_ERROR((*rt), ErrorCode::kReleased, "was released");
  auto t2 = transfer(make_write(hb, ha), 100);  // as the remote side too
  auto rt2 = reply(t2);
  ASSERT_TRUE(rt2);
  EXPECT_DET_ERROR((*rt2), ErrorCode::kReleased, "was released");
  EXPECT_TRUE(all_zero(b, 0, kChunk));
  BufferHandle hc = register_buffer(c);
  EXPECT_NE(hc.id, ha.id);
  EXPECT_GT(hc.id, hb.id) << "ids are not handed out in order: a released one may come back";
  EXPECT_TRUE(quiet());
}

// -- a peer that goes down (invariant 13, ask_peer) --------------------------------------------

// Invariant 13 (and ask_peer's promise): when the peer's actor ends, every op and question on
// its way to it fails at once with peer_unavailable, before any clock moves; later ops to it
// fail at once too.
TEST_F(ManagerLogicTest, Inv13_APeerThatGoesDownFailsEverythingInFlightAtOnce) {
  SCOPED_TRACE("Invariant 13");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> in(kChunk, 0), out = patterned(kChunk, 7);
  BufferHandle hin = register_buffer(in);
  BufferHandle hout = register_buffer(out);
  FakePeer& peer = add_peer(patterned(kChunk, 8));
  const auto t0 = now();
  auto read = transfer(make_read(hin, peer.handle()), 10000);
  auto write = transfer(make_write(hout, peer.handle()), 10000);
  auto check = ask<TransferOutcome>(manager(), ask_check_atom::value, peer.handle(), uint64_t{0},
                                    uint64_t{kChunk}, static_cast<uint8_t>(TransferKind::kRead));
  ASSERT_EQ(peer.log().of(fetch_atom::value).size(), 1u);
  ASSERT_EQ(peer.log().of(store_atom::value).size(), 1u);
  ASSERT_EQ(peer.log().of(buf_check_atom::value).size(), 1u);
  EXPECT_FALSE(reply(read) || reply(write) || reply(check));
  peer.kill();
  run_jobs();
  EXPECT_EQ(now(), t0) << "the clock moved";
  auto rr = reply(read);
  auto rw = reply(write);
  auto rc = reply(check);
  ASSERT_TRUE(rr && rw && rc) << "an op or question waits for its timeout instead";
  EXPECT_DET_ERROR((*rr), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  EXPECT_DET_ERROR((*rw), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  EXPECT_DET_ERROR((*rc), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  // Down for good: the next op fails at once.
  auto later = transfer(make_read(hin, peer.handle()), 10000);
  auto rl = reply(later);
  ASSERT_TRUE(rl);
  EXPECT_DET_ERROR((*rl), ErrorCode::kPeerUnavailable, "fake-peer", "down");
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
  EXPECT_TRUE(all_zero(in, 0, kChunk));
  // The buffers are free again: their releases are answered at once.
  auto rel = release(hout.id);
  auto rr2 = reply(rel);
  ASSERT_TRUE(rr2 && *rr2) << "a failed op still holds its buffer";
}

// -- fetch windows (invariant 12) --------------------------------------------------------------

class WindowTest : public ManagerLogicTest {
protected:
  void start(std::chrono::milliseconds window_wait) {
    ManagerOptions o = fallback_options();
    o.peer_window_bytes = 2 * kChunk;
    o.window_wait = window_wait;
    ASSERT_NO_FATAL_FAILURE(start_manager(o));
    mine_ = patterned(4 * kChunk, 11);
    handle_ = register_buffer(mine_);
  }
  /// The peer node asks for chunks 0, 1 and 2 of our buffer: two fill its window.
  void ask_three(FakePeer& peer) {
    for (uint64_t i = 0; i < 3; ++i)
      peer.fetch(i, facade(), ref_of(handle_), i * kChunk, kChunk);
    run_jobs();
  }
  void expect_served(FakePeer& peer, uint64_t tag) {
    auto it = peer.log().fetched.find(tag);
    ASSERT_NE(it, peer.log().fetched.end()) << "fetch " << tag << " not answered";
    ASSERT_TRUE(it->second.ok) << error_message(it->second.error);
    EXPECT_TRUE(same_bytes(it->second.bytes, 0, mine_, tag * kChunk, kChunk))
        << "fetch " << tag << " carries other bytes";
  }
  std::vector<uint8_t> mine_;
  BufferHandle handle_;
};

// Invariant 12: as owner, a fetch beyond the peer node's window waits, and is served as soon as
// the peer proves it read earlier answers (it echoes a read_ack).
TEST_F(WindowTest, Inv12_AFetchBeyondThePeerWindowIsServedWhenTheWindowOpens) {
  SCOPED_TRACE("Invariant 12");
  ASSERT_NO_FATAL_FAILURE(start(std::chrono::milliseconds(500)));
  FakePeer& peer = add_peer({}, "peer-node");
  ask_three(peer);
  expect_served(peer, 0);
  expect_served(peer, 1);
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "served beyond the window";
  auto acks = peer.log().of(read_ack_atom::value);
  ASSERT_FALSE(acks.empty()) << "the owner never asked for proof";
  advance(std::chrono::milliseconds(100));
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "the window opened without proof";
  peer.answer(acks[0]);  // the first read_ack proves the first answer was read
  run_jobs();
  expect_served(peer, 2);
}

// Invariant 12: a fetch waiting for its window fails at window_wait with resource_exhausted
// naming the peer and the window; not before.
TEST_F(WindowTest, Inv12_AFetchWaitingForItsWindowFailsAtWindowWait) {
  SCOPED_TRACE("Invariant 12");
  ASSERT_NO_FATAL_FAILURE(start(std::chrono::milliseconds(500)));
  FakePeer& peer = add_peer({}, "peer-node");
  ask_three(peer);
  expect_served(peer, 0);
  expect_served(peer, 1);
  advance(std::chrono::milliseconds(499));
  EXPECT_EQ(peer.log().fetched.count(2), 0u) << "the waiting fetch ended before window_wait";
  advance(std::chrono::milliseconds(2));
  auto it = peer.log().fetched.find(2);
  ASSERT_NE(it, peer.log().fetched.end()) << "the waiting fetch outlived window_wait";
  EXPECT_FALSE(it->second.ok);
  EXPECT_EQ(error_code(it->second.error), ErrorCode::kResourceExhausted)
      << error_message(it->second.error);
  EXPECT_NE(error_message(it->second.error).find("has not proven it read"), std::string::npos)
      << error_message(it->second.error);
  EXPECT_NE(error_message(it->second.error).find("peer_window_bytes"), std::string::npos);
}

// Invariant 12, requester side: the fetches asked of one owner and not yet answered stay within
// peer_window_bytes (more wait here and are asked as answers come), and every chunk lands.
TEST_F(ManagerLogicTest, Inv12_ARequesterKeepsItsFetchesToOneOwnerWithinItsWindow) {
  SCOPED_TRACE("Invariant 12");
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = 2 * kChunk;
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(4 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 12));
  auto p = transfer(make_read(local, peer.handle()), 1000);
  for (size_t asked = 2; asked <= 4; ++asked) {
    auto open = peer.log().of(fetch_atom::value, true);
    ASSERT_EQ(open.size(), 2u) << "not two fetches on their way (window of two chunks)";
    ASSERT_EQ(peer.log().of(fetch_atom::value).size(), asked);
    peer.answer(open[0]);
    run_jobs();
  }
  for (size_t i : peer.log().of(fetch_atom::value, true))
    peer.answer(i);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r && *r) << (r ? error_message(r->error()) : "no reply");
  EXPECT_EQ((*r)->bytes, 4 * kChunk);
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, 4 * kChunk));
}

// -- who may ask (invariant 6) -----------------------------------------------------------------

// Invariant 6: requests that act on this node's memory are served only for this node's actors:
// from an actor of another node they are refused, sent to the manager or to its facade, and
// change nothing.
TEST_F(ManagerLogicTest, Inv6_RequestsOnThisNodesMemoryFromAnotherNodeAreRefused) {
  SCOPED_TRACE("Invariant 6");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 13), b(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  caf::scoped_actor stranger{peer_sys(), true};
  const auto addr = reinterpret_cast<uint64_t>(b.data());
  auto direct_buf = ask_as<BufferHandle>(stranger, manager(), request_buffer_atom::value, addr,
                                         uint64_t{kChunk}, uint8_t{1});
  auto direct_transfer = ask_as<TransferReply>(stranger, manager(), transfer_atom::value,
                                               make_write(ha, hb), uint32_t{100});
  auto direct_release = ask_as<uint64_t>(stranger, manager(), release_buffer_atom::value, ha.id);
  auto via_facade = ask_as<BufferHandle>(stranger, facade(), request_buffer_atom::value, addr,
                                         uint64_t{kChunk}, uint8_t{1});
  auto r1 = reply_to(stranger, direct_buf);
  auto r2 = reply_to(stranger, direct_transfer);
  auto r3 = reply_to(stranger, direct_release);
  ASSERT_TRUE(r1 && r2 && r3) << "a refusal must come at once";
  EXPECT_DET_ERROR((*r1), ErrorCode::kPermissionDenied, "request_buffer", "own node");
  EXPECT_DET_ERROR((*r2), ErrorCode::kPermissionDenied, "transfer", "own node");
  EXPECT_DET_ERROR((*r3), ErrorCode::kPermissionDenied, "release_buffer", "own node");
  auto r4 = reply_to(stranger, via_facade);
  ASSERT_TRUE(r4);
  EXPECT_DET_ERROR((*r4), ErrorCode::kPermissionDenied, "request_buffer", "own node");
  EXPECT_TRUE(all_zero(b, 0, kChunk)) << "a refused transfer moved bytes";
  // Nothing changed: the buffer is still registered, and this node's own actor may use it.
  auto mine = transfer(make_write(ha, hb), 100);
  auto r5 = reply(mine);
  ASSERT_TRUE(r5 && *r5) << (r5 ? error_message(r5->error()) : "no reply");
  EXPECT_TRUE(same_bytes(b, 0, a, 0, kChunk));
}

// -- path choice (the reply names the path; invariant 5) ---------------------------------------

// Invariant 5 (one reply, naming its path), path choice: both buffers this manager's: the
// owner's own copy, without any message to a peer and without the clock moving; overlapping
// ranges of one buffer move as memmove does.
TEST_F(ManagerLogicTest, Inv5_LocalBuffersAreCopiedByTheOwnerWithoutAnyPeer) {
  SCOPED_TRACE("Invariant 5 (path choice)");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(2 * kChunk, 14), b(2 * kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  FakePeer& bystander = add_peer(patterned(kChunk, 15));
  const auto t0 = now();
  auto w = transfer(make_write(ha, hb, 5000, /*local_offset=*/3, /*remote_offset=*/7), 100);
  auto rw = reply(w);
  ASSERT_TRUE(rw && *rw) << (rw ? error_message(rw->error()) : "no reply without the clock");
  EXPECT_EQ((*rw)->path, kPathFallback);
  EXPECT_EQ((*rw)->bytes, 5000u);
  EXPECT_TRUE(all_zero(b, 0, 7));
  EXPECT_TRUE(same_bytes(b, 7, a, 3, 5000));
  EXPECT_TRUE(all_zero(b, 5007, b.size() - 5007));
  // One buffer, overlapping ranges: [0, 6000) onto [100, 6100).
  const std::vector<uint8_t> before = a;
  auto m = transfer(make_write(ha, ha, 6000, 0, 100), 100);
  auto rm = reply(m);
  ASSERT_TRUE(rm && *rm) << (rm ? error_message(rm->error()) : "no reply");
  EXPECT_EQ((*rm)->path, kPathFallback);
  EXPECT_TRUE(same_bytes(a, 100, before, 0, 6000)) << "overlapping copy not as memmove";
  EXPECT_TRUE(same_bytes(a, 0, before, 0, 100));
  EXPECT_EQ(now(), t0);
  EXPECT_TRUE(bystander.log().asked.empty()) << "a local copy sent a peer message";
  EXPECT_TRUE(quiet());
}

// Invariant 5 (one reply, naming its path), path choice: a remote buffer without a device
// moves through its owner in CAF chunks of fallback_chunk_bytes, each asked at its offset with
// the handle's id and secret; answers in any order land at their offsets.
TEST_F(ManagerLogicTest, Inv5_RemoteBuffersWithoutADeviceMoveInChunksThroughTheirOwner) {
  SCOPED_TRACE("Invariant 5 (path choice)");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  constexpr uint64_t kLen = 2 * kChunk + 1808, kLocalOff = 50, kRemoteOff = 100;
  std::vector<uint8_t> mine(3 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(3 * kChunk, 16));
  auto p = transfer(make_read(local, peer.handle(), kLen, kLocalOff, kRemoteOff), 1000);
  auto fetches = peer.log().of(fetch_atom::value);
  ASSERT_EQ(fetches.size(), 3u);
  const BufferHandle theirs = peer.handle();
  for (size_t i = 0; i < 3; ++i) {
    const PeerAsk& a = peer.log().asked[fetches[i]];
    EXPECT_EQ(a.ref.id, kFakeBufferId);
    EXPECT_TRUE(a.ref.secret_hi == theirs.secret_hi && a.ref.secret_lo == theirs.secret_lo)
        << "the fetch does not carry the handle's secret";
    EXPECT_EQ(a.offset, kRemoteOff + i * kChunk);
    EXPECT_EQ(a.length, i < 2 ? kChunk : 1808u);
  }
  for (size_t i : {2, 0, 1}) {
    EXPECT_FALSE(reply(p)) << "replied before every chunk landed";
    peer.answer(fetches[i]);
    run_jobs();
  }
  auto r = reply(p);
  ASSERT_TRUE(r && *r) << (r ? error_message(r->error()) : "no reply");
  EXPECT_EQ((*r)->path, kPathFallback);
  EXPECT_EQ((*r)->bytes, kLen);
  EXPECT_TRUE(all_zero(mine, 0, kLocalOff));
  EXPECT_TRUE(same_bytes(mine, kLocalOff, peer.memory(), kRemoteOff, kLen));
  EXPECT_TRUE(all_zero(mine, kLocalOff + kLen, mine.size() - kLocalOff - kLen));
  EXPECT_TRUE(quiet());
}

// Invariant 5: a batch gets one reply, at its deadline, with an outcome per op: the op that
// completed keeps its success, the one whose owner never answered times out.
TEST_F(ManagerLogicTest, Inv5_ABatchGetsOneReplyWithAnOutcomePerOp) {
  SCOPED_TRACE("Invariant 5");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> a = patterned(kChunk, 17), b(kChunk, 0), c(kChunk, 0);
  BufferHandle ha = register_buffer(a);
  BufferHandle hb = register_buffer(b);
  BufferHandle hc = register_buffer(c);
  FakePeer& peer = add_peer(patterned(kChunk, 18));
  auto p = ask<std::vector<TransferOutcome>>(
      manager(), batch_atom::value,
      std::vector<TransferOp>{make_write(ha, hb), make_read(hc, peer.handle())}, uint32_t{100});
  EXPECT_TRUE(same_bytes(b, 0, a, 0, kChunk)) << "the local op did not run at once";
  EXPECT_FALSE(reply(p)) << "replied with an op still open";
  advance(std::chrono::milliseconds(99));
  EXPECT_FALSE(reply(p));
  advance(std::chrono::milliseconds(2));
  auto r = reply(p);
  ASSERT_TRUE(r && *r) << "no single reply at the deadline";
  ASSERT_EQ((*r)->size(), 2u);
  EXPECT_TRUE((**r)[0].ok()) << (**r)[0].message;
  EXPECT_EQ((**r)[0].path, kPathFallback);
  EXPECT_EQ((**r)[0].bytes, kChunk);
  EXPECT_EQ((**r)[1].code, static_cast<uint8_t>(ErrorCode::kTimeout)) << (**r)[1].message;
  EXPECT_TRUE(all_zero(c, 0, kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

}  // namespace
}  // namespace caf_rdma::testing
