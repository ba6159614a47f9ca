// Same-host GPU memory to and from a requester's host memory by cross-memory attach through the
// owner's staging buffer (staged_cross_memory.h, stream_server.h invariant 19), without the
// manager, with FakeDeviceMemory, a stand-in GPU named as such: reads and writes of several
// pieces move every byte, one GPU copy and one cross-memory copy per piece, nothing in-band; a
// withdrawal or a failed GPU copy stops them at the piece it names, no piece after it; the
// owner's `done` comes after the last byte it touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "components/same_host.h"
#include "components/staged_cross_memory.h"
#include "components/stream_client.h"
#include "components/stream_server.h"
#include "components/withdrawal.h"
#include "tests/components/byte_pattern.h"
#include "tests/fake_device_memory.h"

namespace caf_rdma {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::FakeDeviceMemory;

/// Three whole pieces and part of a fourth.
constexpr uint64_t kN = 3 * kStagedCrossPiece + 12345;

struct Owner {
  std::unique_ptr<StreamServer> server;
  std::shared_ptr<FakeDeviceMemory> gpu = std::make_shared<FakeDeviceMemory>(/*direct=*/false);
  std::vector<uint8_t> memory = std::vector<uint8_t>(kN, 0);  // "GPU 0" memory
  std::shared_ptr<std::atomic<bool>> withdrawal = std::make_shared<std::atomic<bool>>(false);

  Owner() {
    StreamServer::Limits limits;
    limits.same_host = true;
    auto s = StreamServer::start("127.0.0.1", limits);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    if (s.ok())
      server = std::move(*s);
    gpu->add_gpu_range(memory.data(), kN, 0);
  }

  /// Grants the whole GPU range; `done` reports its status and the GPU copies made by then.
  uint64_t grant(StreamDirection d, std::promise<std::pair<Status, uint64_t>>* done) {
    return server->grant(
        memory.data(), kN, d, Clock::now() + 20s,
        [this, done](uint64_t, const Status& st, uint64_t) {
          done->set_value({st, gpu->to_host_bytes + gpu->to_device_bytes});
        },
        withdrawal, StagedMemory{gpu, 0});
  }

  /// Fills the GPU range in place (it stays where the stand-in GPU knows it): pattern(seed), or
  /// zeros for seed 0.
  void fill(uint32_t seed) {
    const std::vector<uint8_t> f = seed == 0 ? std::vector<uint8_t>(kN, 0) : filled(kN, seed);
    memory.assign(f.begin(), f.end());
  }

