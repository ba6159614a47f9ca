// Test certificates for TLS between nodes, made once per test process with the openssl tool
// (Debian package openssl): a cluster CA signing nodes a, b and c (and c's key encrypted with
// passphrase "s3cret" as c_enc.key), and a second CA the cluster does not trust, signing
// "stranger".
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "components/tls_credentials.h"

namespace caf_rdma::testing {

/// A cluster CA with node certificates, and a second CA the cluster does not trust.
struct Pki {
  std::string dir;
  std::string ca, other_ca;

  TlsCredentials node(const std::string& name) const {
    return TlsCredentials{dir + "/" + name + ".pem", dir + "/" + name + ".key", ca, ""};
  }
};

namespace pki_detail {

inline bool run(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

/// Makes the files; "" on success, else what failed.
inline std::string make_pki(Pki& p) {
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

}  // namespace pki_detail

/// The test certificates (made at the first call; a failure fails the test and leaves dir "").
inline const Pki& pki() {
  static Pki p;
  static std::string failed = pki_detail::make_pki(p);
  EXPECT_EQ(failed, "") << "making the test certificates";
  if (!failed.empty())
    p.dir.clear();
  return p;
}

}  // namespace caf_rdma::testing
