#include "primitives/memory_region.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

int access_flags(Access access) {
  switch (access) {
    case Access::kReadOnly:
      return IBV_ACCESS_REMOTE_READ;
    case Access::kReadWrite:
      return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
             IBV_ACCESS_REMOTE_ATOMIC;
    case Access::kLocalWrite:
      return IBV_ACCESS_LOCAL_WRITE;
  }
  return 0;
}

const char* const kMemlockFix =
    "raise it (`ulimit -l unlimited` in the launching shell, LimitMEMLOCK=infinity for a systemd "
    "service, `memlock` in /etc/security/limits.conf, `--ulimit memlock=-1` for docker) or grant "
    "CAP_IPC_LOCK";

bool has_ipc_lock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0)
    return false;
  return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

std::string memlock_hint(uint64_t length, uint64_t memlock_limit, bool has_ipc_lock) {
  if (has_ipc_lock || memlock_limit == RLIM_INFINITY)
    return {};
  return "; the locked-memory limit of this process (RLIMIT_MEMLOCK, `ulimit -l`) is " +
         std::to_string(memlock_limit / 1024) + " KiB and registering pins " +
         std::to_string((length + 1023) / 1024) + " KiB more: " + kMemlockFix;
}

namespace {

std::string pin_failure_hint(int err, uint64_t length) {
  if (err != ENOMEM)
    return {};
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0)
    return {};
  return memlock_hint(length, lim.rlim_cur, has_ipc_lock());
}

std::string range_text(uint64_t addr, size_t length) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
  return std::string(buf) + "+" + std::to_string(length);
}

}  // namespace

Result<std::shared_ptr<MemoryRegion>> MemoryRegion::register_memory(
    std::shared_ptr<ProtectionDomain> pd, void* addr, size_t length, Access access) {
  if (addr == nullptr || length == 0)
    return Error(ErrorCode::kInvalidArgument,
                 "cannot register " + range_text(reinterpret_cast<uint64_t>(addr), length) +
                     ": address must be non-null and size non-zero");
  int flags = access_flags(access);
  // Devices without atomics refuse IBV_ACCESS_REMOTE_ATOMIC; atomics then fail at the peer.
  if (pd->context()->device_attr().atomic_cap == IBV_ATOMIC_NONE)
    flags &= ~IBV_ACCESS_REMOTE_ATOMIC;
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pd->get(), addr, length, flags);
  if (mr == nullptr) {
    int err = errno ? errno : ENOMEM;
    Error e =
        ibverbs_error("ibv_reg_mr(" + range_text(reinterpret_cast<uint64_t>(addr), length) + ")",
                      err, "device " + pd->context()->name());
    return Error(e.code(), e.message() + pin_failure_hint(err, length));
  }
  return std::shared_ptr<MemoryRegion>(new MemoryRegion(std::move(pd), mr, access));
}

Result<std::shared_ptr<MemoryRegion>> MemoryRegion::register_dmabuf(
    std::shared_ptr<ProtectionDomain> pd, uint64_t offset, size_t length, uint64_t iova, int fd,
    Access access) {
  int flags = access_flags(access);
  if (pd->context()->device_attr().atomic_cap == IBV_ATOMIC_NONE)
    flags &= ~IBV_ACCESS_REMOTE_ATOMIC;
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd->get(), offset, length, iova, fd, flags);
  if (mr == nullptr)
    return ibverbs_error(
        "ibv_reg_dmabuf_mr(fd " + std::to_string(fd) + ", " + range_text(iova, length) + ")",
        errno ? errno : EOPNOTSUPP, "device " + pd->context()->name());
  return std::shared_ptr<MemoryRegion>(new MemoryRegion(std::move(pd), mr, access));
}

MemoryRegion::~MemoryRegion() {
  ibv_dereg_mr(mr_);
}

bool MemoryRegion::covers(uint64_t addr, size_t length) const {
  uint64_t base = this->addr();
  return addr >= base && length <= mr_->length && addr - base <= mr_->length - length;
}

}  // namespace caf_rdma
