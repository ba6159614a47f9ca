// Write notifications (actors/manager/write_notices.h, manager invariants 15-17), on both
// transports (transport_test: fallback natively, rdma in the Soft-RoCE VM): the watcher of a
// buffer hears of each write that asks for it, once, after its bytes are in place (it checks
// them itself when the notice comes), before the writer's reply; a batch notifies per op; every
// error names what was wrong and says that the bytes were written; a writer cannot make an
// owner hold more than kMaxPendingNotices unanswered notices.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <vector>

#include "actors/rdma_client.h"
#include "tests/actors/expect_rdma_error.h"
#include "tests/actors/two_node_test.h"

namespace caf_rdma::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

/// What a watcher actor saw: each notice, and whether the bytes it names already held what
/// the write with its tag wrote when the notice came.
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<WriteNotice> notices;
  std::vector<std::string> wrong;  ///< one line per notice whose bytes were not in place

  bool wait_for(size_t n, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return notices.size() >= n; });
  }
};

/// The byte a write with `tag` puts at offset `i` of its range.
uint8_t written_byte(uint64_t tag, uint64_t i) {
  return pattern(i, static_cast<uint32_t>(tag) + 1);
}

/// A watcher in the owner's actor system that checks the notified range of `target` against
/// what the write with that tag wrote, at the moment the notice arrives.
caf::actor spawn_checking_watcher(caf::actor_system& sys, const Memory& target,
                                  const std::shared_ptr<Seen>& seen) {
  const uint8_t* base = target.bytes.data();
  return sys.spawn([base, seen](caf::event_based_actor*) -> caf::behavior {
    return {[base, seen](write_notice_atom, const WriteNotice& n) {
      std::string bad;
      for (uint64_t i = 0; i < n.length && bad.empty(); ++i)
        if (base[n.offset + i] != written_byte(n.tag, i))
          bad = "tag " + std::to_string(n.tag) + ": byte " + std::to_string(i) + " of [" +
                std::to_string(n.offset) + ", +" + std::to_string(n.length) +
                ") not in place when its notice came";
      std::lock_guard<std::mutex> lock(seen->mu);
      seen->notices.push_back(n);
      if (!bad.empty())
        seen->wrong.push_back(bad);
      seen->cv.notify_all();
    }};
  });
}

/// `client`, of `owner`'s node, has a checking watcher (above) watch its buffer `id`.
Status watch_checking(RdmaClient& client, TestNode& owner, uint64_t id, const Memory& target,
                      const std::shared_ptr<Seen>& seen) {
  return client.watch_writes(id, spawn_checking_watcher(owner.node().system(), target, seen));
}

class WriteNoticesTest : public TwoNodeTest {
protected:
  /// Both nodes again, with the fallback's small writes (under 256 KiB) in CAF chunks rather
  /// than on the stream channel (ManagerOptions::stream_min_bytes; its default is 1): the cases
  /// that need both the chunks' receipts and the stream's grants, or writes that reach the
  /// owner's actor one after another.
  void small_writes_in_chunks() {
    ManagerOptions extra;
    extra.stream_min_bytes = 256 << 10;
    ASSERT_TRUE(restart(extra));
  }
};

