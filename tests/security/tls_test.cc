// Authenticated nodes (docs/security.md): nodes with certificates of one cluster CA
// connect over mutual TLS and move bytes; a node without a certificate, or with one of another
// CA, is turned away within the connect timeout while the node keeps serving its peers; bad
// credentials fail at start naming the file (never CAF's abort at the first connection, never
// a passphrase prompt); plaintext on a non-loopback address needs an explicit opt-in; a silent
// listener answers remote_manager with an error after the timeout, not a hang; the
// application's own actors published by a TLS node are reached over TLS only.
//
// Certificates are made for each test run with the openssl tool (tests/security/test_pki.h).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <caf/io/middleman.hpp>

#include "components/stream_client.h"
#include "components/stream_server.h"
#include "components/tls_credentials.h"

#include "systems/kv_store/kv_client.h"
#include "systems/kv_store/kv_server.h"
#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"
#include "tests/scoped_env.h"
#include "tests/security/test_pki.h"
#include "tests/silent_flood.h"

namespace caf_rdma::testing {
namespace {

class TlsTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (expected_path() == kPathRdma && !rdma_skip_reason().empty())
      CAF_RDMA_SKIP_OR_FAIL(rdma_skip_reason());
    ASSERT_FALSE(pki().dir.empty());
  }

  static NodeOptions options(const TlsCredentials& tls) {
    NodeOptions o;
    auto env = ManagerOptions::from_env();
    EXPECT_TRUE(env.ok());
    o.manager = env.ok() ? *env : ManagerOptions{};
    o.tls = tls;
    o.connect_timeout = std::chrono::milliseconds(5000);
    return o;
  }
  static std::unique_ptr<TestNode> node(const TlsCredentials& tls) {
    auto n = RdmaNode::start(options(tls));
    EXPECT_TRUE(n.ok()) << n.error().to_string();
    return n.ok() ? std::make_unique<TestNode>(std::move(*n)) : nullptr;
  }

  /// b writes 1 MiB + 3 of its memory into a's and reads it back into another buffer of its
  /// own, every byte checked.
  void moves_bytes(TestNode& a, TestNode& b, uint32_t seed) {
    auto peer = b.node().remote_manager("127.0.0.1", a.node().port());
    ASSERT_TRUE(peer.ok()) << peer.error().to_string();
    constexpr uint64_t kSize = (1 << 20) + 3;
    Memory at_a(kSize, 0), src(kSize, seed), back(kSize, 0);
    auto ha = a.request_buffer(at_a);
    auto hs = b.request_buffer(src);
    auto hb = b.request_buffer(back);
    ASSERT_TRUE(ha && hs && hb);
    auto w = b.transfer(make_write(*hs, *ha), 30000);
    ASSERT_TRUE(w) << error_message(w.error());
    EXPECT_EQ(w->path, expected_path());
    EXPECT_EQ(at_a.bytes, src.bytes);
    auto r = b.transfer(make_read(*hb, *ha), 30000);
    ASSERT_TRUE(r) << error_message(r.error());
    EXPECT_EQ(back.bytes, src.bytes);
    // On the fallback both went over the stream channel, which speaks TLS too.
    if (expected_path() == kPathFallback) {
      EXPECT_EQ(b.stats().stream_ops, 2u) << "the bytes went in CAF messages, not the stream";
    }
    EXPECT_TRUE(a.release(ha->id) && b.release(hs->id) && b.release(hb->id));
  }
};

TEST_F(TlsTest, NodesWithCertificatesOfTheClusterCaMoveBytes) {
  auto a = node(pki().node("a")), b = node(pki().node("b"));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->node().uses_tls() && b->node().uses_tls());
  moves_bytes(*a, *b, 31);
  // Its own address (over TLS too) gives a node its own manager.
  auto self_view = a->node().remote_manager("127.0.0.1", a->node().port());
  ASSERT_TRUE(self_view.ok()) << self_view.error().to_string();
  EXPECT_EQ(*self_view, a->manager());
}

TEST_F(TlsTest, AnEncryptedKeyWorksWithItsPassphrase) {
  TlsCredentials c = pki().node("c");
  c.key = pki().dir + "/c_enc.key";
  c.passphrase = "s3cret";
  auto a = node(pki().node("a")), n = node(c);
  ASSERT_TRUE(a && n);
  moves_bytes(*a, *n, 32);
}

