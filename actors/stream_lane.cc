// StreamLane: transfers over the owner's stream channel, authorized by the handle (see
// stream_lane.h).
#include "actors/stream_lane.h"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <chrono>

#include "actors/detail/manager_events.h"
#include "actors/manager/telemetry.h"
#include "actors/op_texts.h"
#include "actors/transfer/path_choice.h"
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

/// Invariant 1's rule for `plan` (its handles and its bytes in all) under a stream lane of
/// `stream_min_bytes`.
bool list_on_stream(const TransferPlan& plan, uint64_t stream_min_bytes) {
  const TransferKind kind = plan.is_read() ? TransferKind::kRead : TransferKind::kWrite;
  return plan.size() > 0 &&
         detail::lane_path(detail::lane_facts(plan.local(), plan.remote(), wire_kind(kind),
                                              /*notify=*/false, plan.bytes(), stream_min_bytes)) ==
             detail::PathKind::kStream;
}

/// "ask its manager": the refusal that sends a client to the manager (invariant 3).
Error ask_the_manager(uint64_t id) {
  return Error(ErrorCode::kNotFound,
               "buffer " + std::to_string(id) + " is not served by handle here: ask its manager");
}

}  // namespace

StreamLane::StreamLane(std::shared_ptr<DirectRegistry> registry,
                       std::shared_ptr<const StreamEndpoints> endpoints,
                       std::shared_ptr<StreamClient> client, caf::actor_addr manager,
                       uint64_t stream_min_bytes)
    : registry_(std::move(registry)),
      endpoints_(std::move(endpoints)),
      client_(std::move(client)),
      manager_(std::move(manager)),
      stream_min_bytes_(stream_min_bytes) {}

void StreamLane::done_with(uint64_t id) {
  tell_idle(registry_->done(id), manager_, id);
}

bool StreamLane::carries(const BufferHandle& local, const BufferHandle& remote, uint8_t kind,
                         bool notify, uint64_t bytes) const {
  return detail::lane_path(detail::lane_facts(local, remote, kind, notify, bytes,
                                              stream_min_bytes_)) == detail::PathKind::kStream;
}

bool StreamLane::may_carry(const TransferPlan& plan) {
  return list_on_stream(plan, 1);  // the lowest threshold a stream lane can have
}

bool StreamLane::carries(const TransferPlan& plan) const {
  return list_on_stream(plan, stream_min_bytes_);
}

std::optional<DirectRegistry::Entry> StreamLane::hold(const BufferHandle& local) {
  auto entry = registry_->acquire_host(local.id);
  if (!entry)
    return std::nullopt;  // unknown here, released or GPU memory: the manager answers
  if (entry->addr != local.addr || entry->size != local.size ||
      !secrets_equal(entry->secret_hi, entry->secret_lo, local.secret_hi, local.secret_lo)) {
    done_with(local.id);
    return std::nullopt;  // stale or forged handle: the manager names it
  }
  return entry;
}

