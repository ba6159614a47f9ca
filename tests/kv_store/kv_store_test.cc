// kv_store end to end: server and clients in this process (each with its own node), plus a
// kv_server process for the "server gone mid-request" case. Built twice: fallback (native)
// and rdma (rdma-tagged, in the VM, where every value must move by RDMA).
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <signal.h>

#include <atomic>
#include <optional>
#include <set>
#include <thread>

#include "actors/rdma_client.h"
#include "actors/rdma_errors.h"
#include "components/same_host.h"
#include "components/socket_io.h"
#include "support/child_process.h"
#include "systems/kv_store/kv_client.h"
#include "systems/kv_store/kv_server.h"
#include "tests/actors/manager_fixture.h"
#include "tests/closed_port.h"
#include "tests/rdma_test.h"

namespace caf_rdma::kv {
namespace {

using caf_rdma::testing::expected_path;
using caf_rdma::testing::pattern;
using namespace std::chrono_literals;

std::vector<uint8_t> value_of(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = pattern(i, seed);
  return v;
}

#define EXPECT_ERROR(r, want, fragment)                                \
  do {                                                                 \
    ASSERT_FALSE((r).ok()) << "expected " << to_string(want);          \
    EXPECT_EQ((r).error().code(), (want)) << (r).error().to_string();  \
    EXPECT_NE((r).error().message().find(fragment), std::string::npos) \
        << "'" << (fragment) << "' not in: " << (r).error().message(); \
  } while (false)

class KvStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !caf_rdma::testing::rdma_skip_reason().empty())
      CAF_RDMA_SKIP_OR_FAIL(caf_rdma::testing::rdma_skip_reason());
    auto mo = ManagerOptions::from_env();
    ASSERT_TRUE(mo.ok()) << mo.error().to_string();
    manager_ = *mo;
    KvServerOptions so;
    so.memory_bytes = 64 << 20;
    so.manager = manager_;
    auto s = KvServer::start(so);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    server_ = std::move(*s);
  }

  /// A client of the server; `manager`: its options instead of the fixture's.
  std::unique_ptr<KvClient> connect(uint64_t buffer_bytes = 32 << 20, uint32_t slots = 1,
                                    const std::optional<ManagerOptions>& manager = std::nullopt) {
    KvClientOptions o;
    o.server = server_->address();
    o.buffer_bytes = buffer_bytes;
    o.slots = slots;
    o.manager = manager.value_or(manager_);
    auto c = KvClient::connect(o);
    EXPECT_TRUE(c.ok()) << c.error().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }

  void expect_value(KvSession& s, const std::string& key, const std::vector<uint8_t>& v) {
    auto r = s.get(key);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->length, v.size());
    if (!v.empty()) {
      EXPECT_EQ(r->path, get_path(v.size())) << key;
      EXPECT_TRUE(r->bytes.empty()) << "the inline bytes are the slot's now";
      EXPECT_EQ(std::memcmp(s.slot_data(), v.data(), v.size()), 0) << "value of " << key;
    }
  }

  /// The path of a GET of `size` bytes: without RDMA a small value comes in the answer
  /// (kv_protocol.h), and a larger one by cross-memory attach from the server's same-host GET
  /// listener (kv_local_get.h; server and client are in this process) unless same-host is off.
  std::string get_path(uint64_t size) const {
    if (expected_path() != kPathFallback)
      return expected_path();
    if (size <= kInlineValueMax)
      return kPathInline;
    return manager_.same_host ? kPathSameHost : kPathFallback;
  }

  ManagerOptions manager_;
  std::unique_ptr<KvServer> server_;
};

TEST_F(KvStoreTest, PutGetDeleteRoundTripsOnTheExpectedPath) {
  auto client = connect();
  ASSERT_TRUE(client);
  auto s = client->session(0);
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kv = {
      {"one-byte", value_of(1, 1)},
      {"page", value_of(4096, 2)},
      {"odd/size", value_of((1 << 20) + 3, 3)},
      {"largest-in-reply", value_of(kInlineValueMax, 4)},  // both sides of kInlineValueMax
      {"smallest-not-in-reply", value_of(kInlineValueMax + 1, 5)},
      {"empty", {}}};
  for (auto& [k, v] : kv) {
    auto r = s->put(k, v.data(), v.size());
    ASSERT_TRUE(r.ok()) << k << ": " << r.error().to_string();
    EXPECT_EQ(r->length, v.size());
    if (!v.empty()) {
      EXPECT_EQ(r->path, expected_path());
    }
  }
  // The slot's bytes are overwritten by every get: values come from the server's pool.
  for (auto& [k, v] : kv)
    expect_value(*s, k, v);
  auto replaced = value_of(777, 9);
  ASSERT_TRUE(s->put("page", replaced.data(), replaced.size()).ok());
  expect_value(*s, "page", replaced);
  auto stats = client->server_stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->keys, kv.size());
  EXPECT_EQ(stats->device.empty(), expected_path() == kPathFallback);
  auto removed = s->remove("page");
  ASSERT_TRUE(removed.ok()) << removed.error().to_string();
  EXPECT_EQ(*removed, 777u);
  EXPECT_ERROR(s->get("page"), ErrorCode::kNotFound, "get 'page': no such key");
  EXPECT_ERROR(s->remove("page"), ErrorCode::kNotFound, "delete 'page': no such key");
  expect_value(*s, "odd/size", kv[2].second);
}

