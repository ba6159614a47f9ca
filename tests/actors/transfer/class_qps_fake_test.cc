// Class queue pairs (actors/manager/rails.h invariant 26) on the fake transport
// (tests/actors/fake_nic.h) in the deterministic fixture: two managers with one fake NIC each on
// one fake fabric, the owner a real manager on the peer's node; the test decides when each op
// completes. What a user relies on: a latency-class op is answered while a bulk op still holds
// the managers' queue pair, each class's queue pairs carry the class's traffic class and service
// level on both ends, only bulk ops are striped, a latency op waits for its class's handshake
// and no other, a class queue pair that broke is replaced by the next op, and one whose flush
// overran the drain is destroyed before the timed-out op is answered (no byte after it). The real
// path (ibverbs, Soft-RoCE) is class_qps_rdma_test's, in the VM.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/manager/rails.h"
#include "tests/actors/fake_nic.h"
#include "tests/actors/manager_logic.h"

namespace caf_rdma::testing {
namespace {

constexpr uint64_t kSize = 1 << 20;
/// The two ends' traffic, different on purpose: each end carries its own manager's options.
const QpTraffic kMyLatency{106, 3};
const QpTraffic kMyBackground{8, 1};
const QpTraffic kOwnersLatency{104, 5};

class ClassQueuePairs : public ManagerLogicTest {
protected:
  static ManagerOptions options(const std::shared_ptr<FakeNic>& nic, const char* name) {
    ManagerOptions o = fallback_options();
    o.mode = TransportMode::kRdma;
    o.name = name;
    o.open_nic = FakeNic::opener_of({nic});
    o.ibverbs.device_name = nic->device_name();
    o.stripe_min_bytes = 64 << 10;
    o.stripe_qps = 1;
    return o;
  }
  /// Both managers started (both options changed by `tune`), a 1 MiB buffer of the owner
  /// (pattern 51) and one here.
  template <class Tune>
  void start_both(Tune tune, uint32_t owner_qps_per_node = 64) {
    ManagerOptions mine = options(a_, "requester");
    mine.latency_traffic = kMyLatency;
    mine.background_traffic = kMyBackground;
    tune(mine);
    ASSERT_NO_FATAL_FAILURE(start_manager(mine));
    ManagerOptions theirs = options(b_, "owner");
    theirs.latency_traffic = kOwnersLatency;
    tune(theirs);
    theirs.max_qps_per_node = owner_qps_per_node;
    owner_ = start_peer_manager(theirs);
    ASSERT_TRUE(owner_);
    theirs_ = patterned(kSize, 51);
    mine_.assign(kSize, 0);
    caf::scoped_actor there(peer_sys(), true);
    auto p = ask_as<BufferHandle>(there, owner_, request_buffer_atom::value,
                                  reinterpret_cast<uint64_t>(theirs_.data()), uint64_t{kSize},
                                  static_cast<uint8_t>(BufferAccess::kReadWrite));
    auto h = reply_to(there, p);
    ASSERT_TRUE(h && *h) << "request_buffer: " << (h ? error_message(h->error()) : "no answer");
    remote_ = **h;
    local_ = register_buffer(mine_);
  }
  void start_both() {
    start_both([](ManagerOptions&) {});
  }
  /// A read of `n` bytes at `at` (both sides) in class `p`.
  Pending<TransferReply> read(uint64_t at, uint64_t n, Priority p) {
    return transfer(make_read(local_, remote_, Range::of(n).at_local(at).at_remote(at).as(p)),
                    1000);
  }
  /// read, sent but not handled yet (no run_jobs: the test steps).
  Pending<TransferReply> read_later(uint64_t at, uint64_t n, Priority p) {
    auto h = self()->request(
        manager(), caf::infinite, transfer_atom::value,
        make_read(local_, remote_, Range::of(n).at_local(at).at_remote(at).as(p)), uint32_t{1000});
    return Pending<TransferReply>{h.id()};
  }
  /// The queue pairs of `nic` with ops outstanding.
  static std::vector<std::shared_ptr<FakeQueuePair>> busy(const FakeNic& nic) {
    std::vector<std::shared_ptr<FakeQueuePair>> out;
    for (auto& qp : nic.queue_pairs())
      if (qp->pending_ops() > 0)
        out.push_back(qp);
    return out;
  }
  /// The one queue pair of `nic` made with `traffic`, or null.
  static std::shared_ptr<FakeQueuePair> with_traffic(const FakeNic& nic, const QpTraffic& traffic) {
    std::shared_ptr<FakeQueuePair> out;
    for (auto& qp : nic.queue_pairs())
      if (qp->traffic() == traffic) {
        EXPECT_EQ(out, nullptr) << "two queue pairs of " << nic.device_name() << " with traffic "
                                << traffic.traffic_class << "/" << traffic.service_level;
        out = qp;
      }
    return out;
  }
  /// The reply of `p`, which must be a success moving `n` bytes.
  void expect_done(Pending<TransferReply>& p, uint64_t n, const char* what) {
    auto r = reply(p);
    ASSERT_TRUE(r.has_value()) << what << ": no reply";
    ASSERT_TRUE(*r) << what << ": " << error_message(r->error());
    EXPECT_EQ((*r)->bytes, n) << what;
  }
  /// The requester manager's stats into `out`, or a failed test.
  void manager_stats(ManagerStats* out) {
    auto stats = call<ManagerStats>(manager(), stats_atom::value);
    ASSERT_TRUE(stats) << error_message(stats.error());
    *out = *stats;
  }
  /// Bytes [at, at + n) here are the owner's.
  bool same(uint64_t at, uint64_t n) const {
    return std::equal(mine_.begin() + static_cast<long>(at),
                      mine_.begin() + static_cast<long>(at + n),
                      theirs_.begin() + static_cast<long>(at));
  }

