// Cross-memory attach (see cross_memory.h).
#include "components/cross_memory.h"

#include "components/iov_windows.h"
#include "components/killable_copy.h"

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <thread>
#include <vector>

namespace caf_rdma {

namespace {

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

Status cross_memory_copy(pid_t pid, uint8_t* local, uint64_t remote_addr, uint64_t n,
                         bool to_remote, Deadline deadline, const std::string& subject,
                         bool* refused, const Withdrawal& withdrawal,
                         const std::function<bool()>& requester_gone, Priority priority) {
  const CopySpan one{local, remote_addr, n};
  return cross_memory_copy_list(pid, &one, 1, to_remote, deadline, subject, refused, withdrawal,
                                requester_gone, priority);
}

Status cross_memory_copy_list(pid_t pid, const CopySpan* spans, size_t count, bool to_remote,
                              Deadline deadline, const std::string& subject, bool* refused,
                              const Withdrawal& withdrawal,
                              const std::function<bool()>& requester_gone, Priority priority) {
  *refused = false;
  uint64_t n = 0;
  for (size_t i = 0; i < count; ++i)
    n += spans[i].length;
  const uint64_t first_remote = count > 0 ? spans[0].remote : 0;
  auto describe = [&](uint64_t done) {
    return std::string("cross-memory ") + (to_remote ? "write into" : "read from") + " pid " +
           std::to_string(pid) + " at 0x" + hex(first_remote) +
           (count > 1 ? " (" + std::to_string(count) + " ranges)" : std::string()) + " for " +
           subject + ", size " + std::to_string(n) + " (" + std::to_string(done) + " bytes moved)";
  };
  if (pid <= 0) {
    // SO_PEERCRED gives 0 for a requester of another pid namespace (a sidecar container that
    // shares the network namespace only): it cannot be reached, so the bytes go in-band.
    *refused = true;
    return Error(ErrorCode::kPermissionDenied, describe(0) +
                                                   ": the requester's pid is not "
                                                   "visible in this pid namespace");
  }
  const IovWindows windows(spans, count);
  // Invariant 5's answer, with what moved in all.
  auto withdrawn_error = [&](uint64_t moved) {
    return released_midway_error(moved, n).with_context(describe(moved));
  };
  // Invariant 7's look and its answer.
  auto gone = [&] { return requester_gone && requester_gone(); };
  // `in_call`: the bytes of the call its end interrupted (what moved of them is not known).
  auto gone_error = [&](uint64_t moved, uint64_t in_call) {
    return Error(
        ErrorCode::kPeerUnavailable,
        describe(moved) + ": the requester stopped waiting (the copy was ended" +
            (in_call > 0 ? "; up to " + std::to_string(in_call) + " more bytes may have moved"
                         : std::string()) +
            ")");
  };
  // Copies `len` bytes of the list from `from` on, window by window; `moved` counts its bytes.
  auto part = [&](SpanCursor from, uint64_t len, std::atomic<uint64_t>& moved) -> Status {
    std::vector<iovec> mine;
    std::vector<iovec> theirs;
    mine.reserve(std::min<size_t>(count, kMaxIov));  // once per part, whatever the windows
    theirs.reserve(std::min<size_t>(count, kMaxIov));
    uint64_t done = 0;
    while (done < len) {
      if (withdrawn(withdrawal))  // invariant 5
        return withdrawn_error(moved.load());
      if (gone())  // invariant 7
        return gone_error(moved.load(), 0);
      if (moved.load() > 0 && std::chrono::steady_clock::now() >= deadline)
        return Error(ErrorCode::kTimeout, describe(moved.load()) + ": the deadline passed");
      const uint64_t piece =
          windows.fill(from, std::min(len - done, kCrossMemoryPiece), kMaxIov, mine, theirs);
      const VmCopyJob job{mine.data(),   mine.size(), theirs.data(),
                          theirs.size(), to_remote,   priority};
      // Invariant 6: in a task a stall cannot keep past the deadline or the withdrawal.
      const VmCopyEnd end =
          killable_vm_copy(pid, job, deadline, [&] { return withdrawn(withdrawal) || gone(); });
      if (end.stopped) {
        if (withdrawn(withdrawal))
          return withdrawn_error(moved.load());
        if (gone())
          return gone_error(moved.load(), piece);
        return Error(ErrorCode::kTimeout, describe(moved.load()) +
                                              ": the deadline passed while the kernel waited for "
                                              "the requester's memory (the copy was ended; up to " +
                                              std::to_string(piece) +
                                              " more bytes may have moved)");
      }
      const ssize_t k = end.moved;
      if (k < 0) {
        const int err = end.err;
        if (err == EINTR)
          continue;
        if (moved.load() == 0 &&
            (end.no_task || err == EPERM || err == ENOSYS || err == EACCES || err == ESRCH))
          *refused = true;  // invariant 3: nothing moved, the caller may go another way
        const ErrorCode code = err == ESRCH    ? ErrorCode::kPeerUnavailable
                               : err == EFAULT ? ErrorCode::kInvalidArgument
                                               : ErrorCode::kInternal;
        return Error(code, describe(moved.load()) + ": " +
                               (end.no_task ? "cannot start its copy task: " : "") +
                               errno_string(err));
      }
      if (k == 0)
        return Error(ErrorCode::kInvalidArgument,
                     describe(moved.load()) + ": the kernel moved nothing (unmapped memory?)");
      // Invariant 2: a short count resumes where it stopped.
      from = windows.advance(from, static_cast<uint64_t>(k));
      done += static_cast<uint64_t>(k);
      moved += static_cast<uint64_t>(k);
    }
    return {};
  };
  std::atomic<uint64_t> moved{0};
  // Invariant 4: the first piece alone (a refusal moves nothing, and needs no thread), then
  // the rest in parts that run at once.
  const uint64_t first = n >= kCrossMemoryParallelMin ? kCrossMemoryPiece / 16 : n;
  CAF_RDMA_RETURN_IF_ERROR(part(SpanCursor{}, first, moved));
  const uint64_t rest = n - first;
  if (rest == 0)
    return {};
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto parts = static_cast<unsigned>(
      std::min<uint64_t>(std::min(cores, kCrossMemoryThreads),
                         std::max<uint64_t>(1, rest / (kCrossMemoryParallelMin / 2))));
  std::vector<Status> results(parts);
  std::vector<std::thread> helpers;
  const uint64_t each = (rest + parts - 1) / parts;
  const SpanCursor after_first = windows.advance(SpanCursor{}, first);
  for (unsigned t = 1; t < parts; ++t) {
    const uint64_t from = first + t * each;
    if (from >= n)
      break;
    const SpanCursor at = windows.advance(after_first, t * each);
    helpers.emplace_back(
        [&, t, at, from] { results[t] = part(at, std::min(each, n - from), moved); });
  }
  results[0] = part(after_first, std::min(each, rest), moved);
  for (auto& h : helpers)
    h.join();
  // Invariant 5: another failure is the answer; else a withdrawal, with what moved in all.
  for (auto& st : results)
    if (!st.ok() && !ended_by_withdrawal(st))
      return st;
  for (auto& st : results)
    if (!st.ok())
      return withdrawn_error(moved.load());  // once every part stopped
  return {};
}

}  // namespace caf_rdma
