// The child side of a copy task (components/killable_copy.h): the loop that runs in a task
// sharing its creator's address space. Compiled without sanitizers (BUILD.bazel: their
// runtimes keep per-thread state in the creator's thread, which this task shares and must not
// touch: killable_copy.h invariant 1). No CAF, no libc calls.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

namespace caf_rdma::detail {

/// How long each side looks at the other's word before it sleeps on it: a handoff through a
/// futex sleep cost 10-15 us each way on a 2-core host (a 128 KiB copy takes about 30 us).
constexpr int kCopySpinRounds = 2000;

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/// Bytes per system call the child makes (a job is made in calls of at most this many). The
/// scheduler lets a running task keep its core for its slice (1.4 ms on 2 cores) when another
/// task wakes there, and a kernel without preemption (PREEMPT_NONE) switches tasks only where
/// a call reschedules or returns: a bulk child yields after each run while more remain
/// (run_job), which ends its slice (killable_copy.h invariant 6).
constexpr uint64_t kKernelRun = 256 << 10;
/// Ranges per side of one such call (its iovec arrays are on the child's 64 KiB stack).
constexpr unsigned long kRunIov = 256;

/// A position in an iovec array: range `i`, `off` bytes into it.
struct IovCursor {
  const iovec* v = nullptr;
  unsigned long n = 0;
  unsigned long i = 0;
  uint64_t off = 0;
};

/// The next run of a job from cursors `mine` and `theirs` (which it moves past it): at most
/// kKernelRun bytes and kRunIov non-empty ranges a side, the same bytes on both sides, written
/// to `m` and `t` (kRunIov entries each) with their counts; its bytes (0: the job is done).
uint64_t next_run(IovCursor& mine, IovCursor& theirs, iovec* m, unsigned long* mk, iovec* t,
                  unsigned long* tk);

/// What a copy task and its creator share: the child writes `result` and `done`, and nothing
/// else of this process's but the memory its calls move.
struct CopyJobs {
  // The creator's: a job, announced by a new `req`.
  uint32_t req = 0;  ///< futex word: jobs asked
  pid_t pid = 0;
  /// The job's iovec arrays, in the creator's memory (it keeps them until the job is done).
  const iovec* mine = nullptr;
  unsigned long mine_count = 0;
  const iovec* theirs = nullptr;
  unsigned long theirs_count = 0;
  bool to_remote = false;
  pid_t creator = 0;  ///< the creating process (the child ends if it is not its parent)
  /// How far the child raises its nice value above its creator's before its first job
  /// (priority.h invariant 3).
  int nice = 0;
  // The child's.
  /// The last job's bytes moved (its calls', up to the first short or failed one), or -errno
  /// when its first call failed.
  long result = 0;
  uint32_t done = 0;  ///< futex word: the last job done (its `req`)
  /// The child's tid while it lives; the kernel sets it before clone returns and clears it,
  /// with a futex wake, once the child released the address space.
  pid_t tid = 0;
};

/// The child's body, given to clone() with its CopyJobs as `arg`: dies with its creating thread
/// (PR_SET_PDEATHSIG), takes its nice value, runs each job it is given (process_vm_writev or
/// process_vm_readv, in calls of at most kKernelRun bytes; a child whose nice value is raised,
/// a bulk or background one, yields between them), publishes its result, then waits for the
/// next. Never returns.
int run_copy_jobs(void* arg);

}  // namespace caf_rdma::detail
