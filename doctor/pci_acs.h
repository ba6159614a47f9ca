// PCIe Access Control Services (ACS) of a bridge, from its configuration space in sysfs
// (/sys/devices/.../<bdf>/config). ACS P2P Request/Completion Redirect on a bridge between a GPU
// and a NIC sends their peer-to-peer traffic up to the root complex: GPUDirect RDMA then runs
// slower or not at all.
//
// Invariants:
//  1. Reads only the file; the extended capabilities (from offset 0x100) exist only when the whole
//     4 KiB space is readable, which for most devices needs root: anything shorter is
//     kNotReadable, never "no ACS".
//  2. The capability list is walked at most 512 steps (a looping list ends the walk).
#pragma once

#include <cstdint>
#include <string>

namespace caf_rdma::doctor {

struct AcsState {
  enum Kind { kNotReadable, kAbsent, kPresent } kind = kNotReadable;
  uint16_t control = 0;  ///< the ACS Control register (kPresent)

  /// P2P Request Redirect (bit 2) or P2P Completion Redirect (bit 3) enabled.
  bool redirects() const { return kind == kPresent && (control & 0x000c) != 0; }
};

/// The ACS state of the PCI device whose configuration space is the file `config_path`.
AcsState read_acs(const std::string& config_path);

}  // namespace caf_rdma::doctor
