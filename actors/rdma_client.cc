#include "actors/rdma_client.h"

#include <caf/all.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "actors/detail/async_request.h"
#include "actors/detail/client_call.h"
#include "actors/detail/node_objects.h"
#include "actors/direct_lane.h"
#include "actors/op_texts.h"
#include "actors/rdma_errors.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer_checks.h"
#include "components/stop_signal.h"

namespace caf_rdma {

namespace {

bool direct_from_env() {
  const char* v = std::getenv(kEnvDirect);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

RdmaClient::RdmaClient(caf::actor_system& sys, rdma_manager_actor manager,
                       std::chrono::milliseconds reply_timeout)
    : RdmaClient(sys, std::move(manager), direct_from_env(), reply_timeout) {}

RdmaClient::RdmaClient(caf::actor_system& sys, rdma_manager_actor manager, bool direct,
                       std::chrono::milliseconds reply_timeout)
    : sys_(sys),
      listed_(detail::node_object_added(sys, "RdmaClient")),
      manager_(std::move(manager)),
      reply_timeout_(reply_timeout),
      self_(std::make_unique<caf::scoped_actor>(sys)),
      // A lane is memory of this process: only this process's manager can hand one out.
      direct_(direct && manager_ && manager_.node() == sys.node()),
      busy_poll_(caf::get_or(sys.config(), kBusyPollSetting, size_t{0})) {}

RdmaClient::~RdmaClient() {
  detail::node_object_removed(sys_, listed_);
}

Status RdmaClient::node_alive() const {
  return detail::node_alive(sys_, "RdmaClient");
}

bool RdmaClient::spin_for_reply(caf::scoped_actor& self) {
  if (busy_poll_.count() == 0)
    return false;
  const auto until = std::chrono::steady_clock::now() + busy_poll_;
  auto& mailbox = self->mailbox();
  while (mailbox.empty() && std::chrono::steady_clock::now() < until) {
  }
  return !mailbox.empty();
}

Result<BufferHandle> RdmaClient::request_buffer(const void* addr, uint64_t size,
                                                BufferAccess access) {
  return call<BufferHandle>(reply_timeout_, request_buffer_atom::value,
                            reinterpret_cast<uint64_t>(addr), size, static_cast<uint8_t>(access));
}

Result<RegisteredBuffer> RdmaClient::register_buffer(const void* addr, uint64_t size,
                                                     BufferAccess access) {
  return RegisteredBuffer::make(sys_, manager_, addr, size, access, reply_timeout_);
}

Result<RegisteredBuffer> RdmaClient::allocate_buffer(uint64_t size, BufferAccess access) {
  return RegisteredBuffer::allocate(sys_, manager_, size, access, reply_timeout_);
}

Result<uint64_t> RdmaClient::release(uint64_t id) {
  return call<uint64_t>(reply_timeout_, release_buffer_atom::value, id);
}

Result<TransferReply> RdmaClient::transfer(const TransferOp& op, uint32_t timeout_ms) {
  return transfer_until(op, timeout_ms, nullptr);
}

Result<TransferReply> RdmaClient::transfer_cancellable(const TransferOp& op, uint32_t timeout_ms,
                                                       const CancelToken& cancel) {
  CancelToken::Use use(cancel);
  if (use.refused() != nullptr)
    return *use.refused();
  Result<TransferReply> r =
      use.stopped()  // CancelToken invariant 3
          ? Result<TransferReply>(Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, true)))
          : transfer_until(op, timeout_ms, use.signal());
  use.end(r.ok() ? Status() : Status(r.error()), 0, r.ok() ? r->bytes : 0);
  return r;
}

Result<TransferReply> RdmaClient::transfer_until(const TransferOp& op, uint32_t timeout_ms,
                                                 const StopSignal* stop) {
  if (Status alive = node_alive(); !alive.ok())  // no lane either: its queue pairs are gone
    return alive.error();
  // CancelToken invariants 3 and 4: stopped before a way starts, nothing moved.
  if (stop_requested(stop))
    return Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, true));
  std::optional<Error> failed;
  if (auto r = lane_transfer(op, timeout_ms, &failed, stop))
    return std::move(*r);
  if (failed)
    return *failed;
  // The lane declined it (before moving a byte, or after a first try flushed by another op's
  // error): the next way does not start.
  if (stop_requested(stop))
    return Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, false));
  // Declined by the lane: the manager has the whole timeout (its errors name it). A lane that
  // declines only after its owner closed two connections may so take longer than the timeout.
  if (auto r = stream_transfer(op, timeout_ms, stop))
    return std::move(*r);
  if (stop_requested(stop))  // the stream lane declined it, before the owner took it
    return Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, false));
  // The manager answers within timeout_ms (plus a flush, or kNoticeGrace for a notice on its
  // way); wait a little longer than that.
  return call_until<TransferReply>(reply_wait(timeout_ms, op.notify), stop, transfer_atom::value,
                                   op, timeout_ms);
}

