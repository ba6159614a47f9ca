#include "actors/rdma_client.h"

#include <caf/all.hpp>

#include "actors/rdma_errors.h"

namespace caf_rdma {

RdmaClient::RdmaClient(caf::actor_system& sys, rdma_manager_actor manager,
                       std::chrono::milliseconds reply_timeout)
  : sys_(sys), manager_(std::move(manager)), reply_timeout_(reply_timeout),
    self_(std::make_unique<caf::scoped_actor>(sys)) {}

RdmaClient::~RdmaClient() = default;

template <class T, class... Ts>
Result<T> RdmaClient::call(std::chrono::milliseconds timeout, Ts&&... xs) {
  std::optional<Result<T>> out;
  (*self_)->request(manager_, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& value) { out.emplace(std::move(value)); },
               [&](caf::error& err) { out.emplace(to_error(err)); });
  if (!out)
    return Error(ErrorCode::kInternal, "no reply from the manager");
  return std::move(*out);
}

Result<BufferHandle> RdmaClient::request_buffer(const void* addr, uint64_t size,
                                                BufferAccess access) {
  return call<BufferHandle>(reply_timeout_, request_buffer_atom::value,
                            reinterpret_cast<uint64_t>(addr), size, static_cast<uint8_t>(access));
}

Result<uint64_t> RdmaClient::release(uint64_t id) {
  return call<uint64_t>(reply_timeout_, release_buffer_atom::value, id);
}

Result<TransferReply> RdmaClient::transfer(const TransferOp& op, uint32_t timeout_ms) {
  // The manager answers within timeout_ms (plus a flush); wait a little longer than that.
  return call<TransferReply>(std::chrono::milliseconds(timeout_ms) + reply_timeout_,
                             transfer_atom::value, op, timeout_ms);
}

Result<TransferReply> RdmaClient::write(const BufferHandle& local, const BufferHandle& remote,
                                        uint32_t timeout_ms, uint64_t length,
                                        uint64_t local_offset, uint64_t remote_offset) {
  return transfer(make_write(local, remote, length, local_offset, remote_offset), timeout_ms);
}

Result<TransferReply> RdmaClient::read(const BufferHandle& local, const BufferHandle& remote,
                                       uint32_t timeout_ms, uint64_t length,
                                       uint64_t local_offset, uint64_t remote_offset) {
  return transfer(make_read(local, remote, length, local_offset, remote_offset), timeout_ms);
}

Result<std::vector<TransferOutcome>> RdmaClient::batch(const std::vector<TransferOp>& ops,
                                                       uint32_t timeout_ms) {
  return call<std::vector<TransferOutcome>>(std::chrono::milliseconds(timeout_ms) + reply_timeout_,
                                            batch_atom::value, ops, timeout_ms);
}

Result<ManagerStats> RdmaClient::stats() {
  return call<ManagerStats>(reply_timeout_, stats_atom::value);
}

Status RdmaClient::put(const std::string& name, const BufferHandle& handle) {
  auto r = call<bool>(reply_timeout_, dir_put_atom::value, name, handle);
  return r.ok() ? Status{} : Status{r.error()};
}

Result<BufferHandle> RdmaClient::get(const std::string& name, uint32_t wait_ms) {
  return call<BufferHandle>(std::chrono::milliseconds(wait_ms) + reply_timeout_,
                            dir_get_atom::value, name, wait_ms);
}

}  // namespace caf_rdma
