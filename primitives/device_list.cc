#include "primitives/device_list.h"

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "primitives/ibverbs_error.h"
#include "primitives/pcie_topology.h"

namespace caf_rdma {

const char* const kNoDeviceHint =
    "To get one: run on a host with RDMA hardware (InfiniBand or RoCE NIC with rdma-core "
    "installed), or inside the Soft-RoCE VM caf-rdma ships (in caf-rdma's checkout: "
    "`bazel test --config=rxe //...` for its tests, `tests/rxe_vm/run_in_vm.sh COMMAND` for any "
    "program, yours included); or use the fallback transport, which needs no device.";

PortInfo port_info_from(const ibv_port_attr& attr, uint8_t port_num) {
  PortInfo info;
  info.port_num = port_num;
  info.state = attr.state;
  info.is_ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  info.active_mtu = attr.active_mtu;
  info.max_mtu = attr.max_mtu;
  info.lid = attr.lid;
  info.max_msg_sz = attr.max_msg_sz;
  info.gid_tbl_len = attr.gid_tbl_len;
  return info;
}

Result<DeviceList> DeviceList::get() {
  int count = 0;
  errno = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices == nullptr) {
    // ENOSYS: the kernel has no RDMA support at all; treat as "no device" with the errno.
    int err = errno;
    if (err == ENOSYS || err == 0 || err == ENOENT)
      return DeviceList(nullptr, 0);
    return ibverbs_error("ibv_get_device_list", err, "this host");
  }
  return DeviceList(devices, count);
}

DeviceList::DeviceList(DeviceList&& other) noexcept
    : devices_(other.devices_), count_(other.count_) {
  other.devices_ = nullptr;
  other.count_ = 0;
}

DeviceList& DeviceList::operator=(DeviceList&& other) noexcept {
  if (this != &other) {
    if (devices_ != nullptr)
      ibv_free_device_list(devices_);
    devices_ = other.devices_;
    count_ = other.count_;
    other.devices_ = nullptr;
    other.count_ = 0;
  }
  return *this;
}

DeviceList::~DeviceList() {
  if (devices_ != nullptr)
    ibv_free_device_list(devices_);
}

std::string DeviceList::name(size_t i) const {
  return ibv_get_device_name(devices_[i]);
}

std::vector<std::string> DeviceList::names() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < size(); ++i)
    out.push_back(name(i));
  return out;
}

std::vector<DeviceDescription> DeviceList::describe() const {
  std::vector<DeviceDescription> out;
  for (size_t i = 0; i < size(); ++i) {
    DeviceDescription d;
    d.name = name(i);
    d.on_pci = !rdma_device_path("/sys", d.name).empty();
    if (ibv_context* ctx = ibv_open_device(devices_[i]); ctx != nullptr) {
      ibv_device_attr attr{};
      if (ibv_query_device(ctx, &attr) == 0) {
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
          ibv_port_attr pa{};
          if (ibv_query_port(ctx, p, &pa) != 0)
            continue;
          d.ports.push_back(port_info_from(pa, p));
        }
      }
      ibv_close_device(ctx);
    }
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

// Name order with digit runs compared as numbers: mlx5_2 < mlx5_10.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2])))
        ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2])))
        ++j2;
      // Equal-width comparison after stripping leading zeros.
      std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
      x.erase(0, std::min(x.find_first_not_of('0'), x.size() - 1));
      y.erase(0, std::min(y.find_first_not_of('0'), y.size() - 1));
      if (x.size() != y.size())
        return x.size() < y.size();
      if (x != y)
        return x < y;
      i = i2;
      j = j2;
      continue;
    }
    if (a[i] != b[j])
      return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::string describe_devices(const std::vector<DeviceDescription>& devices) {
  std::string out;
  for (const auto& d : devices) {
    if (!out.empty())
      out += ", ";
    out += d.name + " (";
    if (d.ports.empty())
      out += "could not be opened";
    for (size_t i = 0; i < d.ports.size(); ++i) {
      if (i > 0)
        out += ", ";
      out += "port " + std::to_string(d.ports[i].port_num) + " " +
             ibv_port_state_str(d.ports[i].state);
    }
    out += ")";
  }
  return out;
}

}  // namespace

std::vector<size_t> default_device_candidates(const std::vector<DeviceDescription>& devices,
                                              uint8_t port_num) {
  std::vector<size_t> out;
  bool any_pci = false;
  for (const auto& d : devices)
    any_pci = any_pci || (d.on_pci && has_active_port(d, port_num));
  for (size_t i = 0; i < devices.size(); ++i)
    if (has_active_port(devices[i], port_num) && (devices[i].on_pci || !any_pci))
      out.push_back(i);
  std::sort(out.begin(), out.end(),
            [&](size_t a, size_t b) { return natural_less(devices[a].name, devices[b].name); });
  return out;
}

bool has_active_port(const DeviceDescription& device, uint8_t port_num) {
  for (const auto& p : device.ports)
    if (p.port_num == port_num && p.state == IBV_PORT_ACTIVE)
      return true;
  return false;
}

Result<size_t> select_device(const std::vector<DeviceDescription>& devices, const std::string& name,
                             uint8_t port_num, int local_rank) {
  if (devices.empty())
    return Error(ErrorCode::kNoDevice,
                 std::string("no RDMA device found (ibv_get_device_list returned no devices). ") +
                     kNoDeviceHint);
  if (!name.empty()) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i].name != name)
        continue;
      for (const auto& p : devices[i].ports)
        if (p.port_num == port_num)
          return i;
      return Error(ErrorCode::kDeviceNotFound, "RDMA device '" + name + "' has no port " +
                                                   std::to_string(port_num) +
                                                   "; devices: " + describe_devices(devices));
    }
    return Error(ErrorCode::kDeviceNotFound,
                 "RDMA device '" + name + "' not found; devices: " + describe_devices(devices));
  }
  auto candidates = default_device_candidates(devices, port_num);
  if (!candidates.empty())
    return candidates[local_rank < 0 ? 0 : static_cast<size_t>(local_rank) % candidates.size()];
  return Error(ErrorCode::kDeviceNotFound, "no RDMA device has an ACTIVE port " +
                                               std::to_string(port_num) +
                                               "; devices: " + describe_devices(devices));
}

}  // namespace caf_rdma
