// Tests of packed fallback requests (actors/transfer/chunk_path.h invariant 5; the owner's side:
// BufferTable::owner_ranges, fetch_list and store_list) on the deterministic fixture: the small
// ops of one batch leave in one message, each op keeps its own answer, and an owner checks every
// range before it moves a byte.
#include <gtest/gtest.h>

#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

using Outcomes = std::vector<TransferOutcome>;

constexpr uint64_t kSmall = 700;  // five fit a chunk (kChunk), six do not

class ChunkPacksTest : public ManagerLogicTest {
protected:
  Pending<Outcomes> batch(const std::vector<TransferOp>& ops, uint32_t timeout_ms) {
    return ask<Outcomes>(manager(), batch_atom::value, ops, timeout_ms);
  }
  ManagerStats stats() {
    auto p = ask<ManagerStats>(manager(), stats_atom::value);
    auto r = reply(p);
    if (!r || !*r) {
      ADD_FAILURE() << "no stats";
      return {};
    }
    return **r;
  }
  /// Every outcome a success.
  static void expect_all_ok(const caf::expected<Outcomes>& got, size_t n) {
    ASSERT_TRUE(got) << error_message(got.error());
    ASSERT_EQ(got->size(), n);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ((*got)[i].code, 0u) << "op " << i << ": " << (*got)[i].message;
  }
};

// The small reads of one batch to one owner's buffer leave as one packed fetch whose ranges are
// theirs in batch order, and its answer lands each op's bytes at its own local offset. The op
// that would overfill the pack leaves alone as a plain fetch; an op of a chunk or more leaves in
// chunks of its own.
TEST_F(ChunkPacksTest, TheSmallReadsOfABatchLeaveAsOnePackedFetch) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine(6 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(6 * kChunk, 21));
  const uint64_t remote_at[] = {3000, 100, 9000, 5000, 12000, 20000};
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 6; ++i)
    ops.push_back(make_read(local, peer.handle(), kSmall, i * 1000, remote_at[i]));
  ops.push_back(make_read(local, peer.handle(), 2 * kChunk, 2 * kChunk, 13000));  // its own
  auto p = batch(ops, 1000);
  auto packs = peer.log().of(fetch_list_atom::value);
  ASSERT_EQ(packs.size(), 1u) << "not one packed fetch for the five small reads that fit";
  const PeerAsk& pack = peer.log().asked[packs[0]];
  ASSERT_EQ(pack.ranges.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(pack.ranges[i].offset, remote_at[i]) << "range " << i;
    EXPECT_EQ(pack.ranges[i].length, kSmall) << "range " << i;
  }
  const BufferHandle theirs = peer.handle();
  EXPECT_TRUE(pack.ref.id == theirs.id && pack.ref.secret_hi == theirs.secret_hi &&
              pack.ref.secret_lo == theirs.secret_lo)
      << "the pack does not name the handle's buffer and secret";
  auto plain = peer.log().of(fetch_atom::value);
  ASSERT_EQ(plain.size(), 3u) << "the sixth small read and the big read's two chunks";
  for (size_t i : peer.log().of(fetch_atom::value, true))
    peer.answer(i);
  run_jobs();
  EXPECT_FALSE(reply(p)) << "answered before the pack's answer came";
  peer.answer(packs[0]);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r) << "no reply";
  ASSERT_NO_FATAL_FAILURE(expect_all_ok(*r, ops.size()));
  for (uint64_t i = 0; i < 6; ++i)
    EXPECT_TRUE(same_bytes(mine, i * 1000, peer.memory(), remote_at[i], kSmall)) << "read " << i;
  for (uint64_t i = 0; i < 6; ++i)
    EXPECT_TRUE(all_zero(mine, i * 1000 + kSmall, 300)) << "bytes after read " << i;
  EXPECT_TRUE(same_bytes(mine, 2 * kChunk, peer.memory(), 13000, 2 * kChunk));
  EXPECT_TRUE(all_zero(mine, 4 * kChunk, 2 * kChunk));
  const ManagerStats s = stats();
  EXPECT_EQ(s.packed_chunks, 1u);
  EXPECT_EQ(s.packed_ops, 5u);
  EXPECT_TRUE(quiet());
}