  std::shared_ptr<FakeFabric> fabric_ = FakeFabric::make();
  std::shared_ptr<FakeNic> a_ = FakeNic::make("fakeA", fabric_);
  std::shared_ptr<FakeNic> b_ = FakeNic::make("fakeB", fabric_);
  rdma_manager_actor owner_;
  std::vector<uint8_t> theirs_, mine_;
  BufferHandle remote_, local_;
};

TEST_F(ClassQueuePairs, ALatencyReadIsAnsweredWhileABulkReadHoldsTheManagersQueuePair) {
  SCOPED_TRACE("rails.h invariant 26");
  ASSERT_NO_FATAL_FAILURE(start_both());
  // A bulk read of the first half, left on the NIC.
  auto bulk = read(0, kSize / 2, Priority::kBulk);
  run_jobs();
  auto held = busy(*a_);
  ASSERT_EQ(held.size(), 1u) << "the bulk read is not on one queue pair";
  const std::shared_ptr<FakeQueuePair> managers = held[0];
  EXPECT_EQ(managers->traffic(), QpTraffic{}) << "the managers' queue pair is the device's";
  // An 8-byte latency read of the second half: a queue pair of its class, made now, with the
  // class's traffic here and the owner's at the other end.
  auto urgent = read(kSize - 64, 8, Priority::kLatency);
  run_jobs();
  auto latency = with_traffic(*a_, kMyLatency);
  ASSERT_NE(latency, nullptr) << "no queue pair with the latency class's traffic";
  ASSERT_NE(with_traffic(*b_, kOwnersLatency), nullptr)
      << "the owner's end of the latency queue pair does not carry its latency traffic";
  EXPECT_EQ(latency->pending_ops(), 1u) << "the latency read is not on its class's queue pair";
  EXPECT_EQ(managers->pending_ops(), 1u) << "the latency read went behind the bulk one";
  // Its completion answers it, the bulk read still on the NIC.
  EXPECT_EQ(latency->complete_all(), 1u);
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(urgent, 8, "latency read"));
  EXPECT_TRUE(same(kSize - 64, 8)) << "a byte of the latency read is wrong";
  EXPECT_FALSE(reply(bulk).has_value()) << "the bulk read was answered before its completion";
  // The next latency op takes the same queue pair: one handshake per peer and class.
  auto again = read(kSize - 128, 8, Priority::kLatency);
  run_jobs();
  EXPECT_EQ(latency->pending_ops(), 1u) << "the second latency read is not on the class's one";
  EXPECT_EQ(latency->complete_all(), 1u);
  EXPECT_EQ(managers->complete_all(), 1u);
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(again, 8, "second latency read"));
  ASSERT_NO_FATAL_FAILURE(expect_done(bulk, kSize / 2, "bulk read"));
  EXPECT_TRUE(same(kSize - 128, 8) && same(0, kSize / 2)) << "a byte read is wrong";
  ManagerStats stats;
  ASSERT_NO_FATAL_FAILURE(manager_stats(&stats));
  EXPECT_EQ(stats.handshakes, 2u) << "the managers' queue pair and the latency class's";
  EXPECT_TRUE(quiet());
}

