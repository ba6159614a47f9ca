// Transfer lists (actors/transfer_plan.h, RdmaClient::prepare and post) between two nodes, on
// each transport: lists of 1 to 100,000 ranges and strided lists move every byte (each
// checked, the bytes outside the ranges untouched); prepare refuses a range past the end, an
// empty one, a read-only destination and overlapping destinations, naming the range; a plan
// posted after its remote buffer's release fails with `released` and touches nothing; the same
// list every way (a client's post with and without lanes, post_async, an actor's request; with
// and without the same-host endpoint) gives the same bytes and the same errors; threads post
// one plan at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::seconds;

/// `count` blocks of `block` bytes, block i at i * block locally and at a shuffled block of
/// the remote buffer (of `remote_blocks` blocks).
std::vector<ListRange> scattered(uint64_t count, uint64_t block, uint64_t remote_blocks,
                                 uint32_t seed) {
  std::vector<uint64_t> place(remote_blocks);
  std::iota(place.begin(), place.end(), 0);
  std::shuffle(place.begin(), place.end(), std::mt19937(seed));
  std::vector<ListRange> r(count);
  for (uint64_t i = 0; i < count; ++i)
    r[i] = ListRange{i * block, place[i] * block, block};
  return r;
}

/// The first place where the list's ranges differ between the local and the remote memory, or
/// where the destination outside them differs from pattern `seed` (0: zeros); "" when none.
std::string compare(const std::vector<ListRange>& ranges, const Memory& local, const Memory& remote,
                    bool read, uint32_t seed) {
  const Memory& dest = read ? local : remote;
  std::vector<bool> covered(dest.bytes.size(), false);
  for (size_t r = 0; r < ranges.size(); ++r) {
    const ListRange& x = ranges[r];
    for (uint64_t k = 0; k < x.length; ++k) {
      covered[(read ? x.local_offset : x.remote_offset) + k] = true;
      if (local.bytes[x.local_offset + k] != remote.bytes[x.remote_offset + k])
        return "range " + std::to_string(r) + " byte " + std::to_string(k);
    }
  }
  for (uint64_t i = 0; i < dest.bytes.size(); ++i)
    if (!covered[i] && dest.bytes[i] != (seed == 0 ? 0 : pattern(i, seed)))
      return "destination byte " + std::to_string(i) + " outside the ranges changed";
  return "";
}

/// A list posted after its remote buffer's release: refused `released`, nothing landed.
void expect_released(const ListOutcome& got) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().error().code(), ErrorCode::kReleased) << got.status().error().to_string();
  EXPECT_EQ(got.landed, 0u);
  EXPECT_EQ(got.bytes, 0u);
}

class TransferListTest : public TwoNodeTest {};

TEST_F(TransferListTest, ListsOfOneToAHundredThousandRangesMoveEveryByte) {
  struct Shape {
    uint64_t count, block;
  };
  RdmaClient me(user_->node().system(), user_->manager());
  for (const Shape& s : {Shape{1, 4096}, Shape{2000, 4096}, Shape{300, 65536}, Shape{100000, 64}}) {
    SCOPED_TRACE(std::to_string(s.count) + " x " + std::to_string(s.block));
    const uint64_t blocks = s.count + 17;
    Memory theirs(blocks * s.block, 3);
    BufferHandle remote = remote_view(*owner_, *user_, theirs, "list-" + std::to_string(s.count));
    Memory mine(s.count * s.block, 0);
    auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    const auto ranges = scattered(s.count, s.block, blocks, static_cast<uint32_t>(s.count));
    auto pull = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
    ASSERT_TRUE(pull.ok()) << pull.error().to_string();
    EXPECT_EQ(pull->size(), s.count);
    EXPECT_EQ(pull->bytes(), s.count * s.block);
    const uint64_t lane_ops = user_->stats().direct_ops;
    ListOutcome got = me.post(*pull, seconds(60));
    ASSERT_TRUE(got.ok()) << got.status().error().to_string();
    EXPECT_EQ(got.landed, s.count);
    EXPECT_EQ(got.bytes, s.count * s.block);
    EXPECT_EQ(got.path, expected_path());
    EXPECT_EQ(compare(ranges, mine, theirs, true, 0), "");
    // Over RDMA the list is one op on the client's direct lane (DirectLane invariant 6).
    EXPECT_EQ(user_->stats().direct_ops - lane_ops, expected_path() == kPathRdma ? 1u : 0u);
    // Pushed back from another pattern, into the same places.
    for (uint64_t i = 0; i < mine.bytes.size(); ++i)
      mine.bytes[i] = pattern(i, 5);
    auto push = me.prepare(TransferKind::kWrite, local->handle(), remote, ranges);
    ASSERT_TRUE(push.ok()) << push.error().to_string();
    got = me.post(*push, seconds(60));
    ASSERT_TRUE(got.ok()) << got.status().error().to_string();
    EXPECT_EQ(got.landed, s.count);
    EXPECT_EQ(compare(ranges, mine, theirs, false, 3), "");
    ASSERT_TRUE(owner_->release(remote.id));
  }
}

