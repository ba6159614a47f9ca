// Tests of ChunkPath (actors/transfer/chunk_path.h) on the deterministic fixture: each case names
// the invariant it checks (the manager's numbering, actors/detail/manager_state.h).
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

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
  EXPECT_RDMA_ERROR((*r), ErrorCode::kTimeout, "timed out");
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

// Invariant 10: a write whose deadline passes with store chunks on their way is answered only
// once each chunk was answered or its request timed out (deadline + backstop); a chunk that got
// no answer may still be applied, so the reply says the outcome is unknown (never timeout).
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
  EXPECT_RDMA_ERROR((*r), ErrorCode::kPeerUnavailable, "took effect is unknown",
                    "1 of its requests got no answer");
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

// Invariant 10, the other order: every chunk is answered (stored) after the deadline; the reply
// comes right after the last answer, not at the backstop, and says what happened: every byte
// was written.
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
  ASSERT_TRUE(*r) << "every chunk was stored, yet: " << error_message(r->error());
  EXPECT_EQ((*r)->bytes, 4 * kChunk);
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, 4 * kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

// Invariant 10: every store carries the time its write has left (rounded up); a write whose
// deadline passes sends no more chunks, and once its owner refused the late one (taken up past
// that time) and stored the others, it answers timeout saying how much was stored.
TEST_F(ManagerLogicTest, Inv10_StoresCarryTheTimeLeftAndALateRefusalGivesATrueTimeout) {
  SCOPED_TRACE("Invariant 10");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(6 * kChunk, 7);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(6 * kChunk, 0));
  auto p = transfer(make_write(local, peer.handle()), 100);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 4u) << "the window";
  for (size_t i : stores)
    EXPECT_EQ(peer.log().asked[i].left_ms, 100u);
  advance(std::chrono::milliseconds(30));
  peer.answer(stores[0]);
  run_jobs();
  stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 5u) << "the answer opened the window";
  EXPECT_EQ(peer.log().asked[stores[4]].left_ms, 70u);
  advance(std::chrono::microseconds(69500));  // 0.5 ms left: rounded up to 1
  peer.answer(stores[1]);
  run_jobs();
  stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 6u);
  EXPECT_EQ(peer.log().asked[stores[5]].left_ms, 1u);
  advance(std::chrono::milliseconds(1));  // past the deadline
  EXPECT_FALSE(reply(p)) << "answered with four chunks on their way";
  peer.answer(stores[2]);
  peer.answer(stores[3]);
  peer.fail(stores[4], make_rdma_error(ErrorCode::kTimeout, "taken up too late by the owner"));
  run_jobs();
  EXPECT_FALSE(reply(p)) << "answered with chunk 5 on its way";
  peer.answer(stores[5]);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply once every chunk was answered";
  EXPECT_RDMA_ERROR((*r), ErrorCode::kTimeout, "timed out after 100 ms",
                    "20480 of its 24576 bytes were stored, and none of the rest will be",
                    "taken up too late by the owner");
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, 4 * kChunk));
  EXPECT_TRUE(all_zero(peer.memory(), 4 * kChunk, kChunk));
  EXPECT_TRUE(same_bytes(peer.memory(), 5 * kChunk, mine, 5 * kChunk, kChunk));
  EXPECT_EQ(peer.log().of(store_atom::value).size(), 6u) << "a chunk was sent past the deadline";
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