TEST_F(TlsTest, NodesWithoutTheClustersCertificateAreTurnedAwayAndTheNodeKeepsServing) {
  auto a = node(pki().node("a")), b = node(pki().node("b"));
  ASSERT_TRUE(a && b);
  // A plaintext node (no certificate) and one whose certificate another CA signed (it trusts
  // that CA, so only a's check can refuse it).
  auto plain = node(TlsCredentials{});
  TlsCredentials stranger{pki().dir + "/stranger.pem", pki().dir + "/stranger.key", pki().other_ca,
                          ""};
  auto foreign = node(stranger);
  ASSERT_TRUE(plain && foreign);
  EXPECT_FALSE(plain->node().uses_tls());
  for (TestNode* intruder : {plain.get(), foreign.get()}) {
    auto p = intruder->node().remote_manager("127.0.0.1", a->node().port());
    ASSERT_FALSE(p.ok()) << "a let a node without the cluster's certificate in";
    EXPECT_TRUE(p.error().code() == ErrorCode::kPeerUnavailable ||
                p.error().code() == ErrorCode::kTimeout)
        << p.error().to_string();
    EXPECT_NE(p.error().message().find("127.0.0.1:" + std::to_string(a->node().port())),
              std::string::npos)
        << p.error().message();
  }
  // And the other way: a refuses to talk to a node that cannot prove it belongs.
  auto back = a->node().remote_manager("127.0.0.1", foreign->node().port());
  EXPECT_FALSE(back.ok()) << "a accepted a peer certificate of another CA";
  moves_bytes(*a, *b, 33);
}

TEST_F(TlsTest, CredentialsAndThePlaintextOptInFromTheEnvironment) {
  TlsCredentials b = pki().node("b");
  auto from_env = [&] {
    ScopedEnv certificate(kEnvTlsCertificate, b.certificate), key(kEnvTlsKey, b.key),
        cafile(kEnvTlsCaFile, b.cafile);
    return RdmaNode::start(options(TlsCredentials{}));
  }();
  ASSERT_TRUE(from_env.ok()) << from_env.error().to_string();
  EXPECT_TRUE((*from_env)->uses_tls());
  auto a = node(pki().node("a"));
  ASSERT_TRUE(a);
  TestNode env_node(std::move(*from_env));
  moves_bytes(*a, env_node, 35);

  NodeOptions o = options(TlsCredentials{});
  o.host = "0.0.0.0";
  auto plain = [&] {
    ScopedEnv plaintext(kEnvPlaintext, "1");
    return RdmaNode::start(o);
  }();
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  EXPECT_FALSE((*plain)->uses_tls());
}

TEST_F(TlsTest, BadCredentialsFailAtStartNamingTheFile) {
  const Pki& p = pki();
  struct Case {
    const char* what;
    TlsCredentials tls;
    const char* says;
  };
  std::string missing = p.dir + "/nonexistent.pem";
  // A FIFO nobody writes: opening it for reading the usual way blocks for ever. In /tmp: the
  // VM shares the test's own directories over 9p, which holds no FIFO.
  std::string fifo = "/tmp/caf-rdma-tls-fifo-" + std::to_string(::getpid()) + ".pem";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << "errno " << errno;
  Case cases[] = {
      {"a FIFO as certificate", {fifo, p.dir + "/a.key", p.ca, ""}, "is not a regular file"},
      {"a directory as CA file",
       {p.dir + "/a.pem", p.dir + "/a.key", p.dir, ""},
       "is not a regular file"},
      {"no key", {p.dir + "/a.pem", "", p.ca, ""}, "key is not set"},
      {"no CA file", {p.dir + "/a.pem", p.dir + "/a.key", "", ""}, "CA file is not set"},
      {"missing certificate", {missing, p.dir + "/a.key", p.ca, ""}, "nonexistent.pem"},
      {"key of another certificate",
       {p.dir + "/a.pem", p.dir + "/b.key", p.ca, ""},
       "does not belong to certificate"},
      {"encrypted key, no passphrase",
       {p.dir + "/c.pem", p.dir + "/c_enc.key", p.ca, ""},
       "CAF_RDMA_TLS_PASSPHRASE"},
      {"wrong passphrase",
       {p.dir + "/c.pem", p.dir + "/c_enc.key", p.ca, "guess"},
       "with the passphrase given"},
      {"certificate of another CA",
       {p.dir + "/stranger.pem", p.dir + "/stranger.key", p.ca, ""},
       "is not vouched for by CA file"},
      {"a key as CA file",
       {p.dir + "/a.pem", p.dir + "/a.key", p.dir + "/a.key", ""},
       "holds no PEM certificate"},
  };
  for (const auto& c : cases) {
    auto n = RdmaNode::start(options(c.tls));
    ASSERT_FALSE(n.ok()) << c.what << ": the node started";
    EXPECT_EQ(n.error().code(), ErrorCode::kInvalidArgument) << c.what;
    EXPECT_NE(n.error().message().find(c.says), std::string::npos)
        << c.what << ": " << n.error().message();
  }
  ::unlink(fifo.c_str());
}