// Small writes of one batch leave as one packed store carrying their bytes side by side. Its
// owner's refusal fails each of them with that refusal, saying nothing of it was stored; a
// pack answered well completes each.
TEST_F(ChunkPacksTest, APackedStoreCompletesOrFailsEachOfItsWrites) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(4 * kChunk, 22);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 0));
  auto writes = [&](uint64_t remote_base) {
    std::vector<TransferOp> ops;
    for (uint64_t i = 0; i < 4; ++i)
      ops.push_back(make_write(local, peer.handle(), 500, 3 * i * 1000 + 7, remote_base + i * 600));
    return ops;
  };
  auto refused = batch(writes(0), 1000);
  auto stores = peer.log().of(store_list_atom::value);
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_TRUE(peer.log().of(store_atom::value).empty()) << "a small write left on its own";
  const PeerAsk& pack = peer.log().asked[stores[0]];
  ASSERT_EQ(pack.ranges.size(), 4u);
  ASSERT_EQ(pack.bytes.size(), 2000u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(pack.ranges[i].offset, i * 600);
    EXPECT_TRUE(same_bytes(pack.bytes, i * 500, mine, 3 * i * 1000 + 7, 500))
        << "write " << i << "'s bytes are not where its range is in the chunk";
  }
  EXPECT_GT(pack.left_ms, 0u) << "the pack does not carry its time left";
  peer.fail(stores[0], make_rdma_error(ErrorCode::kPermissionDenied, "fake owner refuses"));
  run_jobs();
  auto r = reply(refused);
  ASSERT_TRUE(r && *r) << "no reply";
  ASSERT_EQ((*r)->size(), 4u);
  for (const TransferOutcome& o : **r) {
    EXPECT_EQ(o.code, static_cast<uint8_t>(ErrorCode::kPermissionDenied)) << o.message;
    EXPECT_NE(o.message.find("fake owner refuses"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("0 of its 500 bytes were stored"), std::string::npos) << o.message;
  }
  EXPECT_TRUE(all_zero(peer.memory(), 0, peer.memory().size()));
  auto stored = batch(writes(kChunk), 1000);
  auto again = peer.log().of(store_list_atom::value, true);
  ASSERT_EQ(again.size(), 1u);
  peer.answer(again[0]);
  run_jobs();
  auto r2 = reply(stored);
  ASSERT_TRUE(r2);
  ASSERT_NO_FATAL_FAILURE(expect_all_ok(*r2, 4));
  for (uint64_t i = 0; i < 4; ++i)
    EXPECT_TRUE(same_bytes(peer.memory(), kChunk + i * 600, mine, 3 * i * 1000 + 7, 500));
  EXPECT_TRUE(all_zero(peer.memory(), 0, kChunk));
  EXPECT_TRUE(quiet());
}

// A packed fetch is charged to its owner's window as one fetch of its total: while the window
// is full it waits, as one entry, and leaves once an answer opens it.
TEST_F(ChunkPacksTest, APackedFetchWaitsForItsOwnersWindowAsOne) {
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = 2 * kChunk;
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(4 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 23));
  auto big = transfer(make_read(local, peer.handle(), 2 * kChunk, 0, 0), 1000);
  ASSERT_EQ(peer.log().of(fetch_atom::value).size(), 2u) << "the window: two chunks";
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 8; ++i)
    ops.push_back(make_read(local, peer.handle(), 500, 2 * kChunk + i * 512, 2 * kChunk + i * 700));
  auto small = batch(ops, 1000);
  EXPECT_TRUE(peer.log().of(fetch_list_atom::value).empty()) << "asked beyond the window";
  peer.answer(peer.log().of(fetch_atom::value, true).at(0));
  run_jobs();
  auto packs = peer.log().of(fetch_list_atom::value);
  ASSERT_EQ(packs.size(), 1u) << "the window opened, but the pack did not leave (as one)";
  EXPECT_EQ(peer.log().asked[packs[0]].ranges.size(), 8u);
  for (size_t i : peer.log().of(fetch_atom::value, true))
    peer.answer(i);
  peer.answer(packs[0]);
  run_jobs();
  auto rb = reply(big);
  ASSERT_TRUE(rb && *rb) << (rb ? error_message(rb->error()) : "no reply");
  auto rs = reply(small);
  ASSERT_TRUE(rs);
  ASSERT_NO_FATAL_FAILURE(expect_all_ok(*rs, 8));
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, 2 * kChunk));
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(same_bytes(mine, 2 * kChunk + i * 512, peer.memory(), 2 * kChunk + i * 700, 500))
        << "read " << i;
    EXPECT_TRUE(all_zero(mine, 2 * kChunk + i * 512 + 500, 12));
  }
  EXPECT_TRUE(quiet());
}

