// RdmaDomain: one opened device port (context + protection domain) and memory registration: the
// ibverbs Nic (nic.h), whose queue pairs are RdmaQueuePairs.
//
// Invariants:
//  1. The config is validated, then clamped to the device's limits, once, at `open`. A device
//     that cannot create RC queue pairs (EFA) is refused at `open`, naming it.
//  2. Revocation: `register_buffer` makes a memory region of its own for every call, so every
//     buffer a peer may address has a remote key no other buffer shares; releasing the buffer
//     (and its copies) deregisters that region, which kills the key. Never one rkey for two
//     handles: a released handle grants nothing, whatever else is registered over its memory.
//  3. Only local-only memory (`register_local`: no remote access, its rkey grants nothing) is
//     served from a cache of live regions covering the range; such a region stays registered
//     while any buffer uses it (reference counted by shared_ptr).
//  4. Thread-safe.
//  5. Each `open` draws a fresh non-zero `incarnation` (getrandom). A device that went away and
//     came back is opened as a new domain, with a new incarnation: remote keys of the old one
//     are never posted to the new one (RdmaQueuePair checks RemoteBuffer::incarnation).
//  6. The GID is chosen at `open` and again by `refresh_gid` (same rules, same requested index
//     or netdev); readers get a consistent copy (index and GID under one lock).
//  7. Always owned by a shared_ptr (`open` makes it so): its queue pairs and monitors hold it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "components/nic.h"
#include "components/rdma_buffer.h"
#include "primitives/device_context.h"
#include "primitives/ibverbs_config.h"
#include "primitives/protection_domain.h"
#include "primitives/qp_info.h"

namespace caf_rdma {

/// The warning for a device on a kernel release (e.g. "6.1.0-31-amd64"): non-empty for
/// Soft-RoCE (`rxe`, vendor id 0xFFFFFF) on kernels before 6.2, whose rxe completes RDMA READs
/// with SUCCESS that moved no data under load (fixed by the rxe responder/completer rework
/// merged in 6.2).
std::string known_device_problem(const std::string& device, uint32_t vendor_id,
                                 const std::string& kernel_release);

class RdmaDomain final : public Nic, public std::enable_shared_from_this<RdmaDomain> {
public:
  /// Opens the device and port `config` selects (see `DeviceContext::open_selected`), picks the
  /// GID (`select_gid_index`), and fits the config to the device.
  static Result<std::shared_ptr<RdmaDomain>> open(const IbverbsConfig& config);

  const IbverbsConfig& config() const { return config_; }
  const std::string& device_name() const override { return context_->name(); }
  const PortInfo& port() const override { return port_; }
  bool port_active() const override;
  /// The GID this port uses now (invariant 6; `config().gid_index` is the choice at open).
  int gid_index() const;
  Gid gid() const override;
  /// This opening of the device (invariant 5); in QpInfo and in buffer handles.
  uint64_t incarnation() const override { return incarnation_; }
  /// The device's atomic capability is not IBV_ATOMIC_NONE.
  bool atomics() const override;
  std::string selection_note() const override { return context_->selection_note(); }
  const std::shared_ptr<DeviceContext>& context() const { return context_; }
  const std::shared_ptr<ProtectionDomain>& pd() const { return pd_; }

  /// A known problem of this device on this host that users must hear of ("" if none): Soft-RoCE
  /// (rxe) on a kernel older than 6.2 can complete RDMA READs whose data never arrived.
  const std::string& warning() const override { return warning_; }

  /// Re-reads the port's GID table and chooses again by the rules of `open` (after an address
  /// change: IBV_EVENT_GID_CHANGE). True when the choice changed; queue pairs made afterwards
  /// use the new one. Errors as `open`'s GID choice (no usable entry left).
  Result<bool> refresh_gid() override;

  /// Largest message one work request may carry on this port.
  uint64_t max_message_size() const { return port_.max_msg_sz; }

  /// Registers [addr, addr + size) as a region of its own (own rkey, see invariant 2) and
  /// returns a buffer over it. Errors: kInvalidArgument for null/zero, kIbverbsCall from
  /// ibv_reg_mr with errno (ENOMEM: see `ulimit -l`).
  Result<RdmaBuffer> register_buffer(void* addr, uint64_t size,
                                     Access access = Access::kReadWrite) override;

  /// Registers [addr, addr + size) for local use only (Access::kLocalWrite: the local side of
  /// work requests, never addressed by a peer), reusing a live local region that covers it.
  Result<RdmaBuffer> register_local(void* addr, uint64_t size) override;

  /// A buffer over a region registered elsewhere (GPU memory, see gpu_registration.h); not
  /// cached, deregistered when the last buffer using it goes.
  RdmaBuffer adopt_region(std::shared_ptr<MemoryRegion> region, uint64_t addr, uint64_t size,
                          Access access) const;

  /// GPUDirect: `memory` registers the GPU memory with this protection domain (adopt_region).
  Result<RdmaBuffer> register_gpu(const DeviceMemory& memory, const PointerInfo& info,
                                  uint64_t addr, uint64_t size, Access access) override;

  RegistrationStats registration_stats() const override;

  /// "rxe0 port 1 (RoCE, GID[1] ::ffff:10.99.0.1, MTU 1024)".
  std::string describe() const override;

  /// A CompletionRouter of min(`entries`, the device's max_cqe) entries.
  Result<std::shared_ptr<CompletionRouter>> shared_completions(int entries) override;
  /// An RdmaQueuePair (rdma_queue_pair.h).
  Result<std::shared_ptr<QpEndpoint>> make_qp(const QpOptions& options) override;
  /// A DeviceMonitor of this device's asynchronous events.
  Result<std::unique_ptr<DeviceMonitor>> watch(DeviceMonitor::Report report) override;

  /// QpInfo fields that come from the port: lid, gid, mtu, link layer (qp_num and psn are 0).
  QpInfo port_qp_info() const;

private:
  RdmaDomain() = default;

  IbverbsConfig config_;
  std::shared_ptr<DeviceContext> context_;
  std::shared_ptr<ProtectionDomain> pd_;
  PortInfo port_;
  int requested_gid_index_ = -1;  ///< config.gid_index as given to open (-1: automatic)
  mutable std::mutex gid_mu_;
  int gid_index_ = -1;  ///< guarded by gid_mu_
  Gid gid_{};           ///< guarded by gid_mu_
  std::string warning_;
  uint64_t incarnation_ = 0;

  mutable std::mutex mu_;
  /// Live regions by base address (weak: buffers own them); `local_` of them may be shared.
  std::multimap<uint64_t, std::weak_ptr<MemoryRegion>> regions_;
  std::multimap<uint64_t, std::weak_ptr<MemoryRegion>> local_;
  uint64_t inserted_ = 0;  ///< regions added since the last sweep of expired entries

  /// Drops expired entries now and then, so the maps stay as large as the live regions.
  void sweep_expired();
  uint64_t cache_hits_ = 0;
  uint64_t registrations_ = 0;
};

}  // namespace caf_rdma
