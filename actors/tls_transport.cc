// TLS for CAF's BASP connections (see tls_transport.h): a scribe over an established TLS
// session, a doorman over a TlsAcceptor's ready queue, and the middleman actor that makes them.
#include "actors/tls_transport.h"

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/doorman.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/acceptor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "actors/op_texts.h"
#include "actors/rdma_errors.h"
#include "primitives/log.h"

namespace caf_rdma {

namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;
using caf::io::network::rw_state;

std::string peer_of(native_socket fd) {
  auto addr = caf::io::network::remote_addr_of_fd(fd);
  auto port = caf::io::network::remote_port_of_fd(fd);
  return (addr ? *addr : std::string("?")) + ":" + (port ? std::to_string(*port) : "?");
}

// -- the data phase of a connection ------------------------------------------------------------

/// OpenSSL writes with write(2), which raises SIGPIPE on a connection the peer closed. A
/// SigpipeGuard per call costs four system calls; the threads that run TLS sessions here (CAF's
/// multiplexer) keep SIGPIPE blocked instead, from their first TLS call on (CAF's own sockets
/// send with MSG_NOSIGNAL and nothing there waits for SIGPIPE), and a SIGPIPE raised meanwhile
/// is taken back after the failed call (drain_sigpipe), never delivered.
void block_sigpipe_in_this_thread() {
  thread_local bool blocked = false;
  if (blocked)
    return;
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  blocked = true;
}

void drain_sigpipe() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  timespec zero{};
  while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
  }
}

/// CAF's stream policy (read_some, write_some, must_read_more) over an established TLS session
/// (invariants 3 and 4 of tls_transport.h). Owns the session, not the fd (CAF's stream does).
class TlsPolicy {
public:
  TlsPolicy(SSL* ssl, std::string peer) : ssl_(ssl), peer_(std::move(peer)) {}
  ~TlsPolicy() { SSL_free(ssl_); }
  TlsPolicy(const TlsPolicy&) = delete;
  TlsPolicy& operator=(const TlsPolicy&) = delete;

  rw_state read_some(size_t& result, native_socket, void* buf, size_t len) {
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;
    block_sigpipe_in_this_thread();  // a read may write (an alert)
    ERR_clear_error();
    int n = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(len, 1 << 30)));
    if (n > 0) {
      result = static_cast<size_t>(n);
      return rw_state::success;
    }
    return would_block(n, "read") ? rw_state::success : rw_state::failure;
  }

  /// As many records as the socket takes now: OpenSSL's partial-write mode returns after each
  /// record, which alone would cost a multiplexer round per 16 KiB.
  rw_state write_some(size_t& result, native_socket, const void* buf, size_t len) {
    result = 0;
    if (len == 0)
      return rw_state::indeterminate;  // CAF's "nothing to write": it stops writing
    block_sigpipe_in_this_thread();
    const auto* p = static_cast<const uint8_t*>(buf);
    while (result < len) {
      ERR_clear_error();
      int n =
          SSL_write(ssl_, p + result, static_cast<int>(std::min<size_t>(len - result, 1 << 30)));
      if (n > 0) {
        result += static_cast<size_t>(n);
        continue;
      }
      // Would block: the rest stays in CAF's buffer and goes at the next writable event (the
      // socket's buffer is full, so that event does not come at once); OpenSSL keeps the
      // record it began and the next call, with the same bytes, finishes it.
      if (would_block(n, "write"))
        break;
      return rw_state::failure;
    }
    return rw_state::success;
  }

  bool must_read_more(native_socket, size_t threshold) {
    return static_cast<size_t>(SSL_pending(ssl_)) >= threshold;
  }

private:
  /// After an SSL_read or SSL_write that moved nothing: true when it only has to wait, false
  /// when the connection is over. The error queue is left empty either way (invariant 3).
  bool would_block(int ret, const char* what) {
    int code = SSL_get_error(ssl_, ret);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE)
      return true;
    drain_sigpipe();
    unsigned long first = ERR_peek_error();
    std::string queued = tls_error_queue();
    // A peer that closes (with or without close_notify), resets, or ends the session with an
    // alert (OpenSSL answers a close without close_notify with one) is an ordinary end; say
    // why only when TLS failed here.
    bool ordinary = code == SSL_ERROR_ZERO_RETURN || code == SSL_ERROR_SYSCALL ||
                    ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
                    ERR_GET_REASON(first) >= SSL_AD_REASON_OFFSET;
    if (!ordinary)
      log_line(LogLevel::kWarn, "TLS %s on the connection with %s failed: %s", what, peer_.c_str(),
               queued.empty() ? "no detail from OpenSSL" : queued.c_str());
    return false;
  }

  SSL* ssl_;
  std::string peer_;
};

