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

/// The resolved sysfs path of PCI device `bus_id` ("0000:3b:00.0"), or "" when it is unknown.
std::string pci_device_path(const std::string& sysfs_root, const std::string& bus_id);

/// The resolved sysfs path of the PCI function behind RDMA device `name`, or "" for a device
/// that is not on PCI (Soft-RoCE's rxe, siw).
std::string rdma_device_path(const std::string& sysfs_root, const std::string& name);

struct NicRank {
  std::string name;
  int distance = -1;  ///< PCIe hops to the GPU; -1 when not on PCI (ranked last)
};

/// `nics` ordered by distance to the PCI device `gpu_bus_id`: closest first, equal distances
/// by name, NICs without a PCI path last (by name).
std::vector<NicRank> rank_nics_by_distance(const std::string& sysfs_root,
                                           const std::string& gpu_bus_id,
                                           const std::vector<std::string>& nics);

}  // namespace caf_rdma
