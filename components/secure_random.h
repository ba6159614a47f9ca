// Unpredictable numbers for secrets and tokens (buffer handles' secrets, stream grant tokens,
// directory wait ids): the kernel's CSPRNG through getrandom(2), never a seeded PRNG whose
// state a peer could reconstruct from the values it sees.
//
// Invariant: every value comes straight from getrandom (no buffering, no derivation), so
// values seen by a peer tell it nothing about any other.
#pragma once

#include <cstddef>
#include <cstdint>

namespace caf_rdma {

/// Fills [p, p + n) from getrandom(2) (retrying on EINTR and short reads). getrandom only fails
/// on kernels older than 3.17 or with a bad pointer; then the process aborts with a message
/// rather than hand out guessable secrets.
void secure_random(void* p, size_t n);

/// One unpredictable 64-bit value.
uint64_t secure_random_u64();

/// Compares two 128-bit secrets in time independent of where they differ.
inline bool secrets_equal(uint64_t a_hi, uint64_t a_lo, uint64_t b_hi, uint64_t b_lo) {
  return ((a_hi ^ b_hi) | (a_lo ^ b_lo)) == 0;
}

}  // namespace caf_rdma
