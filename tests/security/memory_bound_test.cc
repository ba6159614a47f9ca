// What peers make an owner hold on the fallback (docs/security.md, manager invariants 7
// and 11): the fetch answers on their way to a peer are bounded by its window, also when the
// peer never reads them, and the memory a burst took goes back afterwards.
//
// The owner runs in a process of its own (memory_owner), so its RSS is its own: the test reads
// /proc/<pid>/statm (before, at each completed read, after) and asks the owner for glibc's view
// ("mem") for the messages. The reader's node uses CAF chunks only (stream_min_bytes 0): the
// stream channel moves bytes straight from the registered buffer, chunks are what an owner holds.
//
// Bounds, with W the owner's peer_window_bytes: the answers on their way to a peer are at most W
// (as copies, and serialized in CAF's write buffers). What stays after a burst is CAF's: the two
// write buffers of the connection (std::vectors it clears and never shrinks) keep up to W each,
// and the smaller blocks their doublings left (less than W in all) stay in a glibc thread
// arena's top, which malloc_trim does not shrink; during a burst a window of copies comes on
// top. kSlack covers CAF's messages and the heap's bookkeeping. Before the windows, the same
// scenarios took the owner from 79.6 MB to 772 MB (kept) and to 650 MB.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/rdma_client.h"
#include "components/secure_random.h"
#include "support/child_process.h"
#include "tests/actors/manager_fixture.h"
#include "tests/sanitizer_build.h"
#include "tests/security/raw_basp_client.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kOwnerBytes = 64 * kMiB;
constexpr uint32_t kSeed = 3;
/// The owner's windows (ManagerOptions::peer_window_bytes, total_window_bytes, window_wait).
constexpr uint64_t kWindow = 16 * kMiB;
constexpr uint64_t kTotal = 64 * kMiB;
constexpr uint32_t kWaitMs = 30000;
constexpr uint64_t kSlack = 16 * kMiB;
/// Under AddressSanitizer or ThreadSanitizer (their lanes build the owner with them too) the
/// owner's RSS is mostly the sanitizer's (shadow memory, a quarantine of freed blocks that
/// malloc_trim cannot give back): the bounds are checked in the native lane only; the rest of
/// each test (every byte, the windows' counters) runs everywhere.
constexpr bool kRssIsTheOwners = !kAddressSanitizer && !kThreadSanitizer;

uint8_t owner_byte(uint64_t i) {
  return static_cast<uint8_t>(i * 7 + kSeed);
}

uint64_t rss_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  uint64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * 4096;
}

