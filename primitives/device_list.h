// DeviceList: RAII owner of ibv_get_device_list's array, and device/port selection.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "primitives/status.h"

namespace caf_rdma {

/// The message every "no RDMA device" error ends with: where to get one.
extern const char* const kNoDeviceHint;

/// A port's state, as `ibv_query_port` reports it.
struct PortInfo {
  uint8_t port_num = 1;
  ibv_port_state state = IBV_PORT_NOP;
  bool is_ethernet = false;  ///< link layer Ethernet (RoCE), else InfiniBand
  ibv_mtu active_mtu = IBV_MTU_1024;
  ibv_mtu max_mtu = IBV_MTU_1024;
  uint16_t lid = 0;
  uint32_t max_msg_sz = 0;
  int gid_tbl_len = 0;
};

/// A PortInfo from what ibv_query_port returned for port `port_num`.
PortInfo port_info_from(const ibv_port_attr& attr, uint8_t port_num);

/// Name and ports of one device, enough to choose among devices.
struct DeviceDescription {
  std::string name;
  std::vector<PortInfo> ports;
  bool on_pci = true;  ///< false for software devices (rxe, siw): no PCI function in sysfs
};

/// True when `device` has port `port_num` in state ACTIVE.
bool has_active_port(const DeviceDescription& device, uint8_t port_num);

/// The devices a process may take by default: those whose port `port_num` is ACTIVE, devices on
/// PCI (hardware) only when there is any, in natural name order (mlx5_2 before mlx5_10).
/// Indexes into `devices`.
std::vector<size_t> default_device_candidates(const std::vector<DeviceDescription>& devices,
                                              uint8_t port_num);

/// Chooses a device: by `name` when it is not empty (it must exist and have port `port_num`);
/// else among default_device_candidates: the first, or with `local_rank` >= 0 (this process's
/// rank among those of its host) the (local_rank mod n)-th, so the processes of a node with
/// several NICs spread over them instead of all sharing the first. Returns its index in
/// `devices`. Errors: kNoDevice (empty list, with kNoDeviceHint), kDeviceNotFound (naming what
/// exists and each port's state).
Result<size_t> select_device(const std::vector<DeviceDescription>& devices, const std::string& name,
                             uint8_t port_num, int local_rank = -1);

/// Owns the array from ibv_get_device_list. Contexts opened from it stay valid after it dies.
class DeviceList {
public:
  /// Lists the host's devices. An empty list is not an error here (see `select_device`).
  static Result<DeviceList> get();

  DeviceList(DeviceList&& other) noexcept;
  DeviceList& operator=(DeviceList&& other) noexcept;
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  ~DeviceList();

  size_t size() const { return static_cast<size_t>(count_); }
  bool empty() const { return count_ == 0; }
  ibv_device* at(size_t i) const { return devices_[i]; }
  std::string name(size_t i) const;
  std::vector<std::string> names() const;

  /// Describes every device (opens each briefly to query its ports). A device that cannot be
  /// opened is listed with no ports.
  std::vector<DeviceDescription> describe() const;

private:
  DeviceList(ibv_device** devices, int count) : devices_(devices), count_(count) {}

  ibv_device** devices_ = nullptr;
  int count_ = 0;
};

}  // namespace caf_rdma
