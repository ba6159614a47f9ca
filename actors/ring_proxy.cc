// RingProxy (see ring_proxy.h).
#include "actors/ring_proxy.h"

#include <algorithm>
#include <string>

#include "actors/detail/async_request.h"
#include "actors/detail/node_objects.h"
#include "actors/rdma_errors.h"
#include "primitives/log.h"

namespace caf_rdma {

namespace {

/// How long past a descriptor's own timeout the proxy waits for the manager's answer.
constexpr std::chrono::seconds kRingReplyGrace{10};
/// Idle rounds (nothing published) before the thread sleeps between looks; its sleeps then
/// double from kIdleSleep up to kIdleSleepMost while nothing comes.
constexpr uint32_t kBusyRounds = 4096;
constexpr std::chrono::microseconds kIdleSleep{50};
constexpr std::chrono::microseconds kIdleSleepMost{1000};
/// How long the thread waits at a time for room among the descriptors on their way (then it
/// looks again: every wait has a bound).
constexpr std::chrono::milliseconds kRoomLook{100};

}  // namespace

/// What the thread and the requests' answers share (the answers may come after the proxy's
/// thread ended, never after its destructor returned: invariant 3).
struct RingProxy::Shared {
  explicit Shared(OpRing r) : ring(r) {}
  OpRing ring;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t in_flight = 0;
  bool stop = false;
  /// The destructor stopped waiting (invariant 3's bound passed): later answers touch no ring.
  bool abandoned = false;
  std::optional<Error> first_error;  ///< the first failure's error, text and all

  /// Ticket `ticket`, counted in in_flight, ended with `st`.
  void ended(uint64_t ticket, const Status& st) {
    std::lock_guard<std::mutex> g(mu);
    if (!st.ok() && !first_error)
      first_error = st.error();
    if (!abandoned)
      ring.finish(ticket, st.ok(), st.ok() ? ErrorCode::kInternal : st.error().code());
    --in_flight;
    cv.notify_all();
  }
};

Result<std::unique_ptr<RingProxy>> RingProxy::start(caf::actor_system& sys,
                                                    rdma_manager_actor manager, OpRing ring,
                                                    std::vector<BufferPair> pairs,
                                                    Options options) {
  if (pairs.empty())
    return Error(ErrorCode::kInvalidArgument, "a ring proxy needs at least one buffer pair");
  if (options.most_in_flight == 0)
    return Error(ErrorCode::kInvalidArgument, "a ring proxy's most_in_flight is at least 1");
  if (options.timeout <= std::chrono::milliseconds(0) ||
      options.timeout > std::chrono::milliseconds(UINT32_MAX))
    return Error(ErrorCode::kInvalidArgument, "a ring proxy's timeout is 1 ms to 2^32-1 ms, not " +
                                                  std::to_string(options.timeout.count()) + " ms");
  if (!manager)
    return Error(ErrorCode::kInvalidArgument, "a ring proxy needs its node's manager");
  std::unique_ptr<RingProxy> p(
      new RingProxy(sys, std::move(manager), ring, std::move(pairs), options));
  try {
    p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  } catch (const std::exception& e) {
    return Error(ErrorCode::kResourceExhausted,
                 std::string("cannot start a ring proxy's thread: ") + e.what());
  }
  return p;
}

RingProxy::RingProxy(caf::actor_system& sys, rdma_manager_actor manager, OpRing ring,
                     std::vector<BufferPair> pairs, Options options)
    : sys_(sys),
      manager_(std::move(manager)),
      ring_(ring),
      consumer_(ring),
      pairs_(std::move(pairs)),
      options_(options),
      shared_(std::make_shared<Shared>(ring)),
      listed_(detail::node_object_added(sys, "RingProxy")) {}

RingProxy::~RingProxy() {
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    shared_->stop = true;
    shared_->cv.notify_all();
  }
  if (thread_.joinable())
    thread_.join();
  // Invariant 3: each request ends by its timeout plus the grace (or its node's stop).
  std::unique_lock<std::mutex> g(shared_->mu);
  if (!shared_->cv.wait_for(g, options_.timeout + 2 * kRingReplyGrace,
                            [this] { return shared_->in_flight == 0; })) {
    // Past every request's own bound (a starved scheduler): what answers later ends nothing.
    shared_->abandoned = true;
    log_line(LogLevel::kError,
             "RingProxy: %llu descriptors had no answer when it stopped; the ring does not "
             "count them",
             static_cast<unsigned long long>(shared_->in_flight));  // NOLINT(google-runtime-int)
  }
  g.unlock();
  detail::node_object_removed(sys_, listed_);
}

