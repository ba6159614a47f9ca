// TCP sockets for the fallback's stream channel: an owning file descriptor (with its TLS
// session when the nodes speak TLS) and I/O with a deadline. Every call is non-blocking underneath
// (poll with the time left), so no wait is unbounded unless the caller asks for it (kNoDeadline,
// used only for idle connections, which are woken by shutdown()). A thread moving a bulk or
// background transfer moves its bytes in short calls and yields between them
// (components/cpu_share.h).
#pragma once

#include <signal.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "primitives/status.h"

struct ssl_st;      // OpenSSL's SSL
struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace caf_rdma {

using Deadline = std::chrono::steady_clock::time_point;

/// A TLS context for the stream channel (OpenSSL's SSL_CTX, made by tls_stream_context in
/// components/tls_credentials.h): null means plain TCP.
using TlsContext = std::shared_ptr<ssl_ctx_st>;
constexpr Deadline kNoDeadline = Deadline::max();

/// Owns a socket; closes it on destruction. Move-only.
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_), tls_(other.tls_) {
    other.fd_ = -1;
    other.tls_ = nullptr;
  }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes the socket (and frees its TLS session).
  void close();
  /// The TLS session on this socket (start_tls, begin_tls_accept), or null for plain TCP.
  ssl_st* tls() const { return tls_; }
  /// Takes ownership of a TLS session on this socket's fd.
  void adopt_tls(ssl_st* tls);
  /// Gives up the fd and the TLS session without closing them (the caller owns both now):
  /// {fd, session or null}. The Socket is invalid afterwards.
  std::pair<int, ssl_st*> release();
  /// Wakes any thread blocked on this socket (its I/O fails with "connection shut down").
  void shutdown_both() const;

private:
  int fd_ = -1;
  ssl_st* tls_ = nullptr;
};

/// What one non-blocking accept on a listening socket gave (StreamServer, TlsAcceptor).
enum class AcceptStep : uint8_t {
  kAccepted,        ///< a connection (non-blocking, TCP_NODELAY set) and its IPv4 peer
  kRetry,           ///< interrupted, or a connection aborted before it was taken: again
  kOutOfResources,  ///< no fd or memory for one now (EMFILE, ENFILE, ENOBUFS, ENOMEM)
  kDrained,         ///< nothing more to accept now (EAGAIN), or another error
};

/// One accept4 on `listener`: with kAccepted, `*out` holds the connection and `*ip` its peer's
/// IPv4 address in host order (0 for another family).
AcceptStep accept_step(const Socket& listener, Socket* out, uint32_t* ip);

/// Stops epoll instance `epoll_fd` from reporting `listener_fd` (level-triggered epoll would
/// spin while accept cannot take a connection); its owner resumes it later (EPOLL_CTL_MOD).
void pause_listener(int epoll_fd, int listener_fd);

/// OpenSSL writes with write(2), which raises SIGPIPE on a connection the peer closed: while
/// one is alive, SIGPIPE is blocked in this thread, and one it raised is taken back (the write
/// fails with EPIPE instead of ending the process). Hold one around every TLS call.
class SigpipeGuard {
public:
  SigpipeGuard();
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

private:
  sigset_t old_{};
  bool was_pending_ = false;
};

/// host's IPv4 address as text: host itself when it is one ("localhost" is 127.0.0.1), else its
/// first IPv4 address (CAF resolves names the same way). Errors: peer_unavailable naming host.
Result<std::string> resolve_ipv4(const std::string& host);
/// An IPv4 address in host order as text ("10.0.2.15").
std::string ipv4_text(uint32_t ip);

/// A listening socket on host (an IPv4 address or "localhost"), port 0 = the kernel's choice.
Result<Socket> listen_tcp(const std::string& host, uint16_t port);
/// The port a socket is bound to.
Result<uint16_t> local_port(const Socket& s);
/// Connects to host:port (IPv4 or "localhost") before the deadline; TCP_NODELAY set.
Result<Socket> connect_tcp(const std::string& host, uint16_t port, Deadline deadline);
/// Accepts one connection, or returns an invalid Socket when `stop_fd` becomes readable.
Result<Socket> accept_tcp(const Socket& listener, int stop_fd);

