#include "components/rdma_buffer.h"

#include <cstdio>

namespace caf_rdma {

std::string range_string(uint64_t addr, uint64_t size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "0x%llx+%llu", static_cast<unsigned long long>(addr),
                static_cast<unsigned long long>(size));
  return buf;
}

namespace {

// The description is built only when the check fails: this runs before every work request.
template <class Describe>
Status check(uint64_t offset, uint64_t length, uint64_t size, const char* what,
             Describe&& describe) {
  if (length == 0)
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + ": zero-length transfer on " + describe());
  if (offset > size || length > size - offset)
    return Error(ErrorCode::kOutOfBounds, std::string(what) + ": range offset " +
                                              std::to_string(offset) + " length " +
                                              std::to_string(length) + " does not fit " +
                                              describe() + " (size " + std::to_string(size) + ")");
  return {};
}

}  // namespace

RdmaBuffer RdmaBuffer::of_fake_nic(std::shared_ptr<const void> keep, uint32_t lkey, uint32_t rkey,
                                   uint64_t addr, uint64_t size, Access access,
                                   std::string device) {
  RdmaBuffer b(nullptr, addr, size, access, std::move(device));
  b.keep_ = std::move(keep);
  b.lkey_ = lkey;
  b.rkey_ = rkey;
  return b;
}

Status RemoteBuffer::check_range(uint64_t offset, uint64_t length, const char* what) const {
  return check(offset, length, size, what, [this] { return describe(); });
}

std::string RemoteBuffer::describe() const {
  char key[32];
  std::snprintf(key, sizeof(key), "0x%x", rkey);
  return "remote buffer " + range_string(addr, size) + " (rkey " + key + " on " +
         (device.empty() ? "?" : device) + ")";
}

RemoteBuffer RdmaBuffer::remote() const {
  return RemoteBuffer{addr_, size_, rkey(), device_};
}

Status RdmaBuffer::check_range(uint64_t offset, uint64_t length, const char* what) const {
  if (released())
    return Error(ErrorCode::kReleased, std::string(what) + ": " + describe() + " was released");
  return check(offset, length, size_, what, [this] { return describe(); });
}

std::string RdmaBuffer::describe() const {
  return "local buffer " + range_string(addr_, size_) + " on " + (device_.empty() ? "?" : device_);
}

}  // namespace caf_rdma
