// RegisteredBuffer (actors/registered_buffer.h) and RdmaClient's asynchronous transfers, with two
// nodes in this process (TwoNodeTest): a registration releases itself when it goes and only then
// (a transfer in flight holds it), moving it moves the release, and futures of transfers started
// from many threads each bring their own reply, every byte checked. Built for both transports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "actors/rdma_client.h"
#include "components/host_mapping.h"
#include "components/host_memory.h"
#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

class RegisteredBufferTest : public TwoNodeTest {
protected:
  uint64_t registered(TestNode& n) { return n.stats().registered_buffers; }
};

// Invariant 1 (registered_buffer.h) and manager invariant 2: the registration goes with its
// object, after the transfers that used it, and once only.
TEST_F(RegisteredBufferTest, ARegistrationReleasesItselfWhenItGoesAndOnlyOnce) {
  Memory remote_mem(64 << 10), src(64 << 10, 41);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "rb");
  RdmaClient client(user_->node().system(), user_->manager());
  const uint64_t before = registered(*user_);
  uint64_t id = 0;
  {
    auto reg = client.register_buffer(src.bytes.data(), src.bytes.size());
    ASSERT_TRUE(reg.ok()) << reg.error().to_string();
    id = reg->handle().id;
    EXPECT_TRUE(reg->registered());
    EXPECT_EQ(registered(*user_), before + 1);
    auto w = client.write(*reg, remote);  // the registration converts to its handle
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_EQ(w->path, expected_path());
    EXPECT_EQ(remote_mem.bytes, src.bytes);
    // Moved: the new owner releases it, the moved-from one nothing.
    RegisteredBuffer moved = std::move(*reg);
    EXPECT_FALSE(reg->registered());
    EXPECT_TRUE(moved.registered());
    EXPECT_EQ(registered(*user_), before + 1);
  }
  EXPECT_EQ(registered(*user_), before) << "the registration outlived its object";
  auto again = client.release(id);
  ASSERT_FALSE(again.ok()) << "buffer " << id << " was still registered";
  EXPECT_NE(again.error().message().find(std::to_string(id)), std::string::npos)
      << again.error().message();
  // An explicit release, then nothing more on destruction.
  auto reg = client.register_buffer(src.bytes.data(), src.bytes.size());
  ASSERT_TRUE(reg.ok());
  EXPECT_TRUE(reg->release().ok());
  EXPECT_FALSE(reg->registered());
  Status twice = reg->release();
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("released already"), std::string::npos)
      << twice.error().message();
  EXPECT_EQ(registered(*user_), before);
}

// RdmaClient::allocate_buffer (invariant 5): the library's memory comes zeroed, 2 MiB-aligned,
// moves every byte both ways, and goes with its registration.
TEST_F(RegisteredBufferTest, AnAllocatedBufferIsZeroedAlignedAndMovesEveryByte) {
  constexpr uint64_t kSize = (4 << 20) + 123;  // two huge pages and a tail that is not one
  Memory remote_mem(kSize, 47);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "allocated");
  RdmaClient client(user_->node().system(), user_->manager());
  const uint64_t before = registered(*user_);
  {
    auto mine = client.allocate_buffer(kSize);
    ASSERT_TRUE(mine.ok()) << mine.error().to_string();
    EXPECT_EQ(registered(*user_), before + 1);
    ASSERT_EQ(mine->size(), kSize);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(mine->data()) % HostMemory::kHugePage, 0u);
    EXPECT_TRUE(std::all_of(mine->data(), mine->data() + kSize, [](uint8_t b) { return b == 0; }));
    auto r = client.read(*mine, remote);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->path, expected_path());
    EXPECT_TRUE(std::equal(mine->data(), mine->data() + kSize, remote_mem.bytes.begin()))
        << "the read's bytes differ";
    const Memory expected(kSize, 53);
    std::copy(expected.bytes.begin(), expected.bytes.end(), mine->data());
    auto w = client.write(*mine, remote);
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_EQ(w->path, expected_path());
    EXPECT_EQ(remote_mem.bytes, expected.bytes) << "the write's bytes differ";
  }
  EXPECT_EQ(registered(*user_), before) << "the registration outlived its object";
  auto zero = client.allocate_buffer(0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(zero.error().message().find("size 0"), std::string::npos) << zero.error().message();
}

// Invariant 5: a release that fails leaves the memory mapped (a transfer may still use it).
TEST_F(RegisteredBufferTest, AnAllocatedBufferWhoseReleaseFailsKeepsItsMemory) {
  constexpr uint64_t kSize = 3 << 20;
  RdmaClient client(user_->node().system(), user_->manager());
  uint64_t addr = 0;
  {
    auto mine = client.allocate_buffer(kSize);
    ASSERT_TRUE(mine.ok()) << mine.error().to_string();
    addr = reinterpret_cast<uint64_t>(mine->data());
    std::memset(mine->data(), 0x5a, kSize);
    ASSERT_TRUE(client.release(mine->handle().id).ok());  // released behind its back
    Status again = mine->release();
    ASSERT_FALSE(again.ok()) << "buffer " << mine->handle().id << " was released twice";
  }
  ASSERT_TRUE(check_host_range(addr, kSize, true).ok()) << "its memory was unmapped";
  const auto* bytes = reinterpret_cast<const uint8_t*>(addr);
  EXPECT_TRUE(std::all_of(bytes, bytes + kSize, [](uint8_t b) { return b == 0x5a; }));
}