// Invariant 10: an owner may refuse a chunk as late before the writer's own deadline (its
// max_timeout is shorter): the write sends no more, and once its other chunks were answered it
// answers timeout saying how many bytes were stored and why.
TEST_F(ManagerLogicTest, Inv10_AnOwnersEarlyLateRefusalSaysWhatWasStored) {
  SCOPED_TRACE("Invariant 10");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(6 * kChunk, 8);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(6 * kChunk, 0));
  auto p = transfer(make_write(local, peer.handle()), 100);
  auto stores = peer.log().of(store_atom::value);
  ASSERT_EQ(stores.size(), 4u);
  advance(std::chrono::milliseconds(50));
  peer.fail(stores[3], make_rdma_error(ErrorCode::kTimeout, "past the owner's max_timeout"));
  peer.answer(stores[0]);
  peer.answer(stores[1]);
  run_jobs();
  EXPECT_FALSE(reply(p)) << "answered with chunk 2 on its way";
  peer.answer(stores[2]);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply once every chunk sent was answered";
  EXPECT_RDMA_ERROR((*r), ErrorCode::kTimeout,
                    "12288 of its 24576 bytes were stored, and none of the rest will be",
                    "past the owner's max_timeout");
  EXPECT_EQ(peer.log().of(store_atom::value).size(), 4u) << "a chunk was sent after the refusal";
  EXPECT_TRUE(same_bytes(peer.memory(), 0, mine, 0, 3 * kChunk));
  EXPECT_TRUE(all_zero(peer.memory(), 3 * kChunk, 3 * kChunk));
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
}

// Invariants 10 and 14: a fallback atomic answered after its deadline was applied: its old value
// lands and the reply is success; one its owner refused as late answers timeout (not applied);
// one that got no answer answers that whether it was applied is unknown.
TEST_F(ManagerLogicTest, Inv10_AnAtomicPastItsDeadlineAnswersWhatItsOwnerDid) {
  SCOPED_TRACE("Invariants 10, 14");
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine(8, 0);
  BufferHandle local = register_buffer(mine);
  std::vector<uint8_t> word(16, 0);
  word[8] = 5;  // the word at offset 8 holds 5
  FakePeer& peer = add_peer(word);
  // Answered late: applied, and said so.
  auto a = transfer(make_fetch_add(local, peer.handle(), 8, 3), 100);
  auto asks = peer.log().of(atomic_atom::value);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(peer.log().asked[asks[0]].left_ms, 100u);
  advance(std::chrono::milliseconds(150));
  EXPECT_FALSE(reply(a)) << "answered while the atomic may still be applied";
  peer.answer(asks[0]);
  run_jobs();
  auto ra = reply(a);
  ASSERT_TRUE(ra);
  ASSERT_TRUE(*ra) << "applied, yet: " << error_message(ra->error());
  uint64_t old = 0, now_word = 0;
  std::memcpy(&old, mine.data(), 8);
  std::memcpy(&now_word, peer.memory().data() + 8, 8);
  EXPECT_EQ(old, 5u) << "the old value did not land";
  EXPECT_EQ(now_word, 8u);
  // Refused as late by its owner: timeout, not applied.
  auto b = transfer(make_fetch_add(local, peer.handle(), 8, 3), 100);
  asks = peer.log().of(atomic_atom::value, true);
  ASSERT_EQ(asks.size(), 1u);
  advance(std::chrono::milliseconds(150));
  peer.fail(asks[0], make_rdma_error(ErrorCode::kTimeout, "fetch_add taken up late; not applied"));
  run_jobs();
  auto rb = reply(b);
  ASSERT_TRUE(rb);
  EXPECT_RDMA_ERROR((*rb), ErrorCode::kTimeout, "timed out after 100 ms", "not applied");
  // No answer at all: unknown.
  auto c = transfer(make_fetch_add(local, peer.handle(), 8, 3), 100);
  ASSERT_EQ(peer.log().of(atomic_atom::value, true).size(), 1u);
  advance(std::chrono::milliseconds(100) + kBackstop - std::chrono::milliseconds(1));
  EXPECT_FALSE(reply(c)) << "answered before the atomic's request timed out";
  advance(std::chrono::milliseconds(2));
  auto rc = reply(c);
  ASSERT_TRUE(rc);
  EXPECT_RDMA_ERROR((*rc), ErrorCode::kPeerUnavailable, "took effect is unknown");
  ASSERT_NO_FATAL_FAILURE(run());
  EXPECT_TRUE(quiet()) << "a second reply";
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

// Invariant 25 (chunk_path.h invariant 2): reads waiting for an owner's fetch window are asked
// earliest deadline first, not in the order they came.
TEST_F(ManagerLogicTest, Inv25_ReadsWaitingForAWindowGoEarliestDeadlineFirst) {
  SCOPED_TRACE("Invariant 25");
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = kChunk;  // one fetch at a time to this owner
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(3 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(3 * kChunk, 6));
  auto part = [](uint64_t k) {
    return Range::of(kChunk).at_local(k * kChunk).at_remote(k * kChunk);
  };
  auto first = transfer(make_read(local, peer.handle(), part(0)), 10000);  // holds the window
  auto later = transfer(make_read(local, peer.handle(), part(1)), 9000);
  auto sooner = transfer(make_read(local, peer.handle(), part(2)), 5000);
  auto asked = peer.log().of(fetch_atom::value, true);
  ASSERT_EQ(asked.size(), 1u) << "more than the window asked";
  EXPECT_EQ(peer.log().asked[asked[0]].offset, 0u);
  for (uint64_t expected : {2 * kChunk, 1 * kChunk}) {
    peer.answer(asked[0]);
    run_jobs();
    asked = peer.log().of(fetch_atom::value, true);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(peer.log().asked[asked[0]].offset, expected) << "not the waiting read due soonest";
  }
  peer.answer(asked[0]);
  run_jobs();
  for (auto* p : {&first, &later, &sooner}) {
    auto r = reply(*p);
    ASSERT_TRUE(r);
    ASSERT_TRUE(*r) << error_message(r->error());
  }
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, 3 * kChunk));
}