/// A BASP connection over TLS, its handshake done (CAF's scribe interface, as CAF's own
/// scribe over TCP; the handshake is not its business).
class TlsScribe : public caf::io::scribe {
public:
  TlsScribe(default_multiplexer& mpx, native_socket fd, SSL* ssl)
      : scribe(caf::io::network::conn_hdl_from_socket(fd)), stream_(mpx, fd, ssl, peer_of(fd)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  bool launched_ = false;
  caf::io::network::stream_impl<TlsPolicy> stream_;
};

// -- incoming connections ----------------------------------------------------------------------

/// Completed connections taken from the acceptor, by fd, until the doorman makes them scribes.
using Handoff = std::map<native_socket, Socket>;

/// CAF's acceptor policy over the TlsAcceptor's ready queue: its fd (a copy of ready_fd())
/// is readable while a completed connection waits.
class ReadyPolicy {
public:
  ReadyPolicy(std::shared_ptr<TlsAcceptor> acceptor, std::shared_ptr<Handoff> handoff)
      : acceptor_(std::move(acceptor)), handoff_(std::move(handoff)) {}

  bool try_accept(native_socket& result, native_socket) {
    Socket s = acceptor_->take();
    if (!s.valid())
      return false;
    result = s.fd();
    (*handoff_)[result] = std::move(s);
    return true;
  }

private:
  std::shared_ptr<TlsAcceptor> acceptor_;
  std::shared_ptr<Handoff> handoff_;
};

/// The published port: hands the acceptor's completed connections to the BASP broker. Owns the
/// acceptor (its thread stops when the doorman goes).
class TlsDoorman : public caf::io::doorman {
public:
  TlsDoorman(default_multiplexer& mpx, native_socket ready, std::shared_ptr<TlsAcceptor> acceptor)
      : doorman(caf::io::network::accept_hdl_from_socket(ready)),
        acceptor_(std::move(acceptor)),
        handoff_(std::make_shared<Handoff>()),
        ready_(mpx, ready, acceptor_, handoff_) {}

  bool new_connection() override {
    auto fd = ready_.accepted_socket();
    auto it = handoff_->find(fd);
    if (it == handoff_->end())
      return false;
    Socket s = std::move(it->second);
    handoff_->erase(it);
    // Detached from the broker while the multiplexer still reported the event: the connection
    // closes with `s`.
    if (detached())
      return false;
    auto [sock, ssl] = s.release();
    auto& mpx = ready_.backend();
    auto scribe = caf::make_counted<TlsScribe>(mpx, sock, ssl);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
  void graceful_shutdown() override {
    ready_.graceful_shutdown();
    detach(&ready_.backend(), false);
  }
  void launch() override { ready_.start(this); }
  std::string addr() const override { return acceptor_->host(); }
  uint16_t port() const override { return acceptor_->port(); }
  void add_to_loop() override { ready_.activate(this); }
  void remove_from_loop() override { ready_.passivate(); }

private:
  std::shared_ptr<TlsAcceptor> acceptor_;
  std::shared_ptr<Handoff> handoff_;
  caf::io::network::acceptor_impl<ReadyPolicy> ready_;
};

// -- the middleman actor -----------------------------------------------------------------------

class TlsMiddleman : public caf::io::middleman_actor_impl {
public:
  TlsMiddleman(caf::actor_config& cfg, caf::actor broker, TlsTransportOptions options)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)), options_(std::move(options)) {}

  const char* name() const override { return "caf_rdma::tls_middleman"; }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    const std::string where = host + ":" + std::to_string(port);
    const Deadline deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
    auto ip = resolve_ipv4(host);
    if (!ip.ok())
      return to_caf_error(ip.error());
    auto s = connect_tcp(*ip, port, deadline);
    if (!s.ok())
      return s.error().code() == ErrorCode::kTimeout
                 ? make_rdma_error(ErrorCode::kTimeout,
                                   no_answer_text("TCP", where, options_.connect_timeout))
                 : to_caf_error(s.error());
    Status st = start_tls(*s, options_.context, false, deadline, "TLS connection to " + where);
    if (!st.ok())
      return st.error().code() == ErrorCode::kTimeout
                 ? make_rdma_error(ErrorCode::kTimeout,
                                   no_answer_text("TLS", where, options_.connect_timeout))
                 : to_caf_error(st.error());
    auto [fd, ssl] = s->release();
    return caf::make_counted<TlsScribe>(mpx(), fd, ssl);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool) override {
    const std::string host = addr != nullptr && *addr != '\0' ? addr : "0.0.0.0";
    auto acceptor = TlsAcceptor::start(host, port, options_.context, options_.accept);
    if (!acceptor.ok())
      return to_caf_error(acceptor.error());
    std::shared_ptr<TlsAcceptor> shared(std::move(*acceptor));
    // CAF's acceptor closes its fd when it goes; the acceptor closes its own.
    native_socket ready = ::dup(shared->ready_fd());
    if (ready < 0)
      return make_rdma_error(ErrorCode::kResourceExhausted,
                             "TLS listener on " + host + ": dup: " + errno_string(errno));
    return caf::make_counted<TlsDoorman>(mpx(), ready, std::move(shared));
  }

private:
  default_multiplexer& mpx() {
    return static_cast<default_multiplexer&>(system().middleman().backend());
  }

  TlsTransportOptions options_;
};

}  // namespace

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys, TlsTransportOptions options) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return sys.spawn<TlsMiddleman, caf::detached + caf::hidden>(std::move(broker),
                                                              std::move(options));
}

}  // namespace caf_rdma
