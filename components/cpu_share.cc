// CpuShare (see cpu_share.h).
#include "components/cpu_share.h"

#include <sched.h>

namespace caf_rdma {

namespace {

thread_local bool t_sharing = false;
thread_local uint64_t t_since_yield = 0;  ///< bytes moved since this thread last yielded

}  // namespace

CpuShare::Scope::Scope(Priority p) : before_(t_sharing) {
  t_sharing = p != Priority::kLatency;
}

CpuShare::Scope::~Scope() {
  t_sharing = before_;
}

bool CpuShare::sharing() {
  return t_sharing;
}

void CpuShare::cut(msghdr& m, uint64_t bytes) {
  uint64_t total = 0;
  for (size_t i = 0; i < m.msg_iovlen; ++i) {
    if (m.msg_iov[i].iov_len >= bytes - total) {
      m.msg_iov[i].iov_len = bytes - total;
      m.msg_iovlen = i + 1;
      return;
    }
    total += m.msg_iov[i].iov_len;
  }
}

void CpuShare::after_run(uint64_t bytes, bool more) {
  if (!t_sharing)
    return;
  t_since_yield += bytes;
  if (more && t_since_yield >= kShareRun) {
    ::sched_yield();
    t_since_yield = 0;
  }
}

}  // namespace caf_rdma
