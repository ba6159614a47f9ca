// Host checks: the locked-memory limit, the kernel modules and device nodes RDMA needs, and the
// kernel's known problems.
//
// Invariants:
//  1. Functions of a HostView only (no global state): a test hands them a fake host.
//  2. caf-rdma's own rules and texts are reused, not restated: the memlock fix
//     (`kMemlockFix`), the rxe problem (`known_device_problem`).
#pragma once

#include <cstdint>
#include <string>

#include "doctor/finding.h"
#include "doctor/host_view.h"

namespace caf_rdma::doctor {

/// The locked memory a process should be allowed at least when its limit is finite, unless the
/// user says otherwise (`--memlock-need`): every registered buffer stays pinned while it is
/// registered, and a node that stages GPU memory pins its bounce buffers besides.
constexpr uint64_t kDefaultMemlockNeed = uint64_t{64} << 20;

/// RLIMIT_MEMLOCK against `need` bytes: ok when unlimited or CAP_IPC_LOCK lifts it, warn when
/// finite but at least `need`, fail below `need`; each not-ok line names the fix.
Finding check_memlock(const HostView& host, uint64_t need);

/// Whether kernel module `name` is loaded (/proc/modules) or built in (/sys/module/<name>).
bool module_loaded(const HostView& host, const std::string& name);

/// ib_uverbs loaded, rdma_rxe (information only), and /dev/infiniband/uverbs* present and
/// usable by this user.
void check_kernel_modules(const HostView& host, Findings& out);

/// The kernel release, and the Soft-RoCE READ problem of kernels before 6.2 when rxe is in use
/// (an rxe device, or the rdma_rxe module loaded).
void check_kernel(const HostView& host, Findings& out);

}  // namespace caf_rdma::doctor
