// RdmaClient's lanes (see rdma_client.h): the direct lanes to owners over queue pairs of the
// client's own, with the manager's rules for a failed op (lane_error), and the stream lane.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "actors/detail/client_call.h"
#include "actors/direct_lane.h"
#include "actors/op_texts.h"
#include "actors/rdma_client.h"
#include "actors/stream_lane.h"
#include "actors/transfer/owner_verdict.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer_checks.h"
#include "components/checksum.h"
#include "components/stop_signal.h"

namespace caf_rdma {

namespace {

/// Extra time a request to the manager gets beyond the transfer's own timeout.
constexpr std::chrono::seconds kLaneBackstop{1};

}  // namespace

size_t RdmaClient::lanes() const {
  std::lock_guard<std::mutex> guard(lanes_mu_);
  size_t n = 0;
  for (const auto& [owner, slot] : lanes_)
    n += slot.lane ? 1 : 0;
  return n;
}

std::shared_ptr<DirectLane> RdmaClient::lane_for(const TransferOp* ops, size_t count,
                                                 uint32_t timeout_ms, std::optional<Error>* failed,
                                                 bool* verify) {
  auto ours = [this](const TransferOp& o) {
    return o.local.owner && o.local.owner.node() == manager_.node() &&  // the node's facade
           DirectLane::takes(o);
  };
  if (!direct_ || timeout_ms == 0 || count == 0 || !std::all_of(ops, ops + count, ours))
    return nullptr;
  const TransferOp& op = ops[0];  // all of one owner (batch checks it)
  // Ops the manager would stripe (path_choice.h invariant 7) go to the manager: a batch with
  // any, as the manager decides for each op of a batch, or one whose ops it would stripe by
  // what they move together.
  auto striped = [ops, count](const LaneSlot& s) {
    TransferOp together = ops[0];  // bulk, no notify: as the manager counts (counts_together)
    together.length = 0;
    together.notify = false;
    together.priority = static_cast<uint8_t>(Priority::kBulk);
    for (size_t i = 0; i < count; ++i) {
      if (DirectLane::manager_stripes(ops[i], s.stripe_min_bytes, s.stripes_one_device))
        return true;
      if (detail::counts_together(ops[i]))
        together.length += ops[i].length;
    }
    return count > 1 && together.length > 0 &&
           DirectLane::manager_stripes(together, s.stripe_min_bytes, s.stripes_one_device);
  };
  const LaneKey owner = lane_key(op);
  auto now = std::chrono::steady_clock::now();
  std::shared_ptr<DirectLane> broken;  // dropped outside the lock (its destructor sends)
  {
    std::lock_guard<std::mutex> guard(lanes_mu_);
    LaneSlot& slot = lanes_[owner];
    if (slot.lane && slot.lane->broken())
      broken = std::move(slot.lane);  // its destructor has the manager close the owner's side
    if (slot.lane) {
      if (verify != nullptr)
        *verify = slot.verify;
      return striped(slot) ? nullptr : slot.lane;
    }
    if (now < slot.retry_after)
      return nullptr;
  }
  // A broken lane is closed before the new one is asked for (the owner counts its lanes).
  broken.reset();
  // Asked without the lock: another thread may open a lane to the same owner meanwhile; the
  // first one kept wins, the other goes (its destructor closes it).
  auto grant = call<LaneGrant>(std::chrono::milliseconds(timeout_ms) + kLaneBackstop,
                               lane_open_atom::value, op.remote, timeout_ms, op.priority);
  std::lock_guard<std::mutex> guard(lanes_mu_);
  LaneSlot& slot = lanes_[owner];
  if (grant.ok() && grant->lane) {
    if (!slot.lane || slot.lane->broken()) {
      slot.lane = grant->lane;
      slot.verify = grant->verify;
      slot.stripe_min_bytes = grant->stripe_min_bytes;
      slot.stripes_one_device = grant->stripes_one_device;
      slot.open_timeouts = 0;
    }
    if (verify != nullptr)
      *verify = slot.verify;
    return striped(slot) ? nullptr : slot.lane;
  }
  Error e = grant.ok() ? Error(ErrorCode::kInternal, "empty lane grant") : grant.error();
  if (e.code() == ErrorCode::kTimeout) {
    // Timeouts shorter than a lane handshake would fail every call that tries one: the next
    // calls go through the manager for a while (backing off), whose handshake outlives them.
    slot.retry_after = std::chrono::steady_clock::now() +
                       std::chrono::seconds(1u << std::min(slot.open_timeouts, 6u));
    ++slot.open_timeouts;
    // The owner did not answer the handshake in time: the transfer's time is up.
    *failed = Error(ErrorCode::kTimeout, not_within_text(op, timeout_ms, ": " + e.message()));
    return nullptr;
  }
  // No lane there (no device, which may come back, or fallback, other fabric; else try again
  // soon): the manager moves these bytes, or names what is wrong.
  slot.retry_after =
      now + (e.code() == ErrorCode::kNoDevice ? std::chrono::seconds(5) : std::chrono::seconds(1));
  return nullptr;
}

std::optional<ListEnd> RdmaClient::rdma_list(const TransferPlan& plan, size_t from,
                                             std::chrono::steady_clock::time_point deadline,
                                             const StopSignal* stop) {
  const uint32_t left = list_ms_left(deadline);
  if (left == 0 || from >= plan.size())
    return std::nullopt;
  const TransferOp probe = DirectLane::list_probe(plan, from);
  std::optional<Error> failed;
  bool verify = false;
  std::shared_ptr<DirectLane> lane = lane_for(&probe, 1, left, &failed, &verify);
  if (failed || !lane)
    return std::nullopt;  // a handshake's timeout: the batches' to answer
  return lane->post_list(plan, from, list_ms_left(deadline), verify, stop_flag(stop));
}

void RdmaClient::drop_lane(const LaneKey& owner, const std::shared_ptr<DirectLane>& lane) {
  std::shared_ptr<DirectLane> gone;  // its destructor runs outside the lock
  std::lock_guard<std::mutex> guard(lanes_mu_);
  auto it = lanes_.find(owner);
  if (it != lanes_.end() && it->second.lane == lane)
    gone = std::move(it->second.lane);
}

Error RdmaClient::lane_error(const TransferOp& op, Error error, OpFault fault,
                             std::chrono::steady_clock::time_point deadline, uint32_t timeout_ms) {
  {
    std::shared_ptr<DirectLane> gone;  // its destructor runs outside the lock
    std::lock_guard<std::mutex> guard(lanes_mu_);
    auto it = lanes_.find(lane_key(op));
    if (it != lanes_.end() && it->second.lane && it->second.lane->broken())
      gone = std::move(it->second.lane);
  }
  if (error.code() != ErrorCode::kWorkCompletion && error.code() != ErrorCode::kTimeout)
    return error;
  // The manager's rule for its own RDMA ops (RdmaPath::failed; owner_verdict.h): a peer known
  // down, else the timeout, else the owner asked within the op's time.
  // The NIC gave up on the owner: if its manager is known to be down, say so.
  auto down = call<std::string>(reply_timeout_, peer_state_atom::value, op.remote.owner);
  if (down.ok() && !down->empty())
    return Error(ErrorCode::kPeerUnavailable,
                 op_peer_down_text(op.kind, op.remote.owner_name, *down));
  // A timeout used the transfer's time up: its reply comes now (docs/guarantees.md, "Replies"), not
  // after a question to an owner that may be silent for as long again.
  if (error.code() == ErrorCode::kTimeout)
    return error;
  if (!detail::asks_owner(fault))
    return error;
  // Ask the owner itself, within what is left of the op's time (our manager relays the question
  // within it too): it says why it refused an access, or that it is gone (our manager may not
  // have noticed yet). About the bytes the op moves, as the manager's RDMA path asks.
  auto checked = checked_length(op, op.local.size, static_cast<BufferAccess>(op.local.access));
  const uint64_t length = checked.ok() ? *checked : 1;
  // Rounded up: the manager's timer, started after this, ends no earlier than the op's deadline.
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  Result<TransferOutcome> owner = Error(ErrorCode::kTimeout, "no time left to ask it");
  if (left.count() > 0)
    owner = call<TransferOutcome>(left + kLaneBackstop, ask_check_atom::value, op.remote,
                                  op.remote_offset, length, op.kind, timeout_ms_of(left));
  // Asked within the op's time only: silent until then, the answer is the op's timeout.
  if (!owner.ok() && owner.error().code() == ErrorCode::kTimeout)
    return Error(
        ErrorCode::kTimeout,
        not_within_text(op, timeout_ms,
                        ": " + owner_silent_text(error.message(), owner.error().message())));
  return detail::owner_verdict(op, error, fault, owner);
}

Status RdmaClient::verify_lane_op(const TransferOp& op, uint64_t length) {
  Result<uint64_t> mine = Error(ErrorCode::kInternal, "");
  if (op.local.memory == static_cast<uint8_t>(BufferMemory::kHost))
    mine =
        range_checksum(reinterpret_cast<const uint8_t*>(op.local.addr) + op.local_offset, length);
  else  // GPU memory: its manager copies it out
    mine = call<uint64_t>(reply_timeout_, buf_sum_atom::value, ref_of(op.local), op.local_offset,
                          length);
  if (!mine.ok())
    return mine.error().with_context("verifying " + describe(op.local));
  auto theirs =
      call<uint64_t>(reply_timeout_, ask_sum_atom::value, op.remote, op.remote_offset, length);
  if (!theirs.ok())
    return theirs.error().with_context("verifying with the owner of " + describe(op.remote));
  if (*mine == *theirs)
    return {};
  return Error(ErrorCode::kDataMismatch, data_mismatch_text(op, length, *mine, *theirs,
                                                            "a direct lane of " + op.local.device));
}

std::optional<Result<TransferReply>> RdmaClient::lane_transfer(const TransferOp& op,
                                                               uint32_t timeout_ms,
                                                               std::optional<Error>* failed,
                                                               const StopSignal* stop) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0 && stop_requested(stop))
      return Result<TransferReply>(
          Error(ErrorCode::kCancelled, cancelled_unstarted_text(op, false) +
                                           " (its first try was flushed by another op's error)"));
    bool verify = false;
    std::shared_ptr<DirectLane> lane = lane_for(&op, 1, timeout_ms, failed, &verify);
    if (lane == nullptr)
      return std::nullopt;
    OpFault fault = OpFault::kNone;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (attempt > 0 && left.count() <= 0)
      return Result<TransferReply>(
          Error(ErrorCode::kTimeout,
                not_within_text(op, timeout_ms,
                                " (flushed by another op's error, no time left to run it again)")));
    auto r = lane->transfer(op, attempt == 0 ? timeout_ms : static_cast<uint32_t>(left.count()),
                            &fault, stop_flag(stop));
    if (!r)
      return std::nullopt;
    if (r->ok()) {
      if (verify)
        if (Status st = verify_lane_op(op, (*r)->bytes); !st.ok())
          return Result<TransferReply>(st.error());
      return r;
    }
    // Flushed by another op's error on this lane: once more on a new lane (not when its own
    // time ran out: the flush was the timeout's).
    if (fault == OpFault::kFlushed && r->error().code() != ErrorCode::kTimeout && attempt == 0 &&
        lane->broken()) {
      drop_lane(lane_key(op), lane);
      continue;
    }
    return Result<TransferReply>(lane_error(op, r->error(), fault, deadline, timeout_ms));
  }
  return std::nullopt;
}

