// StreamLane: transfers over the owner's stream channel, authorized by the handle (see
// stream_lane.h).
#include "actors/stream_lane.h"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <chrono>

#include "actors/detail/manager_events.h"
#include "actors/manager/telemetry.h"
#include "actors/transfer_checks.h"
#include "components/same_host.h"
#include "components/secure_random.h"

namespace caf_rdma {

namespace {

/// Tells `manager` that a release may go on (LaneIdle), when `last` says this was the last use.
void tell_idle(bool last, const caf::actor_addr& manager, uint64_t id) {
  if (!last)
    return;
  if (auto m = caf::actor_cast<caf::actor>(manager))
    caf::anon_send(m, detail::LaneIdle{id});
}

/// "ask its manager": the refusal that sends a client to the manager (invariant 3).
Error ask_the_manager(uint64_t id) {
  return Error(ErrorCode::kNotFound,
               "buffer " + std::to_string(id) + " is not served by handle here: ask its manager");
}

}  // namespace

StreamLane::StreamLane(std::shared_ptr<DirectRegistry> registry,
                       std::shared_ptr<const StreamEndpoints> endpoints,
                       std::shared_ptr<StreamClient> client, caf::actor_addr manager)
    : registry_(std::move(registry)),
      endpoints_(std::move(endpoints)),
      client_(std::move(client)),
      manager_(std::move(manager)) {}

void StreamLane::done_with(uint64_t id) {
  tell_idle(registry_->done(id), manager_, id);
}

std::optional<Result<TransferReply>> StreamLane::transfer(const TransferOp& op,
                                                          uint32_t timeout_ms) {
  const auto started = std::chrono::steady_clock::now();
  // Invariant 1.
  if ((!is_read(op) && !is_write(op)) || op.notify || op.remote.stream_port == 0 ||
      (op.remote.has_rdma() && op.local.has_rdma()) ||
      op.remote.memory != static_cast<uint8_t>(BufferMemory::kHost) || !op.remote.owner ||
      !op.local.owner || op.remote.owner.node() == op.local.owner.node())
    return std::nullopt;
  auto endpoint = endpoints_->find(op.remote.owner.address());
  if (!endpoint)
    return std::nullopt;  // the manager asks the owner for a grant, which names it
  auto entry = registry_->acquire_host(op.local.id);
  if (!entry)
    return std::nullopt;  // unknown here, released or GPU memory: the manager answers
  if (entry->addr != op.local.addr || entry->size != op.local.size ||
      !secrets_equal(entry->secret_hi, entry->secret_lo, op.local.secret_hi, op.local.secret_lo)) {
    done_with(op.local.id);
    return std::nullopt;  // stale or forged handle: the manager names it
  }
  auto length = checked_length(op, entry->size, entry->access);
  if (!length.ok()) {
    done_with(op.local.id);
    record(op, length.error(), 0, started);
    return Result<TransferReply>(length.error());
  }
  StreamJob job = job_by_handle(*endpoint, op.remote, op.remote_offset, timeout_ms);
  job.direction = is_read(op) ? StreamDirection::kOutOfOwner : StreamDirection::kIntoOwner;
  job.addr = reinterpret_cast<uint8_t*>(entry->addr) + op.local_offset;
  job.length = *length;
  job.deadline = started + std::chrono::milliseconds(timeout_ms);
  StreamEnd end = client_->run_now(job);
  done_with(op.local.id);  // the memory is no longer touched (StreamClient invariant 1)
  // Invariant 3: what the owner did not take (or does not know) is the manager's to move.
  if (end.refused || (!end.status.ok() && end.status.error().code() == ErrorCode::kNotFound))
    return std::nullopt;
  if (!end.status.ok()) {
    Error e = end.status.error().with_context(
        std::string(kind_name(op.kind)) + " of " + std::to_string(*length) + " bytes " +
        (is_read(op) ? "from " : "into ") + describe(op.remote));
    record(op, e, 0, started);
    return Result<TransferReply>(std::move(e));
  }
  record(op, Status{}, *length, started);
  return Result<TransferReply>(TransferReply{*length, kPathFallback});
}

void StreamLane::record(const TransferOp& op, const Status& st, uint64_t bytes,
                        std::chrono::steady_clock::time_point started) {
  registry_->count_stream(st.ok(), bytes);
  OpSample s;
  s.peer = op.remote.owner_name;
  s.path = kPathFallback;
  s.kind = op.kind;
  s.ok = st.ok();
  s.bytes = bytes;
  if (!s.ok) {
    s.code = st.error().code();
    s.message = st.error().message();
  }
  s.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  registry_->record(s);
}

StreamJob job_by_handle(const StreamEndpoint& endpoint, const BufferHandle& remote,
                        uint64_t remote_offset, uint32_t timeout_ms) {
  StreamJob job;
  job.host = endpoint.host;
  job.port = endpoint.port;
  job.unix_name = endpoint.unix_name;
  job.by_handle = true;
  job.handle =
      HandleAccess{remote.id, remote.secret_hi, remote.secret_lo, remote_offset, timeout_ms};
  return job;
}

StreamServer::Authorizer handle_authorizer(std::shared_ptr<DirectRegistry> registry,
                                           caf::actor_addr manager,
                                           std::chrono::milliseconds max_timeout) {
  return [registry = std::move(registry), manager = std::move(manager),
          max_timeout](const StreamRequest& req) -> Result<StreamServer::HandleGrant> {
    const HandleAccess& h = req.handle;
    auto entry = registry->acquire_host(h.id);
    if (!entry)
      return ask_the_manager(h.id);
    const bool write = req.direction == StreamDirection::kIntoOwner;
    // Constant time: a peer learns nothing from how long a wrong secret takes to be refused.
    const bool secret_ok =
        secrets_equal(entry->secret_hi, entry->secret_lo, h.secret_hi, h.secret_lo);
    if (!secret_ok || (write && entry->access != BufferAccess::kReadWrite) || req.length == 0 ||
        h.offset > entry->size || req.length > entry->size - h.offset) {
      tell_idle(registry->done(h.id), manager, h.id);
      return ask_the_manager(h.id);  // the manager's checks word the refusal
    }
    StreamServer::HandleGrant g;
    g.addr = reinterpret_cast<uint8_t*>(entry->addr) + h.offset;
    g.max_timeout = max_timeout;
    g.withdrawal = entry->withdrawal;
    const uint64_t id = h.id;
    g.done = [registry, manager, id](const Status&, uint64_t bytes) {
      registry->count_served(bytes);
      tell_idle(registry->done(id), manager, id);
    };
    return g;
  };
}

}  // namespace caf_rdma
