// A port's GID table as sysfs shows it: /sys/class/infiniband/<dev>/ports/<p>/gids/<i>, with
// each entry's network interface and RoCE version in gid_attrs/ndevs/<i> and gid_attrs/types/<i>.
//
// Invariants:
//  1. Unused entries (all zero, or unreadable) are left out; entries come by index.
//  2. The entries are caf-rdma's GidEntry, so `select_gid_index` judges them by its own rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "primitives/gid.h"

namespace caf_rdma::doctor {

/// The valid GID entries of `device` port `port` under `sysfs_root`; `is_ethernet`: an entry
/// whose type file cannot be read counts as RoCE v1 on Ethernet, InfiniBand otherwise.
std::vector<GidEntry> read_gid_table(const std::string& sysfs_root, const std::string& device,
                                     uint8_t port, bool is_ethernet);

}  // namespace caf_rdma::doctor