// Without a stream channel the fallback moves a list's small ranges in CAF messages, packed
// (chunk_path.h invariant 5): every byte lands both ways, and the user's manager sent far fewer
// requests than there are ranges. (Over RDMA the list takes the direct lane: bytes only.)
TEST_F(TransferListTest, WithoutAStreamChannelSmallRangesMoveInPackedRequests) {
  ManagerOptions o;
  o.stream_min_bytes = 0;
  ASSERT_TRUE(restart(o));
  RdmaClient me(user_->node().system(), user_->manager());
  constexpr uint64_t kCount = 3000, kBlock = 1000, kBlocks = kCount + 11;
  Memory theirs(kBlocks * kBlock, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "packed-list");
  Memory mine(kCount * kBlock, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  const auto ranges = scattered(kCount, kBlock, kBlocks, 77);
  const ManagerStats before = user_->stats();
  auto pull = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
  ASSERT_TRUE(pull.ok()) << pull.error().to_string();
  ListOutcome got = me.post(*pull, seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, kCount);
  EXPECT_EQ(compare(ranges, mine, theirs, true, 0), "");
  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    mine.bytes[i] = pattern(i, 5);
  auto push = me.prepare(TransferKind::kWrite, local->handle(), remote, ranges);
  ASSERT_TRUE(push.ok()) << push.error().to_string();
  got = me.post(*push, seconds(60));
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, kCount);
  EXPECT_EQ(compare(ranges, mine, theirs, false, 3), "");
  if (expected_path() == kPathFallback) {
    const ManagerStats after = user_->stats();
    EXPECT_EQ(after.packed_ops - before.packed_ops, 2 * kCount) << "a small range left alone";
    // 256 KiB chunks: 262 ranges of 1000 bytes fit one; a batch's last pack holds the rest.
    EXPECT_LE(after.packed_chunks - before.packed_chunks, 2 * (kCount / 262 + 3));
  }
  ASSERT_TRUE(owner_->release(remote.id));
}

TEST_F(TransferListTest, StridedListsMoveEveryByte) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(1 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "strided");
  Memory mine(1 << 20, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // Every other 1 KiB of the remote buffer's first half, packed at local offset 4096.
  Strided s{256, 1024, 4096, 1024, 0, 2048};
  auto plan = me.prepare(TransferKind::kRead, local->handle(), remote, s);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  ListOutcome got = me.post(*plan);
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  std::vector<ListRange> same;
  for (uint64_t i = 0; i < s.count; ++i)
    same.push_back(ListRange{4096 + i * 1024, i * 2048, 1024});
  EXPECT_EQ(compare(same, mine, theirs, true, 0), "");
}