std::shared_ptr<StreamLane> RdmaClient::stream_lane(const BufferHandle& local,
                                                    const BufferHandle& remote) {
  if (!direct_ || !local.owner || local.owner.node() != manager_.node() || remote.stream_port == 0)
    return nullptr;
  {
    std::lock_guard<std::mutex> guard(lanes_mu_);
    if (stream_lane_asked_)
      return stream_lane_;
  }
  // Asked without the lock; two threads asking at once get the same lane.
  auto grant = call<StreamLaneGrant>(reply_timeout_, stream_lane_atom::value);
  if (!grant.ok())
    return nullptr;  // asked again next time
  std::lock_guard<std::mutex> guard(lanes_mu_);
  stream_lane_asked_ = true;
  stream_lane_ = grant->lane;
  return stream_lane_;
}

std::optional<Result<TransferReply>> RdmaClient::stream_transfer(const TransferOp& op,
                                                                 uint32_t timeout_ms,
                                                                 const StopSignal* stop) {
  if (timeout_ms == 0)
    return std::nullopt;
  std::shared_ptr<StreamLane> lane = stream_lane(op.local, op.remote);
  if (!lane)
    return std::nullopt;
  return lane->transfer(op, timeout_ms, stop);  // StreamLane invariant 4: thread-safe
}

}  // namespace caf_rdma
