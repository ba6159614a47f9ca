// HostMemory (see host_memory.h).
#include "components/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace caf_rdma {

namespace {

uint64_t round_up(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

Result<HostMemory> HostMemory::allocate(uint64_t size) {
  if (size == 0)
    return Error(ErrorCode::kInvalidArgument, "allocating host memory: size 0");
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const bool huge = size >= kHugePage;
  const uint64_t length = round_up(size, page);
  // Invariant 1: a 2 MiB-aligned start needs up to 2 MiB more, given back below.
  const uint64_t reserve = huge ? length + kHugePage : length;
  if (length < size || reserve < length)
    return Error(ErrorCode::kInvalidArgument,
                 "allocating host memory: size " + std::to_string(size) + " is too large");
  void* p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Error(ErrorCode::kResourceExhausted,
                 "allocating " + std::to_string(size) +
                     " bytes of host memory: mmap: " + errno_string(errno));
  auto* start = static_cast<uint8_t*>(p);
  auto* aligned = start;
  if (huge) {
    aligned = reinterpret_cast<uint8_t*>(
        round_up(reinterpret_cast<uintptr_t>(start), static_cast<uintptr_t>(kHugePage)));
    const uint64_t head = static_cast<uint64_t>(aligned - start);
    if (head > 0)
      ::munmap(start, head);
    if (reserve - head > length)
      ::munmap(aligned + length, reserve - head - length);
  }
  HostMemory m;
  m.data_ = aligned;
  m.size_ = size;
  // Invariant 2: a hint; EINVAL where the kernel has no transparent huge pages.
  m.huge_pages_ = huge && ::madvise(aligned, length, MADV_HUGEPAGE) == 0;
  return m;
}

HostMemory::~HostMemory() {
  unmap();
}

HostMemory::HostMemory(HostMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      huge_pages_(std::exchange(other.huge_pages_, false)) {}

HostMemory& HostMemory::operator=(HostMemory&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    huge_pages_ = std::exchange(other.huge_pages_, false);
  }
  return *this;
}

void HostMemory::leak() {
  data_ = nullptr;
  size_ = 0;
}

void HostMemory::unmap() {
  if (data_ != nullptr)
    ::munmap(data_, size_);  // the kernel unmaps every page the range touches
  leak();
}

}  // namespace caf_rdma
