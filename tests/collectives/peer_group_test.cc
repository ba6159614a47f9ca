// PeerGroup with three members in this process (each its own node and actor system), built
// twice: fallback (native lane) and rdma (rdma-tagged, in the VM: every call must move its
// bytes by RDMA). Small buffers force messages and collectives to run in several rounds.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "systems/collectives/peer_group.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::group {
namespace {

using caf_rdma::testing::expected_path;
using caf_rdma::testing::pattern;

std::vector<uint8_t> bytes_of(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = pattern(i, seed);
  return v;
}

class PeerGroupTest : public ::testing::Test {
protected:
  static constexpr uint32_t kMembers = 3;

  void SetUp() override {
    if (expected_path() == kPathRdma && !caf_rdma::testing::rdma_skip_reason().empty())
      CAF_RDMA_SKIP_OR_FAIL(caf_rdma::testing::rdma_skip_reason());
  }

  /// Forms the group (all members at once, as separate processes would): each listens on a
  /// port the OS picks and learns the others' at a rendezvous (as a launcher's would be).
  /// `timeout_ms` limits each call; forming has 30 s (slow under sanitizers and emulation).
  void form(uint32_t timeout_ms = 20000) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> addresses(kMembers);
    uint32_t reported = 0;
    auto mo = ManagerOptions::from_env();
    ASSERT_TRUE(mo.ok());
    groups_.resize(kMembers);
    std::vector<std::string> errors(kMembers);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < kMembers; ++r)
      threads.emplace_back([&, r] {
        PeerGroupOptions o;
        o.rank = r;
        o.members.assign(kMembers, "127.0.0.1:0");
        o.rendezvous = [&, r](const std::string& me) -> Result<std::vector<std::string>> {
          std::unique_lock<std::mutex> g(mu);
          addresses[r] = me;
          ++reported;
          cv.notify_all();
          if (!cv.wait_for(g, std::chrono::seconds(30), [&] { return reported == kMembers; }))
            return Error(ErrorCode::kTimeout, "not every member reported its address");
          return addresses;
        };
        o.mailbox_bytes = 64 << 10;
        o.collective_bytes = 96 << 10;
        o.timeout_ms = timeout_ms;
        o.form_timeout_ms = 30000;
        o.manager = *mo;
        auto g = PeerGroup::form(o);
        if (g.ok())
          groups_[r] = std::move(*g);
        else
          errors[r] = g.error().to_string();
      });
    for (auto& t : threads)
      t.join();
    for (uint32_t r = 0; r < kMembers; ++r)
      ASSERT_TRUE(groups_[r]) << "rank " << r << ": " << errors[r];
  }

  /// Runs fn(rank, group) on every member at once; returns each one's error text ("" = ok).
  std::vector<std::string> on_all(const std::function<std::string(uint32_t, PeerGroup&)>& fn) {
    std::vector<std::string> out(kMembers);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < kMembers; ++r)
      if (groups_[r])
        threads.emplace_back([&, r] { out[r] = fn(r, *groups_[r]); });
    for (auto& t : threads)
      t.join();
    return out;
  }

  std::vector<std::unique_ptr<PeerGroup>> groups_;
};