// Invariant 25 with classes: a latency-class read waiting for the window goes before a bulk
// one due sooner, and background goes last though it is due soonest (aging is an hour here:
// the order must not depend on the machine's speed; class_queue_test checks aging).
TEST_F(ManagerLogicTest, Inv25_ReadsWaitingForAWindowGoByClassThenDeadline) {
  SCOPED_TRACE("Invariant 25");
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = kChunk;  // one fetch at a time to this owner
  o.priority_aging = std::chrono::hours(1);
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(4 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 7));
  auto part = [](uint64_t k, Priority p) {
    return Range::of(kChunk).at_local(k * kChunk).at_remote(k * kChunk).as(p);
  };
  auto first = transfer(make_read(local, peer.handle(), part(0, Priority::kBulk)), 10000);
  auto background = transfer(make_read(local, peer.handle(), part(1, Priority::kBackground)), 3000);
  auto bulk = transfer(make_read(local, peer.handle(), part(2, Priority::kBulk)), 5000);
  auto latency = transfer(make_read(local, peer.handle(), part(3, Priority::kLatency)), 9000);
  auto asked = peer.log().of(fetch_atom::value, true);
  ASSERT_EQ(asked.size(), 1u) << "more than the window asked";
  EXPECT_EQ(peer.log().asked[asked[0]].offset, 0u);
  for (uint64_t expected : {3 * kChunk, 2 * kChunk, 1 * kChunk}) {
    peer.answer(asked[0]);
    run_jobs();
    asked = peer.log().of(fetch_atom::value, true);
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(peer.log().asked[asked[0]].offset, expected) << "not the next by class, then due";
  }
  peer.answer(asked[0]);
  run_jobs();
  for (auto* p : {&first, &background, &bulk, &latency}) {
    auto r = reply(*p);
    ASSERT_TRUE(r);
    ASSERT_TRUE(*r) << error_message(r->error());
  }
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, 4 * kChunk));
}

// A priority class no release knows is refused, naming it; nothing moves.
TEST_F(ManagerLogicTest, AnOpOfAnUnknownPriorityClassIsRefused) {
  ASSERT_NO_FATAL_FAILURE(start_manager(fallback_options()));
  std::vector<uint8_t> mine(kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 8));
  TransferOp op = make_read(local, peer.handle(), Range::of(kChunk));
  op.priority = 9;
  auto asked = transfer(op, 5000);
  auto r = reply(asked);
  ASSERT_TRUE(r);
  ASSERT_FALSE(*r);
  EXPECT_NE(error_message(r->error()).find("priority class 9 is none of"), std::string::npos)
      << error_message(r->error());
  EXPECT_TRUE(peer.log().of(fetch_atom::value, true).empty()) << "a fetch was asked";
  EXPECT_TRUE(std::all_of(mine.begin(), mine.end(), [](uint8_t b) { return b == 0; }));
}

}  // namespace
}  // namespace caf_rdma::testing