// Reads whose pack waits for the window and whose deadline passes are answered `timeout`, and
// the pack never leaves: nothing of it is asked once the window opens, and nothing lands.
TEST_F(ChunkPacksTest, APackWhoseReadsTimedOutWhileItWaitedNeverLeaves) {
  ManagerOptions o = fallback_options();
  o.peer_window_bytes = 2 * kChunk;
  ASSERT_NO_FATAL_FAILURE(start_manager(o));
  std::vector<uint8_t> mine(4 * kChunk, 0);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(4 * kChunk, 24));
  auto big = transfer(make_read(local, peer.handle(), 2 * kChunk, 0, 0), 1000);
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 6; ++i)
    ops.push_back(make_read(local, peer.handle(), 600, 2 * kChunk + i * 600, i * 600));
  auto small = batch(ops, 100);
  advance(std::chrono::milliseconds(101));
  auto rs = reply(small);
  ASSERT_TRUE(rs && *rs) << "no reply";
  ASSERT_EQ((*rs)->size(), 6u);
  for (const TransferOutcome& out : **rs)
    EXPECT_EQ(out.code, static_cast<uint8_t>(ErrorCode::kTimeout)) << out.message;
  for (size_t i : peer.log().of(fetch_atom::value, true))
    peer.answer(i);
  run_jobs();
  EXPECT_TRUE(peer.log().of(fetch_list_atom::value).empty()) << "the timed-out pack was asked";
  auto rb = reply(big);
  ASSERT_TRUE(rb && *rb) << (rb ? error_message(rb->error()) : "no reply");
  EXPECT_TRUE(all_zero(mine, 2 * kChunk, 2 * kChunk)) << "bytes of timed-out reads landed";
  EXPECT_TRUE(quiet());
}

// Packs keep to one priority class (a pack waits for its owner's window as one entry, by its
// class: manager invariant 25), and writes into an owner's GPU memory are never packed (they
// could land in part).
TEST_F(ChunkPacksTest, PacksKeepToOneClassAndLeaveGpuWritesAlone) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(2 * kChunk, 27);
  BufferHandle local = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(2 * kChunk, 28));
  std::vector<TransferOp> ops;
  for (uint64_t i = 0; i < 6; ++i) {
    ops.push_back(make_read(local, peer.handle(), 300, i * 300, i * 300));
    ops.back().priority = static_cast<uint8_t>(i % 2 == 0 ? Priority::kBulk : Priority::kLatency);
  }
  BufferHandle gpu = peer.handle();
  gpu.memory = static_cast<uint8_t>(BufferMemory::kGpuDirect);
  for (uint64_t i = 0; i < 2; ++i)
    ops.push_back(make_write(local, gpu, 200, kChunk + i * 200, kChunk + i * 200));
  auto p = batch(ops, 1000);
  auto packs = peer.log().of(fetch_list_atom::value);
  ASSERT_EQ(packs.size(), 2u) << "not one pack per class";
  for (size_t k : packs) {
    const PeerAsk& a = peer.log().asked[k];
    ASSERT_EQ(a.ranges.size(), 3u);
    const uint64_t first = a.ranges[0].offset / 300 % 2;
    for (const PackedRange& r : a.ranges)
      EXPECT_EQ(r.offset / 300 % 2, first) << "a pack mixes the classes";
  }
  EXPECT_TRUE(peer.log().of(store_list_atom::value).empty()) << "writes to GPU memory packed";
  ASSERT_EQ(peer.log().of(store_atom::value).size(), 2u);
  for (size_t i : peer.log().of(store_atom::value))
    peer.answer(i);
  for (size_t i : packs)
    peer.answer(i);
  run_jobs();
  auto r = reply(p);
  ASSERT_TRUE(r);
  ASSERT_NO_FATAL_FAILURE(expect_all_ok(*r, ops.size()));
  EXPECT_TRUE(same_bytes(mine, 0, peer.memory(), 0, 1800));
  EXPECT_TRUE(same_bytes(peer.memory(), kChunk, mine, kChunk, 400));
  EXPECT_TRUE(quiet());
}

