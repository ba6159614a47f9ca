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
  long result = 0;    ///< the last job's system call return: bytes moved, or -errno
  uint32_t done = 0;  ///< futex word: the last job done (its `req`)
  /// The child's tid while it lives; the kernel sets it before clone returns and clears it,
  /// with a futex wake, once the child released the address space.
  pid_t tid = 0;
};

/// The child's body, given to clone() with its CopyJobs as `arg`: dies with its creating thread
/// (PR_SET_PDEATHSIG), takes its nice value, runs each job it is given (process_vm_writev or
/// process_vm_readv), publishes its result, then waits for the next. Never returns.
int run_copy_jobs(void* arg);

}  // namespace caf_rdma::detail
