// Revocation and error causes, through the manager and through RdmaClient's direct lanes:
//  - a released handle grants nothing, even when a live buffer covers its memory (every handle
//    has a memory region and rkey of its own);
//  - a transfer refused because the owner released the buffer fails with `released` naming it
//    (the owner is asked why the NIC refused), not with a bare work-completion status;
//  - ops that only shared a queue pair with a failing op are retried and succeed;
//  - an owner that dies while it is asked (why it refused, its checksum) is named at once;
//  - verify mode (checksums of both sides) passes correct transfers.
// Built twice: revocation_fallback_test (native) and revocation_rdma_test (in the VM).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <thread>

#include "actors/rdma_client.h"
#include "tests/actors/manager_fixture.h"
#include "tests/actors/two_node_test.h"
#include "tests/rdma_test.h"
#include "tests/sanitizer_build.h"

namespace caf_rdma::testing {
namespace {

/// Whether one of the first 64 bytes of `bytes` is no longer 0. It reads memory another thread
/// may be writing (the write under test): a race by design, so ThreadSanitizer is told not to
/// check these reads (the bytes are checked after the release returned, when nothing writes).
bool first_bytes_landed(const volatile uint8_t* bytes) {
  [[maybe_unused]] UncheckedReads unchecked;  // an RAII scope: empty outside TSan builds
  bool landed = false;
  for (int i = 0; i < 64 && !landed; ++i)
    landed = bytes[i] != 0;
  return landed;
}

class RevocationTest : public TwoNodeTest {
protected:
  /// Registers [addr, addr + size) at the owner and returns the handle as the user sees it.
  BufferHandle publish(uint64_t addr, uint64_t size, const std::string& name) {
    return remote_view(*owner_, *user_, addr, size, name);
  }

  std::unique_ptr<RdmaClient> client(bool direct) {
    return std::make_unique<RdmaClient>(user_->node().system(), user_->manager(), direct);
  }

  /// Runs `op` through the manager (direct = false) or an RdmaClient's lane (true).
  Result<TransferReply> run(const TransferOp& op, bool direct) {
    if (!direct) {
      auto r = user_->transfer(op);
      if (r)
        return *r;
      return Error(error_code(r.error()), error_message(r.error()));
    }
    return client(true)->transfer(op, 20000);
  }
};

TEST_F(RevocationTest, AReleasedHandleInsideALiveBufferGrantsNothing) {
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "RdmaClient direct lane" : "manager");
    constexpr uint64_t kSize = 256 << 10, kSubOffset = 64 << 10, kSubSize = 16 << 10;
    Memory mem(kSize), src(kSubSize, 41);
    BufferHandle whole = publish(mem.addr(), kSize, direct ? "whole-d" : "whole-m");
    BufferHandle sub = publish(mem.addr() + kSubOffset, kSubSize, direct ? "sub-d" : "sub-m");
    ASSERT_NE(whole.id, 0u);
    ASSERT_NE(sub.id, 0u);
    if (expected_path() == kPathRdma) {
      EXPECT_NE(sub.rkey, whole.rkey) << "two handles must never share an rkey";
    }
    auto local = user_->request_buffer(src);
    ASSERT_TRUE(local);
    auto released = owner_->release(sub.id);
    ASSERT_TRUE(released) << error_message(released.error());

    auto w = run(make_write(*local, sub), direct);
    ASSERT_FALSE(w.ok()) << "a write through a released handle was accepted (path " << w->path
                         << ")";
    EXPECT_EQ(w.error().code(), ErrorCode::kReleased) << w.error().to_string();
    EXPECT_NE(w.error().message().find("buffer " + std::to_string(sub.id)), std::string::npos)
        << w.error().message();
    for (uint64_t i = 0; i < kSize; ++i)
      ASSERT_EQ(mem.bytes[i], 0) << "byte " << i << " changed through a released handle";

