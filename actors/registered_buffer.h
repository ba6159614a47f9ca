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
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>

#include "actors/rdma_manager_interface.h"
#include "primitives/status.h"

namespace caf_rdma {

class RegisteredBuffer {
public:
  RegisteredBuffer() = default;
  RegisteredBuffer(caf::actor_system& sys, rdma_manager_actor manager, BufferHandle handle,
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
};

}  // namespace caf_rdma
