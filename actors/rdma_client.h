// RdmaClient: a blocking front end to a manager for code that is not an actor (main(), tests,
// command-line tools). Every call waits for the reply with a timeout; errors come back as
// `Error` (code + message from the manager). Never use it inside an actor's handler.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/rdma_manager_interface.h"
#include "primitives/status.h"

namespace caf_rdma {

class RdmaClient {
public:
  /// Talks to `manager` (this node's, or a remote proxy for directory calls) from `sys`.
  RdmaClient(caf::actor_system& sys, rdma_manager_actor manager,
             std::chrono::milliseconds reply_timeout = std::chrono::seconds(60));
  ~RdmaClient();

  const rdma_manager_actor& manager() const { return manager_; }

  Result<BufferHandle> request_buffer(const void* addr, uint64_t size,
                                      BufferAccess access = BufferAccess::kReadWrite);
  Result<uint64_t> release(uint64_t id);
  Result<TransferReply> transfer(const TransferOp& op, uint32_t timeout_ms);
  Result<TransferReply> write(const BufferHandle& local, const BufferHandle& remote,
                              uint32_t timeout_ms, uint64_t length = kWholeSpan,
                              uint64_t local_offset = 0, uint64_t remote_offset = 0);
  Result<TransferReply> read(const BufferHandle& local, const BufferHandle& remote,
                             uint32_t timeout_ms, uint64_t length = kWholeSpan,
                             uint64_t local_offset = 0, uint64_t remote_offset = 0);
  Result<std::vector<TransferOutcome>> batch(const std::vector<TransferOp>& ops,
                                             uint32_t timeout_ms);
  Result<ManagerStats> stats();
  Status put(const std::string& name, const BufferHandle& handle);
  Result<BufferHandle> get(const std::string& name, uint32_t wait_ms);

private:
  template <class T, class... Ts>
  Result<T> call(std::chrono::milliseconds timeout, Ts&&... xs);

  caf::actor_system& sys_;
  rdma_manager_actor manager_;
  std::chrono::milliseconds reply_timeout_;
  std::unique_ptr<caf::scoped_actor> self_;
};

}  // namespace caf_rdma
