#include "primitives/pcie_topology.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>

namespace caf_rdma {

namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos)
      slash = path.size();
    if (slash > at)
      out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return out;
}

std::string resolve(const std::string& link) {
  char buf[PATH_MAX];
  if (::realpath(link.c_str(), buf) == nullptr)
    return "";
  return buf;
}

}  // namespace

int pcie_distance(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty())
    return -1;
  auto x = components(a), y = components(b);
  size_t common = 0;
  while (common < x.size() && common < y.size() && x[common] == y[common])
    ++common;
  return static_cast<int>((x.size() - common) + (y.size() - common));
}

std::string pci_device_path(const std::string& sysfs_root, const std::string& bus_id) {
  if (bus_id.empty())
    return "";
  return resolve(sysfs_root + "/bus/pci/devices/" + bus_id);
}

std::string rdma_device_path(const std::string& sysfs_root, const std::string& name) {
  std::string path = resolve(sysfs_root + "/class/infiniband/" + name + "/device");
  // Software devices point at a network device or nowhere; only PCI functions count.
  if (path.empty() || path.find("/virtual/") != std::string::npos || components(path).empty() ||
      components(path).back().find(':') == std::string::npos)
    return "";
  return path;
}

std::vector<NicRank> rank_nics_by_distance(const std::string& sysfs_root,
                                           const std::string& gpu_bus_id,
                                           const std::vector<std::string>& nics) {
  std::string gpu = pci_device_path(sysfs_root, gpu_bus_id);
  std::vector<NicRank> out;
  out.reserve(nics.size());
  for (const auto& n : nics)
    out.push_back(NicRank{n, pcie_distance(gpu, rdma_device_path(sysfs_root, n))});
  std::sort(out.begin(), out.end(), [](const NicRank& a, const NicRank& b) {
    int da = a.distance < 0 ? INT_MAX : a.distance;
    int db = b.distance < 0 ? INT_MAX : b.distance;
    return da != db ? da < db : a.name < b.name;
  });
  return out;
}

}  // namespace caf_rdma
