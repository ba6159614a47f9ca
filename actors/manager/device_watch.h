// DeviceWatch: the RDMA device: its monitor, its loss (manager invariant 8), reopening it with
// backoff, and a peer's device loss. A part of the manager (actors/detail/manager_state.h): it
// works on the tables the front keeps (manager_tables.h) and holds no state of its own unless said
// below.
#pragma once

#include "actors/detail/manager_tables.h"

namespace caf_rdma::detail {

class ManagerState;

class DeviceWatch {
public:
  explicit DeviceWatch(ManagerState& m) : m_(m) {}
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  /// Starts the monitor of `domain_`.
  void watch_device();
  void device_changed(const DeviceChanged& e);
  /// Invariant 8: drops everything on the device, fails the RDMA ops in flight, tells peers.
  void lose_device(const std::string& what);
  void reopen_device(uint32_t attempt);
  /// A peer manager (the sender) lost its device: abort our connections to it.
  void peer_device_gone(const std::string& what);
  /// Aborts (their ops fail now, naming `reason`) the queue pairs and direct lanes between us
  /// and `peer`'s manager, or, with none, all of them and the loopback queue pair.
  void abort_connections(const std::string& reason, const caf::actor_addr* peer = nullptr);

private:
  ManagerState& m_;
};

}  // namespace caf_rdma::detail
