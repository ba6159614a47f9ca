// RingProxy: the consumer of an OpRing (components/op_ring.h), the CPU half of transfers a GPU
// kernel starts: a thread takes the ring's descriptors and asks this node's manager to move
// each as a transfer between the buffer pair it names, on whatever path those buffers take
// (RDMA, same host, the stream channel, CAF chunks); each ends in the ring's counters, which
// the producer waits on. It works with any producer that follows the ring's layout: a kernel
// writing host-mapped memory, or host threads (OpRingProducer).
//
// Invariants:
//  1. Each descriptor becomes one transfer request of this node's manager, of the pair's
//     buffers: put = write, get = read, fetch-add = the atomic on the remote word, its old value
//     into the 8 bytes at local_offset. Its answer ends its ticket: done, or failed with the
//     answer's code (OpRing invariant 3). A descriptor naming no pair of the table, or a kind
//     it does not know, fails at once (invalid_argument); the manager checks everything else
//     (bounds, rights, a released buffer) as for any transfer.
//  2. At most `most_in_flight` descriptors are on their way at once; the proxy takes no more
//     until one ends, so the producers wait for room (OpRing invariant 2).
//  3. Every ticket taken ends exactly once: each request waits at most its timeout plus the
//     manager's backstop, and a node that stops answers what it still had (peer_unavailable).
//     The destructor stops taking descriptors and returns once every ticket taken ended, so the
//     ring's memory may go right after it (past that bound, which only a starved scheduler
//     reaches, it says so on stderr, and answers that come later no longer touch the ring).
//  4. A proxy is one of its node's objects (actors/detail/node_objects.h): a node destroyed
//     while it lives neither hangs nor leaves it dangling; the descriptors it takes afterwards
//     fail at once (peer_unavailable).
#pragma once

#include <caf/actor_system.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "actors/rdma_manager_interface.h"
#include "actors/rdma_messages.h"
#include "components/op_ring.h"

namespace caf_rdma {

class RingProxy {
public:
  /// The buffers a descriptor's `pair` names: its local buffer (this node's) and the remote one.
  struct BufferPair {
    BufferHandle local;
    BufferHandle remote;
  };

  struct Options {
    std::chrono::milliseconds timeout{30000};  ///< each descriptor's transfer
    uint32_t most_in_flight = 256;             ///< invariant 2
  };

  /// Starts draining `ring` into `manager` (this node's), with `pairs` as the table descriptors
  /// index. An error when the table is empty or an option is out of range.
  static Result<std::unique_ptr<RingProxy>> start(caf::actor_system& sys,
                                                  rdma_manager_actor manager, OpRing ring,
                                                  std::vector<BufferPair> pairs, Options options);
  static Result<std::unique_ptr<RingProxy>> start(caf::actor_system& sys,
                                                  rdma_manager_actor manager, OpRing ring,
                                                  std::vector<BufferPair> pairs) {
    return start(sys, std::move(manager), ring, std::move(pairs), Options{});
  }
  /// Invariant 3: stops taking descriptors and waits for every ticket taken to end.
  ~RingProxy();

  RingProxy(const RingProxy&) = delete;
  RingProxy& operator=(const RingProxy&) = delete;

  /// Descriptors taken so far.
  uint64_t taken() const { return taken_.load(std::memory_order_acquire); }
  /// The error of the first descriptor that failed, its text naming what was wrong (the ring
  /// itself keeps only its ticket and code); nothing while none did.
  std::optional<Error> first_error() const;

private:
  struct Shared;
  RingProxy(caf::actor_system& sys, rdma_manager_actor manager, OpRing ring,
            std::vector<BufferPair> pairs, Options options);
  void run();
  /// The transfer descriptor `s` asks for; nothing (and the reason) when it names no pair or
  /// an unknown kind.
  Result<TransferOp> op_of(const OpRingSlot& s) const;

  caf::actor_system& sys_;
  rdma_manager_actor manager_;
  OpRing ring_;
  OpRingConsumer consumer_;  ///< its thread's
  std::vector<BufferPair> pairs_;
  Options options_;
  std::shared_ptr<Shared> shared_;
  std::atomic<uint64_t> taken_{0};
  uint64_t listed_ = 0;  ///< its token among its node's objects (invariant 4)
  std::thread thread_;
};

}  // namespace caf_rdma