TEST_F(ClassQueuePairs, OnlyBulkOpsAreStripedAndEachOtherClassRunsWholeOnItsOwn) {
  SCOPED_TRACE("rails.h invariant 26, path_choice.h invariant 7");
  ASSERT_NO_FATAL_FAILURE(start_both([](ManagerOptions& o) { o.stripe_qps = 2; }));
  // A latency read of 512 KiB (past stripe_min_bytes): whole, on its class's queue pair.
  auto urgent = read(0, kSize / 2, Priority::kLatency);
  run_jobs();
  auto latency = with_traffic(*a_, kMyLatency);
  ASSERT_NE(latency, nullptr);
  ASSERT_EQ(busy(*a_).size(), 1u) << "the latency read was striped";
  EXPECT_EQ(latency->pending_ops(), 1u);
  // A background write of the other half: whole, on the background class's queue pair.
  std::vector<uint8_t> source = patterned(kSize / 2, 52);
  std::copy(source.begin(), source.end(), mine_.begin() + kSize / 2);
  auto quiet_write = transfer(
      make_write(
          local_, remote_,
          Range::of(kSize / 2).at_local(kSize / 2).at_remote(kSize / 2).as(Priority::kBackground)),
      1000);
  run_jobs();
  auto background = with_traffic(*a_, kMyBackground);
  ASSERT_NE(background, nullptr) << "no queue pair with the background class's traffic";
  EXPECT_EQ(background->pending_ops(), 1u) << "the background write is not on its class's one";
  EXPECT_EQ(busy(*a_).size(), 2u) << "the background write was striped";
  EXPECT_EQ(latency->complete_all(), 1u);
  EXPECT_EQ(background->complete_all(), 1u);
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(urgent, kSize / 2, "latency read"));
  ASSERT_NO_FATAL_FAILURE(expect_done(quiet_write, kSize / 2, "background write"));
  EXPECT_TRUE(same(0, kSize / 2)) << "a byte of the latency read is wrong";
  EXPECT_TRUE(std::equal(source.begin(), source.end(), theirs_.begin() + kSize / 2))
      << "a byte of the background write is wrong";
  // A bulk read of the same size: two slices, neither on a class's queue pair.
  std::fill(mine_.begin(), mine_.end(), 0);
  auto whole = read(0, kSize, Priority::kBulk);
  run_jobs();
  EXPECT_EQ(latency->pending_ops() + background->pending_ops(), 0u)
      << "a bulk slice went to a class's queue pair";
  auto slices = busy(*a_);
  ASSERT_EQ(slices.size(), 2u) << "the bulk read was not striped over two queue pairs";
  for (auto& qp : slices) {
    EXPECT_EQ(qp->traffic(), QpTraffic{}) << qp->describe() << " carries a class's traffic";
    qp->complete_all();
  }
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(whole, kSize, "striped bulk read"));
  EXPECT_TRUE(same(0, kSize)) << "a byte of the striped read is wrong";
  ManagerStats stats;
  ASSERT_NO_FATAL_FAILURE(manager_stats(&stats));
  EXPECT_EQ(stats.striped_ops, 1u) << "only the bulk read is striped";
  EXPECT_TRUE(quiet());
}

TEST_F(ClassQueuePairs, AClassQueuePairInErrorIsReplacedByTheNextOp) {
  SCOPED_TRACE("rails.h invariant 26 (replaced as the managers' own: manager invariant 4)");
  ASSERT_NO_FATAL_FAILURE(start_both());
  auto first = read(0, 4096, Priority::kLatency);
  run_jobs();
  auto latency = with_traffic(*a_, kMyLatency);
  ASSERT_NE(latency, nullptr);
  ASSERT_EQ(latency->pending_ops(), 1u);
  // The queue pair is taken to error under the op (a flush it did not cause): the op runs once
  // more (rdma_path.h invariant 5) on a new queue pair of its class, made at once.
  ASSERT_TRUE(latency->abort("the test took it to error").ok());
  run_jobs();
  std::shared_ptr<FakeQueuePair> replaced;
  for (auto& qp : busy(*a_))
    replaced = qp;
  ASSERT_NE(replaced, nullptr) << "the flushed latency read did not run again";
  EXPECT_NE(replaced, latency) << "it ran again on the queue pair in error";
  EXPECT_EQ(replaced->traffic(), kMyLatency) << "it ran again off its class's queue pair";
  EXPECT_EQ(replaced->complete_all(), 1u);
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(first, 4096, "latency read run again"));
  EXPECT_TRUE(same(0, 4096)) << "a byte of the latency read is wrong";
  EXPECT_TRUE(quiet());
}

