// RegistrantWatch: leak accounting. Which of this node's actors registered each live buffer,
// how many bytes each holds (registered, and of those pinned by the device), and what happens
// when such an actor ends without releasing them.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// Invariants:
//  1. Every live (not released) buffer is counted for exactly one registrant: the actor that
//     sent its request_buffer. A release takes it off at once (before its reply, which may
//     wait for transfers).
//  2. A registrant is monitored from its first registration; when it ends holding buffers, and
//     the manager still runs ManagerOptions::orphan_grace later (the node did not stop just
//     after, as when a program leaves main()), one warning names it, why it ended and each of
//     those buffers still registered (id, bytes, address, pinned or not), and says how they
//     end: released then when ManagerOptions::release_orphans is set
//     (CAF_RDMA_RELEASE_ORPHANS=1), else registered until a release or the node's end.
//  3. What this part keeps is bounded by the live buffers: a registrant is forgotten (and no
//     longer monitored) when its last buffer is released.
#pragma once

#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/manager/manager_part.h"
#include "actors/rdma_messages.h"

namespace caf_rdma::detail {

class RegistrantWatch : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// Buffer `id` was just registered for the current message's sender.
  void registered(uint64_t id);
  /// Buffer `id` is being released (invariant 1).
  void released(uint64_t id);
  /// A monitored actor ended: true when it was a registrant (invariant 2).
  bool on_down(const caf::down_msg& msg);
  /// OrphanCheck: the grace of orphan batch `batch` is over (invariant 2).
  void report(uint64_t batch);
  /// One entry per registrant holding buffers, by actor id.
  std::vector<RegistrantStats> stats() const;
  /// Buffers whose registrant ended without releasing them, since the start.
  uint64_t orphaned() const { return orphaned_; }

private:
  struct Registrant {
    uint64_t actor_id = 0;
    std::string name;
    std::set<uint64_t> buffers;
  };
  /// Buffers of an ended registrant, waiting for the end of their grace.
  struct Orphans {
    Registrant registrant;
    std::string reason;  ///< why it ended
  };
  std::map<caf::actor_addr, Registrant> registrants_;
  std::map<uint64_t, Orphans> orphans_;
  uint64_t next_batch_ = 0;
  std::map<uint64_t, caf::actor_addr> holder_;  ///< buffer id -> its registrant
  uint64_t orphaned_ = 0;
};

}  // namespace caf_rdma::detail
