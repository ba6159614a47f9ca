#include "components/tls_credentials.h"

#include "components/socket_io.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace caf_rdma {

namespace {

Error bad(const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, "TLS credentials: " + what);
}

// OpenSSL's queued errors as text (emptied).
std::string ssl_errors() {
  std::string out = tls_error_queue();
  return out.empty() ? "no detail from OpenSSL" : out;
}

Status readable(const char* field, const std::string& path) {
  if (path.empty())
    return bad(std::string(field) +
               " is not set (a certificate, its key and the cluster's CA "
               "file are all needed: " +
               kEnvTlsCertificate + ", " + kEnvTlsKey + ", " + kEnvTlsCaFile + ")");
  // Opened without blocking (a FIFO named here would block fopen for ever) and checked to be a
  // regular file before OpenSSL reads it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return bad(std::string(field) + " '" + path + "' cannot be read: " + errno_string(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular)
    return bad(std::string(field) + " '" + path +
               "' is not a regular file (a FIFO, device or directory is not read)");
  return {};
}

// The passphrase callback: the configured one, never a terminal prompt.
int passphrase_cb(char* buf, int size, int, void* user) {
  const auto* pass = static_cast<const std::string*>(user);
  if (pass->empty() || static_cast<int>(pass->size()) >= size)
    return -1;
  std::copy(pass->begin(), pass->end(), buf);  // OpenSSL takes the length, no terminator
  return static_cast<int>(pass->size());
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};

}  // namespace

TlsCredentials tls_credentials_from_env() {
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  TlsCredentials c;
  c.certificate = get(kEnvTlsCertificate);
  c.key = get(kEnvTlsKey);
  c.cafile = get(kEnvTlsCaFile);
  c.passphrase = get(kEnvTlsPassphrase);
  return c;
}

namespace {

using CtxPtr = std::unique_ptr<SSL_CTX, CtxFree>;

// An OpenSSL context with the node's certificate, key and CA file.
Result<CtxPtr> load_context(const TlsCredentials& c) {
  CAF_RDMA_RETURN_IF_ERROR(readable("certificate", c.certificate));
  CAF_RDMA_RETURN_IF_ERROR(readable("key", c.key));
  CAF_RDMA_RETURN_IF_ERROR(readable("CA file", c.cafile));
  ERR_clear_error();
  CtxPtr ctx(SSL_CTX_new(TLS_method()));
  if (!ctx)
    return bad("cannot create an OpenSSL context: " + ssl_errors());
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), c.certificate.c_str()) != 1)
    return bad("certificate '" + c.certificate + "' is not a PEM certificate: " + ssl_errors());
  // The key on its own first (no terminal prompt: the callback gives the passphrase or fails),
  // so "cannot be read" and "belongs to another certificate" are told apart.
  std::string pass = c.passphrase;
  std::FILE* kf = std::fopen(c.key.c_str(), "rb");
  if (kf == nullptr)
    return bad("key '" + c.key + "' cannot be read: " + errno_string(errno));
  EVP_PKEY* pkey = PEM_read_PrivateKey(kf, nullptr, passphrase_cb, &pass);
  std::fclose(kf);
  if (pkey == nullptr)
    return bad("key '" + c.key + "' cannot be loaded" +
               (c.passphrase.empty() ? std::string(" (if it is encrypted, set its passphrase: ") +
                                           kEnvTlsPassphrase + ")"
                                     : std::string(" (with the passphrase given)")) +
               ": " + ssl_errors());
  int used = SSL_CTX_use_PrivateKey(ctx.get(), pkey);
  EVP_PKEY_free(pkey);
  if (used != 1 || SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad("key '" + c.key + "' does not belong to certificate '" + c.certificate +
               "': " + ssl_errors());
  if (SSL_CTX_load_verify_locations(ctx.get(), c.cafile.c_str(), nullptr) != 1)
    return bad("CA file '" + c.cafile + "' holds no PEM certificate: " + ssl_errors());
  return ctx;
}

}  // namespace

Status check_tls_credentials(const TlsCredentials& c) {
  CAF_RDMA_ASSIGN_OR_RETURN(CtxPtr ctx, load_context(c));
  // The node's own certificate must be one its peers (same CA file) will accept.
  X509* cert = SSL_CTX_get0_certificate(ctx.get());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> vctx(X509_STORE_CTX_new());
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx.get(), &chain);
  if (!vctx || X509_STORE_CTX_init(vctx.get(), SSL_CTX_get_cert_store(ctx.get()), cert, chain) != 1)
    return bad("cannot verify certificate '" + c.certificate + "': " + ssl_errors());
  if (X509_verify_cert(vctx.get()) != 1)
    return bad("certificate '" + c.certificate + "' is not vouched for by CA file '" + c.cafile +
               "': " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(vctx.get())));
  return {};
}

Result<TlsContext> tls_stream_context(const TlsCredentials& c) {
  CAF_RDMA_ASSIGN_OR_RETURN(CtxPtr ctx, load_context(c));
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION) != 1)
    return bad("OpenSSL refuses TLS 1.3: " + ssl_errors());
  // Writes straight from registered buffers, record by record, retried where they stopped; a
  // withdrawn transfer (withdrawable_move.h) retries a record it stopped in from another buffer
  // (its scratch), which ACCEPT_MOVING_WRITE_BUFFER allows.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Connections are pooled, not resumed: no session tickets to make or keep.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  return TlsContext(ctx.release(), CtxFree{});
}

}  // namespace caf_rdma