TEST_F(WriteNoticesTest, TheWatcherHearsOfEachNotifyWriteOnceAfterItsBytesAreInPlace) {
  // Small writes (chunks on the fallback) and large ones (its stream channel), and plain
  // writes in between, which notify nobody.
  small_writes_in_chunks();
  const std::vector<uint64_t> sizes = {1, 8, 4096, 65536, 1 << 20, 3 << 20};
  uint64_t total = 0;
  for (uint64_t s : sizes)
    total += s + 64;
  Memory target(total);
  BufferHandle remote = remote_view(*owner_, *user_, target, "notified");
  auto seen = std::make_shared<Seen>();
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  caf::actor watcher = spawn_checking_watcher(owner_->node().system(), target, seen);
  ASSERT_TRUE(owner_client.watch_writes(remote.id, watcher).ok());

  RdmaClient writer(user_->node().system(), user_->manager());
  uint64_t offset = 0;
  uint64_t tag = 100;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // offset, length of each notify write
  for (uint64_t s : sizes) {
    Memory src(s);
    for (uint64_t i = 0; i < s; ++i)
      src.bytes[i] = written_byte(tag, i);
    auto local = writer.register_buffer(src.bytes.data(), s);
    ASSERT_TRUE(local.ok()) << local.error().to_string();
    auto r = writer.write_notify(local->handle(), remote, tag, Range::of(s).at_remote(offset));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->bytes, s);
    EXPECT_EQ(r->path, expected_path());
    // A plain write notifies nobody.
    Memory plain(64, 9);
    auto pl = writer.register_buffer(plain.bytes.data(), 64);
    ASSERT_TRUE(pl.ok());
    ASSERT_TRUE(writer.write(pl->handle(), remote, Range::of(64).at_remote(offset + s)).ok());
    ranges.emplace_back(offset, s);
    offset += s + 64;
    ++tag;
  }
  ASSERT_TRUE(seen->wait_for(sizes.size(), seconds(30)));
  std::lock_guard<std::mutex> lock(seen->mu);
  EXPECT_TRUE(seen->wrong.empty()) << seen->wrong.front();
  ASSERT_EQ(seen->notices.size(), sizes.size()) << "one notice per notify write, none for others";
  for (size_t k = 0; k < sizes.size(); ++k) {
    const WriteNotice& n = seen->notices[k];  // the writer waited for each reply: in order
    EXPECT_EQ(n.buffer, remote.id);
    EXPECT_EQ(n.offset, ranges[k].first);
    EXPECT_EQ(n.length, ranges[k].second);
    EXPECT_EQ(n.tag, 100 + k);
    EXPECT_NE(n.writer.find(std::to_string(user_->node().port())), std::string::npos) << n.writer;
    EXPECT_EQ(n.writer_node, caf::to_string(user_->node().system().node()));
  }
  // Every byte moved, and the plain writes' bytes.
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (uint64_t i = 0; i < ranges[k].second; ++i)
      ASSERT_EQ(target.bytes[ranges[k].first + i], written_byte(100 + k, i))
          << "write " << k << " byte " << i;
    for (uint64_t i = 0; i < 64; ++i)
      ASSERT_EQ(target.bytes[ranges[k].first + ranges[k].second + i], pattern(i, 9));
  }
  auto stats = owner_client.stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->notices_sent, sizes.size());
  auto wstats = writer.stats();
  ASSERT_TRUE(wstats.ok());
  EXPECT_EQ(wstats->notified_writes, sizes.size());
}

TEST_F(WriteNoticesTest, ABatchNotifiesPerOpThatAsks) {
  constexpr uint64_t kOps = 6;
  constexpr uint64_t kBytes = 2048;
  Memory target(kOps * kBytes);
  BufferHandle remote = remote_view(*owner_, *user_, target, "batch-notified");
  auto seen = std::make_shared<Seen>();
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(watch_checking(owner_client, *owner_, remote.id, target, seen).ok());
  RdmaClient writer(user_->node().system(), user_->manager());
  Memory src(kOps * kBytes);
  for (uint64_t k = 0; k < kOps; ++k)
    for (uint64_t i = 0; i < kBytes; ++i)
      src.bytes[k * kBytes + i] = written_byte(k, i);
  auto local = writer.register_buffer(src.bytes.data(), src.bytes.size());
  ASSERT_TRUE(local.ok());
  std::vector<TransferOp> ops;
  for (uint64_t k = 0; k < kOps; ++k) {
    Range r = Range::of(kBytes).at_local(k * kBytes).at_remote(k * kBytes);
    // Every other op asks for a notice.
    ops.push_back(k % 2 == 0 ? make_notify_write(local->handle(), remote, k, r)
                             : make_write(local->handle(), remote, r));
  }
  auto out = writer.batch(ops, 30000);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  for (const auto& o : *out)
    ASSERT_TRUE(o.ok()) << o.message;
  ASSERT_TRUE(seen->wait_for(kOps / 2, seconds(30)));
  std::lock_guard<std::mutex> lock(seen->mu);
  EXPECT_TRUE(seen->wrong.empty()) << seen->wrong.front();
  ASSERT_EQ(seen->notices.size(), kOps / 2);
  std::vector<uint64_t> tags;
  for (const auto& n : seen->notices)
    tags.push_back(n.tag);
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, (std::vector<uint64_t>{0, 2, 4}));
  for (uint64_t i = 0; i < target.bytes.size(); ++i)
    ASSERT_EQ(target.bytes[i], src.bytes[i]) << "byte " << i;
}