std::optional<Result<TransferReply>> StreamLane::transfer(const TransferOp& op, uint32_t timeout_ms,
                                                          const StopSignal* stop) {
  const auto started = std::chrono::steady_clock::now();
  // Invariant 1 (an op whose range is out of bounds is the lane's to refuse below, in the
  // words of the check both run).
  auto bytes = checked_length(op, op.local.size, static_cast<BufferAccess>(op.local.access));
  if (!carries(op.local, op.remote, op.kind, op.notify, bytes.ok() ? *bytes : UINT64_MAX))
    return std::nullopt;
  auto endpoint = endpoints_->find(op.remote.owner.address());
  if (!endpoint)
    return std::nullopt;  // the manager asks the owner for a grant, which names it
  auto entry = hold(op.local);
  if (!entry)
    return std::nullopt;
  auto length = checked_length(op, entry->size, entry->access);
  if (!length.ok()) {
    done_with(op.local.id);
    record(op, length.error(), 0, started);
    return Result<TransferReply>(length.error());
  }
  StreamJob job =
      job_by_handle(*endpoint, op.remote, op.remote_offset, timeout_ms, priority_of(op));
  job.direction = is_read(op) ? StreamDirection::kOutOfOwner : StreamDirection::kIntoOwner;
  job.addr = reinterpret_cast<uint8_t*>(entry->addr) + op.local_offset;
  job.length = *length;
  job.deadline = started + std::chrono::milliseconds(timeout_ms);
  job.stop = stop;
  StreamEnd end = client_->run_now(job);
  done_with(op.local.id);  // the memory is no longer touched (StreamClient invariant 1)
  // Invariant 3: what the owner did not take (or does not know) is the manager's to move.
  if (end.refused || (!end.status.ok() && end.status.error().code() == ErrorCode::kNotFound))
    return std::nullopt;
  if (end.stopped) {  // invariant 6
    Error e(ErrorCode::kCancelled,
            cancelled_stream_text(op, *length, end.status.error().message()));
    record(op, e, 0, started);
    return Result<TransferReply>(std::move(e));
  }
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

std::optional<ListEnd> StreamLane::post_list(const TransferPlan& plan, size_t from,
                                             std::chrono::steady_clock::time_point deadline,
                                             const StopSignal* stop) {
  const auto started = std::chrono::steady_clock::now();
  if (from >= plan.size() || !carries(plan))
    return std::nullopt;
  auto endpoint = endpoints_->find(plan.remote().owner.address());
  if (!endpoint)
    return std::nullopt;
  // The plan's ranges passed checked_length against the local handle (transfer_plan.h
  // invariant 1), which hold() finds to be the one registered.
  auto entry = hold(plan.local());
  if (!entry)
    return std::nullopt;
  if (entry->access != static_cast<BufferAccess>(plan.local().access)) {
    done_with(plan.local().id);
    return std::nullopt;  // not the access it was checked with: the manager checks each range
  }
  const TransferOp first = plan.op(from);  // names the list's kind and buffers for telemetry
  const std::vector<ListEntry>& all = detail::plan_entries(plan);
  ListEnd end;
  end.done = from;
  uint64_t bytes = 0;
  while (end.done < all.size()) {
    // The next request: up to kMaxListRanges ranges whose bytes fit their span (ranges that
    // overlap at the owner, a read's repeated sources, go in separate requests:
    // stream_protocol.h).
    const ListEntry* part = all.data() + end.done;
    const size_t most = std::min<size_t>(all.size() - end.done, kMaxListRanges);
    uint64_t lo = part[0].offset, hi = part[0].offset + part[0].length, total = part[0].length;
    size_t n = 1;
    for (; n < most; ++n) {
      const uint64_t l = std::min(lo, part[n].offset);
      const uint64_t h = std::max(hi, part[n].offset + part[n].length);
      if (total + part[n].length > h - l)
        break;
      lo = l;
      hi = h;
      total += part[n].length;
    }
    if (stop_requested(stop)) {  // invariant 6: no request starts once asked
      end.error = list_cancelled_error(all.size(), plan.is_read(), plan.remote(), end.done, "");
      break;
    }
    const uint32_t left = list_ms_left(deadline);
    if (left == 0) {
      end.error = list_timeout_error(all.size(), plan.is_read(), plan.remote(), end.done);
      break;
    }
    StreamJob job = job_by_handle(*endpoint, plan.remote(), lo, left, plan.priority());
    job.direction = plan.is_read() ? StreamDirection::kOutOfOwner : StreamDirection::kIntoOwner;
    job.addr = reinterpret_cast<uint8_t*>(entry->addr);
    job.length = hi - lo;
    job.entries = part;
    job.count = static_cast<uint32_t>(n);
    job.total = total;
    job.deadline = deadline;
    job.stop = stop;
    StreamEnd got = client_->run_now(job);
    // Invariant 3: what the owner did not take (or does not know) is the manager's to move.
    if (got.refused || (!got.status.ok() && got.status.error().code() == ErrorCode::kNotFound))
      break;
    if (got.stopped) {  // invariant 6: the requests before it stay landed
      end.error = list_cancelled_error(all.size(), plan.is_read(), plan.remote(), end.done,
                                       got.status.error().message());
      break;
    }
    if (!got.status.ok()) {
      end.error = got.status.error().with_context(
          "ranges " + std::to_string(end.done) + " to " + std::to_string(end.done + n - 1) +
          " of a list of " + std::to_string(all.size()) + " " +
          (plan.is_read() ? "from " : "into ") + describe(plan.remote()));
      break;
    }
    end.done += n;
    bytes += total;
  }
  done_with(plan.local().id);  // the memory is no longer touched (StreamClient invariant 1)
  if (end.done == from && !end.error)
    return std::nullopt;
  record(first, end.error ? Status(*end.error) : Status{}, bytes, started);
  return end;
}

void StreamLane::record(const TransferOp& op, const Status& st, uint64_t bytes,
                        std::chrono::steady_clock::time_point started) {
  registry_->count_stream(st.ok(), bytes);
  OpSample s = sample_of(op);
  s.path = kPathFallback;
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
                        uint64_t remote_offset, uint32_t timeout_ms, Priority priority) {
  StreamJob job;
  job.priority = priority;
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
