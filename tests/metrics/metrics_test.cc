// A node's metrics (actors/metrics_exporter.h, docs/operations.md, "Metrics"), scraped with a real
// HTTP client (curl): after known work between two nodes the bytes and ops counters equal that work
// per path and kind, a deliberate out-of-bounds request shows as one error with its code, the
// latency histograms count the ops, the registered bytes are what was registered; a manager that
// does not answer gives an error metric, not a hung scrape (exporter invariant 1); a malformed
// CAF_RDMA_METRICS is refused naming it, and under TLS a non-loopback metrics host is refused
// (invariant 2). Built for both transports.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/manager/served_ledger.h"
#include "actors/metrics_exporter.h"
#include "actors/rdma_client.h"
#include "actors/version.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"
#include "tests/scoped_env.h"
#include "tests/security/test_pki.h"

namespace caf_rdma::testing {
namespace {

/// One sample of the text format: `name{k="v",...} value`.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

/// The samples of a scrape (comments skipped). Label values here hold no escaped quotes.
std::vector<Sample> parse(const std::string& text) {
  std::vector<Sample> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#')
      continue;
    Sample s;
    size_t brace = line.find('{');
    size_t space = line.rfind(' ');
    if (space == std::string::npos)
      continue;
    if (brace != std::string::npos && brace < space) {
      s.name = line.substr(0, brace);
      size_t close = line.rfind('}');
      std::string body = line.substr(brace + 1, close - brace - 1);
      size_t p = 0;
      while (p < body.size()) {
        size_t eq = body.find("=\"", p);
        size_t q = body.find('"', eq + 2);
        if (eq == std::string::npos || q == std::string::npos)
          break;
        s.labels[body.substr(p, eq - p)] = body.substr(eq + 2, q - eq - 2);
        p = q + 2;  // past `",`
      }
    } else {
      s.name = line.substr(0, space);
    }
    s.value = std::strtod(line.c_str() + space + 1, nullptr);
    out.push_back(std::move(s));
  }
  return out;
}

/// The sum of the samples named `name` whose labels include `want`.
double sum(const std::vector<Sample>& all, const std::string& name,
           const std::map<std::string, std::string>& want = {}) {
  double total = 0;
  for (const auto& s : all) {
    if (s.name != name)
      continue;
    bool match = true;
    for (const auto& [k, v] : want) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    total += match ? s.value : 0;
  }
  return total;
}

bool has(const std::vector<Sample>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name)
      return true;
  return false;
}

/// GET http://127.0.0.1:port/metrics with curl; "" (and a test failure) when it fails.
std::string scrape(uint16_t port) {
  const std::string cmd =
      "curl -s -S --max-time 60 http://127.0.0.1:" + std::to_string(port) + "/metrics";
  FILE* p = ::popen(cmd.c_str(), "r");  // NOLINT(cert-env33-c): the test's own command
  if (p == nullptr) {
    ADD_FAILURE() << "popen(" << cmd << ") failed";
    return "";
  }
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    out.append(buf, n);
  const int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << cmd << " failed (is curl installed? third_party/install_deps.sh)";
  return out;
}

NodeOptions node_options() {
  NodeOptions o;
  auto env = ManagerOptions::from_env();
  EXPECT_TRUE(env.ok()) << env.error().to_string();
  o.manager = env.ok() ? *env : ManagerOptions{};
  o.connect_timeout = std::chrono::milliseconds(5000);
  return o;
}

/// A node serving its metrics on a port of its own choosing (null, and a test failure, when it
/// does not start).
std::unique_ptr<TestNode> start_with_metrics() {
  NodeOptions o = node_options();
  auto metrics = MetricsOptions::parse("127.0.0.1:0", "test");
  EXPECT_TRUE(metrics.ok()) << metrics.error().to_string();
  if (!metrics.ok())
    return nullptr;
  o.metrics = *metrics;
  auto started = RdmaNode::start(o);
  EXPECT_TRUE(started.ok()) << started.error().to_string();
  return started.ok() ? std::make_unique<TestNode>(std::move(*started)) : nullptr;
}

class MetricsTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      CAF_RDMA_SKIP_OR_FAIL(rdma_skip_reason());
  }
  void TearDown() override {
    user_.reset();  // the user first: its lanes and queue pairs go before the owner's side
    owner_.reset();
  }

  std::unique_ptr<TestNode> owner_, user_;
};

