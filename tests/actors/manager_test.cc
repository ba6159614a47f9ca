// RdmaManagerActor, two nodes in one process talking over TCP loopback (handles cross the
// network: serialized, owner arriving as a proxy). Built twice: `manager_fallback_test`
// (native, CAF_RDMA_TRANSPORT=fallback) and `manager_rdma_test` (rdma-tagged, in the VM,
// CAF_RDMA_TRANSPORT=rdma so the fallback is forbidden). Every transfer checks the path taken.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

class ManagerTest : public TwoNodeTest {
protected:
  /// Registers `m` at the owner and returns its handle as the user node sees it: fetched from
  /// the owner's directory through a network proxy.
  BufferHandle owner_buffer(const Memory& m, const std::string& name,
                            BufferAccess a = BufferAccess::kReadWrite) {
    return remote_view(*owner_, *user_, m, name, a);
  }
};

TEST_F(ManagerTest, WriteThenReadBackThroughHandles) {
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{3} << 20}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Memory remote_mem(size), src(size, 17), back(size);
    BufferHandle remote = owner_buffer(remote_mem, "r" + std::to_string(size));
    ASSERT_NE(remote.id, 0u);
    EXPECT_NE(remote.owner.node(), user_->node().system().node()) << "owner is a remote proxy";
    auto local = user_->request_buffer(src);
    auto local_back = user_->request_buffer(back);
    ASSERT_TRUE(local && local_back);
    auto w = user_->transfer(make_write(*local, remote));
    ASSERT_TRUE(w) << error_message(w.error());
    EXPECT_EQ(w->bytes, size);
    EXPECT_EQ(w->path, expected_path());
    EXPECT_EQ(remote_mem.bytes, src.bytes);
    auto r = user_->transfer(make_read(*local_back, remote));
    ASSERT_TRUE(r) << error_message(r.error());
    EXPECT_EQ(r->path, expected_path());
    EXPECT_EQ(back.bytes, src.bytes);
    // The owner frees its memory only after release returns: the stream server may still be
    // returning from the send of the READ's bytes when the requester already has them.
    EXPECT_TRUE(owner_->release(remote.id));
  }
  auto s = user_->stats();
  if (expected_path() == kPathRdma) {
    EXPECT_EQ(s.rdma_ops, 6u);
    EXPECT_FALSE(s.device.empty());
  } else {
    EXPECT_EQ(s.fallback_ops, 6u);
  }
}
TEST_F(ManagerTest, OffsetsAndLengths) {
  Memory remote_mem(10000), src(4000, 3);
  BufferHandle remote = owner_buffer(remote_mem, "off");
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto w = user_->transfer(make_write(*local, remote, 1000, 500, 7000));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(std::memcmp(remote_mem.bytes.data() + 7000, src.bytes.data() + 500, 1000), 0);
  EXPECT_EQ(remote_mem.bytes[6999], 0);
  EXPECT_EQ(remote_mem.bytes[8000], 0);
}
TEST_F(ManagerTest, BadRequestsAreClearErrors) {
  Memory remote_mem(4096), small(100, 1), src(4096, 2);
  BufferHandle remote = owner_buffer(remote_mem, "bad");
  auto local = user_->request_buffer(src);
  auto local_small = user_->request_buffer(small);
  ASSERT_TRUE(local && local_small);

  // Unknown buffer id.
  BufferHandle bogus = *local;
  bogus.id = 999;
  EXPECT_RDMA_ERROR(user_->transfer(make_write(bogus, remote)), ErrorCode::kUnknownBuffer, "999",
                    "unknown");
  // Size mismatch: a whole-span read needs local >= remote.
  EXPECT_RDMA_ERROR(user_->transfer(make_read(*local_small, remote)), ErrorCode::kSizeMismatch,
                    "local span (100 bytes", "remote span (4096 bytes");
  // And a whole-span write needs local <= remote: 4096 bytes do not go into the last 96.
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local, remote, kWholeSpan, 0, 4000)),
                    ErrorCode::kSizeMismatch, "local span (4096 bytes", "remote span (96 bytes");
  for (uint8_t byte : remote_mem.bytes)
    ASSERT_EQ(byte, 0) << "a refused write changed the remote buffer";
  // Out-of-range offset.
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local, remote, 10, 0, 4090)),
                    ErrorCode::kOutOfBounds, "remote offset 4090", "size 4096");
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local, remote, kWholeSpan, 5000)),
                    ErrorCode::kOutOfBounds, "local offset 5000");
  // Zero size.
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local, remote, 0)), ErrorCode::kInvalidArgument,
                    "zero-size");
  EXPECT_RDMA_ERROR(user_->request_buffer(src.addr(), 0), ErrorCode::kInvalidArgument, "size 0");
  // A local buffer must belong to the manager asked.
  EXPECT_RDMA_ERROR(user_->transfer(make_write(remote, *local)), ErrorCode::kInvalidArgument,
                    "not owned by");
  // Read-only destination.
  Memory ro_mem(4096);
  BufferHandle ro = owner_buffer(ro_mem, "ro", BufferAccess::kReadOnly);
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local, ro)), ErrorCode::kInvalidArgument,
                    "read-only");
  auto ok_read = user_->transfer(make_read(*local, ro));
  EXPECT_TRUE(ok_read) << error_message(ok_read.error());
  // Released buffers: local and remote.
  ASSERT_TRUE(user_->release(local_small->id));
  EXPECT_RDMA_ERROR(user_->transfer(make_write(*local_small, remote, 10)), ErrorCode::kReleased,
                    "released");
  EXPECT_RDMA_ERROR(user_->release(local_small->id), ErrorCode::kReleased, "released");
  ASSERT_TRUE(owner_->release(remote.id));
  auto stale = user_->transfer(make_write(*local, remote));
  ASSERT_FALSE(stale);
  // Both paths say `released`: on the RDMA path the owner's NIC rejects the dead rkey, and the
  // requester then asks the owner why.
  EXPECT_EQ(error_code(stale.error()), ErrorCode::kReleased) << error_message(stale.error());
  EXPECT_NE(error_message(stale.error()).find("buffer " + std::to_string(remote.id)),
            std::string::npos)
      << error_message(stale.error());
  EXPECT_EQ(remote_mem.bytes, std::vector<uint8_t>(4096, 0)) << "nothing written after release";
  // The pair still works after the error.
  Memory other(4096);
  BufferHandle other_h = owner_buffer(other, "other");
  auto again = user_->transfer(make_write(*local, other_h));
  ASSERT_TRUE(again) << error_message(again.error());
  EXPECT_EQ(other.bytes, src.bytes);
}

