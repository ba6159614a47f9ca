// KillableCopy: a process_vm_* call in a task SIGKILL can end (see killable_copy.h).
#include "components/killable_copy.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>

#include "components/detail/copy_task_child.h"
#include "components/detail/tsan.h"

namespace caf_rdma {

namespace {

/// The child's stack: its loop and the call's frame only.
constexpr size_t kChildStack = 64 << 10;

/// One thread's copy task: made at its first copy, kept for the next ones (a clone per call
/// cost 60 us), ended with its thread or by a kill (invariant 3), made again after one.
class CopyTask {
public:
  explicit CopyTask(int nice) : nice_(nice) {}
  ~CopyTask() { end(); }

  /// Starts the child unless it runs; errno on failure, else 0.
  int ensure() {
    if (stack_ != nullptr && owner_ != ::getpid())
      forget();  // this is a fork's child: the task is its parent's
    if (stack_ != nullptr && __atomic_load_n(&shared_->tid, __ATOMIC_ACQUIRE) == 0)
      end();  // killed by another while idle: reaped, made again below
    if (stack_ != nullptr)
      return 0;
    void* stack = ::mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
      return errno;
    shared_ = std::make_unique<detail::CopyJobs>();
    shared_->creator = ::getpid();
    shared_->nice = nice_;
    // Invariant 1: shares memory, files, filesystem and handlers (nothing copied); exit
    // signal 0: no SIGCHLD, reaped with __WCLONE.
    const int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_PARENT_SETTID |
                      CLONE_CHILD_CLEARTID;
    // Invariant 1: the child starts with every signal blocked (it inherits this thread's mask),
    // so no handler of the program ever runs in it (a terminal's SIGINT reaches its process
    // group, the child's too).
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    const int tid = ::clone(detail::run_copy_jobs, static_cast<char*>(stack) + kChildStack, flags,
                            shared_.get(), &shared_->tid, nullptr, &shared_->tid);
    const int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (tid < 0) {
      const int err = clone_errno;
      ::munmap(stack, kChildStack);
      shared_.reset();
      return err;
    }
    stack_ = stack;
    tid_ = tid;
    owner_ = ::getpid();
    return 0;
  }

  /// Runs one job (invariant 3).
  VmCopyEnd run(pid_t pid, const VmCopyJob& job, Deadline deadline,
                const std::function<bool()>& stop) {
    VmCopyEnd end;
    if (const int err = ensure(); err != 0) {
      end.moved = -1;
      end.err = err;
      end.no_task = true;
      return end;
    }
    detail::CopyJobs& s = *shared_;
    s.pid = pid;
    s.mine = job.mine;
    s.mine_count = job.mine_count;
    s.theirs = job.theirs;
    s.theirs_count = job.theirs_count;
    s.to_remote = job.to_remote;
    const uint32_t r = __atomic_load_n(&s.req, __ATOMIC_RELAXED) + 1;
    const uint32_t before = r - 1;
    __atomic_store_n(&s.req, r, __ATOMIC_RELEASE);
    ::syscall(SYS_futex, &s.req, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    // errno is not read while the child lives: only the words say how the wait went.
    for (int spin = 0;
         spin < detail::kCopySpinRounds && __atomic_load_n(&s.done, __ATOMIC_ACQUIRE) != r; ++spin)
      detail::cpu_relax();
    while (__atomic_load_n(&s.done, __ATOMIC_ACQUIRE) != r) {
      if ((stop && stop()) || std::chrono::steady_clock::now() >= deadline) {
        end.stopped = true;
        this->end();  // invariant 2: gone before this returns
        return end;
      }
      if (__atomic_load_n(&s.tid, __ATOMIC_ACQUIRE) == 0) {  // killed by someone else
        this->end();
        end.moved = -1;
        end.err = ECHILD;
        return end;
      }
      const auto look = std::chrono::duration_cast<std::chrono::nanoseconds>(kStopLook).count();
      timespec ts{static_cast<time_t>(look / 1000000000), static_cast<long>(look % 1000000000)};
      ::syscall(SYS_futex, &s.done, FUTEX_WAIT, before, &ts, nullptr, 0);
    }
    const long result = __atomic_load_n(&s.result, __ATOMIC_RELAXED);
    if (result < 0) {
      end.moved = -1;
      end.err = static_cast<int>(-result);
    } else {
      end.moved = result;
    }
    return end;
  }

private:
  /// Kills the child and reaps it (invariant 2), then frees what it used.
  void end() {
    if (stack_ == nullptr || owner_ != ::getpid())
      return forget();
    ::kill(tid_, SIGKILL);
    while (::waitpid(tid_, nullptr, __WCLONE) < 0 && errno == EINTR) {
    }
    ::munmap(stack_, kChildStack);
    forget();
  }
  /// Lets go of the task without touching it (it is gone, or in a fork's child another
  /// process's: what is here is this process's copy of its state).
  void forget() {
    stack_ = nullptr;
    shared_.reset();
    tid_ = 0;
  }

  const int nice_;  ///< invariant 6
  void* stack_ = nullptr;
  std::unique_ptr<detail::CopyJobs> shared_;
  pid_t tid_ = 0;
  pid_t owner_ = 0;
};

}  // namespace

VmCopyEnd killable_vm_copy(pid_t pid, const VmCopyJob& job, Deadline deadline,
                           const std::function<bool()>& stop) {
#if CAF_RDMA_HAS_TSAN
  // Invariant 5: ThreadSanitizer's clone() runs no task that shares its creator's thread state.
  (void)deadline;
  (void)stop;
  VmCopyEnd direct;
  direct.moved =
      job.to_remote
          ? ::process_vm_writev(pid, job.mine, job.mine_count, job.theirs, job.theirs_count, 0)
          : ::process_vm_readv(pid, job.mine, job.mine_count, job.theirs, job.theirs_count, 0);
  direct.err = direct.moved < 0 ? errno : 0;
  return direct;
#else
  // Invariant 6: a child per class.
  thread_local CopyTask tasks[kPriorityClasses] = {CopyTask(kClassNice[0]), CopyTask(kClassNice[1]),
                                                   CopyTask(kClassNice[2])};
  return tasks[urgency(job.priority)].run(pid, job, deadline, stop);
#endif
}

}  // namespace caf_rdma
