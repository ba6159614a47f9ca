#include "actors/rdma_client.h"

#include <caf/all.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "actors/detail/async_request.h"
#include "actors/detail/node_objects.h"
#include "actors/direct_lane.h"
#include "actors/op_texts.h"
#include "actors/rdma_errors.h"
#include "actors/request_timer.h"
#include "actors/stream_lane.h"
#include "actors/transfer/owner_verdict.h"
#include "actors/transfer/path_choice.h"
#include "actors/transfer_checks.h"
#include "components/checksum.h"
#include "components/secure_random.h"

namespace caf_rdma {

namespace {

bool direct_from_env() {
  const char* v = std::getenv(kEnvDirect);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

/// Extra time a request to the manager gets beyond the transfer's own timeout.
constexpr std::chrono::seconds kLaneBackstop{1};

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

namespace {

/// An object from `idle` (or a new one from `make`) for one scope, given back after.
template <class T>
class Lease {
public:
  template <class Make>
  Lease(std::mutex& mu, std::vector<std::unique_ptr<T>>& idle, Make make) : mu_(mu), idle_(idle) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (!idle_.empty()) {
        item_ = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!item_)
      item_ = make();
  }
  ~Lease() {
    if (discard_)
      return;
    std::lock_guard<std::mutex> guard(mu_);
    idle_.push_back(std::move(item_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  T& operator*() const { return *item_; }
  /// Not given back: it goes with the lease (e.g. an actor a late answer may still reach).
  void discard() { discard_ = true; }

private:
  std::mutex& mu_;
  std::vector<std::unique_ptr<T>>& idle_;
  std::unique_ptr<T> item_;
  bool discard_ = false;
};

}  // namespace

template <class T, class... Ts>
Result<T> RdmaClient::call(std::chrono::milliseconds timeout, Ts&&... xs) {
  std::optional<Result<T>> out;
  if (Status alive = node_alive(); !alive.ok())  // nothing to ask (node_objects.h 2)
    return alive.error();
  // This call's own actor: no other thread receives on it.
  Lease<caf::scoped_actor> lease(pool_mu_, idle_actors_,
                                 [this] { return std::make_unique<caf::scoped_actor>(sys_); });
  caf::scoped_actor& self = *lease;
  if (manager_.node() == sys_.node()) {
    // CAF's request timeout is armed only when the answer is not there after the busy-poll
    // window: a request answered within it wakes no timer thread (busy polling's point).
    const auto asked = std::chrono::steady_clock::now();
    auto handle = self->request(manager_, caf::infinite, std::forward<Ts>(xs)...);
    auto on_value = [&](T& value) { out.emplace(std::move(value)); };
    auto on_error = [&](caf::error& err) {
      // No answer in time: the late one would wait in this actor's mailbox (and end busy
      // polling's spin at once on every later call): the actor is not pooled again.
      if (err == caf::sec::request_timeout)
        lease.discard();
      out.emplace(to_error(err));
    };
    if (spin_for_reply(self)) {
      // Something is in the mailbox, most likely the answer: take it if so, without waiting.
      caf::blocking_actor::accept_one_cond one;
      self->varargs_receive(
          one, handle.id(), on_value, on_error, caf::after(std::chrono::seconds(0)) >> [] {});
    }
    if (!out) {
      auto left = std::max(std::chrono::steady_clock::duration::zero(),
                           timeout - (std::chrono::steady_clock::now() - asked));
      // What request(timeout) arms: it takes the request's id (the handle holds the answer's).
      self->request_response_timeout(
          caf::duration{std::chrono::duration_cast<std::chrono::microseconds>(left)},
          caf::make_message_id(handle.id().request_id().integer_value()));
      receive_answer(self.ptr(), handle, on_value, on_error);
    }
  } else {
    // Another node's facade: the question goes sealed and only its sealed answer counts
    // (actors/peer_facade.h, invariant 6); whatever else arrives under its id is skipped.
    PeerNonce nonce;
    secure_random(&nonce, sizeof(nonce));
    const auto due = std::chrono::steady_clock::now() + timeout;
    const caf::node_id asked = manager_.node();
    auto handle = self->request(caf::actor_cast<caf::actor>(manager_), timeout,
                                caf::make_message(std::forward<Ts>(xs)..., nonce));
    while (!out) {
      handle.receive(
          [&](caf::error& err) {
            // Unsealed: only CAF's own timeout, once the deadline passed.
            if (err == caf::sec::request_timeout && std::chrono::steady_clock::now() >= due) {
              lease.discard();  // a late answer may still come to it
              out.emplace(to_error(err));
            }
          },
          caf::others >> [&](caf::message_view& view) -> caf::result<caf::message> {
            caf::message m = view.move_content_to_message();
            const auto* e = self->current_mailbox_element();
            const bool from_asked = e != nullptr && e->sender && e->sender->node() == asked;
            if (!from_asked || m.size() != 2 || !m.match_element<PeerNonce>(1))
              return caf::message{};
            const auto& n = m.get_as<PeerNonce>(1);
            if (((n.hi ^ nonce.hi) | (n.lo ^ nonce.lo)) != 0)
              return caf::message{};
            if (m.match_element<T>(0))
              out.emplace(m.get_as<T>(0));
            else if (m.match_element<caf::error>(0))
              out.emplace(to_error(m.get_as<caf::error>(0)));
            return caf::message{};
          });
    }
    cancel_request_timer(self.ptr(), handle.id());
  }
  if (!out)
    return Error(ErrorCode::kInternal, "no reply from the manager");
  return std::move(*out);
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
  // any, as the manager decides for each op of a batch.
  auto striped = [ops, count](const LaneSlot& s) {
    return std::any_of(ops, ops + count, [&s](const TransferOp& o) {
      // An explicit length is what the op moves (the lane checks it); a whole span's is worked out.
      auto n = o.length != kWholeSpan
                   ? Result<uint64_t>(o.length)
                   : checked_length(o, o.local.size, static_cast<BufferAccess>(o.local.access));
      return n.ok() &&
             detail::striped(detail::StripeFacts{
                 *n, s.stripe_min_bytes, o.notify, o.local.owner.node() == o.remote.owner.node(),
                 std::min(o.local.rails.size(), o.remote.rails.size()), s.stripes_one_device});
    });
  };
  const caf::actor_addr owner = op.remote.owner.address();
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
                               lane_open_atom::value, op.remote, timeout_ms);
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

void RdmaClient::drop_lane(const caf::actor_addr& owner, const std::shared_ptr<DirectLane>& lane) {
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
    auto it = lanes_.find(op.remote.owner.address());
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
                                                               std::optional<Error>* failed) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int attempt = 0; attempt < 2; ++attempt) {
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
    auto r =
        lane->transfer(op, attempt == 0 ? timeout_ms : static_cast<uint32_t>(left.count()), &fault);
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
      drop_lane(op.remote.owner.address(), lane);
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
                                                                 uint32_t timeout_ms) {
  if (timeout_ms == 0)
    return std::nullopt;
  std::shared_ptr<StreamLane> lane = stream_lane(op.local, op.remote);
  if (!lane)
    return std::nullopt;
  return lane->transfer(op, timeout_ms);  // StreamLane invariant 4: thread-safe
}

Result<TransferReply> RdmaClient::transfer(const TransferOp& op, uint32_t timeout_ms) {
  if (Status alive = node_alive(); !alive.ok())  // no lane either: its queue pairs are gone
    return alive.error();
  std::optional<Error> failed;
  if (auto r = lane_transfer(op, timeout_ms, &failed))
    return std::move(*r);
  if (failed)
    return *failed;
  // Declined by the lane: the manager has the whole timeout (its errors name it). A lane that
  // declines only after its owner closed two connections may so take longer than the timeout.
  if (auto r = stream_transfer(op, timeout_ms))
    return std::move(*r);
  // The manager answers within timeout_ms (plus a flush, or kNoticeGrace for a notice on its
  // way); wait a little longer than that.
  return call<TransferReply>(reply_wait(timeout_ms, op.notify), transfer_atom::value, op,
                             timeout_ms);
}

std::future<Result<TransferReply>> RdmaClient::transfer_async(TransferOp op,
                                                              std::chrono::milliseconds timeout) {
  auto as_is = [](Result<TransferReply> r) { return r; };
  if (Status alive = node_alive(); !alive.ok()) {
    std::promise<Result<TransferReply>> refused;
    refused.set_value(alive.error());
    return refused.get_future();
  }
  const uint32_t ms = timeout_ms_of(timeout);
  const auto wait = reply_wait(ms, op.notify);  // before `op` is moved into the request
  return detail::async_request<TransferReply>(sys_, manager_, wait, "transfer", as_is,
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

Result<TransferReply> RdmaClient::write(const BufferHandle& local, const BufferHandle& remote,
                                        Range range, std::chrono::milliseconds timeout) {
  return transfer_scratch(TransferKind::kWrite, local, remote, timeout_ms_of(timeout), range);
}

Result<TransferReply> RdmaClient::read(const BufferHandle& local, const BufferHandle& remote,
                                       Range range, std::chrono::milliseconds timeout) {
  return transfer_scratch(TransferKind::kRead, local, remote, timeout_ms_of(timeout), range);
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
  Lease<TransferOp> lease(pool_mu_, idle_ops_, [] { return std::make_unique<TransferOp>(); });
  TransferOp& scratch = *lease;
  scratch.kind = wire_kind(kind);
  scratch.local = local;
  scratch.local_offset = range.local_offset;
  scratch.remote = remote;
  scratch.remote_offset = range.remote_offset;
  scratch.length = range.length;
  auto result = transfer(scratch, timeout_ms);
  scratch.local.owner = nullptr;  // hold no reference to either manager between calls
  scratch.remote.owner = nullptr;
  return result;
}

Result<std::vector<TransferOutcome>> RdmaClient::batch(const std::vector<TransferOp>& ops,
                                                       uint32_t timeout_ms) {
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
  return call<std::vector<TransferOutcome>>(reply_wait(timeout_ms, notices), batch_atom::value, ops,
                                            timeout_ms);
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
