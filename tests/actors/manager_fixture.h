// Test helpers for RdmaManagerActor: nodes, registered memory, blocking requests. What is not a
// template is compiled once, in manager_fixture.cc (its CAF requests cost each test source that
// includes this header about 4 s of compile time when they were inline).
//
// The transport under test comes from CAF_RDMA_TRANSPORT, set per test target: "fallback"
// (native lane) or "rdma" (rdma-tagged targets, in the VM: the fallback is forbidden, so every
// transfer must take the RDMA path).
#pragma once

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/rdma_errors.h"
#include "actors/rdma_node.h"
#include "components/secure_random.h"
#include "tests/actors/expect_rdma_error.h"

namespace caf_rdma::testing {

using namespace std::chrono_literals;

inline std::string expected_path() {
  const char* t = std::getenv(kEnvTransport);
  return t != nullptr && std::strcmp(t, "rdma") == 0 ? kPathRdma : kPathFallback;
}

/// Path of the workspace file `path` (a data dependency) in the test's runfiles.
inline std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir && ws)
    return std::string(srcdir) + "/" + ws + "/" + path;
  return path;
}

inline uint8_t pattern(uint64_t i, uint32_t seed) {
  // The seed is spread over the high bits: patterns of two seeds differ in (nearly) every byte.
  return static_cast<uint8_t>((i * 2654435761u + seed * 0x9E3779B97F4A7C15u) >> 11);
}

/// Memory owned by a test, filled with a pattern (seed 0: zeros).
struct Memory {
  explicit Memory(uint64_t n, uint32_t seed = 0) : bytes(n) {
    for (uint64_t i = 0; i < n; ++i)
      bytes[i] = seed == 0 ? 0 : pattern(i, seed);
  }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(bytes.data()); }
  std::vector<uint8_t> bytes;
};

/// Every byte of [offset, offset + n) of `m` is the pattern `seed` had at `src_offset` on.
::testing::AssertionResult holds_pattern(const Memory& m, uint64_t offset, uint64_t n,
                                         uint32_t seed, uint64_t src_offset);

/// A node plus a blocking requester in its actor system.
class TestNode {
public:
  explicit TestNode(std::unique_ptr<RdmaNode> node);
  ~TestNode();

  RdmaNode& node() { return *node_; }
  const rdma_manager_actor& manager() { return node_->manager(); }

  caf::expected<BufferHandle> request_buffer(const Memory& m,
                                             BufferAccess a = BufferAccess::kReadWrite);
  caf::expected<BufferHandle> request_buffer(uint64_t addr, uint64_t size,
                                             BufferAccess a = BufferAccess::kReadWrite);
  caf::expected<uint64_t> release(uint64_t id);
  caf::expected<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms = 20000);
  caf::expected<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                                    uint32_t timeout_ms = 20000);
  /// The manager's counters; a failed request fails the test (no zeros to compare against).
  ManagerStats stats();

  /// Waits (up to `limit`) until `pred(stats())` holds; the last stats seen. Each question may
  /// wait for the rest of `limit`: a manager working through a flood (thousands of messages a
  /// test sent it, slower still under a sanitizer) answers late but answers, and only a limit
  /// with no answer at all, or an error other than a timeout, fails the test.
  template <class Pred>
  ManagerStats wait_stats(Pred pred,
                          std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + limit;
    ManagerStats last;
    bool answered = false;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      auto s = query_stats(std::max(left, std::chrono::milliseconds(1000)));
      if (s) {
        last = std::move(*s);
        answered = true;
        if (pred(last))
          return last;
      } else if (s.error() != caf::sec::request_timeout) {
        ADD_FAILURE() << "stats: " << error_message(s.error());
        return last;
      }
      if (clock::now() >= deadline)
        break;
    }
    if (!answered)
      ADD_FAILURE() << "stats: no answer within " << limit.count() << " ms";
    return last;
  }

  /// Waits (up to `limit`) until a transfer or a direct lane uses one of this node's buffers.
  bool wait_busy(std::chrono::milliseconds limit = std::chrono::milliseconds(20000));

  /// Waits (up to `limit`) until no transfer or lane uses this node's buffers: the stream
  /// channel's server threads have reported every grant served, so this node may touch the
  /// memory again (its release would wait for the same).
  bool wait_quiet(std::chrono::milliseconds limit = std::chrono::milliseconds(20000));