TEST_F(KvStoreTest, LargeValuesRoundTrip) {
  auto client = connect(32 << 20);
  ASSERT_TRUE(client);
  auto s = client->session(0);
  auto big = value_of(24 << 20, 11);
  auto r = s->put("big", big.data(), big.size());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->path, expected_path());
  std::memset(s->slot_data(), 0, s->slot_bytes());
  expect_value(*s, "big", big);
  auto big2 = value_of(16 << 20, 12);  // replacing needs room for both copies: 40 of 64 MiB
  ASSERT_TRUE(s->put("big", big2.data(), big2.size()).ok());
  expect_value(*s, "big", big2);
  auto stats = client->server_stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->used_bytes, uint64_t(16) << 20) << "the replaced value's block was not freed";
}

TEST_F(KvStoreTest, EightConcurrentClientsEachSeeTheirOwnValues) {
  constexpr int kClients = 8, kRounds = 6;
  constexpr uint64_t kValue = 96 << 10;
  std::vector<std::unique_ptr<KvClient>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(connect(1 << 20, 2));
    ASSERT_TRUE(clients.back());
  }
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  threads.reserve(kClients);
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      auto s = clients[c]->session(c % 2);
      for (int round = 0; round < kRounds && errors[c].empty(); ++round) {
        std::string key = "client/" + std::to_string(c) + "/" + std::to_string(round % 3);
        auto v = value_of(kValue - uint64_t{100} * c, uint64_t{100} * c + round);
        auto p = s->put(key, v.data(), v.size());
        if (!p.ok() || p->path != expected_path()) {
          errors[c] = "put " + key + ": " + (p.ok() ? "path " + p->path : p.error().to_string());
          break;
        }
        auto g = s->get(key);
        if (!g.ok() || g->length != v.size() ||
            std::memcmp(s->slot_data(), v.data(), v.size()) != 0)
          errors[c] = "get " + key + ": " + (g.ok() ? "wrong bytes" : g.error().to_string());
      }
    });
  for (auto& t : threads)
    t.join();
  for (int c = 0; c < kClients; ++c)
    EXPECT_TRUE(errors[c].empty()) << "client " << c << ": " << errors[c];
  auto stats = clients[0]->server_stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->keys, uint64_t(kClients) * 3);
  EXPECT_EQ(stats->errors, 0u);
}

TEST_F(KvStoreTest, ValueLargerThanTheClientBufferIsRefusedOnBothSides) {
  auto big_client = connect(8 << 20);
  auto small_client = connect(1 << 20);
  ASSERT_TRUE(big_client && small_client);
  auto v = value_of(3 << 20, 4);
  ASSERT_TRUE(big_client->session(0)->put("three-mib", v.data(), v.size()).ok());
  auto s = small_client->session(0);
  // "the client's slot" (same-host listener) or "the client's buffer N" (store actor).
  EXPECT_ERROR(s->get("three-mib"), ErrorCode::kSizeMismatch,
               "get 'three-mib': the value has 3145728 bytes, the client's");
  EXPECT_ERROR(s->put("three-mib", v.data(), v.size()), ErrorCode::kSizeMismatch,
               "larger than the client's buffer slot (1048576 bytes");
  expect_value(*big_client->session(0), "three-mib", v);
}

