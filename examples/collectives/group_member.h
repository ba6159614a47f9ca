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
#include <string>
#include <vector>

#include "actors/rdma_manager_interface.h"

namespace caf_rdma::group {

// Front end -> member.
using peer_atom = caf::atom_constant<caf::atom("pg_peer")>;      // (rank, actor): connected
using formed_atom = caf::atom_constant<caf::atom("pg_formed")>;  // () -> bool, all hellos in
using send_atom = caf::atom_constant<caf::atom("pg_send")>;      // (peer, len, last) -> path
using recv_atom = caf::atom_constant<caf::atom("pg_recv")>;      // (peer) -> (len, last)
using recv_done_atom = caf::atom_constant<caf::atom("pg_rdone")>;  // (peer): mailbox free
using bcast_atom = caf::atom_constant<caf::atom("pg_bcast")>;    // (epoch, root, len) -> path
using a2a_atom = caf::atom_constant<caf::atom("pg_a2a")>;        // (epoch, block) -> path
// Member <-> member.
using hello_atom = caf::atom_constant<caf::atom("pg_hello")>;    // (rank, mailbox, coll buffer)
using chunk_atom = caf::atom_constant<caf::atom("pg_chunk")>;    // (from, len, last)
using credit_atom = caf::atom_constant<caf::atom("pg_credit")>;  // (from)
using ready_atom = caf::atom_constant<caf::atom("pg_ready")>;    // (epoch, from)
using written_atom = caf::atom_constant<caf::atom("pg_written")>;  // (epoch, from)
using abort_atom = caf::atom_constant<caf::atom("pg_abort")>;    // (epoch, from, reason)
// Member -> itself.
using deadline_atom = caf::atom_constant<caf::atom("pg_dline")>;  // (kind, key, id)

/// The member's registered memory, as handles owned by its node's manager.
struct MemberBuffers {
  std::vector<BufferHandle> mailbox;  ///< [j]: peer j writes its messages to us here
  std::vector<BufferHandle> staging;  ///< [j]: our messages to peer j are written from here
  BufferHandle coll_recv;             ///< collectives: peers write here
  BufferHandle coll_send;             ///< collectives: we write from here
};

struct MemberConfig {
  uint32_t rank = 0;
  std::vector<std::string> addresses;  ///< "host:port" of every rank, for error messages
  std::chrono::milliseconds timeout{30000};
};

/// Spawns the member actor of `config.rank`.
caf::actor spawn_group_member(caf::actor_system& sys, rdma_manager_actor manager,
                              MemberConfig config, MemberBuffers buffers);

}  // namespace caf_rdma::group