// The application's own actors (RdmaNode::publish / connect): a TLS node publishes them over TLS,
// so a member reaches them and gets a handle, while a process without a certificate reaches
// nothing (the actor serves it no request) and a raw connection reads no plaintext CAF off the
// port: the handle with its secret never travels in the clear.
TEST_F(TlsTest, ApplicationActorsOfATlsNodeAreReachedOnlyOverTls) {
  auto a = node(pki().node("a")), b = node(pki().node("b"));
  auto plain = node(TlsCredentials{});
  ASSERT_TRUE(a && b && plain);
  Memory shared(4096, 5);
  auto h = a->request_buffer(shared);
  ASSERT_TRUE(h);
  auto served = std::make_shared<std::atomic<int>>(0);
  auto app = a->node().system().spawn([handle = *h, served](caf::event_based_actor*) {
    return caf::behavior{[=](caf::get_atom) {
      ++*served;
      return handle;
    }};
  });
  auto port = a->node().publish(app);
  ASSERT_TRUE(port.ok()) << port.error().to_string();
  // A member of the cluster reaches it and gets the handle.
  auto from_b = b->node().connect("127.0.0.1", *port, "the application actor");
  ASSERT_TRUE(from_b.ok()) << from_b.error().to_string();
  {
    caf::scoped_actor self{b->node().system()};
    BufferHandle got;
    self->request(*from_b, std::chrono::seconds(10), caf::get_atom::value)
        .receive([&](BufferHandle& x) { got = std::move(x); },
                 [&](caf::error& e) { ADD_FAILURE() << b->node().system().render(e); });
    EXPECT_EQ(got.id, h->id);
    EXPECT_EQ(got.secret_hi, h->secret_hi);
    EXPECT_EQ(got.secret_lo, h->secret_lo);
  }
  // A process without a certificate reaches nothing, by the node's connect or CAF's own.
  auto by_node = plain->node().connect("127.0.0.1", *port, "the application actor");
  EXPECT_FALSE(by_node.ok()) << "a node without a certificate reached the application actor";
  auto by_caf = connect_published(plain->node().system(), "127.0.0.1", *port,
                                  std::chrono::milliseconds(5000), "the application actor");
  EXPECT_FALSE(by_caf.ok()) << "plain CAF reached the application actor";
  // A raw connection gets at most TLS records (an alert, a handshake), never CAF's BASP.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(*port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  timeval wait{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  const char hello[] = "\x00\x00\x00\x00plaintext, please";
  (void)::send(fd, hello, sizeof(hello), MSG_NOSIGNAL);
  std::vector<uint8_t> got;
  uint8_t buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    got.insert(got.end(), buf, buf + n);
  ::close(fd);
  EXPECT_TRUE(got.empty() || got[0] == 0x15 || got[0] == 0x16)
      << "the port answered a plain connection with something other than TLS (first byte "
      << int(got[0]) << ")";
  EXPECT_EQ(served->load(), 1) << "the application actor served a request that was not b's";
  caf::anon_send_exit(app, caf::exit_reason::user_shutdown);
  EXPECT_TRUE(a->release(h->id));
}

