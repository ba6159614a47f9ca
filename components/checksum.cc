#include "components/checksum.h"

#include <zlib.h>

#include <algorithm>

namespace caf_rdma {

uint64_t range_checksum(const void* data, uint64_t length) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong crc = crc32(0L, Z_NULL, 0);
  // crc32 takes at most uInt bytes per call.
  for (uint64_t done = 0; done < length;) {
    auto n = static_cast<uInt>(std::min<uint64_t>(length - done, 1u << 30));
    crc = crc32(crc, p + done, n);
    done += n;
  }
  return (static_cast<uint64_t>(length) << 32) ^ static_cast<uint64_t>(crc);
}

}  // namespace caf_rdma