TEST_F(WriteNoticesTest, AClientWatchesAndTakesItsNoticesInOrder) {
  Memory target(4096);
  BufferHandle remote = remote_view(*owner_, *user_, target, "client-notified");
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(owner_client.watch_writes(remote.id).ok());
  RdmaClient writer(user_->node().system(), user_->manager());
  Memory src(4096, 4);
  auto local = writer.register_buffer(src.bytes.data(), src.bytes.size());
  ASSERT_TRUE(local.ok());
  for (uint64_t k = 0; k < 3; ++k) {
    auto r = writer.write_notify(local->handle(), remote, 7 + k,
                                 Range::of(512).at_local(k * 512).at_remote(k * 1024));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  for (uint64_t k = 0; k < 3; ++k) {
    auto n = owner_client.next_notice(seconds(10));
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    EXPECT_EQ(n->tag, 7 + k);
    EXPECT_EQ(n->offset, k * 1024);
    EXPECT_EQ(n->length, 512u);
    for (uint64_t i = 0; i < 512; ++i)
      ASSERT_EQ(target.bytes[k * 1024 + i], src.bytes[k * 512 + i]) << "write " << k;
  }
  // Exactly one per write: nothing more comes.
  auto none = owner_client.next_notice(milliseconds(300));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kTimeout);
  EXPECT_NE(none.error().message().find("no write notice"), std::string::npos);
  // An invalid actor stops them: the next notify write says nobody watches.
  ASSERT_TRUE(owner_client.watch_writes(remote.id, caf::actor{}).ok());
  auto unwatched = writer.write_notify(local->handle(), remote, 1, Range::of(16));
  ASSERT_FALSE(unwatched.ok());
  EXPECT_EQ(unwatched.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unwatched.error().message().find("nobody watches"), std::string::npos)
      << unwatched.error().message();
}

TEST_F(WriteNoticesTest, EveryErrorNamesWhatWasWrong) {
  Memory target(1024);
  BufferHandle remote = remote_view(*owner_, *user_, target, "notice-errors");
  RdmaClient writer(user_->node().system(), user_->manager());
  Memory src(256, 6);
  auto local = writer.register_buffer(src.bytes.data(), src.bytes.size());
  ASSERT_TRUE(local.ok());

  // Nobody watches: the bytes are written, and the error says so.
  auto r = writer.write_notify(local->handle(), remote, 3, Range::of(256).at_remote(512));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  for (const std::string& frag :
       {std::string("were written"), std::string("not notified"), std::string("nobody watches"),
        std::string("watch_writes"), "buffer " + std::to_string(remote.id)})
    EXPECT_NE(r.error().message().find(frag), std::string::npos) << r.error().message();
  for (uint64_t i = 0; i < 256; ++i)
    ASSERT_EQ(target.bytes[512 + i], src.bytes[i]) << "byte " << i;

  // Only writes notify.
  TransferOp read = make_read(local->handle(), remote, Range::of(16));
  read.notify = true;
  auto rr = writer.transfer(read, 10000);
  ASSERT_FALSE(rr.ok());
  EXPECT_EQ(rr.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(rr.error().message().find("only writes notify"), std::string::npos)
      << rr.error().message();

  // Watching an unknown or released buffer.
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  Status unknown = owner_client.watch_writes(987654);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), ErrorCode::kUnknownBuffer);
  EXPECT_NE(unknown.error().message().find("987654"), std::string::npos);
  ASSERT_TRUE(owner_client.watch_writes(remote.id).ok());
  ASSERT_TRUE(owner_client.release(remote.id).ok());
  Status released = owner_client.watch_writes(remote.id);
  ASSERT_FALSE(released.ok());
  EXPECT_EQ(released.error().code(), ErrorCode::kReleased);

  // Another node may not choose who watches this node's buffers.
  auto remote_mgr = user_->node().remote_manager("127.0.0.1", owner_->node().port());
  ASSERT_TRUE(remote_mgr.ok());
  caf::scoped_actor self{user_->node().system()};
  self->request(*remote_mgr, seconds(10), watch_writes_atom::value, uint64_t{1}, caf::actor{})
      .receive([](bool) { ADD_FAILURE() << "a peer chose the watcher of another node's buffer"; },
               [](caf::error& e) {
                 EXPECT_EQ(error_code(e), ErrorCode::kPermissionDenied) << error_message(e);
               });
}

/// Each sweep write's size (odd: its last byte is no other write's) and their number.
constexpr uint64_t kSweepBytes = (2 << 20) + 3;
constexpr uint64_t kSweepWrites = 32;

