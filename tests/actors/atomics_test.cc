// Atomics (fetch-add, compare-swap) on a remote word: manager requests, RdmaClient calls and
// batch ops, on both transports (transport_test: fallback natively, rdma in the Soft-RoCE VM).
// Checks manager invariant 14 and actors/transfer_checks.h invariants 2-3: every old value
// returned and every final word is compared, and every error names what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "primitives/device_list.h"
#include "support/child_process.h"
#include "tests/actors/expect_rdma_error.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::seconds;

uint64_t word_at(const Memory& m, uint64_t offset) {
  uint64_t v = 0;
  std::memcpy(&v, m.bytes.data() + offset, sizeof(v));
  return v;
}

void set_word(Memory& m, uint64_t offset, uint64_t v) {
  std::memcpy(m.bytes.data() + offset, &v, sizeof(v));
}

/// The old values 0 .. n-1, each exactly once: what n fetch-adds of 1 on a word that was 0
/// must have returned, in some order.
void expect_each_once(std::vector<uint64_t> olds, uint64_t n) {
  ASSERT_EQ(olds.size(), n);
  std::sort(olds.begin(), olds.end());
  for (uint64_t i = 0; i < n; ++i)
    ASSERT_EQ(olds[i], i) << "old value " << i << " missing or repeated";
}

class AtomicsTest : public TwoNodeTest {};

TEST_F(AtomicsTest, FetchAddAndCompareSwapReturnTheOldValue) {
  Memory counter(64, 5);
  set_word(counter, 8, 40);
  BufferHandle remote = remote_view(*owner_, *user_, counter, "atomic-word");
  RdmaClient me(user_->node().system(), user_->manager());
  std::string path;
  auto a = me.fetch_add(remote, 8, 2, RdmaClient::kDefaultTimeout, &path);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(*a, 40u);
  EXPECT_EQ(word_at(counter, 8), 42u);
  EXPECT_EQ(path, expected_path()) << "fetch_add must say which path it took";
  // Wraps around as unsigned arithmetic does.
  auto b = me.fetch_add(remote, 8, ~uint64_t{0});
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  EXPECT_EQ(*b, 42u);
  EXPECT_EQ(word_at(counter, 8), 41u);
  // Compare-swap swaps only when the word holds the expected value, and returns the old one.
  auto miss = me.compare_swap(remote, 8, 7, 100);
  ASSERT_TRUE(miss.ok()) << miss.error().to_string();
  EXPECT_EQ(*miss, 41u);
  EXPECT_EQ(word_at(counter, 8), 41u);
  path.clear();
  auto hit = me.compare_swap(remote, 8, 41, 100, RdmaClient::kDefaultTimeout, &path);
  ASSERT_TRUE(hit.ok()) << hit.error().to_string();
  EXPECT_EQ(path, expected_path());
  EXPECT_EQ(*hit, 41u);
  EXPECT_EQ(word_at(counter, 8), 100u);
  // Nothing else in the buffer changed.
  for (uint64_t i = 0; i < 64; ++i) {
    if (i < 8 || i >= 16) {
      ASSERT_EQ(counter.bytes[i], pattern(i, 5)) << "byte " << i;
    }
  }

  // As a manager request: the old value lands in the op's local range, the reply names the path.
  Memory local(32, 3);
  auto hl = user_->request_buffer(local);
  ASSERT_TRUE(hl);
  auto r = user_->transfer(make_fetch_add(*hl, remote, 8, 5, /*local_offset=*/16));
  ASSERT_TRUE(r) << error_message(r.error());
  EXPECT_EQ(r->path, expected_path());
  EXPECT_EQ(r->bytes, kAtomicBytes);
  EXPECT_EQ(word_at(local, 16), 100u);
  EXPECT_EQ(word_at(counter, 8), 105u);
  for (uint64_t i = 0; i < 32; ++i) {
    if (i < 16 || i >= 24) {
      ASSERT_EQ(local.bytes[i], pattern(i, 3)) << "local byte " << i;
    }
  }
}

