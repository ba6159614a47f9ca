// KillableCopy: one process_vm_readv / process_vm_writev copy (made in short calls, invariant
// 6) run in a task of its own that shares this process's memory, so that a call the other
// process keeps stuck in the kernel can be ended at a deadline or a withdrawal. No CAF.
//
// Why a task of its own: the kernel pins the other process's pages one by one, and a page the
// other process keeps from faulting in (a userfaultfd range nobody serves) puts the caller to
// sleep in a wait only a fatal signal ends (TASK_KILLABLE in the fault path: no EINTR, no
// partial count). A thread cannot be killed alone, so the call runs in a process created with
// clone(CLONE_VM): the same address space, a thread group of its own, which SIGKILL ends
// without touching the owner (cross_memory.h invariant 6).
//
// Invariants:
//  1. The call runs in a child task that shares this address space, file table and signal
//     handlers, and touches nothing but its own stack, the job it was given and the memory the
//     call moves: no libc call that takes a lock or sets errno (raw system calls only), so a
//     kill at any instant leaves no lock held and no thread's errno changed. It starts with
//     every signal blocked: no handler of the program runs in it.
//  2. killable_vm_copy returns only once the child is gone (the kernel cleared its tid word
//     when it released the address space, and it was reaped): no byte moves after it returns,
//     killed or not. A kill ends every wait a page fault of anonymous or file memory makes;
//     one the kernel does not let SIGKILL end (a FUSE file the requester serves and leaves
//     unanswered, read synchronously) holds the caller until it ends (docs/security.md).
//  3. While the call runs the caller looks at `stop` at least every kStopLook (socket_io.h)
//     and at the deadline; either ends the child with SIGKILL (`stopped` says so). What moved
//     before the kill is not known then (the kernel reports no partial count to a killed
//     task): at most the piece asked for. Each thread keeps its child for its next calls (a
//     clone per call cost 60 us); a killed one is made again at the next call, a thread's
//     ends with it, and a fork's child makes its own.
//  4. A child that could not be created is an error naming errno (`no_task`), never a silent
//     fallback to a call that cannot be stopped.
//  5. Except under ThreadSanitizer, whose clone() interceptor cannot run a task that shares
//     its creator's thread state: there the call is made directly (the tsan lane checks
//     everything else; tests/components/cross_memory_test skips its stalls there).
//  6. Each thread keeps one child per priority class; a class's child runs kClassNice above the
//     process's nice value (priority.h invariant 3), set by the child on itself as it starts: a
//     bulk copy is favoured less than a latency-class one on a busy core, and the calling
//     thread's own priority never changes. The child makes a job's copy in system calls of at
//     most kKernelRun (256 KiB) and kRunIov ranges a side (copy_task_child.h), and a bulk or
//     background child yields its core after each kKernelRun bytes while more remain: a task
//     that wakes on its core (a latency-class copy, the threads that serve it and wait for it)
//     runs within one such call (about 30 us), not after the scheduler's slice (1.4 ms on 2
//     cores), when both are in one scheduling group (EEVDF's yield acts within the group: in
//     another cgroup or autogroup, the group's own slice still holds). Measured: the 8-byte
//     same-host read's p99 while a 1 GiB pull runs went from 0.9-1.9 ms in most runs to 0.02-0.19
//     ms (bench/latency_under_load.h).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <functional>

#include "components/priority.h"
#include "components/socket_io.h"

namespace caf_rdma {

/// How one job ended: `moved` bytes (>= 0: its calls' up to the first short or failed one, which
/// the caller resumes), or `err` (an errno of its first call; ECHILD: the task was killed by
/// another, e.g. the OOM killer), or `stopped` (invariant 3).
struct VmCopyEnd {
  ssize_t moved = 0;
  int err = 0;
  bool stopped = false;
  bool no_task = false;  ///< `err` is the copy task's creation's (invariant 4): nothing ran
};

/// One copy job's arguments (as one process_vm_* call's; the child makes it in calls of at most
/// kKernelRun bytes, invariant 6): iovec arrays of this process (`mine`) and of the other
/// (`theirs`), each at most IOV_MAX long, kept by the caller until the job returns.
struct VmCopyJob {
  const iovec* mine = nullptr;
  unsigned long mine_count = 0;
  const iovec* theirs = nullptr;
  unsigned long theirs_count = 0;
  bool to_remote = false;  ///< process_vm_writev (into the other process), else readv
  /// Whose copy it is: the child task that runs it has the class's nice value (invariant 6).
  Priority priority = Priority::kBulk;
};

/// `job` with process `pid`, in a child task (invariants 1-2); stopped by `stop()` or the
/// deadline (invariant 3). Errors of the child's creation return as `err` with `moved` -1.
VmCopyEnd killable_vm_copy(pid_t pid, const VmCopyJob& job, Deadline deadline,
                           const std::function<bool()>& stop);

}  // namespace caf_rdma
