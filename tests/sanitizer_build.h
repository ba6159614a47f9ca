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
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
inline constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace caf_rdma::testing