// The kv store's server is an application actor of its node (systems/kv_store): under TLS a
// client of the cluster stores and fetches values (every byte checked), and a process that
// speaks plain CAF (no certificate) cannot reach the server at all.
TEST_F(TlsTest, TheKvStoreUnderTlsServesMembersOnly) {
  const TlsCredentials a = pki().node("a");
  ScopedEnv certificate(kEnvTlsCertificate, a.certificate), key(kEnvTlsKey, a.key),
      cafile(kEnvTlsCaFile, a.cafile);
  auto mo = ManagerOptions::from_env();
  ASSERT_TRUE(mo.ok());
  {
    kv::KvServerOptions so;
    so.memory_bytes = 8 << 20;
    so.manager = *mo;
    auto server = kv::KvServer::start(so);
    ASSERT_TRUE(server.ok()) << server.error().to_string();
    kv::KvClientOptions co;
    co.server = (*server)->address();
    co.buffer_bytes = 2 << 20;
    co.manager = *mo;
    auto client = kv::KvClient::connect(co);
    ASSERT_TRUE(client.ok()) << client.error().to_string();
    {
      auto session = (*client)->session(0);
      ASSERT_TRUE(session);
      std::vector<uint8_t> value((1 << 20) + 9);
      for (uint64_t i = 0; i < value.size(); ++i)
        value[i] = pattern(i, 61);
      auto put = session->put("k", value.data(), value.size());
      ASSERT_TRUE(put.ok()) << put.error().to_string();
      std::memset(session->slot_data(), 0, value.size());
      auto got = session->get("k");
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      ASSERT_EQ(got->length, value.size());
      EXPECT_EQ(std::memcmp(session->slot_data(), value.data(), value.size()), 0);
    }
    // Plain CAF, no certificate: nothing answers it there.
    caf::actor_system_config cfg;
    cfg.load<caf::io::middleman>();
    add_message_types(cfg);
    kv::add_kv_message_types(cfg);
    caf::actor_system plain{cfg};
    auto reached = connect_published(plain, "127.0.0.1", (*server)->port(),
                                     std::chrono::milliseconds(5000), "kv_server");
    EXPECT_FALSE(reached.ok()) << "plain CAF reached the kv_server of a TLS node";
  }
}

TEST_F(TlsTest, PlaintextBeyondLoopbackNeedsAnOptIn) {
  NodeOptions o = options(TlsCredentials{});
  o.host = "0.0.0.0";
  auto refused = RdmaNode::start(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("without TLS"), std::string::npos)
      << refused.error().message();
  EXPECT_NE(refused.error().message().find("CAF_RDMA_PLAINTEXT=1"), std::string::npos);
  o.allow_plaintext = true;
  auto n = RdmaNode::start(o);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  EXPECT_FALSE((*n)->uses_tls());
}

TEST_F(TlsTest, ASilentListenerIsAnErrorAfterTheConnectTimeoutNotAHang) {
  // Accepts connections (the kernel completes them) but never says a word.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  uint16_t port = ntohs(addr.sin_port);
  for (const TlsCredentials& tls : {TlsCredentials{}, pki().node("a")}) {
    NodeOptions o = options(tls);
    o.connect_timeout = std::chrono::milliseconds(1000);
    auto n = RdmaNode::start(o);
    ASSERT_TRUE(n.ok()) << n.error().to_string();
    auto p = (*n)->remote_manager("127.0.0.1", port);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message().find("within 1000 ms"), std::string::npos) << p.error().message();
    EXPECT_EQ(p.error().code(), ErrorCode::kTimeout) << p.error().to_string();
  }
  ::close(fd);
}