double mb(uint64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

class MemoryBoundTest : public ::testing::Test {
protected:
  void SetUp() override {
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    ASSERT_TRUE(env.ok()) << env.error().to_string();
    o.manager = *env;
    o.manager.stream_min_bytes = 0;  // CAF chunks only: what an owner holds for its readers
    auto n = RdmaNode::start(o);
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    reader_ = std::make_unique<TestNode>(std::move(*n));
    auto c = ChildProcess::start(
        {runfile("tests/security/memory_owner"), std::to_string(kOwnerBytes), std::to_string(kSeed),
         std::to_string(kWindow), std::to_string(kTotal), std::to_string(kWaitMs)});
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    auto line = c->read_line(std::chrono::seconds(60));
    ASSERT_TRUE(line.ok() && line->rfind("READY ", 0) == 0)
        << (line.ok() ? *line : line.error().to_string());
    owner_.emplace(std::move(*c));
    port_ = static_cast<uint16_t>(std::stoul(line->substr(6)));
    auto mgr = reader_->node().remote_manager("127.0.0.1", port_);
    ASSERT_TRUE(mgr.ok()) << mgr.error().to_string();
    owner_mgr_ = caf::actor_cast<caf::actor>(*mgr);
    auto h = RdmaClient(reader_->node().system(), *mgr).get("owner-buffer", 10000);
    ASSERT_TRUE(h.ok()) << h.error().to_string();
    remote_ = *h;
  }
  void TearDown() override {
    owner_mgr_ = nullptr;
    owner_.reset();
    reader_.reset();
  }

  uint64_t owner_rss() { return rss_of(owner_->pid()); }

  /// glibc's view of the owner's memory, for messages.
  std::string owner_mem() {
    if (!owner_->write_line("mem").ok())
      return "?";
    auto line = owner_->read_line(std::chrono::seconds(30));
    return line.ok() ? *line : line.error().to_string();
  }

  /// The owner's counters, asked through its facade (as any peer may).
  ManagerStats owner_stats() {
    ManagerStats out;
    caf::scoped_actor self{reader_->node().system()};
    self->request(owner_mgr_, std::chrono::seconds(30), stats_atom::value)
        .receive([&](ManagerStats& s) { out = std::move(s); },
                 [&](caf::error& e) { ADD_FAILURE() << "owner stats: " << error_message(e); });
    return out;
  }

  /// Waits (up to `limit`) until `pred(owner_stats())` holds; the last stats seen.
  ManagerStats wait_owner(const std::function<bool(const ManagerStats&)>& pred,
                          std::chrono::seconds limit = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    ManagerStats s = owner_stats();
    while (!pred(s) && std::chrono::steady_clock::now() < deadline)
      s = owner_stats();
    return s;
  }

  struct Burst {
    uint64_t reads_ok = 0;
    uint64_t bad_bytes = 0;
    std::vector<std::string> errors;
    uint64_t peak_rss = 0;  ///< the owner's, at each completed read
  };

  /// `total` reads of 1 MiB of the owner's buffer, `depth` on their way at once, each into a
  /// slot of its own that is checked byte by byte and zeroed before its next read.
  Burst read_burst(uint64_t total, uint32_t depth) {
    constexpr uint32_t kTimeoutMs = 60000;
    Memory local(depth * kMiB);
    auto lh = reader_->request_buffer(local);
    EXPECT_TRUE(lh) << error_message(lh.error());
    if (!lh)
      return {};
    auto result = std::make_shared<std::promise<Burst>>();
    auto done = result->get_future();
    auto mgr = reader_->manager();
    BufferHandle remote = remote_;
    BufferHandle mine = *lh;
    uint8_t* base = local.bytes.data();
    pid_t pid = owner_->pid();
    auto burst = reader_->node().system().spawn([=](caf::event_based_actor* self) {
      struct State {
        Burst b;
        uint64_t next = 0, finished = 0;
        std::function<void(uint32_t)> issue;
      };
      auto st = std::make_shared<State>();
      auto finish_one = [=](uint32_t slot) {
        st->b.peak_rss = std::max(st->b.peak_rss, rss_of(pid));
        if (++st->finished == total) {
          st->issue = nullptr;  // no cycle through the lambdas
          return result->set_value(st->b);
        }
        if (st->next < total)
          st->issue(slot);
      };
      st->issue = [=, st = st.get()](uint32_t slot) {
        const uint64_t roff = (st->next++ % (kOwnerBytes / kMiB)) * kMiB;
        self->request(mgr, std::chrono::milliseconds(kTimeoutMs) + std::chrono::seconds(30),
                      transfer_atom::value, make_read(mine, remote, kMiB, slot * kMiB, roff),
                      kTimeoutMs)
            .then(
                [=](TransferReply&) {
                  uint8_t* p = base + slot * kMiB;
                  for (uint64_t i = 0; i < kMiB; ++i)
                    st->b.bad_bytes += p[i] != owner_byte(roff + i) ? 1 : 0;
                  std::memset(p, 0, kMiB);
                  ++st->b.reads_ok;
                  finish_one(slot);
                },
                [=](caf::error& e) {
                  if (st->b.errors.size() < 5)
                    st->b.errors.push_back(error_message(e));
                  finish_one(slot);
                });
      };
      for (uint32_t s = 0; s < depth && st->next < total; ++s)
        st->issue(s);
    });
    // Every read ends by its timeout, so this wait ends too (it only bounds a broken build).
    if (done.wait_for(std::chrono::milliseconds(kTimeoutMs) * 2 + std::chrono::seconds(60)) !=
        std::future_status::ready) {
      ADD_FAILURE() << "the burst never ended";
      // `local` goes when this returns: first the actor that checks and zeroes its slots, then
      // the reads still on their way into it (the release waits for them: this node's own).
      caf::scoped_actor self{reader_->node().system()};
      self->monitor(burst);
      caf::anon_send_exit(burst, caf::exit_reason::kill);
      self->receive([](const caf::down_msg&) {},
                    caf::after(std::chrono::seconds(30)) >> [] { ADD_FAILURE() << "still alive"; });
      EXPECT_TRUE(reader_->release(lh->id));
      return {};
    }
    Burst b = done.get();
    EXPECT_TRUE(reader_->release(lh->id));
    return b;
  }

  std::unique_ptr<TestNode> reader_;
  std::optional<ChildProcess> owner_;
  uint16_t port_ = 0;
  caf::actor owner_mgr_;
  BufferHandle remote_;
};

// The honest burst's reads of 1 MiB: 640 (40 windows of 16 MiB), over which the owner's RSS is
// bounded: 8 times the bound (4 windows and the slack, 80 MiB) had every answer been kept, as it
// was before the windows (the finding's 2000 reads took the owner to 1.76 GB; run here, they
// took 45 s, the native lane's longest test case). Under a sanitizer, where RSS is not checked
// (kRssIsTheOwners), 160 (10 windows' worth) drive the same cycle, every byte checked: windows
// filled, proven read, freed and filled again (320 took 80 s under TSan, the lane's longest).
constexpr uint64_t kBurstReads = kRssIsTheOwners ? 640 : 160;

// Finding (issue "Trust, second pass", item 2): 2000 reads of 1 MiB by a peer took the owner
// from 17.5 MB to 1.76 GB, and it kept it: every answer was copied and queued for the
// connection at once, CAF's write buffer grew to the whole burst and never shrank, and glibc
// kept the copies' heap.
TEST_F(MemoryBoundTest, AnHonestBurstIsReadInFullAndTheOwnersMemoryGoesBack) {
  const uint64_t before = owner_rss();
  const std::string mem_before = owner_mem();
  Burst b = read_burst(kBurstReads, 256);
  EXPECT_EQ(b.reads_ok, kBurstReads) << (b.errors.empty() ? "" : b.errors.front());
  EXPECT_EQ(b.bad_bytes, 0u);
  // Every answer proven read: nothing is charged to a window any more.
  ManagerStats s = wait_owner([](const ManagerStats& x) { return x.window_bytes == 0; });
  ASSERT_EQ(s.window_bytes, 0u) << "the owner never learned its answers were read";
  EXPECT_EQ(s.fetches_waiting, 0u);
  const uint64_t after = owner_rss();
  std::printf("owner RSS: before %.1f MB, peak during %.1f MB, after %.1f MB (window %.1f MB)\n",
              mb(before), mb(b.peak_rss), mb(after), mb(kWindow));
  if (kRssIsTheOwners) {
    EXPECT_LE(b.peak_rss, before + 4 * kWindow + kSlack)
        << "before: " << mem_before << ", now: " << owner_mem();
    EXPECT_LE(after, before + 3 * kWindow + kSlack)
        << "before: " << mem_before << ", now: " << owner_mem();
  }
}

// Finding: a hand-written BASP peer sent 100 fetches of 4 MiB and never read the answers: the
// owner went from 16 MB to 553 MB and kept it. Now it serves one window, lets one window's
// worth of fetches wait and refuses the rest; an honest reader meanwhile is served as before,
// and once the connection closes its window goes with it.
TEST_F(MemoryBoundTest, APeerThatNeverReadsHoldsOneWindowAndOthersReadOn) {
  const uint64_t before = owner_rss();
  std::string err;
  auto c = RawBaspClient::connect(reader_->node().system(), "127.0.0.1", port_,
                                  std::chrono::seconds(10), &err);
  ASSERT_TRUE(c.has_value()) << err;
  c->set_read_after_send(false);
  constexpr uint64_t kFetch = 4 * kMiB;
  for (uint64_t i = 0; i < 100; ++i) {
    PeerNonce nonce;  // sealed as a node's facade seals its requests
    secure_random(&nonce, sizeof(nonce));
    ASSERT_TRUE(
        c->send_direct(4242, c->published_actor(), caf::make_message_id(i + 1),
                       caf::make_message(fetch_atom::value, ref_of(remote_),
                                         (i % (kOwnerBytes / kFetch)) * kFetch, kFetch, nonce),
                       &err))
        << err;
  }
  // A window served (never proven read), a window's worth waiting (until kWaitMs, far beyond
  // this test); the other 92 were refused at once.
  ManagerStats s = wait_owner([](const ManagerStats& x) {
    return x.window_bytes == kWindow && x.fetches_waiting == kWindow / kFetch;
  });
  ASSERT_EQ(s.window_bytes, kWindow);
  ASSERT_EQ(s.fetches_waiting, kWindow / kFetch);
  // An honest reader is served meanwhile: its own window, within the total.
  Burst b = read_burst(200, 8);
  EXPECT_EQ(b.reads_ok, 200u) << (b.errors.empty() ? "" : b.errors.front());
  EXPECT_EQ(b.bad_bytes, 0u);
  const uint64_t during = std::max(owner_rss(), b.peak_rss);
  const std::string mem_during = owner_mem();
  EXPECT_EQ(owner_stats().served_fallback_bytes, kWindow + 200 * kMiB)
      << "the peer that never reads was served more than its window";
  // Its connection closes: CAF drops the connection's buffers, the owner the window.
  c.reset();
  s = wait_owner(
      [](const ManagerStats& x) { return x.window_bytes == 0 && x.fetches_waiting == 0; });
  EXPECT_EQ(s.window_bytes, 0u) << "the closed connection's window was not released";
  EXPECT_EQ(s.fetches_waiting, 0u);
  Burst again = read_burst(50, 8);
  EXPECT_EQ(again.reads_ok, 50u) << (again.errors.empty() ? "" : again.errors.front());
  EXPECT_EQ(again.bad_bytes, 0u);
  s = wait_owner([](const ManagerStats& x) { return x.window_bytes == 0; });
  const uint64_t after = owner_rss();
  std::printf("owner RSS: before %.1f MB, during %.1f MB, after %.1f MB (window %.1f MB)\n",
              mb(before), mb(during), mb(after), mb(kWindow));
  // The peer's window, and the honest reader's answers on their way and CAF's buffers for them.
  if (kRssIsTheOwners) {
    EXPECT_LE(during, before + 4 * kWindow + kSlack) << mem_during;
    EXPECT_LE(after, before + 3 * kWindow + kSlack) << owner_mem();
  }
}

// Review finding: windows are kept per node id as the sender states it, and a window of a node
// never seen directly connected is released by proof only. A peer routing fetches "from" node
// ids it invents, never acknowledging, took the whole total (for as long as the owner ran), and
// honest readers waited and failed. Such windows now hold together at most a kIndirectShare-th
// of the total: the directly connected reader keeps reading, every byte checked.
TEST_F(MemoryBoundTest, InventedNodeIdsHoldAtMostTheIndirectShare) {
  std::string err;
  auto c = RawBaspClient::connect(reader_->node().system(), "127.0.0.1", port_,
                                  std::chrono::seconds(10), &err);
  ASSERT_TRUE(c.has_value()) << err;
  c->set_read_after_send(false);
  constexpr uint64_t kFetch = 4 * kMiB;
  constexpr int kInvented = 8;
  uint64_t id = 1;
  for (int n = 0; n < kInvented; ++n) {
    const caf::node_id fake = make_fake_node_id();
    for (uint64_t i = 0; i < kWindow / kFetch; ++i) {
      PeerNonce nonce;
      secure_random(&nonce, sizeof(nonce));
      ASSERT_TRUE(c->send_routed(
          fake, 4242, c->published_actor(), caf::make_message_id(id++),
          caf::make_message(fetch_atom::value, ref_of(remote_), i * kFetch, kFetch, nonce), &err))
          << err;
    }
  }
  // One share of the total served to invented nodes, never more; the rest wait or are refused.
  ManagerStats s = wait_owner([](const ManagerStats& x) {
    return x.window_bytes == kTotal / kIndirectShare && x.fetches_waiting > 0;
  });
  EXPECT_EQ(s.window_bytes, kTotal / kIndirectShare) << "invented node ids took more";
  // The directly connected reader is served: its window, within the total.
  Burst b = read_burst(100, 8);
  EXPECT_EQ(b.reads_ok, 100u) << (b.errors.empty() ? "" : b.errors.front());
  EXPECT_EQ(b.bad_bytes, 0u);
  EXPECT_LE(owner_stats().window_bytes, kTotal / kIndirectShare + kWindow);
}

}  // namespace
}  // namespace caf_rdma::testing
