// FakeNic and FakeQueuePair: a fake transport (named as such) behind the manager's transport
// seam (components/nic.h, components/qp_endpoint.h), for the deterministic fixture
// (tests/actors/deterministic_fixture.h): the manager runs its RDMA path on a host without a
// device, and the test decides when each op completes, how, and in which order. The real path
// (RdmaDomain, RdmaQueuePair) is tested on the host's device and in the Soft-RoCE VM.
//
// What it does
// - Registration gives every buffer keys of its own; the key is revoked when the last copy of
//   the buffer goes (Nic invariant 2). Local-only registrations grant no remote access.
// - NICs made on one FakeFabric (the fake wire) reach each other: a queue pair `connect`s to
//   the fabric's queue pair its QpInfo names (number, and the incarnation of its NIC), and its
//   ops reach the memory that queue pair's NIC registered, by key. A NIC made without a fabric
//   has one of its own: its queue pairs connect to themselves (`connect_loopback`, the
//   manager's loopback queue pair) or to others of that NIC. Each NIC has a GID of its own.
// - An op submitted is kept, untouched, until it completes: by `complete_next` (the test says
//   so) or, in CompletionMode::kOnProgress, by the next `progress()` on the test's thread (the
//   manager polling inline, RdmaPath invariant 1). Completing moves the bytes with memcpy,
//   checking the remote key, range and rights as a NIC does: an access it refuses fails the op
//   (kRemoteAccess), puts the queue pair in error and flushes the ops after it.
// - `abort` puts the queue pair in error; its ops are flushed then (`set_flush_on_abort`, the
//   default) or only when the test says (`flush`), or when the queue pair is destroyed.
// - `set_port_active` takes the port out of ACTIVE (or back) and tells the NIC's watcher, as a
//   device's port event; `watch` returns no monitor object (there is no thread to own).
// - Completions run only on the thread that made the NIC (the test's): `progress()` from any
//   other thread (the manager's CompletionPoller) finds nothing, so nothing happens behind the
//   test's back. A queue pair destroyed on another thread (the poller held the last reference)
//   with ops outstanding leaves their completions (errors) to `deliver_late()`.
// - QpEndpoint::execute (direct lanes, on the client's threads) moves the bytes at once.
//
// Invariants: QpEndpoint's 1-4 and Nic's 1-4 (the interfaces' headers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/rdma_manager_actor.h"
#include "components/nic.h"
#include "components/qp_endpoint.h"

namespace caf_rdma::testing {

class FakeNic;
class FakeQueuePair;

/// The wire between fake NICs (see above): queue pair numbers and keys unique on it, and which
/// queue pair a number names.
class FakeFabric {
public:
  static std::shared_ptr<FakeFabric> make() { return std::make_shared<FakeFabric>(); }

private:
  friend class FakeNic;
  friend class FakeQueuePair;
  std::mutex mu_;
  uint32_t next_qp_ = 0;
  uint32_t next_key_ = 0x100;
  uint8_t next_nic_ = 0;
  std::map<uint32_t, std::weak_ptr<FakeQueuePair>> qps_;
};

class FakeQueuePair final : public QpEndpoint {
public:
  FakeQueuePair(std::shared_ptr<FakeNic> nic, uint32_t number, QpTraffic traffic = {});
  /// Ops still outstanding complete with an error saying the queue pair went (invariant 1): on
  /// the test's thread at once, else through FakeNic::deliver_late.
  ~FakeQueuePair() override;

  // -- QpEndpoint ----------------------------------------------------------------------------
  const std::string& describe() const override { return name_; }
  const std::shared_ptr<CompletionRouter>& router() const override { return no_router_; }
  QpInfo local_info() const override;
  Status connect(const QpInfo& remote) override;
  Status connect_loopback() override;
  Status submit(RdmaOp op, OpCallback done) override;
  Status submit_queued(RdmaOp op, OpCallback done) override;
  void post_queued() override {}
  int progress() override;
  /// Moves the bytes at once; a stop already set cancels the op before it moves any (the
  /// queue pair untouched, as a real one's).
  OpResult execute_or_stop(RdmaOp op, std::chrono::milliseconds timeout,
                           const std::atomic<bool>* stop) override;
  std::vector<OpResult> execute_batch(std::vector<RdmaOp> ops,
                                      std::chrono::milliseconds timeout) override;
  Status abort(const std::string& reason) override;
  bool needs_recovery() const override;
  uint64_t remote_incarnation() const override;
  QpStats stats() const override;
  size_t outstanding_work_requests() const override { return pending_ops(); }
  bool idle() const override { return pending_ops() == 0; }
  size_t pending_ops() const override;
  QpLimits limits() const override;

  // -- the test's controls (its own thread) ----------------------------------------------------
  /// Completes the oldest outstanding op (its bytes moved, or its failure); false: none. On a
  /// queue pair in error too: the op had completed before the error took hold (its success
  /// then comes after the abort, as a NIC's can).
  bool complete_next();
  /// Completes every outstanding op, oldest first; how many.
  size_t complete_all();
  /// Completes the oldest outstanding op as `fault` (kRemoteAccess or kOther) without moving
  /// its bytes: the queue pair enters error and the ops after it are flushed.
  bool fail_next(OpFault fault, const std::string& why);
  /// A queue pair in error: its outstanding ops complete flushed; how many.
  size_t flush();
  /// Calls of `progress()` on the test's thread (the manager polling inline).
  size_t progress_calls() const;
  /// The traffic class and service level it was made with (QpOptions::traffic).
  const QpTraffic& traffic() const { return traffic_; }

private:
  struct Pending {
    RdmaOp op;
    OpCallback done;
  };
  /// Moves the op's bytes as a NIC would, or says why it refuses (error).
  OpResult perform(const RdmaOp& op);
  /// A list op's ranges, in order, inside the peer's region [addr, addr + size) (QpEndpoint
  /// invariant 5).
  OpResult perform_list(const RdmaOp& op, uint64_t addr, uint64_t size);
  /// Takes the oldest op out (null callback when none).
  bool take_oldest(Pending* out);
  /// Everything outstanding, flushed with `why`.
  CompletedOps flushed_locked(const std::string& why);
  bool on_test_thread() const;

