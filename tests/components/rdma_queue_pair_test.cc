// RdmaQueuePair on a real device (rxe0/rxe1 in the VM lane): connecting, submitting and
// running ops end to end; the tests of its parts are qp_posting_test, qp_completions_test and
// qp_blocking_test. Every transfer is verified byte for byte. Test names refer to the
// invariants in components/rdma_queue_pair.h.
#include "components/rdma_queue_pair.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/components/queue_pair_fixture.h"

namespace caf_rdma::testing {
namespace {

class RdmaQueuePairTest : public QueuePairTest {};

TEST_P(RdmaQueuePairTest, WriteAndReadRoundTripsAtSeveralSizes) {
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20, uint64_t{64} << 20}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Registered src = make(size, 11);
    Registered dst = make(size, 0);
    Registered back = make(size, 0);
    OpResult w = a_->execute(RdmaOp::write({src.buffer, 0, size}, dst.buffer.remote()), kTimeout);
    ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
    EXPECT_EQ(w.bytes, size);
    expect_same(src, dst, size);
    OpResult r = a_->execute(RdmaOp::read({back.buffer, 0, size}, dst.buffer.remote()), kTimeout);
    ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
    expect_same(src, back, size);
  }
}

TEST_P(RdmaQueuePairTest, OffsetsAndGatherLists) {
  Registered src = make(8192, 5);
  Registered dst = make(16384, 0);
  RdmaOp op;
  op.kind = OpKind::kWrite;
  op.local = {{src.buffer, 100, 1000}, {src.buffer, 5000, 3000}};
  op.remote = dst.buffer.remote();
  op.remote_offset = 777;
  OpResult w = a_->execute(op, kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  EXPECT_EQ(std::memcmp(dst.bytes.get() + 777, src.bytes.get() + 100, 1000), 0);
  EXPECT_EQ(std::memcmp(dst.bytes.get() + 1777, src.bytes.get() + 5000, 3000), 0);
  EXPECT_EQ(dst.bytes[776], 0);
  EXPECT_EQ(dst.bytes[4777], 0);
}

// Invariant 6.
TEST_P(RdmaQueuePairTest, ManyThreadsAtOnce) {
  constexpr int kThreads = 6, kOpsPerThread = 100, kChunk = 4096;
  Registered src = make(uint64_t{kThreads} * kOpsPerThread * kChunk, 21);
  Registered dst = make(uint64_t{kThreads} * kOpsPerThread * kChunk, 0);
  Registered back = make(uint64_t{kThreads} * kOpsPerThread * kChunk, 0);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOpsPerThread; ++i) {
        uint64_t off = (uint64_t(t) * kOpsPerThread + i) * kChunk;
        OpResult w = a_->execute(RdmaOp::write({src.buffer, off, kChunk}, dst.buffer.remote(), off),
                                 kTimeout);
        OpResult r = b_->execute(RdmaOp::read({back.buffer, off, kChunk}, dst.buffer.remote(), off),
                                 kTimeout);
        if (!w.status.ok() || !r.status.ok())
          failures++;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  expect_same(src, dst, src.size);
  expect_same(src, back, src.size);
}

// Invariant 2: nothing is posted for a request that does not fit.
TEST_P(RdmaQueuePairTest, OutOfBoundsIsRefusedBeforePosting) {
  Registered src = make(4096, 1);
  Registered dst = make(4096, 0);
  uint64_t before = a_->stats().work_requests;
  Status local = a_->submit(RdmaOp::write({src.buffer, 4000, 200}, dst.buffer.remote()), nullptr);
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.error().code(), ErrorCode::kOutOfBounds);
  EXPECT_NE(local.error().message().find("local source"), std::string::npos);
  Status remote = a_->submit(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote(), 1), nullptr);
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.error().code(), ErrorCode::kOutOfBounds);
  EXPECT_NE(remote.error().message().find("remote destination"), std::string::npos);
  OpResult zero = a_->execute(RdmaOp::write({src.buffer, 0, 0}, dst.buffer.remote()), kTimeout);
  ASSERT_FALSE(zero.status.ok());
  EXPECT_EQ(zero.status.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a_->stats().work_requests, before);
  EXPECT_FALSE(a_->needs_recovery());
}

