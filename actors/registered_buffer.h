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
//  3. The actor system of its manager (the RdmaNode) must outlive it, as for RdmaClient.
//  4. One made by `make` (as RdmaClient::register_buffer does) is its buffer's registrant
//     itself (leak accounting, actors/manager/registrant_watch.h): it holds the actor that
//     registered the buffer until the release, so the end of the client that made it is not
//     taken for a leak of the buffer.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>

#include "actors/rdma_manager_interface.h"
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
  ~RegisteredBuffer();
  RegisteredBuffer(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer& operator=(RegisteredBuffer&& other) noexcept;
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;

  const BufferHandle& handle() const { return handle_; }
  operator const BufferHandle&() const { return handle_; }  // NOLINT: passed where handles go
  /// Whether it still holds a registration (not released, not moved from).
  bool registered() const { return sys_ != nullptr; }

  /// Releases the buffer now: returns once the manager answered (no transfer uses the memory
  /// any more), or with its error (unknown_buffer, timeout, ...) naming the buffer.
  Status release();

private:
  caf::actor_system* sys_ = nullptr;
  rdma_manager_actor manager_;
  BufferHandle handle_;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<caf::scoped_actor> registrant_;  ///< invariant 4 (made by `make`)
};

}  // namespace caf_rdma
