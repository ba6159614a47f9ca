// ThreadSanitizer in caf-rdma: whether this build has it (CAF_RDMA_HAS_TSAN: gcc's
// __SANITIZE_THREAD__, clang's __has_feature), and the one order the stream channel tells it of
// by hand: what a peer did before closing its connection comes before what its counterpart
// does after seeing the hang-up (the kernel keeps that order; ThreadSanitizer sees sockets of
// one process only as separate files). No-ops in other builds. No CAF.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define CAF_RDMA_HAS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAF_RDMA_HAS_TSAN 1
#endif
#endif
#ifndef CAF_RDMA_HAS_TSAN
#define CAF_RDMA_HAS_TSAN 0
#endif

#if CAF_RDMA_HAS_TSAN
extern "C" void __tsan_acquire(void* addr);  // NOLINT(bugprone-reserved-identifier)
extern "C" void __tsan_release(void* addr);  // NOLINT(bugprone-reserved-identifier)
#endif

namespace caf_rdma::detail {

/// The order's one sync object (its address only).
inline char hang_up_order;

/// Before a connection closes: what this thread did so far happens before a hang_up_seen().
inline void closing_connection() {
#if CAF_RDMA_HAS_TSAN
  __tsan_release(&hang_up_order);
#endif
}

/// After a peer's hang-up was seen: what it did before it closed happened before.
inline void hang_up_seen() {
#if CAF_RDMA_HAS_TSAN
  __tsan_acquire(&hang_up_order);
#endif
}

}  // namespace caf_rdma::detail
