#include "primitives/memory_region.h"

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

namespace {

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
  if (mr == nullptr)
    return ibverbs_error("ibv_reg_mr(" + range_text(reinterpret_cast<uint64_t>(addr), length) + ")",
                         errno ? errno : ENOMEM, "device " + pd->context()->name());
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