// A pointer the caller got wrong is refused when it is registered, naming it, on every
// transport: ibv_reg_mr checks the pages on a device; a node without one checks its mappings
// (it serves peers with memcpy, and a bogus pointer would crash it at the first transfer).
TEST_F(ManagerTest, MemoryThatIsNotMappedIsRefusedAtRegistration) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(p);
  for (uint64_t i = 0; i < page; ++i)
    base[i] = pattern(i, 7);
  ASSERT_EQ(::mprotect(base, page, PROT_READ), 0);
  ASSERT_EQ(::mprotect(base + page, page, PROT_NONE), 0);
  ASSERT_EQ(::munmap(base + 2 * page, page), 0);
  auto addr = [&](uint64_t i) { return reinterpret_cast<uint64_t>(base + i * page); };
  auto hex = [](uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  auto refused = [&](uint64_t a, uint64_t size, BufferAccess access, const char* what) {
    SCOPED_TRACE(what);
    auto h = owner_->request_buffer(a, size, access);
    ASSERT_FALSE(h) << "registered";
    EXPECT_NE(error_message(h.error()).find(hex(a)), std::string::npos) << error_message(h.error());
  };
  refused(addr(2), page, BufferAccess::kReadOnly, "an unmapped page");
  refused(addr(1), page, BufferAccess::kReadOnly, "a PROT_NONE page");
  refused(addr(0), 2 * page, BufferAccess::kReadOnly, "a readable page then a PROT_NONE one");
  refused(addr(0), page, BufferAccess::kReadWrite, "a read-only page registered read-write");
  refused(8, 4096, BufferAccess::kReadWrite, "the zero page");

  // A read-only page registered read-only is what it says: peers read every byte of it.
  BufferHandle ro = remote_view(*owner_, *user_, addr(0), page, "ro page", BufferAccess::kReadOnly);
  Memory dst(page);
  auto local = user_->request_buffer(dst);
  ASSERT_TRUE(local) << error_message(local.error());
  auto r = user_->transfer(make_read(*local, ro));
  ASSERT_TRUE(r) << error_message(r.error());
  for (uint64_t i = 0; i < page; ++i)
    ASSERT_EQ(dst.bytes[i], pattern(i, 7)) << "byte " << i;
  ASSERT_TRUE(owner_->release(ro.id));
  ::munmap(base, 2 * page);
}

