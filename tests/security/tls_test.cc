// Authenticated nodes (README "Security model"): nodes with certificates of one cluster CA
// connect over mutual TLS and move bytes; a node without a certificate, or with one of another
// CA, is turned away within the connect timeout while the node keeps serving its peers; bad
// credentials fail at start naming the file (never CAF's abort at the first connection, never
// a passphrase prompt); plaintext on a non-loopback address needs an explicit opt-in; a silent
// listener answers remote_manager with an error after the timeout, not a hang.
//
// Certificates are made for each test run with the openssl tool (Debian package openssl).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "tests/actors/manager_fixture.h"
#include "tests/rdma_test.h"

namespace caf_rdma::testing {
namespace {

/// A cluster CA with node certificates, and a second CA the cluster does not trust.
struct Pki {
  std::string dir;
  std::string ca, other_ca;

  TlsCredentials node(const std::string& name) const {
    return TlsCredentials{dir + "/" + name + ".pem", dir + "/" + name + ".key", ca, ""};
  }
};

bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

/// Makes the files once per process; "" on success, else what failed.
std::string make_pki(Pki& p) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  p.dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/tls_test_pki." + std::to_string(::getpid());
  p.ca = p.dir + "/ca.pem";
  p.other_ca = p.dir + "/other_ca.pem";
  if (!run("mkdir -p " + p.dir))
    return "mkdir " + p.dir;
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const char* ca : {"ca", "other_ca"})
    if (!run("openssl req -x509" + ec + " -days 2 -subj /CN=caf-rdma-test-" + ca + " -keyout " +
             p.dir + "/" + ca + ".key -out " + p.dir + "/" + ca + ".pem"))
      return std::string("openssl req -x509 (") + ca + "): is the openssl tool installed?";
  int serial = 1;
  auto sign = [&](const std::string& name, const std::string& ca) {
    std::string d = p.dir + "/";
    return run("openssl req" + ec + " -subj /CN=" + name + " -keyout " + d + name + ".key -out " +
               d + name + ".csr") &&
           run("openssl x509 -req -days 2 -in " + d + name + ".csr -CA " + d + ca + ".pem -CAkey " +
               d + ca + ".key -set_serial " + std::to_string(serial++) + " -out " + d + name +
               ".pem");
  };
  for (const char* n : {"a", "b", "c"})
    if (!sign(n, "ca"))
      return std::string("signing ") + n;
  if (!sign("stranger", "other_ca"))
    return "signing stranger";
  if (!run("openssl pkey -in " + p.dir + "/c.key -aes256 -passout pass:s3cret -out " + p.dir +
           "/c_enc.key"))
    return "encrypting c.key";
  return "";
}

// The environment is changed only while no node of the test runs (nothing reads it meanwhile).
void set_env(const char* name, const std::string& value) {
  ::setenv(name, value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): see above
}
void unset_env(const char* name) {
  ::unsetenv(name);  // NOLINT(concurrency-mt-unsafe): see above
}

const Pki& pki() {
  static Pki p;
  static std::string failed = make_pki(p);
  EXPECT_EQ(failed, "") << "making the test certificates";
  return p;
}

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
    EXPECT_TRUE(a.release(ha->id) && b.release(hs->id) && b.release(hb->id));
  }
};

TEST_F(TlsTest, NodesWithCertificatesOfTheClusterCaMoveBytes) {
  auto a = node(pki().node("a")), b = node(pki().node("b"));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->node().uses_tls() && b->node().uses_tls());
  moves_bytes(*a, *b, 31);
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
  set_env(kEnvTlsCertificate, b.certificate);
  set_env(kEnvTlsKey, b.key);
  set_env(kEnvTlsCaFile, b.cafile);
  auto from_env = RdmaNode::start(options(TlsCredentials{}));
  unset_env(kEnvTlsCertificate);
  unset_env(kEnvTlsKey);
  unset_env(kEnvTlsCaFile);
  ASSERT_TRUE(from_env.ok()) << from_env.error().to_string();
  EXPECT_TRUE((*from_env)->uses_tls());
  auto a = node(pki().node("a"));
  ASSERT_TRUE(a);
  TestNode env_node(std::move(*from_env));
  moves_bytes(*a, env_node, 35);

  NodeOptions o = options(TlsCredentials{});
  o.host = "0.0.0.0";
  set_env(kEnvPlaintext, "1");
  auto plain = RdmaNode::start(o);
  unset_env(kEnvPlaintext);
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
  Case cases[] = {
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
  // CAF 0.17's TLS session polls such a connection busily (README: known limits), but the
  // node goes on serving its peers and shuts down once the connection is gone.
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
  ::close(fd);
}

}  // namespace
}  // namespace caf_rdma::testing
