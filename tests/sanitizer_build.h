// Which sanitizer a test binary is built with, the same answer under GCC (which defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__) and clang (which answers __has_feature):
// --config=asan compiles with clang-14 and --config=tsan with GCC (.bazelrc). A test scales its
// sizes, or leaves out a check the sanitizer's own memory makes meaningless, only through these.
#pragma once

namespace caf_rdma::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
inline constexpr bool kAddressSanitizer = __has_feature(address_sanitizer);
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__)
#define CAF_RDMA_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CAF_RDMA_THREAD_SANITIZER 1
#endif
#endif

#ifdef CAF_RDMA_THREAD_SANITIZER
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace caf_rdma::testing

#ifdef CAF_RDMA_THREAD_SANITIZER
// ThreadSanitizer's runtime annotations (compiler-rt): this thread's reads between them are not
// checked.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace caf_rdma::testing {

/// While one lives, ThreadSanitizer does not check this thread's reads: for a test that reads,
/// on purpose, memory another thread is writing (its checks come after the writer is done).
/// Nothing without ThreadSanitizer.
class UncheckedReads {
public:
#ifdef CAF_RDMA_THREAD_SANITIZER
  UncheckedReads() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  }
  ~UncheckedReads() {
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#else
  UncheckedReads() = default;
#endif
  UncheckedReads(const UncheckedReads&) = delete;
  UncheckedReads& operator=(const UncheckedReads&) = delete;
};

}  // namespace caf_rdma::testing