TEST_F(ManagerTest, LoopbackWithinOneManager) {
  Memory a(65536, 4), b(65536);
  auto ha = user_->request_buffer(a);
  auto hb = user_->request_buffer(b);
  ASSERT_TRUE(ha && hb);
  auto w = user_->transfer(make_write(*ha, *hb));
  ASSERT_TRUE(w) << error_message(w.error());
  EXPECT_EQ(w->path, expected_path());
  EXPECT_EQ(a.bytes, b.bytes);
}

// Overlapping ranges of one node (here within one buffer, shifted up and down, by a write and
// by a read): the bytes end as memmove would leave them, on every transport. RDMA gives
// overlapping bytes no order (a loopback WRITE may copy bytes it already overwrote), so the
// manager copies them itself.
TEST_F(ManagerTest, OverlappingRangesWithinOneBufferMoveLikeMemmove) {
  constexpr uint64_t kSize = 256 << 10, kLen = 192 << 10, kShift = 4096 + 3;
  Memory m(kSize, 3);
  auto h = user_->request_buffer(m);
  ASSERT_TRUE(h);
  for (bool is_read : {false, true})
    for (bool up : {true, false}) {
      SCOPED_TRACE(std::string(is_read ? "read" : "write") + (up ? ", shifted up" : ", down"));
      const uint64_t from = up ? 0 : kShift, to = up ? kShift : 0;
      std::vector<uint8_t> expect = m.bytes;
      std::memmove(expect.data() + to, expect.data() + from, kLen);
      // A write moves local -> remote, a read remote -> local: the same shift either way.
      auto r = user_->transfer(is_read ? make_read(*h, *h, kLen, to, from)
                                       : make_write(*h, *h, kLen, from, to));
      ASSERT_TRUE(r) << error_message(r.error());
      EXPECT_EQ(r->bytes, kLen);
      ASSERT_EQ(m.bytes, expect);
    }
}

TEST_F(ManagerTest, TimeoutWhenTheOwnerDoesNotAnswer) {
  Memory src(4096, 1), fake_mem(4096);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto mute = user_->node().system().spawn(silent);
  BufferHandle h = owned_by_mute(*local, mute, fake_mem);
  auto t0 = std::chrono::steady_clock::now();
  auto w = user_->transfer(make_write(*local, h), 300);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_RDMA_ERROR(w, ErrorCode::kTimeout, "300 ms");
  EXPECT_LT(took, 20s);  // its own 300 ms, not a 30 s backstop (generous: loaded CI)
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
}