TEST_F(AtomicsTest, ConcurrentFetchAddsFromManyActorsOfBothNodesCountExactly) {
  constexpr int kThreads = 6;
  constexpr int kAdds = 150;
  Memory counter(64);
  set_word(counter, 0, 0);
  BufferHandle remote = remote_view(*owner_, *user_, counter, "atomic-counter");
  auto own = owner_->request_buffer(counter);  // the owner's own actors add too (same word)
  ASSERT_TRUE(own);
  std::mutex mu;
  std::vector<uint64_t> olds;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      TestNode& node = t % 3 == 0 ? *owner_ : *user_;
      const BufferHandle& target = t % 3 == 0 ? *own : remote;
      RdmaClient me(node.node().system(), node.manager());
      std::vector<uint64_t> mine;
      for (int i = 0; i < kAdds; ++i) {
        auto old = me.fetch_add(target, 0, 1);
        ASSERT_TRUE(old.ok()) << old.error().to_string();
        mine.push_back(*old);
      }
      std::lock_guard<std::mutex> lock(mu);
      olds.insert(olds.end(), mine.begin(), mine.end());
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(word_at(counter, 0), uint64_t{kThreads} * kAdds);
  expect_each_once(olds, uint64_t{kThreads} * kAdds);
}

TEST_F(AtomicsTest, CompareSwapLockProtectsASharedRegion) {
  constexpr uint64_t kLock = 0;
  constexpr uint64_t kRegion = 64;
  constexpr uint64_t kRegionBytes = 4096;
  constexpr int kWorkers = 4;
  constexpr int kRounds = 12;
  Memory shared(kRegion + kRegionBytes);
  set_word(shared, kLock, 0);
  BufferHandle remote = remote_view(*owner_, *user_, shared, "atomic-lock");
  std::mutex mu;
  int taken = 0;
  std::vector<std::thread> workers;
  workers.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w)
    workers.emplace_back([&, w] {
      const uint64_t id = static_cast<uint64_t>(w) + 1;
      RdmaClient me(user_->node().system(), user_->manager());
      Memory mine(kRegionBytes), back(kRegionBytes);
      std::fill(mine.bytes.begin(), mine.bytes.end(), static_cast<uint8_t>(id * 37));
      auto hm = me.request_buffer(mine.bytes.data(), kRegionBytes);
      auto hb = me.request_buffer(back.bytes.data(), kRegionBytes);
      ASSERT_TRUE(hm.ok() && hb.ok());
      const auto range = Range::of(kRegionBytes).at_remote(kRegion);
      for (int round = 0; round < kRounds; ++round) {
        // Take the lock: compare-swap 0 -> id until it was 0 (bounded: a lost lock fails).
        const auto give_up = std::chrono::steady_clock::now() + seconds(120);
        for (;;) {
          auto old = me.compare_swap(remote, kLock, 0, id);
          ASSERT_TRUE(old.ok()) << old.error().to_string();
          if (*old == 0)
            break;
          ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "lock held by " << *old;
          std::this_thread::yield();
        }
        auto wr = me.write(*hm, remote, range);
        ASSERT_TRUE(wr.ok()) << wr.error().to_string();
        auto rd = me.read(*hb, remote, range);
        ASSERT_TRUE(rd.ok()) << rd.error().to_string();
        // Nobody else wrote while we held it: every byte is ours.
        for (uint64_t i = 0; i < kRegionBytes; ++i)
          ASSERT_EQ(back.bytes[i], static_cast<uint8_t>(id * 37))
              << "worker " << id << " round " << round << " byte " << i;
        auto released = me.compare_swap(remote, kLock, id, 0);
        ASSERT_TRUE(released.ok()) << released.error().to_string();
        ASSERT_EQ(*released, id) << "the lock changed hands while worker " << id << " held it";
        std::lock_guard<std::mutex> lock(mu);
        ++taken;
      }
      ASSERT_TRUE(me.release(hm->id).ok());
      ASSERT_TRUE(me.release(hb->id).ok());
    });
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(taken, kWorkers * kRounds);
  EXPECT_EQ(word_at(shared, kLock), 0u);
  // The region holds one worker's bytes, all of them.
  const uint8_t last = shared.bytes[kRegion];
  bool someone = false;
  for (int w = 1; w <= kWorkers; ++w)
    someone = someone || last == static_cast<uint8_t>(w * 37);
  EXPECT_TRUE(someone) << "region byte " << int(last) << " is no worker's";
  for (uint64_t i = 0; i < kRegionBytes; ++i)
    ASSERT_EQ(shared.bytes[kRegion + i], last) << "region byte " << i;
}

