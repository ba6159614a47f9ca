// AdmissionQueue: the connections a listener accepted that have not proven themselves yet (a
// TLS handshake to finish, a grant's token to show), in arrival order and counted per IPv4
// address, and the one rule by which a newcomer makes room when they are at their limits.
// Shared by StreamServer (unauthenticated connections) and TlsAcceptor (pending handshakes).
// No locking: its owner's. No CAF here.
//
// Invariants:
//  1. room_for(ip) names the entry whose connection must close so that a newcomer from `ip`
//     fits: the oldest entry of `ip` if that address holds max_per_host, else (all max_total
//     taken) the oldest entry of the address holding the most; none when it fits already. A
//     flood of silent connections thus shortens the life of its own connections and cannot
//     keep anyone else out for longer than one handshake or request.
//  2. Each fd is in it at most once; remove() of one that is not there changes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

namespace caf_rdma {

class AdmissionQueue {
public:
  AdmissionQueue(size_t max_total, size_t max_per_host)
      : max_total_(max_total), max_per_host_(max_per_host) {}

  /// The fd to close so that a newcomer from `ip` fits (invariant 1); -1 when it fits.
  int room_for(uint32_t ip) const;
  /// Whether a newcomer from `ip` fits without closing another.
  bool fits(uint32_t ip) const;
  /// Admits `fd` (from `ip`), the newest.
  void add(int fd, uint32_t ip);
  /// Forgets `fd` (closed, or proven); whether it was there.
  bool remove(int fd);
  size_t size() const { return by_fd_.size(); }
  /// Entries from `ip`.
  size_t from(uint32_t ip) const;

private:
  size_t max_total_;
  size_t max_per_host_;
  uint64_t next_seq_ = 0;
  std::map<uint64_t, int> order_;                                 ///< seq -> fd, oldest first
  std::unordered_map<int, std::pair<uint64_t, uint32_t>> by_fd_;  ///< fd -> (seq, ip)
  std::map<uint32_t, size_t> per_host_;
};

}  // namespace caf_rdma