std::future<Result<TransferReply>> RdmaClient::transfer_async(TransferOp op,
                                                              std::chrono::milliseconds timeout) {
  return transfer_async_until(std::move(op), timeout, nullptr);
}

std::future<Result<TransferReply>> RdmaClient::transfer_async(TransferOp op,
                                                              std::chrono::milliseconds timeout,
                                                              const CancelToken& cancel) {
  return transfer_async_until(std::move(op), timeout, std::make_shared<CancelToken::Use>(cancel));
}

std::future<Result<TransferReply>> RdmaClient::transfer_async_until(
    TransferOp op, std::chrono::milliseconds timeout,
    const std::shared_ptr<CancelToken::Use>& use) {
  // Every answer passes here once: the token's use ends with it (CancelToken invariant 2).
  auto ended = [use](Result<TransferReply> r) {
    if (use)
      use->end(r.ok() ? Status() : Status(r.error()), 0, r.ok() ? r->bytes : 0);
    return r;
  };
  using detail::ready_future;
  if (use && use->refused() != nullptr)  // CancelToken invariant 1: another transfer's token
    return ready_future(Result<TransferReply>(*use->refused()));
  if (use && use->stopped())  // CancelToken invariant 3
    return ready_future(ended(Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, true))));
  if (Status alive = node_alive(); !alive.ok())
    return ready_future(ended(alive.error()));
  const uint32_t ms = timeout_ms_of(timeout);
  const auto wait = reply_wait(ms, op.notify);  // before `op` is moved into the request
  return detail::async_request_until<TransferReply>(sys_, manager_, wait, "transfer",
                                                    use ? use->signal() : nullptr, ended,
                                                    transfer_atom::value, std::move(op), ms);
}

Result<uint64_t> RdmaClient::fetch_add(const BufferHandle& remote, uint64_t offset, uint64_t add,
                                       std::chrono::milliseconds timeout, std::string* path) {
  return run_atomic(make_fetch_add(BufferHandle{}, remote, offset, add), timeout, path);
}

Result<uint64_t> RdmaClient::compare_swap(const BufferHandle& remote, uint64_t offset,
                                          uint64_t expected, uint64_t desired,
                                          std::chrono::milliseconds timeout, std::string* path) {
  return run_atomic(make_compare_swap(BufferHandle{}, remote, offset, expected, desired), timeout,
                    path);
}

Result<uint64_t> RdmaClient::run_atomic(TransferOp op, std::chrono::milliseconds timeout,
                                        std::string* path) {
  // One word receives the old value: one atomic of this client's at a time owns it.
  std::lock_guard<std::mutex> guard(atomic_mu_);
  if (!atomic_registration_) {
    auto reg = register_buffer(atomic_word_.get(), kAtomicBytes);
    if (!reg.ok())
      return Result<uint64_t>(
          reg.error().with_context("registering the client's 8-byte word for atomics"));
    atomic_registration_.emplace(std::move(*reg));
  }
  op.local = atomic_registration_->handle();
  auto reply = transfer(op, timeout_ms_of(timeout));  // never a lane (lane_for)
  if (!reply.ok())
    return Result<uint64_t>(reply.error());
  if (path != nullptr)
    *path = reply->path;
  // Written by the manager (or its completion thread) before its reply: ordered by the reply.
  uint64_t old = 0;
  std::memcpy(&old, atomic_word_.get(), kAtomicBytes);
  return old;
}

std::future<Result<TransferReply>> RdmaClient::write_async(const BufferHandle& local,
                                                           const BufferHandle& remote, Range range,
                                                           std::chrono::milliseconds timeout) {
  return transfer_async(make_write(local, remote, range), timeout);
}

std::future<Result<TransferReply>> RdmaClient::read_async(const BufferHandle& local,
                                                          const BufferHandle& remote, Range range,
                                                          std::chrono::milliseconds timeout) {
  return transfer_async(make_read(local, remote, range), timeout);
}

