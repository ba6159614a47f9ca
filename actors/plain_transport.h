// The published port of a node without TLS, with a connection budget (docs/security.md,
// "Connection budgets"). CAF 0.17's own doorman accepts every connection and keeps it for as
// long as its peer keeps it open: 1100 silent connections used up a node's 1024 fds, so its
// stream reads timed out and new nodes could not connect. Here CAF's doorman and scribes do
// the work, and a book of the connections accepted on the published port decides which stay.
//
// Invariants:
//  1. Every connection accepted on the published port is in the book from its accept until CAF
//     lets it go (its scribe is destroyed). One whose BASP client handshake (a header, then its
//     payload: CAF's first two reads) has not come yet is *silent*: an honest node sends it at
//     once, in answer to the server's; a peer that sends a header and stops stays silent.
//  2. Silent connections: at most `max_silent` in all and `max_silent_per_host` from one IPv4
//     address (an IPv4-mapped IPv6 one is its IPv4 address; local processes connecting to
//     127.0.0.1 all count as 127.0.0.1); a newcomer beyond either makes room:
//     the oldest silent connection of its own address if that address is at its share, else
//     the oldest silent one of the address holding the most is shut down (CAF sees it end and
//     closes it). A connection silent for longer than `silent_timeout` is shut down at the
//     next accept. A flood of silent connections so shortens the life of its own connections;
//     it cannot use up the node's fds or keep a node out.
//  3. At most `max_per_host` connections from one address, silent or not: a newcomer beyond is
//     closed at once.
//  4. A connection is shut down only while its scribe lives (the book's mutex is held from the
//     check to the shutdown, and a scribe leaves the book before its fd is closed), so the fd
//     shut down is never another's.
//  5. Outgoing connections to IPv4 addresses are made within `connect_timeout` (CAF's own TCP
//     connect has no deadline: one unreachable address held every later connect), then are
//     CAF's; to IPv6 ones, CAF's. The BASP protocol is CAF's.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <chrono>
#include <cstddef>

namespace caf_rdma {

struct PlainTransportOptions {
  size_t max_silent = 256;
  size_t max_silent_per_host = 64;
  std::chrono::milliseconds silent_timeout{30000};
  size_t max_per_host = 512;
  std::chrono::milliseconds connect_timeout{30000};
};

/// Spawns a middleman actor (CAF's interface: publish_atom, connect_atom, ...) whose published
/// ports keep `options`' limits (invariants 1-4) and whose connects end by its connect_timeout
/// (invariant 5), on the system's BASP broker. It is hidden and detached: send it
/// `exit_reason::kill` and wait for it before the system ends.
caf::io::middleman_actor spawn_plain_middleman(caf::actor_system& sys,
                                               PlainTransportOptions options);

}  // namespace caf_rdma
