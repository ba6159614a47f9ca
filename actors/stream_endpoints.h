// StreamEndpoints: the stream channel of each owner this node moved bytes with, as the owner's
// own manager named it in a grant (StreamGrantMsg), shared by the manager's stream path
// (actors/transfer/stream_path.h) and its process's stream lanes (actors/stream_lane.h).
//
// A handle's stream fields (BufferHandle::stream_host, stream_port, stream_host_id,
// stream_unix) are what whoever made the handle wrote there: a peer can put any address in
// them, a local service's port or an abstract socket of its choice, and a requester that
// trusted them would connect there and send its request (docs/security.md, "Stream endpoints come
// from their owner"). A grant is the answer of the actor the handle names as its owner, to a
// request this node sent it over CAF: the endpoint in it is that owner's.
//
// Invariants:
//  1. A request by handle goes only to an endpoint learned here from a grant of the handle's
//     owner (find() by BufferHandle::owner); a handle's own stream fields never choose where a
//     byte or a secret goes. An owner not known here gets its first op through a grant.
//  2. An owner its manager knows is down, or whose link was lost, is forgotten (forget()): its
//     endpoint may be another process's by now (a port or an abstract name is free again the
//     moment its socket closes).
//  3. Bounded: at most kMaxStreamEndpoints owners; learning one more forgets the one learned
//     longest ago (it learns its endpoint again from its next grant).
//  4. Thread-safe.
#pragma once

#include <caf/actor_addr.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace caf_rdma {

/// Owners whose stream endpoints one node keeps (invariant 3).
constexpr size_t kMaxStreamEndpoints = 4096;

/// Where an owner's stream channel listens, as its grant said.
struct StreamEndpoint {
  std::string host;  ///< its TCP endpoint
  uint16_t port = 0;
  /// Its same-host endpoint when it runs on this host (same_host_endpoint()), else "".
  std::string unix_name;
};

class StreamEndpoints {
public:
  /// Invariant 1: `owner`'s grant named `endpoint` (port 0: the owner has no stream channel,
  /// nothing is learned).
  void learn(const caf::actor_addr& owner, StreamEndpoint endpoint);
  /// The endpoint `owner` named, if it is known here.
  std::optional<StreamEndpoint> find(const caf::actor_addr& owner) const;
  /// Invariant 2.
  void forget(const caf::actor_addr& owner);
  size_t size() const;

private:
  mutable std::mutex mu_;
  std::map<caf::actor_addr, StreamEndpoint> known_;
  std::deque<caf::actor_addr> learned_;  ///< in the order learned (invariant 3)
};

}  // namespace caf_rdma