TEST_F(TlsTest, AConnectionThatNeverSpeaksDoesNotStopTheNodeServing) {
  // It waits in the node's TLS acceptor (tls_transport.h), never reaching CAF: the node goes on
  // serving its peers, and shuts down while the connection is still open (its cost in CPU:
  // tls_cluster_test.cc).
  auto a = node(pki().node("a")), b = node(pki().node("b"));
  ASSERT_TRUE(a && b);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(a->node().port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  moves_bytes(*a, *b, 34);
  b.reset();
  a.reset();
  ::close(fd);
}

// The fallback's stream channel under TLS, on its own (no nodes): members move bytes both ways
// encrypted; a client with another CA's certificate or none (plain TCP) cannot claim a grant,
// and the owner keeps serving members; a client that never completes its handshake is closed
// at the header deadline.
namespace stream {

/// Runs one stream job and returns its status (the job's done runs on a client thread).
Status run_job(StreamClient& client, StreamJob job) {
  auto result = std::make_shared<std::promise<Status>>();
  auto future = result->get_future();
  job.done = [result](StreamEnd end) { result->set_value(std::move(end.status)); };
  if (Status taken = client.submit(std::move(job)); !taken.ok())
    return taken;
  if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
    return Error(ErrorCode::kTimeout, "the stream job never finished");
  return future.get();
}

StreamJob job(const StreamServer& server, uint64_t token, StreamDirection d, Memory& m) {
  StreamJob j;
  j.host = "127.0.0.1";
  j.port = server.port();
  j.token = token;
  j.direction = d;
  j.addr = m.bytes.data();
  j.length = m.bytes.size();
  j.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  return j;
}

TlsContext context(const TlsCredentials& c) {
  auto ctx = tls_stream_context(c);
  EXPECT_TRUE(ctx.ok()) << ctx.error().to_string();
  return ctx.ok() ? *ctx : nullptr;
}

}  // namespace stream

TEST_F(TlsTest, TheStreamChannelSpeaksTlsBetweenMembersOnly) {
  TlsContext owner_tls = stream::context(pki().node("a"));
  TlsContext member_tls = stream::context(pki().node("b"));
  // Another CA signed its certificate; it trusts ours, so only the owner's check can refuse it.
  TlsContext stranger_tls = stream::context(
      TlsCredentials{pki().dir + "/stranger.pem", pki().dir + "/stranger.key", pki().ca, ""});
  ASSERT_TRUE(owner_tls && member_tls && stranger_tls);
  auto server = StreamServer::start("127.0.0.1", StreamServer::Limits{}, owner_tls);
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  constexpr size_t kSize = (1 << 20) + 3;
  Memory at_owner(kSize, 0), sent(kSize, 41), back(kSize, 0);
  const Deadline later = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto no_done = [](uint64_t, const Status&, uint64_t) {};
  // Members: into the owner, then out of it again; every byte checked.
  StreamClient member(2, member_tls);
  uint64_t in =
      (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kIntoOwner, later, no_done);
  Status st = stream::run_job(member, stream::job(**server, in, StreamDirection::kIntoOwner, sent));
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(at_owner.bytes, sent.bytes);
  uint64_t out =
      (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kOutOfOwner, later, no_done);
  st = stream::run_job(member, stream::job(**server, out, StreamDirection::kOutOfOwner, back));
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(back.bytes, sent.bytes);
  // One TLS connection carried both (pooled: no handshake per transfer).
  EXPECT_EQ(member.idle_connections(), 1u);
  EXPECT_EQ((*server)->connections(), 1u);
  // Another CA's certificate, and no TLS at all: the grant stays unclaimed, no byte changes.
  Memory forged(kSize, 99);
  StreamClient stranger(1, stranger_tls), plain(1);
  for (StreamClient* intruder : {&stranger, &plain}) {
    uint64_t token =
        (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kIntoOwner, later, no_done);
    st = stream::run_job(*intruder,
                         stream::job(**server, token, StreamDirection::kIntoOwner, forged));
    ASSERT_FALSE(st.ok()) << (intruder == &plain ? "plain TCP" : "another CA") << " was served";
    std::printf("refused (%s): %s\n", intruder == &plain ? "plain TCP" : "another CA",
                st.error().to_string().c_str());
    EXPECT_TRUE((*server)->revoke(token)) << "the intruder claimed the grant";
    EXPECT_EQ(at_owner.bytes, sent.bytes);
  }
  // The owner keeps serving members.
  Memory again(kSize, 0);
  out =
      (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kOutOfOwner, later, no_done);
  st = stream::run_job(member, stream::job(**server, out, StreamDirection::kOutOfOwner, again));
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(again.bytes, sent.bytes);
}

TEST_F(TlsTest, AStreamClientThatNeverCompletesItsHandshakeIsClosed) {
  StreamServer::Limits limits;
  limits.auth_timeout = std::chrono::milliseconds(300);  // a connection's handshake and request
  auto server = StreamServer::start("127.0.0.1", limits, stream::context(pki().node("a")));
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  const Deadline limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto silent = connect_tcp("127.0.0.1", (*server)->port(), limit);
  ASSERT_TRUE(silent.ok()) << silent.error().to_string();
  // Half a handshake: a few bytes that are no ClientHello's end.
  const uint8_t partial[3] = {0x16, 0x03, 0x01};
  ASSERT_TRUE(send_all(*silent, partial, sizeof(partial), limit, "partial hello").ok());
  uint8_t b = 0;
  Status st = recv_all(*silent, &b, 1, limit, "waiting for the owner to hang up");
  ASSERT_FALSE(st.ok()) << "the owner answered a half handshake";
  EXPECT_EQ(st.error().code(), ErrorCode::kPeerUnavailable) << st.error().to_string();
}

// Stream server invariants 3 and 4 under TLS: plain TCP connections without a certificate
// (silent, or stopping half-way through a TLS hello) from one address and then from five
// cannot keep a member from a new connection: each time a member with a fresh StreamClient
// (a new TLS handshake in the middle of the flood) writes 4 MiB and reads them back, every byte
// checked, well before any deadline of the channel.
TEST_F(TlsTest, AFloodOfPlainConnectionsDoesNotKeepMembersOffTheStreamChannel) {
  ASSERT_TRUE(allow_fds(2 * (256 + 1024) + 256).ok());
  TlsContext owner_tls = stream::context(pki().node("a"));
  TlsContext member_tls = stream::context(pki().node("b"));
  ASSERT_TRUE(owner_tls && member_tls);
  auto server = StreamServer::start("127.0.0.1", StreamServer::Limits{}, owner_tls);
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  constexpr size_t kSize = 4 << 20;
  Memory at_owner(kSize, 0), sent(kSize, 43), back(kSize, 0);
  auto no_done = [](uint64_t, const Status&, uint64_t) {};
  auto accepted = [&] { return (*server)->accepted(); };
  std::vector<Socket> flood;
  size_t flooded = 0;
  for (const auto& sources : std::vector<std::vector<std::string>>{
           {"127.0.0.1"}, {"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}}) {
    const size_t n = sources.size() == 1 ? 256 : 1024;
    auto more = silent_flood((*server)->port(), sources, n);
    ASSERT_TRUE(more.ok()) << more.error().to_string();
    // Every fourth one begins a TLS hello and stops (ignored where the owner closed it already).
    const uint8_t partial[3] = {0x16, 0x03, 0x01};
    for (size_t i = 0; i < more->size(); i += 4)
      (void)send_all((*more)[i], partial, sizeof(partial),
                     std::chrono::steady_clock::now() + std::chrono::seconds(5), "partial hello");
    for (auto& s : *more)
      flood.push_back(std::move(s));
    flooded += n;
    ASSERT_TRUE(wait_for_state([&] { return accepted() >= flooded; }, std::chrono::seconds(60)))
        << "accepted " << accepted() << " of " << flooded;
    StreamClient member(1, member_tls);  // a new connection: its handshake meets the flood
    const Deadline later = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t in =
        (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kIntoOwner, later, no_done);
    Status st =
        stream::run_job(member, stream::job(**server, in, StreamDirection::kIntoOwner, sent));
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    uint64_t out = (*server)->grant(at_owner.bytes.data(), kSize, StreamDirection::kOutOfOwner,
                                    later, no_done);
    st = stream::run_job(member, stream::job(**server, out, StreamDirection::kOutOfOwner, back));
    ASSERT_TRUE(st.ok()) << st.error().to_string();
    const auto took = std::chrono::steady_clock::now() - t0;
    std::printf(
        "TLS: 4 MiB written and read back through %zu plain connections from %zu "
        "address(es) in %lld ms\n",
        flooded, sources.size(),
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
    EXPECT_EQ(at_owner.bytes, sent.bytes);
    EXPECT_EQ(back.bytes, sent.bytes);
    EXPECT_LT(took, std::chrono::seconds(15));  // generous; the old lock-out lasted 30 s
    EXPECT_EQ(member.idle_connections(), 1u) << "one handshake should have carried both";
    std::fill(at_owner.bytes.begin(), at_owner.bytes.end(), 0);
    std::fill(back.bytes.begin(), back.bytes.end(), 0);
  }
  EXPECT_LE((*server)->connections(), StreamServer::Limits{}.max_unauthenticated + 2);
}

}  // namespace
}  // namespace caf_rdma::testing