/// Notify writes with timeouts around one write's duration, into `remote` (watched by a
/// checking watcher whose notices land in `seen`), from `writer`: each answer is true. An ok
/// write notified exactly once; a failed one notified nobody (its bytes may have moved); a
/// retry of a failed one with time enough notifies exactly once (write_notices.h invariant 16).
void sweep_notify_timeouts(RdmaClient& writer, const BufferHandle& remote, Memory& target,
                           const std::shared_ptr<Seen>& seen) {
  constexpr uint64_t kBytes = kSweepBytes;
  constexpr uint64_t kWrites = kSweepWrites;
  ASSERT_GE(target.bytes.size(), (kWrites + 1) * kBytes + 8);
  std::vector<Memory> src;
  std::vector<RegisteredBuffer> local;
  for (uint64_t k = 0; k <= kWrites; ++k) {
    src.emplace_back(kBytes);
    for (uint64_t i = 0; i < kBytes; ++i)
      src.back().bytes[i] = written_byte(1000 + k, i);
    auto l = writer.register_buffer(src.back().bytes.data(), kBytes);
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    local.push_back(std::move(*l));
  }
  auto write = [&](uint64_t k, milliseconds timeout) {
    return writer.write_notify(local[k].handle(), remote, 1000 + k,
                               Range::of(kBytes).at_remote(k * kBytes), timeout);
  };
  // One write's duration, with time enough, after a first one that pays for first contact
  // (both notify too: counted below).
  auto warm = write(kWrites, seconds(30));
  ASSERT_TRUE(warm.ok()) << warm.error().to_string();
  // Its watcher done checking slot kWrites before the timed write rewrites it (the reply comes
  // once the notice left, not once it was handled: ThreadSanitizer saw the two overlap).
  ASSERT_TRUE(seen->wait_for(1, seconds(30)));
  const auto t0 = std::chrono::steady_clock::now();
  auto first = write(kWrites, seconds(30));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  const auto d = std::max<int64_t>(
      1, std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count());
  std::vector<bool> ok(kWrites, false);
  std::vector<std::string> why(kWrites);
  for (uint64_t k = 0; k < kWrites; ++k) {
    // 0.3x to 1.5x the duration: some end while the data moves, some while the notice does.
    const auto step = static_cast<int64_t>(k) * 120 / static_cast<int64_t>(kWrites - 1);
    auto r = write(k, milliseconds(std::max<int64_t>(1, d * (30 + step) / 100)));
    ok[k] = r.ok();
    if (!r.ok()) {
      why[k] = r.error().to_string();
      EXPECT_NE(r.error().code(), ErrorCode::kPeerUnavailable)
          << "write " << k << ": the owner answered every notice on this healthy link: " << why[k];
    }
  }
  // Retries with time enough, then a sentinel: its notice comes after every notice sent before
  // it (one writer manager, one owner manager, one watcher: in order).
  for (uint64_t k = 0; k < kWrites; ++k)
    if (!ok[k]) {
      auto r = write(k, seconds(30));
      ASSERT_TRUE(r.ok()) << "retry of write " << k << ": " << r.error().to_string();
    }
  const uint64_t sentinel_tag = 999999;
  Memory sentinel(8);
  for (uint64_t i = 0; i < 8; ++i)
    sentinel.bytes[i] = written_byte(sentinel_tag, i);
  auto sl = writer.register_buffer(sentinel.bytes.data(), 8);
  ASSERT_TRUE(sl.ok()) << sl.error().to_string();
  auto s = writer.write_notify(sl->handle(), remote, sentinel_tag,
                               Range::of(8).at_remote((kWrites + 1) * kBytes), seconds(30));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const auto due = std::chrono::steady_clock::now() + seconds(30);
  std::unique_lock<std::mutex> lock(seen->mu);
  ASSERT_TRUE(seen->cv.wait_until(lock, due, [&] {
    return std::any_of(seen->notices.begin(), seen->notices.end(),
                       [&](const WriteNotice& n) { return n.tag == sentinel_tag; });
  }));
  std::map<uint64_t, int> count;
  for (const auto& n : seen->notices)
    ++count[n.tag];
  uint64_t failed = 0;
  for (uint64_t k = 0; k < kWrites; ++k) {
    // Exactly one: the first write's when it succeeded, the retry's when it failed (a failed
    // write that notified too would make two).
    EXPECT_EQ(count[1000 + k], 1) << "write " << k << (ok[k] ? " succeeded" : " failed: " + why[k]);
    failed += ok[k] ? 0 : 1;
  }
  EXPECT_EQ(count[1000 + kWrites], 2);  // the warm-up write and the timed one
  // Each notice's bytes were in place when it came (the watcher checked the retry's, whose
  // bytes are the same), and every byte is there now, the bytes between ranges untouched.
  EXPECT_TRUE(seen->wrong.empty()) << seen->wrong.front();
  for (uint64_t k = 0; k <= kWrites; ++k)
    for (uint64_t i = 0; i < kBytes; ++i)
      ASSERT_EQ(target.bytes[k * kBytes + i], written_byte(1000 + k, i)) << "write " << k;
  std::cout << "[ sweep    ] one notify write " << d << " ms; " << failed << " of " << kWrites
            << " failed within their timeouts, each without a notice" << std::endl;
}

