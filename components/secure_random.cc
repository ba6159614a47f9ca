// Secrets and tokens from the kernel's CSPRNG (see secure_random.h).
#include "components/secure_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "primitives/log.h"
#include "primitives/status.h"

namespace caf_rdma {

void secure_random(void* p, size_t n) {
  auto* out = static_cast<unsigned char*>(p);
  while (n > 0) {
    ssize_t got = ::getrandom(out, n, 0);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      log_line(LogLevel::kError, "getrandom failed (%s): cannot make secrets",
               errno_string(errno).c_str());
      std::abort();
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
}

uint64_t secure_random_u64() {
  uint64_t v = 0;
  secure_random(&v, sizeof(v));
  return v;
}

}  // namespace caf_rdma
