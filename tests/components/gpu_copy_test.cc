// Same-host GPU to GPU copies on the stream channel without the manager (stream_server.h
// invariant 20, stream_client.h invariant 11), with FakeDeviceMemory, a stand-in GPU named as
// such: an owner of a release before "CGS1" gets the job again plainly and is asked plainly from
// then on; a client stopped while its copy runs returns only after the copy, and the owner lets
// its memory go only after it. Every byte checked.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "components/same_host.h"
#include "components/stream_client.h"
#include "components/stream_protocol.h"
#include "components/stream_server.h"
#include "tests/components/byte_pattern.h"
#include "tests/fake_device_memory.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::FakeDeviceMemory;

/// A GPU read job of `n` bytes into `mine` (fake GPU 0 of `gpu`) from an owner's GPU memory
/// behind the same-host endpoint `unix_name`.
StreamJob gpu_read(const std::shared_ptr<FakeDeviceMemory>& gpu, const std::string& unix_name,
                   uint64_t token, std::vector<uint8_t>& mine) {
  StreamJob j;
  j.host = "127.0.0.1";
  j.port = 1;  // never used: the same-host endpoint answers
  j.unix_name = same_host_endpoint(host_identity(), unix_name);
  j.token = token;
  j.direction = StreamDirection::kOutOfOwner;
  j.addr = mine.data();
  j.length = mine.size();
  j.deadline = Clock::now() + 10s;
  j.staged = StagedMemory{gpu, 0};
  j.owner_gpu = true;
  return j;
}

// An owner of an older release answers "CGS1" as any unknown request (its grant unclaimed):
// the job is asked again plainly on a fresh connection and moves every byte in-band; the next
// one is asked plainly at once.
TEST(GpuCopyTest, AnOwnerThatDoesNotKnowGpuCopiesGetsTheJobAgainPlainly) {
  std::string name;
  auto listener = listen_unix(&name);
  ASSERT_TRUE(listener.ok()) << listener.error().to_string();
  constexpr uint64_t kN = (1 << 20) + 5;
  const std::vector<uint8_t> theirs = filled(kN, 7);
  std::vector<bool> asked_gpu_copy;  // each request's, in order (the old owner's thread)
  std::thread old_owner([&] {
    auto accept_one = [&] {
      pollfd p{listener->fd(), POLLIN, 0};
      EXPECT_EQ(::poll(&p, 1, 10000), 1) << "no connection came";
      return Socket(::accept4(listener->fd(), nullptr, nullptr, SOCK_NONBLOCK));
    };
    // The first connection: "CGS1" is not a request it knows (what its parser answers).
    Socket first = accept_one();
    uint8_t raw[kMaxRequestBytes];
    ASSERT_TRUE(recv_all(first, raw, kGpuCopyRequestBytes, Clock::now() + 10s, "test").ok());
    asked_gpu_copy.push_back(std::memcmp(raw, "CGS1", 4) == 0);
    uint8_t unknown[kRequestBytes] = {'C', 'X', 'S', '9'};
    auto refusal = parse_request(unknown);
    ASSERT_FALSE(refusal.ok());
    ASSERT_TRUE(write_status(first, refusal.error(), Clock::now() + 10s).ok());
    first = Socket();
    // Then plain requests on one connection: go, the bytes, the final status.
    Socket s = accept_one();
    for (int job = 0; job < 2; ++job) {
      auto req = read_request(s, Clock::now() + 10s);
      ASSERT_TRUE(req.ok()) << req.error().to_string();
      asked_gpu_copy.push_back(req->gpu_copy);
      ASSERT_TRUE(write_status(s, Status{}, Clock::now() + 10s).ok());
      ASSERT_TRUE(send_all(s, theirs.data(), kN, Clock::now() + 10s, "test").ok());
      ASSERT_TRUE(write_status(s, Status{}, Clock::now() + 10s).ok());
    }
  });
  auto gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  StreamClient client(1);
  for (uint64_t token : {11u, 12u}) {
    std::vector<uint8_t> mine(kN, 0);
    gpu->add_gpu_range(mine.data(), kN, 0);
    StreamEnd end = client.run_now(gpu_read(gpu, name, token, mine));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_TRUE(end.same_host);
    EXPECT_TRUE(mine == theirs) << "a byte differs (job " << token << ")";
  }
  old_owner.join();
  EXPECT_EQ(asked_gpu_copy, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(gpu->to_device_bytes.load(), 2 * kN) << "not through the bounce buffer";
}

// A client stopped while a job copies from its owner's export does not cut the copy: stop()
// returns after it, the owner's `done` (which lets its memory go) runs only after the copy's
// word, and the bytes all landed.
TEST(GpuCopyTest, AClientStoppedMidCopyReturnsAfterTheCopyAndTheOwnerAfterItsWord) {
  StreamServer::Limits limits;
  limits.same_host = true;
  auto server = StreamServer::start("127.0.0.1", limits);
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  auto owner_gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  auto my_gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  constexpr uint64_t kN = 1 << 20;
  std::vector<uint8_t> theirs = filled(kN, 8), mine(kN, 0);
  owner_gpu->add_gpu_range(theirs.data(), kN, 0);
  my_gpu->add_gpu_range(mine.data(), kN, 0);
  auto e = owner_gpu->export_range(reinterpret_cast<uint64_t>(theirs.data()), kN, 0);
  ASSERT_TRUE(e.ok());
  StagedMemory staged{owner_gpu, 0};
  staged.exported = std::make_shared<const GpuExport>(*e);
  staged.in_export = e->offset;
  std::promise<Status> owner_done;
  auto owner_done_f = owner_done.get_future();
  const uint64_t token = (*server)->grant(
      theirs.data(), kN, StreamDirection::kOutOfOwner, Clock::now() + 10s,
      [&](uint64_t, const Status& st, uint64_t) { owner_done.set_value(st); }, nullptr, staged);
  my_gpu->hold_gpu_copies(true);
  std::promise<StreamEnd> ended;
  auto ended_f = ended.get_future();
  StreamClient client(1);
  StreamJob job = gpu_read(my_gpu, (*server)->unix_name(), token, mine);
  job.done = [&](StreamEnd end) { ended.set_value(std::move(end)); };
  ASSERT_TRUE(client.submit(std::move(job)).ok());
  ASSERT_TRUE(my_gpu->wait_held(1)) << "the copy did not start";
  std::thread stopper([&] { client.stop(); });
  // Neither the owner nor the job ended while the copy is held.
  EXPECT_EQ(owner_done_f.wait_for(300ms), std::future_status::timeout)
      << "the owner let its memory go while the requester copied from it";
  EXPECT_EQ(ended_f.wait_for(0ms), std::future_status::timeout);
  my_gpu->hold_gpu_copies(false);
  stopper.join();
  ASSERT_EQ(owner_done_f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(owner_done_f.get().ok());
  ASSERT_EQ(ended_f.wait_for(10s), std::future_status::ready);
  StreamEnd end = ended_f.get();
  EXPECT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_TRUE(mine == theirs) << "a byte differs";
  EXPECT_EQ(my_gpu->between_gpus_bytes.load(), kN);
  EXPECT_EQ((*server)->gpu_copies_served(), 1u);
}

}  // namespace
}  // namespace caf_rdma