// A value replaced or deleted while GETs run is seen whole, old or new, never mixed: by RDMA
// with devices; on one host without RDMA through the server's same-host GET listener
// (kv_local_get.h), not its actor.
TEST_F(KvStoreTest, GetsSeeEveryReplacementWhole) {
  auto writer = connect(4 << 20);
  auto reader = connect(4 << 20);
  ASSERT_TRUE(writer && reader);
  auto w = writer->session(0);
  auto r = reader->session(0);
  // Above kInlineValueMax: copied by cross-memory attach while the writer replaces the value.
  const uint64_t kSize = 3 * kInlineValueMax + 5;
  std::vector<std::vector<uint8_t>> values;
  for (uint64_t i = 0; i < 4; ++i)
    values.push_back(value_of(kSize - (i % 2) * 64, static_cast<uint32_t>(40 + i)));  // two lengths
  values.push_back(value_of(1000, 50));  // and one in the answer
  ASSERT_TRUE(w->put("hot", values[0].data(), values[0].size()).ok());
  auto before = writer->server_stats();
  ASSERT_TRUE(before.ok());
  std::atomic<bool> stop{false};
  std::string writer_error;
  std::thread t([&] {
    for (uint32_t i = 1; !stop && writer_error.empty(); ++i) {
      const auto& v = values[i % values.size()];
      auto p = w->put("hot", v.data(), v.size());
      if (!p.ok())
        writer_error = p.error().to_string();
    }
  });
  const std::set<std::string> want_paths = {get_path(kSize), get_path(values[4].size())};
  std::set<std::string> paths;
  uint32_t gets = 0;
  std::string reader_error;  // not ASSERT here: the writer's thread must be joined first
  for (; gets < 300 && reader_error.empty(); ++gets) {
    auto g = r->get("hot");
    if (!g.ok()) {
      reader_error = g.error().to_string();
      break;
    }
    EXPECT_EQ(want_paths.count(g->path), 1u) << g->path;
    paths.insert(g->path);
    bool whole = false;
    for (const auto& v : values)
      whole =
          whole || (g->length == v.size() && std::memcmp(r->slot_data(), v.data(), v.size()) == 0);
    if (!whole)
      reader_error = "GET " + std::to_string(gets) + " of " + std::to_string(g->length) +
                     " bytes (path " + g->path + ") is none of the values put";
  }
  stop = true;
  t.join();
  ASSERT_TRUE(reader_error.empty()) << reader_error;
  EXPECT_TRUE(writer_error.empty()) << writer_error;
  EXPECT_EQ(paths.count(get_path(kSize)), 1u);
  auto after = writer->server_stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->gets - before->gets, gets);
  EXPECT_EQ(after->errors, 0u);
  ASSERT_TRUE(w->remove("hot").ok());
  EXPECT_ERROR(r->get("hot"), ErrorCode::kNotFound, "get 'hot': no such key");
  EXPECT_ERROR(r->get(std::string(kMaxKeyBytes + 1, 'k')), ErrorCode::kInvalidArgument,
               "key of 1025 bytes; keys have 1 to 1024 bytes");
  // After an error, the same session's connection still serves.
  ASSERT_TRUE(w->put("hot", values[4].data(), values[4].size()).ok());
  expect_value(*r, "hot", values[4]);
}

// A connection to the same-host GET listener that sends garbage, or half a request, is closed
// (kv_local_get.h invariant 2) and holds nobody up; without the same-host option, GETs go to
// the store actor.
TEST_F(KvStoreTest, SameHostListenerShrugsOffGarbageAndCanBeTurnedOff) {
  auto client = connect(1 << 20);
  ASSERT_TRUE(client);
  auto s = client->session(0);
  auto v = value_of(200 << 10, 61);
  ASSERT_TRUE(s->put("k", v.data(), v.size()).ok());
  ASSERT_EQ(server_->get_endpoint().empty(), !manager_.same_host);
  if (!manager_.same_host)
    GTEST_SKIP() << "CAF_RDMA_SAME_HOST=0: the server has no same-host GET listener";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto garbage = connect_unix(server_->get_endpoint(), deadline);
  auto half = connect_unix(server_->get_endpoint(), deadline);
  ASSERT_TRUE(garbage.ok() && half.ok());
  const char junk[32] = "GET k HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(send_all(*garbage, junk, sizeof(junk), deadline, "junk").ok());
  ASSERT_TRUE(send_all(*half, "KVG1", 4, deadline, "half").ok());
  uint8_t byte = 0;
  auto closed = recv_all(*garbage, &byte, 1, deadline, "junk's answer");
  EXPECT_EQ(closed.error().code(), ErrorCode::kPeerUnavailable) << closed.error().to_string();
  expect_value(*s, "k", v);  // the half request waits; nobody else does
  ManagerOptions off = manager_;
  off.same_host = false;
  auto caf_client = connect(1 << 20, 1, off);
  ASSERT_TRUE(caf_client);
  auto g = caf_client->session(0)->get("k");
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(g->path, expected_path());  // the store actor's manager moved it
  EXPECT_EQ(std::memcmp(caf_client->session(0)->slot_data(), v.data(), v.size()), 0);
}