// Alignment is the word's address in its owner's memory, not the offset: a buffer that starts
// 4 bytes past an 8-byte boundary has its aligned words at offsets 4, 12, ...; offset 0 is
// misaligned there. The allowed word passes the requester's check and the owner's (either
// checking the offset alone would refuse it); every byte around the word checked.
TEST_F(AtomicsTest, AlignmentIsTheWordsAddressInItsOwnersMemory) {
  Memory counter(64, 9), local(16);
  ASSERT_EQ(counter.addr() % 8, 0u);
  BufferHandle remote = remote_view(*owner_, *user_, counter.addr() + 4, 48, "atomic-shifted",
                                    BufferAccess::kReadWrite);
  auto hl = user_->request_buffer(local);
  ASSERT_TRUE(hl);
  uint64_t before = 0;
  std::memcpy(&before, counter.bytes.data() + 8, 8);
  auto add = user_->transfer(make_fetch_add(*hl, remote, 4, 5));  // address counter + 8
  ASSERT_TRUE(add) << error_message(add.error());
  RdmaClient me(user_->node().system(), user_->manager());
  auto old = me.fetch_add(remote, 4, 0);
  ASSERT_TRUE(old.ok()) << old.error().to_string();
  EXPECT_EQ(*old, before + 5);
  uint64_t after = 0;
  std::memcpy(&after, counter.bytes.data() + 8, 8);
  EXPECT_EQ(after, before + 5);
  for (uint64_t offset : {uint64_t{0}, uint64_t{8}}) {  // addresses counter + 4, counter + 12
    auto misaligned = me.fetch_add(remote, offset, 1);
    ASSERT_FALSE(misaligned.ok()) << "offset " << offset;
    EXPECT_EQ(misaligned.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(misaligned.error().message().find("misaligned"), std::string::npos)
        << misaligned.error().message();
  }
  for (uint64_t i = 0; i < 64; ++i) {
    if (i < 8 || i >= 16) {
      ASSERT_EQ(counter.bytes[i], pattern(i, 9)) << "byte " << i << " around the word";
    }
  }
}

TEST_F(AtomicsTest, EveryErrorNamesWhatWasWrong) {
  Memory counter(64, 5), ro(64, 6), local(16);
  BufferHandle remote = remote_view(*owner_, *user_, counter, "atomic-errors");
  BufferHandle readonly =
      remote_view(*owner_, *user_, ro, "atomic-readonly", BufferAccess::kReadOnly);
  auto hl = user_->request_buffer(local);
  auto hro = user_->request_buffer(local.addr(), 8, BufferAccess::kReadOnly);
  ASSERT_TRUE(hl && hro);
  const std::string id = "buffer " + std::to_string(remote.id);
  const std::string ro_id = "buffer " + std::to_string(readonly.id);
  const std::string local_id = "buffer " + std::to_string(hl->id);
  const std::string ro_local_id = "buffer " + std::to_string(hro->id);

  auto misaligned = user_->transfer(make_fetch_add(*hl, remote, 4, 1));
  EXPECT_RDMA_ERROR(misaligned, ErrorCode::kInvalidArgument, "misaligned", "remote offset 4",
                    id.c_str());
  auto beyond = user_->transfer(make_compare_swap(*hl, remote, 64, 0, 1));
  EXPECT_RDMA_ERROR(beyond, ErrorCode::kOutOfBounds, "remote offset 64", "size 64", id.c_str());
  auto straddles = user_->transfer(make_fetch_add(*hl, remote, 60, 1));
  EXPECT_RDMA_ERROR(straddles, ErrorCode::kOutOfBounds, "remote offset 60", id.c_str());
  auto read_only = user_->transfer(make_fetch_add(*hl, readonly, 0, 1));
  EXPECT_RDMA_ERROR(read_only, ErrorCode::kInvalidArgument, "read-only", ro_id.c_str());
  TransferOp wrong_length = make_fetch_add(*hl, remote, 0, 1);
  wrong_length.length = 4;
  auto length = user_->transfer(wrong_length);
  EXPECT_RDMA_ERROR(length, ErrorCode::kInvalidArgument, "needs length 8", "not 4", id.c_str());
  auto no_room = user_->transfer(make_fetch_add(*hl, remote, 0, 1, /*local_offset=*/12));
  EXPECT_RDMA_ERROR(no_room, ErrorCode::kOutOfBounds, "local offset 12", local_id.c_str());
  auto ro_local = user_->transfer(make_fetch_add(*hro, remote, 0, 1));
  EXPECT_RDMA_ERROR(ro_local, ErrorCode::kInvalidArgument, "read-only", ro_local_id.c_str());
  // RdmaClient says the same.
  RdmaClient me(user_->node().system(), user_->manager());
  auto client_misaligned = me.compare_swap(remote, 12, 0, 1);
  ASSERT_FALSE(client_misaligned.ok());
  EXPECT_EQ(client_misaligned.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(client_misaligned.error().message().find("misaligned"), std::string::npos)
      << client_misaligned.error().message();
  // None of them touched the words.
  for (uint64_t i = 0; i < 64; ++i) {
    ASSERT_EQ(counter.bytes[i], pattern(i, 5)) << "byte " << i;
    ASSERT_EQ(ro.bytes[i], pattern(i, 6)) << "read-only byte " << i;
  }

  // Released by its owner: the NIC (rdma) or the owner (fallback) refuses, and the error says
  // why, naming the buffer.
  ASSERT_TRUE(owner_->release(remote.id));
  auto released = user_->transfer(make_fetch_add(*hl, remote, 0, 1));
  EXPECT_RDMA_ERROR(released, ErrorCode::kReleased, id.c_str(), "released");
  auto client_released = me.fetch_add(remote, 0, 1);
  ASSERT_FALSE(client_released.ok());
  EXPECT_EQ(client_released.error().code(), ErrorCode::kReleased)
      << client_released.error().message();
  for (uint64_t i = 0; i < 64; ++i)
    ASSERT_EQ(counter.bytes[i], pattern(i, 5)) << "byte " << i;
}

TEST_F(AtomicsTest, ABatchMixesReadsWritesAndAtomicsWithAnOutcomeEach) {
  // Ops of a batch are not ordered among themselves: each works on bytes of its own.
  Memory theirs(4096, 11), mine(4096, 22);
  set_word(theirs, 0, 1000);
  set_word(theirs, 8, 0);
  set_word(theirs, 16, 5);
  BufferHandle remote = remote_view(*owner_, *user_, theirs, "atomic-batch");
  auto hl = user_->request_buffer(mine);
  ASSERT_TRUE(hl);
  const Memory before_theirs = theirs;
  const Memory before_mine = mine;
  std::vector<TransferOp> ops = {
      make_write(*hl, remote, Range::of(512).at_local(1024).at_remote(1024)),
      make_fetch_add(*hl, remote, 0, 7, /*local_offset=*/0),
      make_read(*hl, remote, Range::of(512).at_local(2048).at_remote(2048)),
      make_compare_swap(*hl, remote, 8, 0, 77, /*local_offset=*/8),
      make_compare_swap(*hl, remote, 16, 6, 99, /*local_offset=*/16),  // 5 != 6: no swap
      make_fetch_add(*hl, remote, 36, 1, /*local_offset=*/24),         // misaligned
  };
  auto outcomes = user_->batch(ops);
  ASSERT_TRUE(outcomes) << error_message(outcomes.error());
  ASSERT_EQ(outcomes->size(), ops.size());
  for (size_t i = 0; i < 5; ++i) {
    const TransferOutcome& o = (*outcomes)[i];
    EXPECT_TRUE(o.ok()) << "op " << i << ": " << o.message;
    EXPECT_EQ(o.path, expected_path()) << "op " << i;
    EXPECT_EQ(o.bytes, i == 0 || i == 2 ? 512u : kAtomicBytes) << "op " << i;
  }
  EXPECT_EQ((*outcomes)[5].code, static_cast<uint8_t>(ErrorCode::kInvalidArgument));
  EXPECT_NE((*outcomes)[5].message.find("misaligned"), std::string::npos) << (*outcomes)[5].message;
  // Old values in the local buffer, new words in the remote one.
  EXPECT_EQ(word_at(mine, 0), 1000u);
  EXPECT_EQ(word_at(mine, 8), 0u);
  EXPECT_EQ(word_at(mine, 16), 5u);
  EXPECT_EQ(word_at(theirs, 0), 1007u);
  EXPECT_EQ(word_at(theirs, 8), 77u);
  EXPECT_EQ(word_at(theirs, 16), 5u);
  // Every other byte: written, read, or untouched.
  for (uint64_t i = 24; i < 4096; ++i) {
    const bool written = i >= 1024 && i < 1536;
    const bool read = i >= 2048 && i < 2560;
    ASSERT_EQ(theirs.bytes[i], written ? before_mine.bytes[i] : before_theirs.bytes[i])
        << "remote byte " << i;
    ASSERT_EQ(mine.bytes[i], read ? before_theirs.bytes[i] : before_mine.bytes[i])
        << "local byte " << i;
  }
}

// -- several processes ---------------------------------------------------------------------------

std::string adder_binary() {
  return runfile("tests/actors/atomic_adder");
}

TEST(AtomicsAcrossProcessesTest, ManyActorsInSeveralProcessesAddToOneCounter) {
  if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
    GTEST_SKIP() << rdma_skip_reason();
  constexpr int kProcesses = 3;
  constexpr int kThreads = 3;
  constexpr int kAdds = 60;
  constexpr int kLocalThreads = 2;
  auto owner = start_node();
  ASSERT_TRUE(owner);
  Memory counter(64, 5);
  set_word(counter, 8, 0);
  auto h = owner->request_buffer(counter);
  ASSERT_TRUE(h);
  {
    RdmaClient publisher(owner->node().system(), owner->manager());
    ASSERT_TRUE(publisher.put("shared-counter", *h).ok());
  }
  std::vector<std::string> env;
  auto list = DeviceList::get();
  if (expected_path() == kPathRdma && list.ok() && list->size() >= 2)
    env.push_back("CAF_RDMA_DEVICE=rxe1");  // across the wire in the VM
  std::vector<ChildProcess> adders;
  adders.reserve(kProcesses);
  for (int p = 0; p < kProcesses; ++p) {
    auto c = ChildProcess::start(
        {adder_binary(), "127.0.0.1", std::to_string(owner->node().port()), "shared-counter", "8",
         std::to_string(kThreads), std::to_string(kAdds)},
        env);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    adders.push_back(std::move(*c));
  }
  // The owner's own actors add at the same time.
  std::mutex mu;
  std::vector<uint64_t> olds;
  std::vector<std::thread> locals;
  locals.reserve(kLocalThreads);
  for (int t = 0; t < kLocalThreads; ++t)
    locals.emplace_back([&] {
      RdmaClient me(owner->node().system(), owner->manager());
      for (int i = 0; i < kAdds; ++i) {
        auto old = me.fetch_add(*h, 8, 1);
        ASSERT_TRUE(old.ok()) << old.error().to_string();
        std::lock_guard<std::mutex> lock(mu);
        olds.push_back(*old);
      }
    });
  for (auto& t : locals)
    t.join();
  for (auto& c : adders) {
    for (;;) {
      auto line = c.read_line(seconds(240));
      ASSERT_TRUE(line.ok()) << c.name() << ": " << line.error().to_string();
      if (*line == "DONE")
        break;
      ASSERT_EQ(line->rfind("OLD ", 0), 0u) << c.name() << ": " << *line;
      olds.push_back(std::stoull(line->substr(4)));
    }
    auto code = c.wait_for(seconds(60));
    EXPECT_TRUE(code && *code == 0) << c.name() << " did not exit with 0";
  }
  const uint64_t total = uint64_t{kProcesses} * kThreads * kAdds + uint64_t{kLocalThreads} * kAdds;
  // The owner reads its word through its manager (docs/architecture.md, "Atomics": the owner's
  // code, too, goes through the manager): a fetch-add of 0 answers the total, and its reply orders
  // every earlier atomic (applied by the manager, or its NIC) before the plain read below.
  {
    RdmaClient me(owner->node().system(), owner->manager());
    auto now = me.fetch_add(*h, 8, 0);
    ASSERT_TRUE(now.ok()) << now.error().to_string();
    EXPECT_EQ(*now, total);
  }
  EXPECT_EQ(word_at(counter, 8), total);
  expect_each_once(olds, total);
  for (uint64_t i = 0; i < 64; ++i) {
    if (i < 8 || i >= 16) {
      ASSERT_EQ(counter.bytes[i], pattern(i, 5)) << "byte " << i;
    }
  }
  std::printf("counter %llu from %d processes and %d local threads\n",
              static_cast<unsigned long long>(word_at(counter, 8)), kProcesses, kLocalThreads);
}

}  // namespace
}  // namespace caf_rdma::testing