/// Starts TLS on connected socket `s` as client (or server) with `ctx` and completes the
/// handshake before the deadline; the peer must show a certificate the context's CA file
/// vouches for. Errors: timeout, peer_unavailable (OpenSSL's reason, or the certificate
/// check that failed); `what` starts the message.
Status start_tls(Socket& s, const TlsContext& ctx, bool server, Deadline deadline,
                 const std::string& what);
/// Server side without blocking (an event loop): begin_tls_accept, then tls_accept_step each
/// time the socket is readable until it says true (done); an error ends the connection.
Status begin_tls_accept(Socket& s, const TlsContext& ctx);
Result<bool> tls_accept_step(const Socket& s);
/// Reads what is there, up to n bytes, without blocking: the count (0: nothing yet). Errors:
/// peer_unavailable (closed), internal.
Result<size_t> recv_some(const Socket& s, void* data, size_t n);
/// OpenSSL's queued errors of this thread as text, emptied ("" when there is none).
std::string tls_error_queue();
/// Non-zero when a TLS session holds bytes read from the socket and not yet handed out (0 for
/// plain TCP).
size_t tls_pending(const Socket& s);

/// What a peer must move per `stall` window of send_all / recv_all (or the rest, when less
/// is left): a peer that trickles bytes slower than that (64 KiB per 10 s by default: 6.5 KB/s)
/// holds a transfer no longer than one that stalls.
constexpr uint64_t kStallProgress = 64 << 10;

/// Sends/receives exactly n bytes before the deadline (through TLS when the socket has it). Errors:
/// timeout, peer_unavailable (the peer closed or reset the connection), internal (other errno);
/// `what` starts the message. With a `stall` limit (> 0) it also ends, with timeout, as soon as
/// fewer than kStallProgress bytes (or the rest) moved in that long (the peer stopped, or
/// trickles): a peer that holds a transfer open without moving it holds it only that long.
Status send_all(const Socket& s, const void* data, uint64_t n, Deadline deadline,
                const std::string& what, std::chrono::milliseconds stall = {});
Status recv_all(const Socket& s, void* data, uint64_t n, Deadline deadline, const std::string& what,
                std::chrono::milliseconds stall = {});

/// Whether the peer of `s` has sent something or hung up (EOF, reset, error), looked at without
/// waiting: on a connection whose peer must stay silent (a cross-memory request waiting for its
/// one answer), either means it stopped waiting.
bool peer_spoke_or_hung_up(const Socket& s);

/// Waits until the peer of `s` closed or reset the connection, discarding what it still sends
/// (raw bytes, TLS records too: the connection is not used again): a requester that shut its
/// sending side down so learns that the peer's worker ended (stream_client.h invariant 8).
/// Ok at the peer's end; timeout at `deadline`, `what` starting its message.
Status await_hang_up(const Socket& s, Deadline deadline, const std::string& what);

/// How long move_until_stopped waits at most before it looks at its stop flag again.
constexpr std::chrono::milliseconds kStopLook{50};
/// send_all (`sending`) or recv_all of n bytes at `data`, which stops touching `data` once `stop`
/// is set: the flag is looked at before every call that moves bytes and at least every
/// kStopLook while waiting for the peer, so a peer that trickles or stalls holds the caller no
/// longer than the call under way and kStopLook. Returns the bytes moved (n unless stopped),
/// or the errors of send_all / recv_all.
Result<uint64_t> move_until_stopped(const Socket& s, void* data, uint64_t n, bool sending,
                                    Deadline deadline, const std::string& what,
                                    std::chrono::milliseconds stall, const std::atomic<bool>& stop);

/// move_until_stopped over several pieces of memory in order, as if they were one (`stop` may
/// be null: then send_all / recv_all). On a plain socket each sendmsg / recvmsg call takes up
/// to IOV_MAX pieces: the kernel gathers and scatters them, no copy here; through TLS each piece
/// is its own SSL call. Returns the bytes moved (all of them unless stopped).
Result<uint64_t> move_pieces(const Socket& s, const iovec* pieces, size_t count, bool sending,
                             Deadline deadline, const std::string& what,
                             std::chrono::milliseconds stall, const std::atomic<bool>* stop);

}  // namespace caf_rdma