    // The live buffer over the same memory still works, every byte checked.
    auto ok = run(make_write(*local, whole, kSubSize, 0, kSubOffset), direct);
    ASSERT_TRUE(ok.ok()) << ok.error().to_string();
    EXPECT_EQ(ok->path, expected_path());
    EXPECT_EQ(std::memcmp(mem.bytes.data() + kSubOffset, src.bytes.data(), kSubSize), 0);
    for (uint64_t i = 0; i < kSize; ++i) {
      if (i < kSubOffset || i >= kSubOffset + kSubSize) {
        ASSERT_EQ(mem.bytes[i], 0) << "byte " << i;
      }
    }
  }
}

TEST_F(RevocationTest, ATransferToAReleasedBufferSaysReleased) {
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "RdmaClient direct lane" : "manager");
    Memory mem(8192, 5), back(8192);
    BufferHandle remote = publish(mem.addr(), mem.bytes.size(), direct ? "gone-d" : "gone-m");
    auto local = user_->request_buffer(back);
    ASSERT_TRUE(local);
    ASSERT_TRUE(owner_->release(remote.id));
    auto r = run(make_read(*local, remote), direct);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), ErrorCode::kReleased) << r.error().to_string();
    EXPECT_NE(r.error().message().find("released"), std::string::npos) << r.error().message();
    for (uint64_t i = 0; i < back.bytes.size(); ++i)
      ASSERT_EQ(back.bytes[i], 0) << "byte " << i << " arrived from a released buffer";
  }
}

TEST_F(RevocationTest, OpsBesideARefusedOneSucceed) {
  // The refused op takes the queue pair to ERR: it is dropped and the ops it flushed run again
  // on a new one.
  SCOPED_TRACE("RdmaPath invariants 4 and 5");
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "RdmaClient direct lane" : "manager");
    constexpr uint64_t kSize = 64 << 10;
    Memory a(kSize), b(kSize), c(kSize, 7), src(kSize, 23);
    BufferHandle ha = publish(a.addr(), kSize, direct ? "a-d" : "a-m");
    BufferHandle hb = publish(b.addr(), kSize, direct ? "b-d" : "b-m");
    BufferHandle hc = publish(c.addr(), kSize, direct ? "c-d" : "c-m");
    Memory back(kSize);
    auto local = user_->request_buffer(src);
    auto local_back = user_->request_buffer(back);
    ASSERT_TRUE(local && local_back);
    ASSERT_TRUE(owner_->release(hb.id));
    std::vector<TransferOp> ops{make_write(*local, ha), make_write(*local, hb),
                                make_read(*local_back, hc)};
    std::vector<TransferOutcome> out;
    if (direct) {
      auto r = client(true)->batch(ops, 20000);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      out = *r;
    } else {
      auto r = user_->batch(ops);
      ASSERT_TRUE(r) << error_message(r.error());
      out = *r;
    }
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(out[0].ok()) << out[0].message;
    EXPECT_EQ(out[1].code, uint8_t(ErrorCode::kReleased)) << out[1].message;
    EXPECT_TRUE(out[2].ok()) << out[2].message;
    EXPECT_EQ(a.bytes, src.bytes);
    EXPECT_EQ(back.bytes, c.bytes);
    for (uint64_t i = 0; i < kSize; ++i)
      ASSERT_EQ(b.bytes[i], 0) << "byte " << i << " of the released buffer changed";
  }
}

