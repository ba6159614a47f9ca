// TlsCredentials: the files a node proves itself with and checks its peers against (mutual TLS
// between nodes, through CAF's OpenSSL module), and the check that runs before CAF sees them.
// CAF raises an exception on the middleman's thread when a file is missing or unreadable (the
// process aborts at the first connection) and lets OpenSSL prompt on the terminal for an
// encrypted key without a passphrase; so every problem is found here first, with the file named.
//
// Invariants: credentials that pass check_tls_credentials load in OpenSSL exactly as CAF loads
// them (certificate chain file, PEM private key with the passphrase, CA file) and the
// certificate is one the CA file's authorities signed; a probe never waits past its deadline.
#pragma once

#include <chrono>
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

/// The TLS context of the fallback's stream channel (server and client side): the node's
/// certificate and key, peers verified against the CA file (a peer without a certificate is
/// refused), TLS 1.3. Errors as check_tls_credentials (files unreadable, not PEM, ...).
Result<TlsContext> tls_stream_context(const TlsCredentials& c);

/// Completes a TLS handshake with host:port (IPv4 or a name that resolves to one) as a node
/// would, with a deadline: the peer must speak TLS and show a certificate `c.cafile` vouches
/// for; then the connection is closed. RdmaNode runs it before CAF's OpenSSL module connects,
/// because that module polls busily, without end, a connection whose peer does not answer
/// (and the node's shutdown then waits for it). Errors: timeout ("no TLS answer within"),
/// peer_unavailable (refused, not TLS, or a certificate the CA file does not vouch for, with
/// OpenSSL's reason), invalid_argument (credentials, see check_tls_credentials).
Status probe_tls_peer(const std::string& host, uint16_t port, const TlsCredentials& c,
                      std::chrono::milliseconds timeout);

}  // namespace caf_rdma