TEST_F(PeerGroupTest, SendRecvKeepsOrderAndBoundariesAcrossManyMailboxRounds) {
  form();
  const std::vector<uint64_t> sizes = {0, 1000, 300 << 10, 64 << 10, 7};
  auto errors = on_all([&](uint32_t r, PeerGroup& g) -> std::string {
    uint32_t to = (r + 1) % kMembers, from = (r + kMembers - 1) % kMembers;
    // Send everything first: only the large message needs the receiver to be draining, and the
    // receiver thread runs concurrently.
    std::thread sender([&] {
      for (size_t m = 0; m < sizes.size(); ++m) {
        auto v = bytes_of(sizes[m], uint64_t{r} * 100 + m);
        if (!g.send(to, v.data(), v.size()).ok())
          return;
      }
    });
    std::string problem;
    for (size_t m = 0; m < sizes.size() && problem.empty(); ++m) {
      auto got = g.recv(from);
      if (!got.ok())
        problem = got.error().to_string();
      else if (*got != bytes_of(sizes[m], uint64_t{from} * 100 + m))
        problem = "message " + std::to_string(m) + " from rank " + std::to_string(from) + " has " +
                  std::to_string(got->size()) + " bytes or wrong contents";
    }
    sender.join();
    if (problem.empty() && g.last_path() != expected_path())
      problem = "path " + g.last_path();
    return problem;
  });
  for (uint32_t r = 0; r < kMembers; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_F(PeerGroupTest, CollectivesLargerThanTheirBuffersRunInRoundsAndAreVerified) {
  form();
  constexpr uint64_t kBcast = (1 << 20) + 12345;  // > 10 rounds of 96 KiB
  constexpr uint64_t kBlock = (100 << 10) + 3;    // pieces of 32 KiB per round
  auto errors = on_all([&](uint32_t r, PeerGroup& g) -> std::string {
    std::vector<uint8_t> data = r == 1 ? bytes_of(kBcast, 77) : std::vector<uint8_t>(kBcast, 0);
    if (Status s = g.broadcast(1, data.data(), data.size()); !s.ok())
      return s.error().to_string();
    if (data != bytes_of(kBcast, 77))
      return "broadcast data differs";
    if (g.last_path() != expected_path())
      return "broadcast path " + g.last_path();
    std::vector<uint8_t> in(kBlock * kMembers), out(kBlock * kMembers, 0);
    for (uint32_t j = 0; j < kMembers; ++j) {
      auto b = bytes_of(kBlock, 1000 + r * 10 + j);
      std::copy(b.begin(), b.end(), in.data() + j * kBlock);
    }
    if (Status s = g.all_to_all(in.data(), out.data(), kBlock); !s.ok())
      return s.error().to_string();
    for (uint32_t i = 0; i < kMembers; ++i)
      if (!std::equal(out.data() + i * kBlock, out.data() + (i + 1) * kBlock,
                      bytes_of(kBlock, 1000 + i * 10 + r).begin()))
        return "all-to-all block from rank " + std::to_string(i) + " differs";
    if (Status s = g.barrier(); !s.ok())
      return s.error().to_string();
    return "";
  });
  for (uint32_t r = 0; r < kMembers; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A message whose sender gave up midway is an error on the receiving side, naming how much of
// it came: never the first part of it joined to the next message and reported whole.
TEST_F(PeerGroupTest, AMessageItsSenderGaveUpOnIsAnErrorNotJoinedToTheNext) {
  form(2000);
  // 200 KiB through a 64 KiB mailbox: rank 1 does not receive yet, so the second chunk waits
  // for a mailbox that is never freed and the send times out after the first one.
  auto a = bytes_of(200 << 10, 31), b = bytes_of(100, 32);
  Status sa = groups_[0]->send(1, a.data(), a.size());
  ASSERT_FALSE(sa.ok());
  EXPECT_EQ(sa.error().code(), ErrorCode::kTimeout) << sa.error().to_string();
  EXPECT_NE(sa.error().message().find("cut off after 65536 of 204800 bytes"), std::string::npos)
      << sa.error().message();
  // The next message's first chunk waits until rank 1 frees the mailbox (it copies a's first
  // chunk out): both end up queued at rank 1, a's part first.
  Status sb;
  std::thread sender([&] { sb = groups_[0]->send(1, b.data(), b.size()); });
  auto first = groups_[1]->recv(0);
  auto second = groups_[1]->recv(0);
  sender.join();
  ASSERT_FALSE(first.ok()) << "got " << first->size() << " bytes as one message";
  EXPECT_EQ(first.error().code(), ErrorCode::kPeerUnavailable) << first.error().to_string();
  EXPECT_NE(first.error().message().find("cut off by its sender after 65536 bytes"),
            std::string::npos)
      << first.error().message();
  ASSERT_TRUE(sb.ok()) << sb.error().to_string();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(*second, b);
}

// Members that call different collectives, or the same with other sizes or another root, fail
// on every member naming both calls, before a byte moves; the group works on afterwards.
TEST_F(PeerGroupTest, CollectivesCalledDifferentlyFailOnEveryMemberNamingBothCalls) {
  form(20000);
  struct Case {
    const char* what;
    std::function<std::vector<uint8_t>(uint32_t)> data;  // each member's buffer before the call
    std::function<Status(uint32_t, PeerGroup&, std::vector<uint8_t>&)> call;
    const char* named;  // in every member's error
  };
  auto root_data = [](uint32_t n) { return bytes_of(n, 55); };
  std::vector<Case> cases{
      {"sizes", [&](uint32_t r) { return r == 0 ? root_data(100) : std::vector<uint8_t>(200, 0); },
       [](uint32_t, PeerGroup& g, std::vector<uint8_t>& d) {
         return g.broadcast(0, d.data(), d.size());
       },
       "broadcast of 100 bytes from rank 0"},
      {"root", [&](uint32_t r) { return r != 1 ? root_data(100) : std::vector<uint8_t>(100, 0); },
       [](uint32_t r, PeerGroup& g, std::vector<uint8_t>& d) {
         return g.broadcast(r == 2 ? 2 : 0, d.data(), d.size());
       },
       "broadcast of 100 bytes from rank 2"},
      {"kind", [&](uint32_t r) { return r == 0 ? root_data(300) : std::vector<uint8_t>(300, 0); },
       [](uint32_t r, PeerGroup& g, std::vector<uint8_t>& d) {
         std::vector<uint8_t> in = bytes_of(300, 66);
         return r == 1 ? g.all_to_all(in.data(), d.data(), 100) : g.broadcast(0, d.data(), 100);
       },
       "all_to_all of 100-byte blocks"},
      {"zero bytes on one member",
       [&](uint32_t r) {
         return r == 0 ? root_data(100) : std::vector<uint8_t>(r == 1 ? 0 : 100, 0);
       },
       [](uint32_t, PeerGroup& g, std::vector<uint8_t>& d) {
         return g.broadcast(0, d.data(), d.size());
       },
       "broadcast of 0 bytes from rank 0"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto errors = on_all([&](uint32_t r, PeerGroup& g) -> std::string {
      std::vector<uint8_t> d = c.data(r), before = d;
      Status s = c.call(r, g, d);
      if (s.ok())
        return "ok";
      if (d != before)
        return "bytes moved into the caller's buffer: " + s.error().to_string();
      if (s.error().code() != ErrorCode::kInvalidArgument)
        return "code " + s.error().to_string();
      return s.error().to_string();
    });
    for (uint32_t r = 0; r < kMembers; ++r) {
      EXPECT_NE(errors[r].find("every member must call the same collective"), std::string::npos)
          << "rank " << r << ": " << errors[r];
      EXPECT_NE(errors[r].find(c.named), std::string::npos) << "rank " << r << ": " << errors[r];
      EXPECT_EQ(errors[r].find("code "), std::string::npos) << "rank " << r << ": " << errors[r];
    }
  }
  // Every member failed the same round: the group is not broken, the next call moves every byte.
  auto errors = on_all([&](uint32_t r, PeerGroup& g) -> std::string {
    std::vector<uint8_t> d = r == 2 ? bytes_of(1000, 44) : std::vector<uint8_t>(1000, 0);
    if (Status s = g.broadcast(2, d.data(), d.size()); !s.ok())
      return s.error().to_string();
    if (d != bytes_of(1000, 44))
      return "broadcast data differs";
    std::vector<uint8_t> none;
    if (Status s = g.broadcast(0, none.data(), 0); !s.ok())
      return "zero bytes everywhere: " + s.error().to_string();
    return "";
  });
  for (uint32_t r = 0; r < kMembers; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_F(PeerGroupTest, BadRanksAndSilentPeersAreErrorsNotHangs) {
  form(700);
  PeerGroup& g = *groups_[0];
  Status s = g.send(0, "x", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.error().message().find("rank 0 is not another member"), std::string::npos);
  auto r = g.recv(9);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  auto t0 = std::chrono::steady_clock::now();
  r = g.recv(2);  // rank 2 never sends
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kTimeout) << r.error().to_string();
  EXPECT_NE(r.error().message().find("recv from rank 2 (127.0.0.1:"), std::string::npos)
      << r.error().message();
  // Its own 700 ms, not the 30 s default (generous: loaded CI).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  ASSERT_TRUE(g.last_error().has_value());
  EXPECT_EQ(g.last_error()->code(), ErrorCode::kTimeout);
  // A collective that only rank 0 enters times out on rank 0, naming whom it waited for.
  std::vector<uint8_t> in(3), out(3);
  Status c = g.all_to_all(in.data(), out.data(), 1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), ErrorCode::kTimeout) << c.error().to_string();
  EXPECT_NE(c.error().message().find("data from rank 1"), std::string::npos) << c.error().message();
}

TEST_F(PeerGroupTest, AMemberGoneBeforeACollectiveFailsItOnEveryOtherMemberNamingIt) {
  form(20000);
  std::string gone_address = "rank 2 (127.0.0.1:";
  groups_[2].reset();  // its node shuts down: connections close
  auto errors = on_all([&](uint32_t r, PeerGroup& g) -> std::string {
    std::vector<uint8_t> in(size_t{3} * 1000, uint8_t(r)), out(size_t{3} * 1000);
    Status s = g.all_to_all(in.data(), out.data(), 1000);
    return s.ok() ? "" : s.error().to_string();
  });
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find(gone_address), std::string::npos) << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("is gone"), std::string::npos) << errors[r];
  }
  // Point to point with the departed member fails at once, too.
  Status s = groups_[0]->send(2, "x", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kPeerUnavailable);
}

TEST_F(PeerGroupTest, AfterAMemberIsGoneEvenCollectivesWithoutItFailAtOnceNamingIt) {
  // Rank 0 gave up earlier (here: it just never calls); rank 1 waits for a broadcast from it.
  // Rank 2, which has no part in that broadcast, dies: rank 1 must fail naming rank 2, at once,
  // not time out on rank 0 (or blame rank 0 when it exits in turn).
  form(20000);
  std::string gone_address = "rank 2 (127.0.0.1:";
  std::vector<uint8_t> data(1000);
  Status s;
  std::thread waiter([&] { s = groups_[1]->broadcast(0, data.data(), data.size()); });
  // Usually rank 1 is waiting by now; if not, its broadcast finds the group broken. Both
  // orders must give the same answer, so this sleep only makes the first one likely.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  groups_[2].reset();
  waiter.join();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kPeerUnavailable) << s.error().to_string();
  EXPECT_NE(s.error().message().find(gone_address), std::string::npos) << s.error().message();
  // Every later collective fails at once with the same reason, on both live members.
  auto errors = on_all([&](uint32_t, PeerGroup& g) -> std::string {
    Status b = g.barrier();
    return b.ok() ? "" : b.error().to_string();
  });
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("the group is broken"), std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find(gone_address), std::string::npos) << errors[r];
  }
  // Point to point between the live members still works.
  auto msg = bytes_of(3000, 9);
  Result<std::vector<uint8_t>> got = Error(ErrorCode::kInternal, "not received");
  std::thread receiver([&] { got = groups_[1]->recv(0); });
  Status sent = groups_[0]->send(1, msg.data(), msg.size());
  receiver.join();
  ASSERT_TRUE(sent.ok()) << sent.error().to_string();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(*got, msg);
}

}  // namespace
}  // namespace caf_rdma::group
