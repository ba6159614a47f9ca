// FakeNic and FakeQueuePair: a fake transport for the deterministic fixture (see fake_nic.h).
#include "tests/actors/fake_nic.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "components/qp_completions.h"
#include "components/stop_signal.h"

namespace caf_rdma::testing {

namespace {

/// Each fake NIC a different opening (Nic invariant 1): never 0, never repeated in a process.
uint64_t next_incarnation() {
  static std::atomic<uint64_t> n{0xfa4e000000000000ull};
  return ++n;
}

bool remote_allows(Access access, OpKind kind) {
  if (access == Access::kLocalWrite)
    return false;  // local-only: its key grants nothing
  return kind == OpKind::kRead || access == Access::kReadWrite;
}

OpResult failure(ErrorCode code, OpFault fault, std::string message) {
  OpResult r;
  r.status = Error(code, std::move(message));
  r.fault = fault;
  return r;
}

}  // namespace

// -- FakeQueuePair -------------------------------------------------------------------------------

FakeQueuePair::FakeQueuePair(std::shared_ptr<FakeNic> nic, uint32_t number, QpTraffic traffic)
    : nic_(std::move(nic)),
      name_(nic_->device_name() + " fake QP " + std::to_string(number)),
      number_(number),
      traffic_(traffic) {}

FakeQueuePair::~FakeQueuePair() {
  CompletedOps done;
  {
    std::lock_guard<std::mutex> guard(mu_);
    for (Pending& p : pending_)
      done.emplace_back(
          std::move(p.done),
          failure(ErrorCode::kPeerUnavailable, error_ ? OpFault::kFlushed : OpFault::kOther,
                  to_string(p.op.kind) + std::string(" on ") + name_ +
                      ": queue pair destroyed with the op outstanding"));
    pending_.clear();
  }
  if (!on_test_thread()) {
    std::lock_guard<std::mutex> guard(nic_->mu_);
    for (auto& d : done)
      nic_->late_.push_back(std::move(d));
    return;
  }
  QpCompletions::run(done);
}

QpInfo FakeQueuePair::local_info() const {
  QpInfo info;
  info.qp_num = number_;
  info.gid = nic_->gid();
  info.incarnation = nic_->incarnation();
  return info;
}

Status FakeQueuePair::connect(const QpInfo& remote) {
  std::shared_ptr<FakeQueuePair> peer;
  {
    FakeFabric& f = *nic_->fabric_;
    std::lock_guard<std::mutex> guard(f.mu_);
    if (auto it = f.qps_.find(remote.qp_num); it != f.qps_.end())
      peer = it->second.lock();
  }
  if (!peer || peer->nic_->incarnation() != remote.incarnation)
    return Error(ErrorCode::kPeerUnavailable, name_ + ": no queue pair " +
                                                  std::to_string(remote.qp_num) +
                                                  " of that NIC's opening on this fake fabric");
  std::lock_guard<std::mutex> guard(mu_);
  connected_ = true;
  peer_nic_ = peer->nic_;
  return {};
}

Status FakeQueuePair::connect_loopback() {
  std::lock_guard<std::mutex> guard(mu_);
  connected_ = true;
  peer_nic_ = nic_;
  return {};
}

Status FakeQueuePair::submit(RdmaOp op, OpCallback done) {
  std::lock_guard<std::mutex> guard(mu_);
  if (!connected_)
    return Error(ErrorCode::kInvalidArgument,
                 name_ + " is not connected; cannot " + to_string(op.kind));
  // QpEndpoint invariant 3, and what RdmaQueuePair checks before posting: a rejected op never
  // touches memory.
  if (op.remote.incarnation != 0 && op.remote.incarnation != peer_nic_->incarnation())
    return Error(ErrorCode::kInvalidArgument,
                 std::string(to_string(op.kind)) + ": " + op.remote.describe() +
                     " is of another opening of its device than the one " + name_ +
                     " is connected to");
  for (const LocalSlice& s : op.local) {
    CAF_RDMA_RETURN_IF_ERROR(s.buffer.check_range(s.offset, s.length, "local range"));
    if (s.buffer.region() != nullptr || s.buffer.device() != nic_->device_name())
      return Error(ErrorCode::kInvalidArgument,
                   name_ + ": " + s.buffer.describe() + " is not registered with this fake NIC");
  }
  pending_.push_back(Pending{std::move(op), std::move(done)});
  ++stats_.work_requests;
  return {};
}

Status FakeQueuePair::submit_queued(RdmaOp op, OpCallback done) {
  return submit(std::move(op), std::move(done));
}

bool FakeQueuePair::on_test_thread() const {
  return std::this_thread::get_id() == nic_->test_thread_;
}

int FakeQueuePair::progress() {
  if (!on_test_thread())
    return 0;  // the poller's thread: completions are the test's to give
  {
    std::lock_guard<std::mutex> guard(mu_);
    ++progress_calls_;
  }
  if (nic_->completion() != FakeNic::CompletionMode::kOnProgress)
    return 0;
  return static_cast<int>(complete_all());
}

size_t FakeQueuePair::progress_calls() const {
  std::lock_guard<std::mutex> guard(mu_);
  return progress_calls_;
}

OpResult FakeQueuePair::perform(const RdmaOp& op) {
  FakeNic::Region region;
  const uint64_t length = op.kind == OpKind::kFetchAdd || op.kind == OpKind::kCompareSwap
                              ? sizeof(uint64_t)
                              : op.local_length();
  std::shared_ptr<FakeNic> peer;
  {
    std::lock_guard<std::mutex> guard(mu_);
    peer = peer_nic_;
  }
  if (!peer || !peer->region_of(op.remote.rkey, &region) ||
      !remote_allows(region.access, op.kind) ||
      (!op.is_list() && (op.remote.addr + op.remote_offset < region.addr ||
                         op.remote.addr + op.remote_offset + length > region.addr + region.size)))
    return failure(ErrorCode::kWorkCompletion, OpFault::kRemoteAccess,
                   std::string(to_string(op.kind)) + " on " + name_ +
                       " failed: remote access error (the fake NIC's IBV_WC_REM_ACCESS_ERR): " +
                       op.remote.describe() + " at offset " + std::to_string(op.remote_offset));
  if (op.is_list())
    return perform_list(op, region.addr, region.size);
  auto* remote = reinterpret_cast<uint8_t*>(op.remote.addr + op.remote_offset);
  OpResult r;
  r.bytes = length;
  switch (op.kind) {
    case OpKind::kRead:
    case OpKind::kWrite: {
      uint64_t at = 0;
      for (const LocalSlice& s : op.local) {
        uint8_t* local = s.buffer.data() + s.offset;
        if (op.kind == OpKind::kRead)
          std::memmove(local, remote + at, s.length);
        else
          std::memmove(remote + at, local, s.length);
        at += s.length;
      }
      break;
    }
    case OpKind::kFetchAdd:
    case OpKind::kCompareSwap: {
      uint64_t old = 0;
      std::memcpy(&old, remote, sizeof old);
      uint64_t now = op.kind == OpKind::kFetchAdd ? old + op.compare_add
                                                  : (old == op.compare_add ? op.swap : old);
      std::memcpy(remote, &now, sizeof now);
      r.atomic_value = old;
      break;
    }
    default:
      return failure(ErrorCode::kInvalidArgument, OpFault::kOther,
                     name_ + ": a fake queue pair moves no " + to_string(op.kind));
  }
  return r;
}

OpResult FakeQueuePair::perform_list(const RdmaOp& op, uint64_t addr, uint64_t size) {
  // QpEndpoint invariant 5: range by range, in order; one outside the peer's region ends the
  // list there (the ranges before it landed).
  OpResult r;
  for (size_t i = 0; i < op.list.count; ++i) {
    const ListEntry& e = op.list[i];
    const uint64_t at = op.remote.addr + e.offset;
    if (at < addr || at + e.length > addr + size) {
      OpResult failed =
          failure(ErrorCode::kWorkCompletion, OpFault::kRemoteAccess,
                  std::string(to_string(op.kind)) + " on " + name_ +
                      " failed: remote access error (the fake NIC's IBV_WC_REM_ACCESS_ERR): " +
                      op.remote.describe() + " at offset " + std::to_string(e.offset));
      failed.list_landed = i;
      return failed;
    }
    uint8_t* local = op.local[0].buffer.data() + e.peer_offset;
    auto* remote = reinterpret_cast<uint8_t*>(at);
    if (op.kind == OpKind::kRead)
      std::memmove(local, remote, e.length);
    else
      std::memmove(remote, local, e.length);
    r.bytes += e.length;
  }
  r.list_landed = op.list.count;
  return r;
}

bool FakeQueuePair::take_oldest(Pending* out) {
  std::lock_guard<std::mutex> guard(mu_);
  if (pending_.empty())
    return false;
  *out = std::move(pending_.front());
  pending_.erase(pending_.begin());
  return true;
}

CompletedOps FakeQueuePair::flushed_locked(const std::string& why) {
  CompletedOps out;
  for (Pending& p : pending_)
    out.emplace_back(std::move(p.done), failure(ErrorCode::kWorkCompletion, OpFault::kFlushed,
                                                std::string(to_string(p.op.kind)) +
                                                    " flushed: " + name_ + " entered ERR: " + why));
  stats_.ops_failed += pending_.size();
  pending_.clear();
  return out;
}

bool FakeQueuePair::complete_next() {
  Pending p;
  if (!take_oldest(&p))
    return false;
  OpResult r = perform(p.op);
  CompletedOps after;
  {
    std::lock_guard<std::mutex> guard(mu_);
    ++stats_.completions;
    if (r.status.ok()) {
      ++stats_.ops_completed;
      stats_.bytes += r.bytes;
    } else {
      ++stats_.ops_failed;
      error_ = true;  // as a NIC's queue pair after a failed work request
      error_cause_ = r.status.error().message();
      after = flushed_locked(error_cause_);
    }
  }
  p.done(std::move(r));
  QpCompletions::run(after);
  return true;
}

size_t FakeQueuePair::complete_all() {
  size_t n = 0;
  while (complete_next())
    ++n;
  return n;
}

bool FakeQueuePair::fail_next(OpFault fault, const std::string& why) {
  Pending p;
  if (!take_oldest(&p))
    return false;
  CompletedOps after;
  {
    std::lock_guard<std::mutex> guard(mu_);
    error_ = true;
    error_cause_ = why;
    ++stats_.ops_failed;
    after = flushed_locked(why);
  }
  p.done(failure(ErrorCode::kWorkCompletion, fault,
                 std::string(to_string(p.op.kind)) + " on " + name_ + " failed: " + why));
  QpCompletions::run(after);
  return true;
}

size_t FakeQueuePair::flush() {
  CompletedOps done;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!error_)
      return 0;
    done = flushed_locked(error_cause_);
  }
  const size_t n = done.size();
  QpCompletions::run(done);
  return n;
}