// The counters are the work done, per path and kind, and per peer; errors carry their code;
// histograms count the ops; registered bytes are what was registered (telemetry invariants 1, 3);
// each op counts in its priority class (telemetry invariant 7: the writes bulk, the reads
// latency, the refused write background).
TEST_F(MetricsTest, AScrapeShowsExactlyTheWorkDone) {
  owner_ = start_node();
  user_ = start_with_metrics();
  ASSERT_TRUE(owner_ && user_);
  const uint16_t port = user_->node().metrics_port();
  ASSERT_NE(port, 0);

  constexpr uint64_t kSize = 64 << 10, kWrite = 4096, kRead = 8192;
  constexpr int kWrites = 5, kReads = 3;
  Memory remote_mem(kSize), src(kSize, 7), dst(kSize);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "metrics");
  ASSERT_NE(remote.id, 0U);
  RdmaClient client(user_->node().system(), user_->manager());
  auto s = client.register_buffer(src.bytes.data(), src.bytes.size());
  auto d = client.register_buffer(dst.bytes.data(), dst.bytes.size());
  ASSERT_TRUE(s.ok() && d.ok());
  for (int i = 0; i < kWrites; ++i) {
    const uint64_t at = i * kWrite;
    auto w = client.write(*s, remote, Range::of(kWrite).at_local(at).at_remote(at));
    ASSERT_TRUE(w.ok()) << w.error().to_string();
    EXPECT_EQ(w->path, expected_path());
    for (uint64_t b = at; b < at + kWrite; ++b)
      ASSERT_EQ(remote_mem.bytes[b], src.bytes[b]) << "write " << i << ", byte " << b;
  }
  for (int i = 0; i < kReads; ++i) {
    const uint64_t at = i * kRead;
    auto r =
        client.read(*d, remote, Range::of(kRead).at_local(at).at_remote(at).as(Priority::kLatency));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->path, expected_path());
    for (uint64_t b = at; b < at + kRead; ++b)
      ASSERT_EQ(dst.bytes[b], remote_mem.bytes[b]) << "read " << i << ", byte " << b;
  }
  auto bad =
      client.write(*s, remote, Range::of(kWrite).at_remote(kSize - 100).as(Priority::kBackground));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kOutOfBounds) << bad.error().to_string();

  const std::string text = scrape(port);
  auto all = parse(text);
  const std::string path = expected_path();
  const std::string peer = owner_->node().address();
  EXPECT_EQ(sum(all, "caf_rdma_manager_up"), 1);
  EXPECT_EQ(sum(all, "caf_rdma_transfer_bytes_total", {{"path", path}, {"kind", "write"}}),
            kWrites * kWrite)
      << text;
  EXPECT_EQ(sum(all, "caf_rdma_transfer_bytes_total", {{"path", path}, {"kind", "read"}}),
            kReads * kRead);
  EXPECT_EQ(sum(all, "caf_rdma_transfer_bytes_total"), kWrites * kWrite + kReads * kRead)
      << "bytes counted on another path or kind";
  EXPECT_EQ(sum(all, "caf_rdma_transfer_ops_total", {{"path", path}, {"kind", "write"}}), kWrites);
  EXPECT_EQ(sum(all, "caf_rdma_transfer_ops_total", {{"path", path}, {"kind", "read"}}), kReads);
  EXPECT_EQ(sum(all, "caf_rdma_transfer_ops_total"), kWrites + kReads);
  EXPECT_EQ(sum(all, "caf_rdma_peer_transfer_bytes_total",
                {{"peer", peer}, {"path", path}, {"kind", "write"}}),
            kWrites * kWrite);
  EXPECT_EQ(sum(all, "caf_rdma_peer_transfer_ops_total",
                {{"peer", peer}, {"path", path}, {"kind", "read"}}),
            kReads);
  // The bad request: refused by the checks, before any path.
  EXPECT_EQ(sum(all, "caf_rdma_transfer_errors_total", {{"code", "out_of_bounds"}}), 1) << text;
  EXPECT_EQ(sum(all, "caf_rdma_transfer_errors_total"), 1);
  EXPECT_EQ(
      sum(all, "caf_rdma_peer_transfer_errors_total", {{"peer", peer}, {"code", "out_of_bounds"}}),
      1);
  // Histograms count the successful ops (telemetry invariant 3).
  for (const auto& [kind, n] : {std::make_pair("write", kWrites), std::make_pair("read", kReads)}) {
    const std::map<std::string, std::string> of{{"path", path}, {"kind", kind}};
    EXPECT_EQ(sum(all, "caf_rdma_transfer_latency_seconds_count", of), n) << kind;
    auto inf = of;
    inf["le"] = "+Inf";
    EXPECT_EQ(sum(all, "caf_rdma_transfer_latency_seconds_bucket", inf), n) << kind;
    EXPECT_GT(sum(all, "caf_rdma_transfer_latency_seconds_sum", of), 0) << kind;
  }
  // By class (telemetry invariant 7).
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_ops_total", {{"class", "bulk"}}), kWrites) << text;
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_bytes_total", {{"class", "bulk"}}), kWrites * kWrite);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_ops_total", {{"class", "latency"}}), kReads);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_bytes_total", {{"class", "latency"}}),
            kReads * kRead);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_latency_seconds_count", {{"class", "latency"}}),
            kReads);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_ops_total", {{"class", "background"}}), 0);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_errors_total", {{"class", "background"}}), 1);
  EXPECT_EQ(sum(all, "caf_rdma_class_transfer_errors_total"), 1);
  EXPECT_EQ(sum(all, "caf_rdma_registered_buffers"), 2);
  EXPECT_EQ(sum(all, "caf_rdma_registered_bytes"), 2 * kSize);
  if (path == kPathRdma) {
    EXPECT_GE(sum(all, "caf_rdma_pinned_bytes"), 2 * kSize);
    EXPECT_EQ(sum(all, "caf_rdma_device_up"), 1);
    EXPECT_TRUE(has(all, "caf_rdma_nic_counter")) << "no sysfs counters of the device:\n" << text;
  } else {
    EXPECT_EQ(sum(all, "caf_rdma_pinned_bytes"), 0);
  }
  // The sample docs/operations.md shows comes from here.
  std::printf("---- scrape of the user node ----\n%s---- end of scrape ----\n", text.c_str());
}