TEST_F(TransferListTest, PrepareRefusesABadListWholeNamingTheRange) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(1 << 16, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "bad-lists");
  BufferHandle read_only =
      remote_view(*owner_, *user_, theirs, "bad-lists-ro", BufferAccess::kReadOnly);
  Memory mine(1 << 16, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  struct Case {
    TransferKind kind;
    BufferHandle remote;
    std::vector<ListRange> ranges;
    ErrorCode code;
    std::string names;
  };
  const std::vector<Case> cases = {
      {TransferKind::kRead,
       remote,
       {{0, 0, 4096}, {4096, 4096, 4096}, {8192, 65000, 4096}},
       ErrorCode::kOutOfBounds,
       "range 2 of 3"},
      {TransferKind::kWrite,
       remote,
       {{0, 0, 4096}, {65000, 0, 4096}},
       ErrorCode::kOutOfBounds,
       "range 1 of 2"},
      {TransferKind::kRead,
       remote,
       {{0, 0, 4096}, {4096, 4096, 0}},
       ErrorCode::kInvalidArgument,
       "range 1 of 2"},
      {TransferKind::kRead,
       remote,
       {{0, 0, 4096}, {8192, 8192, 4096}, {4095, 20000, 2}},
       ErrorCode::kInvalidArgument,
       "range 2 of 3 overlaps range 0"},
      {TransferKind::kWrite,
       remote,
       {{0, 100, 50}, {1000, 149, 10}},
       ErrorCode::kInvalidArgument,
       "range 1 of 2 overlaps range 0"},
      {TransferKind::kWrite, read_only, {{0, 0, 16}}, ErrorCode::kInvalidArgument, "range 0 of 1"},
      {TransferKind::kRead, remote, {}, ErrorCode::kInvalidArgument, "no ranges"},
  };
  for (const Case& c : cases) {
    auto plan = me.prepare(c.kind, local->handle(), c.remote, c.ranges);
    ASSERT_FALSE(plan.ok()) << c.names;
    EXPECT_EQ(plan.error().code(), c.code) << plan.error().to_string();
    EXPECT_NE(plan.error().message().find(c.names), std::string::npos) << plan.error().message();
  }
  // Strided lists: refused on their last range, or on their stride, before anything is
  // allocated (a count in the billions included).
  auto far = me.prepare(TransferKind::kRead, local->handle(), remote,
                        Strided{uint64_t{1} << 40, 16, 0, 16, 0, 16});
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().code(), ErrorCode::kOutOfBounds) << far.error().to_string();
  EXPECT_NE(far.error().message().find("range 1099511627775 of 1099511627776"), std::string::npos)
      << far.error().message();
  auto same_place = me.prepare(TransferKind::kWrite, local->handle(), remote,
                               Strided{uint64_t{1} << 40, 16, 0, 16, 0, 0});
  ASSERT_FALSE(same_place.ok());
  EXPECT_EQ(same_place.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(same_place.error().message().find("range 1 of 1099511627776 overlaps range 0"),
            std::string::npos)
      << same_place.error().message();
  // Reads may overlap at their source, not at their destination.
  auto plan = me.prepare(TransferKind::kRead, local->handle(), remote,
                         std::vector<ListRange>{{0, 0, 4096}, {4096, 0, 4096}});
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  // No time to move it in: refused, as an actor's list is.
  ListOutcome none = me.post(*plan, std::chrono::milliseconds(0));
  EXPECT_EQ(none.code, static_cast<uint8_t>(ErrorCode::kInvalidArgument)) << none.message;
  EXPECT_EQ(none.landed, 0u);
  auto later = me.post_async(*plan, std::chrono::milliseconds(0));
  ASSERT_EQ(later.wait_for(seconds(10)), std::future_status::ready) << "a refusal waited";
  none = later.get();
  EXPECT_EQ(none.code, static_cast<uint8_t>(ErrorCode::kInvalidArgument)) << none.message;
  EXPECT_EQ(none.landed, 0u);
  EXPECT_EQ(compare({}, mine, theirs, true, 0), "") << "a refused list moved bytes";
}

// What the striping rule measures a list by (path_choice.h invariant 7): the most bytes of
// any of its batches, cut as they are posted (kListBatch ranges from the first), not its total.
TEST_F(TransferListTest, APlanMeasuresItsBatchesAsTheyAreCut) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(1 << 20, 3), mine(1 << 20, 0);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "batches");
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  // kListBatch ranges of 10 bytes, kListBatch of 30, then 5 of 1000: batches of 10240, 30720
  // and 5000 bytes.
  std::vector<ListRange> ranges;
  uint64_t at = 0;
  auto add = [&](size_t n, uint64_t length) {
    for (size_t i = 0; i < n; ++i, at += length)
      ranges.push_back(ListRange{at, at, length});
  };
  add(kListBatch, 10);
  add(kListBatch, 30);
  add(5, 1000);
  auto plan = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  EXPECT_EQ(plan->bytes(), kListBatch * 40 + 5000);
  EXPECT_EQ(plan->max_length(), 1000u);
  EXPECT_EQ(detail::plan_batch_bytes(*plan), kListBatch * 30);
  // One range: its length.
  auto one = me.prepare(TransferKind::kRead, local->handle(), remote, {ListRange{0, 0, 777}});
  ASSERT_TRUE(one.ok()) << one.error().to_string();
  EXPECT_EQ(detail::plan_batch_bytes(*one), 777u);
  ASSERT_TRUE(owner_->release(remote.id));
}

