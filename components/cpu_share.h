// CpuShare: how a thread that moves a bulk or background transfer's bytes shares its core with
// the tasks a latency-class transfer needs (the threads that serve it, and wait for it). No CAF.
//
// Why: Linux's scheduler (EEVDF) lets a running task finish its slice (1.4 ms on 2 cores)
// before a task that wakes on its core runs, and a kernel built without preemption cannot cut
// a system call short: a thread in a long send, recv or copy held a latency-class read's
// threads up to 1.9 ms. A yield between short calls ends the slice it protects.
//
// Invariants:
//  1. While a CpuShare::Scope of the bulk or background class lives on a thread, the byte loops
//     that run on it (socket_io.h: send_all, recv_all, move_pieces) move at most kShareRun
//     bytes per system call (plain TCP; with TLS a call moves a record, 16 KiB at most) and
//     yield the core (sched_yield) after each kShareRun bytes they moved, while more remain;
//     alone on its core, the thread goes on at once. Without a scope, or in a latency-class
//     one, they run unchanged. (The same-host copy tasks do the same in their own loop:
//     killable_copy.h invariant 6.) The yield acts within the thread's scheduling group: a
//     waiting task of another cgroup or autogroup still waits for the group's slice.
//  2. Scopes nest on a thread: the innermost holds, and its end brings back the one before.
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "components/priority.h"

namespace caf_rdma {

/// Invariant 1: bytes per system call while the thread shares its core.
constexpr uint64_t kShareRun = 256 << 10;

class CpuShare {
public:
  /// Invariant 1 for the transfer of class `p` this thread moves until the scope ends.
  class Scope {
  public:
    explicit Scope(Priority p);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    bool before_;
  };

  /// Whether this thread shares its core now (invariant 1).
  static bool sharing();
  /// The bytes the next call may move of `want` (kShareRun at most while sharing).
  static uint64_t run_of(uint64_t want) { return sharing() && want > kShareRun ? kShareRun : want; }
  /// Cuts message `m` to its first `bytes` bytes (entries past them dropped, the last one
  /// shortened); a message no longer is left as it is.
  static void cut(msghdr& m, uint64_t bytes);
  /// After a call that moved `bytes`, with `more` to move: yields the core while sharing, once
  /// each kShareRun bytes (counted per thread across calls).
  static void after_run(uint64_t bytes, bool more);
};

}  // namespace caf_rdma