TEST_F(ClassQueuePairs, ALatencyOpWaitsForItsClassHandshakeOnlyNotForABulkOpsStripes) {
  SCOPED_TRACE("rails.h invariant 26: the op waits for its class's handshake, and no other");
  ASSERT_NO_FATAL_FAILURE(start_both([](ManagerOptions& o) { o.stripe_qps = 2; }));
  // A latency read, then a striped bulk read: the class's handshake is asked for first, the
  // bulk read's striping one after it; the owner answers them in that order.
  auto urgent = read_later(kSize - 64, 8, Priority::kLatency);
  auto whole = read_later(0, kSize / 2, Priority::kBulk);
  // One message at a time: the latency read is on the NIC once its own handshake ended, the
  // striping one still open (the bulk read not posted yet).
  std::shared_ptr<FakeQueuePair> latency;
  for (int i = 0; i < 10000 && !(latency && latency->pending_ops() > 0); ++i) {
    ASSERT_TRUE(step()) << "nothing left to run, and the latency read is not on the NIC";
    latency = with_traffic(*a_, kMyLatency);
  }
  ASSERT_NE(latency, nullptr) << "no queue pair with the latency class's traffic";
  ASSERT_EQ(latency->pending_ops(), 1u) << "the latency read is not on its class's queue pair";
  EXPECT_EQ(busy(*a_).size(), 1u)
      << "the latency read was posted only with the bulk read: it waited for its stripes";
  run_jobs();
  EXPECT_EQ(latency->complete_all(), 1u);
  for (auto& qp : busy(*a_))
    qp->complete_all();
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(urgent, 8, "latency read"));
  ASSERT_NO_FATAL_FAILURE(expect_done(whole, kSize / 2, "bulk read"));
  EXPECT_TRUE(same(kSize - 64, 8) && same(0, kSize / 2)) << "a byte read is wrong";
  ManagerStats stats;
  ASSERT_NO_FATAL_FAILURE(manager_stats(&stats));
  EXPECT_EQ(stats.striped_ops, 1u) << "the bulk read was not striped";
  EXPECT_TRUE(quiet());
}

TEST_F(ClassQueuePairs, AHandshakeWhoseStripeAndClassDisagreeIsRefusedAndMakesNoQueuePair) {
  SCOPED_TRACE("rails.h invariant 26: a class queue pair names its class twice, both checked");
  ASSERT_NO_FATAL_FAILURE(start_both());
  using caf_rdma::detail::class_stripe;
  using caf_rdma::detail::rail_of;
  using caf_rdma::detail::stripe_index;
  const size_t before = b_->queue_pairs().size();
  struct Case {
    const char* what;
    uint32_t stripe;
    uint8_t priority;
  };
  const Case cases[] = {
      {"the latency class's stripe named bulk", class_stripe(Priority::kLatency), 0},
      {"the background class's stripe named latency", class_stripe(Priority::kBackground), 1},
      {"a striping queue pair named latency", stripe_index(0, 1), 1},
      {"a class no one knows", class_stripe(Priority::kLatency), 7},
  };
  caf::scoped_actor hostile(sys(), true);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    QpInfoMsg m;
    m.qp_num = 0x100;
    m.gid.assign(16, 1);
    m.psn = 1;
    m.mtu = 3;
    m.stripe = c.stripe;
    m.rail = rail_of(c.stripe);
    m.priority = c.priority;
    auto p = ask_as<QpInfoMsg>(hostile, owner_, qp_connect_atom::value, m);
    auto r = reply_to(hostile, p);
    ASSERT_TRUE(r.has_value()) << "no answer";
    ASSERT_FALSE(*r) << "the owner took it";
    const std::string named = "stripe " + std::to_string(c.stripe);
    EXPECT_RDMA_ERROR((*r), ErrorCode::kInvalidArgument, "do not match", named.c_str());
  }
  EXPECT_EQ(b_->queue_pairs().size(), before) << "a refused handshake made a queue pair";
}