TEST_F(TransferListTest, APlanPostedAfterReleaseFailsReleasedTouchingNothing) {
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "lanes" : "manager only");
    RdmaClient me(user_->node().system(), user_->manager(), direct);
    Memory theirs(1 << 20, 3);
    BufferHandle remote = remote_view(*owner_, *user_, theirs, direct ? "rel-lanes" : "rel-mgr");
    Memory mine(1 << 20, 7);
    auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    const auto ranges = scattered(64, 4096, 256, 2);
    auto pull = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
    auto push = me.prepare(TransferKind::kWrite, local->handle(), remote, ranges);
    ASSERT_TRUE(pull.ok() && push.ok());
    ListOutcome got = me.post(*pull);  // once, so that lanes and endpoints are known
    ASSERT_TRUE(got.ok()) << got.status().error().to_string();
    for (uint64_t i = 0; i < mine.bytes.size(); ++i)
      mine.bytes[i] = pattern(i, 7);
    ASSERT_TRUE(owner_->release(remote.id));
    for (const TransferPlan* p : {&*pull, &*push}) {
      got = me.post(*p);
      expect_released(got);
    }
    EXPECT_TRUE(holds_pattern(mine, 0, mine.bytes.size(), 7, 0)) << "local bytes changed";
    EXPECT_TRUE(holds_pattern(theirs, 0, theirs.bytes.size(), 3, 0)) << "remote bytes changed";
  }
}

// Every way a list moves between two nodes gives the same bytes and the same errors: a
// client's post with its lanes, without them (the manager's batches), post_async (the
// manager's worker), an actor's transfer_list request; each between nodes with the owner's
// same-host endpoint and between nodes without it (over the fallback: the stream lane over
// TCP). Then, the remote buffer released, every way fails `released`, nothing landed and no
// byte touched.
TEST_F(TransferListTest, EveryWayGivesTheSameBytesAndErrors) {
  ManagerOptions no_endpoint;
  no_endpoint.same_host = false;
  auto tcp_owner = start_node(no_endpoint);
  auto tcp_user = start_node(no_endpoint);
  ASSERT_TRUE(tcp_owner && tcp_user);
  const auto ranges = scattered(500, 8192, 512, 4);
  const std::vector<std::string> ways{"post with lanes", "post through the manager", "post_async",
                                      "an actor's transfer_list"};
  std::vector<std::vector<uint8_t>> results;
  for (bool endpoint : {true, false}) {
    SCOPED_TRACE(endpoint ? "same-host endpoint" : "no same-host endpoint");
    TestNode& owner = endpoint ? *owner_ : *tcp_owner;
    TestNode& user = endpoint ? *user_ : *tcp_user;
    Memory theirs(4 << 20, 3);
    BufferHandle remote =
        remote_view(owner, user, theirs, endpoint ? "every-way" : "every-way-tcp");
    Memory mine(uint64_t{500} * 8192, 0);
    RdmaClient me(user.node().system(), user.manager());
    RdmaClient manager_only(user.node().system(), user.manager(), false);
    auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    auto pull = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
    ASSERT_TRUE(pull.ok()) << pull.error().to_string();
    caf::scoped_actor self(user.node().system());
    auto move = [&](const std::string& way) {
      ListOutcome out;
      if (way == ways[0])
        return me.post(*pull, seconds(30));
      if (way == ways[1])
        return manager_only.post(*pull, seconds(30));
      if (way == ways[2]) {
        auto f = me.post_async(*pull, seconds(30));
        if (f.wait_for(seconds(60)) == std::future_status::ready)
          return f.get();
        out.fail(Error(ErrorCode::kTimeout, "post_async: no outcome within 60 s"));
        return out;
      }
      TransferListMsg m{static_cast<uint8_t>(TransferKind::kRead), local->handle(), remote, ranges};
      self->request(user.manager(), seconds(60), transfer_list_atom::value, std::move(m),
                    uint32_t{30000})
          .receive([&](ListOutcome& o) { out = std::move(o); },
                   [&](caf::error& e) { out.fail(Error(ErrorCode::kInternal, error_message(e))); });
      return out;
    };
    for (const std::string& way : ways) {
      SCOPED_TRACE(way);
      std::fill(mine.bytes.begin(), mine.bytes.end(), 0);
      ListOutcome got = move(way);
      ASSERT_TRUE(got.ok()) << got.status().error().to_string();
      EXPECT_EQ(got.landed, ranges.size());
      EXPECT_EQ(got.bytes, ranges.size() * 8192);
      EXPECT_EQ(compare(ranges, mine, theirs, true, 0), "");
      results.push_back(mine.bytes);
    }
    for (uint64_t i = 0; i < mine.bytes.size(); ++i)
      mine.bytes[i] = pattern(i, 7);
    ASSERT_TRUE(owner.release(remote.id));
    for (const std::string& way : ways) {
      SCOPED_TRACE(way);
      ListOutcome got = move(way);
      expect_released(got);
    }
    EXPECT_TRUE(holds_pattern(mine, 0, mine.bytes.size(), 7, 0)) << "local bytes changed";
    EXPECT_TRUE(holds_pattern(theirs, 0, theirs.bytes.size(), 3, 0)) << "remote bytes changed";
  }
  for (const auto& r : results)
    EXPECT_EQ(r, results[0]);
}