TEST_P(RdmaQueuePairTest, ReadOnlyBufferCannotBeAReadDestination) {
  Registered ro = make(4096, 5, Access::kReadOnly);
  Registered src = make(4096, 3);
  OpResult r = a_->execute(RdmaOp::read({ro.buffer, 0, 4096}, src.buffer.remote()), kTimeout);
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.error().message().find("read-only"), std::string::npos);
  // But it can be read remotely.
  Registered out = make(4096, 0);
  OpResult ok = a_->execute(RdmaOp::read({out.buffer, 0, 4096}, ro.buffer.remote()), kTimeout);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error().to_string();
  expect_same(ro, out, 4096);
}

// Invariant 2: a released local handle is refused before posting.
TEST_P(RdmaQueuePairTest, ReleasedLocalBufferIsRefused) {
  Registered src = make(4096, 2);
  Registered dst = make(4096, 0);
  RdmaBuffer released = src.buffer;
  released.release();
  uint64_t before = a_->stats().work_requests;
  OpResult w = a_->execute(RdmaOp::write({released, 0, 16}, dst.buffer.remote()), kTimeout);
  ASSERT_FALSE(w.status.ok());
  EXPECT_EQ(w.status.error().code(), ErrorCode::kReleased);
  EXPECT_EQ(a_->stats().work_requests, before);
  EXPECT_FALSE(a_->needs_recovery());
}

TEST_P(RdmaQueuePairTest, ASecondConnectIsRefused) {
  Status again = a_->connect(b_->local_info());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("already connected"), std::string::npos)
      << again.error().message();
}