std::future<Result<TransferReply>> RdmaClient::write_async(const BufferHandle& local,
                                                           const BufferHandle& remote, Range range,
                                                           std::chrono::milliseconds timeout,
                                                           const CancelToken& cancel) {
  return transfer_async(make_write(local, remote, range), timeout, cancel);
}

std::future<Result<TransferReply>> RdmaClient::read_async(const BufferHandle& local,
                                                          const BufferHandle& remote, Range range,
                                                          std::chrono::milliseconds timeout,
                                                          const CancelToken& cancel) {
  return transfer_async(make_read(local, remote, range), timeout, cancel);
}

Result<TransferReply> RdmaClient::write(const BufferHandle& local, const BufferHandle& remote,
                                        Range range, std::chrono::milliseconds timeout) {
  return transfer_scratch(TransferKind::kWrite, local, remote, timeout_ms_of(timeout), range);
}

Result<TransferReply> RdmaClient::read(const BufferHandle& local, const BufferHandle& remote,
                                       Range range, std::chrono::milliseconds timeout) {
  return transfer_scratch(TransferKind::kRead, local, remote, timeout_ms_of(timeout), range);
}

Result<TransferReply> RdmaClient::read(const BufferHandle& local, const BufferHandle& remote,
                                       Range range, std::chrono::milliseconds timeout,
                                       const CancelToken& cancel) {
  return transfer_cancellable(make_read(local, remote, range), timeout_ms_of(timeout), cancel);
}

Result<TransferReply> RdmaClient::write(const BufferHandle& local, const BufferHandle& remote,
                                        Range range, std::chrono::milliseconds timeout,
                                        const CancelToken& cancel) {
  return transfer_cancellable(make_write(local, remote, range), timeout_ms_of(timeout), cancel);
}

Result<TransferReply> RdmaClient::write(const BufferHandle& local, const BufferHandle& remote,
                                        uint32_t timeout_ms, uint64_t length, uint64_t local_offset,
                                        uint64_t remote_offset) {
  return transfer_scratch(TransferKind::kWrite, local, remote, timeout_ms,
                          Range::of(length).at_local(local_offset).at_remote(remote_offset));
}

Result<TransferReply> RdmaClient::read(const BufferHandle& local, const BufferHandle& remote,
                                       uint32_t timeout_ms, uint64_t length, uint64_t local_offset,
                                       uint64_t remote_offset) {
  return transfer_scratch(TransferKind::kRead, local, remote, timeout_ms,
                          Range::of(length).at_local(local_offset).at_remote(remote_offset));
}

Result<TransferReply> RdmaClient::transfer_scratch(TransferKind kind, const BufferHandle& local,
                                                   const BufferHandle& remote, uint32_t timeout_ms,
                                                   Range range) {
  // Assigning into a reused op (leased from the pool) keeps the handles' strings and GID
  // vectors allocated: the latency path makes no copies of its own.
  detail::Lease<TransferOp> lease(pool_mu_, idle_ops_,
                                  [] { return std::make_unique<TransferOp>(); });
  TransferOp& scratch = *lease;
  scratch.kind = wire_kind(kind);
  scratch.local = local;
  scratch.local_offset = range.local_offset;
  scratch.remote = remote;
  scratch.remote_offset = range.remote_offset;
  scratch.length = range.length;
  scratch.priority = static_cast<uint8_t>(range.priority);
  auto result = transfer(scratch, timeout_ms);
  scratch.local.owner = nullptr;  // hold no reference to either manager between calls
  scratch.remote.owner = nullptr;
  return result;
}

Result<std::vector<TransferOutcome>> RdmaClient::batch(const std::vector<TransferOp>& ops,
                                                       uint32_t timeout_ms) {
  return batch_until(ops, timeout_ms, nullptr);
}

