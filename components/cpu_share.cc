// CpuShare (see cpu_share.h).
#include "components/cpu_share.h"

#include <sched.h>

namespace caf_rdma {

namespace {

thread_local bool t_sharing = false;

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

void CpuShare::after_run() {
  if (t_sharing)
    ::sched_yield();
}

}  // namespace caf_rdma
