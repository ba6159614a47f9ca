// DeviceWatch: the RDMA device: its monitor, its loss, reopening it with backoff, and a peer's
// device loss.
//
// A part of the manager (actors/manager/manager_part.h); what is its own is below.
//
// Invariants (numbered as the manager's, which lists them all):
//  8. Device loss (this file): when the DeviceMonitor says the device went away, every
//     queue pair, registration and bounce buffer on it is dropped before any reply, the RDMA
//     ops in flight fail at once (no_device, naming the device and why), and peers are told
//     (device_gone). Until the device is opened again (retried with backoff) transfers take the
//     fallback (auto) or fail naming why (rdma). Afterwards live host buffers are registered
//     again; their old handles carry the old incarnation and move through the owner, so a
//     stale remote key never reaches a NIC.
#pragma once

#include "actors/detail/manager_tables.h"
#include "actors/manager/manager_part.h"

namespace caf_rdma::detail {

class DeviceWatch : public ManagerPart {
public:
  using ManagerPart::ManagerPart;

  /// Starts the monitor of the primary device (`RdmaLinks::domain`).
  void watch_device();
  /// A monitor of `domain` whose events come to the manager as DeviceChanged (with its
  /// incarnation); null (with a warning saying `unwatched`: what then shows a failure) when it
  /// cannot be started. The rails' monitors too (rails.h).
  std::unique_ptr<DeviceMonitor> monitor(Nic& domain, const std::string& unwatched);
  void device_changed(const DeviceChanged& e);
  /// Invariant 8: drops everything on the device, fails the RDMA ops in flight, tells peers.
  void lose_device(const std::string& what);
  void reopen_device(uint32_t attempt);
  /// A peer manager (the sender) lost its device: abort our connections to it.
  void peer_device_gone(const std::string& what);
  /// Aborts (their ops fail now, naming `reason`) the queue pairs and direct lanes between us
  /// and `peer`'s manager, or, with none, all of them and the loopback queue pair.
  void abort_connections(const std::string& reason, const caf::actor_addr* peer = nullptr);
};

}  // namespace caf_rdma::detail
