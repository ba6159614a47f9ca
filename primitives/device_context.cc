#include "primitives/device_context.h"

#include "primitives/pcie_topology.h"

#include <net/if.h>

#include <algorithm>
#include <cerrno>

#include "primitives/ibverbs_error.h"

namespace caf_rdma {

Result<std::shared_ptr<DeviceContext>> DeviceContext::open(const std::string& name) {
  CAF_RDMA_ASSIGN_OR_RETURN(DeviceList list, DeviceList::get());
  std::vector<DeviceDescription> names;
  for (size_t i = 0; i < list.size(); ++i)
    names.push_back(DeviceDescription{list.name(i), {}});
  for (size_t i = 0; i < list.size(); ++i) {
    if (list.name(i) != name)
      continue;
    errno = 0;
    ibv_context* ctx = ibv_open_device(list.at(i));
    if (ctx == nullptr)
      return ibverbs_error("ibv_open_device", errno ? errno : ENODEV, "device " + name);
    ibv_device_attr attr{};
    if (int rc = ibv_query_device(ctx, &attr); rc != 0) {
      ibv_close_device(ctx);
      return ibverbs_error("ibv_query_device", rc, "device " + name);
    }
    return std::shared_ptr<DeviceContext>(new DeviceContext(ctx, name, attr, list.at(i)->dev_path));
  }
  if (list.empty())
    return Error(ErrorCode::kNoDevice,
                 "no RDMA device found while looking for '" + name + "'. " + kNoDeviceHint);
  std::string all;
  for (const auto& n : list.names())
    all += (all.empty() ? "" : ", ") + n;
  return Error(ErrorCode::kDeviceNotFound, "RDMA device '" + name + "' not found; devices: " + all);
}

Result<std::shared_ptr<DeviceContext>> DeviceContext::open_selected(const IbverbsConfig& config) {
  CAF_RDMA_RETURN_IF_ERROR(config.validate());
  CAF_RDMA_ASSIGN_OR_RETURN(DeviceList list, DeviceList::get());
  auto devices = list.describe();
  if (config.device_name.empty() && !config.near_pci_device.empty() && !devices.empty()) {
    std::vector<std::string> names;
    names.reserve(devices.size());
    for (const auto& d : devices)
      names.push_back(d.name);
    // The closest NIC to the GPU whose port is active; none active: the usual error below.
    for (const auto& nic : rank_nics_by_distance("/sys", config.near_pci_device, names))
      for (const auto& d : devices)
        if (d.name == nic.name && has_active_port(d, config.port_num))
          return open(nic.name);
  }
  CAF_RDMA_ASSIGN_OR_RETURN(
      size_t index, select_device(devices, config.device_name, config.port_num, config.local_rank));
  CAF_RDMA_ASSIGN_OR_RETURN(auto ctx, open(devices[index].name));
  auto candidates = default_device_candidates(devices, config.port_num);
  if (config.device_name.empty() && config.local_rank < 0 && candidates.size() > 1 &&
      devices[candidates[0]].on_pci) {
    std::string all;
    for (size_t i : candidates)
      all += (all.empty() ? "" : ", ") + devices[i].name;
    ctx->selection_note_ = std::to_string(candidates.size()) +
                           " RDMA devices have an active port " + std::to_string(config.port_num) +
                           " (" + all + "); took " + devices[index].name +
                           ", the first: every process that does not say otherwise takes it. "
                           "Set CAF_RDMA_DEVICE, CAF_RDMA_GPU (the NIC closest to that GPU) or "
                           "CAF_RDMA_LOCAL_RANK (or the launcher's LOCAL_RANK, "
                           "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID) to spread processes.";
  }
  return ctx;
}

DeviceContext::~DeviceContext() {
  ibv_close_device(context_);
}

Result<PortInfo> DeviceContext::query_port(uint8_t port_num) const {
  if (port_num < 1 || port_num > attr_.phys_port_cnt)
    return Error(ErrorCode::kDeviceNotFound, "device " + name_ + " has no port " +
                                                 std::to_string(port_num) + " (it has " +
                                                 std::to_string(attr_.phys_port_cnt) + ")");
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(context_, port_num, &pa); rc != 0)
    return ibverbs_error("ibv_query_port", rc, name_ + " port " + std::to_string(port_num));
  return port_info_from(pa, port_num);
}

Result<DeviceLimits> DeviceContext::limits(uint8_t port_num) const {
  CAF_RDMA_ASSIGN_OR_RETURN(PortInfo port, query_port(port_num));
  DeviceLimits l;
  l.max_qp_wr = static_cast<uint32_t>(attr_.max_qp_wr);
  l.max_sge = static_cast<uint32_t>(attr_.max_sge);
  l.max_qp_rd_atom = static_cast<uint32_t>(attr_.max_qp_rd_atom);
  l.max_qp_init_rd_atom = static_cast<uint32_t>(attr_.max_qp_init_rd_atom);
  l.max_cqe = static_cast<uint32_t>(attr_.max_cqe);
  l.active_mtu = port.active_mtu;
  l.max_msg_sz = port.max_msg_sz;
  return l;
}

Result<std::vector<GidEntry>> DeviceContext::gid_table(uint8_t port_num) const {
  CAF_RDMA_ASSIGN_OR_RETURN(PortInfo port, query_port(port_num));
  size_t capacity = 0;
  for (uint8_t p = 1; p <= attr_.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(context_, p, &pa) == 0)
      capacity += static_cast<size_t>(pa.gid_tbl_len);
  }
  if (capacity == 0)
    capacity = static_cast<size_t>(port.gid_tbl_len);
  std::vector<ibv_gid_entry> raw(capacity > 0 ? capacity : 1);
  ssize_t n = ibv_query_gid_table(context_, raw.data(), raw.size(), 0);
  if (n < 0)
    return ibverbs_error("ibv_query_gid_table", static_cast<int>(-n),
                         name_ + " port " + std::to_string(port_num));
  std::vector<GidEntry> out;
  for (ssize_t i = 0; i < n; ++i) {
    const auto& e = raw[static_cast<size_t>(i)];
    if (e.port_num != port_num)
      continue;
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::copy(std::begin(e.gid.raw), std::end(e.gid.raw), g.gid.begin());
    switch (e.gid_type) {
      case IBV_GID_TYPE_ROCE_V1:
        g.type = GidType::kRoceV1;
        break;
      case IBV_GID_TYPE_ROCE_V2:
        g.type = GidType::kRoceV2;
        break;
      default:
        g.type = GidType::kInfiniBand;
        break;
    }
    char netdev[IF_NAMESIZE] = {};
    if (e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, netdev) != nullptr)
      g.netdev = netdev;
    out.push_back(g);
  }
  std::sort(out.begin(), out.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return out;
}

}  // namespace caf_rdma