TEST_F(ClassQueuePairs, AClassQueuePairWhoseFlushOverrunsIsDestroyedBeforeTheReply) {
  SCOPED_TRACE("rails.h invariant 26, rdma_path.h invariant 6: no write after the answer");
  a_->set_flush_on_abort(false);  // the device does not flush in time
  ASSERT_NO_FATAL_FAILURE(
      start_both([](ManagerOptions& o) { o.drain_timeout = std::chrono::milliseconds(500); }));
  auto r = transfer(make_read(local_, remote_, Range::of(4096).as(Priority::kLatency)), 100);
  run_jobs();
  std::weak_ptr<FakeQueuePair> latency = with_traffic(*a_, kMyLatency);
  ASSERT_FALSE(latency.expired()) << "no queue pair with the latency class's traffic";
  ASSERT_EQ(latency.lock()->pending_ops(), 1u) << "the latency read is not on its class's one";
  // Its deadline: the queue pair is flushed, the reply waits for the flush.
  advance(std::chrono::milliseconds(99));
  ASSERT_TRUE(next_timeout()) << "no timer for the deadline";
  EXPECT_TRUE(latency.lock()->needs_recovery()) << "not flushed at its deadline";
  EXPECT_FALSE(reply(r).has_value()) << "replied before the NIC let go of the op";
  // The flush never comes: at drain_timeout the class's queue pair is destroyed, then the reply.
  advance(std::chrono::milliseconds(499));
  ASSERT_TRUE(next_timeout()) << "no timer for the drain";
  auto got = reply(r);
  ASSERT_TRUE(got.has_value()) << "no reply once the flush overran drain_timeout";
  EXPECT_RDMA_ERROR((*got), ErrorCode::kTimeout, "queue pair was destroyed");
  // Only the completion poller's last sweep may still hold it, for a moment.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!latency.expired() && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  if (auto alive = latency.lock()) {
    // Were it kept, the NIC could still finish the read after the answer said it timed out.
    alive->complete_all();
    FAIL() << "the latency class's queue pair outlived the reply of its timed-out op";
  }
  a_->deliver_late();  // the flushed op's completion, if the poller's sweep destroyed it
  run_jobs();
  EXPECT_TRUE(std::all_of(mine_.begin(), mine_.end(), [](uint8_t b) { return b == 0; }))
      << "a byte landed after the timeout's answer";
  EXPECT_TRUE(quiet()) << "a late completion made a second reply";
  // The next latency op: a new queue pair of its class, every byte.
  auto again = read(0, 4096, Priority::kLatency);
  run_jobs();
  auto fresh = with_traffic(*a_, kMyLatency);
  ASSERT_NE(fresh, nullptr) << "the next latency read made no queue pair of its class";
  EXPECT_EQ(fresh->complete_all(), 1u);
  run_jobs();
  ASSERT_NO_FATAL_FAILURE(expect_done(again, 4096, "latency read after the overrun"));
  EXPECT_TRUE(same(0, 4096)) << "a byte of the latency read is wrong";
  EXPECT_TRUE(quiet());
}

TEST_F(ClassQueuePairs, AClassQueuePairTheOwnerRefusesLeavesTheClassOnTheManagersQueuePair) {
  SCOPED_TRACE("rails.h invariant 26 (a failed handshake is held off for kStripeRetry)");
  // The owner takes one queue pair from this node: the managers' own; the class's is refused.
  ASSERT_NO_FATAL_FAILURE(start_both([](ManagerOptions&) {}, /*owner_qps_per_node=*/1));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const uint64_t at = static_cast<uint64_t>(round) * 4096;
    auto r = read(at, 4096, Priority::kLatency);
    run_jobs();
    auto on = busy(*a_);
    ASSERT_EQ(on.size(), 1u) << "the latency read is not on one queue pair";
    EXPECT_EQ(on[0]->traffic(), QpTraffic{}) << "it is not on the managers' queue pair";
    EXPECT_EQ(on[0]->complete_all(), 1u);
    run_jobs();
    ASSERT_NO_FATAL_FAILURE(expect_done(r, 4096, "latency read"));
    EXPECT_TRUE(same(at, 4096)) << "a byte of the latency read is wrong";
  }
  ManagerStats stats;
  ASSERT_NO_FATAL_FAILURE(manager_stats(&stats));
  EXPECT_EQ(stats.handshakes, 2u) << "the refused class handshake was tried again at once";
  EXPECT_TRUE(quiet());
}

}  // namespace
}  // namespace caf_rdma::testing
