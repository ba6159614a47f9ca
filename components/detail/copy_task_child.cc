// The child side of a copy task (see copy_task_child.h). Raw system calls only: no errno, no
// lock, nothing a kill at any instant could leave half done.
#include "components/detail/copy_task_child.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

namespace caf_rdma::detail {

namespace {

/// A system call without libc: its return, -errno on failure; errno untouched.
inline long raw_syscall(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a1;
  register long x1 __asm__("x1") = a2;
  register long x2 __asm__("x2") = a3;
  register long x3 __asm__("x3") = a4;
  register long x4 __asm__("x4") = a5;
  register long x5 __asm__("x5") = a6;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
#else
#error "copy_task_child.cc: raw system calls are written for x86_64 and aarch64 only"
#endif
}

/// How many bytes (at most `budget`) the next kRunIov non-empty ranges from `c` hold.
uint64_t reach(IovCursor c, uint64_t budget) {
  uint64_t total = 0;
  for (unsigned long k = 0; c.i < c.n && k < kRunIov && total < budget; ++c.i, c.off = 0) {
    const uint64_t left = c.v[c.i].iov_len - c.off;
    if (left == 0)
      continue;  // an empty range takes no entry
    total += left < budget - total ? left : budget - total;
    ++k;
  }
  return total;
}

/// Fills `out` with the next `bytes` bytes from `c` (reach said they fit in kRunIov ranges)
/// and moves `c` past them; the number of ranges.
unsigned long take(IovCursor& c, uint64_t bytes, iovec* out) {
  unsigned long k = 0;
  while (bytes > 0 && c.i < c.n) {
    const uint64_t left = c.v[c.i].iov_len - c.off;
    const uint64_t part = left < bytes ? left : bytes;
    if (part > 0) {
      out[k].iov_base = static_cast<char*>(c.v[c.i].iov_base) + c.off;
      out[k].iov_len = part;
      ++k;
    }
    bytes -= part;
    c.off += part;
    if (c.off == c.v[c.i].iov_len) {
      ++c.i;
      c.off = 0;
    }
  }
  return k;
}

/// Runs one job in calls of at most kKernelRun bytes: the bytes moved up to the first short or
/// failed call (a failure is returned, as -errno, only when nothing moved: the creator resumes
/// a short count, and its next call meets the error).
long run_job(const CopyJobs& s) {
  const long call = s.to_remote ? SYS_process_vm_writev : SYS_process_vm_readv;
  IovCursor mine{s.mine, s.mine_count};
  IovCursor theirs{s.theirs, s.theirs_count};
  iovec m[kRunIov];
  iovec t[kRunIov];
  long moved = 0;
  uint64_t since_yield = 0;
  for (;;) {
    unsigned long mk = 0, tk = 0;
    const uint64_t bytes = next_run(mine, theirs, m, &mk, t, &tk);
    if (bytes == 0)
      return moved;
    // A bulk or background copy lets a task waiting for this core run first, once per
    // kKernelRun bytes and only while more remain (killable_copy.h invariant 6). Alone on its
    // core, it goes on at once.
    if (s.nice != 0 && since_yield >= kKernelRun) {
      raw_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
      since_yield = 0;
    }
    const long r = raw_syscall(call, s.pid, reinterpret_cast<long>(m), static_cast<long>(mk),
                               reinterpret_cast<long>(t), static_cast<long>(tk), 0);
    if (r < 0)
      return moved > 0 ? moved : r;
    moved += r;
    since_yield += static_cast<uint64_t>(r);
    if (static_cast<uint64_t>(r) < bytes)
      return moved;
  }
}

}  // namespace

uint64_t next_run(IovCursor& mine, IovCursor& theirs, iovec* m, unsigned long* mk, iovec* t,
                  unsigned long* tk) {
  const uint64_t a = reach(mine, kKernelRun);
  const uint64_t b = reach(theirs, kKernelRun);
  const uint64_t bytes = a < b ? a : b;
  *mk = bytes == 0 ? 0 : take(mine, bytes, m);
  *tk = bytes == 0 ? 0 : take(theirs, bytes, t);
  return bytes;
}

int run_copy_jobs(void* arg) {
  auto* s = static_cast<CopyJobs*>(arg);
  raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0, 0);
  // Its creator may have ended before the line above: then nobody would end it.
  if (raw_syscall(SYS_getppid, 0, 0, 0, 0, 0, 0) != s->creator)
    raw_syscall(SYS_exit, 0, 0, 0, 0, 0, 0);
  // priority.h invariant 3: raising one's own nice value needs no privilege (and this task's
  // creator keeps its own).
  if (s->nice != 0) {
    // Above the process's own value (the system call answers 20 - nice), at most 19.
    const long now = 20 - raw_syscall(SYS_getpriority, PRIO_PROCESS, 0, 0, 0, 0, 0);
    const long target = now + s->nice > 19 ? 19 : now + s->nice;
    raw_syscall(SYS_setpriority, PRIO_PROCESS, 0, target, 0, 0, 0);
  }
  uint32_t seen = 0;
  for (;;) {
    uint32_t r;
    for (int spin = 0; (r = __atomic_load_n(&s->req, __ATOMIC_ACQUIRE)) == seen; ++spin) {
      if (spin < kCopySpinRounds)
        cpu_relax();
      else
        raw_syscall(SYS_futex, reinterpret_cast<long>(&s->req), FUTEX_WAIT, seen, 0, 0, 0);
    }
    seen = r;
    const long result = run_job(*s);
    __atomic_store_n(&s->result, result, __ATOMIC_RELAXED);
    __atomic_store_n(&s->done, r, __ATOMIC_RELEASE);
    raw_syscall(SYS_futex, reinterpret_cast<long>(&s->done), FUTEX_WAKE, 1, 0, 0, 0);
  }
}

}  // namespace caf_rdma::detail