Result<std::vector<TransferOutcome>> RdmaClient::batch_until(const std::vector<TransferOp>& ops,
                                                             uint32_t timeout_ms,
                                                             const StopSignal* stop) {
  if (Status alive = node_alive(); !alive.ok())
    return alive.error();
  // One owner for all ops: one lane runs them as one chain. Atomics and notify writes go
  // through the manager (lanes carry plain reads and writes), and so does a batch with any, or
  // with an op the manager would stripe (lane_for checks every op).
  bool one_owner = !ops.empty() && std::all_of(ops.begin(), ops.end(), [&](const TransferOp& op) {
    return op.remote.owner.address() == ops.front().remote.owner.address();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::optional<Error> failed;
  bool verify = false;
  std::shared_ptr<DirectLane> lane =
      one_owner ? lane_for(ops.data(), ops.size(), timeout_ms, &failed, &verify) : nullptr;
  if (failed)
    return *failed;
  if (lane) {
    std::vector<OpFault> faults;
    if (auto outcomes = lane->batch(ops, timeout_ms, &faults)) {
      for (size_t i = 0; i < outcomes->size(); ++i) {
        TransferOutcome& o = (*outcomes)[i];
        if (o.ok()) {
          if (verify)
            if (Status st = verify_lane_op(ops[i], o.bytes); !st.ok()) {
              o = TransferOutcome{};
              o.code = static_cast<uint8_t>(st.error().code());
              o.message = st.error().message();
              o.path = kPathRdma;
            }
          continue;
        }
        if (o.code == static_cast<uint8_t>(ErrorCode::kTimeout))
          continue;  // the batch's time is up: no second run, no question to the owner per op
        if (faults[i] == OpFault::kFlushed) {
          // Another op of the batch took the queue pair down: this one runs once more alone
          // (on a new lane, or through the manager), within what is left of the batch's time.
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - std::chrono::steady_clock::now());
          if (left.count() <= 0) {
            o.code = static_cast<uint8_t>(ErrorCode::kTimeout);
            o.message = not_within_text(
                ops[i], timeout_ms,
                " (flushed by another op's error, no time left to run it again: " + o.message +
                    ")");
            continue;
          }
          auto again = transfer(ops[i], static_cast<uint32_t>(left.count()));
          if (again.ok()) {
            o = TransferOutcome{};
            o.bytes = again->bytes;
            o.path = again->path;
            continue;
          }
          o.code = static_cast<uint8_t>(again.error().code());
          o.message = again.error().message();
          continue;
        }
        Error e = lane_error(ops[i], o.status().error(), faults[i], deadline, timeout_ms);
        o.code = static_cast<uint8_t>(e.code());
        o.message = e.message();
      }
      return std::move(*outcomes);
    }
  }
  const bool notices =
      std::any_of(ops.begin(), ops.end(), [](const TransferOp& o) { return o.notify; });
  return call_until<std::vector<TransferOutcome>>(reply_wait(timeout_ms, notices), stop,
                                                  batch_atom::value, ops, timeout_ms);
}

Result<ManagerStats> RdmaClient::stats() {
  return call<ManagerStats>(reply_timeout_, stats_atom::value);
}

Result<TransferReply> RdmaClient::write_notify(const BufferHandle& local,
                                               const BufferHandle& remote, uint64_t tag,
                                               Range range, std::chrono::milliseconds timeout) {
  return transfer(make_notify_write(local, remote, tag, range), timeout_ms_of(timeout));
}

Status RdmaClient::watch_writes(uint64_t id, const caf::actor& watcher) {
  auto r = call<bool>(reply_timeout_, watch_writes_atom::value, id, watcher);
  return r.ok() ? Status{} : Status{r.error()};
}

Status RdmaClient::watch_writes(uint64_t id) {
  return watch_writes(id, caf::actor_cast<caf::actor>(*self_));
}

Result<WriteNotice> RdmaClient::next_notice(std::chrono::milliseconds timeout) {
  std::optional<WriteNotice> got;
  if (Status alive = node_alive(); !alive.ok())
    return alive.error();
  std::lock_guard<std::mutex> guard(notice_mu_);  // one receiver on self_ at a time
  // The handler returns nothing: CAF answers the owner's request with an empty message, which
  // tells it the notice was taken.
  (*self_)->receive([&](write_notice_atom, WriteNotice& n) { got = std::move(n); },
                    caf::after(timeout) >> [] {});
  if (!got)
    return Error(ErrorCode::kTimeout,
                 "no write notice came within " + std::to_string(timeout.count()) + " ms");
  return std::move(*got);
}

Status RdmaClient::put(const std::string& name, const BufferHandle& handle) {
  auto r = call<bool>(reply_timeout_, dir_put_atom::value, name, handle);
  return r.ok() ? Status{} : Status{r.error()};
}

Result<BufferHandle> RdmaClient::get(const std::string& name, uint32_t wait_ms) {
  return call<BufferHandle>(reply_wait(wait_ms), dir_get_atom::value, name, wait_ms);
}

}  // namespace caf_rdma