// Invariant 5: memory whose registration timed out stays mapped (the manager may still register
// it and serve peers from it). The "manager" here takes the registration and never answers; it
// keeps the address it was asked to register, which the test then writes and reads.
TEST_F(RegisteredBufferTest, AnAllocatedBufferWhoseRegistrationTimedOutKeepsItsMemory) {
  constexpr uint64_t kSize = 3 << 20;
  auto& sys = user_->node().system();
  auto asked = std::make_shared<std::promise<std::pair<uint64_t, uint64_t>>>();
  auto mute = sys.spawn([asked](caf::event_based_actor* self) -> caf::behavior {
    auto held = std::make_shared<std::vector<caf::response_promise>>();
    return {[self, asked, held](request_buffer_atom, uint64_t addr, uint64_t size, uint8_t) {
      held->push_back(self->make_response_promise());
      asked->set_value({addr, size});
    }};
  });
  RdmaClient client(sys, caf::actor_cast<rdma_manager_actor>(mute), /*direct=*/false,
                    std::chrono::milliseconds(300));
  auto mine = client.allocate_buffer(kSize);
  ASSERT_FALSE(mine.ok()) << "a registration nobody answered succeeded";
  EXPECT_EQ(mine.error().code(), ErrorCode::kTimeout) << mine.error().to_string();
  auto f = asked->get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [addr, size] = f.get();
  EXPECT_EQ(size, kSize);
  ASSERT_TRUE(check_host_range(addr, size, true).ok()) << "its memory was unmapped";
  auto* bytes = reinterpret_cast<uint8_t*>(addr);
  EXPECT_TRUE(std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0; }));
  std::memset(bytes, 0x3c, size);  // still this process's to write (and the manager's to serve)
  EXPECT_TRUE(std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0x3c; }));
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
}

// Futures: transfers started from many threads at once each complete with their own reply, and
// every range lands where it was meant to (written, then read back into fresh memory).
TEST_F(RegisteredBufferTest, AsynchronousTransfersFromManyThreadsEachBringTheirOwnReply) {
  constexpr int kThreads = 8;
  constexpr uint64_t kPart = 16 << 10;
  Memory remote_mem(kThreads * kPart), src(kThreads * kPart, 43), back(kThreads * kPart);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "async");
  RdmaClient client(user_->node().system(), user_->manager());
  auto hs = client.register_buffer(src.bytes.data(), src.bytes.size());
  auto hb = client.register_buffer(back.bytes.data(), back.bytes.size());
  ASSERT_TRUE(hs.ok() && hb.ok());
  std::vector<std::future<Result<TransferReply>>> writes(kThreads);
  {
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        writes[i] = client.write_async(*hs, remote,
                                       Range::of(kPart).at_local(i * kPart).at_remote(i * kPart));
      });
    for (auto& t : threads)
      t.join();
  }
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(writes[i].wait_for(std::chrono::seconds(60)), std::future_status::ready) << i;
    auto r = writes[i].get();
    ASSERT_TRUE(r.ok()) << i << ": " << r.error().to_string();
    EXPECT_EQ(r->bytes, kPart);
    EXPECT_EQ(r->path, expected_path());
  }
  EXPECT_EQ(remote_mem.bytes, src.bytes);
  std::vector<std::future<Result<TransferReply>>> reads;
  for (int i = kThreads - 1; i >= 0; --i)
    reads.push_back(
        client.read_async(*hb, remote, Range::of(kPart).at_local(i * kPart).at_remote(i * kPart)));
  for (auto& f : reads) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  EXPECT_EQ(back.bytes, src.bytes);
  // A failing transfer's future carries its error, naming the buffer.
  BufferHandle unknown = hs->handle();
  unknown.id = 987654;
  auto bad = client.write_async(unknown, remote).get();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kUnknownBuffer);
  EXPECT_NE(bad.error().message().find("987654"), std::string::npos) << bad.error().message();
}

// A future whose node stops before the reply came still gets a result: an error saying so,
// never a broken promise.
TEST_F(RegisteredBufferTest, AFutureWhoseNodeStopsGetsAnErrorNotABrokenPromise) {
  Memory src(4096, 1), fake_mem(4096);
  auto local = user_->request_buffer(src);
  ASSERT_TRUE(local);
  auto mute = user_->node().system().spawn(silent);
  BufferHandle h = owned_by_mute(*local, mute, fake_mem);
  std::future<Result<TransferReply>> pending;
  {
    RdmaClient client(user_->node().system(), user_->manager());
    pending = client.write_async(*local, h, Range::whole(), std::chrono::minutes(5));
  }
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
  user_.reset();  // the node stops with the transfer still waiting for its owner
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto r = pending.get();
  ASSERT_FALSE(r.ok()) << "a transfer to an owner that never answers succeeded";
  EXPECT_FALSE(r.error().message().empty());
}

}  // namespace
}  // namespace caf_rdma::testing