TEST_F(WriteNoticesTest, ANotifyWriteThatFailsNotifiesNobodyAndOneThatSucceedsNotifiesOnce) {
  Memory target((kSweepWrites + 1) * kSweepBytes + 64);
  BufferHandle remote = remote_view(*owner_, *user_, target, "sweep");
  auto seen = std::make_shared<Seen>();
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(watch_checking(owner_client, *owner_, remote.id, target, seen).ok());
  RdmaClient writer(user_->node().system(), user_->manager());
  sweep_notify_timeouts(writer, remote, target, seen);
}

TEST_F(WriteNoticesTest, ANotifyWriteIntoThisNodesBufferIsAsExact) {
  Memory target((kSweepWrites + 1) * kSweepBytes + 64);
  auto seen = std::make_shared<Seen>();
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  auto mine = owner_client.register_buffer(target.bytes.data(), target.bytes.size());
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  ASSERT_TRUE(watch_checking(owner_client, *owner_, mine->handle().id, target, seen).ok());
  sweep_notify_timeouts(owner_client, mine->handle(), target, seen);
}

TEST_F(WriteNoticesTest, AWriterCannotMakeTheOwnerHoldUnansweredNoticesBeyondTheLimit) {
  small_writes_in_chunks();  // the batch's writes, below, reach the owner's actor in turn
  Memory target(64);
  BufferHandle remote = remote_view(*owner_, *user_, target, "flooded");
  // A client that watches and takes nothing: every notice stays unanswered.
  RdmaClient owner_client(owner_->node().system(), owner_->manager());
  ASSERT_TRUE(owner_client.watch_writes(remote.id).ok());
  RdmaClient writer(user_->node().system(), user_->manager());
  Memory src(8, 2);
  auto local = writer.register_buffer(src.bytes.data(), 8);
  ASSERT_TRUE(local.ok());
  // The first op to an owner takes its stream channel to learn its endpoint: a plain write
  // first, so that the batch's writes, which all put the same bytes in the same place, take
  // the owner's chunk path one after another (writes into overlapping bytes that run at once
  // come in no order: the stream's worker and the owner's actor would race).
  auto first = writer.write(local->handle(), remote, Range::of(8).at_remote(8));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  constexpr uint64_t kExtra = 20;
  std::vector<TransferOp> ops;
  for (uint64_t k = 0; k < kMaxPendingNotices + kExtra; ++k)
    ops.push_back(make_notify_write(local->handle(), remote, k, Range::of(8).at_remote(8)));
  auto out = writer.batch(ops, 120000);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  uint64_t ok = 0;
  uint64_t refused = 0;
  for (const auto& o : *out) {
    if (o.ok()) {
      ++ok;
      continue;
    }
    ++refused;
    EXPECT_EQ(o.code, static_cast<uint8_t>(ErrorCode::kResourceExhausted)) << o.message;
    EXPECT_NE(o.message.find("limit " + std::to_string(kMaxPendingNotices)), std::string::npos)
        << o.message;
    EXPECT_NE(o.message.find("were written"), std::string::npos) << o.message;
  }
  EXPECT_EQ(ok, kMaxPendingNotices);
  EXPECT_EQ(refused, kExtra);
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_EQ(target.bytes[8 + i], src.bytes[i]);
  auto stats = owner_client.stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->notices_pending, kMaxPendingNotices);
  EXPECT_EQ(stats->notices_refused, kExtra);
  // Taking notices answers them: the owner counts them no more, and notices flow again.
  for (uint64_t k = 0; k < kMaxPendingNotices; ++k) {
    auto n = owner_client.next_notice(seconds(10));
    ASSERT_TRUE(n.ok()) << n.error().to_string();
  }
  // The answers reach the owner's manager as messages of their own: wait until it counted them.
  const auto due = std::chrono::steady_clock::now() + seconds(10);
  uint64_t pending = kMaxPendingNotices;
  while (pending > 0 && std::chrono::steady_clock::now() < due) {
    auto s = owner_client.stats();
    ASSERT_TRUE(s.ok());
    pending = s->notices_pending;
  }
  ASSERT_EQ(pending, 0u);
  auto again = writer.write_notify(local->handle(), remote, 1, Range::of(8));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  auto last = owner_client.next_notice(seconds(10));
  ASSERT_TRUE(last.ok()) << last.error().to_string();
}

}  // namespace
}  // namespace caf_rdma::testing
