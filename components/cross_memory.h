// Cross-memory attach (process_vm_readv / process_vm_writev): the owner's stream server copies
// a same-host request's bytes straight between its buffer and the requester's memory, one copy
// in the kernel, no socket in between (stream_server.h invariant 11). No CAF.
//
// Invariants:
//  1. Only the owner calls it, after it checked the request (secret, bounds, access) and while
//     it holds its buffer; the pid is the connection's SO_PEERCRED pid (same_host.h), never a
//     number from the request, so a requester can only make the owner touch its own memory.
//  2. Short counts are resumed where they stopped (the kernel returns a partial count at the
//     first page it cannot reach, or after a signal); bytes move in pieces of at most
//     kCrossMemoryPiece, and the deadline is checked between pieces.
//  3. `refused` is set only when the kernel refused before any byte moved (EPERM: Yama's
//     ptrace_scope, a different uid, an LSM; ENOSYS: no CMA in this kernel; seccomp's EPERM in
//     containers; ESRCH or pid 0: a requester in another pid namespace), or the copy task
//     could not be started (killable_copy.h invariant 4): the caller may then move the bytes
//     another way. Under Yama's ptrace_scope 1 the copy task, a process of its own, may reach
//     only requesters it descends from or that named the owner with PR_SET_PTRACER: a
//     requester in the owner's own process or started by it is refused then, and served
//     in-band. Every other failure names
//     buffer id, offset, size, peer pid and errno.
//  4. A copy of at least kCrossMemoryParallelMin moves its first 1 MiB alone (so a refusal
//     comes before any other thread starts), then the rest in at most kCrossMemoryThreads
//     contiguous parts on as many threads (this one included, at most one per core), all
//     joined before it returns: no byte moves after the call.
//  5. A copy its owner withdraws (withdrawal.h: its buffer was released) moves no piece after
//     a part saw it: each part looks before each piece; once every part stopped, the call
//     returns released_midway_error (named as its other errors are), unless a part failed for
//     another reason, whose error it returns.
//  6. A requester cannot hold a copy past its deadline or its withdrawal: each process_vm_*
//     call runs in a task that shares this address space and is killed then
//     (killable_copy.h), so a page the requester keeps from faulting in (userfaultfd) holds
//     the owner's worker, and its release, at most kStopLook past either. The call returns
//     only once that task is gone: no byte moves after it.
//  7. A requester that stops waiting ends the copy as the deadline would: `requester_gone`
//     (the stream server's: its connection spoke or hung up) is looked at before each piece
//     and with the withdrawal while a call runs; the error is peer_unavailable, "the requester
//     stopped waiting", with what moved. A requester that half-closes and then reads the
//     answer (stream_client.h: a client that stops) so learns when no byte moves any more.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "components/iov_windows.h"
#include "components/priority.h"
#include "components/socket_io.h"
#include "components/withdrawal.h"

namespace caf_rdma {

/// Invariant 2: bytes per process_vm_* call (the deadline is checked between them).
constexpr uint64_t kCrossMemoryPiece = 16ull << 20;
/// Invariant 4: copies of at least this many bytes run in up to kCrossMemoryThreads parts at
/// once (one core's process_vm_* moves about a third of what memcpy does: it pins and maps
/// each page of the other process; measured 7.8 GB/s on one thread, 13 GB/s on two, memcpy
/// 21 GB/s, on a 2-core host).
constexpr uint64_t kCrossMemoryParallelMin = 8ull << 20;
constexpr unsigned kCrossMemoryThreads = 4;

/// Copies `n` bytes between `local` (this process) and `remote_addr` in process `pid`:
/// into pid's memory when `to_remote` (a read served by the owner), else out of it (a write).
/// `subject` names the owner's side for errors ("buffer 7 offset 4096", "grant 123").
/// `requester_gone`: invariant 7 (none when empty). `priority`: the request's class, whose nice
/// value the copy tasks run at (killable_copy.h invariant 6).
Status cross_memory_copy(pid_t pid, uint8_t* local, uint64_t remote_addr, uint64_t n,
                         bool to_remote, Deadline deadline, const std::string& subject,
                         bool* refused, const Withdrawal& withdrawal = nullptr,
                         const std::function<bool()>& requester_gone = {},
                         Priority priority = Priority::kBulk);
/// The same for a list of ranges (`spans`, in this order; the copy of one range is the list of
/// one): each process_vm_* call takes up to kMaxIov of them and kCrossMemoryPiece bytes
/// (iov_windows.h), and invariants 2-7 hold for the list's bytes as for one range's.
Status cross_memory_copy_list(pid_t pid, const CopySpan* spans, size_t count, bool to_remote,
                              Deadline deadline, const std::string& subject, bool* refused,
                              const Withdrawal& withdrawal = nullptr,
                              const std::function<bool()>& requester_gone = {},
                              Priority priority = Priority::kBulk);

}  // namespace caf_rdma
