// PeerGroup: N processes (ranks 0..N-1, each with its own RdmaNode) that exchange data with
// two-sided send/recv and with collectives (broadcast, all-to-all, barrier), the actor way:
// each process runs a group member actor that coordinates with the others over CAF messages
// while the bytes move by RDMA WRITE between pre-registered buffers (fallback without a
// device). Buffers are registered once, when the group forms, and reused by every call.
//
// Every call blocks with a timeout and returns an error value instead of crashing: a member
// that is gone (its process died) is named ("rank 2 (127.0.0.1:4711) is gone ..."), and a
// collective fails on every member when it fails on one (the failing member tells the others).
// Once a member is gone, the group is broken for collectives, as an NCCL communicator after an
// error: the running one and every later one fail at once with that reason, even those the
// departed member has no part in; send and recv between the live members keep working.
// Collectives must be called in the same order, with the same sizes, by every member, one at a
// time. Threads may call send and recv concurrently as long as each (peer, direction) has one
// caller at a time (e.g. one thread sending to rank 1 while another receives from rank 2).
#pragma once

#include <caf/actor.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/rdma_node.h"
#include "primitives/status.h"

namespace caf_rdma::group {

struct PeerGroupOptions {
  uint32_t rank = 0;
  /// "host:port" where each rank's member actor listens; entry `rank` is this process's. With a
  /// `rendezvous`, entry `rank` may have port 0 (the OS picks one when this rank listens) and
  /// the others are placeholders: their addresses come from the rendezvous.
  std::vector<std::string> members;
  /// Called once this rank listens, with its "host:port"; returns every rank's address (as many
  /// as `members`, entry `rank` this one), e.g. gathered by a launcher from each process's
  /// report. No port is ever picked by one process and bound later by another.
  std::function<Result<std::vector<std::string>>(const std::string&)> rendezvous;
  /// Per peer and direction: the largest piece of a message moved at once.
  uint64_t mailbox_bytes = 1 << 20;
  /// Receive (and send staging) buffer of the collectives; larger calls run in rounds.
  uint64_t collective_bytes = 16 << 20;
  /// Limit of each call.
  uint32_t timeout_ms = 30000;
  /// Limit of forming the group (dialing the others, their hellos); 0: timeout_ms.
  uint32_t form_timeout_ms = 0;
  ManagerOptions manager;
};

class PeerGroup {
public:
  /// Starts this rank's node, registers its buffers, publishes its member actor at
  /// members[rank] (then meets the others at the rendezvous, if any), dials the lower ranks
  /// (retrying until they are up) and waits for the higher ranks to dial it (one connection per
  /// pair), then waits until all have exchanged buffer handles. Errors name the member that could
  /// not be reached.
  static Result<std::unique_ptr<PeerGroup>> form(PeerGroupOptions options);
  ~PeerGroup();

  uint32_t rank() const { return options_.rank; }
  uint32_t size() const { return static_cast<uint32_t>(options_.members.size()); }
  /// "host:port" of a member (after a rendezvous: the port it listens on).
  const std::string& address(uint32_t rank) const { return options_.members.at(rank); }

  /// Sends one message to `peer` (ordered per pair). Returns once the message is in the peer's
  /// mailbox; a message larger than mailbox_bytes needs the peer to be receiving meanwhile.
  Status send(uint32_t peer, const void* data, uint64_t size);
  /// The next message from `peer`, whole: a message its sender gave up on midway (a chunk
  /// failed or timed out) is an error naming how many bytes came, never joined to the next
  /// one; after a recv that timed out midway, the rest of that message is skipped.
  Result<std::vector<uint8_t>> recv(uint32_t peer);
  /// Copies root's `size` bytes at `data` into `data` on every member. Every member must pass
  /// the same root and size (all_to_all: the same block_size); a member that does not fails
  /// the call on every member with invalid_argument naming both calls, before a byte moves.
  Status broadcast(uint32_t root, void* data, uint64_t size);
  /// Block j of `send` (block_size bytes each, size() blocks) goes to rank j; block i of `recv`
  /// comes from rank i.
  Status all_to_all(const void* send, void* recv, uint64_t block_size);
  /// Returns once every member has called barrier().
  Status barrier();

  /// The error of the last failed call, if any.
  std::optional<Error> last_error() const;
  /// The path ("rdma-direct", "rdma-staged" or "fallback") of the last call that moved bytes.
  std::string last_path() const;
  RdmaNode& node() { return *node_; }

private:
  PeerGroup() = default;
  Status track(Status s);
  Error track(Error e) { return track(Status(std::move(e))).error(); }
  template <class... Ts>
  Result<std::string> ask(Ts&&... xs);
  /// A blocking actor for one call (CAF's scoped actors serve one thread at a time), taken from
  /// the idle ones (or made) and returned to them when the lease ends.
  class Lease {
  public:
    explicit Lease(PeerGroup* group);
    ~Lease();
    caf::scoped_actor& operator*() { return *actor_; }

  private:
    PeerGroup* group_;
    std::unique_ptr<caf::scoped_actor> actor_;
  };
  uint8_t* mailbox(uint32_t j) { return memory_.get() + uint64_t(j) * options_.mailbox_bytes; }
  uint8_t* staging(uint32_t j) { return mailbox(size() + j); }
  uint8_t* coll_recv() { return mailbox(2 * size()); }
  uint8_t* coll_send() { return coll_recv() + options_.collective_bytes; }

  PeerGroupOptions options_;
  std::unique_ptr<uint8_t[]> memory_;  // freed after the node is gone
  std::unique_ptr<RdmaNode> node_;
  caf::actor member_;
  std::mutex idle_mutex_;
  std::vector<std::unique_ptr<caf::scoped_actor>> idle_;
  uint64_t epoch_ = 0;
  std::vector<uint64_t> sent_messages_;  ///< [peer]: messages sent to it (numbers them)
  /// [peer]: every message up to this number was received, cut or given up on: a chunk of
  /// one of them that comes late is skipped.
  std::vector<uint64_t> received_upto_;
  mutable std::mutex last_mutex_;
  std::optional<Error> last_error_;
  std::string last_path_;
};

}  // namespace caf_rdma::group
