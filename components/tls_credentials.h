// TlsCredentials: the files a node proves itself with and checks its peers against (mutual TLS
// between nodes: CAF's connections through actors/tls_transport.h, and the stream channel),
// the check that runs at start, and the TLS context both use. Every problem is found at start,
// with the file named: never at the first connection, never as a passphrase prompt on the
// terminal.
//
// Invariants: credentials that pass check_tls_credentials load in tls_stream_context
// (certificate chain file, PEM private key with the passphrase, CA file) and the certificate is
// one the CA file's authorities signed.
#pragma once

#include <cstdint>
#include <string>

#include "components/socket_io.h"
#include "primitives/status.h"

namespace caf_rdma {

struct TlsCredentials {
  std::string certificate;  ///< PEM certificate (chain) of this node
  std::string key;          ///< its PEM private key
  std::string cafile;       ///< PEM certificates of the authorities that sign the cluster's nodes
  std::string passphrase;   ///< of an encrypted key ("" for a plain key)

  /// Any field set: TLS is meant (then all of certificate, key and cafile must be).
  bool any() const {
    return !certificate.empty() || !key.empty() || !cafile.empty() || !passphrase.empty();
  }
};

/// Environment variables of the credentials (read by RdmaNode when NodeOptions has none).
constexpr const char* kEnvTlsCertificate = "CAF_RDMA_TLS_CERT";
constexpr const char* kEnvTlsKey = "CAF_RDMA_TLS_KEY";
constexpr const char* kEnvTlsCaFile = "CAF_RDMA_TLS_CA";
constexpr const char* kEnvTlsPassphrase = "CAF_RDMA_TLS_PASSPHRASE";

/// The credentials from the environment (empty fields where a variable is unset).
TlsCredentials tls_credentials_from_env();

/// kInvalidArgument naming the file and what is wrong: a field missing, a file unreadable (with
/// errno's text), not PEM, an encrypted key without (or with a wrong) passphrase, a key that
/// does not match the certificate, a certificate the CA file does not vouch for (OpenSSL's
/// reason, e.g. "unable to get local issuer certificate"), an expired certificate.
Status check_tls_credentials(const TlsCredentials& c);

/// The node's TLS context (server and client side), for the fallback's stream channel and the
/// connections between nodes: the node's certificate and key, peers verified against the CA
/// file (a peer without a certificate is refused), TLS 1.3. Errors as check_tls_credentials (files
/// unreadable, not PEM, ...).
Result<TlsContext> tls_stream_context(const TlsCredentials& c);

}  // namespace caf_rdma