// As owner (served_ledger.h): the requests of the user's node that the owner's CPU served, by
// requester, path and kind, add up to exactly the work done; atomics are requests of no bytes;
// RDMA ops pass the owner by. The build_info series names the version and transport.
TEST_F(MetricsTest, AnOwnersScrapeShowsWhatItServedByRequesterPathAndKind) {
  owner_ = start_with_metrics();
  user_ = start_node();
  ASSERT_TRUE(owner_ && user_);
  const uint16_t port = owner_->node().metrics_port();
  ASSERT_NE(port, 0);

  // Small ops and a large one from the manager (the stream channel or the same-host endpoint:
  // every size by default), the client's own ops (its lanes), and atomics (CAF chunks).
  constexpr uint64_t kSize = 1 << 20, kSmall = 4096, kLarge = 512 << 10, kRead = 8192;
  constexpr int kSmallWrites = 3, kReads = 4, kAtomics = 5;
  Memory remote_mem(kSize), src(kSize, 9), dst(kSize);
  BufferHandle remote = remote_view(*owner_, *user_, remote_mem, "served");
  ASSERT_NE(remote.id, 0U);
  RdmaClient client(user_->node().system(), user_->manager());
  auto s = client.register_buffer(src.bytes.data(), src.bytes.size());
  auto d = client.register_buffer(dst.bytes.data(), dst.bytes.size());
  ASSERT_TRUE(s.ok() && d.ok());
  uint64_t written = 0, read = 0;
  for (int i = 0; i < kSmallWrites; ++i) {
    auto w = user_->transfer(make_write(
        s->handle(), remote, Range::of(kSmall).at_local(i * kSmall).at_remote(i * kSmall)));
    ASSERT_TRUE(w) << error_message(w.error());
    written += kSmall;
  }
  auto big = user_->transfer(
      make_write(s->handle(), remote, Range::of(kLarge).at_local(kLarge).at_remote(kLarge)));
  ASSERT_TRUE(big) << error_message(big.error());
  written += kLarge;
  for (uint64_t b = 0; b < kSize; ++b) {
    if (b < kSmallWrites * kSmall || b >= kLarge) {
      ASSERT_EQ(remote_mem.bytes[b], src.bytes[b]) << "byte " << b;
    }
  }
  for (int i = 0; i < kReads; ++i) {
    auto r = client.read(*d, remote, Range::of(kRead).at_local(i * kRead).at_remote(i * kRead));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    read += kRead;
  }
  for (uint64_t b = 0; b < kReads * kRead; ++b)
    ASSERT_EQ(dst.bytes[b], remote_mem.bytes[b]) << "byte " << b;
  const uint64_t word_at = kSize - 8;
  std::string atomic_path;
  for (int i = 0; i < kAtomics; ++i) {
    auto old = client.fetch_add(remote, word_at, 1, RdmaClient::kDefaultTimeout, &atomic_path);
    ASSERT_TRUE(old.ok()) << old.error().to_string();
  }
  uint64_t word = 0;
  std::memcpy(&word, remote_mem.bytes.data() + word_at, sizeof(word));
  uint64_t before = 0;
  std::memcpy(&before, src.bytes.data() + word_at, sizeof(before));
  EXPECT_EQ(word, before + kAtomics);

  // The stream server's workers record a request just before its end is told: wait for them.
  const bool fallback = expected_path() != kPathRdma;
  auto served_bytes = [](const ManagerStats& st) {
    uint64_t n = 0;
    for (const auto& r : st.telemetry.served)
      n += r.bytes;
    return n;
  };
  owner_->wait_stats(
      [&](const ManagerStats& st) { return !fallback || served_bytes(st) >= written + read; });
  const std::string text = scrape(port);
  auto all = parse(text);
  EXPECT_EQ(sum(all, "caf_rdma_build_info", {{"version", kVersion}}), 1) << text;
  EXPECT_EQ(sum(all, "caf_rdma_build_info", {{"transport", owner_->stats().transport}}), 1);
  const double atomics_served = atomic_path == kPathFallback ? kAtomics : 0;
  EXPECT_EQ(sum(all, "caf_rdma_served_requests_total", {{"kind", "fetch-add"}}), atomics_served)
      << "atomics took " << atomic_path << "\n"
      << text;
  EXPECT_EQ(sum(all, "caf_rdma_served_bytes_total", {{"kind", "fetch-add"}}), 0)
      << "an atomic's word exported as bytes";
  for (const auto& r : owner_->stats().telemetry.served) {
    if (is_atomic_kind(r.kind)) {
      EXPECT_EQ(r.bytes, 0U) << "an atomic's word counted as bytes (served_ledger.h invariant 4)";
    }
  }
  if (!fallback) {  // every op above went by RDMA: the owner's CPU served none
    EXPECT_EQ(sum(all, "caf_rdma_served_bytes_total"), 0) << text;
    return;
  }
  EXPECT_EQ(sum(all, "caf_rdma_served_bytes_total", {{"kind", "write"}}), written) << text;
  EXPECT_EQ(sum(all, "caf_rdma_served_bytes_total", {{"kind", "read"}}), read) << text;
  EXPECT_EQ(sum(all, "caf_rdma_served_requests_total", {{"kind", "read"}}), kReads)
      << "one request per read of 8 KiB, whatever its path";
  EXPECT_GE(sum(all, "caf_rdma_served_requests_total", {{"kind", "write"}}), kSmallWrites + 1)
      << "at least one request per write\n"
      << text;
  EXPECT_EQ(sum(all, "caf_rdma_served_requests_total", {{"path", "chunks"}, {"kind", "fetch-add"}}),
            kAtomics)
      << "the fallback's atomics: one request each to the owner's manager";
  EXPECT_EQ(owner_->stats().served_fallback_bytes, written + read) << "atomics counted as bytes";
  // Each path names its requester as its connection knows it (served_ledger.h invariant 5).
  int rows = 0;
  for (const auto& smp : all) {
    if (smp.name != "caf_rdma_served_requests_total")
      continue;
    ++rows;
    const std::string& path = smp.labels.at("path");
    const std::string& peer = smp.labels.at("peer");
    if (path == kServedSameHost)
      EXPECT_EQ(peer, kSameHostPeer);
    else if (path == kServedStream)
      EXPECT_EQ(peer, "127.0.0.1");
    else if (path == kServedChunks)
      EXPECT_EQ(peer, caf::to_string(user_->node().system().node())) << "chunks: the node id";
    else
      ADD_FAILURE() << "served on an unknown path " << path;
  }
  EXPECT_GE(rows, 2) << text;
  // The owner's side as docs/operations.md shows it.
  std::printf("---- owner's served series ----\n");
  for (size_t at = 0, end = 0; at < text.size(); at = end + 1) {
    end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    if (line.rfind("caf_rdma_served_", 0) == 0 || line.rfind("caf_rdma_build_info", 0) == 0)
      std::printf("%s\n", line.c_str());
  }
}