// The release rule (docs/guarantees.md, "Release"; manager invariant 2), the same on every
// transport: an owner that releases a buffer while a peer's write moves bytes into it stops the
// write, as a NIC stops a peer's one-sided op when the region is deregistered. The write fails
// `released` naming the buffer; the release returns (without waiting for the rest of the
// write); no byte of the buffer changes after the release returned, and each byte holds either
// what it held or the write's byte. The release is sent once the write is under way; a write
// that still beat it finished before the release took effect, and one it reached before its
// first byte moved nothing, both as the rule allows (every byte then checked): a few tries, one
// of which must stop mid-way. (64 MiB on RDMA, where Soft-RoCE in an emulated VM moves a few
// MB/s, and under the sanitizers.)
TEST_F(RevocationTest, AReleaseDuringAPeersWriteStopsItTheSameWayOnEveryTransport) {
  const bool rdma = expected_path() == kPathRdma;
  constexpr uint64_t kFallbackSize =
      kThreadSanitizer || kAddressSanitizer ? 64ull << 20 : 256ull << 20;
  const uint64_t size = rdma ? 64ull << 20 : kFallbackSize;
  constexpr int kTries = 4;
  const Memory src(size, 77);
  // Whether the write is under way (bounded): its first bytes are in the owner's memory (where
  // only the write writes). Under ThreadSanitizer too: waiting only for the owner to hold the
  // buffer (its grant), the release beat every try's first byte over TCP in a CI run.
  auto under_way = [&](const Memory& mem) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (first_bytes_landed(mem.bytes.data()))
        return true;
      std::this_thread::yield();
    }
    return false;
  };
  // Tries until a write was stopped with some of its bytes landed.
  auto stop_a_write = [&](bool direct) {
    auto local = user_->request_buffer(src);
    ASSERT_TRUE(local);
    int stopped = 0;
    for (int attempt = 0; attempt < kTries && stopped == 0; ++attempt) {
      SCOPED_TRACE("try " + std::to_string(attempt));
      auto mem = std::make_unique<Memory>(size);
      BufferHandle remote =
          publish(mem->addr(), size, "rel-" + std::to_string(direct) + std::to_string(attempt));
      auto writing =
          std::async(std::launch::async, [&] { return run(make_write(*local, remote), direct); });
      const bool started = under_way(*mem);
      auto released = owner_->release(remote.id);
      const std::vector<uint8_t> at_release = mem->bytes;
      ASSERT_EQ(writing.wait_for(std::chrono::seconds(120)), std::future_status::ready);
      auto w = writing.get();
      ASSERT_TRUE(started) << "the write never started: "
                           << (w.ok() ? std::string("it succeeded") : w.error().to_string());
      ASSERT_TRUE(released) << error_message(released.error());
      EXPECT_TRUE(mem->bytes == at_release) << "bytes changed after the release returned";
      if (w.ok()) {
        // It finished before the release took effect: all of it landed.
        EXPECT_TRUE(mem->bytes == src.bytes) << "a write reported success with missing bytes";
        continue;
      }
      EXPECT_EQ(w.error().code(), ErrorCode::kReleased) << w.error().to_string();
      EXPECT_NE(w.error().message().find("buffer " + std::to_string(remote.id)), std::string::npos)
          << w.error().message();
      // Each byte old (0) or new: whole blocks compared first (byte loops are slow under the
      // sanitizers), a block that is neither byte by byte.
      uint64_t landed = 0;
      static const std::vector<uint8_t> kZeros(4096, 0);
      for (uint64_t at = 0; at < size; at += kZeros.size()) {
        const uint64_t n = std::min<uint64_t>(kZeros.size(), size - at);
        if (std::memcmp(mem->bytes.data() + at, src.bytes.data() + at, n) == 0) {
          landed += n;
          continue;
        }
        if (std::memcmp(mem->bytes.data() + at, kZeros.data(), n) == 0)
          continue;
        for (uint64_t i = at; i < at + n; ++i) {
          if (mem->bytes[i] == src.bytes[i])
            ++landed;
          else
            ASSERT_EQ(mem->bytes[i], 0) << "byte " << i << " is neither the old nor the new one";
        }
      }
      std::printf("[ release mid-write ] %s: %llu of %llu bytes had visibly landed: %s\n",
                  direct ? "direct" : "manager", static_cast<unsigned long long>(landed),
                  static_cast<unsigned long long>(size), w.error().message().c_str());
      stopped += landed > 0 ? 1 : 0;  // else refused before its first byte: try again
      mem.reset();                    // the release returned: the memory may go
    }
    EXPECT_EQ(stopped, 1) << "no write was stopped mid-way: each finished before its owner's "
                             "release took effect, or had not begun";
    EXPECT_TRUE(user_->release(local->id));
  };
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "RdmaClient direct lane" : "manager");
    stop_a_write(direct);
  }
  if (rdma)
    return;
  // The fallback between hosts: the stream channel over TCP, not the same-host endpoint.
  SCOPED_TRACE("fallback over TCP (no same-host endpoint)");
  ManagerOptions tcp;
  tcp.same_host = false;
  ASSERT_TRUE(restart(tcp));
  stop_a_write(false);
}

