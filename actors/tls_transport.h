// TLS between nodes for CAF's BASP connections, in place of CAF 0.17's OpenSSL module
// (libcaf_openssl), whose session code we cannot change (Debian's build) and which fails in two
// ways (docs/security.md, "Authenticated nodes"):
//
//  - It never empties OpenSSL's per-thread error queue: a connection that fails (a member that
//    goes away without close_notify leaves "unexpected eof while reading") leaves its error
//    queued on the multiplexer thread, because the module drains the queue only inside CAF's
//    log macros, compiled out in Debian's build (libcaf_openssl session.cpp, check_ssl_res and
//    handle_ssl_result). OpenSSL's SSL_get_error looks at that queue first, so the next
//    SSL_read of *another*, healthy connection that merely has nothing to read (-1, EAGAIN) is
//    reported as SSL_ERROR_SSL, and CAF closes it: a live peer's link drops
//    (remote_link_unreachable).
//  - It runs the handshake inside its multiplexer: while a peer stays silent, SSL_accept's
//    WANT_READ is reported as a successful write of 0 bytes (session.cpp do_some), so the
//    connection stays registered for writing (BASP's server handshake is queued on it) and the
//    multiplexer calls SSL_accept again on every wake-up without end.
//
// Here CAF's BASP broker keeps its protocol; only the bytes on the wire change hands:
//  1. Incoming connections complete their TLS handshake in a TlsAcceptor (its own thread, with
//     a deadline and limits, components/tls_acceptor.h) before CAF sees them; CAF then gets
//     them through a doorman that reads the acceptor's ready queue.
//  2. Outgoing connections complete their handshake in connect(), on the middleman actor's
//     thread, before the connection's deadline: CAF never runs a handshake.
//  3. Every TLS call starts with an empty error queue (ERR_clear_error) and leaves it empty
//     (failures are read out), so no connection's error can reach another's.
//  4. Records are read and written as CAF's plain TCP stream reads and writes bytes: a read that
//     would block reports 0 bytes, a write that would block keeps its bytes for the next
//     writable event (partial writes, moving buffer allowed), so no call spins.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <chrono>

#include "components/socket_io.h"
#include "components/tls_acceptor.h"

namespace caf_rdma {

struct TlsTransportOptions {
  /// The node's TLS context (tls_stream_context: its certificate and key, peers verified
  /// against the CA file, TLS 1.3). Must not be null.
  TlsContext context;
  /// Outgoing connections: TCP connect and TLS handshake within this (a silent peer is an
  /// error, never a wait without end). Incoming: Limits::handshake_timeout.
  std::chrono::milliseconds connect_timeout{30000};
  TlsAcceptor::Limits accept;
};

/// Spawns a middleman actor (CAF's interface: publish_atom, connect_atom, ...) whose
/// connections speak TLS as described above, on the system's BASP broker. Publish and connect
/// through it instead of `sys.middleman()`. It is hidden and detached: send it
/// `exit_reason::kill` (it ignores other exit reasons, as CAF's own) and wait for it before the
/// system ends.
caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& sys, TlsTransportOptions options);

}  // namespace caf_rdma