  /// A host-memory job of the requester for the grant `token`.
  StreamJob job(uint64_t token, StreamDirection d, std::vector<uint8_t>& mine) const {
    StreamJob j;
    j.host = server->host();
    j.port = server->port();
    j.unix_name = same_host_endpoint(server->host_id(), server->unix_name());
    j.token = token;
    j.direction = d;
    j.addr = mine.data();
    j.length = mine.size();
    j.deadline = Clock::now() + 20s;
    j.owner_gpu = true;
    return j;
  }
};

std::pair<Status, uint64_t> wait(std::promise<std::pair<Status, uint64_t>>& done) {
  auto f = done.get_future();
  if (f.wait_for(20s) != std::future_status::ready)
    return {Error(ErrorCode::kTimeout, "the grant never finished (20 s)"), 0};
  return f.get();
}

// A read and a write of four pieces: every byte, by cross-memory attach (none in-band), each
// byte copied once by the stand-in GPU through page-locked memory, `done` after the last copy.
TEST(StagedCrossMemoryTest, ReadsAndWritesOfGpuMemoryMoveEveryByteByCrossMemoryAttach) {
  Owner owner;
  ASSERT_TRUE(owner.server);
  StreamClient client(1);
  owner.fill(3);
  std::vector<uint8_t> mine(kN, 0);
  std::promise<std::pair<Status, uint64_t>> read_done;
  StreamEnd end = client.run_now(owner.job(owner.grant(StreamDirection::kOutOfOwner, &read_done),
                                           StreamDirection::kOutOfOwner, mine));
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  EXPECT_TRUE(end.same_host);
  EXPECT_TRUE(mine == owner.memory) << "a byte differs (read)";
  auto [rst, read_copies] = wait(read_done);
  EXPECT_TRUE(rst.ok());
  EXPECT_EQ(read_copies, kN) << "done came before the GPU copies ended";
  EXPECT_EQ(owner.gpu->to_host_bytes.load(), kN) << "not each byte copied out of the GPU once";

  mine = filled(kN, 4);
  std::promise<std::pair<Status, uint64_t>> write_done;
  end = client.run_now(owner.job(owner.grant(StreamDirection::kIntoOwner, &write_done),
                                 StreamDirection::kIntoOwner, mine));
  ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
  auto [wst, write_copies] = wait(write_done);
  EXPECT_TRUE(wst.ok());
  EXPECT_EQ(write_copies, 2 * kN) << "done came before the GPU copies ended";
  EXPECT_TRUE(owner.memory == mine) << "a byte differs (write)";
  EXPECT_EQ(owner.gpu->to_device_bytes.load(), kN) << "not each byte copied into the GPU once";

  EXPECT_EQ(owner.server->cross_memory_served(), 2u);
  EXPECT_EQ(owner.server->inband_served(), 0u) << "bytes went on the socket";
  EXPECT_EQ(owner.gpu->pageable_copy_bytes.load(), 0u) << "the staging was not page-locked";
}

// Withdrawn (its buffer released) after the first GPU copy: a read sends the requester nothing
// more and copies no more out of the GPU; a write copies the first piece into the GPU and no
// other. Both end `released`, in step.
TEST(StagedCrossMemoryTest, AWithdrawalStopsAtThePieceUnderWayAndNothingLandsAfter) {
  for (StreamDirection d : {StreamDirection::kOutOfOwner, StreamDirection::kIntoOwner}) {
    SCOPED_TRACE(to_string(d));
    Owner owner;
    ASSERT_TRUE(owner.server);
    const bool read = d == StreamDirection::kOutOfOwner;
    owner.fill(read ? 5 : 0);
    std::vector<uint8_t> mine = read ? std::vector<uint8_t>(kN, 0) : filled(kN, 6);
    owner.gpu->after_each_copy([&] { owner.withdrawal->store(true); });
    std::promise<std::pair<Status, uint64_t>> done;
    StreamClient client(1);
    StreamEnd end = client.run_now(owner.job(owner.grant(d, &done), d, mine));
    ASSERT_FALSE(end.status.ok()) << "a withdrawn transfer succeeded";
    EXPECT_TRUE(ended_by_withdrawal(end.status)) << end.status.error().to_string();
    auto [st, copies] = wait(done);
    EXPECT_TRUE(ended_by_withdrawal(st));
    EXPECT_EQ(copies, kStagedCrossPiece) << "a GPU copy after the withdrawal";
    const uint64_t gpu_copies = owner.gpu->to_host_bytes + owner.gpu->to_device_bytes;
    EXPECT_EQ(gpu_copies, kStagedCrossPiece) << "a GPU copy after done";
    if (read) {
      EXPECT_EQ(std::count(mine.begin(), mine.end(), 0), static_cast<int64_t>(kN))
          << "bytes reached the requester after the withdrawal";
    } else {
      const std::vector<uint8_t> first(mine.begin(), mine.begin() + kStagedCrossPiece);
      EXPECT_TRUE(std::equal(first.begin(), first.end(), owner.memory.begin()))
          << "the first piece did not land whole";
      EXPECT_EQ(std::count(owner.memory.begin() + kStagedCrossPiece, owner.memory.end(), 0),
                static_cast<int64_t>(kN - kStagedCrossPiece))
          << "a piece landed in the GPU after the withdrawal";
    }
  }
}

// A GPU copy that fails at the second piece fails the transfer with the copy's error, naming the
// GPU and the byte it started at; nothing of a write lands after it; the next transfer on a
// healthy GPU moves every byte.
TEST(StagedCrossMemoryTest, AFailedGpuCopyFailsTheTransferNamingTheGpuAndTheByte) {
  for (StreamDirection d : {StreamDirection::kOutOfOwner, StreamDirection::kIntoOwner}) {
    SCOPED_TRACE(to_string(d));
    Owner owner;
    ASSERT_TRUE(owner.server);
    const bool read = d == StreamDirection::kOutOfOwner;
    owner.fill(read ? 7 : 0);
    std::vector<uint8_t> mine = read ? std::vector<uint8_t>(kN, 0) : filled(kN, 8);
    owner.gpu->fail_copies_after(1);
    std::promise<std::pair<Status, uint64_t>> done;
    StreamClient client(1);
    StreamEnd end = client.run_now(owner.job(owner.grant(d, &done), d, mine));
    owner.gpu->fail_copies(false);
    ASSERT_FALSE(end.status.ok()) << "a transfer whose GPU copy failed succeeded";
    EXPECT_EQ(end.status.error().code(), ErrorCode::kCuda) << end.status.error().to_string();
    const std::string at = "GPU 0 memory at byte " + std::to_string(kStagedCrossPiece);
    EXPECT_NE(end.status.error().message().find(at), std::string::npos)
        << end.status.error().to_string();
    auto [st, copies] = wait(done);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(copies, kStagedCrossPiece) << "a GPU copy after the failed one";
    if (!read) {
      EXPECT_EQ(std::count(owner.memory.begin() + kStagedCrossPiece, owner.memory.end(), 0),
                static_cast<int64_t>(kN - kStagedCrossPiece))
          << "a piece landed in the GPU after the failed copy";
    }
    // The next one moves every byte.
    std::vector<uint8_t> again = read ? std::vector<uint8_t>(kN, 0) : filled(kN, 9);
    std::promise<std::pair<Status, uint64_t>> next_done;
    end = client.run_now(owner.job(owner.grant(d, &next_done), d, again));
    ASSERT_TRUE(end.status.ok()) << end.status.error().to_string();
    EXPECT_TRUE(again == owner.memory) << "a byte differs after the failure";
    EXPECT_TRUE(wait(next_done).first.ok());
  }
}

}  // namespace
}  // namespace caf_rdma