// Exporter invariant 1: a manager that never answers gives an error metric within the scrape's
// timeout, and the endpoint keeps serving.
TEST_F(MetricsTest, AManagerThatDoesNotAnswerGivesAnErrorMetricNotAHang) {
  caf::actor_system_config cfg;
  add_message_types(cfg);
  caf::actor_system sys{cfg};
  // Takes stats requests and never answers them (their promises are kept, so nothing replies).
  struct Silent {
    std::vector<caf::response_promise> held;
  };
  auto silent = sys.spawn([](caf::stateful_actor<Silent>* self) -> caf::behavior {
    return {[=](stats_atom) { self->state.held.push_back(self->make_response_promise()); }};
  });
  MetricsOptions o;
  o.enabled = true;
  o.scrape_timeout = std::chrono::milliseconds(200);
  auto exporter =
      MetricsExporter::start(sys, caf::actor_cast<rdma_manager_actor>(silent), o, false);
  ASSERT_TRUE(exporter.ok()) << exporter.error().to_string();
  for (int i = 1; i <= 2; ++i) {
    auto all = parse(scrape((*exporter)->port()));
    EXPECT_EQ(sum(all, "caf_rdma_manager_up"), 0);
    EXPECT_EQ(sum(all, "caf_rdma_scrape_errors_total"), i);
    EXPECT_FALSE(has(all, "caf_rdma_transfer_ops_total"));
  }
  exporter->reset();  // invariant 3: before the system goes
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

TEST_F(MetricsTest, AMalformedMetricsVariableIsRefusedNamingIt) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ":9464"}) {
    auto n = [&] {
      ScopedEnv metrics(kEnvMetrics, bad);
      return RdmaNode::start(node_options());
    }();
    ASSERT_FALSE(n.ok()) << bad << " was taken";
    EXPECT_EQ(n.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(n.error().message().find(std::string(kEnvMetrics) + "='" + bad + "'"),
              std::string::npos)
        << n.error().to_string();
  }
  // A good one is served where it says (port 0: the one bound).
  auto n = [] {
    ScopedEnv metrics(kEnvMetrics, "127.0.0.1:0");
    return RdmaNode::start(node_options());
  }();
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  ASSERT_NE((*n)->metrics_port(), 0);
  EXPECT_EQ(sum(parse(scrape((*n)->metrics_port())), "caf_rdma_manager_up"), 1);
}