std::optional<Error> RingProxy::first_error() const {
  std::lock_guard<std::mutex> g(shared_->mu);
  return shared_->first_error;
}

Result<TransferOp> RingProxy::op_of(const OpRingSlot& s) const {
  if (s.pair >= pairs_.size())
    return Error(ErrorCode::kInvalidArgument, "ring descriptor names buffer pair " +
                                                  std::to_string(s.pair) + ", but its proxy has " +
                                                  std::to_string(pairs_.size()));
  if (s.length == kWholeSpan)  // what a transfer would read as "to the end of the buffer"
    return Error(ErrorCode::kInvalidArgument,
                 "ring descriptor of length 2^64-1: a descriptor names how many bytes it moves");
  const BufferPair& p = pairs_[s.pair];
  switch (static_cast<RingOpKind>(s.kind)) {
    case RingOpKind::kPut:
      return make_write(p.local, p.remote, s.length, s.local_offset, s.remote_offset);
    case RingOpKind::kGet:
      return make_read(p.local, p.remote, s.length, s.local_offset, s.remote_offset);
    case RingOpKind::kFetchAdd:
      return make_fetch_add(p.local, p.remote, s.remote_offset, s.operand, s.local_offset);
  }
  return Error(
      ErrorCode::kInvalidArgument,
      "ring descriptor of unknown kind " + std::to_string(s.kind) + " (1 put, 2 get, 3 fetch-add)");
}

void RingProxy::run() {
  const auto ms = static_cast<uint32_t>(options_.timeout.count());
  const auto wait = options_.timeout + kRingReplyGrace;
  uint32_t idle = 0;
  auto sleep = kIdleSleep;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(shared_->mu);
      // Invariant 2: no more than most_in_flight on their way.
      while (!shared_->stop && shared_->in_flight >= options_.most_in_flight)
        shared_->cv.wait_for(g, kRoomLook);
      if (shared_->stop)
        return;
      if (idle >= kBusyRounds) {  // nothing for a while: look again a little later
        shared_->cv.wait_for(g, sleep, [this] { return shared_->stop; });
        sleep = std::min(2 * sleep, kIdleSleepMost);
      }
      if (shared_->stop)
        return;
      ++shared_->in_flight;  // the next descriptor's, if there is one (given back below if not)
    }
    uint64_t ticket = 0;
    std::optional<OpRingSlot> s = consumer_.take(&ticket);
    if (!s) {
      {
        std::lock_guard<std::mutex> g(shared_->mu);
        --shared_->in_flight;
      }
      idle = std::min(idle + 1, kBusyRounds);
      if (idle < kBusyRounds && idle > 64)
        std::this_thread::yield();
      continue;
    }
    idle = 0;
    sleep = kIdleSleep;
    taken_.fetch_add(1, std::memory_order_release);
    Result<TransferOp> op = op_of(*s);
    if (op.ok())
      if (Status alive = detail::node_alive(sys_, "RingProxy"); !alive.ok())
        op = alive.error();  // invariant 4: its node is gone
    if (!op.ok()) {
      shared_->ended(ticket, op.error());
      continue;
    }
    auto ended = [shared = shared_, ticket](const Result<TransferReply>& r) {
      shared->ended(ticket, r.ok() ? Status() : Status(r.error()));
      return 0;
    };
    try {
      // The future is not kept: the answer goes to the ring (`ended`), whatever happens.
      (void)detail::async_request_until<TransferReply>(sys_, manager_, wait, "ring descriptor",
                                                       nullptr, ended, transfer_atom::value,
                                                       std::move(*op), ms);
    } catch (const std::exception& e) {  // no actor for it (memory): it ends here, failed
      shared_->ended(ticket, Error(ErrorCode::kResourceExhausted,
                                   std::string("cannot ask the manager: ") + e.what()));
    }
  }
}

}  // namespace caf_rdma