// An owner that dies while the requester waits for its answer (why the NIC refused an access,
// its checksum in verify mode): the requester's manager fails the question with
// peer_unavailable naming the owner as soon as it sees the owner go, not at the question's
// timeout. The owner here is a fake: an actor that takes the question and never answers.
TEST_F(RevocationTest, AQuestionToAnOwnerThatDiesFailsWithPeerUnavailable) {
  auto& sys = user_->node().system();
  for (bool checksum : {false, true}) {
    SCOPED_TRACE(checksum ? "checksum" : "access check");
    auto asked = std::make_shared<std::promise<void>>();
    auto asked_future = asked->get_future();
    auto silent = sys.spawn([asked](caf::event_based_actor* self) -> caf::behavior {
      auto held = std::make_shared<std::vector<caf::response_promise>>();
      auto take = [self, held, asked] {
        held->push_back(self->make_response_promise());
        asked->set_value();
      };
      return {
          [take](buf_check_atom, const BufferRef&, uint64_t, uint64_t, uint8_t, const PeerNonce&) {
            take();
          },
          [take](buf_sum_atom, const BufferRef&, uint64_t, uint64_t, const PeerNonce&) { take(); },
      };
    });
    BufferHandle h;
    h.id = 7;
    h.addr = 4096;
    h.size = 4096;
    h.owner = silent;
    h.owner_name = "silent-owner:1";
    caf::scoped_actor self{sys};
    std::optional<caf::error> got;
    // Asks, waits until the owner holds the question, kills the owner, takes the reply.
    auto ask = [&](auto handle, auto on_value) {
      if (asked_future.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
        return;  // got stays empty: the question never reached the owner
      caf::anon_send_exit(silent, caf::exit_reason::kill);
      handle.receive(on_value, [&](caf::error& e) { got = e; });
    };
    if (checksum)
      ask(self->request(user_->manager(), std::chrono::seconds(120), ask_sum_atom::value, h,
                        uint64_t{0}, uint64_t{16}),
          [&](uint64_t) { got.emplace(); });
    else
      ask(self->request(user_->manager(), std::chrono::seconds(120), ask_check_atom::value, h,
                        uint64_t{0}, uint64_t{16}, uint8_t{0}, uint32_t{60000}),
          [&](TransferOutcome&) { got.emplace(); });
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(error_code(*got), ErrorCode::kPeerUnavailable) << error_message(*got);
    EXPECT_NE(error_message(*got).find("silent-owner:1"), std::string::npos) << error_message(*got);
  }
}

class VerifyModeTest : public RevocationTest {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      GTEST_SKIP() << rdma_skip_reason();
    ManagerOptions verify;
    verify.verify = true;
    ASSERT_TRUE(restart(verify));
  }
};

TEST_F(VerifyModeTest, CorrectTransfersPassTheComparison) {
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "RdmaClient direct lane" : "manager");
    for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20}) {
      Memory remote_mem(size), src(size, 13), back(size);
      BufferHandle remote =
          publish(remote_mem.addr(), size, "v" + std::to_string(size) + (direct ? "d" : "m"));
      auto local = user_->request_buffer(src);
      auto local_back = user_->request_buffer(back);
      ASSERT_TRUE(local && local_back);
      auto w = run(make_write(*local, remote), direct);
      ASSERT_TRUE(w.ok()) << w.error().to_string();
      EXPECT_EQ(remote_mem.bytes, src.bytes);
      auto r = run(make_read(*local_back, remote), direct);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      EXPECT_EQ(back.bytes, src.bytes);
      EXPECT_TRUE(owner_->release(remote.id));  // before remote_mem is freed
    }
  }
}

}  // namespace
}  // namespace caf_rdma::testing