TEST_F(ManagerTest, TimeoutsOfConcurrentTransfersEachFireOnTime) {
  // Transfers with different timeouts, all to an owner that never answers, started together
  // (their deadlines share one sweep timer): each fails with its own timeout, in time.
  Memory src(4096, 1), fake_mem(4096);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto mute = user_->node().system().spawn(silent);
  BufferHandle h = owned_by_mute(*local, mute, fake_mem);
  const std::vector<uint32_t> timeouts{900, 150, 500, 300};
  std::vector<std::thread> threads;
  std::vector<std::string> messages(timeouts.size());
  std::vector<std::chrono::milliseconds> took(timeouts.size());
  for (size_t i = 0; i < timeouts.size(); ++i)
    threads.emplace_back([&, i] {
      caf::scoped_actor self{user_->node().system()};
      auto t0 = std::chrono::steady_clock::now();
      self->request(user_->manager(), 20s, transfer_atom::value, make_write(*local, h), timeouts[i])
          .receive([&](TransferReply&) { messages[i] = "unexpected success"; },
                   [&](caf::error& e) {
                     messages[i] = error_code(e) == ErrorCode::kTimeout
                                       ? error_message(e)
                                       : "other error: " + error_message(e);
                   });
      took[i] = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - t0);
    });
  for (auto& t : threads)
    t.join();
  for (size_t i = 0; i < timeouts.size(); ++i) {
    EXPECT_NE(messages[i].find(std::to_string(timeouts[i]) + " ms"), std::string::npos)
        << messages[i];
    EXPECT_GE(took[i].count(), timeouts[i] - 5) << "timeout " << timeouts[i];
    EXPECT_LT(took[i].count(), timeouts[i] + 20000) << "timeout " << timeouts[i];
  }
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
}

TEST_F(ManagerTest, ThirtyTwoActorsAtOnce) {
  constexpr int kActors = 32, kRounds = 4;
  constexpr uint64_t kSlice = uint64_t{16} * 1024;
  Memory remote_mem(kActors * kSlice), src(kActors * kSlice, 23), back(kActors * kSlice);
  BufferHandle remote = owner_buffer(remote_mem, "many");
  auto hs = user_->request_buffer(src);
  auto hb = user_->request_buffer(back);
  ASSERT_TRUE(hs && hb);
  std::atomic<int> ok{0}, bad{0};
  const uint8_t* src_bytes = src.bytes.data();
  const uint8_t* back_bytes = back.bytes.data();
  auto worker = [&](caf::event_based_actor* self, int id) -> caf::behavior {
    auto round = std::make_shared<int>(0);
    auto step = std::make_shared<std::function<void()>>();
    // The function holds itself weakly (no cycle, no leak); the pending replies hold it.
    std::weak_ptr<std::function<void()>> weak = step;
    *step = [=, &ok, &bad] {
      auto again = weak.lock();
      uint64_t off = uint64_t(id) * kSlice;
      self->request(user_->manager(), 60s, transfer_atom::value,
                    make_write(*hs, remote, kSlice, off, off), uint32_t{30000})
          .then(
              [=, &ok, &bad](TransferReply&) {
                self->request(user_->manager(), 60s, transfer_atom::value,
                              make_read(*hb, remote, kSlice, off, off), uint32_t{30000})
                    .then(
                        [=, &ok, &bad](TransferReply& r) {
                          bool same = std::memcmp(back_bytes + off, src_bytes + off, kSlice) == 0;
                          if (same && r.path == expected_path())
                            ++ok;
                          else
                            ++bad;
                          if (++*round < kRounds)
                            (*again)();
                          else
                            self->quit();
                        },
                        [=, &bad](caf::error&) {
                          ++bad;
                          self->quit();
                        });
              },
              [=, &bad](caf::error&) {
                ++bad;
                self->quit();
              });
    };
    (*step)();
    return {};
  };
  for (int i = 0; i < kActors; ++i)
    user_->node().system().spawn(worker, i);
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (ok + bad < kActors * kRounds && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ok.load(), kActors * kRounds);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(remote_mem.bytes, src.bytes);
}

