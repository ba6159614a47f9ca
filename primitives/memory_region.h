// MemoryRegion: RAII owner of a registered memory region (ibv_mr).
//
// Destruction order: the MR holds a shared_ptr to its ProtectionDomain and is deregistered
// before it. The memory itself belongs to the caller and must outlive the MR.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primitives/protection_domain.h"

namespace caf_rdma {

/// Access rights for a registration.
enum class Access : uint8_t {
  kReadOnly,    ///< remote peers may RDMA READ (and local writes into it by RDMA READ replies
                ///< are not allowed either: local-write is off)
  kReadWrite,   ///< remote READ, WRITE and atomics; local writes
  kLocalWrite,  ///< local access only (no remote access at all): bounce buffers, scratch space;
                ///< its rkey grants nothing
};

/// ibv_access_flags for an Access value.
int access_flags(Access access);

/// How to raise the locked-memory limit: the fix every message about RLIMIT_MEMLOCK names.
extern const char* const kMemlockFix;

/// Whether this process may pin memory beyond RLIMIT_MEMLOCK (CAP_IPC_LOCK, effective).
bool has_ipc_lock();

/// What to do when pinning `length` bytes failed with ENOMEM under a locked-memory limit of
/// `memlock_limit` bytes (RLIM_INFINITY: none; `has_ipc_lock`: CAP_IPC_LOCK bypasses it):
/// names the limit and how to raise it, or is empty when the limit cannot be the cause.
std::string memlock_hint(uint64_t length, uint64_t memlock_limit, bool has_ipc_lock);

class MemoryRegion {
public:
  /// Registers [addr, addr + length) with `access`.
  static Result<std::shared_ptr<MemoryRegion>> register_memory(std::shared_ptr<ProtectionDomain> pd,
                                                               void* addr, size_t length,
                                                               Access access);

  /// Registers a dmabuf (GPU memory exported by its driver): `offset` into the dmabuf `fd`
  /// mapped at `iova` (the device pointer).
  static Result<std::shared_ptr<MemoryRegion>> register_dmabuf(std::shared_ptr<ProtectionDomain> pd,
                                                               uint64_t offset, size_t length,
                                                               uint64_t iova, int fd,
                                                               Access access);

  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  ibv_mr* get() const { return mr_; }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(mr_->addr); }
  size_t length() const { return mr_->length; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  Access access() const { return access_; }
  const std::shared_ptr<ProtectionDomain>& pd() const { return pd_; }

  /// True when [addr, addr + length) lies inside this region.
  bool covers(uint64_t addr, size_t length) const;

private:
  MemoryRegion(std::shared_ptr<ProtectionDomain> pd, ibv_mr* mr, Access access)
      : pd_(std::move(pd)), mr_(mr), access_(access) {}

  std::shared_ptr<ProtectionDomain> pd_;
  ibv_mr* mr_;
  Access access_;
};

}  // namespace caf_rdma
