// RdmaDomain: one opened device port (context + protection domain) and memory registration
// with a range cache.
//
// Invariants:
//  1. The config is validated, then clamped to the device's limits, once, at `open`.
//  2. Registering a range that an existing live region (with enough access) covers reuses that
//     region; the region stays registered while any RdmaBuffer uses it and is deregistered when
//     the last one is released or destroyed (reference counted by shared_ptr).
//  3. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "components/rdma_buffer.h"
#include "primitives/device_context.h"
#include "primitives/ibverbs_config.h"
#include "primitives/protection_domain.h"
#include "primitives/qp_info.h"

namespace caf_rdma {

/// Counters of the registration cache.
struct RegistrationStats {
  uint64_t live_regions = 0;      ///< memory regions currently registered
  uint64_t registered_bytes = 0;  ///< their total length
  uint64_t cache_hits = 0;        ///< registrations served by an existing region
  uint64_t registrations = 0;     ///< ibv_reg_mr calls that succeeded
};

class RdmaDomain {
public:
  /// Opens the device and port `config` selects (see `DeviceContext::open_selected`), picks the
  /// GID (`select_gid_index`), and fits the config to the device.
  static Result<std::shared_ptr<RdmaDomain>> open(const IbverbsConfig& config);

  const IbverbsConfig& config() const { return config_; }
  const std::string& device_name() const { return context_->name(); }
  const PortInfo& port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const Gid& gid() const { return gid_; }
  const std::shared_ptr<DeviceContext>& context() const { return context_; }
  const std::shared_ptr<ProtectionDomain>& pd() const { return pd_; }

  /// Largest message one work request may carry on this port.
  uint64_t max_message_size() const { return port_.max_msg_sz; }

  /// Registers [addr, addr + size) (or reuses a live region covering it) and returns a buffer.
  /// Errors: kInvalidArgument for null/zero, kIbverbsCall from ibv_reg_mr with errno.
  Result<RdmaBuffer> register_buffer(void* addr, uint64_t size, Access access = Access::kReadWrite);

  /// A buffer over a region registered elsewhere (GPU memory, see gpu_registration.h); not
  /// cached, deregistered when the last buffer using it goes.
  RdmaBuffer adopt_region(std::shared_ptr<MemoryRegion> region, uint64_t addr, uint64_t size,
                          Access access) const;

  RegistrationStats registration_stats() const;

  /// "rxe0 port 1 (RoCE, GID[1] ::ffff:10.99.0.1, MTU 1024)".
  std::string describe() const;

  /// QpInfo fields that come from the port: lid, gid, mtu, link layer (qp_num and psn are 0).
  QpInfo port_qp_info() const;

private:
  RdmaDomain() = default;

  IbverbsConfig config_;
  std::shared_ptr<DeviceContext> context_;
  std::shared_ptr<ProtectionDomain> pd_;
  PortInfo port_;
  int gid_index_ = -1;
  Gid gid_{};

  mutable std::mutex mu_;
  /// Live regions by base address (weak: buffers own them).
  std::multimap<uint64_t, std::weak_ptr<MemoryRegion>> regions_;
  uint64_t cache_hits_ = 0;
  uint64_t registrations_ = 0;
};

}  // namespace caf_rdma
