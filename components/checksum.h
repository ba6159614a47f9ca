// Checksums of byte ranges, for verify mode: both sides of a transfer checksum the bytes they
// hold afterwards and compare.
//
// Invariants: a pure function of the bytes (zlib's crc32 over the range, seeded with its
// length), the same on every host; no CAF, no ibverbs.
#pragma once

#include <cstdint>

namespace caf_rdma {

/// crc32 of [data, data + length), with the length mixed in (so a range of zeros of one length
/// differs from one of another).
uint64_t range_checksum(const void* data, uint64_t length);

}  // namespace caf_rdma