TEST_F(KvStoreTest, PoolFullLeavesTheOldValueIntact) {
  auto client = connect(48 << 20);
  ASSERT_TRUE(client);
  auto s = client->session(0);
  auto a = value_of(40 << 20, 5);
  ASSERT_TRUE(s->put("a", a.data(), a.size()).ok());
  auto b = value_of(30 << 20, 6);  // 40 + 30 > 64 MiB: no room for the new copy
  EXPECT_ERROR(s->put("a", b.data(), b.size()), ErrorCode::kResourceExhausted,
               "pool full: the value needs 31457280 bytes");
  expect_value(*s, "a", a);
  EXPECT_ERROR(s->put("", a.data(), 1), ErrorCode::kInvalidArgument, "key of 0 bytes");
}

TEST_F(KvStoreTest, FailedTransferLeavesTheOldValueIntactAndFreesTheNewBlock) {
  auto client = connect(1 << 20);
  ASSERT_TRUE(client);
  auto s = client->session(0);
  auto v = value_of(5000, 7);
  ASSERT_TRUE(s->put("k", v.data(), v.size()).ok());
  auto before = client->server_stats();
  ASSERT_TRUE(before.ok());
  // A PUT whose source range lies outside the client's registered buffer: the server's
  // transfer fails, and nothing of it may reach the index.
  std::vector<uint8_t> other(4096);
  auto reg = RdmaClient(client->node().system(), client->node().manager())
                 .request_buffer(other.data(), other.size());
  ASSERT_TRUE(reg.ok()) << reg.error().to_string();
  caf::scoped_actor self{client->node().system()};
  auto remote = connect_published<server_actor>(client->node().system(), "127.0.0.1",
                                                server_->port(), 30s, "kv_server");
  ASSERT_TRUE(remote.ok()) << remote.error().to_string();
  caf::error err;
  self->request(*remote, 30s, put_atom::value, std::string("k"), *reg, uint64_t(4000),
                uint64_t(1000))
      .receive([](ValueInfo&) {}, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err) << "a PUT past the end of the client's buffer succeeded";
  EXPECT_EQ(error_code(err), ErrorCode::kOutOfBounds) << error_message(err);
  EXPECT_NE(error_message(err).find("put 'k' from buffer"), std::string::npos)
      << error_message(err);
  expect_value(*s, "k", v);
  auto after = client->server_stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->used_bytes, before->used_bytes);
}

TEST_F(KvStoreTest, UnreachableServerIsAClearError) {
  caf_rdma::testing::ClosedPort closed;  // bound, not listening: refused
  ASSERT_NE(closed.port(), 0);
  KvClientOptions o;
  o.server = "127.0.0.1:" + std::to_string(closed.port());
  o.manager = manager_;
  auto c = KvClient::connect(o);
  EXPECT_ERROR(c, ErrorCode::kPeerUnavailable, "cannot reach kv_server at " + o.server);
}

std::string server_binary() {
  return caf_rdma::testing::runfile("systems/kv_store/kv_server");
}

TEST_F(KvStoreTest, ServerGoneMidRequestFailsTheRequestNamingTheServer) {
  auto proc = ChildProcess::start({server_binary(), "--listen", "127.0.0.1:0", "--memory-mb", "8"});
  ASSERT_TRUE(proc.ok()) << proc.error().to_string();
  auto line = proc->read_line(60s);
  ASSERT_TRUE(line.ok()) << line.error().to_string();
  auto at = line->find("listening on ");
  ASSERT_NE(at, std::string::npos) << *line;
  std::string address = line->substr(at + 13, line->find(',', at) - at - 13);
  KvClientOptions o;
  o.server = address;
  o.buffer_bytes = 1 << 20;
  o.timeout_ms = 60000;
  o.manager = manager_;
  auto c = KvClient::connect(o);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto s = (*c)->session(0);
  auto v = value_of(1000, 8);
  ASSERT_TRUE(s->put("x", v.data(), v.size()).ok());
  // Freeze the server, so the GET is certainly in flight, then kill it. Frozen means every
  // thread stopped: kill() only queues the stop, and a thread not yet stopped could serve the
  // GET (1 failure in 8 loaded runs).
  proc->kill(SIGSTOP);
  ASSERT_TRUE(proc->wait_stopped(30s)) << "the server did not stop";
  std::atomic<bool> done{false};
  Result<ValueInfo> got = Error(ErrorCode::kInternal, "not run");
  std::thread getter([&] {
    got = s->get("x");
    done = true;
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(done) << "the GET finished against a stopped server";
  proc->kill(SIGKILL);
  getter.join();
  EXPECT_ERROR(got, ErrorCode::kPeerUnavailable, "kv_server at " + address + " is gone");
  // Later requests fail at once with the same reason.
  EXPECT_ERROR(s->remove("x"), ErrorCode::kPeerUnavailable, "is gone");
}

}  // namespace
}  // namespace caf_rdma::kv