OpResult FakeQueuePair::execute_or_stop(RdmaOp op, std::chrono::milliseconds /*timeout*/,
                                        const std::atomic<bool>* stop) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (error_)
      return failure(ErrorCode::kInternal, OpFault::kOther,
                     name_ + " is in ERR (" + error_cause_ + ")");
  }
  if (stop_requested(stop))  // as a real one: nothing posted
    return failure(ErrorCode::kCancelled, OpFault::kNone,
                   name_ + ": cancelled before it was posted (fake NIC)");
  return perform(op);
}

std::vector<OpResult> FakeQueuePair::execute_batch(std::vector<RdmaOp> ops,
                                                   std::chrono::milliseconds timeout) {
  std::vector<OpResult> out;
  out.reserve(ops.size());
  for (RdmaOp& op : ops)
    out.push_back(execute(std::move(op), timeout));
  return out;
}

Status FakeQueuePair::abort(const std::string& reason) {
  CompletedOps done;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!error_) {
      error_ = true;
      error_cause_ = reason;
    }
    if (nic_->flush_on_abort())
      done = flushed_locked(error_cause_);
  }
  QpCompletions::run(done);
  return {};
}

bool FakeQueuePair::needs_recovery() const {
  std::lock_guard<std::mutex> guard(mu_);
  return error_;
}

