// KvIndex: the store's keys, each naming its value's block in the pool, and the store's
// counters. Shared by the store actor (PUT and DELETE change it, GET reads it) and the
// same-host GET listener (kv_local_get.h), which reads it on its own thread; the checks and
// error texts of a GET live here, so the two answer alike.
//
// Invariants:
//  1. Thread-safe: every call takes the index's mutex, only for the lookup or the change
//     itself (never while bytes move).
//  2. A key's entry moves to a new value's block only once all its bytes are in (the store
//     actor calls put() after its transfer), and a block returns to the pool only once its last
//     holder lets go: whoever copies out of a block holds the shared_ptr find() gave it, so a
//     PUT or DELETE racing with a GET gives the old value or the new one, never a mix.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "primitives/status.h"
#include "systems/kv_store/kv_pool.h"

namespace caf_rdma::kv {

/// "'key'" for messages (long keys cut).
std::string key_text(const std::string& key);
/// invalid_argument for a key of `bytes` bytes outside 1..kMaxKeyBytes (ok otherwise).
Status check_key_length(uint64_t bytes);

class KvIndex {
public:
  /// Points `key` at `block` (invariant 2: after all its bytes are in).
  void put(const std::string& key, std::shared_ptr<const KvBlock> block);
  /// The length of the value that was under `key`, or nothing.
  std::optional<uint64_t> erase(const std::string& key);
  size_t size() const;

  /// A GET's lookup: the key's block, held for the copy (invariant 2), or the error to answer:
  /// invalid_argument (key), not_found, size_mismatch (the value needs more than `room` bytes;
  /// `room_text` says whose room: "the client's buffer 7 has 4096 bytes at offset 0").
  Result<std::shared_ptr<const KvBlock>> for_get(const std::string& key, uint64_t room,
                                                 const std::string& room_text) const;

  /// The store's counters (both the actor's and the listener's requests).
  std::atomic<uint64_t> puts{0}, gets{0}, deletes{0}, errors{0};

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const KvBlock>> map_;
};

}  // namespace caf_rdma::kv
