// GIDs (global identifiers): the 128-bit addresses of RoCE and routed InfiniBand ports.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// A raw 16-byte GID, in network byte order as ibverbs stores it.
using Gid = std::array<uint8_t, 16>;

/// How a GID table entry is used on the wire.
enum class GidType : uint8_t {
  kInfiniBand = 0,  ///< native InfiniBand GID (link layer InfiniBand)
  kRoceV1 = 1,      ///< RoCE v1: Ethernet frames with a GRH, not routable over IP
  kRoceV2 = 2,      ///< RoCE v2: UDP/IP (port 4791), routable; the usual choice on Ethernet
};

/// "IB", "RoCE v1", "RoCE v2".
const char* to_string(GidType type);

/// One valid entry of a port's GID table.
struct GidEntry {
  int index = 0;
  Gid gid{};
  GidType type = GidType::kInfiniBand;
  /// The network interface the entry belongs to (RoCE: its netdev or VLAN netdev, e.g.
  /// "eth1", "eth1.100"); empty when the device names none (InfiniBand).
  std::string netdev;
};

/// True when all 16 bytes are zero (an unused table slot).
bool is_zero(const Gid& gid);

/// True for IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), the GIDs RoCE v2 uses for IPv4.
bool is_ipv4_mapped(const Gid& gid);

/// True for fe80::/10 (link-local, derived from the MAC address).
bool is_link_local(const Gid& gid);

/// IPv6 text form, e.g. "fe80::8c09:9fff:fee6:4158" or "::ffff:10.99.0.1".
std::string to_string(const Gid& gid);

/// Parses the IPv6 text form (as printed by `ibv_devinfo -v` or `to_string`).
Result<Gid> parse_gid(const std::string& text);

/// Picks the GID index to use for connections on a port.
///
/// - `override_index` >= 0: that index, which must be a valid entry of `table`.
/// - Ethernet (`is_ethernet`): the first RoCE v2 entry with an IPv4-mapped address, else the
///   first RoCE v2 entry that is not link-local, else the first RoCE v2 entry, else the first
///   RoCE v1 entry.
/// - InfiniBand: index 0 (connections address by LID; the GID is only used across subnets).
/// - `netdev` (RoCE only; CAF_RDMA_NETDEV): the automatic choice above among the entries of
///   that network interface only (a host with several interfaces or VLANs on one port has a
///   RoCE v2 GID per address; the one of the network the peers are on must be used).
/// Fails with kDeviceNotFound naming `where` and listing the table when nothing fits.
Result<int> select_gid_index(const std::vector<GidEntry>& table, bool is_ethernet,
                             int override_index, const std::string& where,
                             const std::string& netdev = "");

}  // namespace caf_rdma
