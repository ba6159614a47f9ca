// RegisteredBuffer: a registration that releases itself (see registered_buffer.h).
#include "actors/registered_buffer.h"

#include <caf/all.hpp>

#include <cstdio>
#include <optional>
#include <utility>

#include "actors/detail/node_objects.h"
#include "actors/rdma_errors.h"
#include "primitives/log.h"

namespace caf_rdma {

RegisteredBuffer::RegisteredBuffer(caf::actor_system& sys, rdma_manager_actor manager,
                                   BufferHandle handle, std::chrono::milliseconds timeout)
    : sys_(&sys), manager_(std::move(manager)), handle_(std::move(handle)), timeout_(timeout) {
  listed_in_ = &sys;
  listed_ = detail::node_object_added(sys, "RegisteredBuffer " + std::to_string(handle_.id) + " (" +
                                               std::to_string(handle_.size) + " bytes)");
}

void RegisteredBuffer::unlist() {
  if (listed_in_ != nullptr)
    detail::node_object_removed(*std::exchange(listed_in_, nullptr), listed_);
}

RegisteredBuffer::~RegisteredBuffer() {
  if (registered()) {
    if (Status st = release(); !st.ok())  // invariant 2
      log_line(LogLevel::kError, "releasing buffer %llu on destruction failed: %s",
               static_cast<unsigned long long>(handle_.id), st.error().to_string().c_str());
  }
  keep_memory_if_in_use();
  unlist();
}

void RegisteredBuffer::keep_memory_if_in_use() {
  if (memory_free_ || memory_.data() == nullptr)
    return;  // invariant 5: an answered release (or no memory of its own)
  log_line(
      LogLevel::kError,
      "buffer %llu: its %llu bytes stay allocated (its release failed or was not answered, so a "
      "transfer may still use them)",
      static_cast<unsigned long long>(handle_.id), static_cast<unsigned long long>(memory_.size()));
  memory_.leak();
}

RegisteredBuffer::RegisteredBuffer(RegisteredBuffer&& other) noexcept
    : sys_(std::exchange(other.sys_, nullptr)),
      manager_(std::move(other.manager_)),
      handle_(std::move(other.handle_)),
      timeout_(other.timeout_),
      registrant_(std::move(other.registrant_)),
      memory_(std::move(other.memory_)),
      memory_free_(std::exchange(other.memory_free_, true)),
      listed_in_(std::exchange(other.listed_in_, nullptr)),
      listed_(other.listed_) {}

RegisteredBuffer& RegisteredBuffer::operator=(RegisteredBuffer&& other) noexcept {
  if (this != &other) {
    RegisteredBuffer gone(std::move(*this));  // releases what this one held
    sys_ = std::exchange(other.sys_, nullptr);
    manager_ = std::move(other.manager_);
    handle_ = std::move(other.handle_);
    timeout_ = other.timeout_;
    registrant_ = std::move(other.registrant_);
    memory_ = std::move(other.memory_);
    memory_free_ = std::exchange(other.memory_free_, true);
    listed_in_ = std::exchange(other.listed_in_, nullptr);
    listed_ = other.listed_;
  }
  return *this;
}

Result<RegisteredBuffer> RegisteredBuffer::make(caf::actor_system& sys, rdma_manager_actor manager,
                                                const void* addr, uint64_t size,
                                                BufferAccess access,
                                                std::chrono::milliseconds timeout) {
  if (Status alive = detail::node_alive(sys, "RegisteredBuffer"); !alive.ok())
    return alive.error();
  auto registrant = std::make_unique<caf::scoped_actor>(sys);
  std::optional<Result<BufferHandle>> h;
  (*registrant)
      ->request(manager, timeout, request_buffer_atom::value,
                static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)), size,
                static_cast<uint8_t>(access))
      .receive([&](BufferHandle& handle) { h.emplace(std::move(handle)); },
               [&](caf::error& err) { h.emplace(to_error(err)); });
  if (!h->ok())
    return h->error();
  RegisteredBuffer b(sys, std::move(manager), std::move(**h), timeout);
  b.registrant_ = std::move(registrant);
  return b;
}

Result<RegisteredBuffer> RegisteredBuffer::allocate(caf::actor_system& sys,
                                                    rdma_manager_actor manager, uint64_t size,
                                                    BufferAccess access,
                                                    std::chrono::milliseconds timeout) {
  auto memory = HostMemory::allocate(size);
  if (!memory.ok())
    return memory.error();
  auto b = make(sys, std::move(manager), memory->data(), size, access, timeout);
  if (!b.ok()) {
    if (b.error().code() == ErrorCode::kTimeout)
      memory->leak();  // invariant 5: the manager may still register it
    return b.error();
  }
  b->memory_ = std::move(*memory);
  return b;
}

Status RegisteredBuffer::release() {
  if (!registered())
    return Error(ErrorCode::kInvalidArgument,
                 "buffer " + std::to_string(handle_.id) + " was released already (or moved)");
  caf::actor_system& sys = *std::exchange(sys_, nullptr);  // invariant 1: once, even if it fails
  unlist();
  if (Status alive = detail::node_alive(sys, "RegisteredBuffer " + std::to_string(handle_.id));
      !alive.ok()) {  // invariant 3: its node is gone, nothing to ask
    registrant_.reset();
    memory_free_ = false;
    return alive;
  }
  Status out = Error(ErrorCode::kTimeout, "releasing buffer " + std::to_string(handle_.id) +
                                              ": no answer within " +
                                              std::to_string(timeout_.count()) + " ms");
  // The registrant releases (invariant 4); it ends after the answer, holding nothing.
  std::unique_ptr<caf::scoped_actor> self = std::move(registrant_);
  if (!self)
    self = std::make_unique<caf::scoped_actor>(sys);
  (*self)
      ->request(manager_, timeout_, release_buffer_atom::value, handle_.id)
      .receive([&](uint64_t) { out = Status{}; },
               [&](caf::error& err) {
                 out = to_error(err).with_context("releasing buffer " + std::to_string(handle_.id));
               });
  memory_free_ = out.ok();  // invariant 5
  return out;
}

}  // namespace caf_rdma