TEST_F(TransferListTest, ThreadsPostPlansAtOnce) {
  // One client, one source buffer, 4 threads each posting its own plan (copied from a shared
  // one: plans share their ranges) into a region of its own (one destination written by
  // several threads at once would be the program's own data race).
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(4 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "threads");
  Memory mine(1 << 20, 9);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  std::vector<std::vector<ListRange>> lists(4);
  std::vector<TransferPlan> plans;
  for (size_t t = 0; t < lists.size(); ++t) {
    lists[t] = scattered(64, 4096, 256, static_cast<uint32_t>(6 + t));
    for (auto& x : lists[t])
      x.remote_offset += t * (1 << 20);
    auto push = me.prepare(TransferKind::kWrite, local->handle(), remote, lists[t]);
    ASSERT_TRUE(push.ok()) << push.error().to_string();
    plans.push_back(*push);
  }
  std::vector<ListOutcome> outcomes(lists.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < outcomes.size(); ++t)
    threads.emplace_back([&, t] {
      const TransferPlan plan = plans[t];  // a copy
      for (int round = 0; round < 5 && outcomes[t].ok(); ++round)
        outcomes[t] = me.post(plan);
    });
  for (auto& t : threads)
    t.join();
  std::vector<ListRange> all;
  for (size_t t = 0; t < outcomes.size(); ++t) {
    ASSERT_TRUE(outcomes[t].ok()) << outcomes[t].status().error().to_string();
    EXPECT_EQ(outcomes[t].landed, lists[t].size());
    all.insert(all.end(), lists[t].begin(), lists[t].end());
  }
  EXPECT_EQ(compare(all, mine, theirs, false, 3), "");
}

// An actor's list (transfer_list_atom): one request to its manager, one ListOutcome, as
// RdmaClient::post answers (actors/list_worker.h); refusals the same as prepare's.
TEST_F(TransferListTest, AnActorAsksItsManagerToMoveAList) {
  RdmaClient me(user_->node().system(), user_->manager());
  Memory theirs(4 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "actor-list");
  Memory mine(uint64_t{3000} * 1024, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  const auto ranges = scattered(3000, 1024, 4096, 10);
  caf::scoped_actor self(user_->node().system());
  auto ask = [&](TransferKind kind, std::vector<ListRange> list) {
    ListOutcome out;
    TransferListMsg m{static_cast<uint8_t>(kind), local->handle(), remote, std::move(list)};
    self->request(user_->manager(), seconds(60), transfer_list_atom::value, std::move(m),
                  uint32_t{30000})
        .receive([&](ListOutcome& o) { out = std::move(o); },
                 [&](caf::error& e) { out.fail(Error(ErrorCode::kInternal, error_message(e))); });
    return out;
  };
  const uint64_t lane_ops = user_->stats().direct_ops;
  ListOutcome got = ask(TransferKind::kRead, ranges);
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(got.landed, ranges.size());
  EXPECT_EQ(got.bytes, ranges.size() * 1024);
  EXPECT_EQ(got.path, expected_path());
  EXPECT_EQ(compare(ranges, mine, theirs, true, 0), "");
  // Over RDMA a list longer than one batch is one op on the worker's own direct lane
  // (list_worker.h invariant 4), not three batches through the manager.
  EXPECT_EQ(user_->stats().direct_ops - lane_ops, expected_path() == kPathRdma ? 1u : 0u);
  for (uint64_t i = 0; i < mine.bytes.size(); ++i)
    mine.bytes[i] = pattern(i, 4);
  got = ask(TransferKind::kWrite, ranges);
  ASSERT_TRUE(got.ok()) << got.status().error().to_string();
  EXPECT_EQ(compare(ranges, mine, theirs, false, 3), "");
  got = ask(TransferKind::kRead, {{0, 0, 1024}, {1024, (4 << 20) - 512, 1024}});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.code, static_cast<uint8_t>(ErrorCode::kOutOfBounds)) << got.message;
  EXPECT_NE(got.message.find("range 1 of 2"), std::string::npos) << got.message;
  EXPECT_EQ(got.landed, 0u);
}

