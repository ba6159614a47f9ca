// RegisteredBuffer: a registration that releases itself (see registered_buffer.h).
#include "actors/registered_buffer.h"

#include <caf/all.hpp>

#include <cstdio>
#include <utility>

#include "actors/rdma_errors.h"

namespace caf_rdma {

RegisteredBuffer::RegisteredBuffer(caf::actor_system& sys, rdma_manager_actor manager,
                                   BufferHandle handle, std::chrono::milliseconds timeout)
    : sys_(&sys), manager_(std::move(manager)), handle_(std::move(handle)), timeout_(timeout) {}

RegisteredBuffer::~RegisteredBuffer() {
  if (!registered())
    return;
  if (Status st = release(); !st.ok())  // invariant 2
    std::fprintf(stderr, "caf-rdma: releasing buffer %llu on destruction failed: %s\n",
                 static_cast<unsigned long long>(handle_.id), st.error().to_string().c_str());
}

RegisteredBuffer::RegisteredBuffer(RegisteredBuffer&& other) noexcept
    : sys_(std::exchange(other.sys_, nullptr)),
      manager_(std::move(other.manager_)),
      handle_(std::move(other.handle_)),
      timeout_(other.timeout_) {}

RegisteredBuffer& RegisteredBuffer::operator=(RegisteredBuffer&& other) noexcept {
  if (this != &other) {
    RegisteredBuffer gone(std::move(*this));  // releases what this one held
    sys_ = std::exchange(other.sys_, nullptr);
    manager_ = std::move(other.manager_);
    handle_ = std::move(other.handle_);
    timeout_ = other.timeout_;
  }
  return *this;
}

Status RegisteredBuffer::release() {
  if (!registered())
    return Error(ErrorCode::kInvalidArgument,
                 "buffer " + std::to_string(handle_.id) + " was released already (or moved)");
  caf::actor_system& sys = *std::exchange(sys_, nullptr);  // invariant 1: once, even if it fails
  Status out = Error(ErrorCode::kTimeout, "releasing buffer " + std::to_string(handle_.id) +
                                              ": no answer within " +
                                              std::to_string(timeout_.count()) + " ms");
  caf::scoped_actor self{sys};
  self->request(manager_, timeout_, release_buffer_atom::value, handle_.id)
      .receive([&](uint64_t) { out = Status{}; },
               [&](caf::error& err) {
                 out = to_error(err).with_context("releasing buffer " + std::to_string(handle_.id));
               });
  return out;
}

}  // namespace caf_rdma
