// NicCounters: the counters the kernel keeps for an RDMA device's ports, read from sysfs:
// <root>/<device>/ports/<port>/hw_counters/* (the driver's, e.g. rxe's sent_pkts,
// duplicate_request) and <root>/<device>/ports/<port>/counters/* (the InfiniBand port counters).
//
// Invariants:
//  1. Read when asked, never cached: each call sees the kernel's current values.
//  2. A file that is missing, unreadable or not a number is left out (drivers differ in what they
//     expose, some files need privileges); only a device folder that does not exist is an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// Where the kernel lists RDMA devices.
constexpr const char* kSysfsInfiniband = "/sys/class/infiniband";

/// One counter of one port.
struct NicCounter {
  std::string port;   ///< "1"
  std::string group;  ///< "hw_counters" or "counters"
  std::string name;   ///< the file's name, e.g. "sent_pkts"
  uint64_t value = 0;
};

/// Every counter of every port of `device` (invariants 1, 2), ordered by port, group and name;
/// not_found naming the folder when the device has none under `root`.
Result<std::vector<NicCounter>> read_nic_counters(const std::string& device,
                                                  const std::string& root = kSysfsInfiniband);

}  // namespace caf_rdma
