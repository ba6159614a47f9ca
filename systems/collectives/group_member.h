// The member actor of a peer group: one per process. It owns the group's control plane (chunk
// notes, credits, collective readiness, aborts) and asks its node's RdmaManagerActor for every
// data movement, always an RDMA WRITE from one of its registered staging buffers into a peer's
// registered receive buffer (the managers' fallback moves the bytes when there is no device).
// Its front end is PeerGroup (peer_group.h), which owns the memory and blocks on replies.
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/rdma_manager_interface.h"

namespace caf_rdma::group {

// Front end -> member.
using peer_atom = caf::atom_constant<caf::atom("pg_peer")>;      // (rank, actor): connected
using formed_atom = caf::atom_constant<caf::atom("pg_formed")>;  // () -> bool, all hellos in
// (peer, msg, len, last) -> path: one chunk of message `msg` (numbered per peer by the sender).
using send_atom = caf::atom_constant<caf::atom("pg_send")>;
// (peer, msg): message `msg` to `peer` ends unfinished (a chunk failed): the peer is told.
using cut_atom = caf::atom_constant<caf::atom("pg_cut")>;
using recv_atom = caf::atom_constant<caf::atom("pg_recv")>;        // (peer) -> (len, last, msg)
using recv_done_atom = caf::atom_constant<caf::atom("pg_rdone")>;  // (peer): mailbox free
// (peer, len, last, msg) -> bool: a note taken by recv goes back to the front of the queue.
using unrecv_atom = caf::atom_constant<caf::atom("pg_unrecv")>;
// (epoch, root, len, total) -> path: one round of a broadcast of `total` bytes.
using bcast_atom = caf::atom_constant<caf::atom("pg_bcast")>;
// (epoch, block, total) -> path: one round of an all-to-all of `total`-byte blocks.
using a2a_atom = caf::atom_constant<caf::atom("pg_a2a")>;
// Member <-> member.
using hello_atom = caf::atom_constant<caf::atom("pg_hello")>;  // (rank, mailbox, coll buffer)
// (from, msg, len, last); len kCutChunk: message `msg` ends unfinished (no bytes, no credit).
using chunk_atom = caf::atom_constant<caf::atom("pg_chunk")>;
using credit_atom = caf::atom_constant<caf::atom("pg_credit")>;  // (from)
// (epoch, from, bcast, root, len, total): `from` may write its round of collective `epoch`; the
// writer checks that both called the same collective with the same sizes before writing.
using ready_atom = caf::atom_constant<caf::atom("pg_ready")>;
using written_atom = caf::atom_constant<caf::atom("pg_written")>;  // (epoch, from)
// (epoch, from, code, reason): collective `epoch` failed at `from`; the receiver fails it too
// and answers ended_atom once none of its writes of that collective is in flight.
using abort_atom = caf::atom_constant<caf::atom("pg_abort")>;
// (epoch, from): `from` has no write of collective `epoch` in flight and will start none.
using ended_atom = caf::atom_constant<caf::atom("pg_ended")>;
// (from, cause) -> bool: `from` leaves the group; a non-empty cause is why the group broke (its
// origin), so that its departure is not taken for a new cause.
using left_atom = caf::atom_constant<caf::atom("pg_left")>;
// Front end -> member: () -> bool, tells the live members we leave (and why, if the group is
// broken), each answer awaited for at most a few seconds.
using leave_atom = caf::atom_constant<caf::atom("pg_leave")>;
// Member -> itself.
using deadline_atom = caf::atom_constant<caf::atom("pg_dline")>;  // (kind, key, id)

/// A chunk length that marks a message cut off by its sender (see chunk_atom).
constexpr uint64_t kCutChunk = UINT64_MAX;

/// The member's registered memory, as handles owned by its node's manager.
struct MemberBuffers {
  std::vector<BufferHandle> mailbox;  ///< [j]: peer j writes its messages to us here
  std::vector<BufferHandle> staging;  ///< [j]: our messages to peer j are written from here
  BufferHandle coll_recv;             ///< collectives: peers write here
  BufferHandle coll_send;             ///< collectives: we write from here
};

/// "host:port" of every rank, for error messages. Filled in by the front end once known (a
/// rank listening on a port the OS picked learns the others' at its rendezvous); until then a
/// rank is named by its number only.
class MemberNames {
public:
  explicit MemberNames(std::vector<std::string> names) : names_(std::move(names)) {}
  void set(std::vector<std::string> names) {
    std::lock_guard<std::mutex> g(mu_);
    names_ = std::move(names);
  }
  /// "rank 2 (127.0.0.1:4711)", or "rank 2" while its address is unknown.
  std::string who(uint32_t rank) const {
    std::lock_guard<std::mutex> g(mu_);
    std::string addr = rank < names_.size() ? names_[rank] : "";
    bool known = !addr.empty() && addr.size() > 2 && addr.compare(addr.size() - 2, 2, ":0") != 0;
    return "rank " + std::to_string(rank) + (known ? " (" + addr + ")" : "");
  }

private:
  mutable std::mutex mu_;
  std::vector<std::string> names_;
};

struct MemberConfig {
  uint32_t rank = 0;
  uint32_t size = 0;
  std::shared_ptr<MemberNames> names;
  std::chrono::milliseconds timeout{30000};       ///< of each call
  std::chrono::milliseconds form_timeout{30000};  ///< of forming the group
};

/// Spawns the member actor of `config.rank`.
caf::actor spawn_group_member(caf::actor_system& sys, rdma_manager_actor manager,
                              MemberConfig config, MemberBuffers buffers);

}  // namespace caf_rdma::group
