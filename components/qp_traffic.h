// QpTraffic: what a queue pair's packets carry for a fabric's quality of service, where it is
// not the device's: the GRH traffic class (RoCE: DSCP << 2 | ECN; lossless fabrics put PFC or
// ECN on one DSCP) and the address vector's service level (InfiniBand: the virtual lane; RoCE:
// the priority, where the provider maps it). A priority class's queue pairs carry their class's
// (ManagerOptions::latency_traffic, background_traffic).
//
// Invariants:
//  1. -1 means the device's own (IbverbsConfig::traffic_class, service_level); any other value
//     is in range (traffic class 0..255, service level 0..15) or refused by `check`, which
//     names the field, whose it is and the value: the one rule, for the manager's options and
//     for a queue pair's.
#pragma once

#include <string>

#include "primitives/status.h"

namespace caf_rdma {

struct QpTraffic {
  int traffic_class = -1;  ///< -1 or 0..255
  int service_level = -1;  ///< -1 or 0..15

  bool operator==(const QpTraffic& o) const {
    return traffic_class == o.traffic_class && service_level == o.service_level;
  }
  bool operator!=(const QpTraffic& o) const { return !(*this == o); }

  /// Invariant 1; `whose` names it in the error ("ManagerOptions::latency_traffic").
  Status check(const std::string& whose) const;
};

}  // namespace caf_rdma
