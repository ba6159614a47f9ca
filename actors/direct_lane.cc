// DirectLane: reads and writes posted and polled by the calling thread on a leased queue pair.
#include "actors/direct_lane.h"

#include <caf/send.hpp>

#include <algorithm>
#include <chrono>

#include "actors/detail/manager_events.h"
#include "actors/op_texts.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer_checks.h"
#include "components/secure_random.h"

namespace caf_rdma {

namespace {

/// A lane's check refused the op before any path: its outcome (no path).
TransferOutcome outcome_of_check(const Error& e) {
  TransferOutcome out;
  out.code = static_cast<uint8_t>(e.code());
  out.message = e.message();
  return out;
}

}  // namespace

DirectLane::DirectLane(uint64_t id, std::shared_ptr<QpEndpoint> qp,
                       std::shared_ptr<DirectRegistry> registry, caf::actor manager,
                       caf::actor owner, std::string owner_name, uint32_t max_timeout_ms)
    : id_(id),
      qp_(std::move(qp)),
      registry_(std::move(registry)),
      manager_(std::move(manager)),
      owner_(std::move(owner)),
      owner_name_(std::move(owner_name)),
      max_timeout_ms_(max_timeout_ms) {}

DirectLane::~DirectLane() {
  qp_.reset();  // our side first: nothing of ours is outstanding on the owner's side then
  if (manager_)
    caf::anon_send(manager_, detail::LaneClosed{id_});
}

void DirectLane::retire() {
  retired_.store(true, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> guard(mu_, std::try_to_lock);
  if (guard.owns_lock())
    qp_.reset();  // no op of the client's running: the queue pair goes now
  // Else the client's call in progress lets go of it as it ends (settle_locked).
}

class DirectLane::Use {
public:
  /// Takes the lane if no other thread's op runs on it (invariant 4): see owns().
  explicit Use(const DirectLane& lane) : lane_(lane), guard_(lane.mu_, std::try_to_lock) {
    if (guard_.owns_lock())
      lane_.settle_locked();  // retired just before: run nothing on the aborted queue pair
  }
  bool owns() const { return guard_.owns_lock(); }
  ~Use() {
    if (!guard_.owns_lock())
      return;
    lane_.settle_locked();
    if (lane_.qp_ && lane_.qp_->needs_recovery())
      lane_.failed_.store(true, std::memory_order_release);  // seen by broken() while in use
    guard_.unlock();
    // `retire` may have found mu_ held after settle_locked looked: look again (retire sets
    // retired_ before it tries the lock, so one of the two sees the other).
    if (lane_.retired_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> again(lane_.mu_);
      lane_.settle_locked();
    }
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;

private:
  const DirectLane& lane_;
  std::unique_lock<std::mutex> guard_;
};

bool DirectLane::broken() const {
  // Never waits on another thread's op (invariant 4): a lane in use is broken if it was retired
  // or an op found its queue pair failed (failed_, set as that op ended).
  Use use(*this);
  if (!use.owns())
    return retired_.load(std::memory_order_seq_cst) || failed_.load(std::memory_order_acquire);
  return !qp_ || qp_->needs_recovery();
}

void DirectLane::settle_locked() const {
  if (qp_ && retired_.load(std::memory_order_acquire))
    qp_.reset();
}

bool DirectLane::takes(const TransferOp& op) {
  return detail::lane_path(detail::lane_facts(op.local, op.remote, op.kind, op.notify, 0, 0)) ==
         detail::PathKind::kRdma;
}

bool DirectLane::manager_stripes(const TransferOp& op, uint64_t stripe_min_bytes,
                                 bool stripes_one_device) {
  // An explicit length is what the op moves (the lane checks it); a whole span's is worked out.
  auto n = op.length != kWholeSpan
               ? Result<uint64_t>(op.length)
               : checked_length(op, op.local.size, static_cast<BufferAccess>(op.local.access));
  return n.ok() &&
         detail::striped(detail::StripeFacts{
             *n, stripe_min_bytes, op.notify, op.local.owner.node() == op.remote.owner.node(),
             detail::shared_rails(op.local.rails.size(), op.remote.rails.size()),
             stripes_one_device, priority_of(op) == Priority::kBulk});
}

std::optional<Result<DirectLane::Prepared>> DirectLane::prepare(const TransferOp& op) {
  if (!qp_)
    return std::nullopt;  // retired: the manager answers
  // A local buffer's handle names this node's facade (the manager's published stand-in).
  // A direct lane's op (takes; RdmaClient never sends it others), this node's buffer, to this
  // lane's owner.
  if (!takes(op) || op.local.owner.node() != manager_.node() ||
      op.remote.owner.address() != owner_.address())
    return std::nullopt;
  if (op.remote.incarnation != 0 && op.remote.incarnation != qp_->remote_incarnation())
    return std::nullopt;  // a handle from before its owner's device came back: the manager
  auto entry = registry_->acquire(op.local.id);
  if (!entry)
    return std::nullopt;  // unknown, released or not NIC-registered: the manager answers
  if (entry->rdma.addr() != op.local.addr || entry->size != op.local.size ||
      !secrets_equal(entry->secret_hi, entry->secret_lo, op.local.secret_hi, op.local.secret_lo)) {
    if (registry_->done(op.local.id))  // a release may be waiting for this last use
      caf::anon_send(manager_, detail::LaneIdle{op.local.id});
    return std::nullopt;  // stale or forged handle: the manager names it
  }
  auto length = checked_length(op, entry->size, entry->access);
  if (!length.ok()) {
    if (registry_->done(op.local.id))
      caf::anon_send(manager_, detail::LaneIdle{op.local.id});
    return Result<Prepared>(length.error());
  }
  if (op.remote.owner.node() == manager_.node() &&
      ranges_overlap(entry->rdma.addr() + op.local_offset, op.remote.addr + op.remote_offset,
                     *length)) {
    if (registry_->done(op.local.id))
      caf::anon_send(manager_, detail::LaneIdle{op.local.id});
    return std::nullopt;  // overlapping ranges of this node: the manager copies them
  }
  RemoteBuffer remote{op.remote.addr, op.remote.size, op.remote.rkey, op.remote.device,
                      op.remote.incarnation};
  LocalSlice slice{std::move(entry->rdma), op.local_offset, *length};
  Prepared p;
  p.op = is_read(op) ? RdmaOp::read(std::move(slice), std::move(remote), op.remote_offset)
                     : RdmaOp::write(std::move(slice), std::move(remote), op.remote_offset);
  p.local_id = op.local.id;
  p.length = *length;
  return Result<Prepared>(std::move(p));
}

void DirectLane::record(const TransferOp& op, const TransferOutcome& out,
                        std::chrono::steady_clock::time_point started) const {
  OpSample s = sample_of(op);
  s.peer = owner_name_;
  s.path = out.path;
  s.ok = out.ok();
  s.bytes = out.bytes;
  s.code = static_cast<ErrorCode>(out.code);
  s.message = out.message;
  s.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - started);
  registry_->record(s);
}

TransferOutcome DirectLane::finish(const TransferOp& op, const Prepared& p, const OpResult& r,
                                   uint32_t timeout_ms,
                                   std::chrono::steady_clock::time_point started) {
  // The op is over (completed, or flushed after a timeout): the buffer may be released now.
  if (registry_->done(p.local_id))
    caf::anon_send(manager_, detail::LaneIdle{p.local_id});
  registry_->count(r.status.ok(), p.length);
  TransferOutcome out;
  out.path = kPathRdma;
  if (r.status.ok()) {
    out.bytes = p.length;
  } else {
    const Error& e = r.status.error();
    out.code = static_cast<uint8_t>(e.code());
    out.message = e.code() == ErrorCode::kTimeout ? timeout_message(op, p.length, timeout_ms)
                  : e.code() == ErrorCode::kCancelled
                      ? (qp_->needs_recovery() ? cancelled_flushed_text(op, p.length)
                                               : cancelled_unstarted_text(op, false))
                      : e.message();
  }
  record(op, out, started);
  return out;
}

std::optional<Result<TransferReply>> DirectLane::transfer(const TransferOp& op, uint32_t timeout_ms,
                                                          OpFault* fault,
                                                          const std::atomic<bool>* stop) {
  if (timeout_ms == 0)
    return std::nullopt;  // the manager's error
  timeout_ms = std::min(timeout_ms, max_timeout_ms_);
  const auto started = std::chrono::steady_clock::now();
  Use use(*this);
  if (!use.owns())
    return std::nullopt;  // another thread's op runs on it: the next way takes this one
  auto prepared = prepare(op);
  if (!prepared)
    return std::nullopt;
  if (!prepared->ok()) {
    record(op, outcome_of_check(prepared->error()), started);
    return Result<TransferReply>(prepared->error());
  }
  Prepared& p = **prepared;
  // The queue pair's copy of the op holds the local buffer until the op is over.
  OpResult r = qp_->execute_or_stop(std::move(p.op), std::chrono::milliseconds(timeout_ms), stop);
  if (fault != nullptr)
    *fault = r.fault;
  TransferOutcome out = finish(op, p, r, timeout_ms, started);
  if (!out.ok())
    return Result<TransferReply>(out.status().error());
  return Result<TransferReply>(TransferReply{out.bytes, out.path});
}

TransferOp DirectLane::list_probe(const TransferPlan& plan, size_t from) {
  TransferOp probe = plan.op(from);
  probe.length = detail::plan_batch_bytes(plan);
  return probe;
}

std::optional<ListEnd> DirectLane::post_list(const TransferPlan& plan, size_t from,
                                             uint32_t timeout_ms, bool verify,
                                             const std::atomic<bool>* stop) {
  if (timeout_ms == 0 || from >= plan.size() || verify)
    return std::nullopt;
  timeout_ms = std::min(timeout_ms, max_timeout_ms_);
  const auto started = std::chrono::steady_clock::now();
  Use use(*this);
  if (!use.owns())
    return std::nullopt;  // another thread's op runs on it: the next way takes the list
  const TransferOp probe = plan.op(from);
  if (probe.remote.owner.node() == manager_.node())
    return std::nullopt;  // buffers of one node: the manager's copies (and its overlap rule)
  // Invariant 6: the buffers checked and the local one held once, by the list's first range.
  auto prepared = prepare(probe);
  if (!prepared || !prepared->ok())
    return std::nullopt;  // not the lane's, or a check failed: the single ops' way names it
  Prepared& p = **prepared;
  const size_t count = plan.size() - from;
  OpResult r =
      qp_->execute_or_stop(RdmaOp::list_of(plan.is_read(), p.op.local[0].buffer, p.op.remote,
                                           OpList::of(detail::plan_table(plan), from, count)),
                           std::chrono::milliseconds(timeout_ms), stop);
  const size_t landed = std::min<size_t>(r.list_landed, count);
  uint64_t bytes = 0;
  for (size_t i = from; i < from + landed; ++i)
    bytes += detail::plan_entries(plan)[i].length;
  if (registry_->done(p.local_id))  // the list is over: the buffer may be released now
    caf::anon_send(manager_, detail::LaneIdle{p.local_id});
  // Every range landed (its completions came after the deadline's flush began): a list that
  // moved, counted and recorded as such, whatever the queue pair said of the flush.
  const bool moved = r.status.ok() || landed == count;
  registry_->count(moved, bytes);
  TransferOutcome out;
  out.path = kPathRdma;
  out.bytes = bytes;
  if (!moved) {
    out.code = static_cast<uint8_t>(r.status.error().code());
    out.message = r.status.error().message();
  }
  record(probe, out, started);
  // Invariant 7: a stopped list ends here; any other failure leaves the rest to single ops.
  if (!moved && r.status.error().code() == ErrorCode::kCancelled)
    return ListEnd{from + landed, r.status.error()};
  return ListEnd{from + landed, std::nullopt};
}

std::optional<std::vector<TransferOutcome>> DirectLane::batch(const std::vector<TransferOp>& ops,
                                                              uint32_t timeout_ms,
                                                              std::vector<OpFault>* faults) {
  if (timeout_ms == 0 || ops.empty())
    return std::nullopt;
  timeout_ms = std::min(timeout_ms, max_timeout_ms_);
  const auto started = std::chrono::steady_clock::now();
  Use use(*this);
  if (!use.owns())
    return std::nullopt;  // another thread's op runs on it: the manager takes the batch
  std::vector<std::optional<Result<Prepared>>> prepared;
  prepared.reserve(ops.size());
  for (const auto& op : ops) {
    prepared.push_back(prepare(op));
    if (prepared.back())
      continue;
    // Not all ours: undo what was acquired; the manager runs the whole batch.
    prepared.pop_back();
    for (size_t i = 0; i < prepared.size(); ++i)
      if (prepared[i]->ok() && registry_->done((*prepared[i])->local_id))
        caf::anon_send(manager_, detail::LaneIdle{(*prepared[i])->local_id});
    return std::nullopt;
  }
  std::vector<TransferOutcome> outcomes(ops.size());
  if (faults != nullptr)
    faults->assign(ops.size(), OpFault::kNone);
  std::vector<RdmaOp> posted;
  std::vector<size_t> index;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!prepared[i]->ok()) {
      outcomes[i] = outcome_of_check(prepared[i]->error());
      record(ops[i], outcomes[i], started);
      continue;
    }
    posted.push_back(std::move((*prepared[i])->op));
    index.push_back(i);
  }
  if (!posted.empty()) {
    auto results = qp_->execute_batch(std::move(posted), std::chrono::milliseconds(timeout_ms));
    for (size_t k = 0; k < index.size(); ++k) {
      outcomes[index[k]] =
          finish(ops[index[k]], **prepared[index[k]], results[k], timeout_ms, started);
      if (faults != nullptr)
        (*faults)[index[k]] = results[k].fault;
    }
  }
  return outcomes;
}

}  // namespace caf_rdma
