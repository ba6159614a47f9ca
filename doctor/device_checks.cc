#include "doctor/device_checks.h"

#include "doctor/sysfs_gids.h"
#include "primitives/device_list.h"
#include "primitives/gid.h"

namespace caf_rdma::doctor {

namespace {

const char* const kPortDownFix =
    "bring the link up: the port's interface (`ip link set DEV up`, `rdma link show`), cable and "
    "switch port for a NIC (`ibstat`), a subnet manager on InfiniBand (`opensm`)";
const char* const kNoAddressFix =
    "give the port's network interface an IP address (`ip addr add 10.0.0.1/24 dev DEV`) on the "
    "network the peers are on; or name the entry or interface to use (CAF_RDMA_GID_INDEX, "
    "CAF_RDMA_NETDEV)";

std::string describe_gid(const GidEntry& e) {
  return "GID[" + std::to_string(e.index) + "] " + to_string(e.gid) + " " + to_string(e.type) +
         (e.netdev.empty() ? "" : " on " + e.netdev);
}

/// The GID lines of one active port; true when the port has a GID caf-rdma would use.
bool check_port_gids(const HostView& host, const DeviceDescription& device, const PortInfo& port,
                     const IbverbsConfig& config, Findings& out) {
  std::string where = device.name + " port " + std::to_string(port.port_num);
  auto table = read_gid_table(host.sysfs_root, device.name, port.port_num, port.is_ethernet);
  for (const auto& e : table)
    out.push_back(info(where + " " + describe_gid(e)));
  auto chosen = select_gid_index(table, port.is_ethernet, config.gid_index, where, config.netdev);
  if (!chosen.ok()) {
    out.push_back(fail(where + " has no usable GID: " + chosen.error().message(), kNoAddressFix));
    return false;
  }
  for (const auto& e : table) {
    if (e.index != *chosen)
      continue;
    std::string what = where + " would use " + describe_gid(e);
    if (port.is_ethernet && is_link_local(e.gid))
      out.push_back(warn(what + ": only a link-local address, which peers on other hosts "
                                "cannot route to (the interface has no IP address)",
                         kNoAddressFix));
    else
      out.push_back(ok(what));
  }
  return true;
}

}  // namespace

std::vector<std::string> check_devices(const HostView& host, const IbverbsConfig& config,
                                       Findings& out) {
  std::vector<std::string> usable;
  if (!host.devices_error.empty()) {
    out.push_back(fail("cannot list the RDMA devices: " + host.devices_error,
                       "check that rdma-core (libibverbs1) and the device's provider are "
                       "installed and that /dev/infiniband is usable"));
    return usable;
  }
  if (host.devices.empty()) {
    out.push_back(fail("no RDMA device (ibv_get_device_list lists none)", kNoDeviceHint));
    return usable;
  }
  for (const auto& d : host.devices) {
    if (d.ports.empty()) {
      out.push_back(fail(d.name + ": cannot be opened or has no port",
                         "check the driver's messages (`dmesg | grep -i " + d.name +
                             "`) and /dev/infiniband's permissions"));
      continue;
    }
    for (const auto& p : d.ports) {
      std::string what = d.name + " port " + std::to_string(p.port_num) + ": " +
                         ibv_port_state_str(p.state) + ", active MTU " +
                         std::to_string(mtu_bytes(p.active_mtu)) + ", link layer " +
                         (p.is_ethernet ? "Ethernet (RoCE)" : "InfiniBand") +
                         (d.on_pci ? "" : ", software device (not on PCI)");
      bool wanted = p.port_num == config.port_num &&
                    (config.device_name.empty() || config.device_name == d.name);
      if (p.state != IBV_PORT_ACTIVE) {
        out.push_back(wanted ? warn(what, kPortDownFix) : info(what));
        continue;
      }
      out.push_back(ok(what));
      if (check_port_gids(host, d, p, config, out) && wanted)
        usable.push_back(d.name);
    }
  }
  if (usable.empty())
    out.push_back(fail("no RDMA device has port " + std::to_string(config.port_num) +
                           " ACTIVE with a usable GID" +
                           (config.device_name.empty() ? "" : " among " + config.device_name),
                       "see the lines above: bring a port up and give its interface an address"));
  return usable;
}

void check_device_choice(const HostView& host, const IbverbsConfig& config, Findings& out) {
  if (host.devices.empty())
    return;
  std::string port = " port " + std::to_string(config.port_num);
  if (!config.device_name.empty()) {
    auto chosen = select_device(host.devices, config.device_name, config.port_num);
    if (chosen.ok())
      out.push_back(ok(std::string("device choice: every process takes ") + config.device_name +
                       port + " (" + kEnvDevice + ")"));
    else
      out.push_back(
          fail("device choice: " + chosen.error().message(),
               std::string("set ") + kEnvDevice + " to a device listed above, or unset it"));
    return;
  }
  auto candidates = default_device_candidates(host.devices, config.port_num);
  if (candidates.empty()) {
    auto chosen = select_device(host.devices, "", config.port_num);
    out.push_back(
        fail("device choice: " + (chosen.ok() ? std::string("none") : chosen.error().message()),
             kPortDownFix));
    return;
  }
  std::string ranks;
  for (size_t r = 0; r < candidates.size(); ++r) {
    auto chosen = select_device(host.devices, "", config.port_num, static_cast<int>(r));
    if (chosen.ok())
      ranks +=
          (ranks.empty() ? "" : ", ") + std::to_string(r) + " -> " + host.devices[*chosen].name;
  }
  std::string what =
      "device choice (" + port.substr(1) + ", " + kEnvDevice + " unset): local rank " + ranks;
  if (candidates.size() > 1)
    what += " (rank r takes the (r mod " + std::to_string(candidates.size()) + ")-th)";
  what += "; a process without a local rank takes " + host.devices[candidates[0]].name;
  if (config.local_rank >= 0) {
    auto mine = select_device(host.devices, "", config.port_num, config.local_rank);
    if (mine.ok())
      what += "; this shell's local rank " + std::to_string(config.local_rank) + " takes " +
              host.devices[*mine].name;
  }
  out.push_back(ok(what));
}

}  // namespace caf_rdma::doctor
