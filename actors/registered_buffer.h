// RegisteredBuffer: a registration that releases itself. RdmaClient::register_buffer makes one;
// when it goes (or release() is called) it asks its manager to release the buffer and waits for
// the answer, which comes only once no transfer uses the memory any more (manager invariant 2):
// after that the program may free or reuse the memory. It converts to the BufferHandle it holds,
// so it is passed to read/write/make_read as the handle is.
//
// Invariants:
//  1. A RegisteredBuffer releases its buffer at most once (moved-from ones release nothing).
//  2. Its destructor waits at most its timeout for the manager's answer, and reports a failed
//     or late release on stderr (naming the buffer) instead of throwing.
//  3. Destroy it before the actor system of its manager (the RdmaNode), as an RdmaClient. A node
//     destroyed first names it on stderr and returns; it then does nothing: its release fails
//     with peer_unavailable saying so, leaving memory of its own mapped (invariant 5), and its
//     destructor returns (actors/detail/node_objects.h).
//  4. One made by `make` (as RdmaClient::register_buffer does) is its buffer's registrant
//     itself (leak accounting, actors/manager/registrant_watch.h): it holds the actor that
//     registered the buffer until the release, so the end of the client that made it is not
//     taken for a leak of the buffer.
//  5. One made by `allocate` owns its memory (components/host_memory.h): the memory stays
//     mapped while the RegisteredBuffer lives (also after release(), so data() stays valid),
//     and goes with it only if its release was answered; a release that failed or was never
//     answered leaves the memory mapped for the process's life (a transfer may still use it),
//     and says so on stderr. Registration errors free it, except a timeout (the manager may
//     register it after all).
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>

#include "actors/rdma_manager_interface.h"
#include "components/host_memory.h"
#include "primitives/status.h"

namespace caf_rdma {

class RegisteredBuffer {
public:
  RegisteredBuffer() = default;
  /// Takes over a registration made elsewhere (its registrant stays the actor that made it).
  RegisteredBuffer(caf::actor_system& sys, rdma_manager_actor manager, BufferHandle handle,
                   std::chrono::milliseconds timeout);
  /// Registers [addr, addr + size) with `manager` (a manager of this process), waiting at most
  /// `timeout` for the answer (errors as request_buffer's); invariant 4.
  static Result<RegisteredBuffer> make(caf::actor_system& sys, rdma_manager_actor manager,
                                       const void* addr, uint64_t size, BufferAccess access,
                                       std::chrono::milliseconds timeout);
  /// Allocates `size` bytes of zeroed host memory (HostMemory: 2 MiB-aligned and advised to
  /// huge pages from 2 MiB) and registers them with `manager` as `make` does; invariant 5.
  /// Errors: HostMemory::allocate's, then make's.
  static Result<RegisteredBuffer> allocate(caf::actor_system& sys, rdma_manager_actor manager,
                                           uint64_t size, BufferAccess access,
                                           std::chrono::milliseconds timeout);
  ~RegisteredBuffer();
  RegisteredBuffer(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer& operator=(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;

  const BufferHandle& handle() const { return handle_; }
  operator const BufferHandle&() const { return handle_; }  // NOLINT: passed where handles go
  /// The buffer's first byte in this process (its handle's address); for one made by
  /// `allocate`, valid while it lives (invariant 5).
  uint8_t* data() const { return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(handle_.addr)); }
  uint64_t size() const { return handle_.size; }
  /// Whether it owns its memory (made by `allocate`) and the kernel took the huge page advice.
  bool huge_pages() const { return memory_.huge_pages(); }
  /// Whether it still holds a registration (not released, not moved from).
  bool registered() const { return sys_ != nullptr; }

  /// Releases the buffer now: returns once the manager answered (no transfer uses the memory
  /// any more), or with its error (unknown_buffer, timeout, ...) naming the buffer.
  Status release();

private:
  void keep_memory_if_in_use();  ///< invariant 5, on destruction
  void unlist();                 ///< off detail/node_objects.h's list (once)

  caf::actor_system* sys_ = nullptr;
  rdma_manager_actor manager_;
  BufferHandle handle_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<caf::scoped_actor> registrant_;  ///< invariant 4 (made by `make`)
  HostMemory memory_;        ///< invariant 5 (made by `allocate`); empty otherwise
  bool memory_free_ = true;  ///< invariant 5: false once a release failed
  /// Listed in detail/node_objects.h while registered: under this system, with this token.
  const caf::actor_system* listed_in_ = nullptr;
  uint64_t listed_ = 0;
};

}  // namespace caf_rdma