uint64_t FakeQueuePair::remote_incarnation() const {
  std::lock_guard<std::mutex> guard(mu_);
  return connected_ && peer_nic_ ? peer_nic_->incarnation() : 0;
}

QpStats FakeQueuePair::stats() const {
  std::lock_guard<std::mutex> guard(mu_);
  return stats_;
}

size_t FakeQueuePair::pending_ops() const {
  std::lock_guard<std::mutex> guard(mu_);
  return pending_.size();
}

QpLimits FakeQueuePair::limits() const {
  return QpLimits{256, 0, 0, 512};
}

// -- FakeNic -------------------------------------------------------------------------------------

FakeNic::FakeNic(std::string name, std::shared_ptr<FakeFabric> fabric)
    : name_(std::move(name)),
      fabric_(fabric ? std::move(fabric) : FakeFabric::make()),
      incarnation_(next_incarnation()),
      test_thread_(std::this_thread::get_id()) {
  {
    std::lock_guard<std::mutex> guard(fabric_->mu_);
    gid_[0] = 0xfe;  // fe80::<n>: a link-local GID of its own on the fabric
    gid_[1] = 0x80;
    gid_[15] = ++fabric_->next_nic_;
  }
  port_.port_num = 1;
  port_.state = IBV_PORT_ACTIVE;
  port_.is_ethernet = true;
  port_.max_msg_sz = 1u << 31;
}

