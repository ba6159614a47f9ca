#include "primitives/gid.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace caf_rdma {

const char* to_string(GidType type) {
  switch (type) {
    case GidType::kInfiniBand:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
  }
  return "unknown";
}

bool is_zero(const Gid& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

bool is_ipv4_mapped(const Gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid[i] != 0)
      return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool is_link_local(const Gid& gid) {
  return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

std::string to_string(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf)) == nullptr)
    return "<invalid gid>";
  return buf;
}

Result<Gid> parse_gid(const std::string& text) {
  Gid gid{};
  if (inet_pton(AF_INET6, text.c_str(), gid.data()) != 1)
    return Error(ErrorCode::kInvalidArgument, "'" + text + "' is not a GID (IPv6 text form)");
  return gid;
}

namespace {

std::string describe_table(const std::vector<GidEntry>& table) {
  if (table.empty())
    return "the GID table is empty";
  std::string out = "GID table:";
  for (const auto& e : table)
    out += " [" + std::to_string(e.index) + "] " + to_string(e.gid) + " (" + to_string(e.type) +
           (e.netdev.empty() ? "" : ", " + e.netdev) + ")";
  return out;
}

}  // namespace

Result<int> select_gid_index(const std::vector<GidEntry>& table, bool is_ethernet,
                             int override_index, const std::string& where,
                             const std::string& netdev) {
  if (override_index >= 0) {
    for (const auto& e : table)
      if (e.index == override_index)
        return override_index;
    return Error(ErrorCode::kDeviceNotFound, "GID index " + std::to_string(override_index) +
                                                 " is not a valid entry on " + where + "; " +
                                                 describe_table(table));
  }
  if (!is_ethernet) {
    if (!netdev.empty())
      return Error(ErrorCode::kInvalidArgument,
                   "a netdev ('" + netdev + "', CAF_RDMA_NETDEV) selects among RoCE GIDs, but " +
                       where + " is InfiniBand");
    if (!table.empty())
      return table.front().index;
    return Error(ErrorCode::kDeviceNotFound, "no GID on " + where + "; " + describe_table(table));
  }
  if (!netdev.empty()) {
    bool any = false;
    for (const auto& e : table)
      any = any || e.netdev == netdev;
    if (!any)
      return Error(ErrorCode::kDeviceNotFound, "no GID of " + where + " belongs to netdev '" +
                                                   netdev + "' (CAF_RDMA_NETDEV); " +
                                                   describe_table(table));
  }
  auto first = [&](auto pred) -> int {
    for (const auto& e : table)
      if ((netdev.empty() || e.netdev == netdev) && pred(e))
        return e.index;
    return -1;
  };
  int idx =
      first([](const GidEntry& e) { return e.type == GidType::kRoceV2 && is_ipv4_mapped(e.gid); });
  if (idx < 0)
    idx = first(
        [](const GidEntry& e) { return e.type == GidType::kRoceV2 && !is_link_local(e.gid); });
  if (idx < 0)
    idx = first([](const GidEntry& e) { return e.type == GidType::kRoceV2; });
  if (idx < 0)
    idx = first([](const GidEntry& e) { return e.type == GidType::kRoceV1; });
  if (idx < 0)
    return Error(ErrorCode::kDeviceNotFound, "no RoCE GID on Ethernet port " + where +
                                                 (netdev.empty() ? "" : " for netdev " + netdev) +
                                                 " (is an IP address configured on its netdev?); " +
                                                 describe_table(table));
  return idx;
}

}  // namespace caf_rdma
