// Cross-memory attach (see cross_memory.h).
#include "components/cross_memory.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace caf_rdma {

Status cross_memory_copy(pid_t pid, uint8_t* local, uint64_t remote_addr, uint64_t n,
                         bool to_remote, Deadline deadline, const std::string& subject,
                         bool* refused) {
  *refused = false;
  auto describe = [&](uint64_t done) {
    return std::string("cross-memory ") + (to_remote ? "write into" : "read from") + " pid " +
           std::to_string(pid) + " at 0x" +
           [&] {
             char b[24];
             std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(remote_addr));
             return std::string(b);
           }() +
           " for " + subject + ", size " + std::to_string(n) + " (" + std::to_string(done) +
           " bytes moved)";
  };
  if (pid <= 0) {
    // SO_PEERCRED gives 0 for a requester of another pid namespace (a sidecar container that
    // shares the network namespace only): it cannot be reached, so the bytes go in-band.
    *refused = true;
    return Error(ErrorCode::kPermissionDenied, describe(0) +
                                                   ": the requester's pid is not "
                                                   "visible in this pid namespace");
  }
  uint64_t done = 0;
  while (done < n) {
    if (done > 0 && std::chrono::steady_clock::now() >= deadline)
      return Error(ErrorCode::kTimeout, describe(done) + ": the deadline passed");
    const uint64_t piece = std::min(n - done, kCrossMemoryPiece);
    iovec mine{local + done, piece};
    iovec theirs{reinterpret_cast<void*>(remote_addr + done), piece};
    const ssize_t k = to_remote ? ::process_vm_writev(pid, &mine, 1, &theirs, 1, 0)
                                : ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (k < 0) {
      const int err = errno;
      if (err == EINTR)
        continue;
      if (done == 0 && (err == EPERM || err == ENOSYS || err == EACCES || err == ESRCH))
        *refused = true;  // invariant 3: nothing moved, the caller may go another way
      const ErrorCode code = err == ESRCH    ? ErrorCode::kPeerUnavailable
                             : err == EFAULT ? ErrorCode::kInvalidArgument
                                             : ErrorCode::kInternal;
      return Error(code, describe(done) + ": " + errno_string(err));
    }
    if (k == 0)
      return Error(ErrorCode::kInvalidArgument,
                   describe(done) + ": the kernel moved nothing (unmapped memory?)");
    done += static_cast<uint64_t>(k);  // invariant 2: a short count resumes where it stopped
  }
  return {};
}

}  // namespace caf_rdma
