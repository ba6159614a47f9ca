// Device checks: the RDMA devices and their ports, each port's GIDs and the one caf-rdma would
// use, and which device a process of each local rank would take.
//
// Invariants:
//  1. The choices are caf-rdma's own (`select_device`, `default_device_candidates`,
//     `select_gid_index`), made on what the HostView shows: the doctor says what a node would do.
//  2. A port the configuration would use (port CAF_RDMA_PORT, of CAF_RDMA_DEVICE when set) that
//     is not ACTIVE is a warning (no process takes it; a failure follows when no port is left).
//     An ACTIVE port without a usable GID is a failure: the default choice counts ACTIVE ports
//     only, so a process that takes it (by its local rank) cannot start RDMA.
#pragma once

#include "doctor/finding.h"
#include "doctor/host_view.h"
#include "primitives/ibverbs_config.h"

namespace caf_rdma::doctor {

/// Devices, ports (state, active MTU, link layer), GIDs with their interface and RoCE version,
/// the GID each active port would use. Returns the names of the devices whose port
/// `config.port_num` is ACTIVE with a usable GID (what the loopback check may try).
std::vector<std::string> check_devices(const HostView& host, const IbverbsConfig& config,
                                       Findings& out);

/// Which device a process takes: by CAF_RDMA_DEVICE, else each local rank's.
void check_device_choice(const HostView& host, const IbverbsConfig& config, Findings& out);

}  // namespace caf_rdma::doctor