  std::shared_ptr<FakeNic> nic_;
  const std::string name_;
  const uint32_t number_;
  const QpTraffic traffic_;
  /// The NIC of the queue pair it is connected to (its own for loopback): the one whose keys
  /// its ops use.
  std::shared_ptr<FakeNic> peer_nic_;
  const std::shared_ptr<CompletionRouter> no_router_;
  mutable std::mutex mu_;
  bool connected_ = false;
  bool error_ = false;
  std::string error_cause_;
  std::vector<Pending> pending_;
  QpStats stats_;
  size_t progress_calls_ = 0;
};

class FakeNic final : public Nic, public std::enable_shared_from_this<FakeNic> {
public:
  enum class CompletionMode : uint8_t {
    kWhenTold,    ///< ops complete only by complete_next / complete_all / fail_next
    kOnProgress,  ///< the next progress() on the test's thread completes every op
  };

  /// A fake NIC named `name` on `fabric` (null: a fabric of its own), made on (and completing
  /// ops on) the calling thread.
  static std::shared_ptr<FakeNic> make(std::string name = "fake0",
                                       std::shared_ptr<FakeFabric> fabric = nullptr);
  /// An opener for ManagerOptions::open_nic that gives this NIC (each open counted).
  NicOpener opener();
  /// An opener that gives the NIC of `nics` the configuration names (IbverbsConfig::
  /// device_name; the first when it names none), as a host's devices (striping's rails).
  static NicOpener opener_of(std::vector<std::shared_ptr<FakeNic>> nics);

  // -- Nic -----------------------------------------------------------------------------------
  const std::string& device_name() const override { return name_; }
  std::string describe() const override;
  uint64_t incarnation() const override { return incarnation_; }
  const PortInfo& port() const override { return port_; }
  bool port_active() const override;
  Gid gid() const override { return gid_; }
  Result<bool> refresh_gid() override { return false; }
  bool atomics() const override { return true; }
  const std::string& warning() const override { return no_warning_; }
  std::string selection_note() const override { return {}; }
  Result<RdmaBuffer> register_buffer(void* addr, uint64_t size, Access access) override;
  Result<RdmaBuffer> register_local(void* addr, uint64_t size) override;
  Result<RdmaBuffer> register_gpu(const DeviceMemory& memory, const PointerInfo& info,
                                  uint64_t addr, uint64_t size, Access access) override;
  RegistrationStats registration_stats() const override;
  Result<std::shared_ptr<CompletionRouter>> shared_completions(int entries) override;
  Result<std::shared_ptr<QpEndpoint>> make_qp(const QpOptions& options) override;
  Result<std::unique_ptr<DeviceMonitor>> watch(DeviceMonitor::Report report) override;

  // -- the test's controls -------------------------------------------------------------------
  void set_completion(CompletionMode mode);
  CompletionMode completion() const;
  /// Whether abort() flushes a queue pair's ops at once (true, as a device that flushes in
  /// time) or leaves them until `flush()` or the queue pair's destruction.
  void set_flush_on_abort(bool on);
  bool flush_on_abort() const;
  /// The queue pairs made so far that still exist, oldest first.
  std::vector<std::shared_ptr<FakeQueuePair>> queue_pairs() const;
  size_t queue_pairs_made() const;
  size_t opens() const;
  /// Runs the completions of queue pairs destroyed off the test's thread; how many.
  size_t deliver_late();
  /// The port leaves ACTIVE (`active` false: a pulled link) or comes back, and whoever watches
  /// the NIC is told at once, on this thread (a device's PORT_ERR / PORT_ACTIVE event).
  void set_port_active(bool active, const std::string& why);

private:
  friend class FakeQueuePair;
  struct Region {
    uint64_t addr = 0, size = 0;
    Access access = Access::kReadWrite;
  };
  FakeNic(std::string name, std::shared_ptr<FakeFabric> fabric);
  Result<RdmaBuffer> registered(void* addr, uint64_t size, Access access);
  /// The live region of `rkey` (false: none: revoked or never given).
  bool region_of(uint32_t rkey, Region* out) const;

  const std::string name_;
  const std::shared_ptr<FakeFabric> fabric_;
  const uint64_t incarnation_;
  const std::thread::id test_thread_;
  Gid gid_{};
  PortInfo port_;
  const std::string no_warning_;
  mutable std::mutex mu_;
  std::map<uint32_t, std::weak_ptr<const Region>> regions_;
  std::vector<std::weak_ptr<FakeQueuePair>> qps_;
  size_t qps_made_ = 0;
  size_t opens_ = 0;
  uint64_t registrations_ = 0;
  CompletionMode mode_ = CompletionMode::kWhenTold;
  DeviceMonitor::Report watcher_;  ///< who watch() was given (none: nobody watches)
  CompletedOps late_;
  bool flush_on_abort_ = true;
};

}  // namespace caf_rdma::testing
