// HostView: what the doctor reads about a host, gathered once, so that every check is a function
// of it and a test can hand a check a fake host (a sysfs tree in a temporary folder, a memlock
// limit, a kernel release).
//
// Invariants:
//  1. The checks read files only below the roots named here, never "/sys" or "/proc" directly.
//  2. `of_this_host` never fails: what cannot be read is left empty, and the check that needs it
//     says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "primitives/device_list.h"

namespace caf_rdma::doctor {

struct HostView {
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";
  std::string kernel_release;  ///< uname -r
  uint64_t memlock_limit = 0;  ///< RLIMIT_MEMLOCK's soft limit in bytes; RLIM_INFINITY: none
  bool has_ipc_lock = false;   ///< CAP_IPC_LOCK in effect: pinning ignores the limit
  /// The RDMA devices ibverbs lists, with their ports (DeviceList::describe).
  std::vector<DeviceDescription> devices;
  /// Why the devices could not be listed ("" when they could, even when there are none).
  std::string devices_error;

  /// This host, this process.
  static HostView of_this_host();
};

/// The first line of `path`, without its newline; "" when it cannot be read.
std::string read_line(const std::string& path);

/// The names in directory `path`, sorted; empty when it cannot be read.
std::vector<std::string> list_directory(const std::string& path);

}  // namespace caf_rdma::doctor
