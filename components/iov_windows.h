// IovWindows: a list of byte ranges to copy between this process and another, cut into the
// windows one process_vm_* call takes (at most a byte budget and IOV_MAX ranges each). No CAF.
//
// Invariants:
//  1. A window is a run of the list's bytes in the list's order: its `mine` and `theirs` arrays
//     cover the same bytes in the same order, so a call's partial count (the kernel stops at
//     the first page it cannot reach) is a position in the list (advance()). Ranges that touch
//     on one side are one entry of that side's array (a paged list whose requester side is
//     contiguous costs the kernel one remote entry per window: it pins that side's pages in
//     large batches), so the two arrays may differ in length.
//  2. No window is empty while bytes remain, and none holds more than its budget's bytes or
//     entries on either side: a list of any length is copied in calls of bounded size.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace caf_rdma {

/// One range of a copy: `length` bytes at `local` (this process) and at `remote` (the other's).
struct CopySpan {
  uint8_t* local = nullptr;
  uint64_t remote = 0;
  uint64_t length = 0;
};

/// A position in a list of spans: the span, and how many of its bytes lie behind.
struct SpanCursor {
  size_t index = 0;
  uint64_t offset = 0;
};

/// The longest iovec array one process_vm_* call takes (Linux's IOV_MAX).
constexpr size_t kMaxIov = 1024;

class IovWindows {
public:
  IovWindows(const CopySpan* spans, size_t count) : spans_(spans), count_(count) {}

  /// Fills `mine` and `theirs` with the window that starts at `at`: at most `max_bytes` bytes
  /// and `max_iov` ranges (invariant 2). Returns its bytes (0: `at` is the end).
  uint64_t fill(SpanCursor at, uint64_t max_bytes, size_t max_iov, std::vector<iovec>& mine,
                std::vector<iovec>& theirs) const;
  /// `at` moved on by `bytes` (invariant 1).
  SpanCursor advance(SpanCursor at, uint64_t bytes) const;

private:
  const CopySpan* spans_;
  size_t count_;
};

}  // namespace caf_rdma