private:
  caf::expected<ManagerStats> query_stats(std::chrono::milliseconds timeout);

  std::unique_ptr<RdmaNode> node_;
  std::unique_ptr<caf::scoped_actor> self_;
};

/// A node of the transport under test (CAF_RDMA_TRANSPORT) with the options of `extra` that
/// tests set.
std::unique_ptr<TestNode> start_node(const ManagerOptions& extra = {});

/// Registers `m` at `owner` and returns its handle as `user` sees it: put into the owner's
/// directory (by the owner's own actor: only they may) and fetched through a network proxy
/// (serialized, the owner arriving as a proxy).
BufferHandle remote_view(TestNode& owner, TestNode& user, uint64_t addr, uint64_t size,
                         const std::string& name, BufferAccess a = BufferAccess::kReadWrite);
BufferHandle remote_view(TestNode& owner, TestNode& user, const Memory& m, const std::string& name,
                         BufferAccess a = BufferAccess::kReadWrite);

/// A peer-protocol request as a peer node's facade sends it: sealed with a fresh PeerNonce
/// (actors/peer_facade.h, invariant 6). The answer counts only if it carries the nonce back;
/// an unsealed error (CAF's own, e.g. its timeout) is returned as it is.
template <class T, class... Ts>
caf::expected<T> sealed_request(caf::scoped_actor& self, const caf::actor& dest,
                                std::chrono::milliseconds timeout, Ts&&... xs) {
  PeerNonce nonce;
  secure_random(&nonce, sizeof(nonce));
  caf::expected<T> out{caf::make_error(caf::sec::unexpected_response, "no answer")};
  auto mine = [&](const caf::message& m) {
    const auto& n = m.get_as<PeerNonce>(1);
    return n.hi == nonce.hi && n.lo == nonce.lo;
  };
  self->request(dest, timeout, caf::make_message(std::forward<Ts>(xs)..., nonce))
      .receive([&](caf::error& e) { out = std::move(e); },
               caf::others >> [&](caf::message_view& v) -> caf::result<caf::message> {
                 caf::message m = v.move_content_to_message();
                 if (m.match_elements<T, PeerNonce>() && mine(m))
                   out = m.get_as<T>(0);
                 else if (m.match_elements<caf::error, PeerNonce>() && mine(m))
                   out = m.get_as<caf::error>(0);
                 else
                   out = caf::make_error(caf::sec::unexpected_response,
                                         "not a sealed answer: " + caf::to_string(m));
                 return caf::message{};
               });
  return out;
}

/// A stand-in owner manager that never answers fetch, store or handshakes (each comes sealed).
caf::behavior silent(caf::event_based_actor*);

using stand_in_go_atom = caf::atom_constant<caf::atom("stand_go")>;

/// A stand-in owner manager (spawn it in the requester's actor system): holds the first fetch
/// it gets (sealed, as peers send them) until told `stand_in_go_atom`, then answers it, sealed,
/// with pattern(i, seed) for its length; `asked` is set when the fetch arrived.
caf::behavior held_fetch_owner(caf::event_based_actor* self,
                               const std::shared_ptr<std::promise<void>>& asked, uint32_t seed);

/// A handle like `local` whose "owner" is `mute`, which never answers (fallback requests and
/// handshakes hang there).
BufferHandle owned_by_mute(const BufferHandle& local, const caf::actor& mute, const Memory& mem);

}  // namespace caf_rdma::testing