// post_async: futures of lists in flight at once, whose client went before they were taken.
TEST_F(TransferListTest, PostAsyncAnswersLaterEvenAfterItsClientWent) {
  Memory theirs(4 << 20, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "async-list");
  Memory mine(uint64_t{2} * 1000 * 2048, 0);
  std::vector<std::future<ListOutcome>> futures;
  std::vector<std::vector<ListRange>> lists;
  std::optional<RegisteredBuffer> local;
  {
    RdmaClient me(user_->node().system(), user_->manager());
    auto r = me.register_buffer(mine.bytes.data(), mine.bytes.size());
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    local.emplace(std::move(*r));
    for (uint32_t k = 0; k < 2; ++k) {
      auto list = scattered(1000, 2048, 2048, 20 + k);
      for (auto& x : list)
        x.local_offset += uint64_t{k} * 1000 * 2048;
      auto plan = me.prepare(TransferKind::kRead, local->handle(), remote, list);
      ASSERT_TRUE(plan.ok()) << plan.error().to_string();
      futures.push_back(me.post_async(*plan, seconds(30)));
      lists.push_back(std::move(list));
    }
  }
  for (size_t k = 0; k < futures.size(); ++k) {
    ASSERT_EQ(futures[k].wait_for(seconds(60)), std::future_status::ready);
    ListOutcome got = futures[k].get();
    ASSERT_TRUE(got.ok()) << got.status().error().to_string();
    EXPECT_EQ(got.landed, 1000u);
    for (const ListRange& x : lists[k])
      for (uint64_t b = 0; b < x.length; ++b)
        ASSERT_EQ(mine.bytes[x.local_offset + b], theirs.bytes[x.remote_offset + b]);
  }
}

// transfer_plan.h invariant 4: whenever the owner's node goes (before, during or after the
// lists), what a post reports landed is in place, byte for byte, and a post that did not end
// ok names the failure. Lists in a loop from another thread; the owner's node is destroyed
// once the first list landed.
TEST_F(TransferListTest, WhatAListReportsLandedIsThereWhenItsOwnerGoes) {
  RdmaClient me(user_->node().system(), user_->manager());
  const uint64_t blocks = 40000;  // three stream requests per list
  Memory theirs(blocks * 4096, 3);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "owner-goes");
  Memory mine(blocks * 4096, 0);
  auto local = me.register_buffer(mine.bytes.data(), mine.bytes.size());
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  const auto ranges = scattered(blocks, 4096, blocks, 8);
  auto pull = me.prepare(TransferKind::kRead, local->handle(), remote, ranges);
  ASSERT_TRUE(pull.ok()) << pull.error().to_string();
  std::promise<void> first;
  ListOutcome last;
  int posts = 0;
  std::thread poster([&] {
    for (;;) {
      std::fill(mine.bytes.begin(), mine.bytes.end(), 0);
      last = me.post(*pull, seconds(30));
      if (++posts == 1)
        first.set_value();
      if (!last.ok())
        return;
    }
  });
  first.get_future().wait();
  owner_.reset();
  poster.join();
  ASSERT_FALSE(last.ok());
  EXPECT_LT(last.landed, ranges.size());
  std::printf("after %d posts the last landed %llu of %zu ranges: %s\n", posts,
              static_cast<unsigned long long>(last.landed), ranges.size(),
              last.status().error().to_string().c_str());
  EXPECT_TRUE(last.status().error().code() == ErrorCode::kPeerUnavailable ||
              last.status().error().code() == ErrorCode::kTimeout)
      << last.status().error().to_string();
  uint64_t bytes = 0;
  for (uint64_t r = 0; r < last.landed; ++r) {
    const ListRange& x = ranges[r];
    for (uint64_t k = 0; k < x.length; ++k)
      ASSERT_EQ(mine.bytes[x.local_offset + k], theirs.bytes[x.remote_offset + k])
          << "range " << r << " of the " << last.landed << " reported landed, byte " << k;
    bytes += x.length;
  }
  EXPECT_EQ(last.bytes, bytes);
}

}  // namespace
}  // namespace caf_rdma::testing