// The owner's side: a packed fetch answers its ranges' bytes one after the other; one range
// that does not fit refuses the whole request, naming that range; more than kMaxPackedRanges
// ranges are refused.
TEST_F(ChunkPacksTest, AnOwnerAnswersAPackedFetchOrRefusesItWholeNamingTheRange) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine = patterned(4 * kChunk, 25);
  BufferHandle h = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 0));
  peer.fetch_list(1, facade(), ref_of(h), {{9000, 100}, {0, 1}, {4 * kChunk - 10, 10}});
  run_jobs();
  const FetchAnswer& a = peer.log().fetched[1];
  ASSERT_TRUE(a.ok) << error_message(a.error);
  ASSERT_EQ(a.bytes.size(), 111u);
  EXPECT_TRUE(same_bytes(a.bytes, 0, mine, 9000, 100));
  EXPECT_TRUE(same_bytes(a.bytes, 100, mine, 0, 1));
  EXPECT_TRUE(same_bytes(a.bytes, 101, mine, 4 * kChunk - 10, 10));
  peer.fetch_list(2, facade(), ref_of(h), {{0, 100}, {100, 100}, {4 * kChunk - 10, 11}});
  run_jobs();
  EXPECT_FALSE(peer.log().fetched[2].ok);
  caf::expected<uint64_t> past_end(peer.log().fetched[2].error);
  EXPECT_RDMA_ERROR(past_end, ErrorCode::kOutOfBounds, "range 2 of 3");
  std::vector<PackedRange> many(kMaxPackedRanges + 1, PackedRange{0, 1});
  peer.fetch_list(3, facade(), ref_of(h), many);
  run_jobs();
  caf::expected<uint64_t> too_many(peer.log().fetched[3].error);
  EXPECT_RDMA_ERROR(too_many, ErrorCode::kInvalidArgument, "kMaxPackedRanges");
  EXPECT_TRUE(quiet());
}

// The owner's side: a packed store lands whole or not at all. A range past the end, a chunk
// whose size is not the ranges' total, or an empty range refuses it with nothing stored; a good
// one stores each range's bytes.
TEST_F(ChunkPacksTest, AnOwnerStoresAPackedStoreWholeOrNotAtAll) {
  ASSERT_NO_FATAL_FAILURE(start_manager());
  std::vector<uint8_t> mine(4 * kChunk, 0);
  BufferHandle h = register_buffer(mine);
  FakePeer& peer = add_peer(patterned(kChunk, 0));
  const std::vector<uint8_t> src = patterned(300, 26);
  auto chunk = [&](uint64_t n) { return ByteChunk::copy_of(src.data(), n); };
  auto answer = [&](uint64_t tag) -> caf::expected<uint64_t> {
    auto it = peer.log().asked_answers.find(tag);
    if (it == peer.log().asked_answers.end())
      return make_rdma_error(ErrorCode::kInternal,
                             "request " + std::to_string(tag) + " unanswered");
    return it->second;
  };
  using Ranges = std::vector<PackedRange>;
  peer.ask(1, facade(), store_list_atom::value, ref_of(h),
           Ranges{{0, 100}, {500, 100}, {4 * kChunk - 50, 100}}, chunk(300), uint32_t{1000});
  run_jobs();
  EXPECT_RDMA_ERROR(answer(1), ErrorCode::kOutOfBounds, "range 2 of 3");
  peer.ask(2, facade(), store_list_atom::value, ref_of(h), Ranges{{0, 100}, {500, 100}}, chunk(300),
           uint32_t{1000});
  run_jobs();
  EXPECT_RDMA_ERROR(answer(2), ErrorCode::kInvalidArgument, "hold 200 bytes, its chunk 300",
                    "nothing was stored");
  peer.ask(3, facade(), store_list_atom::value, ref_of(h), Ranges{{0, 100}, {500, 0}, {900, 200}},
           chunk(300), uint32_t{1000});
  run_jobs();
  EXPECT_RDMA_ERROR(answer(3), ErrorCode::kInvalidArgument, "range 1 of 3 is empty");
  EXPECT_TRUE(all_zero(mine, 0, mine.size())) << "a refused pack stored bytes";
  peer.ask(4, facade(), store_list_atom::value, ref_of(h),
           Ranges{{4 * kChunk - 100, 100}, {7, 150}, {2000, 50}}, chunk(300), uint32_t{1000});
  run_jobs();
  auto ok = answer(4);
  ASSERT_TRUE(ok) << error_message(ok.error());
  EXPECT_EQ(*ok, 300u);
  EXPECT_TRUE(same_bytes(mine, 4 * kChunk - 100, src, 0, 100));
  EXPECT_TRUE(same_bytes(mine, 7, src, 100, 150));
  EXPECT_TRUE(same_bytes(mine, 2000, src, 250, 50));
  EXPECT_TRUE(all_zero(mine, 0, 7));
  EXPECT_TRUE(all_zero(mine, 157, 2000 - 157));
  EXPECT_TRUE(all_zero(mine, 2050, 4 * kChunk - 100 - 2050));
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