std::shared_ptr<FakeNic> FakeNic::make(std::string name, std::shared_ptr<FakeFabric> fabric) {
  return std::shared_ptr<FakeNic>(new FakeNic(std::move(name), std::move(fabric)));
}

NicOpener FakeNic::opener_of(std::vector<std::shared_ptr<FakeNic>> nics) {
  std::vector<NicOpener> openers;
  for (const auto& nic : nics)
    openers.push_back(nic->opener());
  return [nics, openers](const IbverbsConfig& config) -> Result<std::shared_ptr<Nic>> {
    for (size_t i = 0; i < nics.size(); ++i)
      if (config.device_name.empty() || nics[i]->device_name() == config.device_name)
        return openers[i](config);
    return Error(ErrorCode::kNoDevice,
                 "no fake NIC named '" + config.device_name + "' on this fake host");
  };
}

NicOpener FakeNic::opener() {
  std::weak_ptr<FakeNic> me = weak_from_this();
  return [me](const IbverbsConfig& /*config*/) -> Result<std::shared_ptr<Nic>> {
    auto nic = me.lock();
    if (!nic)
      return Error(ErrorCode::kNoDevice, "the fake NIC is gone");
    std::lock_guard<std::mutex> guard(nic->mu_);
    ++nic->opens_;
    return std::shared_ptr<Nic>(nic);
  };
}

std::string FakeNic::describe() const {
  return name_ + " (a fake NIC: tests/actors/fake_nic.h)";
}

Result<RdmaBuffer> FakeNic::registered(void* addr, uint64_t size, Access access) {
  if (addr == nullptr || size == 0)
    return Error(ErrorCode::kInvalidArgument, name_ + ": registration of a null or empty range");
  auto region =
      std::make_shared<const Region>(Region{reinterpret_cast<uint64_t>(addr), size, access});
  uint32_t key;
  {
    std::lock_guard<std::mutex> guard(fabric_->mu_);
    key = fabric_->next_key_++;
  }
  std::lock_guard<std::mutex> guard(mu_);
  regions_[key] = region;
  ++registrations_;
  return RdmaBuffer::of_fake_nic(region, key, key, reinterpret_cast<uint64_t>(addr), size, access,
                                 name_);
}

Result<RdmaBuffer> FakeNic::register_buffer(void* addr, uint64_t size, Access access) {
  return registered(addr, size, access);
}

Result<RdmaBuffer> FakeNic::register_local(void* addr, uint64_t size) {
  return registered(addr, size, Access::kLocalWrite);
}

Result<RdmaBuffer> FakeNic::register_gpu(const DeviceMemory& /*memory*/,
                                         const PointerInfo& /*info*/, uint64_t /*addr*/,
                                         uint64_t /*size*/, Access /*access*/) {
  return Error(ErrorCode::kNoDevice, name_ + " is a fake NIC: it registers no GPU memory");
}

