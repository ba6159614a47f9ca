#include "primitives/ibverbs_config.h"

#include "primitives/pcie_topology.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <random>
#include <type_traits>

namespace caf_rdma {

uint32_t mtu_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

uint32_t random_psn() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  return std::uniform_int_distribution<uint32_t>(0, 0xffffff)(gen);
}

namespace {

Error bad_field(const char* field, long long value, const char* range) {
  return Error(ErrorCode::kInvalidArgument, std::string("IbverbsConfig.") + field + " = " +
                                                std::to_string(value) + " is invalid; expected " +
                                                range);
}

/// An interface name as the kernel takes it: 1..15 bytes, no '/', ':' or white space.
bool is_interface_name(const std::string& name) {
  return !name.empty() && name.size() <= 15 && name.find_first_of("/: \t\n") == std::string::npos;
}

}  // namespace

Status IbverbsConfig::validate() const {
  if (port_num < 1)
    return bad_field("port_num", port_num, "1 or more");
  if (gid_index < -1 || gid_index > 65535)
    return bad_field("gid_index", gid_index, "-1 (auto) or a table index 0..65535");
  if (max_send_wr < 1)
    return bad_field("max_send_wr", max_send_wr, "1 or more");
  if (max_recv_wr < 1)
    return bad_field("max_recv_wr", max_recv_wr, "1 or more");
  if (max_send_sge < 1)
    return bad_field("max_send_sge", max_send_sge, "1 or more");
  if (max_recv_sge < 1)
    return bad_field("max_recv_sge", max_recv_sge, "1 or more");
  if (mtu_bytes(path_mtu) == 0)
    return bad_field("path_mtu", path_mtu, "an ibv_mtu value (IBV_MTU_256 .. IBV_MTU_4096)");
  if (retry_cnt > 7)
    return bad_field("retry_cnt", retry_cnt, "0..7");
  if (rnr_retry > 7)
    return bad_field("rnr_retry", rnr_retry, "0..7 (7 = retry forever)");
  if (local_rank < -1)
    return bad_field("local_rank", local_rank, "-1 (none) or a rank 0 or more");
  if (qp_timeout < 1 || qp_timeout > 31)
    return bad_field("qp_timeout", qp_timeout, "1..31 (0 would wait for an ACK forever)");
  if (min_rnr_timer > 31)
    return bad_field("min_rnr_timer", min_rnr_timer, "0..31");
  if (max_rd_atomic < 1)
    return bad_field("max_rd_atomic", max_rd_atomic, "1 or more");
  if (max_dest_rd_atomic < 1)
    return bad_field("max_dest_rd_atomic", max_dest_rd_atomic, "1 or more");
  if (hop_limit < 1)
    return bad_field("hop_limit", hop_limit, "1..255");
  if (service_level > 15)
    return bad_field("service_level", service_level, "0..15");
  if (!netdev.empty() && !is_interface_name(netdev))
    return Error(ErrorCode::kInvalidArgument,
                 "IbverbsConfig.netdev = '" + netdev +
                     "' is invalid; expected a network interface name like eth1 or eth1.100");
  if (!near_pci_device.empty() && normalize_pci_bus_id(near_pci_device).empty())
    return Error(ErrorCode::kInvalidArgument,
                 "IbverbsConfig.near_pci_device = '" + near_pci_device +
                     "' is invalid; expected a PCI address like 0000:3b:00.0 (or 3b:00.0)");
  return {};
}

IbverbsConfig IbverbsConfig::clamped(const DeviceLimits& limits) const {
  IbverbsConfig out = *this;
  if (limits.active_mtu != 0 && out.path_mtu > limits.active_mtu)
    out.path_mtu = limits.active_mtu;
  auto clamp_u32 = [](uint32_t v, uint32_t cap) { return cap == 0 ? v : std::min(v, cap); };
  auto clamp_u8 = [](uint8_t v, uint32_t cap) {
    return cap == 0 ? v : static_cast<uint8_t>(std::min<uint32_t>(v, cap));
  };
  out.max_send_wr = clamp_u32(out.max_send_wr, limits.max_qp_wr);
  out.max_recv_wr = clamp_u32(out.max_recv_wr, limits.max_qp_wr);
  out.max_send_sge = clamp_u32(out.max_send_sge, limits.max_sge);
  out.max_recv_sge = clamp_u32(out.max_recv_sge, limits.max_sge);
  // As initiator a QP may have max_qp_init_rd_atom READs/atomics outstanding; as responder it
  // takes max_qp_rd_atom of them (ibv_query_device(3)).
  out.max_rd_atomic = clamp_u8(out.max_rd_atomic, limits.max_qp_init_rd_atom);
  out.max_dest_rd_atomic = clamp_u8(out.max_dest_rd_atomic, limits.max_qp_rd_atom);
  out.cq_entries = clamp_u32(out.effective_cq_entries(), limits.max_cqe);
  return out;
}

uint32_t IbverbsConfig::effective_cq_entries() const {
  return cq_entries != 0 ? cq_entries : max_send_wr + max_recv_wr;
}

Result<IbverbsConfig> IbverbsConfig::from_env() {
  return from_env(IbverbsConfig{});
}

Result<IbverbsConfig> IbverbsConfig::from_env(
    IbverbsConfig base, const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* name) -> const char* {
    return getenv_fn ? getenv_fn(name) : std::getenv(name);
  };
  auto parse_int = [](const char* var, const char* text, long lo, long hi) -> Result<long> {
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
      return Error(ErrorCode::kInvalidArgument, std::string("environment variable ") + var + "='" +
                                                    text + "' is not an integer in " +
                                                    std::to_string(lo) + ".." + std::to_string(hi));
    return v;
  };
  if (const char* v = get(kEnvDevice); v != nullptr && *v != '\0')
    base.device_name = v;
  // An integer variable, when set, into `field` (its range is checked first).
  auto set_int = [&](const char* var, long lo, long hi, auto& field) -> Status {
    if (const char* v = get(var); v != nullptr && *v != '\0') {
      CAF_RDMA_ASSIGN_OR_RETURN(long value, parse_int(var, v, lo, hi));
      field = static_cast<std::remove_reference_t<decltype(field)>>(value);
    }
    return {};
  };
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvPort, 1, 255, base.port_num));
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvGidIndex, 0, 65535, base.gid_index));
  if (const char* v = get(kEnvNetdev); v != nullptr && *v != '\0') {
    if (!is_interface_name(v))
      return Error(ErrorCode::kInvalidArgument,
                   std::string("environment variable ") + kEnvNetdev + "='" + v +
                       "' is not a network interface name (like eth1 or eth1.100)");
    base.netdev = v;
  }
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvTrafficClass, 0, 255, base.traffic_class));
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvServiceLevel, 0, 15, base.service_level));
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvTimeout, 1, 31, base.qp_timeout));
  // Our own variable must be valid; a launcher's that is not a rank is not ours to refuse.
  CAF_RDMA_RETURN_IF_ERROR(set_int(kEnvLocalRank, 0, 1 << 20, base.local_rank));
  if (const char* own = get(kEnvLocalRank); own == nullptr || *own == '\0') {
    for (const char* var : kLauncherLocalRankVariables) {
      const char* v = get(var);
      if (v == nullptr || *v == '\0')
        continue;
      if (auto rank = parse_int(var, v, 0, 1 << 20); rank.ok()) {
        base.local_rank = static_cast<int>(*rank);
        break;
      }
    }
  }
  CAF_RDMA_RETURN_IF_ERROR(base.validate());
  return base;
}

}  // namespace caf_rdma
