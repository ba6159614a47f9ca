// PCIe proximity between a GPU and RDMA NICs, read from sysfs: each device's sysfs path
// (/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0) is its place in the PCIe tree, and the
// distance of two devices is the number of hops from each up to their deepest common bridge.
// GPUDirect traffic is fastest through the closest NIC (same switch < same root complex <
// across the CPU interconnect). No CUDA and no ibverbs here: names and bus ids in, ranks out.
#pragma once

#include <string>
#include <vector>

namespace caf_rdma {

/// Hops between two sysfs device paths through their deepest common ancestor; -1 when either
/// path is empty.
int pcie_distance(const std::string& a, const std::string& b);

/// The PCI devices a transfer between the devices at sysfs paths `a` and `b` passes through: the
/// ancestors of each up to their deepest common one (that one once, where both paths meet), in
/// order from `a` to `b`, as sysfs paths; the endpoints themselves and the host bridge
/// ("pci0000:00") are not included. Empty when either path is empty or no PCI device is shared.
std::vector<std::string> pcie_path_bridges(const std::string& a, const std::string& b);

/// `id` in sysfs's spelling of a PCI address, "dddd:bb:dd.f" in lower-case hex with a domain of
/// at least 4 digits: accepts what CUDA ("0000:3B:00.0"), nvidia-smi ("00000000:3B:00.0") and
/// lspci ("3b:00.0", domain 0) print; "" when `id` is not a PCI address.
std::string normalize_pci_bus_id(const std::string& id);

/// The resolved sysfs path of PCI device `bus_id` (any spelling normalize_pci_bus_id accepts), or
/// "" when it is unknown.
std::string pci_device_path(const std::string& sysfs_root, const std::string& bus_id);

/// The NUMA node sysfs gives for the device at `device_path` (its `numa_node` file); -1 when
/// unknown (no file, or a single-node machine's -1).
int pci_numa_node(const std::string& device_path);

/// The resolved sysfs path of the PCI function behind RDMA device `name`, or "" for a device
/// that is not on PCI (Soft-RoCE's rxe, siw).
std::string rdma_device_path(const std::string& sysfs_root, const std::string& name);

struct NicRank {
  std::string name;
  int distance = -1;       ///< PCIe hops to the GPU; -1 when not on PCI (ranked last)
  bool same_root = false;  ///< under the GPU's PCIe root complex (host bridge)
  bool same_numa = false;  ///< on the GPU's NUMA node (both known)
};

/// `nics` ordered for GPUDirect traffic from the PCI device `gpu_bus_id`: first those under
/// the GPU's root complex, then those on its NUMA node (another root complex of the same
/// socket), then the rest (across the CPU interconnect); within each, closest first, equal
/// distances by name; NICs without a PCI path last (by name). PCIe hops alone cannot tell a
/// NIC on another root complex of the GPU's socket from one on the other socket.
std::vector<NicRank> rank_nics_by_distance(const std::string& sysfs_root,
                                           const std::string& gpu_bus_id,
                                           const std::vector<std::string>& nics);

}  // namespace caf_rdma