TEST_F(ManagerTest, PeerKilledFailsPendingOpsWithItsName) {
  Memory remote_mem(8 << 20), src(8 << 20, 7);
  BufferHandle remote = owner_buffer(remote_mem, "victim");
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  ASSERT_TRUE(user_->transfer(make_write(*local, remote, 4096)));  // connected
  // Fire many transfers, kill the owner's manager while they run.
  std::vector<caf::expected<TransferReply>> replies;
  std::mutex mu;
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (uint64_t i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      caf::scoped_actor s{user_->node().system()};
      for (int k = 0; k < 20; ++k) {
        caf::expected<TransferReply> r{caf::error{}};
        // Each thread its own MiB of the owner's buffer (no two writes to one byte at once).
        s->request(user_->manager(), 60s, transfer_atom::value,
                   make_write(*local, remote, 1 << 20, i << 20, i << 20), uint32_t{20000})
            .receive([&](TransferReply& x) { r = x; }, [&](caf::error& e) { r = e; });
        std::lock_guard<std::mutex> g(mu);
        replies.push_back(r);
        if (!r)
          break;
      }
    });
  EXPECT_TRUE(user_->wait_busy()) << "the transfers never started";
  caf::anon_send_exit(owner_->manager(), caf::exit_reason::kill);
  for (auto& t : threads)
    t.join();
  int errors = 0;
  for (auto& r : replies) {
    if (r)
      continue;
    ++errors;
    EXPECT_EQ(error_code(r.error()), ErrorCode::kPeerUnavailable) << error_message(r.error());
    EXPECT_NE(error_message(r.error()).find(remote.owner_name), std::string::npos)
        << error_message(r.error());
  }
  EXPECT_GT(errors, 0);
  // Afterwards: immediate, named error.
  auto after = user_->transfer(make_write(*local, remote, 16));
  EXPECT_RDMA_ERROR(after, ErrorCode::kPeerUnavailable, remote.owner_name.c_str(), "down");
  // `src` may be freed only after its release (invariant 2): the store chunks of writes that
  // failed may still be on their way out of this process (CAF's middleman serializes them from
  // `src`); the release reply waits until the last one is gone. (Freeing it without the release
  // was the data race ThreadSanitizer reported once in CI.)
  auto released = user_->release(local->id);
  EXPECT_TRUE(released) << error_message(released.error());
}

// Invariant 2 of actors/detail/manager_state.h: after the release reply the caller may free the
// memory, so the reply must wait for the transfer that uses the buffer.
TEST_F(ManagerTest, ReleaseWaitsForTransfersUsingTheBuffer) {
  Memory remote_mem(32 << 20), src(32 << 20, 8);
  BufferHandle remote = owner_buffer(remote_mem, "rel");
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto order = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  auto push = [order, mu](std::string what) {
    std::lock_guard<std::mutex> g(*mu);
    order->push_back(std::move(what));
  };
  auto mgr = user_->manager();
  BufferHandle h = *local;
  // One sender, so the manager sees the transfer before the release.
  user_->node().system().spawn([=](caf::event_based_actor* self) {
    self->request(mgr, 60s, transfer_atom::value, make_write(h, remote), uint32_t{30000})
        .then([=](TransferReply&) { push("transfer"); },
              [=](caf::error& e) { push("transfer failed: " + error_message(e)); });
    self->request(mgr, 60s, release_buffer_atom::value, h.id)
        .then([=](uint64_t) { push("release"); },
              [=](caf::error& e) { push("release failed: " + error_message(e)); });
    // Asked after the release (same sender, so in this order), while the release waits: the
    // buffer is refused at once, even though its entry still exists.
    self->request(mgr, 60s, transfer_atom::value, make_write(h, remote, 16), uint32_t{30000})
        .then([=](TransferReply&) { push("late transfer accepted"); },
              [=](caf::error& e) {
                push(error_code(e) == ErrorCode::kReleased ? "late transfer: released"
                                                           : "late transfer: " + error_message(e));
              });
  });
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> g(*mu);
      if (order->size() == 3)
        break;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::lock_guard<std::mutex> g(*mu);
  ASSERT_EQ(order->size(), 3u);
  EXPECT_EQ((*order)[0], "late transfer: released");
  EXPECT_EQ((*order)[1], "transfer");
  EXPECT_EQ((*order)[2], "release");
  EXPECT_EQ(remote_mem.bytes, src.bytes);
}

}  // namespace
}  // namespace caf_rdma::testing
