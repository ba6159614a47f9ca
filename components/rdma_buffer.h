// RdmaBuffer: a view of a registered memory region; RemoteBuffer: how a peer addresses one.
//
// Invariants:
//  1. An RdmaBuffer keeps its memory region registered while it (or a copy) exists and has not
//     been released; the region is deregistered when the last reference goes (RdmaDomain's
//     registration cache shares one region among buffers that fall inside it).
//  2. Every range is bounds-checked (`check_range`) before any work request is posted.
//  3. A buffer of a fake NIC (tests' FakeNic, components/nic.h) has no memory region behind it
//     (`region()` is null): what `keep` holds stands for it, with the keys the fake chose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "primitives/memory_region.h"
#include "primitives/status.h"

namespace caf_rdma {

/// The remote description of a registered buffer: all a peer needs to RDMA READ/WRITE it.
/// Plain data; actors/ serializes it.
struct RemoteBuffer {
  uint64_t addr = 0;   ///< virtual address of the first byte in the owner's process
  uint64_t size = 0;   ///< bytes
  uint32_t rkey = 0;   ///< remote key of the owner's memory region
  std::string device;  ///< the owner's device name (for messages)
  /// The owner's RdmaDomain::incarnation when it registered the buffer; 0: not checked. A
  /// queue pair refuses a remote buffer of another incarnation than the peer it reaches.
  uint64_t incarnation = 0;

  /// Checks [offset, offset + length) against the buffer: kInvalidArgument for length 0,
  /// kOutOfBounds naming addr, size, offset and length when it does not fit.
  Status check_range(uint64_t offset, uint64_t length, const char* what) const;

  /// "remote buffer 0x7f..+4096 (rkey 0x1234 on rxe0)".
  std::string describe() const;
};

class RdmaBuffer {
public:
  RdmaBuffer() = default;

  uint64_t addr() const { return addr_; }
  uint8_t* data() const { return reinterpret_cast<uint8_t*>(addr_); }
  uint64_t size() const { return size_; }
  uint32_t lkey() const { return keep_ ? lkey_ : 0; }
  uint32_t rkey() const { return keep_ ? rkey_ : 0; }
  Access access() const { return access_; }
  const std::string& device() const { return device_; }
  /// The memory region behind this buffer (shared with other buffers inside it); null after
  /// `release` and for a fake NIC's buffer (invariant 3).
  const std::shared_ptr<MemoryRegion>& region() const { return region_; }

  /// True after `release` (or for a default-constructed buffer).
  bool released() const { return keep_ == nullptr; }

  /// Drops this handle's reference to the region; later operations naming this handle fail with
  /// kReleased. The region is deregistered when no other buffer uses it.
  void release() {
    region_.reset();
    keep_.reset();
  }

  /// A buffer a fake NIC registered (invariant 3): `keep` keeps its keys valid as a memory
  /// region would (the fake revokes `rkey` when the last copy of `keep` goes).
  static RdmaBuffer of_fake_nic(std::shared_ptr<const void> keep, uint32_t lkey, uint32_t rkey,
                                uint64_t addr, uint64_t size, Access access, std::string device);

  /// What a peer needs to address this buffer.
  RemoteBuffer remote() const;

  /// Checks that the buffer is live and [offset, offset + length) fits; the error names the
  /// buffer, the range and `what` (e.g. "RDMA WRITE source").
  Status check_range(uint64_t offset, uint64_t length, const char* what) const;

  /// "local buffer 0x7f..+4096 on rxe0".
  std::string describe() const;

private:
  friend class RdmaDomain;
  RdmaBuffer(std::shared_ptr<MemoryRegion> region, uint64_t addr, uint64_t size, Access access,
             std::string device)
      : region_(std::move(region)),
        keep_(region_),
        lkey_(region_ ? region_->lkey() : 0),
        rkey_(region_ ? region_->rkey() : 0),
        addr_(addr),
        size_(size),
        access_(access),
        device_(std::move(device)) {}

  std::shared_ptr<MemoryRegion> region_;  ///< null for a fake NIC's (invariant 3)
  std::shared_ptr<const void> keep_;      ///< the region, or what a fake NIC keeps; null: released
  uint32_t lkey_ = 0, rkey_ = 0;
  uint64_t addr_ = 0;
  uint64_t size_ = 0;
  Access access_ = Access::kReadWrite;
  std::string device_;
};

/// "0x7f12345000+4096".
std::string range_string(uint64_t addr, uint64_t size);

}  // namespace caf_rdma
