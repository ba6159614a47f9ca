// GpuImports: the GPU memory of other processes of this host that a StreamClient has opened
// (CUDA IPC imports, DeviceMemory::import_range), kept open from one transfer to the next so
// that each copy costs a device copy only, not an open and a close (stream_client.h invariant
// 11). No CAF here: the owner's manager asks the requester's to close what it imported before
// its release returns (actors/manager/gpu_exports.h).
//
// Invariants:
//  1. One open import per (export handle, GPU) at a time (a second opener of the same one, in a
//     race, holds its own until it gives it back: the driver counts both); each import is
//     closed exactly once, by the DeviceMemory that opened it, when no copy holds it.
//  2. close(handle) closes every import of that export once no copy holds it (an import
//     being opened meanwhile included: it serves its copy, then closes), and returns once they
//     all are closed, or says how many are still held when its limit passed (those close when
//     their copy gives them back): after it returns ok this process no longer maps
//     that memory, and its owner may free it. An import of a closed export is opened afresh
//     by the next copy that needs it.
//  3. At most kMaxOpen imports stay open: opening one more closes the one least recently used
//     that no copy holds (none held: it may exceed it until one is given back).
//  4. close_all() closes every import not held (the client's stop, after its threads ended).
//  Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "components/device_memory.h"

namespace caf_rdma {

class GpuImports {
public:
  static constexpr size_t kMaxOpen = 64;

  /// An import held by one copy, until give_back.
  struct Lease {
    uint64_t id = 0;
    uint64_t base = 0;  ///< where the exported allocation is mapped in this process
  };

  ~GpuImports();

  /// The import of `handle` for GPU `device` of `memory`: the open one, or opened now.
  Result<Lease> acquire(const std::vector<uint8_t>& handle,
                        const std::shared_ptr<DeviceMemory>& memory, int device);
  void give_back(const Lease& lease);
  /// Invariant 2: closes every import of `handle`; how many it closed, or an error naming the
  /// imports still held when `limit` passed.
  Result<size_t> close(const std::vector<uint8_t>& handle, std::chrono::milliseconds limit);
  /// Invariant 4.
  void close_all();
  /// Imports open now.
  size_t open() const;

private:
  struct Entry {
    std::vector<uint8_t> handle;
    int device = 0;
    std::shared_ptr<DeviceMemory> memory;
    GpuImport import;
    uint32_t users = 0;
    bool doomed = false;  ///< closed once its last user gives it back
    uint64_t last_use = 0;
  };
  /// An open under way (outside the lock): a close() meanwhile dooms what it opens.
  struct Opening {
    const std::vector<uint8_t>* handle = nullptr;
    bool doomed = false;
  };
  /// Closes `e` (outside the lock; invariant 1).
  static void close_entry(const Entry& e);
  /// Dooms the entries of `handle` (null: all) and takes out those no copy holds, to be
  /// closed outside the lock.
  std::vector<Entry> doom_locked(const std::vector<uint8_t>* handle);
  /// Doomed entries and opens under way of `handle` (what close() waits for).
  size_t held_locked(const std::vector<uint8_t>& handle) const;

  mutable std::mutex mu_;
  std::condition_variable given_back_;
  std::map<uint64_t, Entry> entries_;  ///< by id
  std::vector<Opening*> opening_;
  uint64_t next_id_ = 1;
  uint64_t clock_ = 0;
};

}  // namespace caf_rdma