// Invariant 5: a loopback QP in ERR (a wrong rkey) stays in ERR; a new one works.
TEST_P(RdmaQueuePairTest, LoopbackQueuePair) {
  auto q = make_qp();
  ASSERT_TRUE(q->connect_loopback().ok());
  Registered src = make(65536, 13);
  Registered dst = make(65536, 0);
  OpResult w = q->execute(RdmaOp::write({src.buffer, 0, 65536}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  expect_same(src, dst, 65536);
  RemoteBuffer bad = dst.buffer.remote();
  bad.rkey += 1;
  EXPECT_FALSE(q->execute(RdmaOp::write({src.buffer, 0, 16}, bad), kTimeout).status.ok());
  EXPECT_TRUE(q->needs_recovery());
  q = make_qp();
  ASSERT_TRUE(q->connect_loopback().ok());
  std::memset(dst.bytes.get(), 0, 65536);  // what the read brings back must arrive
  OpResult again = q->execute(RdmaOp::read({dst.buffer, 0, 65536}, src.buffer.remote()), kTimeout);
  ASSERT_TRUE(again.status.ok()) << again.status.error().to_string();
  expect_same(src, dst, 65536);
}

// Invariant 14: a queue pair made with a traffic class and service level of its own carries
// them (the device holds them once it is connected); one made without carries the device's.
TEST_P(RdmaQueuePairTest, ATrafficClassAndServiceLevelOfItsOwnAreTheOnesItCarries) {
  RdmaQueuePair::Options options;
  options.traffic = QpTraffic{106, 3};
  auto q = make_qp(options);
  ASSERT_TRUE(q->connect_loopback().ok());
  auto t = q->traffic();
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  // What the fabric reads: RoCE, the GRH's traffic class (Soft-RoCE keeps no service level: its
  // packets carry none); InfiniBand, the service level (a GRH only across subnets).
  if (domain_->port().is_ethernet)
    EXPECT_EQ(t->traffic_class, 106);
  else
    EXPECT_EQ(t->service_level, 3);
  Registered src = make(4096, 17);
  Registered dst = make(4096, 0);
  OpResult w = q->execute(RdmaOp::write({src.buffer, 0, 4096}, dst.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  expect_same(src, dst, 4096);
  auto plain = make_qp();
  ASSERT_TRUE(plain->connect_loopback().ok());
  auto d = plain->traffic();
  ASSERT_TRUE(d.ok()) << d.error().to_string();
  if (domain_->port().is_ethernet)
    EXPECT_EQ(d->traffic_class, domain_->config().traffic_class) << "the device's";
  else
    EXPECT_EQ(d->service_level, domain_->config().service_level) << "the device's";
  // Out of range: refused, naming it.
  options.traffic = QpTraffic{256, -1};
  auto bad = RdmaQueuePair::create(domain_, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("traffic_class is 256"), std::string::npos)
      << bad.error().message();
}

TEST_P(RdmaQueuePairTest, UnconnectedQueuePairRefusesWork) {
  auto q = make_qp();
  Registered src = make(64, 1);
  Status st = q->submit(RdmaOp::write({src.buffer, 0, 64}, src.buffer.remote()), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("not connected"), std::string::npos);
}

// Two domains on two devices (rxe0 and rxe1 on the two ends of a veth wire in the VM lane).
TEST_P(RdmaQueuePairTest, TwoDomainsOnTwoDevicesExchangeData) {
  auto list = DeviceList::get();
  ASSERT_TRUE(list.ok());
  auto devices = list->describe();
  std::vector<std::string> active;
  for (const auto& d : devices)
    for (const auto& p : d.ports)
      if (p.port_num == 1 && p.state == IBV_PORT_ACTIVE)
        active.push_back(d.name);
  if (active.size() < 2)
    CAF_RDMA_SKIP_OR_FAIL("needs two RDMA devices with an ACTIVE port 1, found " +
                          std::to_string(active.size()));
  IbverbsConfig c0, c1;
  c0.device_name = active[0];
  c1.device_name = active[1];
  auto d0 = RdmaDomain::open(c0);
  auto d1 = RdmaDomain::open(c1);
  ASSERT_TRUE(d0.ok()) << d0.error().to_string();
  ASSERT_TRUE(d1.ok()) << d1.error().to_string();
  std::printf("domain 0: %s\ndomain 1: %s\n", (*d0)->describe().c_str(), (*d1)->describe().c_str());
  EXPECT_NE((*d0)->gid(), (*d1)->gid());
  auto q0 = make_qp({}, *d0);
  auto q1 = make_qp({}, *d1);
  ASSERT_TRUE(RdmaQueuePair::connect_pair(*q0, *q1).ok());
  Registered m0 = make(1 << 20, 31, Access::kReadWrite, *d0);
  Registered m1 = make(1 << 20, 0, Access::kReadWrite, *d1);
  Registered r0 = make(1 << 20, 0, Access::kReadWrite, *d0);
  OpResult w = q0->execute(RdmaOp::write({m0.buffer, 0, 1 << 20}, m1.buffer.remote()), kTimeout);
  ASSERT_TRUE(w.status.ok()) << w.status.error().to_string();
  expect_same(m0, m1, 1 << 20);
  OpResult r = q0->execute(RdmaOp::read({r0.buffer, 0, 1 << 20}, m1.buffer.remote()), kTimeout);
  ASSERT_TRUE(r.status.ok()) << r.status.error().to_string();
  expect_same(m0, r0, 1 << 20);
  // A buffer of the other domain cannot be used locally.
  Status foreign = q0->submit(RdmaOp::write({m1.buffer, 0, 16}, m0.buffer.remote()), nullptr);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message().find("another domain"), std::string::npos);
}

QUEUE_PAIR_TEST_SUITE(RdmaQueuePairTest);

}  // namespace
}  // namespace caf_rdma::testing
