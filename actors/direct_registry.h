// DirectRegistry: the local buffers that direct lanes (actors/direct_lane.h) and stream lanes
// (actors/stream_lane.h) may use, shared by a manager (which adds and releases them) and the
// lanes (threads that are not actors, which use them without a message per op).
//
// Invariants:
//  1. Only host memory and buffers the NIC registered directly (GPUDirect) are listed; every
//     other buffer is unknown here and its transfers go through the manager. A direct lane
//     acquires only NIC-registered ones (`acquire`), a stream lane only host memory
//     (`acquire_host`, also without a device).
//  2. A lane uses a buffer only between `acquire` and `done`. `release` refuses later acquires
//     at once and says whether a lane still uses the buffer; `done` says when the last use of
//     a released buffer ended: the manager's release reply (after which the caller may free
//     the memory) waits for lanes exactly as for its own transfers (a peer's request by handle
//     ends early: `Entry::withdrawal`, components/withdrawal.h).
//  3. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "actors/manager/telemetry.h"
#include "actors/rdma_messages.h"
#include "components/rdma_buffer.h"
#include "components/withdrawal.h"

namespace caf_rdma {

class DirectRegistry {
public:
  /// What a lane needs of a local buffer: its region (kept registered while the copy lives),
  /// and its size and access as registered.
  struct Entry {
    RdmaBuffer rdma;
    uint64_t size = 0;
    BufferAccess access = BufferAccess::kReadWrite;
    uint64_t secret_hi = 0;  ///< the secret its handles carry (a lane checks it as the manager)
    uint64_t secret_lo = 0;
    uint64_t addr = 0;  ///< first byte in this process
    BufferMemory memory = BufferMemory::kHost;
    /// Set by the manager at the buffer's release: a peer's stream transfer by handle stops
    /// (components/stream_server.h invariant 14).
    Withdrawal withdrawal;
  };

  /// Counts of ops lanes ran (they count as RDMA ops of the manager).
  struct Counters {
    uint64_t ops = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    /// Ops stream lanes ran (they count as fallback ops of the manager).
    uint64_t stream_ops = 0;
    uint64_t stream_bytes = 0;
    uint64_t stream_errors = 0;
    /// Bytes this node served as owner to requests by handle (stream lanes' and managers').
    uint64_t served_bytes = 0;
  };

  void add(uint64_t id, const Entry& entry);
  /// The NIC-registered buffer for one direct lane op, or nothing when it is unknown here,
  /// released or not registered (now).
  std::optional<Entry> acquire(uint64_t id);
  /// The host-memory buffer for one stream lane op, or nothing when it is unknown here,
  /// released or not host memory.
  std::optional<Entry> acquire_host(uint64_t id);
  /// Ends a use; true when it was the last use of a released buffer.
  bool done(uint64_t id);
  /// Refuses later acquires; true when no lane uses the buffer (false: wait for `done`).
  bool release(uint64_t id);
  /// The device went away: every entry loses its registration; acquires fail (the manager
  /// answers those ops) until `set_rdma`.
  void drop_registrations();
  /// The buffer was registered again (on a reopened device); nothing if unknown or released.
  void set_rdma(uint64_t id, RdmaBuffer rdma);
  /// True while a lane uses the buffer.
  bool busy(uint64_t id) const;

  void count(bool ok, uint64_t bytes);
  void count_stream(bool ok, uint64_t bytes);
  void count_served(uint64_t bytes);
  Counters counters() const;
  /// One lane op ended (Telemetry invariant 1), and what the lanes recorded so far.
  void record(const OpSample& sample);
  ManagerTelemetry telemetry() const;

private:
  struct Slot {
    Entry entry;
    uint32_t active = 0;
    bool released = false;
    bool lost = false;  ///< its registration went with the device (until set_rdma)
  };

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Slot> slots_;
  Counters counters_;
  Telemetry telemetry_;
};

}  // namespace caf_rdma