// Exporter invariant 2: under TLS, plain HTTP metrics only on loopback.
TEST_F(MetricsTest, UnderTlsANonLoopbackMetricsHostIsRefused) {
  ASSERT_FALSE(pki().dir.empty());
  NodeOptions o = node_options();
  o.tls = pki().node("a");
  o.metrics.enabled = true;
  o.metrics.host = "0.0.0.0";
  auto refused = RdmaNode::start(o);
  ASSERT_FALSE(refused.ok()) << "metrics served on 0.0.0.0 under TLS";
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("metrics on 0.0.0.0:0"), std::string::npos)
      << refused.error().to_string();
  EXPECT_NE(refused.error().message().find("loopback"), std::string::npos);
  o.metrics.host = "127.0.0.1";
  auto served = RdmaNode::start(o);
  ASSERT_TRUE(served.ok()) << served.error().to_string();
  EXPECT_EQ(sum(parse(scrape((*served)->metrics_port())), "caf_rdma_manager_up"), 1);
}

// Exporter invariant 2 on a plaintext node: beyond loopback only with the opt-in its manager
// needs to publish there (trust, third pass, finding 7).
TEST_F(MetricsTest, APlaintextNodeServesMetricsBeyondLoopbackOnlyWithTheOptIn) {
  ScopedEnv no_opt_in(kEnvPlaintext, "0");
  NodeOptions o = node_options();
  o.metrics.enabled = true;
  o.metrics.host = "0.0.0.0";
  auto refused = RdmaNode::start(o);
  ASSERT_FALSE(refused.ok()) << "metrics served on 0.0.0.0 without the plaintext opt-in";
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  for (const char* part : {"metrics on 0.0.0.0:0", "CAF_RDMA_PLAINTEXT=1", "loopback"})
    EXPECT_NE(refused.error().message().find(part), std::string::npos)
        << refused.error().to_string();
  o.allow_plaintext = true;
  auto served = RdmaNode::start(o);
  ASSERT_TRUE(served.ok()) << served.error().to_string();
  EXPECT_EQ(sum(parse(scrape((*served)->metrics_port())), "caf_rdma_manager_up"), 1);
}

// Exporter invariant 5: silent connections do not hold a scrape up (before: 2 HTTP threads,
// each held 30 s by a connection that sent nothing; 8 such connections held a scrape over
// 118 s, past the scrape's 60 s limit here).
TEST_F(MetricsTest, SilentConnectionsDoNotHoldUpAScrape) {
  auto n = [] {
    ScopedEnv metrics(kEnvMetrics, "127.0.0.1:0");
    return RdmaNode::start(node_options());
  }();
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  std::vector<int> silent;
  for (int i = 0; i < 3 * MetricsExporter::kHttpThreads / 2; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((*n)->metrics_port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    silent.push_back(fd);
  }
  EXPECT_EQ(sum(parse(scrape((*n)->metrics_port())), "caf_rdma_manager_up"), 1);
  for (int fd : silent)
    ::close(fd);
}

}  // namespace
}  // namespace caf_rdma::testing