RegistrationStats FakeNic::registration_stats() const {
  std::lock_guard<std::mutex> guard(mu_);
  RegistrationStats s;
  for (const auto& [key, weak] : regions_)
    if (auto r = weak.lock()) {
      ++s.live_regions;
      s.registered_bytes += r->size;
    }
  s.registrations = registrations_;
  return s;
}

Result<std::shared_ptr<CompletionRouter>> FakeNic::shared_completions(int /*entries*/) {
  return std::shared_ptr<CompletionRouter>{};  // its queue pairs take their own completions
}

Result<std::shared_ptr<QpEndpoint>> FakeNic::make_qp(const QpOptions& options) {
  CAF_RDMA_RETURN_IF_ERROR(options.traffic.check("the queue pair's traffic on " + name_));
  std::lock_guard<std::mutex> fabric_guard(fabric_->mu_);
  auto qp =
      std::make_shared<FakeQueuePair>(shared_from_this(), ++fabric_->next_qp_, options.traffic);
  fabric_->qps_[qp->local_info().qp_num] = qp;
  std::lock_guard<std::mutex> guard(mu_);
  ++qps_made_;
  qps_.push_back(qp);
  return std::shared_ptr<QpEndpoint>(qp);
}

Result<std::unique_ptr<DeviceMonitor>> FakeNic::watch(DeviceMonitor::Report report) {
  std::lock_guard<std::mutex> guard(mu_);
  watcher_ = std::move(report);
  return std::unique_ptr<DeviceMonitor>{};  // its events come from set_port_active
}

bool FakeNic::port_active() const {
  std::lock_guard<std::mutex> guard(mu_);
  return port_.state == IBV_PORT_ACTIVE;
}

void FakeNic::set_port_active(bool active, const std::string& why) {
  DeviceMonitor::Report tell;
  {
    std::lock_guard<std::mutex> guard(mu_);
    port_.state = active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    tell = watcher_;
  }
  if (tell)
    tell(DeviceEvent{active ? DeviceEventKind::kPortUp : DeviceEventKind::kPortDown, port_.port_num,
                     name_ + " port " + std::to_string(port_.port_num) + ": " + why});
}

bool FakeNic::region_of(uint32_t rkey, Region* out) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = regions_.find(rkey);
  if (it == regions_.end())
    return false;
  auto r = it->second.lock();
  if (!r)
    return false;  // revoked: every copy of its buffer went (Nic invariant 2)
  *out = *r;
  return true;
}

void FakeNic::set_completion(CompletionMode mode) {
  std::lock_guard<std::mutex> guard(mu_);
  mode_ = mode;
}

FakeNic::CompletionMode FakeNic::completion() const {
  std::lock_guard<std::mutex> guard(mu_);
  return mode_;
}

void FakeNic::set_flush_on_abort(bool on) {
  std::lock_guard<std::mutex> guard(mu_);
  flush_on_abort_ = on;
}

bool FakeNic::flush_on_abort() const {
  std::lock_guard<std::mutex> guard(mu_);
  return flush_on_abort_;
}

std::vector<std::shared_ptr<FakeQueuePair>> FakeNic::queue_pairs() const {
  std::lock_guard<std::mutex> guard(mu_);
  std::vector<std::shared_ptr<FakeQueuePair>> out;
  for (const auto& weak : qps_)
    if (auto qp = weak.lock())
      out.push_back(std::move(qp));
  return out;
}

size_t FakeNic::queue_pairs_made() const {
  std::lock_guard<std::mutex> guard(mu_);
  return qps_made_;
}

size_t FakeNic::deliver_late() {
  CompletedOps late;
  {
    std::lock_guard<std::mutex> guard(mu_);
    late.swap(late_);
  }
  const size_t n = late.size();
  QpCompletions::run(late);
  return n;
}

size_t FakeNic::opens() const {
  std::lock_guard<std::mutex> guard(mu_);
  return opens_;
}

}  // namespace caf_rdma::testing
