// Nic: one RDMA device port as the RDMA manager uses it: what it is called and which opening of
// it this is, its port, memory registration, queue pairs and the events it reports. RdmaDomain
// (rdma_domain.h, ibverbs) is the real one; a fake one (named as such, in tests) can stand in its
// place, with queue pairs of its own (QpEndpoint). Issue 49's transport seam: the actors layer
// holds devices only through this interface.
//
// Invariants (each implementation keeps them; rdma_domain.h says how the real one does):
//  1. `incarnation()` is non-zero and fixed for the object's life; a device that went away and
//     came back is a new Nic with a new incarnation. Buffers and queue pairs carry it: a remote
//     key of one incarnation is never posted to a queue pair connected to another.
//  2. `register_buffer` gives every call a region of its own: its remote key is shared with no
//     other buffer, and releasing the buffer (and its copies) revokes it.
//  3. Queue pairs from `make_qp` keep QpEndpoint's invariants; those made with a router from
//     `shared_completions` complete through it, the others through their own `progress`.
//  4. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "components/completion_router.h"
#include "components/device_memory.h"
#include "components/device_monitor.h"
#include "components/qp_endpoint.h"
#include "components/rdma_buffer.h"
#include "primitives/device_list.h"
#include "primitives/gid.h"
#include "primitives/status.h"

namespace caf_rdma {

/// Counters of the registration cache.
struct RegistrationStats {
  uint64_t live_regions = 0;      ///< memory regions currently registered
  uint64_t registered_bytes = 0;  ///< their total length
  uint64_t cache_hits = 0;        ///< local registrations served by an existing region
  uint64_t registrations = 0;     ///< ibv_reg_mr calls that succeeded
};

class Nic {
public:
  Nic() = default;
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;
  virtual ~Nic() = default;

  // -- what it is ----------------------------------------------------------------------------

  /// "rxe0".
  virtual const std::string& device_name() const = 0;
  /// "rxe0 port 1 (RoCE, GID[1] ::ffff:10.99.0.1, MTU 1024)".
  virtual std::string describe() const = 0;
  /// This opening of the device (invariant 1).
  virtual uint64_t incarnation() const = 0;
  /// The port as it was opened (its number, link layer, MTU, limits).
  virtual const PortInfo& port() const = 0;
  /// Whether the port is active now (asked of the device, not remembered).
  virtual bool port_active() const = 0;
  /// The GID the port uses now.
  virtual Gid gid() const = 0;
  /// Chooses the GID again (after an address change); true when the choice changed.
  virtual Result<bool> refresh_gid() = 0;
  /// Whether the device does RDMA atomics (FETCH_ADD, CMP_SWAP).
  virtual bool atomics() const = 0;
  /// A known problem of this device on this host that users must hear of ("" if none).
  virtual const std::string& warning() const = 0;
  /// How the device was chosen among several, when that is worth saying ("" if not).
  virtual std::string selection_note() const = 0;

  // -- memory --------------------------------------------------------------------------------

  /// Registers [addr, addr + size) as a region of its own (invariant 2).
  virtual Result<RdmaBuffer> register_buffer(void* addr, uint64_t size, Access access) = 0;
  /// Registers [addr, addr + size) for local use only (the local side of work requests).
  virtual Result<RdmaBuffer> register_local(void* addr, uint64_t size) = 0;
  /// Registers GPU memory `info` describes for the NIC to reach directly (GPUDirect), through
  /// `memory`; the error says why it cannot (the memory is then staged through host buffers).
  virtual Result<RdmaBuffer> register_gpu(const DeviceMemory& memory, const PointerInfo& info,
                                          uint64_t addr, uint64_t size, Access access) = 0;
  virtual RegistrationStats registration_stats() const = 0;

  // -- queue pairs and events ----------------------------------------------------------------

  /// A completion queue for many queue pairs of this device, of about `entries` entries (fewer
  /// where the device allows fewer); null: its queue pairs take their own completions.
  virtual Result<std::shared_ptr<CompletionRouter>> shared_completions(int entries) = 0;
  /// A new, unconnected queue pair (invariant 3).
  virtual Result<std::shared_ptr<QpEndpoint>> make_qp(const QpOptions& options) = 0;
  /// Starts reporting the device's events (port up or down, GID change, loss) to `report`, on
  /// a thread of its own, until the returned monitor goes; null: this device reports none.
  virtual Result<std::unique_ptr<DeviceMonitor>> watch(DeviceMonitor::Report report) = 0;
};

}  // namespace caf_rdma
